//! `hirag`, `hirag-local`, `hirag-global`, `hirag-bridge`, `hirag-nobridge`: HiRAG's five retrieval modes
//! over one index — the base entity graph, the HiIndex summary layers, hierarchical Leiden communities and
//! their reports. An insert or delete rebuilds the index from the stored extractions (nothing is extracted
//! again); unchanged community reports are reused by the hash of their input and LLM summaries come from
//! the response cache, both counted in the index's statistics.

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_hirag::{BaseSource, HiragIndex, HiragRetriever, Mode};
use kgrag_types::{RetrievedContext, Retriever};

use super::{json, Built, Change, Corpus, Counts, Env, Handoff, Method, MethodIndex};
use crate::config::{Config, ReaderMode};
use crate::{KgragError, Result};

pub(crate) struct Hirag;

/// HiRAG's index as the registry holds it (LeanRAG reads its base layer).
pub(crate) struct Index {
    pub(crate) index: Arc<HiragIndex>,
}

const FILE: &str = "hirag.index";

/// HiRAG's settings but `entity_text` (which changes only HiRAG's entity vectors): every key counts —
/// retrieval reads its budgets from the index's own settings — but the log switch, `description_vectors`
/// and `entity_text` as the build applies them. LeanRAG's settings hold these when its G0 is HiRAG's
/// base layer.
pub(super) fn base_settings(config: &Config) -> serde_json::Value {
    let mut v = super::json_without(&config.hirag, &["log_layers", "entity_text"]);
    super::description_vectors_setting(
        &mut v,
        config
            .hirag
            .description_vectors
            .composes(config.chat.is_some()),
        config.hirag.description_vectors,
    );
    v
}

#[async_trait(?Send)]
impl Method for Hirag {
    fn name(&self) -> &'static str {
        "hirag"
    }

    fn strategies(&self) -> &'static [&'static str] {
        &[
            "hirag",
            "hirag-local",
            "hirag-global",
            "hirag-bridge",
            "hirag-nobridge",
        ]
    }

    fn settings(&self, config: &Config) -> serde_json::Value {
        let mut v = base_settings(config);
        // `entity_text` as the build applies it: recorded as `"description"` when the description alone
        // is embedded; absent when the reference's text is (an index built before the key existed, or
        // with a chat model, stays current).
        if !config.hirag.entity_text.with_name(config.chat.is_some()) {
            if let Some(map) = v.as_object_mut() {
                map.insert("entity_text".to_owned(), serde_json::json!("description"));
            }
        }
        v
    }

    fn needs_triples(&self, config: &Config) -> bool {
        config.hirag.base == BaseSource::OpenieCache
    }

    async fn build(
        &self,
        env: &Env,
        corpus: &Corpus,
        handoff: &Handoff,
        previous: Option<Arc<dyn MethodIndex>>,
        _change: &Change,
    ) -> Result<Built> {
        let previous = previous
            .as_ref()
            .and_then(|p| p.as_any().downcast_ref::<Index>())
            .map(|p| p.index.clone());
        let (base, extraction_secs) = crate::graphs::hirag_base(env, corpus).await?;
        let mut stages = vec![("hirag_extraction".to_owned(), extraction_secs)];
        if handoff.wants_g0() {
            // LeanRAG's G0 is this base layer: handed over now, before the hierarchy.
            let t = std::time::Instant::now();
            let g0 = crate::graphs::g0_of_base(&base)?;
            handoff.send_g0(g0);
            stages.push(("leanrag_g0".to_owned(), t.elapsed().as_secs_f64()));
        }
        let mut index = crate::graphs::build_hirag(env, base, previous.as_deref()).await?;
        index.set_entity_vectors_dir(super::entity_vectors_dir(env).as_deref())?;
        stages.extend(index.stats().secs.iter().map(|(k, v)| (k.clone(), *v)));
        Ok(Built {
            index: Box::new(Index {
                index: Arc::new(index),
            }),
            stages,
        })
    }

    fn load(&self, dir: &Path, env: &Env, _corpus: &Corpus) -> Result<Arc<dyn MethodIndex>> {
        let mut index = HiragIndex::load(&dir.join(FILE))?;
        index.set_entity_vectors_dir(super::entity_vectors_dir(env).as_deref())?;
        Ok(Arc::new(Index {
            index: Arc::new(index),
        }))
    }
}

fn mode_of(strategy: &str) -> Result<Mode> {
    Mode::from_method_name(strategy)
        .ok_or_else(|| KgragError::Config(format!("{strategy:?} is not a HiRAG strategy")))
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

    fn retriever(&self, strategy: &str, env: &Env, _corpus: &Corpus) -> Result<Box<dyn Retriever>> {
        Ok(Box::new(HiragRetriever::new(
            self.index.clone(),
            env.embedder.clone(),
            mode_of(strategy)?,
        )))
    }

    async fn answer(
        &self,
        strategy: &str,
        env: &Env,
        _corpus: &Corpus,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>> {
        match (env.reader, &env.chat) {
            (ReaderMode::Llm, Some(chat)) => Ok(Some(
                kgrag_hirag::answer::answer(
                    chat.as_ref(),
                    ctx,
                    question,
                    &env.config.hirag.response_type,
                )
                .await?,
            )),
            (ReaderMode::None, _) => Ok(None),
            _ => {
                let r = HiragRetriever::new(
                    self.index.clone(),
                    env.embedder.clone(),
                    mode_of(strategy)?,
                );
                Ok(Some(
                    kgrag_hirag::answer::extractive_answer(&env.answer_text, &r, ctx, question)
                        .await?,
                ))
            }
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            entities: self.index.graph().node_count() as u64,
            relations: self.index.graph().edges().len() as u64,
        }
    }

    fn stats(&self) -> serde_json::Value {
        json(self.index.stats())
    }

    fn graphml(&self) -> Result<Option<String>> {
        Ok(Some(kgrag_hirag::export::graphml(&self.index)))
    }
}
