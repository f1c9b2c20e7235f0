//! The method registry: every retrieval method the facade can index, save, load and query.
//!
//! A method is one file of this folder implementing [`Method`] (its name, the query strategies it serves,
//! the settings its index depends on, how it builds, updates and loads) and [`MethodIndex`] (how its index
//! is saved, queried and read). [`registry`] lists them in build order — a later method may reuse an
//! earlier one's index (LeanRAG's G0 is HiRAG's base layer) — and the index's writer and generations
//! iterate it. Methods hand each other what they share through a build's [`Handoff`]. Adding a method is one new file, its `mod` line and one line in [`registry`], its names in
//! [`crate::config::METHOD_NAMES`] and [`crate::config::STRATEGIES`] (a test checks that they agree with the
//! registry), and its settings section in the configuration (see `docs/architecture.md`).

use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_types::{ChunkId, EmbedKind, Embedder, RetrievedContext, Retriever};

use crate::config::{Config, ReaderMode};
use crate::{KgragError, Result};

mod dense;
mod hipporag2;
mod hirag;
mod leanrag;

pub use crate::config::METHOD_NAMES;
pub use crate::env::{Corpus, Env};

/// Every method, in build order.
pub fn registry() -> Vec<Box<dyn Method>> {
    vec![
        Box::new(dense::Dense),
        Box::new(hipporag2::Hipporag2),
        Box::new(hirag::Hirag),
        Box::new(leanrag::Leanrag),
    ]
}

/// HiRAG's index inside a registry entry (`None` for another method's).
pub fn hirag_index(index: &dyn MethodIndex) -> Option<&kgrag_hirag::HiragIndex> {
    index
        .as_any()
        .downcast_ref::<hirag::Index>()
        .map(|i| i.index.as_ref())
}

/// LeanRAG's index inside a registry entry (`None` for another method's).
pub fn leanrag_index(index: &dyn MethodIndex) -> Option<&kgrag_leanrag::LeanragIndex> {
    index
        .as_any()
        .downcast_ref::<leanrag::Index>()
        .map(|i| i.index.as_ref())
}

/// HippoRAG 2's index inside a registry entry (`None` for another method's).
pub fn hippo_index(index: &dyn MethodIndex) -> Option<&kgrag_hipporag::HippoIndex> {
    index
        .as_any()
        .downcast_ref::<hipporag2::Index>()
        .map(|i| i.index.as_ref())
}

/// Every query strategy, in report order (a method's strategies follow its place in [`registry`]).
pub fn strategies() -> Vec<&'static str> {
    registry()
        .iter()
        .flat_map(|m| m.strategies().iter().copied())
        .collect()
}

/// The method serving `strategy`.
pub fn method_of(strategy: &str) -> Option<Box<dyn Method>> {
    registry()
        .into_iter()
        .find(|m| m.strategies().contains(&strategy))
}

/// What changed since the previous build, for methods that update incrementally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A build from nothing.
    Full,
    /// These chunks were added to the corpus.
    Insert(Vec<ChunkId>),
    /// These chunks left the corpus.
    Delete(Vec<ChunkId>),
}

/// What the methods of one build hand each other: LeanRAG's G0 (`g0 = "hirag"`), which HiRAG's build sends
/// as soon as its base layer stands, so LeanRAG need not wait for HiRAG's hierarchy and reports (with a chat
/// model the two then build at the same time) nor make the base layer a second time.
pub struct Handoff {
    wanted: bool,
    g0: std::sync::Mutex<Option<kgrag_leanrag::BaseGraph>>,
    /// Set once HiRAG's build has ended (sent or not).
    closed: std::sync::atomic::AtomicBool,
    ready: tokio::sync::Notify,
}

impl Handoff {
    /// A handoff for a build of `methods` with `config`: G0 is handed over when the build makes both HiRAG
    /// and LeanRAG and LeanRAG's G0 is HiRAG's base layer.
    pub fn new(config: &Config, methods: &[String]) -> Self {
        let has = |m: &str| methods.iter().any(|x| x == m);
        Self {
            wanted: has("hirag")
                && has("leanrag")
                && config.leanrag.g0 == kgrag_leanrag::G0Source::Hirag,
            g0: std::sync::Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
            ready: tokio::sync::Notify::new(),
        }
    }

    /// Whether LeanRAG's build takes its G0 from HiRAG's build.
    pub fn wants_g0(&self) -> bool {
        self.wanted
    }

