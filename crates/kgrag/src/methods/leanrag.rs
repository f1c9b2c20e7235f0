//! `leanrag`: LeanRAG — the aggregation tree over G0 (HiRAG's base layer by default, or LeanRAG's own
//! extraction), seed entities by vector, and the lowest-common-ancestor paths between seeds. An insert or
//! delete rebuilds the tree over the updated G0 (aggregates written by an LLM come from the response
//! cache when their input is unchanged).

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_leanrag::{G0Source, LeanragIndex, LeanragRetriever};
use kgrag_types::{RetrievedContext, Retriever};

use super::{json, Built, Change, Corpus, Counts, Env, Handoff, Method, MethodIndex};
use crate::config::{Config, ReaderMode};
use crate::Result;

pub(crate) struct Leanrag;

pub(crate) struct Index {
    pub(crate) index: Arc<LeanragIndex>,
}

const FILE: &str = "leanrag.index";

#[async_trait(?Send)]
impl Method for Leanrag {
    fn name(&self) -> &'static str {
        "leanrag"
    }

    fn strategies(&self) -> &'static [&'static str] {
        &["leanrag"]
    }

    fn settings(&self, config: &Config) -> serde_json::Value {
        let mut lean = super::json_without(&config.leanrag, &["log_layers"]);
        super::description_vectors_setting(
            &mut lean,
            config.leanrag.composes_descriptions(config.chat.is_some()),
            config.leanrag.description_vectors,
        );
        let mut v = serde_json::json!({ "leanrag": lean });
        if config.leanrag.g0 == G0Source::Hirag {
            // G0 is HiRAG's base layer: HiRAG's settings shape it (not `entity_text`: what HiRAG's
            // entity vectors embed changes neither G0 nor LeanRAG's seeds).
            v["hirag"] = super::hirag::base_settings(config);
        }
        v
    }

    fn needs_triples(&self, config: &Config) -> bool {
        config.leanrag.g0 == G0Source::Hirag && super::hirag::Hirag.needs_triples(config)
    }

    async fn build(
        &self,
        env: &Env,
        corpus: &Corpus,
        handoff: &Handoff,
        _previous: Option<Arc<dyn MethodIndex>>,
        _change: &Change,
    ) -> Result<Built> {
        let g0 = handoff.take_g0().await;
        let (mut index, g0_secs) = crate::graphs::build_leanrag(env, corpus, g0).await?;
        index.set_seed_vectors_dir(super::entity_vectors_dir(env).as_deref())?;
        let mut stages = vec![("leanrag_g0".to_owned(), g0_secs)];
        stages.extend(index.stats().secs.iter().map(|(k, v)| (k.clone(), *v)));
        Ok(Built {
            index: Box::new(Index {
                index: Arc::new(index),
            }),
            stages,
        })
    }

    fn load(&self, dir: &Path, env: &Env, _corpus: &Corpus) -> Result<Arc<dyn MethodIndex>> {
        let mut index = LeanragIndex::load(&dir.join(FILE))?;
        index.set_seed_vectors_dir(super::entity_vectors_dir(env).as_deref())?;
        Ok(Arc::new(Index {
            index: Arc::new(index),
        }))
    }
}

#[async_trait]
impl MethodIndex for Index {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn save(&self, dir: &Path) -> Result<Vec<String>> {
        self.index.save(&dir.join(FILE))?;
        Ok(vec![FILE.to_owned()])
    }

    fn retriever(
        &self,
        _strategy: &str,
        env: &Env,
        _corpus: &Corpus,
    ) -> Result<Box<dyn Retriever>> {
        Ok(Box::new(LeanragRetriever::new(
            self.index.clone(),
            env.embedder.clone(),
        )))
    }

    async fn answer(
        &self,
        _strategy: &str,
        env: &Env,
        _corpus: &Corpus,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>> {
        match (env.reader, &env.chat) {
            (ReaderMode::Llm, Some(chat)) => Ok(Some(
                kgrag_leanrag::answer::answer(chat.as_ref(), ctx, question, &env.config.leanrag)
                    .await?,
            )),
            (ReaderMode::None, _) => Ok(None),
            _ => Ok(Some(
                kgrag_leanrag::answer::extractive_answer(&env.answer_text, ctx, question).await?,
            )),
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            entities: self.index.stats().entities as u64,
            relations: self.index.stats().base_relations as u64,
        }
    }

    fn stats(&self) -> serde_json::Value {
        json(self.index.stats())
    }
}
