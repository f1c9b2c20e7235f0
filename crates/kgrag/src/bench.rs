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
use std::time::Instant;

use kgrag_eval::{Dataset, ExtractionSource, MethodAccumulator, QuestionResult, Report};
use kgrag_graph_store::EmbeddingStore;
use kgrag_openie::read_openie_file;
use kgrag_text::Encoding;
use kgrag_types::{
    ChunkId, DocId, Document, EmbedKind, Embedder, Extraction, RetrievalRequest, Retriever,
};

use crate::config::Config;
use crate::documents::SourceDoc;
use crate::progress::Stages;
use crate::{KgragError, Pipeline, Result};

/// Methods (query strategies) `kgrag bench` can run today, in report order: every strategy of
/// [`crate::methods::registry`].
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

/// The methods to index for `strategies`, in registry order.
fn methods_for(strategies: &[String]) -> Vec<String> {
    crate::methods::registry()
        .iter()
        .filter(|m| {
            m.strategies()
                .iter()
                .any(|s| strategies.iter().any(|x| x == s))
        })
        .map(|m| m.name().to_owned())
        .collect()
}

/// Runs the bench. See the module docs.
pub async fn run(args: &BenchArgs) -> Result<BenchOutcome> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    // The bench's datasets are passages already: one chunk per passage, as HippoRAG indexes them.
    config.index.chunking = kgrag_text::ChunkerConfig::hipporag();
    let strategies = methods_of(args)?;
    let mut notes = Vec::new();
    let mut stages = Stages::new(args.progress, true);

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

    // Passages, de-duplicated by content (HippoRAG keys passages by their text), as documents.
    let mut seen = HashSet::new();
    let docs: Vec<SourceDoc> = dataset
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
            }
        })
        .collect();
    let prefilled = dataset_extractions(&dataset)?;

    let mut pipeline = Pipeline::new(config.clone(), None, args.progress)?;
    let methods = methods_for(&strategies);
    pipeline.index(docs, &methods, prefilled).await?;
    for (stage, secs) in pipeline.stages() {
        stages.secs_mut().insert(stage.clone(), *secs);
    }
    let counts = ["hipporag2", "hirag", "leanrag"]
        .iter()
        .filter(|m| methods.iter().any(|x| x == *m))
        .find_map(|m| pipeline.method_index(m).ok().map(|i| i.counts()))
        .unwrap_or_default();
    let index_usage: kgrag_eval::LlmReport =
        pipeline
            .llm_usage()
            .values()
            .fold(kgrag_eval::LlmReport::default(), |mut acc, u| {
                acc.calls += u.calls;
                acc.prompt_tokens += u.prompt_tokens;
                acc.completion_tokens += u.completion_tokens;
                acc.cache_hits += u.cache_hits;
                acc
            });
    let passages = pipeline.corpus().passages.clone();

    // Methods.
    let mut reports = BTreeMap::new();
    for strategy in &strategies {
        let retriever = pipeline.retriever(strategy)?;
        let report = run_method(
            retriever.as_ref(),
            strategy,
            &dataset,
            &passages,
            &config,
            &mut pipeline,
            args.progress,
        )
        .await?;
        reports.insert(strategy.clone(), report);
    }
    notes.extend(pipeline.notes());

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
    let report = Report {
        dataset: name.clone(),
        questions: dataset.questions.len() as u64,
        config_hash: config.hash(),
        index: kgrag_eval::IndexReport {
            stages: stages
                .secs()
                .iter()
                .map(|(k, v)| (k.clone(), kgrag_eval::StageReport { secs: *v }))
                .collect(),
            llm: index_usage,
            entities: counts.entities,
            relations: counts.relations,
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
    pipeline: &mut Pipeline,
    progress: bool,
) -> Result<kgrag_eval::MethodReport> {
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
        if strategy == "leanrag" {
            // LeanRAG counts its context in cl100k; o200k too, for comparison with the other methods
            // (counted here, outside the timed call).
            let o200k = Encoding::O200kBase.count(&ctx.rendered).unwrap_or(0);
            result
                .stats
                .insert("context_tokens_o200k".into(), o200k as f64);
        }
        match pipeline.read(strategy, &q.question, &ctx).await {
            Ok(Some(prediction)) => {
                result = result.with_answer(prediction, q.answers.clone());
                result.stats.insert("reader_failures".into(), 0.0);
            }
            Err(e) => {
                failures.push(format!("{} (reader): {e}", q.id));
                result = result.with_answer(String::new(), q.answers.clone());
                result.stats.insert("reader_failures".into(), 1.0);
            }
            Ok(None) => {}
        }
        acc.add(&result);
        bar.inc(1);
    }
    bar.finish_and_clear();
    crate::progress::say(&format!(
        "{name:<16} {:>9.2} s for {} questions",
        started.elapsed().as_secs_f64(),
        dataset.questions.len()
    ));
    for f in failures.iter().take(5) {
        crate::progress::say(&format!("{name}: failed: {f}"));
    }
    if failures.len() > 5 {
        crate::progress::say(&format!("{name}: … {} failures in all", failures.len()));
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