    /// HiRAG's build hands over G0.
    pub fn send_g0(&self, g0: kgrag_leanrag::BaseGraph) {
        if let Ok(mut slot) = self.g0.lock() {
            *slot = Some(g0);
        }
        self.ready.notify_one();
    }

    /// HiRAG's build has ended: a LeanRAG build still waiting stops waiting.
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.ready.notify_one();
    }

    /// G0 from HiRAG's build, waiting for it while HiRAG builds; `None` when this build hands none over
    /// (LeanRAG then makes HiRAG's base layer itself).
    pub async fn take_g0(&self) -> Option<kgrag_leanrag::BaseGraph> {
        if !self.wanted {
            return None;
        }
        loop {
            if let Some(g0) = self.g0.lock().ok().and_then(|mut slot| slot.take()) {
                return Some(g0);
            }
            if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                return None;
            }
            self.ready.notified().await;
        }
    }
}

/// A built index with its stage times.
pub struct Built {
    /// The index.
    pub index: Box<dyn MethodIndex>,
    /// Seconds per stage.
    pub stages: Vec<(String, f64)>,
}

/// Entities and relations of a method's graph (for reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Entity (phrase) nodes.
    pub entities: u64,
    /// Relations (facts).
    pub relations: u64,
}

/// One retrieval method. See the module docs.
#[async_trait(?Send)]
pub trait Method: Send + Sync {
    /// The method's name (its folder in an index directory), e.g. `hipporag2`.
    fn name(&self) -> &'static str;

    /// The query strategies it serves, e.g. HiRAG's five modes.
    fn strategies(&self) -> &'static [&'static str];

    /// The settings its index depends on: an index built with other values is stale.
    fn settings(&self, config: &Config) -> serde_json::Value;

    /// Whether it needs the corpus's OpenIE triples.
    fn needs_triples(&self, config: &Config) -> bool;

    /// Builds (or updates) the index. `handoff` carries what the build's other methods share with it
    /// (they may be building at the same time); `previous` is this method's index before `change` (for
    /// incremental updates and reuse).
    async fn build(
        &self,
        env: &Env,
        corpus: &Corpus,
        handoff: &Handoff,
        previous: Option<Arc<dyn MethodIndex>>,
        change: &Change,
    ) -> Result<Built>;

    /// Loads an index saved in `dir` by [`MethodIndex::save`]; embeds and rebuilds nothing.
    fn load(&self, dir: &Path, env: &Env, corpus: &Corpus) -> Result<Arc<dyn MethodIndex>>;
}

/// A method's built index. See the module docs.
#[async_trait]
pub trait MethodIndex: Send + Sync {
    /// For methods that reuse another's index.
    fn as_any(&self) -> &dyn Any;

    /// Writes the index's files into `dir` (created by the caller); returns their names.
    fn save(&self, dir: &Path) -> Result<Vec<String>>;

    /// A retriever for `strategy` (one of the method's strategies).
    fn retriever(&self, strategy: &str, env: &Env, corpus: &Corpus) -> Result<Box<dyn Retriever>>;

    /// The answer to `question` from `ctx` with the configured reader (`None` with `reader = "none"`).
    async fn answer(
        &self,
        strategy: &str,
        env: &Env,
        corpus: &Corpus,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>>;

    /// Entities and relations.
    fn counts(&self) -> Counts;

    /// What the build made and cost, for `kgrag stats`.
    fn stats(&self) -> serde_json::Value;

    /// The graphs among the files [`save`](Self::save) writes, by file name: a database backend stores
    /// them as node and edge rows instead of a file (and rebuilds the file from the rows on load). Each
    /// is a copy: an index may hold its graph packed.
    fn graphs(&self) -> Result<Vec<(&'static str, kgrag_graph_store::KnowledgeGraph)>> {
        Ok(Vec::new())
    }

    /// The graph as GraphML, for methods that have a graph (`Ok(None)` for the others).
    fn graphml(&self) -> Result<Option<String>> {
        Ok(None)
    }
}

/// `description_vectors` in a method's settings as the build applies it: left out when descriptions are
/// embedded whole (so an index built before the key existed, or with a chat model, stays current), else
/// `"sentences"` or `"all_sentences"` (`auto` resolved).
fn description_vectors_setting(
    settings: &mut serde_json::Value,
    composes: bool,
    vectors: kgrag_text::DescriptionVectors,
) {
    if let Some(map) = settings.as_object_mut() {
        if composes {
            let name = if vectors.composes_entities() {
                "all_sentences"
            } else {
                "sentences"
            };
            map.insert("description_vectors".to_owned(), serde_json::json!(name));
        } else {
            map.remove("description_vectors");
        }
    }
}

/// The settings an index with `methods` depends on.
pub fn settings(config: &Config, methods: &[&str]) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    // The embedder's keys that change its vectors (not where its files are, its batch, its limits or prices).
    out.insert(
        "embedder".to_owned(),
        json_without(
            &config.embedder,
            &[
                "model_dir",
                "limits",
                "batch_size",
                "api_key_env",
                "price_per_million_input",
                "price_per_million_output",
            ],
        ),
    );
    out.insert("chunking".to_owned(), json(&config.index.chunking));
    out.insert("openie".to_owned(), json(&config.openie));
    for m in registry() {
        if methods.contains(&m.name()) {
            out.insert(m.name().to_owned(), m.settings(config));
        }
    }
    out
}

