//! The graph methods' index builders, shared by their registry entries: HiRAG's (its five modes share one)
//! and LeanRAG's, whose base graph G0 is HiRAG's base layer (`[leanrag] g0 = "hirag"`: HiRAG's chunks,
//! extraction, merge and description summaries are made once for both) or LeanRAG's own (`g0 = "native"`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kgrag_hirag::{BaseSource, ChunkRecord, ExtractionMode, HiGraph, HiragBase, HiragIndex};
use kgrag_leanrag::{BaseGraph, BaseNode, G0Source, LeanragIndex};
use kgrag_text::{Chunker, ChunkerConfig, Encoding, ExtractiveSummarizer};
use kgrag_types::{Chunk, ChunkId, Document, Extraction, Extractor};

use kgrag_openie::{run_extraction_kept, ExtractionStore, RunProgress, RunnerConfig};

use crate::config::OpenIeMode;
use crate::env::{Corpus, Env};
use crate::progress::say;
use crate::{KgragError, Result};

/// The chunks of every passage (each passage a document), in passage order.
pub(crate) fn chunk_passages<'a>(
    passages: impl IntoIterator<Item = &'a (ChunkId, std::sync::Arc<str>)>,
    config: ChunkerConfig,
) -> Result<Vec<Chunk>> {
    cut_passages(passages, config, true)
}

/// A method's own windows over the corpus's chunks (each passage cut again with `config`), without the
/// windows that lie wholly inside the window before them. A token window's last start can leave such a
/// tail (a 1,200-token passage cut 1,200/100 gives the whole passage and again its last 100 tokens): at
/// the end of a document the reference keeps it, and the corpus's own chunking kept it there, but every
/// passage cut again would add one per passage.
pub(crate) fn rechunk_passages<'a>(
    passages: impl IntoIterator<Item = &'a (ChunkId, std::sync::Arc<str>)>,
    config: ChunkerConfig,
) -> Result<Vec<Chunk>> {
    cut_passages(passages, config, false)
}

fn cut_passages<'a>(
    passages: impl IntoIterator<Item = &'a (ChunkId, std::sync::Arc<str>)>,
    config: ChunkerConfig,
    keep_tails: bool,
) -> Result<Vec<Chunk>> {
    let chunker = Chunker::new(config)?;
    let mut chunks = Vec::new();
    for (_, text) in passages {
        let mut end = 0;
        for c in chunker.chunk(&Document::new(text.to_string()))? {
            if keep_tails || c.order == 0 || c.span.token_end > end {
                end = c.span.token_end;
                chunks.push(c);
            }
        }
    }
    Ok(chunks)
}

/// HiRAG's chunks (`base = "extract"`): its 1,200/100 windows. A corpus cut in those very windows (the
/// documents' default) is taken as it is — its chunks are the reference's windows, tails at document
/// ends included, and cutting each again would re-tokenise it and could add a tail per passage; any other
/// corpus is cut again by [`rechunk_passages`].
pub(crate) fn hirag_chunks<'a>(
    config: &crate::config::Config,
    passages: impl IntoIterator<Item = &'a (ChunkId, std::sync::Arc<str>)>,
) -> Result<Vec<Chunk>> {
    let window = ChunkerConfig::TokenWindow {
        encoding: Encoding::O200kBase,
        size: config.hirag.chunk_token_size,
        overlap: config.hirag.chunk_overlap,
    };
    if config.index.chunking == window {
        chunk_passages(
            passages,
            ChunkerConfig::Passage {
                encoding: Encoding::O200kBase,
            },
        )
    } else {
        rechunk_passages(passages, window)
    }
}

/// The LLM entity–relation extractor's settings (HiRAG's entity types and gleaning; LeanRAG's native G0
/// uses them too).
pub(crate) fn graphrag_config(hc: &kgrag_hirag::HiragConfig) -> kgrag_openie::GraphRagConfig {
    kgrag_openie::GraphRagConfig {
        entity_types: hc.entity_types.clone(),
        max_gleaning: hc.max_gleaning,
        gleaning: hc.gleaning,
        ..kgrag_openie::GraphRagConfig::default()
    }
}

