//! `hipporag2`: HippoRAG 2 — phrase/fact stores and the phrase–passage graph, facts scored against the
//! query (and filtered by the LLM when one is configured), Personalized PageRank from the seed phrases and
//! passages. Inserts and deletes are incremental (spec §4.6): only new phrases and facts are embedded and
//! scanned for synonyms; deleted chunks take their orphan phrases, facts and edges with them.

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_hipporag::{FilterMode, HippoIndex, HippoRetriever};
use kgrag_types::{RetrievedContext, Retriever};

use super::{json, Built, Change, Corpus, Counts, Env, Handoff, Method, MethodIndex};
use crate::config::Config;
use crate::{KgragError, Result};

pub(crate) struct Hipporag2;

pub(crate) struct Index {
    pub(crate) index: Arc<HippoIndex>,
    stats: serde_json::Value,
}

/// Where HippoRAG 2's fact vectors are kept (`[index] fact_vectors_on_disk`): scratch files under the
/// cache folder, or memory.
fn place_fact_vectors(index: &mut HippoIndex, env: &Env) -> Result<()> {
    let dir = env.cache_dir.join("vectors");
    index.set_fact_vectors_dir(
        env.config
            .index
            .fact_vectors_on_disk
            .then_some(dir.as_path()),
    )?;
    Ok(())
}

/// What an insert (or the first build) added, for `kgrag stats`.
fn insert_stats(change: &str, s: &kgrag_hipporag::InsertStats) -> serde_json::Value {
    serde_json::json!({
        "last_change": change,
        "new_passages": s.new_passages,
        "new_phrases": s.new_phrases,
        "new_facts": s.new_facts,
        "fact_occurrences": s.fact_occurrences,
        "synonymy_accepted": s.synonymy.accepted,
    })
}

#[async_trait(?Send)]
impl Method for Hipporag2 {
    fn name(&self) -> &'static str {
        "hipporag2"
    }

    fn strategies(&self) -> &'static [&'static str] {
        &["hipporag2"]
    }

    fn settings(&self, config: &Config) -> serde_json::Value {
        let h = &config.hipporag;
        serde_json::json!({
            "normalisation": json(&h.normalisation),
            "drop_empty_phrases": h.drop_empty_phrases,
            "synonymy_threshold": h.synonymy_threshold,
            "synonymy_knn_k": h.synonymy_knn_k,
            "synonymy_max_per_node": h.synonymy_max_per_node,
            "synonymy_min_alnum": h.synonymy_min_alnum,
        })
    }

    fn needs_triples(&self, _config: &Config) -> bool {
        true
    }

    async fn build(
        &self,
        env: &Env,
        corpus: &Corpus,
        _handoff: &Handoff,
        previous: Option<Arc<dyn MethodIndex>>,
        change: &Change,
    ) -> Result<Built> {
        let previous = previous
            .as_ref()
            .and_then(|p| p.as_any().downcast_ref::<Index>())
            .map(|p| p.index.clone());
        let mut stages = crate::progress::Stages::new(env.progress, false);
        let (index, stats) = match (previous, change) {
            (Some(prev), Change::Insert(added)) => {
                let mut index = prev.as_ref().clone();
                place_fact_vectors(&mut index, env)?;
                index.set_passages(corpus.passages.clone());
                let (held, asked) = (index.facts().precision(), env.config.hipporag.fact_vectors);
                if held != asked {
                    crate::progress::say(&format!(
                        "note: [hipporag] fact_vectors = {}, but this index's fact store holds {} \
                         vectors: new facts are added as {} (rebuild the index to change it)",
                        json(&asked),
                        json(&held),
                        json(&held)
                    ));
                }
                let wanted: std::collections::HashSet<&kgrag_types::ChunkId> =
                    added.iter().collect();
                let chunks: Vec<(kgrag_types::ChunkId, Arc<str>)> = corpus
                    .chunks
                    .iter()
                    .filter(|(id, _)| wanted.contains(id))
                    .cloned()
                    .collect();
                let prepared = index.chunks_from_extractions(&chunks, &corpus.triples);
                let s = index
                    .insert_owned(prepared, env.embedder.as_ref(), &mut stages)
                    .await?;
                let stats = insert_stats("insert", &s);
                (index, stats)
            }
            (Some(prev), Change::Delete(removed)) => {
                let mut index = prev.as_ref().clone();
                place_fact_vectors(&mut index, env)?;
                let s = index.delete(removed)?;
                index.set_passages(corpus.passages.clone());
                let stats = serde_json::json!({
                    "last_change": "delete",
                    "removed_passages": s.passages,
                    "removed_phrases": s.phrases,
                    "removed_facts": s.facts,
                    "removed_fact_edges": s.fact_edges,
                });
                (index, stats)
            }
            _ => {
                let mut index =
                    HippoIndex::new(corpus.passages.clone(), env.config.hipporag.clone());
                place_fact_vectors(&mut index, env)?;
                let chunks = index.chunks_from_extractions(&corpus.chunks, &corpus.triples);
                let s = index
                    .insert_owned(chunks, env.embedder.as_ref(), &mut stages)
                    .await?;
                crate::progress::say(
                    &format!(
                        "hipporag2 graph: {} phrases, {} passages, {} facts, {} fact occurrences, {} synonymy directions",
                        index.phrases().len(),
                        s.new_passages,
                        index.facts().len(),
                        s.fact_occurrences,
                        s.synonymy.accepted
                    ),
                );
                let stats = insert_stats("build", &s);
                (index, stats)
            }
        };
        let mut index = index;
        index.set_phrase_vectors_dir(super::entity_vectors_dir(env).as_deref())?;
        Ok(Built {
            index: Box::new(Index {
                index: Arc::new(index),
                stats,
            }),
            stages: stages.into_secs(),
        })
    }

    fn load(&self, dir: &Path, env: &Env, corpus: &Corpus) -> Result<Arc<dyn MethodIndex>> {
        let mut index = HippoIndex::load(dir, corpus.passages.clone())?;
        place_fact_vectors(&mut index, env)?;
        index.set_phrase_vectors_dir(super::entity_vectors_dir(env).as_deref())?;
        let stats =
            kgrag_graph_store::persist::load::<String>(&dir.join("stats.json.kg"), "stats", 1)
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or(serde_json::Value::Null);
        Ok(Arc::new(Index {
            index: Arc::new(index),
            stats,
        }))
    }
}

