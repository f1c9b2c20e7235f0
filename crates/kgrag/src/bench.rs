//! `kgrag bench`: build one index for a dataset, run every requested method on every question, and write
//! the comparison report (design §6).
//!
//! What the figures mean:
//! - **recall@k**: fraction of a question's gold passages among the first k retrieved (exact `title\ntext`
//!   match), averaged over questions, failed questions counting 0.
//! - **latency**: wall time of one `retrieve` call, query embedding included, reader excluded. Query
//!   embeddings go through the response cache like everything else: on a first run they are model calls,
//!   on a rerun cache hits (and a method that embeds the query like an earlier method — HippoRAG 2's passage
//!   query after `dense` — hits the cache in the same run). Quote first-run figures for end-to-end latency.
//! - **context tokens**: o200k tokens of the reader context each method builds (its top `qa_top_k`
//!   passages in the `Wikipedia Title:` frame).
//! - **index stages**: seconds per stage; with a warm cache the embedding stages measure cache reads.
//! - `dense` embeds the query with `[dense] query_instruction`, HippoRAG 2 with
//!   `[hipporag] query_instruction_passage` (same default); keep them equal so that HippoRAG 2's fallback is
//!   the dense baseline.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kgrag_dense::DenseRetriever;
use kgrag_eval::{Dataset, ExtractionSource, MethodAccumulator, QuestionResult, Report};
use kgrag_graph_store::EmbeddingStore;
use kgrag_hipporag::{FilterMode, HippoIndex, HippoRetriever, IndexProgress};
use kgrag_hirag::{BaseSource, HiragRetriever, Mode};
use kgrag_leanrag::{G0Source, LeanragRetriever};
use kgrag_llm::{build_chat, build_embedder, ManagedChatModel, ManagedEmbedder, ResponseCache};
use kgrag_openie::{read_openie_file, run_extraction, ExtractionStore, RunnerConfig};
use kgrag_text::{ChunkerConfig, Encoding, ExtractiveSummarizer};
use kgrag_types::{
    ChatModel, ChunkId, EmbedKind, Embedder, Extraction, Extractor, RetrievalRequest, Retriever,
};

use crate::config::{Config, OpenIeMode, ReaderMode};
use crate::{KgragError, Result};

/// Methods `kgrag bench` can run today, in report order.
pub const METHODS: &[&str] = &[
    "dense",
    "hipporag2",
    "hirag",
    "hirag-local",
    "hirag-global",
    "hirag-bridge",
    "hirag-nobridge",
    "leanrag",
];

/// Method names of the report contract that later issues add (none left).
pub const PLANNED_METHODS: &[&str] = &[];

/// The dataset used when none is named and `musique-100` is not present.
pub const FALLBACK_DATASET: &str = "kgrag-fixture";

/// The arguments of `kgrag bench`.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchArgs {
    /// Dataset name; `None`: `musique-100` when its files are under `data_dir`, else the fixture.
    pub dataset: Option<String>,
    /// Methods to run (empty: all of [`METHODS`]).
    pub methods: Vec<String>,
    /// Only the first `limit` questions.
    pub limit: Option<usize>,
    /// Keep only the passages the selected questions list (CI-sized runs; see
    /// [`Dataset::restrict_corpus_to_questions`]).
    pub question_corpus: bool,
    /// Output folder (default `target/bench/<dataset>`).
    pub out: Option<PathBuf>,
    /// Configuration file (default: [`Config::default`], offline).
    pub config: Option<PathBuf>,
    /// Where datasets live.
    pub data_dir: PathBuf,
    /// Draw progress bars (on a terminal).
    pub progress: bool,
}

/// What a bench run produced.
#[derive(Debug, Clone)]
pub struct BenchOutcome {
    /// The report.
    pub report: Report,
    /// Where `report.json` was written.
    pub path: PathBuf,
}

fn methods_of(args: &BenchArgs) -> Result<Vec<String>> {
    if args.methods.is_empty() {
        return Ok(METHODS.iter().map(|m| (*m).to_owned()).collect());
    }
    let mut out: Vec<String> = Vec::new();
    for m in &args.methods {
        let m = m.trim();
        if METHODS.contains(&m) {
            if !out.iter().any(|o| o == m) {
                out.push(m.to_owned());
            }
        } else if PLANNED_METHODS.contains(&m) {
            return Err(KgragError::Config(format!(
                "method {m:?} is not implemented yet; available: {}",
                METHODS.join(", ")
            )));
        } else {
            return Err(KgragError::Config(format!(
                "unknown method {m:?}; available: {}",
                METHODS.join(", ")
            )));
        }
    }
    Ok(out)
}

