//! The seams between crates: model providers, extractors, summarisers and retrievers.
//!
//! Every trait is object safe (`Box<dyn ChatModel>` is what the facade builds from config) and also usable as
//! a generic bound on hot paths. `Arc<T>` and `Box<T>` of an implementation implement the trait too.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::{Chunk, Extraction, RetrievedContext};
use crate::{Error, Result};

/// Who speaks in a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// System instructions.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// The shape of the reply a chat request asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text.
    #[default]
    Text,
    /// A JSON object (OpenAI's `response_format: {"type": "json_object"}`).
    JsonObject,
}

/// Every generation setting a request may carry. All of them go into response-cache keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationSettings {
    /// Sampling temperature; the methods' default is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Completion length cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Sampling seed, where the provider supports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Reply format.
    #[serde(default)]
    pub response_format: ResponseFormat,
}

/// A chat completion request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Generation settings.
    #[serde(default)]
    pub settings: GenerationSettings,
}

impl ChatRequest {
    /// A request of one user message with default settings.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            messages: vec![Message::user(content)],
            settings: GenerationSettings::default(),
        }
    }
}

/// Token usage of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// Why generation stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Natural end or a stop sequence.
    #[default]
    Stop,
    /// The token cap was hit: the reply may be truncated.
    Length,
    /// Anything else the provider reported.
    Other(String),
}

/// A chat completion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The reply text.
    pub content: String,
    /// Token usage of the call that produced the reply (a cache hit repeats it and sets `cached`).
    pub usage: Usage,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// Whether the reply came from a response cache.
    #[serde(default)]
    pub cached: bool,
}

/// A chat model: OpenAI-compatible servers, Ollama, local models, or a test double.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The model's name as the provider knows it; part of cache keys.
    fn model_name(&self) -> &str;

    /// Runs one chat completion.
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse>;

    /// Runs one chat completion, handing the reply's text to `on_token` piece by piece as the model
    /// generates it (the pieces joined are the returned reply's `content`). Models that cannot stream, and
    /// replies from a cache, hand it over whole once.
    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_token: &TokenSink<'_>,
    ) -> Result<ChatResponse> {
        let reply = self.chat(request).await?;
        on_token(&reply.content);
        Ok(reply)
    }
}

/// Where a streamed reply's pieces go, in order.
pub type TokenSink<'a> = dyn Fn(&str) + Send + Sync + 'a;

/// What a text is embedded as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbedKind {
    /// A passage, entity or fact, embedded without instruction.
    #[default]
    Document,
    /// A query, with the task instruction if the embedder supports one (NV-Embed style); embedders without
    /// instruction support ignore it.
    Query {
        /// The task instruction, e.g. "retrieve documents that answer the question".
        instruction: Option<String>,
    },
}

/// A batch of embeddings: `len` rows of `dim` floats, stored row-major in one buffer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Embeddings {
    dim: usize,
    data: Vec<f32>,
}

impl Embeddings {
    /// Wraps a row-major buffer; fails unless its length is a multiple of `dim` (and `dim > 0`).
    pub fn new(dim: usize, data: Vec<f32>) -> Result<Self> {
        if dim == 0 || !data.len().is_multiple_of(dim) {
            return Err(Error::InvalidInput(format!(
                "embedding buffer of {} floats is not a whole number of rows of dimension {dim}",
                data.len()
            )));
        }
        Ok(Self { dim, data })
    }

    /// Builds from rows; fails if they are empty-dimensional or of unequal length.
    pub fn from_rows(rows: Vec<Vec<f32>>) -> Result<Self> {
        let dim = rows.first().map_or(0, Vec::len);
        if let Some((i, row)) = rows.iter().enumerate().find(|(_, r)| r.len() != dim) {
            return Err(Error::InvalidInput(format!(
                "embedding row {i} has dimension {}, row 0 has {dim}",
                row.len()
            )));
        }
        if rows.is_empty() {
            return Ok(Self::default());
        }
        Self::new(dim, rows.concat())
    }