/// Which of the configured extractors a build extracts with: what a worker of a distributed build needs
/// to make the same one from its own configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ExtractorRole {
    /// The OpenIE extractor of the corpus's triples (`openie`).
    Triples,
    /// The entity–relation extractor (HiRAG's, LeanRAG's native G0), by LLM or by rules.
    Entities {
        /// `extraction = "llm"`.
        llm: bool,
    },
}

/// The extractor of `role` as `env` configures it: for entities, the environment's override if one is
/// set (tests count its calls), else the LLM extractor (HiRAG's entity types and gleaning) with a chat
/// model, else the rule extractor (with a note naming `method` when the LLM was asked for); for triples,
/// HippoRAG 2's OpenIE by `openie`.
pub(crate) fn extractor_for(
    env: &Env,
    role: ExtractorRole,
    method: &str,
) -> Result<Arc<dyn Extractor>> {
    Ok(match role {
        ExtractorRole::Entities { llm } => match (&env.extractor, llm, &env.chat) {
            (Some(e), _, _) => e.clone(),
            (None, true, Some(chat)) => Arc::new(kgrag_openie::GraphRagExtractor::new(
                chat.clone(),
                graphrag_config(&env.config.hirag),
            )),
            (None, true, None) => {
                env.note(format!(
                    "{method}: no [chat] model configured, so extraction = \"rules\" (the offline kit)"
                ));
                Arc::new(kgrag_openie::RuleExtractor)
            }
            (None, false, _) => Arc::new(kgrag_openie::RuleExtractor),
        },
        ExtractorRole::Triples => match (env.config.openie, env.chat.clone()) {
            (OpenIeMode::CacheOnly, _) => {
                return Err(KgragError::Config(
                    "openie = \"cache_only\": chunks without cached OpenIE triples cannot be extracted; set \
                     openie = \"rules\" (offline), \"llm\" (with a [chat] model) or \"auto\""
                        .into(),
                ))
            }
            (OpenIeMode::Rules, _) => Arc::new(kgrag_openie::RuleExtractor),
            (OpenIeMode::Llm, Some(chat)) | (OpenIeMode::Auto, Some(chat)) => {
                Arc::new(kgrag_openie::HippoOpenIe::new(chat))
            }
            (OpenIeMode::Llm, None) => {
                return Err(KgragError::Config(
                    "openie = \"llm\" needs a [chat] model".to_owned(),
                ))
            }
            (OpenIeMode::Auto, None) => {
                env.note(
                    "no [chat] model configured: running offline — triples and entities by the rule \
                     extractor, summaries and answers extractive",
                );
                Arc::new(kgrag_openie::RuleExtractor)
            }
        },
    })
}

/// Extracts `chunks` in the entity–relation form (see [`extractor_for`]).
async fn extract(
    env: &Env,
    chunks: &[Chunk],
    mode: ExtractionMode,
    method: &str,
) -> Result<Vec<Extraction>> {
    let role = ExtractorRole::Entities {
        llm: mode == ExtractionMode::Llm,
    };
    let extractor = extractor_for(env, role, method)?;
    extract_chunks(env, extractor.as_ref(), role, chunks, "entities", &|e| e).await
}

/// G0 from HiRAG's base layer (spec leanrag §4.1): its nodes (`UNKNOWN` endpoints included) and the edges
/// among them, in the graph's order (nodes by name, edges by endpoints), its chunks, and the sentence
/// aliases its descriptions are composed with ([`HiragBase::sentence_aliases`]).
pub(crate) fn g0_of_base(base: &HiragBase) -> Result<BaseGraph> {
    let mut g0 = g0_from_graph(base.graph()?, base.chunks())?;
    g0.sentence_aliases = base.sentence_aliases();
    Ok(g0)
}

