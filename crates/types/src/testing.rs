//! Scripted test doubles of every trait, for tests in this and other crates (feature `test-utils`).
//!
//! Each double records what it was asked, so tests can assert on the exact prompts, texts or chunks sent.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::id::ChunkId;
use crate::model::{Chunk, Extraction, RetrievedContext, ScoredChunk};
use crate::traits::{
    ChatModel, ChatRequest, ChatResponse, EmbedKind, Embedder, Embeddings, Extractor, FinishReason,
    RetrievalRequest, Retriever, Summarizer, SummaryRequest, Usage,
};
use crate::{Error, Result};

/// The folder of a model asset for tests: `relative` under `KGRAG_ASSETS` (default: the workspace's
/// `.assets/`, filled by `cargo xtask fetch-assets`). Panics, naming the missing path and how to provide it,
/// when `relative/marker` is not there.
#[allow(clippy::panic)]
pub fn asset_dir(relative: &str, marker: &str) -> PathBuf {
    let root = std::env::var_os("KGRAG_ASSETS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.assets"));
    let dir = root.join(relative);
    if !dir.join(marker).is_file() {
        panic!(
            "model asset {} missing: run `cargo xtask fetch-assets` or set KGRAG_ASSETS",
            dir.join(marker).display()
        );
    }
    dir
}

/// The path of a reference data file for tests: `relative` under `KGRAG_DATA_DIR` (default: the workspace's
/// `datasets/`). When the file is not there the test is skipped: this prints one line naming the missing
/// file, the folder and the command that fetches the dataset, and returns `None` — unless
/// `KGRAG_REQUIRE_DATA` is set (CI sets it), where a missing dataset fails the test instead.
#[allow(clippy::panic)]
#[must_use]
pub fn data_file(relative: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("KGRAG_DATA_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets"));
    let path = dir.join(relative);
    if path.is_file() {
        return Some(path);
    }
    let folder = relative.split('/').next().unwrap_or(relative);
    // The datasets' names for `cargo xtask fetch-data` (their manifests in datasets/*.toml).
    let name = match folder {
        "musique-hipporag" => "musique-100",
        other => other,
    };
    let line = format!(
        "missing test data {} (folder {}): set KGRAG_DATA_DIR to the folder that holds {folder}/, or run \
         `cargo xtask fetch-data {name}`",
        path.display(),
        dir.display()
    );
    if std::env::var_os("KGRAG_REQUIRE_DATA").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{line} (KGRAG_REQUIRE_DATA is set)");
    }
    eprintln!("skipped: {line}");
    None
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another test thread panicked; the data is still usable for recording.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A reply function for [`ScriptedChatModel::with_responder`].
pub type Responder = Arc<dyn Fn(&ChatRequest) -> Result<String> + Send + Sync>;

