//! `dense`: passages ranked by the cosine of their vector to the query's (the naive RAG baseline). Its
//! index is the shared passage store, so it has no files of its own.

use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_dense::DenseRetriever;
use kgrag_graph_store::vector::min_max_scale;
use kgrag_graph_store::EmbeddingStore;
use kgrag_text::ReaderTokens;
use kgrag_types::{
    ChunkId, EmbedKind, Embedder, RetrievalRequest, RetrievedContext, Retriever, ScoredChunk,
};

use super::{json, Built, Change, Corpus, Counts, Env, Method, MethodIndex};
use crate::config::Config;
use crate::storage::PassageSearch;
use crate::{KgragError, Result};

pub(crate) struct Dense;

struct DenseIndex;

#[async_trait(?Send)]
impl Method for Dense {
    fn name(&self) -> &'static str {
        "dense"
    }

    fn strategies(&self) -> &'static [&'static str] {
        &["dense"]
    }

    fn settings(&self, _config: &Config) -> serde_json::Value {
        // Query-time keys only ([dense] query_instruction, qa_top_k): the index is the passage store.
        serde_json::Value::Null
    }

    fn needs_triples(&self, _config: &Config) -> bool {
        false
    }

    async fn build(
        &self,
        _env: &Env,
        _corpus: &Corpus,
        _earlier: &BTreeMap<String, Arc<dyn MethodIndex>>,
        _previous: Option<Arc<dyn MethodIndex>>,
        _change: &Change,
    ) -> Result<Built> {
        Ok(Built {
            index: Box::new(DenseIndex),
            stages: Vec::new(),
        })
    }

    fn load(&self, _dir: &Path, _env: &Env, _corpus: &Corpus) -> Result<Arc<dyn MethodIndex>> {
        Ok(Arc::new(DenseIndex))
    }
}

#[async_trait]
impl MethodIndex for DenseIndex {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn save(&self, _dir: &Path) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    fn retriever(&self, _strategy: &str, env: &Env, corpus: &Corpus) -> Result<Box<dyn Retriever>> {
        if let Some(search) = &corpus.search {
            return Ok(Box::new(BackendDense {
                search: search.clone(),
                fallback: DenseRetriever::new(
                    corpus.passages.clone(),
                    env.embedder.clone(),
                    env.config.dense.clone(),
                ),
                tokens: ReaderTokens::new(corpus.passages.len()),
                passages: corpus.passages.clone(),
                embedder: env.embedder.clone(),
                config: env.config.dense.clone(),
            }));
        }
        Ok(Box::new(DenseRetriever::new(
            corpus.passages.clone(),
            env.embedder.clone(),
            env.config.dense.clone(),
        )))
    }

    async fn answer(
        &self,
        _strategy: &str,
        env: &Env,
        corpus: &Corpus,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>> {
        super::passage_answer(env, corpus, question, ctx, env.config.dense.qa_top_k).await
    }

    fn counts(&self) -> Counts {
        Counts::default()
    }

    fn stats(&self) -> serde_json::Value {
        json(&serde_json::json!({}))
    }
}

/// The dense strategy searching the backend's passage vectors (pgvector) instead of the in-memory store.
/// An exact search returns the top k with the range of every passage's cosine, normalised as the in-memory
/// search normalises them (the same ranking; scores equal up to pgvector's float arithmetic); an
/// approximate one (HNSW) returns its top k with their cosines. A generation the backend has since removed,
/// or a database that does not answer, is searched in memory (the passages were loaded with the
/// generation; the context's `backend_fallback` stat says so).
struct BackendDense {
    search: Arc<dyn PassageSearch>,
    /// The in-memory search of the same generation, for when the backend has removed it.
    fallback: DenseRetriever,
    passages: Arc<EmbeddingStore>,
    embedder: Arc<dyn Embedder>,
    config: kgrag_dense::DenseConfig,
    tokens: ReaderTokens,
}

impl BackendDense {
    async fn search(&self, query: &str, top_k: usize) -> Result<RetrievedContext> {
        let mut ctx = RetrievedContext {
            method: "dense".to_owned(),
            ..RetrievedContext::default()
        };
        if self.passages.is_empty() {
            return Ok(ctx);
        }
        let kind = EmbedKind::Query {
            instruction: self.config.query_instruction.clone(),
        };
        let q = self
            .embedder
            .embed(&[query.to_owned()], &kind)
            .await
            .map_err(|e| KgragError::Model(format!("embedding the query: {e}")))?;
        let row = q.row(0).ok_or_else(|| {
            KgragError::Model("the embedder returned no vector for the query".into())
        })?;
        let found = match self.search.nearest(row, top_k).await {
            Ok(Some(found)) => found,
            // Removed from the database since it was opened, or the database is unreachable: the same
            // generation's passages are in memory.
            Ok(None) | Err(_) => {
                let mut ctx = self
                    .fallback
                    .search(query, top_k)
                    .await
                    .map_err(|e| KgragError::Model(e.to_string()))?;
                ctx.stats.insert("backend_fallback".to_owned(), 1.0);
                return Ok(ctx);
            }
        };
        // As the in-memory search scores: f32 cosines, min-max normalised over every passage (an exact
        // search), ties by row; an approximate search's cosines as they are.
        let mut hits: Vec<(usize, f64)> = match found.range {
            Some((lo, hi)) => {
                let (lo, hi) = (f64::from(lo as f32), f64::from(hi as f32));
                found
                    .hits
                    .iter()
                    .map(|&(r, c)| (r, min_max_scale(f64::from(c as f32), lo, hi)))
                    .collect()
            }
            None => found.hits,
        };
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for &(r, score) in hits.iter().take(top_k) {
            let key = self.passages.key(r).unwrap_or_default();
            let chunk_id = ChunkId::parse(key).map_err(|_| {
                KgragError::Index(format!(
                    "passage row {r} has the key {key:?}, not a chunk id"
                ))
            })?;
            ctx.passages.push(ScoredChunk { chunk_id, score });
        }
        kgrag_dense::render_context(&self.passages, &self.tokens, &mut ctx, self.config.qa_top_k);
        Ok(ctx)
    }
}

#[async_trait]
impl Retriever for BackendDense {
    fn name(&self) -> &str {
        "dense"
    }

    async fn retrieve(&self, request: &RetrievalRequest) -> kgrag_types::Result<RetrievedContext> {
        self.search(&request.query, request.top_k)
            .await
            .map_err(|e| kgrag_types::Error::backend("dense retrieval", e))
    }
}