/// G0 from a graph of HiRAG's base layer, which it takes apart; `chunks` are the base's chunk records,
/// which the graph's source positions index. Made straight from the graph's nodes and edges, as
/// [`BaseGraph::from_records`] makes it from the graph's entity and relation records (names unique, each
/// entity's sources sorted and unique, self-relations and repeated pairs dropped, the first description
/// kept), their texts moved rather than copied: the records in between held a copy of every base entity
/// and relation with their source lists (~6 MB per 1,000 synthetic passages) at the moment HiRAG's base
/// stood beside its graph, the build's highest.
fn g0_from_graph(g: HiGraph, chunks: &[ChunkRecord]) -> Result<BaseGraph> {
    let chunk_id = |c: u32| chunks.get(c as usize).map(|r| r.id.clone());
    let (nodes, edges) = g.into_parts();
    // Per graph node: its entity's position in G0 (base-layer nodes only).
    let mut entity_of: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut entities: Vec<BaseNode> = Vec::new();
    for (i, n) in nodes.into_iter().enumerate() {
        if n.layer != 0 {
            continue;
        }
        // In name order: a repeated name follows its first.
        if entities.last().is_some_and(|p| p.name == n.name) {
            return Err(kgrag_leanrag::LeanragError::Input(format!(
                "entity {:?} appears twice in G0",
                n.name
            ))
            .into());
        }
        entity_of[i] = Some(entities.len());
        let sources: kgrag_types::VecSet<ChunkId> =
            n.sources.iter().filter_map(|&c| chunk_id(c)).collect();
        entities.push(BaseNode {
            name: n.name,
            entity_type: n.entity_type,
            description: n.description,
            sources: sources.into_iter().collect(),
        });
    }
    let mut seen = HashSet::new();
    let mut relations = Vec::new();
    for e in edges {
        let (Some(&Some(x)), Some(&Some(y))) =
            (entity_of.get(e.a as usize), entity_of.get(e.b as usize))
        else {
            continue;
        };
        if x != y && seen.insert((x.min(y), x.max(y))) {
            relations.push((x, y, e.description));
        }
    }
    Ok(BaseGraph {
        entities,
        relations,
        chunks: chunks
            .iter()
            .map(|c| (c.id.clone(), c.content.clone()))
            .collect(),
        sentence_aliases: Arc::default(),
    })
}

/// HiRAG's base layer of the corpus ([`HiragBase`]: its chunks and extractions — see [`hirag_inputs`] —
/// merged, long descriptions summarised, the base graph), and the seconds its inputs took (extraction).
/// The chunks and extractions are dropped once the base stands.
pub(crate) async fn hirag_base(env: &Env, corpus: &Corpus) -> Result<(HiragBase, f64)> {
    let t = Instant::now();
    let (chunks, extractions) = hirag_inputs(env, corpus).await?;
    let secs = t.elapsed().as_secs_f64();
    let base = HiragBase::new(&chunks, extractions, &hirag_models(env), &hirag_config(env)).await?;
    Ok((base, secs))
}

/// HiRAG's chunks and entity–relation extractions: the corpus's chunks and their OpenIE triples
/// (`base = "openie_cache"`), or HiRAG's own windows of the corpus's chunks, extracted (`base = "extract"`).
pub(crate) async fn hirag_inputs(
    env: &Env,
    corpus: &Corpus,
) -> Result<(Vec<Chunk>, Vec<Extraction>)> {
    let hc = &env.config.hirag;
    Ok(match hc.base {
        BaseSource::OpenieCache => {
            let chunks = chunk_passages(&corpus.chunks, ChunkerConfig::hipporag())?;
            let extractions = kgrag_hirag::openie_extractions_of(
                corpus
                    .triples
                    .iter()
                    .map(|e| (&e.chunk_id, e.triples.as_slice())),
            );
            (chunks, extractions)
        }
        BaseSource::Extract => {
            let chunks = hirag_chunks(&env.config, &corpus.chunks)?;
            let found = extract(env, &chunks, hc.extraction, "hirag").await?;
            (chunks, found)
        }
    })
}

/// HiRAG's models from the environment.
pub(crate) fn hirag_models(env: &Env) -> kgrag_hirag::Models {
    kgrag_hirag::Models {
        embedder: env.embedder.clone(),
        chat: env.chat.clone(),
        cheap_chat: None,
        scratch_dir: scratch_dir(env),
    }
}