/// A chat model that answers from a script: a queue of replies, or a function of the request.
///
/// Usage is counted in whitespace-separated words. Once the queue is empty, calls fail with
/// [`Error::Scripted`] naming how many calls were made.
pub struct ScriptedChatModel {
    name: String,
    replies: Mutex<VecDeque<Result<String>>>,
    responder: Option<Responder>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedChatModel {
    /// A model that returns `replies` in order.
    pub fn new<S: Into<String>>(replies: impl IntoIterator<Item = S>) -> Self {
        Self {
            name: "scripted-chat".to_owned(),
            replies: Mutex::new(replies.into_iter().map(|r| Ok(r.into())).collect()),
            responder: None,
            requests: Mutex::new(Vec::new()),
        }
    }

    /// A model whose reply is computed from each request (after any queued replies run out).
    pub fn with_responder(
        responder: impl Fn(&ChatRequest) -> Result<String> + Send + Sync + 'static,
    ) -> Self {
        let mut model = Self::new(Vec::<String>::new());
        model.responder = Some(Arc::new(responder));
        model
    }

    /// Queues a failure as the next reply.
    pub fn push_error(&self, message: impl Into<String>) {
        lock(&self.replies).push_back(Err(Error::Scripted(message.into())));
    }

    /// Queues a reply.
    pub fn push_reply(&self, reply: impl Into<String>) {
        lock(&self.replies).push_back(Ok(reply.into()));
    }

    /// Renames the model (its name goes into cache keys).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// Number of calls received.
    pub fn calls(&self) -> usize {
        lock(&self.requests).len()
    }
}

fn word_count(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

#[async_trait]
impl ChatModel for ScriptedChatModel {
    fn model_name(&self) -> &str {
        &self.name
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let calls = {
            let mut requests = lock(&self.requests);
            requests.push(request.clone());
            requests.len()
        };
        let queued = lock(&self.replies).pop_front();
        let content = match (queued, &self.responder) {
            (Some(reply), _) => reply?,
            (None, Some(responder)) => responder(request)?,
            (None, None) => {
                return Err(Error::Scripted(format!(
                    "chat model has no scripted reply left for call {calls}"
                )))
            }
        };
        let prompt_tokens = request
            .messages
            .iter()
            .map(|m| word_count(&m.content))
            .sum();
        Ok(ChatResponse {
            usage: Usage {
                prompt_tokens,
                completion_tokens: word_count(&content),
            },
            content,
            finish_reason: FinishReason::Stop,
            cached: false,
        })
    }
}

/// A deterministic embedder for tests: the feature-hashed vectors of [`crate::hashing::hashed_vector`]
/// (lower-cased words and character trigrams in `dim` signed buckets, L2-normalised). Texts sharing words get high cosine; identical texts get identical vectors.
/// Query instructions are ignored. It can be told to fail after a number of calls.
pub struct HashingEmbedder {
    dim: usize,
    fail_after_calls: Option<usize>,
    says_instructions_ignored: bool,
    texts: Mutex<Vec<String>>,
    calls: Mutex<usize>,
}

impl HashingEmbedder {
    /// An embedder of dimension `dim` (at least 1).
    pub fn new(dim: usize) -> Self {
        Self {
            dim: dim.max(1),
            fail_after_calls: None,
            says_instructions_ignored: false,
            texts: Mutex::new(Vec::new()),
            calls: Mutex::new(0),
        }
    }

    /// Says that it ignores query instructions ([`Embedder::reads_instructions`] `false`; by default it
    /// ignores them without saying so).
    pub fn saying_instructions_are_ignored(mut self) -> Self {
        self.says_instructions_ignored = true;
        self
    }

    /// Makes every call after the first `calls` fail.
    pub fn fail_after(mut self, calls: usize) -> Self {
        self.fail_after_calls = Some(calls);
        self
    }

    /// Every text embedded, in order.
    pub fn texts(&self) -> Vec<String> {
        lock(&self.texts).clone()
    }

    /// Number of `embed` calls.
    pub fn calls(&self) -> usize {
        *lock(&self.calls)
    }

    /// The vector of one text: [`hashed_vector`](crate::hashing::hashed_vector) with seed 0.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        crate::hashing::hashed_vector(text, self.dim, 0)
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn model_name(&self) -> &str {
        "hashing-embedder"
    }

    fn reads_instructions(&self) -> bool {
        !self.says_instructions_ignored
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    async fn embed(&self, texts: &[String], _kind: &EmbedKind) -> Result<Embeddings> {
        let call = {
            let mut calls = lock(&self.calls);
            *calls += 1;
            *calls
        };
        if self.fail_after_calls.is_some_and(|n| call > n) {
            return Err(Error::Scripted(format!(
                "embedder told to fail at call {call}"
            )));
        }
        lock(&self.texts).extend(texts.iter().cloned());
        let mut data = Vec::with_capacity(texts.len() * self.dim);
        for t in texts {
            data.extend(self.vector(t));
        }
        Embeddings::new(self.dim, data)
    }
}

/// An embedder whose cosines can be read off the text: a constant 0.05 dimension (no zero vectors), then
/// one dimension per keyword counting its case-insensitive occurrences, scaled to unit length (so inner
/// products, as the reference methods' vector stores take them, are cosines). For hand-made indexes whose
/// rankings a test works out.
pub struct UnitKeywordEmbedder {
    words: Vec<&'static str>,
}

impl UnitKeywordEmbedder {
    /// An embedder over `words` (matched as lower-case substrings).
    pub fn new(words: &[&'static str]) -> Self {
        Self {
            words: words.to_vec(),
        }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let lower = text.to_lowercase();
        let mut v = vec![0.05f32];
        v.extend(self.words.iter().map(|w| lower.matches(w).count() as f32));
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect()
    }
}

#[async_trait]
impl Embedder for UnitKeywordEmbedder {
    fn model_name(&self) -> &str {
        "unit-keyword-embedder"
    }

    fn dimension(&self) -> usize {
        self.words.len() + 1
    }

    async fn embed(&self, texts: &[String], _kind: &EmbedKind) -> Result<Embeddings> {
        Embeddings::from_rows(texts.iter().map(|t| self.vector(t)).collect())
    }
}

/// An extractor that returns scripted extractions by chunk id (an empty one for unknown chunks), and can be
/// told to fail on some chunks or after a number of calls.
#[derive(Default)]
pub struct ScriptedExtractor {
    by_chunk: BTreeMap<ChunkId, Extraction>,
    fail_on: Vec<ChunkId>,
    fail_after_calls: Option<usize>,
    seen: Mutex<Vec<ChunkId>>,
}

impl ScriptedExtractor {
    /// An extractor that knows these extractions.
    pub fn new(extractions: impl IntoIterator<Item = Extraction>) -> Self {
        Self {
            by_chunk: extractions
                .into_iter()
                .map(|e| (e.chunk_id.clone(), e))
                .collect(),
            ..Self::default()
        }
    }

    /// Fails whenever asked for this chunk.
    pub fn fail_on(mut self, chunk: ChunkId) -> Self {
        self.fail_on.push(chunk);
        self
    }

    /// Fails on every call after the first `calls`.
    pub fn fail_after(mut self, calls: usize) -> Self {
        self.fail_after_calls = Some(calls);
        self
    }

    /// The chunks asked for, in order.
    pub fn seen(&self) -> Vec<ChunkId> {
        lock(&self.seen).clone()
    }
}

#[async_trait]
impl Extractor for ScriptedExtractor {
    fn fingerprint(&self) -> String {
        "scripted-extractor".to_owned()
    }

    async fn extract(&self, chunk: &Chunk) -> Result<Extraction> {
        let call = {
            let mut seen = lock(&self.seen);
            seen.push(chunk.id.clone());
            seen.len()
        };
        if self.fail_after_calls.is_some_and(|n| call > n) || self.fail_on.contains(&chunk.id) {
            return Err(Error::Scripted(format!(
                "extractor told to fail on {} (call {call})",
                chunk.id
            )));
        }
        Ok(self
            .by_chunk
            .get(&chunk.id)
            .cloned()
            .unwrap_or_else(|| Extraction::empty(chunk.id.clone())))
    }
}

/// A summariser that joins the descriptions with a space and keeps the first `max_tokens` words.
#[derive(Default)]
pub struct ScriptedSummarizer {
    requests: Mutex<Vec<SummaryRequest>>,
}

impl ScriptedSummarizer {
    /// A new summariser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<SummaryRequest> {
        lock(&self.requests).clone()
    }
}

#[async_trait]
impl Summarizer for ScriptedSummarizer {
    fn fingerprint(&self) -> String {
        "scripted-summarizer".to_owned()
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<String> {
        lock(&self.requests).push(request.clone());
        let joined = request.descriptions.join(" ");
        Ok(joined
            .split_whitespace()
            .take(request.max_tokens)
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// A retriever that returns scripted passages per query text (nothing for unknown queries), cut at `top_k`.
pub struct ScriptedRetriever {
    name: String,
    by_query: BTreeMap<String, Vec<ScoredChunk>>,
    queries: Mutex<Vec<RetrievalRequest>>,
}

impl ScriptedRetriever {
    /// A retriever named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            by_query: BTreeMap::new(),
            queries: Mutex::new(Vec::new()),
        }
    }

    /// Scripts the ranking for one query.
    pub fn with_ranking(
        mut self,
        query: impl Into<String>,
        ranking: impl IntoIterator<Item = (ChunkId, f64)>,
    ) -> Self {
        self.by_query.insert(
            query.into(),
            ranking
                .into_iter()
                .map(|(chunk_id, score)| ScoredChunk { chunk_id, score })
                .collect(),
        );
        self
    }

    /// Every request received.
    pub fn queries(&self) -> Vec<RetrievalRequest> {
        lock(&self.queries).clone()
    }
}

#[async_trait]
impl Retriever for ScriptedRetriever {
    fn name(&self) -> &str {
        &self.name
    }

    async fn retrieve(&self, request: &RetrievalRequest) -> Result<RetrievedContext> {
        lock(&self.queries).push(request.clone());
        let passages: Vec<ScoredChunk> = self
            .by_query
            .get(&request.query)
            .map(|r| r.iter().take(request.top_k).cloned().collect())
            .unwrap_or_default();
        Ok(RetrievedContext {
            method: self.name.clone(),
            passages,
            ..RetrievedContext::default()
        })
    }
}

/// A chat model that caps every completion at `max_tokens` (and fixes the seed to 1) before forwarding:
/// real-server tests use it, since a tiny CPU model writes about ten tokens a second.
pub struct CappedChat {
    inner: Arc<dyn ChatModel>,
    max_tokens: u32,
}

impl CappedChat {
    /// Caps `inner`'s completions at `max_tokens`.
    pub fn new(inner: Arc<dyn ChatModel>, max_tokens: u32) -> Self {
        Self { inner, max_tokens }
    }
}

#[async_trait]
impl ChatModel for CappedChat {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let mut r = request.clone();
        r.settings.max_tokens = Some(self.max_tokens);
        r.settings.seed = Some(1);
        self.inner.chat(&r).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Document, Span};
    use crate::traits::Message;

    fn chunk(text: &str) -> Chunk {
        let doc = Document::new(text);
        Chunk {
            id: ChunkId::from_content(text),
            doc_id: doc.id,
            text: text.to_owned(),
            tokens: 1,
            order: 0,
            span: Span::default(),
        }
    }

    #[tokio::test]
    async fn chat_double_replays_then_fails_clearly() {
        let model = ScriptedChatModel::new(["first"]);
        let boxed: Box<dyn ChatModel> = Box::new(model);
        let r = boxed.chat(&ChatRequest::user("one two")).await.unwrap();
        assert_eq!(r.content, "first");
        assert_eq!(r.usage.prompt_tokens, 2);
        let err = boxed.chat(&ChatRequest::user("again")).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("no scripted reply left for call 2"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn chat_double_records_and_responds() {
        let model = ScriptedChatModel::with_responder(|r| {
            Ok(r.messages
                .last()
                .map(|m| m.content.to_uppercase())
                .unwrap_or_default())
        });
        model.push_error("boom");
        assert!(model.chat(&ChatRequest::user("x")).await.is_err());
        let mut req = ChatRequest::user("hello");
        req.messages.insert(0, Message::system("sys"));
        assert_eq!(model.chat(&req).await.unwrap().content, "HELLO");
        assert_eq!(model.requests()[1], req);
        assert_eq!(model.calls(), 2);
    }

    #[tokio::test]
    async fn hashing_embedder_is_deterministic_and_similar_for_shared_words() {
        let e = HashingEmbedder::new(64);
        let texts: Vec<String> = ["Radio City is in India", "Radio City India", "banana bread"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let out = e.embed(&texts, &EmbedKind::Document).await.unwrap();
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let (a, b, c) = (
            out.row(0).unwrap(),
            out.row(1).unwrap(),
            out.row(2).unwrap(),
        );
        assert!((dot(a, a) - 1.0).abs() < 1e-5);
        assert!(
            dot(a, b) > dot(a, c) + 0.3,
            "{} vs {}",
            dot(a, b),
            dot(a, c)
        );
        assert_eq!(e.vector("Radio City is in India"), a.to_vec());
        let failing = HashingEmbedder::new(8).fail_after(1);
        assert!(failing.embed(&texts, &EmbedKind::Document).await.is_ok());
        assert!(failing.embed(&texts, &EmbedKind::Document).await.is_err());
    }

    #[tokio::test]
    async fn extractor_double_scripts_and_fails() {
        let c1 = chunk("one");
        let c2 = chunk("two");
        let mut e1 = Extraction::empty(c1.id.clone());
        e1.triples.push(crate::Triple::new("a", "b", "c"));
        let ex = ScriptedExtractor::new([e1.clone()]).fail_on(c2.id.clone());
        let dyn_ex: &dyn Extractor = &ex;
        assert_eq!(dyn_ex.extract(&c1).await.unwrap(), e1);
        assert!(dyn_ex.extract(&c2).await.is_err());
        assert_eq!(ex.seen(), vec![c1.id, c2.id]);
    }

    #[tokio::test]
    async fn summarizer_and_retriever_doubles() {
        let s = ScriptedSummarizer::new();
        let out = s
            .summarize(&SummaryRequest {
                subject: "X".into(),
                descriptions: vec!["a b c".into(), "d e".into()],
                max_tokens: 4,
                query: None,
            })
            .await
            .unwrap();
        assert_eq!(out, "a b c d");
        let id = ChunkId::from_content("p");
        let r: Arc<dyn Retriever> = Arc::new(
            ScriptedRetriever::new("dense")
                .with_ranking("q", [(id.clone(), 0.9), (id.clone(), 0.1)]),
        );
        let ctx = r
            .retrieve(&RetrievalRequest {
                query: "q".into(),
                top_k: 1,
            })
            .await
            .unwrap();
        assert_eq!(ctx.method, "dense");
        assert_eq!(ctx.passages.len(), 1);
        let none = r
            .retrieve(&RetrievalRequest {
                query: "other".into(),
                top_k: 5,
            })
            .await
            .unwrap();
        assert!(none.passages.is_empty());
    }
}