/// Chooses the dataset: the named one, else `musique-100` if all its files are present, else the fixture.
pub fn choose_dataset(args: &BenchArgs, notes: &mut Vec<String>) -> Result<String> {
    if let Some(d) = &args.dataset {
        return Ok(d.clone());
    }
    let manifest = kgrag_eval::manifest("musique-100")?;
    let dir = args.data_dir.join(&manifest.dir);
    let present = manifest.files.values().all(|f| dir.join(&f.path).is_file());
    if present {
        Ok("musique-100".to_owned())
    } else {
        notes.push(format!(
            "musique-100 is not under {} (set KGRAG_DATA_DIR; published at {}); using the bundled {FALLBACK_DATASET}",
            args.data_dir.display(),
            manifest.source
        ));
        Ok(FALLBACK_DATASET.to_owned())
    }
}

/// Progress of one stage: a bar on a terminal, else nothing until a one-line summary.
struct Stages {
    show: bool,
    bar: Option<ProgressBar>,
    secs: BTreeMap<String, f64>,
}

impl Stages {
    fn new(show: bool) -> Self {
        Self {
            show,
            bar: None,
            secs: BTreeMap::new(),
        }
    }

    fn bar(&self, total: usize, prefix: &str) -> ProgressBar {
        let bar = if self.show {
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        let style =
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(prefix.to_owned());
        bar.enable_steady_tick(Duration::from_millis(250));
        bar
    }

    fn record(&mut self, stage: &str, secs: f64) {
        *self.secs.entry(stage.to_owned()).or_insert(0.0) += secs;
        eprintln!("kgrag: {stage:<16} {secs:>9.2} s");
    }
}

impl IndexProgress for Stages {
    fn start(&mut self, stage: &str, total: usize) {
        self.bar = Some(self.bar(total, stage));
    }

    fn advance(&mut self, n: usize) {
        if let Some(b) = &self.bar {
            b.inc(n as u64);
        }
    }

    fn finish(&mut self, stage: &str, secs: f64) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        self.record(stage, secs);
    }
}

