//! # kgrag-dense
//!
//! Dense passage retrieval (DPR), the baseline every kgrag method is compared with and HippoRAG 2's
//! fallback: passages are embedded once as `title\ntext` without instruction (an
//! [`EmbeddingStore`](kgrag_graph_store::EmbeddingStore) shared with the other methods), the query with a
//! configurable instruction; passages are ranked by cosine, and the returned scores are min-max normalised
//! over all passages as HippoRAG 2 reports them (best 1.0; ties by store order).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kgrag_dense::{DenseConfig, DenseRetriever};
//! use kgrag_graph_store::EmbeddingStore;
//! use kgrag_types::testing::HashingEmbedder;
//! use kgrag_types::{RetrievalRequest, Retriever};
//!
//! let embedder = Arc::new(HashingEmbedder::new(64));
//! let mut passages = EmbeddingStore::new("passages");
//! let docs = ["Harrow\nHarrow is a river town.", "Ember\nEmber makes lanterns."];
//! let items: Vec<(String, String)> = docs
//!     .iter()
//!     .map(|d| (kgrag_types::ChunkId::from_content(d).as_str().to_owned(), d.to_string()))
//!     .collect();
//! passages.insert(&items, embedder.as_ref(), 32, |_| {}).await?;
//! let dense = DenseRetriever::new(Arc::new(passages), embedder, DenseConfig::default());
//! let ctx = dense.retrieve(&RetrievalRequest { query: "who makes lanterns?".into(), top_k: 1 }).await?;
//! assert_eq!(ctx.passages[0].chunk_id.as_str(), items[1].0);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use kgrag_graph_store::vector::{min_max, top_k_desc};
use kgrag_graph_store::EmbeddingStore;
use kgrag_text::ReaderTokens;
use kgrag_types::{
    ChunkId, EmbedKind, Embedder, RetrievalRequest, RetrievedContext, Retriever, ScoredChunk,
};
use serde::{Deserialize, Serialize};

/// The passage instruction of HippoRAG 2's query embedding (our wording), also used here so that both
/// methods embed the query identically.
pub const PASSAGE_INSTRUCTION: &str = "retrieve documents that answer the question";