/// Where HiRAG's and LeanRAG's builds keep their sentence vectors (`[index] sentence_vectors_on_disk`):
/// a scratch file under the cache folder, or memory.
fn scratch_dir(env: &Env) -> Option<std::path::PathBuf> {
    env.config
        .index
        .sentence_vectors_on_disk
        .then(|| env.cache_dir.join("vectors"))
}

/// Requests the configured chat model keeps in flight (`[chat.limits] concurrency`; `None` without a
/// configured one, e.g. models handed in); a distributed build's coordinator: the jobs it keeps queued.
fn chat_concurrency(env: &Env) -> Option<usize> {
    // A coordinator's calls (chat, and the embeddings of extractive summaries offline) wait in the queue
    // for the workers: as many stages' calls in flight as it keeps queued.
    if let Some(q) = &env.queue {
        return Some(q.in_flight());
    }
    env.config.chat.as_ref().map(|c| c.concurrency())
}

/// `config` with its stage concurrency (read by `get`, written by `set`) raised to the chat model's own
/// limit when that is higher: a build is then bound by the provider, not by a stage's own queue.
/// Concurrency never changes what is built (every stage keeps its input order).
fn at_chat_concurrency<'a, C: Clone>(
    env: &Env,
    config: &'a C,
    get: fn(&C) -> usize,
    set: fn(&mut C, usize),
) -> std::borrow::Cow<'a, C> {
    match chat_concurrency(env) {
        Some(n) if n > get(config) => {
            let mut c = config.clone();
            set(&mut c, n);
            std::borrow::Cow::Owned(c)
        }
        _ => std::borrow::Cow::Borrowed(config),
    }
}

/// The stage concurrency a one-process build runs with and records (see [`at_chat_concurrency`]): a
/// coordinator runs with more but records this.
fn recorded_concurrency(env: &Env, stage: usize) -> usize {
    stage.max(env.config.chat.as_ref().map_or(0, |c| c.concurrency()))
}

/// `[hirag]` as a build runs it (`concurrency` a floor; see [`at_chat_concurrency`]).
pub(crate) fn hirag_config(env: &Env) -> std::borrow::Cow<'_, kgrag_hirag::HiragConfig> {
    at_chat_concurrency(
        env,
        &env.config.hirag,
        |c| c.concurrency,
        |c, n| c.concurrency = n,
    )
}

/// `[leanrag]` as a build runs it (`concurrency` a floor; see [`at_chat_concurrency`]).
pub(crate) fn leanrag_config(env: &Env) -> std::borrow::Cow<'_, kgrag_leanrag::LeanragConfig> {
    at_chat_concurrency(
        env,
        &env.config.leanrag,
        |c| c.concurrency,
        |c, n| c.concurrency = n,
    )
}

/// Builds HiRAG's index on its base layer, reusing the community reports of `previous` and of the cache folder's report
/// file (reports are keyed by the hash of their input), and adds the new reports to that file.
pub(crate) async fn build_hirag(
    env: &Env,
    base: HiragBase,
    previous: Option<&HiragIndex>,
) -> Result<HiragIndex> {
    let reports_file = env.cache_dir.join("hirag-reports.json");
    let mut reuse: HashMap<String, kgrag_hirag::CommunityReport> =
        match std::fs::read(&reports_file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                env.note(format!(
                    "hirag: {} could not be read ({e}); its community reports are written again",
                    reports_file.display()
                ));
                HashMap::new()
            }),
            Err(_) => HashMap::new(),
        };
    if let Some(p) = previous {
        reuse.extend(p.reports_by_hash());
    }
    let mut index = base.finish(&hirag_models(env), &reuse).await?;
    if env.queue.is_some() {
        index.set_recorded_concurrency(recorded_concurrency(env, env.config.hirag.concurrency));
    }
    // Keep the earlier reports too: another corpus cut in the same cache folder reuses its own.
    let mut keep = reuse;
    keep.extend(index.reports_by_hash());
    let keep: std::collections::BTreeMap<_, _> = keep.into_iter().collect();
    let bytes = serde_json::to_vec(&keep)
        .map_err(|e| KgragError::Config(format!("serialising HiRAG reports: {e}")))?;
    std::fs::create_dir_all(&env.cache_dir).map_err(|source| KgragError::Io {
        path: env.cache_dir.clone(),
        source,
    })?;
    kgrag_graph_store::persist::write_atomic(&reports_file, &bytes)?;
    let s = index.stats();
    crate::progress::say(&format!(
        "hirag graph: {} chunks, nodes per layer {:?}, {} relations, {} embedded entities, \
         communities per level {:?}, reports {} written / {} reused {:?}",
        s.chunks,
        s.entities_per_layer,
        s.relations,
        s.embedded_entities,
        s.communities_per_level,
        s.reports_written,
        s.reports_reused,
        s.report_outcomes
    ));
    Ok(index)
}