/// Runs the bench. See the module docs.
pub async fn run(args: &BenchArgs) -> Result<BenchOutcome> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let methods = methods_of(args)?;
    let mut notes = Vec::new();
    let mut stages = Stages::new(args.progress);

    // Dataset.
    let t = Instant::now();
    let name = choose_dataset(args, &mut notes)?;
    let mut dataset = kgrag_eval::load(&name, &args.data_dir)?;
    if let Some(n) = args.limit {
        dataset = dataset.limit(n);
    }
    if args.question_corpus {
        let dropped = dataset.restrict_corpus_to_questions();
        notes.push(format!(
            "--question-corpus: {} passages listed by the {} questions kept, {dropped} dropped; figures are not \
             comparable with full-corpus runs",
            dataset.passages.len(),
            dataset.questions.len()
        ));
    }
    if dataset.questions.is_empty() {
        return Err(KgragError::Config(format!(
            "dataset {name} has no questions to run"
        )));
    }
    stages.record("load", t.elapsed().as_secs_f64());

    // Models: one cache for responses and embeddings.
    std::fs::create_dir_all(&config.cache_dir).map_err(|source| KgragError::Io {
        path: config.cache_dir.clone(),
        source,
    })?;
    let cache = ResponseCache::open(config.cache_dir.join("responses.redb"))?;
    let embedder: Arc<dyn ManagedEmbedder> = build_embedder(&config.embedder, Some(cache.clone()))?;
    let chat: Option<Arc<dyn ManagedChatModel>> = match &config.chat {
        Some(c) => Some(build_chat(c, Some(cache.clone()))?),
        None => None,
    };

    // Passages, de-duplicated by content (HippoRAG keys passages by their text).
    let mut seen = HashSet::new();
    let passages: Vec<(ChunkId, String)> = dataset
        .passages
        .iter()
        .map(|p| (p.chunk_id(), p.content()))
        .filter(|(id, _)| seen.insert(id.clone()))
        .collect();

    // Extraction: HippoRAG 2's triples, also HiRAG's base graph with `base = "openie_cache"`.
    let hirag_modes: Vec<Mode> = methods
        .iter()
        .filter_map(|m| Mode::from_method_name(m))
        .collect();
    let want_leanrag = methods.iter().any(|m| m == "leanrag");
    let uses_hirag_base =
        !hirag_modes.is_empty() || (want_leanrag && config.leanrag.g0 == G0Source::Hirag);
    let needs_triples = methods.iter().any(|m| m == "hipporag2")
        || (uses_hirag_base && config.hirag.base == BaseSource::OpenieCache);
    let extractions = if needs_triples {
        let t = Instant::now();
        let ex = extractions_for(
            &dataset,
            &passages,
            &config,
            chat.clone(),
            args.progress,
            &mut notes,
        )
        .await?;
        stages.record("extraction", t.elapsed().as_secs_f64());
        ex
    } else {
        Vec::new()
    };

    // The shared passage store.
    let t = Instant::now();
    let mut store = EmbeddingStore::new("passages");
    let items: Vec<(String, String)> = passages
        .iter()
        .map(|(id, text)| (id.as_str().to_owned(), text.clone()))
        .collect();
    let bar = stages.bar(items.len(), "embed_passages");
    store
        .insert(
            &items,
            embedder.as_ref(),
            config.hipporag.embed_batch,
            |n| bar.inc(n as u64),
        )
        .await?;
    bar.finish_and_clear();
    stages.record("embed_passages", t.elapsed().as_secs_f64());
    let store = Arc::new(store);

    // Trait upcasting: the managed models are shared as plain `Embedder`/`ChatModel` with the methods.
    let embedder_dyn: Arc<dyn Embedder> = embedder.clone();
    let chat_dyn: Option<Arc<dyn ChatModel>> = chat.clone().map(|c| c as Arc<dyn ChatModel>);

    let mut entities = 0u64;
    let mut relations = 0u64;
    let mut hippo_index = None;
    if methods.iter().any(|m| m == "hipporag2") {
        let mut index = HippoIndex::new(store.clone(), config.hipporag.clone());
        let chunks = index.chunks_from_extractions(&passages, &extractions);
        let stats = index
            .insert(&chunks, embedder_dyn.as_ref(), &mut stages)
            .await?;
        entities = index.phrases().len() as u64;
        relations = index.facts().len() as u64;
        eprintln!(
            "kgrag: hipporag2 graph: {} phrases, {} passages, {} facts, {} fact occurrences, {} synonymy directions",
            index.phrases().len(),
            stats.new_passages,
            index.facts().len(),
            stats.fact_occurrences,
            stats.synonymy.accepted
        );
        hippo_index = Some(Arc::new(index));
    }

    let mut hirag_index = None;
    let mut leanrag_index = None;
    if !hirag_modes.is_empty() || want_leanrag {
        let built = crate::graphs::build_graph_indexes(
            crate::graphs::GraphInputs {
                passages: &passages,
                extractions: &extractions,
                config: &config,
                embedder: embedder_dyn.clone(),
                chat: chat_dyn.clone(),
                extractor: None,
                progress: args.progress,
            },
            !hirag_modes.is_empty(),
            want_leanrag,
        )
        .await?;
        for (stage, secs) in &built.stages {
            stages.record(stage, *secs);
        }
        notes.extend(built.notes);
        if hippo_index.is_none() {
            if let Some(index) = &built.hirag {
                entities = index.graph().node_count() as u64;
                relations = index.graph().edges().len() as u64;
            } else if let Some(index) = &built.leanrag {
                entities = index.stats().entities as u64;
                relations = index.stats().base_relations as u64;
            }
        }
        hirag_index = built.hirag.map(Arc::new);
        leanrag_index = built.leanrag.map(Arc::new);
    }

    let index_usage = chat.as_ref().map(|c| c.usage()).unwrap_or_default();

    // Reader.
    let reader = match (config.reader, &chat_dyn) {
        (ReaderMode::Auto, Some(_)) | (ReaderMode::Llm, Some(_)) => ReaderMode::Llm,
        (ReaderMode::Llm, None) => {
            return Err(KgragError::Config(
                "reader = \"llm\" needs a [chat] model".to_owned(),
            ))
        }
        (ReaderMode::Auto, None) => ReaderMode::Extractive,
        (other, _) => other,
    };

    // Methods.
    let mut reports = BTreeMap::new();
    let answer_text = ExtractiveSummarizer::new(embedder_dyn.clone(), Encoding::O200kBase);
    for method in &methods {
        let mut graph_reader = GraphReader::None;
        let retriever: Box<dyn Retriever> = match (method.as_str(), Mode::from_method_name(method))
        {
            ("leanrag", _) => {
                let index = leanrag_index
                    .clone()
                    .ok_or_else(|| KgragError::Config("the LeanRAG index was not built".into()))?;
                graph_reader = GraphReader::Leanrag;
                Box::new(LeanragRetriever::new(index, embedder_dyn.clone()))
            }
            ("dense", _) => Box::new(DenseRetriever::new(
                store.clone(),
                embedder_dyn.clone(),
                config.dense.clone(),
            )),
            (_, Some(mode)) => {
                let index = hirag_index
                    .clone()
                    .ok_or_else(|| KgragError::Config("the HiRAG index was not built".into()))?;
                let r = Arc::new(HiragRetriever::new(index, embedder_dyn.clone(), mode));
                graph_reader = GraphReader::Hirag(r.clone());
                Box::new(r)
            }
            _ => {
                let index = hippo_index.clone().ok_or_else(|| {
                    KgragError::Config("the HippoRAG 2 index was not built".into())
                })?;
                let mut hc = config.hipporag.clone();
                if hc.filter == FilterMode::Llm && chat_dyn.is_none() {
                    notes.push(
                        "hipporag2: no [chat] model configured, so filter = \"none\" (the paper's \"w/o filter\" ablation)"
                            .to_owned(),
                    );
                    hc.filter = FilterMode::None;
                }
                Box::new(HippoRetriever::new(
                    index,
                    embedder_dyn.clone(),
                    chat_dyn.clone(),
                    hc,
                )?)
            }
        };
        let qa_top_k = if method == "dense" {
            config.dense.qa_top_k
        } else {
            config.hipporag.qa_top_k
        };
        let report = run_method(
            retriever.as_ref(),
            &dataset,
            &store,
            &config,
            reader,
            qa_top_k,
            embedder_dyn.as_ref(),
            chat_dyn.as_deref(),
            &graph_reader,
            &answer_text,
            args.progress,
        )
        .await?;
        reports.insert(method.clone(), report);
    }

    let usage = index_usage;
    for (name, m) in &reports {
        if let Some(rate) = m.stats.get("filter_error").filter(|r| **r > 0.0) {
            notes.push(format!(
                "{name}: the recognition filter failed (LLM error or unparsable reply) on {:.1}% of the questions; those fell back to dense retrieval",
                rate * 100.0
            ));
        }
        if let Some(rate) = m.stats.get("reader_failures").filter(|r| **r > 0.0) {
            notes.push(format!(
                "{name}: the reader failed on {:.1}% of the questions (scored as empty answers)",
                rate * 100.0
            ));
        }
    }
    let report = Report {
        dataset: name.clone(),
        questions: dataset.questions.len() as u64,
        config_hash: config.hash(),
        index: kgrag_eval::IndexReport {
            stages: stages
                .secs
                .iter()
                .map(|(k, v)| (k.clone(), kgrag_eval::StageReport { secs: *v }))
                .collect(),
            llm: kgrag_eval::LlmReport {
                calls: usage.calls,
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                cache_hits: usage.cache_hits,
            },
            entities,
            relations,
            passages: passages.len() as u64,
        },
        methods: reports,
        notes,
    };
    report.validate()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("target").join("bench").join(&name));
    let path = report.write(&out)?;
    Ok(BenchOutcome { report, path })
}