    /// The dimension (0 for an empty batch built from no rows).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`, if it exists.
    pub fn row(&self, i: usize) -> Option<&[f32]> {
        let start = i.checked_mul(self.dim)?;
        self.data.get(start..start.checked_add(self.dim)?)
    }

    /// Iterates over rows.
    pub fn rows(&self) -> impl Iterator<Item = &[f32]> {
        self.data.chunks_exact(self.dim.max(1))
    }

    /// The row-major buffer.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// Takes the row-major buffer.
    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }
}

/// A text embedder: local MiniLM, OpenAI-compatible servers, Ollama, or a test double.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The model's name; part of embedding-cache keys.
    fn model_name(&self) -> &str;

    /// Dimension of the vectors returned.
    fn dimension(&self) -> usize;

    /// Embeds `texts` in order; returns one row per text.
    async fn embed(&self, texts: &[String], kind: &EmbedKind) -> Result<Embeddings>;

    /// How many [`embed`](Self::embed) calls a caller with many texts may usefully keep in flight at
    /// once: 1 (the default) when calls should go one after another (an in-process model whose call
    /// already uses every core), more for a provider over the network, whose throughput grows with the
    /// requests in flight up to its limit. The vectors never depend on it.
    fn calls_in_flight(&self) -> usize {
        1
    }

    /// Whether a query's [`EmbedKind::Query`] instruction changes its vector (`true`, the default: an
    /// NV-Embed-style model). An embedder that ignores it (MiniLM, the hashing embedder) says `false`, so a
    /// caller that embeds one query under two instructions (HippoRAG 2) embeds it once.
    fn reads_instructions(&self) -> bool {
        true
    }
}

/// Embeds one text as `kind` and returns its vector; an error when the embedder returns no row.
pub async fn embed_one(embedder: &dyn Embedder, text: &str, kind: &EmbedKind) -> Result<Vec<f32>> {
    let rows = embedder.embed(&[text.to_owned()], kind).await?;
    rows.row(0).map(<[f32]>::to_vec).ok_or_else(|| {
        Error::InvalidInput(format!(
            "the embedder {} returned no vector for one text",
            embedder.model_name()
        ))
    })
}

/// The body of a retriever that embeds the query, then builds its context from the vector alone (HiRAG's
/// and LeanRAG's): `embed` gives the query vector, `context` the context for it; their errors become
/// [`Error::Backend`] naming `method`, and the context's stats get `embed_ms`, the embedding's milliseconds.
pub async fn retrieve_by_vector<E1, E2>(
    method: &str,
    embed: impl std::future::Future<Output = std::result::Result<Vec<f32>, E1>>,
    context: impl FnOnce(&[f32]) -> std::result::Result<RetrievedContext, E2>,
) -> Result<RetrievedContext>
where
    E1: Into<crate::BoxError>,
    E2: Into<crate::BoxError>,
{
    let started = std::time::Instant::now();
    let v = embed
        .await
        .map_err(|e| Error::backend(format!("{method} query embedding"), e))?;
    let embed_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut ctx = context(&v).map_err(|e| Error::backend(format!("{method} retrieval"), e))?;
    ctx.stats.insert("embed_ms".into(), embed_ms);
    Ok(ctx)
}

/// Turns chunks into entities, relations and triples.
#[async_trait]
pub trait Extractor: Send + Sync {
    /// A string that changes whenever the extractor's output could change (model, prompts, settings); the
    /// extraction cache is keyed by it together with the chunk id.
    fn fingerprint(&self) -> String;

    /// Extracts one chunk. Unparseable model output is recorded in the diagnostics, not returned as an error;
    /// errors are for failures that produced no result at all (e.g. the model could not be reached).
    async fn extract(&self, chunk: &Chunk) -> Result<Extraction>;
}

/// A request to merge several descriptions of one thing into one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRequest {
    /// What is described: an entity name, a relation `source -> target`, a cluster or community title.
    pub subject: String,
    /// The descriptions to merge, in order.
    pub descriptions: Vec<String>,
    /// Length cap of the summary in tokens.
    pub max_tokens: usize,
    /// A query to focus on, for query-time summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// Writes summaries: an LLM, or the extractive summariser of the offline kit.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// A string that changes whenever the summaries could change.
    fn fingerprint(&self) -> String;

    /// Summarises the descriptions of one subject.
    async fn summarize(&self, request: &SummaryRequest) -> Result<String>;
}