/// HippoRAG 2's QA reader (also the dense baseline's) or the offline kit's extractive answer over the top
/// `qa_top_k` passages of `ctx`.
pub(crate) async fn passage_answer(
    env: &Env,
    corpus: &Corpus,
    question: &str,
    ctx: &RetrievedContext,
    qa_top_k: usize,
) -> Result<Option<String>> {
    let top: Vec<String> = ctx
        .passages
        .iter()
        .filter_map(|p| corpus.passages.text_of(p.chunk_id.as_str()))
        .take(qa_top_k)
        .map(str::to_owned)
        .collect();
    match (env.reader, &env.chat) {
        (ReaderMode::Llm, Some(chat)) => {
            let reader_config = kgrag_hipporag::HippoConfig {
                qa_top_k,
                ..env.config.hipporag.clone()
            };
            let a =
                kgrag_hipporag::qa::answer(chat.as_ref(), question, &top, &reader_config).await?;
            Ok(Some(a.answer))
        }
        (ReaderMode::Extractive, _) | (ReaderMode::Llm, None) | (ReaderMode::Auto, _) => Ok(Some(
            extractive_answer(env.embedder.as_ref(), question, &top, &env.config.hipporag).await?,
        )),
        (ReaderMode::None, _) => Ok(None),
    }
}

/// The offline kit's extractive answer for HippoRAG 2 (spec §10): the single sentence of the top passages
/// with the highest cosine to the passage-instruction query vector (ties: first sentence).
pub async fn extractive_answer(
    embedder: &dyn Embedder,
    question: &str,
    passages: &[String],
    config: &kgrag_hipporag::HippoConfig,
) -> Result<String> {
    let mut sentences: Vec<String> = Vec::new();
    for p in passages {
        let body = p.split_once('\n').map_or(p.as_str(), |(_, text)| text);
        for s in kgrag_openie::rules::sentences(body) {
            // Markdown structure of a document read from a file: headings and table rows are not
            // sentences, a list item's dash is not part of it.
            let s = s.trim().trim_start_matches("- ").trim();
            if s.starts_with('#') || s.starts_with('|') || s.starts_with("```") {
                continue;
            }
            if !s.is_empty() && !sentences.iter().any(|x| x == s) {
                sentences.push(s.to_owned());
            }
        }
    }
    if sentences.is_empty() {
        return Ok(String::new());
    }
    let q = embedder
        .embed(
            &[question.to_owned()],
            &EmbedKind::Query {
                instruction: Some(config.query_instruction_passage.clone()),
            },
        )
        .await
        .map_err(|e| KgragError::Model(format!("embedding the question: {e}")))?;
    // Embedded shortest first, so that each batch pads to similar lengths; scored in sentence order.
    let mut order: Vec<usize> = (0..sentences.len()).collect();
    order.sort_by_key(|&i| (sentences[i].len(), i));
    let by_length: Vec<String> = order.iter().map(|&i| sentences[i].clone()).collect();
    let v = embedder
        .embed(&by_length, &EmbedKind::Document)
        .await
        .map_err(|e| KgragError::Model(format!("embedding answer sentences: {e}")))?;
    let qv = q.row(0).ok_or_else(|| {
        KgragError::Model("the embedder returned no vector for the question".into())
    })?;
    let norm = |x: &[f32]| x.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
    let qn = norm(qv);
    let mut scores = vec![f32::NEG_INFINITY; sentences.len()];
    for (&i, row) in order.iter().zip(v.rows()) {
        scores[i] = row.iter().zip(qv).map(|(a, b)| a * b).sum::<f32>() / (norm(row) * qn);
    }
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, &s) in scores.iter().enumerate() {
        if s > best.1 {
            best = (i, s);
        }
    }
    Ok(sentences.swap_remove(best.0))
}