/// The graph methods' own readers: their answer prompts, or the extractive answer over the assembled
/// context. `None`: HippoRAG 2's reader over the top passages (dense, HippoRAG 2).
enum GraphReader {
    None,
    Hirag(Arc<HiragRetriever>),
    Leanrag,
}

#[allow(clippy::too_many_arguments)]
async fn run_method(
    retriever: &dyn Retriever,
    dataset: &Dataset,
    store: &EmbeddingStore,
    config: &Config,
    reader: ReaderMode,
    qa_top_k: usize,
    embedder: &dyn Embedder,
    chat: Option<&dyn ChatModel>,
    graph_reader: &GraphReader,
    answer_text: &ExtractiveSummarizer,
    progress: bool,
) -> Result<kgrag_eval::MethodReport> {
    let name = retriever.name().to_owned();
    let stages = Stages::new(progress);
    let bar = stages.bar(dataset.questions.len(), &name);
    let mut acc = MethodAccumulator::new();
    let top_k = config.hipporag.retrieval_top_k.max(20);
    let started = Instant::now();
    let mut failures = Vec::new();
    for q in &dataset.questions {
        let t = Instant::now();
        let result = retriever
            .retrieve(&RetrievalRequest {
                query: q.question.clone(),
                top_k,
            })
            .await;
        let latency_ms = t.elapsed().as_secs_f64() * 1e3;
        let ctx = match result {
            Ok(ctx) => ctx,
            Err(e) => {
                failures.push(format!("{}: {e}", q.id));
                acc.add(&QuestionResult::failure(latency_ms));
                bar.inc(1);
                continue;
            }
        };
        let retrieved: Vec<String> = ctx
            .passages
            .iter()
            .filter_map(|p| store.text_of(p.chunk_id.as_str()))
            .map(str::to_owned)
            .collect();
        let mut result =
            QuestionResult::retrieval(retrieved, q.gold.clone(), ctx.context_tokens, latency_ms);
        result.stats = ctx.stats.clone();
        if matches!(graph_reader, GraphReader::Leanrag) {
            // LeanRAG counts its context in cl100k; o200k too, for comparison with the other methods
            // (counted here, outside the timed call).
            let o200k = Encoding::O200kBase.count(&ctx.rendered).unwrap_or(0);
            result
                .stats
                .insert("context_tokens_o200k".into(), o200k as f64);
        }
        let top: Vec<String> = result.retrieved.iter().take(qa_top_k).cloned().collect();
        let answer = match (reader, chat, graph_reader) {
            (ReaderMode::Llm, Some(chat), GraphReader::Hirag(_)) => Some(
                kgrag_hirag::answer::answer(chat, &ctx, &q.question, &config.hirag.response_type)
                    .await
                    .map_err(|e| e.to_string()),
            ),
            (ReaderMode::Extractive, _, GraphReader::Hirag(h)) => Some(
                kgrag_hirag::answer::extractive_answer(answer_text, h, &ctx, &q.question)
                    .await
                    .map_err(|e| e.to_string()),
            ),
            (ReaderMode::Llm, Some(chat), GraphReader::Leanrag) => Some(
                kgrag_leanrag::answer::answer(chat, &ctx, &q.question, &config.leanrag)
                    .await
                    .map_err(|e| e.to_string()),
            ),
            (ReaderMode::Extractive, _, GraphReader::Leanrag) => Some(
                kgrag_leanrag::answer::extractive_answer(answer_text, &ctx, &q.question)
                    .await
                    .map_err(|e| e.to_string()),
            ),
            (ReaderMode::Llm, Some(chat), GraphReader::None) => {
                let reader_config = kgrag_hipporag::HippoConfig {
                    qa_top_k,
                    ..config.hipporag.clone()
                };
                Some(
                    kgrag_hipporag::qa::answer(chat, &q.question, &top, &reader_config)
                        .await
                        .map(|a| a.answer)
                        .map_err(|e| e.to_string()),
                )
            }
            (ReaderMode::Extractive, _, GraphReader::None) => Some(
                extractive_answer(embedder, &q.question, &top, &config.hipporag)
                    .await
                    .map_err(|e| e.to_string()),
            ),
            _ => None,
        };
        match answer {
            Some(Ok(prediction)) => {
                result = result.with_answer(prediction, q.answers.clone());
                result.stats.insert("reader_failures".into(), 0.0);
            }
            Some(Err(e)) => {
                failures.push(format!("{} (reader): {e}", q.id));
                result = result.with_answer(String::new(), q.answers.clone());
                result.stats.insert("reader_failures".into(), 1.0);
            }
            None => {}
        }
        acc.add(&result);
        bar.inc(1);
    }
    bar.finish_and_clear();
    eprintln!(
        "kgrag: {name:<16} {:>9.2} s for {} questions",
        started.elapsed().as_secs_f64(),
        dataset.questions.len()
    );
    for f in failures.iter().take(5) {
        eprintln!("kgrag: {name}: failed: {f}");
    }
    if failures.len() > 5 {
        eprintln!("kgrag: {name}: … {} failures in all", failures.len());
    }
    Ok(acc.finish())
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
            let s = s.trim();
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
    let v = embedder
        .embed(&sentences, &EmbedKind::Document)
        .await
        .map_err(|e| KgragError::Model(format!("embedding answer sentences: {e}")))?;
    let qv = q.row(0).ok_or_else(|| {
        KgragError::Model("the embedder returned no vector for the question".into())
    })?;
    let norm = |x: &[f32]| x.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
    let qn = norm(qv);
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, row) in v.rows().enumerate() {
        let s: f32 = row.iter().zip(qv).map(|(a, b)| a * b).sum::<f32>() / (norm(row) * qn);
        if s > best.1 {
            best = (i, s);
        }
    }
    Ok(sentences.swap_remove(best.0))
}

