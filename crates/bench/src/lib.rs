//! # kgrag-bench
//!
//! `kgrag bench` as a library: build one index for a dataset, run every requested method on every question, and write
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
//!
//! Judging ([`judging`]) follows HiRAG's pairwise protocol (both answer orders) and LeanRAG's 1–10 scores
//! with repeats, through any [`ChatModel`].
//!
//! ```no_run
//! # async fn demo() -> kgrag_bench::Result<()> {
//! let mut args = kgrag_bench::BenchArgs::new(kgrag::eval::data_dir());
//! args.dataset = Some("kgrag-fixture".into());
//! args.methods = vec!["dense".into(), "hipporag2".into()];
//! let outcome = kgrag_bench::run(&args).await?;
//! println!("{}", outcome.report.to_markdown());
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use kgrag_eval::{Dataset, ExtractionSource, MethodAccumulator, QuestionResult, Report};
use kgrag_graph_store::EmbeddingStore;
use kgrag_openie::read_openie_file;
use kgrag_text::Encoding;
use kgrag_types::{ChatModel, ChunkId, DocId, Document, Extraction, RetrievalRequest, Retriever};

use kgrag::config::Config;
use kgrag::documents::SourceDoc;
use kgrag::progress::Stages;
use kgrag::{Index, Searcher};

mod error;
pub mod judging;

pub use error::{BenchError, Result};

/// Methods (query strategies) `kgrag bench` can run today, in report order: every strategy of
/// [`kgrag::methods::registry`].
pub const METHODS: &[&str] = kgrag::config::STRATEGIES;

/// Method names of the report contract that later issues add (none left).
pub const PLANNED_METHODS: &[&str] = &[];

/// The dataset used when none is named and `musique-100` is not present.
pub const FALLBACK_DATASET: &str = "kgrag-fixture";

/// The arguments of `kgrag bench`.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchArgs {
    /// Dataset name, or a folder in HippoRAG's format (`<name>_corpus.json`, `<name>.json`, optionally
    /// `openie*.json`); `None`: `musique-100` when its files are under `data_dir`, else the fixture.
    pub dataset: Option<String>,
    /// Methods to run (empty: all of [`METHODS`]; `["none"]`: none, only `--answers` files are judged).
    pub methods: Vec<String>,
    /// Only the first `limit` questions.
    pub limit: Option<usize>,
    /// Only the first `docs` corpus entries (documents or passages).
    pub docs: Option<usize>,
    /// Keep only the passages the selected questions list (CI-sized runs; see
    /// [`Dataset::restrict_corpus_to_questions`]).
    pub question_corpus: bool,
    /// Ignore the triples the dataset brings (its OpenIE file or inline triples): every chunk is then
    /// extracted as the configuration's `openie` says (offline: the rule extractor). For measuring an
    /// extractor on a dataset that ships triples (musique-100).
    pub no_dataset_triples: bool,
    /// Output folder (default `target/bench/<dataset>`).
    pub out: Option<PathBuf>,
    /// Configuration file (default: [`Config::default`], offline).
    pub config: Option<PathBuf>,
    /// Where datasets live.
    pub data_dir: PathBuf,
    /// Draw progress bars (on a terminal).
    pub progress: bool,
    /// The judge's baseline method (default `[eval] baseline`, `dense`).
    pub baseline: Option<String>,
    /// Answers read from files, judged like methods: `NAME=FILE` (JSON lines `{query, answer}`) or a
    /// name the dataset publishes (`hirag-deepseek` for `ultradomain-mix`).
    pub answers: Vec<String>,
    /// An earlier report (its folder or `report.json`) to print and plot the deltas against.
    pub compare: Option<PathBuf>,
}

impl BenchArgs {
    /// The defaults of `kgrag bench` with `data_dir`.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            dataset: None,
            methods: Vec::new(),
            limit: None,
            docs: None,
            question_corpus: false,
            no_dataset_triples: false,
            out: None,
            config: None,
            data_dir,
            progress: false,
            baseline: None,
            answers: Vec::new(),
            compare: None,
        }
    }
}

/// What a bench run produced.
#[derive(Clone)]
pub struct BenchOutcome {
    /// The report.
    pub report: Report,
    /// Where `report.json` was written.
    pub path: PathBuf,
    /// The other files written (`report.md`, `report.html`, plots, answers, judgments).
    pub files: Vec<PathBuf>,
    /// The comparison with `--compare`'s report.
    pub comparison: Option<kgrag_eval::Comparison>,
    /// The index the methods ran on (held in memory), for a caller that inspects what was built (its
    /// hierarchies, graphs, vectors); `None` when no method ran.
    pub searcher: Option<kgrag::Searcher>,
}