/// Where the methods keep their entity vectors once an index is built or loaded (`[index]
/// entity_vectors_on_disk`): scratch files under the cache folder, or memory.
pub(crate) fn entity_vectors_dir(env: &Env) -> Option<std::path::PathBuf> {
    env.config
        .index
        .entity_vectors_on_disk
        .then(|| env.cache_dir.join("vectors"))
}

/// `serde_json::to_value` that cannot fail on our plain data (errors become a string value).
pub(crate) fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_else(|e| serde_json::Value::String(e.to_string()))
}

/// [`json`] of `value` without the top-level keys `drop` (settings that do not shape an index).
pub(crate) fn json_without<T: serde::Serialize>(value: &T, drop: &[&str]) -> serde_json::Value {
    let mut v = json(value);
    if let Some(map) = v.as_object_mut() {
        for k in drop {
            map.remove(*k);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_serves_the_configured_names() {
        let names: Vec<&str> = registry().iter().map(|m| m.name()).collect();
        assert_eq!(names, METHOD_NAMES);
        assert_eq!(strategies(), crate::config::STRATEGIES);
    }

    #[test]
    fn hirag_entity_text_counts_as_the_build_applies_it() {
        let key = |c: &Config| settings(c, &["hirag"])["hirag"].get("entity_text").cloned();
        // Offline, `auto` embeds the description alone: recorded, so an index embedded the other way is
        // stale.
        assert_eq!(
            key(&Config::default()),
            Some(serde_json::json!("description"))
        );
        // With a chat model, or `name_description`, the reference's text: no key, as in indexes built
        // before the setting existed.
        let chat = Config::parse(
            "[chat]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n",
        )
        .unwrap();
        assert_eq!(key(&chat), None);
        let reference = Config::parse("[hirag]\nentity_text = \"name_description\"\n").unwrap();
        assert_eq!(key(&reference), None);
        // `description` is recorded with a chat model too.
        let forced = Config::parse(
            "[chat]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n\
             [hirag]\nentity_text = \"description\"\n",
        )
        .unwrap();
        assert_eq!(key(&forced), Some(serde_json::json!("description")));
        // LeanRAG's settings hold HiRAG's (its G0), but not this key: LeanRAG's index does not depend on it.
        let lean = &settings(&Config::default(), &["leanrag"])["leanrag"];
        assert!(lean.pointer("/hirag/base").is_some(), "{lean}");
        assert_eq!(lean.pointer("/hirag/entity_text"), None);
    }

    #[test]
    fn description_vectors_count_as_the_build_applies_them() {
        let key = |c: &Config, m: &str| {
            settings(c, &[m])[m]
                .pointer(if m == "hirag" {
                    "/description_vectors"
                } else {
                    "/leanrag/description_vectors"
                })
                .cloned()
        };
        // Offline, `auto` composes: recorded as "sentences".
        let offline = Config::default();
        assert_eq!(key(&offline, "hirag"), Some(serde_json::json!("sentences")));
        assert_eq!(
            key(&offline, "leanrag"),
            Some(serde_json::json!("sentences"))
        );
        // With a chat model, or `text`, descriptions are embedded whole: no key, as in indexes built before
        // the setting existed.
        let chat = Config::parse(
            "[chat]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n",
        )
        .unwrap();
        assert_eq!(key(&chat, "hirag"), None);
        assert_eq!(key(&chat, "leanrag"), None);
        let text = Config::parse(
            "[hirag]\ndescription_vectors = \"text\"\n[leanrag]\ndescription_vectors = \"text\"\n",
        )
        .unwrap();
        assert_eq!(key(&text, "hirag"), None);
        assert_eq!(key(&text, "leanrag"), None);
        // LeanRAG's aggregates as seeds: only `all_sentences` composes them.
        let seeds = Config::parse("[leanrag]\nseed_layers = \"aggregate\"\n").unwrap();
        assert_eq!(key(&seeds, "leanrag"), None);
        let all = Config::parse(
            "[leanrag]\nseed_layers = \"aggregate\"\ndescription_vectors = \"all_sentences\"\n",
        )
        .unwrap();
        assert_eq!(
            key(&all, "leanrag"),
            Some(serde_json::json!("all_sentences"))
        );
    }
}
