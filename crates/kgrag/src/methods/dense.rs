//! `dense`: passages ranked by the cosine of their vector to the query's (the naive RAG baseline). Its
//! index is the shared passage store, so it has no files of its own.

use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_dense::DenseRetriever;
use kgrag_types::{RetrievedContext, Retriever};

use super::{json, Built, Change, Corpus, Counts, Env, Method, MethodIndex};
use crate::config::Config;
use crate::Result;

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