/// Builds LeanRAG's index: on `g0` (HiRAG's base layer as this build's HiRAG made it, `g0 = "hirag"`), else
/// on HiRAG's base layer made here, or on LeanRAG's own chunking and extraction (`g0 = "native"`). Returns
/// the index and the seconds G0 took here.
pub(crate) async fn build_leanrag(
    env: &Env,
    corpus: &Corpus,
    g0: Option<BaseGraph>,
) -> Result<(LeanragIndex, f64)> {
    let lc = &*leanrag_config(env);
    let t = Instant::now();
    let g0 = match (lc.g0, g0) {
        (G0Source::Hirag, Some(g0)) => g0,
        (G0Source::Hirag, None) => {
            // No HiRAG index is built on this base: it is consumed, its records given back first.
            let (base, _) = hirag_base(env, corpus).await?;
            let (graph, chunks, aliases) = base.into_graph()?;
            let mut g0 = g0_from_graph(graph, &chunks)?;
            g0.sentence_aliases = aliases;
            g0
        }
        (G0Source::Native, _) => {
            // Windows of 1024 cl100k tokens overlapping by 128; each newline run becomes one space.
            let mut chunks = rechunk_passages(&corpus.chunks, ChunkerConfig::leanrag())?;
            for c in &mut chunks {
                c.text = c
                    .text
                    .split(['\n', '\r'])
                    .filter(|p| !p.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            let found = extract(env, &chunks, lc.extraction, "leanrag").await?;
            let text = Arc::new(ExtractiveSummarizer::new(
                env.embedder.clone(),
                Encoding::Cl100kBase,
            ));
            let llm = env
                .chat
                .clone()
                .map(|c| kgrag_hirag::LlmDescriptionSummarizer::new(c, text.clone()));
            let summarizer: &dyn kgrag_types::Summarizer = match &llm {
                Some(l) => l,
                None => text.as_ref(),
            };
            let texts = chunks
                .iter()
                .map(|c| (c.id.clone(), c.text.clone()))
                .collect();
            kgrag_leanrag::native_base_graph(texts, &found, summarizer)
                .await?
                .0
        }
    };
    let g0_secs = t.elapsed().as_secs_f64();
    let models = kgrag_leanrag::Models {
        embedder: env.embedder.clone(),
        chat: env.chat.clone(),
        scratch_dir: scratch_dir(env),
    };
    let mut index = LeanragIndex::build(g0, &models, lc).await?;
    if env.queue.is_some() {
        index.set_recorded_concurrency(recorded_concurrency(env, env.config.leanrag.concurrency));
    }
    let s = index.stats();
    crate::progress::say(&format!(
        "leanrag tree: {} base entities, {} base relations, nodes per layer {:?}, relations by kind \
         {:?}, {} seed vectors",
        s.entities, s.base_relations, s.nodes_per_layer, s.relations_by_kind, s.seed_vectors
    ));
    Ok((index, g0_secs))
}

/// Extracts `chunks` with `extractor` through the resumable runner (the extraction store in the cache
/// folder: a finished chunk is never extracted again); chunks that fail get nothing (`what` names it in
/// the note) and a rerun retries them.
pub(crate) async fn extract_chunks(
    env: &Env,
    extractor: &dyn Extractor,
    role: ExtractorRole,
    chunks: &[kgrag_types::Chunk],
    what: &str,
    keep: &(dyn Fn(Extraction) -> Extraction + Sync),
) -> Result<Vec<Extraction>> {
    let store = ExtractionStore::open(env.cache_dir.join("extractions.redb"))?;
    // Extractions another machine finished for this index (a database backend): into the local store
    // first, so that the run reuses them. A failure here only costs extraction work.
    let fingerprint = extractor.fingerprint();
    let mut shared: HashSet<ChunkId> = HashSet::new();
    let backend = env.store.as_ref().filter(|b| b.shares_extractions());
    if let Some(backend) = backend {
        let mut missing = Vec::new();
        for c in chunks {
            if store.get(&fingerprint, &c.id)?.is_none() {
                missing.push(c.id.clone());
            }
        }
        if !missing.is_empty() {
            let pulled = backend
                .shared_extractions(&fingerprint, &missing)
                .and_then(|found| {
                    if !found.is_empty() {
                        store.put_many(&fingerprint, &found)?;
                    }
                    Ok(found)
                });
            match pulled {
                Ok(found) => {
                    if !found.is_empty() {
                        // Counted among `reused` too: the run finds them in the local store.
                        env.count("shared", found.len() as u64);
                    }
                    shared.extend(found.into_iter().map(|x| x.chunk_id));
                }
                Err(e) => env.note(format!(
                    "could not take the extractions shared in {} ({e}); extracting here",
                    backend.location()
                )),
            }
        }
    }
    // A distributed build: the chunks nobody has extracted go to the workers; the coordinator takes their
    // results as it takes another machine's, and extracts nothing itself.
    let mut given_up: HashSet<ChunkId> = HashSet::new();
    if let (Some(queue), Some(backend)) = (&env.queue, backend) {
        let mut jobs = Vec::new();
        let mut ids = Vec::new();
        for c in chunks {
            if !shared.contains(&c.id) && store.get(&fingerprint, &c.id)?.is_none() {
                jobs.push(crate::env::JobSpec {
                    key: format!("{fingerprint}|{}", c.id),
                    label: what.to_owned(),
                    payload: serde_json::json!({
                        "role": role,
                        "fingerprint": fingerprint,
                        "chunk": c,
                    }),
                });
                ids.push(c.id.clone());
            }
        }
        if !jobs.is_empty() {
            let failed = queue.run("extract", jobs).await?;
            let found = backend.shared_extractions(&fingerprint, &ids)?;
            if !found.is_empty() {
                store.put_many(&fingerprint, &found)?;
                env.count("by_workers", found.len() as u64);
                // The workers' model calls are this build's, as if made here.
                let d = |f: fn(&kgrag_types::Diagnostics) -> u64| -> u64 {
                    found.iter().map(|x| f(&x.diagnostics)).sum()
                };
                queue.account(
                    d(|d| d.llm_calls),
                    d(|d| d.prompt_tokens),
                    d(|d| d.completion_tokens),
                    0,
                );
            }
            shared.extend(found.into_iter().map(|x| x.chunk_id));
            for f in &failed {
                if let Some(id) = f
                    .key
                    .rsplit_once('|')
                    .and_then(|(_, id)| ChunkId::parse(id).ok())
                {
                    given_up.insert(id);
                }
            }
            if !failed.is_empty() && !queue.allow_failed() {
                return Err(crate::distribute::failed_error(&failed));
            }
        }
    }
    let kept_chunks: Vec<kgrag_types::Chunk>;
    let chunks = if given_up.is_empty() {
        chunks
    } else {
        kept_chunks = chunks
            .iter()
            .filter(|c| !given_up.contains(&c.id))
            .cloned()
            .collect();
        &kept_chunks[..]
    };
    let mut counter: Option<Box<dyn crate::progress::Counter>> = None;
    let mut report = |p: RunProgress| match &counter {
        Some(c) => c.inc(1),
        None => {
            counter = Some(crate::progress::counter(
                env.progress,
                p.total,
                "extraction",
            ))
        }
    };
    // `keep` applies as each chunk finishes, unless the whole records are shared afterwards.
    let whole = |e: Extraction| e;
    let (found, summary) = run_extraction_kept(
        extractor,
        chunks,
        &store,
        &RunnerConfig {
            // At least the chat model's requests in flight (the runner's 8 otherwise).
            concurrency: chat_concurrency(env)
                .unwrap_or(0)
                .max(RunnerConfig::default().concurrency),
        },
        &mut report,
        if backend.is_some() { &whole } else { keep },
    )
    .await?;
    if let Some(backend) = backend {
        // Failed chunks are not in `found`: only finished work is shared (the backend uploads what it
        // lacks).
        let new: Vec<Extraction> = found
            .iter()
            .filter(|x| !shared.contains(&x.chunk_id))
            .cloned()
            .collect();
        if let Err(e) = backend.share_extractions(&fingerprint, &new) {
            env.note(format!(
                "could not share the extractions in {} ({e}); other machines extract them again",
                backend.location()
            ));
        }
    }
    env.count("reused", summary.reused as u64);
    env.count("extracted", summary.extracted as u64);
    env.count("failed", (summary.failed.len() + given_up.len()) as u64);
    say(&format!(
        "extraction ({what}): {} chunks, {} from the store, {} extracted, {} failed",
        summary.chunks,
        summary.reused,
        summary.extracted,
        summary.failed.len()
    ));
    if !summary.failed.is_empty() {
        env.note(format!(
            "extraction failed for {} of {} chunks; they have no {what} (a rerun retries them)",
            summary.failed.len(),
            chunks.len()
        ));
    }
    Ok(match backend {
        Some(_) => found.into_iter().map(keep).collect(),
        None => found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A passage of exactly `n` o200k tokens.
    fn passage(n: usize) -> (ChunkId, Arc<str>) {
        let text = format!("start{}", " word".repeat(n - 1));
        assert_eq!(Encoding::O200kBase.count(&text).unwrap(), n);
        (ChunkId::from_content(&text), Arc::from(text))
    }

    #[test]
    fn cutting_a_passage_again_leaves_no_window_inside_the_one_before() {
        let hirag = ChunkerConfig::hirag();
        // A passage in one HiRAG window (the corpus cut in HiRAG's windows): one chunk, not two.
        let one = [passage(1200)];
        assert_eq!(chunk_passages(&one, hirag).unwrap().len(), 2);
        let again = rechunk_passages(&one, hirag).unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(&*again[0].text, &*one[0].1);
        // A longer one keeps every window that reaches further: the same chunks as before.
        for n in [1300, 2500, 3400] {
            let long = [passage(n)];
            let before = chunk_passages(&long, hirag).unwrap();
            let after = rechunk_passages(&long, hirag).unwrap();
            let ids = |c: &[Chunk]| c.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
            let kept: Vec<_> = before
                .iter()
                .filter(|c| c.order == 0 || c.span.token_start + 100 < c.span.token_end)
                .cloned()
                .collect();
            assert_eq!(ids(&after), ids(&kept), "{n} tokens");
        }
    }

    #[test]
    fn a_corpus_cut_in_hirag_windows_is_hirag_s_chunks_as_it_is() {
        // A document of ~5,000 tokens of varied words, cut as the index cuts documents by default.
        let words = [
            "river",
            "Castile",
            "ledger",
            "1871",
            "glassblower",
            "œuvre",
            "—",
            "tariffs",
        ];
        let text: String = (0..5_000)
            .map(|i| words[(i * 7 + i / 3) % words.len()])
            .collect::<Vec<_>>()
            .join(" ");
        let corpus: Vec<(ChunkId, Arc<str>)> = Chunker::new(ChunkerConfig::hirag())
            .unwrap()
            .chunk(&Document::new(text))
            .unwrap()
            .into_iter()
            .map(|c| (c.id, Arc::from(c.text)))
            .collect();
        let mut config = crate::config::Config::default();
        config.index.chunking = ChunkerConfig::hirag();
        let chunks = hirag_chunks(&config, &corpus).unwrap();
        let ids = |c: &[Chunk]| c.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        assert_eq!(
            ids(&chunks),
            corpus.iter().map(|p| p.0.clone()).collect::<Vec<_>>()
        );
        // Cut again, the windows re-tokenise: never fewer chunks, often a tail more per passage.
        let again = chunk_passages(&corpus, ChunkerConfig::hirag()).unwrap();
        assert!(again.len() >= corpus.len());
    }
}