/// A query to a retriever.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetrievalRequest {
    /// The question.
    pub query: String,
    /// How many passages to return at most.
    pub top_k: usize,
}

/// A retrieval method over a built index: dense, HippoRAG 2, HiRAG's modes, LeanRAG.
#[async_trait]
pub trait Retriever: Send + Sync {
    /// The method name used in reports, e.g. `hipporag2`.
    fn name(&self) -> &str;

    /// Retrieves context for one query.
    async fn retrieve(&self, request: &RetrievalRequest) -> Result<RetrievedContext>;
}

macro_rules! forward_impls {
    ($ty:ty) => {
        #[async_trait]
        impl<T: ChatModel + ?Sized> ChatModel for $ty {
            fn model_name(&self) -> &str {
                (**self).model_name()
            }
            async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
                (**self).chat(request).await
            }
            async fn chat_stream(
                &self,
                request: &ChatRequest,
                on_token: &TokenSink<'_>,
            ) -> Result<ChatResponse> {
                (**self).chat_stream(request, on_token).await
            }
        }

        #[async_trait]
        impl<T: Embedder + ?Sized> Embedder for $ty {
            fn model_name(&self) -> &str {
                (**self).model_name()
            }
            fn dimension(&self) -> usize {
                (**self).dimension()
            }
            async fn embed(&self, texts: &[String], kind: &EmbedKind) -> Result<Embeddings> {
                (**self).embed(texts, kind).await
            }
            fn calls_in_flight(&self) -> usize {
                (**self).calls_in_flight()
            }
            fn reads_instructions(&self) -> bool {
                (**self).reads_instructions()
            }
        }

        #[async_trait]
        impl<T: Extractor + ?Sized> Extractor for $ty {
            fn fingerprint(&self) -> String {
                (**self).fingerprint()
            }
            async fn extract(&self, chunk: &Chunk) -> Result<Extraction> {
                (**self).extract(chunk).await
            }
        }

        #[async_trait]
        impl<T: Summarizer + ?Sized> Summarizer for $ty {
            fn fingerprint(&self) -> String {
                (**self).fingerprint()
            }
            async fn summarize(&self, request: &SummaryRequest) -> Result<String> {
                (**self).summarize(request).await
            }
        }

        #[async_trait]
        impl<T: Retriever + ?Sized> Retriever for $ty {
            fn name(&self) -> &str {
                (**self).name()
            }
            async fn retrieve(&self, request: &RetrievalRequest) -> Result<RetrievedContext> {
                (**self).retrieve(request).await
            }
        }
    };
}

// Shared, boxed and borrowed implementations are implementations too (so `Extractor::new(&model)` works).
forward_impls!(Arc<T>);
forward_impls!(Box<T>);
forward_impls!(&T);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_shape_checks() {
        let e = Embeddings::new(2, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e.row(1), Some(&[0.0, 1.0][..]));
        assert_eq!(e.row(2), None);
        assert_eq!(e.rows().count(), 2);
        assert!(Embeddings::new(3, vec![1.0; 4]).is_err());
        assert!(Embeddings::new(0, vec![]).is_err());
        let err = Embeddings::from_rows(vec![vec![1.0, 2.0], vec![1.0]])
            .err()
            .unwrap();
        assert!(err.to_string().contains("row 1 has dimension 1"), "{err}");
        let empty = Embeddings::from_rows(vec![]).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.rows().count(), 0);
    }

    #[test]
    fn request_serialises_every_setting() {
        let mut r = ChatRequest::user("hi");
        r.settings.temperature = Some(0.0);
        r.settings.response_format = ResponseFormat::JsonObject;
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"messages":[{"role":"user","content":"hi"}],"settings":{"temperature":0.0,"response_format":"json_object"}}"#
        );
    }
}