/// The triples of every passage: from the dataset's OpenIE cache or inline triples, then — for passages
/// the cache lacks — from the configured extractor.
async fn extractions_for(
    dataset: &Dataset,
    passages: &[(ChunkId, String)],
    config: &Config,
    chat: Option<Arc<dyn ManagedChatModel>>,
    progress: bool,
    notes: &mut Vec<String>,
) -> Result<Vec<Extraction>> {
    let mut by_id: HashMap<ChunkId, Extraction> = HashMap::new();
    match &dataset.extraction {
        ExtractionSource::OpenIeFile(path) => {
            for doc in read_openie_file(path)? {
                by_id
                    .entry(doc.extraction.chunk_id.clone())
                    .or_insert(doc.extraction);
            }
        }
        ExtractionSource::Inline(list) => {
            for e in list {
                by_id.entry(e.chunk_id.clone()).or_insert_with(|| e.clone());
            }
        }
        ExtractionSource::None => {}
    }
    let missing: Vec<&(ChunkId, String)> = passages
        .iter()
        .filter(|(id, _)| !by_id.contains_key(id))
        .collect();
    if !missing.is_empty() {
        let extractor: Box<dyn Extractor> = match (config.openie, chat) {
            (OpenIeMode::CacheOnly, _) => {
                return Err(KgragError::Config(format!(
                    "{} of {} passages of {} have no cached OpenIE triples (first: {}); set openie = \"rules\" \
                     (offline) or openie = \"llm\" with a [chat] model",
                    missing.len(),
                    passages.len(),
                    dataset.name,
                    missing[0].0
                )))
            }
            (OpenIeMode::Rules, _) => Box::new(kgrag_openie::RuleExtractor),
            (OpenIeMode::Llm, Some(chat)) => {
                Box::new(kgrag_openie::HippoOpenIe::new(chat as Arc<dyn ChatModel>))
            }
            (OpenIeMode::Llm, None) => {
                return Err(KgragError::Config(
                    "openie = \"llm\" needs a [chat] model".to_owned(),
                ))
            }
        };
        let chunks =
            crate::graphs::chunk_passages(missing.iter().copied(), ChunkerConfig::hipporag())?;
        let found = extract_chunks(
            extractor.as_ref(),
            &chunks,
            config,
            progress,
            notes,
            "triples",
        )
        .await?;
        for e in found {
            by_id.entry(e.chunk_id.clone()).or_insert(e);
        }
    }
    Ok(passages
        .iter()
        .filter_map(|(id, _)| by_id.remove(id))
        .collect())
}

/// Extracts `chunks` with `extractor` through the resumable runner (the extraction store in the cache
/// folder); chunks that fail get nothing (`what` names it in the note) and a rerun retries them.
pub(crate) async fn extract_chunks(
    extractor: &dyn Extractor,
    chunks: &[kgrag_types::Chunk],
    config: &Config,
    progress: bool,
    notes: &mut Vec<String>,
    what: &str,
) -> Result<Vec<Extraction>> {
    let store = ExtractionStore::open(config.cache_dir.join("extractions.redb"))?;
    let (found, summary) = run_extraction(
        extractor,
        chunks,
        &store,
        &RunnerConfig {
            progress,
            ..RunnerConfig::default()
        },
    )
    .await?;
    if !summary.failed.is_empty() {
        notes.push(format!(
            "extraction failed for {} of {} chunks; they have no {what} (a rerun retries them)",
            summary.failed.len(),
            chunks.len()
        ));
        eprintln!(
            "kgrag: extraction failed for {} chunks (they get no {what}; a rerun retries them)",
            summary.failed.len()
        );
    }
    Ok(found)
}
