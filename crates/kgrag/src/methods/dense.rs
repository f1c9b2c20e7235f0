//! `dense`: passages ranked by the cosine of their vector to the query's (the naive RAG baseline). Its
//! index is the shared passage store, so it has no files of its own.

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_dense::DenseRetriever;
use kgrag_graph_store::vector::min_max_scale;
use kgrag_types::{RetrievalRequest, RetrievedContext, Retriever};

use super::{json, Built, Change, Corpus, Counts, Env, Handoff, Method, MethodIndex};
use crate::config::Config;
use crate::env::PassageSearch;
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
        _handoff: &Handoff,
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
                dense: DenseRetriever::new(
                    corpus.passages.clone(),
                    env.embedder.clone(),
                    env.config.dense.clone(),
                ),
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
    /// The same generation in memory: it embeds the query, renders the context, and searches when the
    /// backend cannot.
    dense: DenseRetriever,
}

impl BackendDense {
    async fn search(&self, query: &str, top_k: usize) -> Result<RetrievedContext> {
        let model = |e: kgrag_dense::DenseError| KgragError::Model(e.to_string());
        if self.dense.passages().is_empty() {
            return Ok(RetrievedContext {
                method: "dense".to_owned(),
                ..RetrievedContext::default()
            });
        }
        let q = self.dense.query_vector(query).await.map_err(model)?;
        let found = match self.search.nearest(&q, top_k).await {
            Ok(Some(found)) => found,
            // Removed from the database since it was opened, or the database is unreachable: the same
            // generation's passages are in memory.
            Ok(None) | Err(_) => {
                let mut ctx = self.dense.search_vector(&q, top_k).map_err(model)?;
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
        hits.truncate(top_k);
        self.dense.context_of(&hits).map_err(model)
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