impl std::fmt::Debug for BenchOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchOutcome")
            .field("report", &self.report)
            .field("path", &self.path)
            .field("files", &self.files)
            .field("comparison", &self.comparison)
            .field("searcher", &self.searcher.as_ref().map(|_| "Searcher"))
            .finish()
    }
}

fn methods_of(args: &BenchArgs) -> Result<Vec<String>> {
    if args.methods.is_empty() {
        return Ok(METHODS.iter().map(|m| (*m).to_owned()).collect());
    }
    let mut out: Vec<String> = Vec::new();
    for m in &args.methods {
        let m = m.trim();
        if m == "none" {
            continue;
        }
        if METHODS.contains(&m) {
            if !out.iter().any(|o| o == m) {
                out.push(m.to_owned());
            }
        } else if PLANNED_METHODS.contains(&m) {
            return Err(BenchError::Config(format!(
                "method {m:?} is not implemented yet; available: {}",
                METHODS.join(", ")
            )));
        } else {
            return Err(BenchError::Config(format!(
                "unknown method {m:?}; available: {}, or none",
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

/// Loads dataset `name`: a folder in HippoRAG's format when `name` is a directory (or looks like a path),
/// else a dataset of the manifests compiled into `kgrag-eval`.
pub fn load_dataset(name: &str, data_dir: &Path) -> Result<Dataset> {
    let as_path = Path::new(name);
    if as_path.is_dir() {
        return Ok(kgrag_eval::load_dir(as_path)?);
    }
    if name.contains('/') || name.contains(std::path::MAIN_SEPARATOR) {
        return Err(BenchError::Config(format!(
            "--dataset {name}: no such folder (a dataset is a name — {} — or a folder in HippoRAG's format)",
            kgrag_eval::available().join(", ")
        )));
    }
    Ok(kgrag_eval::load(name, data_dir)?)
}

/// The methods to index for `strategies`, in registry order.
fn methods_for(strategies: &[String]) -> Vec<String> {
    kgrag::methods::registry()
        .iter()
        .filter(|m| {
            m.strategies()
                .iter()
                .any(|s| strategies.iter().any(|x| x == s))
        })
        .map(|m| m.name().to_owned())
        .collect()
}

/// Runs the bench with the judge of the configuration (`[judge]`, else `[chat]`). See the module docs.
pub async fn run(args: &BenchArgs) -> Result<BenchOutcome> {
    run_with_judge(args, None).await
}

/// Runs the bench; `judge` replaces the configured judge model (tests pass a scripted one).
pub async fn run_with_judge(
    args: &BenchArgs,
    judge: Option<Arc<dyn ChatModel>>,
) -> Result<BenchOutcome> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let strategies = methods_of(args)?;
    let mut notes = Vec::new();
    let mut stages = Stages::new(args.progress, true);

    // Dataset.
    let t = Instant::now();
    let name = choose_dataset(args, &mut notes)?;
    let mut dataset = load_dataset(&name, &args.data_dir)?;
    let name = dataset.name.clone();
    if let Some(n) = args.limit {
        dataset = dataset.limit(n);
    }
    if let Some(n) = args.docs {
        let before = dataset.passages.len();
        dataset = dataset.limit_corpus(n);
        if dataset.passages.len() < before {
            notes.push(format!(
                "--docs {n}: the first {} of {before} corpus entries; figures are not comparable with full-corpus runs",
                dataset.passages.len()
            ));
        }
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
    if args.no_dataset_triples && !matches!(dataset.extraction, ExtractionSource::None) {
        dataset.extraction = ExtractionSource::None;
        notes.push(
            "--no-dataset-triples: the dataset's own triples are ignored; every chunk is extracted as \
             `openie` says (offline: rules)"
                .to_owned(),
        );
    }
    if dataset.questions.is_empty() {
        return Err(BenchError::Config(format!(
            "dataset {name} has no questions to run"
        )));
    }
    if dataset.documents {
        // Whole documents: cut into the chunks of `[index] chunking` (default HiRAG's 1200/100 windows).
        if matches!(
            config.index.chunking,
            kgrag_text::ChunkerConfig::Passage { .. }
        ) {
            config.index.chunking = kgrag_text::ChunkerConfig::hirag();
        }
    } else {
        // The datasets are passages already: one chunk per passage, as HippoRAG indexes them.
        config.index.chunking = kgrag_text::ChunkerConfig::hipporag();
    }
    if !dataset.has_gold_passages() {
        notes.push(format!(
            "{name} has no gold passages: recall@k is not measured"
        ));
    }
    let canned: Vec<(String, PathBuf)> = args
        .answers
        .iter()
        .map(|a| crate::judging::parse_answers_arg(a, &dataset.files))
        .collect::<Result<_>>()?;
    for (n, _) in &canned {
        if strategies.iter().any(|s| s == n) {
            return Err(BenchError::Config(format!(
                "--answers {n}: a method of that name runs too; name the answers differently"
            )));
        }
    }
    if strategies.is_empty() && canned.is_empty() {
        return Err(BenchError::Config(
            "--methods none needs --answers: nothing to evaluate".into(),
        ));
    }
    stages.record("load", t.elapsed().as_secs_f64());

    let mut reports = BTreeMap::new();
    let mut answers: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
    let mut sources = BTreeMap::new();
    let mut index_report = kgrag_eval::IndexReport::default();
    let mut cache = None;
    let mut searcher = None;
    if !strategies.is_empty() {
        let ran = run_methods(
            args,
            &config,
            &dataset,
            &strategies,
            &mut stages,
            &mut notes,
        )
        .await?;
        index_report = ran.index;
        reports = ran.reports;
        answers = ran.answers;
        sources = ran.sources;
        cache = ran.cache;
        searcher = Some(ran.searcher);
    }
    index_report.stages = stages
        .secs()
        .iter()
        .map(|(k, v)| (k.clone(), kgrag_eval::StageReport { secs: *v }))
        .collect();

    for (n, path) in &canned {
        let list = crate::judging::read_answer_file(path, &dataset.questions)?;
        let missing = list.iter().filter(|a| a.is_none()).count();
        if missing > 0 {
            notes.push(format!(
                "{n}: {} answers no question text of {missing} of the {} questions",
                path.display(),
                list.len()
            ));
        }
        reports.insert(
            n.clone(),
            kgrag_eval::MethodReport {
                answers_from: Some(path.display().to_string()),
                ..kgrag_eval::MethodReport::default()
            },
        );
        // Like the methods' answers: only a file that answers something is judged.
        if list.iter().any(Option::is_some) {
            answers.insert(n.clone(), list);
        }
    }

    // The judge.
    let judge = match judge {
        Some(j) => Some(j),
        None => match config.judge.as_ref().or(config.chat.as_ref()) {
            Some(c) if !answers.is_empty() => {
                let cache = match cache {
                    Some(c) => Some(c),
                    None => kgrag::index::open_response_cache(&config, None, None)?.1,
                };
                Some(kgrag_llm::build_chat(c, cache)? as Arc<dyn ChatModel>)
            }
            _ => None,
        },
    };
    let mut judged = None;
    match judge {
        Some(judge) if !answers.is_empty() => {
            let baseline = match &args.baseline {
                Some(b) => {
                    if !answers.contains_key(b) {
                        return Err(BenchError::Config(format!(
                            "--baseline-method {b}: not among the answered methods ({})",
                            answers.keys().cloned().collect::<Vec<_>>().join(", ")
                        )));
                    }
                    b.clone()
                }
                None if answers.contains_key(&config.eval.baseline) => config.eval.baseline.clone(),
                None => {
                    let first = answers.keys().next().cloned().unwrap_or_default();
                    if config.eval.pairwise && answers.len() > 1 {
                        notes.push(format!(
                            "the baseline {} did not run; win rates are against {first}",
                            config.eval.baseline
                        ));
                    }
                    first
                }
            };
            let counting = crate::judging::CountingChat::new(judge, config.eval.judge_max_tokens);
            let t = Instant::now();
            let j = crate::judging::judge_methods(
                &counting,
                &dataset.questions,
                &answers,
                &baseline,
                &config.eval,
                args.progress,
            )
            .await;
            kgrag::progress::say(&format!(
                "judge            {:>9.2} s, {} requests",
                t.elapsed().as_secs_f64(),
                j.report.llm.calls
            ));
            for (m, (scores, failures)) in &j.scores {
                if let Some(r) = reports.get_mut(m) {
                    r.scores = scores.clone();
                    r.score_failures = *failures;
                }
            }
            for (m, p) in &j.report.pairwise {
                if p.failures > 0 {
                    notes.push(format!(
                        "judge: {m} vs {baseline}: {} of {} verdicts unusable after the corrective retry (left out)",
                        p.failures,
                        p.failures + p.judgments
                    ));
                }
            }
            judged = Some(j);
        }
        _ => {
            if !answers.is_empty() && (config.eval.pairwise || config.eval.score_repeats > 0) {
                notes.push(
                    "no judge model ([judge] or [chat] in the configuration): win rates and 1-10 scores are not measured"
                        .to_owned(),
                );
            }
        }
    }

    let dataset_info = kgrag_eval::DatasetInfo {
        description: dataset.description.clone(),
        source: dataset.manifest.source.clone(),
        documents: dataset.documents,
        corpus_entries: dataset.passages.len() as u64,
        files: dataset
            .manifest
            .files
            .iter()
            .filter(|(role, _)| dataset.files.contains_key(*role))
            .map(|(role, f)| {
                (
                    role.clone(),
                    kgrag_eval::FileInfo {
                        path: f.path.clone(),
                        sha256: f.sha256.clone(),
                    },
                )
            })
            .collect(),
    };
    let report = Report {
        dataset: name.clone(),
        questions: dataset.questions.len() as u64,
        config_hash: config.hash(),
        index: index_report,
        methods: reports,
        notes,
        dataset_info: Some(dataset_info),
        judge: judged.as_ref().map(|j| j.report.clone()),
    };
    report.validate()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("target").join("bench").join(&name));
    let comparison = match &args.compare {
        Some(dir) => Some(kgrag_eval::compare(&report, &Report::read(dir)?)),
        None => None,
    };
    let path = report.write(&out)?;
    let mut files = kgrag_eval::write_report_files(&report, &out, comparison.as_ref())?;
    files.extend(crate::judging::write_records(
        &out,
        &dataset.questions,
        &answers,
        &sources,
        judged.as_ref(),
    )?);
    Ok(BenchOutcome {
        report,
        path,
        files,
        comparison,
        searcher,
    })
}

/// What indexing and running the methods produced.
struct Ran {
    index: kgrag_eval::IndexReport,
    reports: BTreeMap<String, kgrag_eval::MethodReport>,
    answers: BTreeMap<String, Vec<Option<String>>>,
    /// Each method's top passages' sources, per question (`sources/<method>.jsonl`).
    sources: BTreeMap<String, Vec<Vec<kgrag::citations::PassageSource>>>,
    cache: Option<kgrag_llm::ResponseCache>,
    searcher: kgrag::Searcher,
}

async fn run_methods(
    args: &BenchArgs,
    config: &Config,
    dataset: &Dataset,
    strategies: &[String],
    stages: &mut Stages,
    notes: &mut Vec<String>,
) -> Result<Ran> {
    let name = &dataset.name;
    // Passages, de-duplicated by content (HippoRAG keys passages by their text), as documents; whole
    // documents keep their text and get an id by position.
    let mut seen = HashSet::new();
    let docs: Vec<SourceDoc> = if dataset.documents {
        dataset
            .passages
            .iter()
            .enumerate()
            .map(|(i, p)| SourceDoc {
                id: format!("{name}-doc-{i:03}"),
                source: format!("{name}: document {i}"),
                document: Document {
                    id: DocId::from_text(&p.text),
                    title: (!p.title.is_empty()).then(|| p.title.clone()),
                    text: p.text.clone(),
                },
                origin: None,
            })
            .collect()
    } else {
        dataset
            .passages
            .iter()
            .filter(|p| seen.insert(p.chunk_id()))
            .map(|p| {
                let text = p.content();
                SourceDoc {
                    id: p.chunk_id().as_str().to_owned(),
                    source: format!("{name}: {}", p.title),
                    document: Document {
                        id: DocId::from_text(&text),
                        title: Some(p.title.clone()),
                        text,
                    },
                    origin: None,
                }
            })
            .collect()
    };
    let documents = docs.len() as u64;
    let prefilled = dataset_extractions(dataset)?;

    let index = Index::options()
        .config(config.clone())
        .progress(args.progress)
        .in_memory()?;
    let methods = methods_for(strategies);
    let mut writer = index.writer()?;
    writer.rebuild(docs, &methods, prefilled).await?;
    writer.commit().await?;
    drop(writer);
    let searcher = index.reader()?.searcher();
    for (stage, secs) in searcher.stages() {
        stages.secs_mut().insert(stage.clone(), *secs);
    }
    let counts = ["hipporag2", "hirag", "leanrag"]
        .iter()
        .filter(|m| methods.iter().any(|x| x == *m))
        .find_map(|m| searcher.method_index(m).ok().map(|i| i.counts()))
        .unwrap_or_default();
    let llm_stages = searcher.llm_usage().clone();
    let mut index_usage = kgrag_eval::LlmReport::default();
    for u in llm_stages.values() {
        index_usage.add(u);
    }
    let mut method_stats = BTreeMap::new();
    for m in &methods {
        if let Ok(index) = searcher.method_index(m) {
            method_stats.insert(m.clone(), index.stats());
        }
    }
    let passages = searcher.corpus().passages.clone();

    // Methods.
    let mut reports = BTreeMap::new();
    let mut answers = BTreeMap::new();
    let mut sources = BTreeMap::new();
    for strategy in strategies {
        let retriever = searcher.retriever(strategy)?;
        let before = index.chat_usage();
        let (mut report, list, cited) = run_method(
            retriever.as_ref(),
            strategy,
            dataset,
            &passages,
            config,
            &searcher,
            args.progress,
        )
        .await?;
        report.llm = Some(index.chat_usage().since(&before));
        if !dataset.has_gold_passages() {
            report.recall.clear();
        }
        reports.insert(strategy.clone(), report);
        if list.iter().any(Option::is_some) {
            answers.insert(strategy.clone(), list);
        }
        sources.insert(strategy.clone(), cited);
    }
    notes.extend(index.notes());

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
        if let Some(rate) = m.stats.get("ppr_not_converged").filter(|r| **r > 0.0) {
            notes.push(format!(
                "{name}: PPR stopped at ppr_max_iter before converging on {:.1}% of the questions",
                rate * 100.0
            ));
        }
    }
    Ok(Ran {
        index: kgrag_eval::IndexReport {
            stages: BTreeMap::new(),
            llm: index_usage,
            entities: counts.entities,
            relations: counts.relations,
            passages: passages.len() as u64,
            llm_stages,
            documents,
            methods: method_stats,
        },
        reports,
        answers,
        sources,
        cache: index.response_cache(),
        searcher,
    })
}

/// The triples a dataset brings (its OpenIE cache or inline triples), by chunk id.
fn dataset_extractions(dataset: &Dataset) -> Result<HashMap<ChunkId, Extraction>> {
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
    Ok(by_id)
}

async fn run_method(
    retriever: &dyn Retriever,
    strategy: &str,
    dataset: &Dataset,
    store: &EmbeddingStore,
    config: &Config,
    searcher: &Searcher,
    progress: bool,
) -> Result<(
    kgrag_eval::MethodReport,
    Vec<Option<String>>,
    Vec<Vec<kgrag::citations::PassageSource>>,
)> {
    let gold_answers = dataset.has_gold_answers();
    let mut answers = Vec::with_capacity(dataset.questions.len());
    let mut sources = Vec::with_capacity(dataset.questions.len());
    let name = retriever.name().to_owned();
    let stages = Stages::new(progress, false);
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
                answers.push(None);
                sources.push(Vec::new());
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
        sources.push(
            ctx.passages
                .iter()
                .take(SOURCES_KEPT)
                .filter_map(|p| searcher.source_of(&p.chunk_id))
                .collect(),
        );
        let mut result =
            QuestionResult::retrieval(retrieved, q.gold.clone(), ctx.context_tokens, latency_ms);
        result.stats = ctx.stats.clone();
        if strategy == "leanrag" {
            // LeanRAG counts its context in cl100k; o200k too, for comparison with the other methods
            // (counted here, outside the timed call).
            let o200k = Encoding::O200kBase.count(&ctx.rendered).unwrap_or(0);
            result
                .stats
                .insert("context_tokens_o200k".into(), o200k as f64);
        }
        match searcher.read(strategy, &q.question, &ctx).await {
            Ok(Some(prediction)) => {
                if gold_answers {
                    result = result.with_answer(prediction.clone(), q.answers.clone());
                }
                result.stats.insert("reader_failures".into(), 0.0);
                answers.push(Some(prediction));
            }
            Err(e) => {
                failures.push(format!("{} (reader): {e}", q.id));
                if gold_answers {
                    result = result.with_answer(String::new(), q.answers.clone());
                }
                result.stats.insert("reader_failures".into(), 1.0);
                answers.push(None);
            }
            Ok(None) => answers.push(None),
        }
        acc.add(&result);
        bar.inc(1);
    }
    drop(bar);
    kgrag::progress::say(&format!(
        "{name:<16} {:>9.2} s for {} questions",
        started.elapsed().as_secs_f64(),
        dataset.questions.len()
    ));
    for f in failures.iter().take(5) {
        kgrag::progress::say(&format!("{name}: failed: {f}"));
    }
    if failures.len() > 5 {
        kgrag::progress::say(&format!("{name}: … {} failures in all", failures.len()));
    }
    Ok((acc.finish(), answers, sources))
}

/// Passages per question whose sources `sources/<method>.jsonl` keeps.
const SOURCES_KEPT: usize = 5;