/// Errors of dense retrieval.
#[derive(Debug, thiserror::Error)]
pub enum DenseError {
    /// Embedding the query failed.
    #[error("embedding the query failed: {0}")]
    Embed(#[source] kgrag_types::Error),
    /// The passage store rejected the query vector.
    #[error(transparent)]
    Store(#[from] kgrag_graph_store::StoreError),
    /// A store key is not a chunk id.
    #[error("passage store key {0:?} is not a chunk id")]
    BadKey(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, DenseError>;

/// Settings of the dense retriever.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DenseConfig {
    /// Instruction embedded with the query (ignored by embedders without instruction support).
    pub query_instruction: Option<String>,
    /// Passages rendered into the context (the reader's `qa_top_k`).
    pub qa_top_k: usize,
}

impl Default for DenseConfig {
    fn default() -> Self {
        Self {
            query_instruction: Some(PASSAGE_INSTRUCTION.to_owned()),
            qa_top_k: 5,
        }
    }
}

/// Dense passage retrieval over a shared passage store whose keys are chunk ids and texts the passages.
pub struct DenseRetriever {
    passages: Arc<EmbeddingStore>,
    embedder: Arc<dyn Embedder>,
    config: DenseConfig,
    reader_tokens: ReaderTokens,
}

impl DenseRetriever {
    /// A retriever over `passages`, embedding queries with `embedder` (the embedder of the store).
    pub fn new(
        passages: Arc<EmbeddingStore>,
        embedder: Arc<dyn Embedder>,
        config: DenseConfig,
    ) -> Self {
        Self {
            reader_tokens: ReaderTokens::new(passages.len()),
            passages,
            embedder,
            config,
        }
    }

    /// The passage store searched.
    pub fn passages(&self) -> &EmbeddingStore {
        &self.passages
    }

    /// `query` embedded as the search embeds it (with the configured instruction).
    pub async fn query_vector(&self, query: &str) -> Result<Vec<f32>> {
        let kind = EmbedKind::Query {
            instruction: self.config.query_instruction.clone(),
        };
        let q = self
            .embedder
            .embed(&[query.to_owned()], &kind)
            .await
            .map_err(DenseError::Embed)?;
        q.row(0).map(<[f32]>::to_vec).ok_or_else(|| {
            DenseError::Embed(kgrag_types::Error::InvalidInput(
                "the embedder returned no vector for the query".to_owned(),
            ))
        })
    }

    /// The min-max normalised cosine of `query` to every passage, in store order.
    pub async fn scores(&self, query: &str) -> Result<Vec<f64>> {
        if self.passages.is_empty() {
            return Ok(Vec::new());
        }
        Ok(min_max(
            &self.passages.scores(&self.query_vector(query).await?)?,
        ))
    }

    /// The top `top_k` passages of a query already embedded ([`query_vector`](Self::query_vector)).
    pub fn search_vector(&self, query: &[f32], top_k: usize) -> Result<RetrievedContext> {
        let scores = min_max(&self.passages.scores(query)?);
        ranked_context(
            &self.passages,
            &self.reader_tokens,
            &scores,
            top_k,
            self.config.qa_top_k,
            "dense",
        )
    }

    /// A context of passages ranked elsewhere (a database's vector search): `(store row, score)` best
    /// first, rendered for the reader as [`search`](Self::search) renders its own.
    pub fn context_of(&self, hits: &[(usize, f64)]) -> Result<RetrievedContext> {
        context_of_rows(
            &self.passages,
            &self.reader_tokens,
            hits.iter().copied(),
            self.config.qa_top_k,
            "dense",
        )
    }

    /// The top `top_k` passages of `query` as a context.
    pub async fn search(&self, query: &str, top_k: usize) -> Result<RetrievedContext> {
        let scores = self.scores(query).await?;
        ranked_context(
            &self.passages,
            &self.reader_tokens,
            &scores,
            top_k,
            self.config.qa_top_k,
            "dense",
        )
    }
}

/// A context holding the `top_k` passages of `scores` (one per store row, higher is better), best first,
/// with the first `qa_top_k` rendered for a reader and their o200k tokens counted (cached per row in
/// `tokens`, which must be made for `passages`).
pub fn ranked_context(
    passages: &EmbeddingStore,
    tokens: &ReaderTokens,
    scores: &[f64],
    top_k: usize,
    qa_top_k: usize,
    method: &str,
) -> Result<RetrievedContext> {
    let rows = top_k_desc(scores, top_k)
        .into_iter()
        .map(|r| (r, scores[r]));
    context_of_rows(passages, tokens, rows, qa_top_k, method)
}

/// A context of `(store row, score)` in the given order, the first `qa_top_k` rendered for a reader.
fn context_of_rows(
    passages: &EmbeddingStore,
    tokens: &ReaderTokens,
    rows: impl Iterator<Item = (usize, f64)>,
    qa_top_k: usize,
    method: &str,
) -> Result<RetrievedContext> {
    let mut ctx = RetrievedContext {
        method: method.to_owned(),
        ..RetrievedContext::default()
    };
    for (row, score) in rows {
        let key = passages.key(row).unwrap_or_default();
        let chunk_id = ChunkId::parse(key).map_err(|_| DenseError::BadKey(key.to_owned()))?;
        ctx.passages.push(ScoredChunk { chunk_id, score });
    }
    render_context(passages, tokens, &mut ctx, qa_top_k);
    Ok(ctx)
}

/// Fills `rendered` with the first `qa_top_k` passages of `ctx` in the reader's format
/// ([`kgrag_text::titled_passages`]) and `context_tokens` with their o200k token count (cached per row in
/// `tokens`, which must be made for `passages`).
pub fn render_context(
    passages: &EmbeddingStore,
    tokens: &ReaderTokens,
    ctx: &mut RetrievedContext,
    qa_top_k: usize,
) {
    let keys = ctx
        .passages
        .iter()
        .take(qa_top_k)
        .map(|p| p.chunk_id.as_str());
    (ctx.rendered, ctx.context_tokens) = tokens.reader_context(passages.rows_and_texts(keys));
}

#[async_trait]
impl Retriever for DenseRetriever {
    fn name(&self) -> &str {
        "dense"
    }

    async fn retrieve(&self, request: &RetrievalRequest) -> kgrag_types::Result<RetrievedContext> {
        self.search(&request.query, request.top_k)
            .await
            .map_err(|e| kgrag_types::Error::backend("dense retrieval", e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use kgrag_types::testing::HashingEmbedder;

    #[tokio::test]
    async fn ranks_by_cosine_with_min_max_scores() {
        let embedder = Arc::new(HashingEmbedder::new(256));
        let docs = [
            "Aldmoor\nAldmoor is a harbour city of glassblowers.",
            "Bexley Fen\nBexley Fen is a marsh where herons nest.",
            "Corrin\nCorrin trades salt and glass with Aldmoor.",
        ];
        let items: Vec<(String, String)> = docs
            .iter()
            .map(|d| (ChunkId::from_content(d).as_str().to_owned(), d.to_string()))
            .collect();
        let mut store = EmbeddingStore::new("passages");
        store
            .insert(&items, embedder.as_ref(), 2, |_| {})
            .await
            .unwrap();
        let dense = DenseRetriever::new(Arc::new(store), embedder.clone(), DenseConfig::default());
        let ctx = dense
            .retrieve(&RetrievalRequest {
                query: "where do herons nest in the marsh".into(),
                top_k: 2,
            })
            .await
            .unwrap();
        assert_eq!(ctx.method, "dense");
        assert_eq!(ctx.passages.len(), 2);
        assert_eq!(ctx.passages[0].chunk_id.as_str(), items[1].0);
        assert_eq!(ctx.passages[0].score, 1.0);
        assert!(ctx.passages[1].score < 1.0);
        assert!(ctx.rendered.starts_with("Wikipedia Title: Bexley Fen\n"));
        assert!(ctx.context_tokens > 10);
        // The query was embedded as a query with the passage instruction.
        assert_eq!(
            embedder.texts().last().unwrap(),
            "where do herons nest in the marsh"
        );
    }

    #[tokio::test]
    async fn empty_store_gives_empty_context() {
        let embedder = Arc::new(HashingEmbedder::new(8));
        let dense = DenseRetriever::new(
            Arc::new(EmbeddingStore::new("passages")),
            embedder,
            DenseConfig::default(),
        );
        let ctx = dense.search("anything", 5).await.unwrap();
        assert!(ctx.passages.is_empty());
        assert_eq!(ctx.context_tokens, 0);
    }
}