#[async_trait]
impl MethodIndex for Index {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn graphs(&self) -> Result<Vec<(&'static str, kgrag_graph_store::KnowledgeGraph)>> {
        Ok(vec![(kgrag_hipporag::INDEX_FILES[0], self.index.graph()?)])
    }

    fn save(&self, dir: &Path) -> Result<Vec<String>> {
        self.index.save(dir)?;
        kgrag_graph_store::persist::save(
            &dir.join("stats.json.kg"),
            "stats",
            1,
            &self.stats.to_string(),
        )?;
        let mut files = self.index.files();
        files.push("stats.json.kg".into());
        Ok(files)
    }

    fn retriever(
        &self,
        _strategy: &str,
        env: &Env,
        _corpus: &Corpus,
    ) -> Result<Box<dyn Retriever>> {
        let mut hc = env.config.hipporag.clone();
        if hc.filter == FilterMode::Llm && env.chat.is_none() {
            env.note(
                "hipporag2: no [chat] model configured, so filter = \"none\" (the paper's \"w/o filter\" ablation)",
            );
            hc.filter = FilterMode::None;
        }
        Ok(Box::new(HippoRetriever::new(
            self.index.clone(),
            env.embedder.clone(),
            env.chat.clone(),
            hc,
        )?))
    }

    async fn answer(
        &self,
        _strategy: &str,
        env: &Env,
        corpus: &Corpus,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>> {
        super::passage_answer(env, corpus, question, ctx, env.config.hipporag.qa_top_k).await
    }

    fn counts(&self) -> Counts {
        Counts {
            entities: self.index.phrases().len() as u64,
            relations: self.index.facts().len() as u64,
        }
    }

    fn stats(&self) -> serde_json::Value {
        let counts = self.index.graph_counts();
        serde_json::json!({
            "phrases": self.index.phrases().len(),
            "facts": self.index.facts().len(),
            "passages": self.index.chunk_facts().len(),
            "graph_nodes": counts.nodes.values().sum::<usize>(),
            "graph_edges": counts.edge_pairs,
            "graph_packed_bytes": self.index.graph_packed_bytes(),
            "edges_by_kind": json(counts),
            "last_build": self.stats,
        })
    }

    fn graphml(&self) -> Result<Option<String>> {
        Ok(Some(kgrag_graph_store::graphml::to_graphml(
            &self.index.graph()?,
            self.index.config().graph_weights.weighting(),
        )))
    }
}

impl From<serde_json::Error> for KgragError {
    fn from(e: serde_json::Error) -> Self {
        KgragError::Config(format!("JSON: {e}"))
    }
}
