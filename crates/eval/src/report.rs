//! The bench report: the JSON contract `cargo xtask bench` writes (design notes §6), its Markdown rendering,
//! validation and atomic writing.
//!
//! Field names are part of the contract: later versions add fields, none is renamed or removed. Reading does
//! not reject unknown fields, so an older reader accepts a newer report.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{invalid, io, EvalError, Result};
use crate::metrics::RECALL_KS;

/// One bench run: a dataset, its index, and the scores of each method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Dataset name, e.g. `musique-100`.
    pub dataset: String,
    /// Number of questions evaluated.
    pub questions: u64,
    /// Hash of the configuration the run used.
    pub config_hash: String,
    /// What building the index cost and produced.
    pub index: IndexReport,
    /// Scores per method name (`dense`, `hipporag2`, `hirag`, …).
    pub methods: BTreeMap<String, MethodReport>,
    /// What a reader of the figures must know about the run: the dataset chosen by default, settings
    /// forced by the absence of an LLM, a reduced corpus, failure rates. Added after the first contract.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Where the dataset came from and the sha256 of every file read. Added with the judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_info: Option<DatasetInfo>,
    /// The LLM judge's results: pairwise win rates against the baseline and what judging cost (the 1–10
    /// scores are per method, in [`MethodReport::scores`]). Absent when no judge ran. Added with the judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeReport>,
}

/// Where a bench's dataset came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// One-line description.
    pub description: String,
    /// Where the data is published (or the folder it was read from).
    pub source: String,
    /// Whether the corpus was whole documents cut into chunks (otherwise one chunk per passage).
    pub documents: bool,
    /// Corpus entries (documents or passages) used.
    pub corpus_entries: u64,
    /// Every file read, by role: path and sha256.
    pub files: BTreeMap<String, FileInfo>,
}

/// One file a bench read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// The path as given.
    pub path: String,
    /// Lowercase hex sha256 (empty when not computed).
    pub sha256: String,
}

/// What the LLM judge found and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JudgeReport {
    /// The judge model's name.
    pub model: String,
    /// The method every other method is compared with.
    pub baseline: String,
    /// Pairwise results per method (the baseline itself is not listed).
    #[serde(default)]
    pub pairwise: BTreeMap<String, PairwiseReport>,
    /// Repeats of the 1–10 scorer per answer (0: scores not asked for).
    #[serde(default)]
    pub score_repeats: u64,
    /// Judge model usage, pairwise and scores together.
    pub llm: LlmReport,
}

/// One method judged against the baseline, both answer orders per question.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairwiseReport {
    /// Verdicts that parsed (at most 2 per question).
    pub judgments: u64,
    /// Verdicts obtained on the corrective retry.
    pub retried: u64,
    /// Orders whose verdict stayed unusable or whose call failed (left out, never guessed).
    pub failures: u64,
    /// The method's win rate in percent per criterion (`Comprehensiveness`, `Empowerment`, `Diversity`,
    /// `Overall`); the baseline's is 100 minus it.
    pub win_rate: BTreeMap<String, f64>,
}

/// Mean ± sample standard deviation of a 1–10 score over the repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoreSummary {
    /// Mean of the per-repeat means.
    pub mean: f64,
    /// Sample standard deviation of the per-repeat means.
    pub sd: f64,
    /// Repeats with at least one score.
    pub repeats: u64,
}

/// What building the index cost and produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexReport {
    /// Wall-clock time per indexing stage.
    pub stages: BTreeMap<String, StageReport>,
    /// Model usage while indexing.
    pub llm: LlmReport,
    /// Entities in the graph.
    pub entities: u64,
    /// Relations (edges between entities) in the graph.
    pub relations: u64,
    /// Passages indexed.
    pub passages: u64,
    /// Model usage per indexing stage. Added with the judge.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub llm_stages: BTreeMap<String, LlmReport>,
    /// Documents indexed (equal to `passages` when each passage is one document). Added with the judge.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub documents: u64,
    /// What each method's index holds (layers, communities, …), as its build reports it. Added with the
    /// judge.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub methods: BTreeMap<String, serde_json::Value>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Time spent in one indexing stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// Seconds of wall-clock time.
    pub secs: f64,
}

/// Model usage totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmReport {
    /// Model calls, cache hits included.
    pub calls: u64,
    /// Prompt tokens sent.
    pub prompt_tokens: u64,
    /// Completion tokens received.
    pub completion_tokens: u64,
    /// Calls answered from the cache.
    pub cache_hits: u64,
    /// Attempts retried after a retryable failure (rate limits, server errors, timeouts, dropped
    /// connections); 0 where not counted.
    #[serde(default)]
    pub retries: u64,
    /// Requests that failed for good (every attempt failed, or a failure not worth retrying); 0 where not
    /// counted.
    #[serde(default)]
    pub failures: u64,
}

impl LlmReport {
    /// What was used between `before` and `self` (two readings of one growing counter).
    pub fn since(&self, before: &Self) -> Self {
        Self {
            calls: self.calls.saturating_sub(before.calls),
            prompt_tokens: self.prompt_tokens.saturating_sub(before.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(before.completion_tokens),
            cache_hits: self.cache_hits.saturating_sub(before.cache_hits),
            retries: self.retries.saturating_sub(before.retries),
            failures: self.failures.saturating_sub(before.failures),
        }
    }

    /// Adds `other` to these totals.
    pub fn add(&mut self, other: &Self) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cache_hits += other.cache_hits;
        self.retries += other.retries;
        self.failures += other.failures;
    }
}

/// The scores of one method over the questions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodReport {
    /// Mean fractional passage recall per cut-off, keyed `"1"`, `"2"`, `"5"`, `"10"`, `"20"`; fractions in
    /// `[0, 1]`. Empty when recall cannot be measured: a dataset without gold passages (UltraDomain) or
    /// answers read from a file.
    pub recall: BTreeMap<String, f64>,
    /// Mean tokens of the context the method built.
    pub context_tokens_mean: f64,
    /// Per-question latency percentiles.
    pub latency_ms: Latency,
    /// Mean exact match, `null` when no answers were generated.
    pub em: Option<f64>,
    /// Mean token F1, `null` when no answers were generated.
    pub f1: Option<f64>,
    /// Questions on which the method failed.
    pub failures: u64,
    /// Means over the answered questions of the numbers a method reports per query (e.g. HippoRAG 2's
    /// `dense_fallback` rate, `kept_facts`, `ppr_iterations`) and of the pipeline's own (`reader_failures`).
    /// Added after the first contract; absent in older reports.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, f64>,
    /// Latency percentiles without the query embedding, for methods that report the embedding's time
    /// per query (stat `embed_ms`). Added after the first contract; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_after_embedding_ms: Option<Latency>,
    /// Model usage at query time (recognition filter, reader, …), cache hits included. Added with the judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmReport>,
    /// The judge's 1–10 scores per criterion (`Comprehensiveness`, `Empowerment`, `Diversity`,
    /// `Overall Quality`). Added with the judge.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scores: BTreeMap<String, ScoreSummary>,
    /// Scoring repeats that failed (unparsable after the retries, or a failed call). Added with the judge.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub score_failures: u64,
    /// Answers read from a file instead of retrieved and generated (no recall, tokens or latency). Added with
    /// the judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers_from: Option<String>,
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
}

/// Index stages in pipeline order, for the Markdown table (other stages follow by name).
pub const STAGE_ORDER: &[&str] = &[
    "load",
    "extraction",
    "embed_passages",
    "embed_phrases",
    "embed_facts",
    "graph",
    "synonymy",
    "pack_graph",
];

/// The file name [`Report::write`] writes and [`Report::read`] expects inside a directory.
pub const REPORT_FILE: &str = "report.json";

impl Report {
    /// The report as Markdown: a header line, the index table with totals, and one row per method
    /// (recall, EM and F1 as percentages with one decimal, `–` where there is no value).
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## {} · {} questions · config `{}`",
            cell(&self.dataset),
            self.questions,
            self.config_hash
        );
        out.push('\n');
        out.push_str("| stage | secs |\n| --- | ---: |\n");
        let mut stages: Vec<(&String, &StageReport)> = self.index.stages.iter().collect();
        stages.sort_by_key(|(name, _)| {
            (
                STAGE_ORDER
                    .iter()
                    .position(|s| s == name)
                    .unwrap_or(STAGE_ORDER.len()),
                name.as_str(),
            )
        });
        for (stage, report) in stages {
            let _ = writeln!(out, "| {} | {:.2} |", cell(stage), report.secs);
        }
        out.push('\n');
        let llm = &self.index.llm;
        let _ = writeln!(
            out,
            "passages: {} · entities: {} · relations: {} · LLM: {} calls ({} cache hits), {} prompt tokens, {} completion tokens",
            self.index.passages,
            self.index.entities,
            self.index.relations,
            llm.calls,
            llm.cache_hits,
            llm.prompt_tokens,
            llm.completion_tokens
        );
        out.push('\n');
        out.push_str("| method |");
        for k in RECALL_KS {
            let _ = write!(out, " R@{k} |");
        }
        out.push_str(" EM | F1 | ctx tokens | p50 ms | p95 ms | failures |\n");
        out.push_str("| --- |");
        for _ in 0..RECALL_KS.len() + 6 {
            out.push_str(" ---: |");
        }
        out.push('\n');
        for (name, m) in &self.methods {
            let _ = write!(out, "| {} |", cell(name));
            for k in RECALL_KS {
                let _ = write!(out, " {} |", percent(m.recall.get(&k.to_string()).copied()));
            }
            if m.answers_from.is_some() {
                // Answers read from a file: nothing was retrieved or timed.
                let _ = writeln!(
                    out,
                    " {} | {} | – | – | – | {} |",
                    percent(m.em),
                    percent(m.f1),
                    m.failures
                );
                continue;
            }
            let _ = writeln!(
                out,
                " {} | {} | {:.1} | {:.1} | {:.1} | {} |",
                percent(m.em),
                percent(m.f1),
                m.context_tokens_mean,
                m.latency_ms.p50,
                m.latency_ms.p95,
                m.failures
            );
        }
        let with_stats: Vec<_> = self
            .methods
            .iter()
            .filter(|(_, m)| !m.stats.is_empty())
            .collect();
        let after: Vec<_> = self
            .methods
            .iter()
            .filter_map(|(n, m)| m.latency_after_embedding_ms.map(|l| (n, l)))
            .collect();
        if !after.is_empty() {
            out.push('\n');
            for (name, l) in after {
                let _ = writeln!(
                    out,
                    "- {} after the query embedding: p50 {:.2} ms, p95 {:.2} ms",
                    cell(name),
                    l.p50,
                    l.p95
                );
            }
        }
        if !with_stats.is_empty() {
            out.push('\n');
            for (name, m) in with_stats {
                let parts: Vec<String> = m.stats.iter().map(|(k, v)| format!("{k} {v}")).collect();
                let _ = writeln!(
                    out,
                    "- {} (means per question): {}",
                    cell(name),
                    parts.join(" · ")
                );
            }
        }
        out.push_str(&self.judge_markdown());
        if self
            .index
            .methods
            .values()
            .any(|v| !compact_stats(v).is_empty())
        {
            out.push('\n');
            for (name, stats) in &self.index.methods {
                let stats = compact_stats(stats);
                if !stats.is_empty() {
                    let _ = writeln!(out, "- index of {}: {stats}", cell(name));
                }
            }
        }
        if let Some(info) = &self.dataset_info {
            out.push('\n');
            let _ = writeln!(
                out,
                "dataset: {} · {} {} · source: {}",
                cell(&info.description),
                info.corpus_entries,
                if info.documents {
                    "documents"
                } else {
                    "passages"
                },
                cell(&info.source)
            );
            for (role, f) in &info.files {
                let _ = writeln!(out, "- {role}: `{}` sha256 `{}`", f.path, f.sha256);
            }
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                let _ = writeln!(out, "note: {note}");
            }
        }
        out
    }

    /// The Markdown of the query-time LLM usage, the judge's win rates and the 1–10 scores (empty when
    /// none of them is in the report).
    pub fn judge_markdown(&self) -> String {
        let mut out = String::new();
        let with_llm: Vec<_> = self
            .methods
            .iter()
            .filter_map(|(n, m)| m.llm.map(|l| (n, l)))
            .filter(|(_, l)| l.calls > 0 || l.cache_hits > 0)
            .collect();
        let stage_llm: Vec<_> = self
            .index
            .llm_stages
            .iter()
            .filter(|(_, l)| l.calls > 0 || l.cache_hits > 0)
            .collect();
        if !with_llm.is_empty() || !stage_llm.is_empty() || self.judge.is_some() {
            out.push_str(
                "\n| LLM use | calls | cache hits | prompt tokens | completion tokens |\n",
            );
            out.push_str("| --- | ---: | ---: | ---: | ---: |\n");
            for (stage, l) in stage_llm {
                let _ = writeln!(
                    out,
                    "| index: {} | {} | {} | {} | {} |",
                    cell(stage),
                    l.calls,
                    l.cache_hits,
                    l.prompt_tokens,
                    l.completion_tokens
                );
            }
            for (name, l) in with_llm {
                let _ = writeln!(
                    out,
                    "| query: {} | {} | {} | {} | {} |",
                    cell(name),
                    l.calls,
                    l.cache_hits,
                    l.prompt_tokens,
                    l.completion_tokens
                );
            }
            if let Some(j) = &self.judge {
                let l = j.llm;
                let _ = writeln!(
                    out,
                    "| judge: {} | {} | {} | {} | {} |",
                    cell(&j.model),
                    l.calls,
                    l.cache_hits,
                    l.prompt_tokens,
                    l.completion_tokens
                );
            }
        }
        if let Some(j) = &self.judge {
            if !j.pairwise.is_empty() {
                let _ = writeln!(
                    out,
                    "\nWin rate (%) against `{}` (both answer orders per question):\n",
                    cell(&j.baseline)
                );
                out.push_str("| method |");
                for c in WIN_CRITERIA {
                    let _ = write!(out, " {c} |");
                }
                out.push_str(" judgments | retried | failures |\n| --- |");
                for _ in 0..WIN_CRITERIA.len() + 3 {
                    out.push_str(" ---: |");
                }
                out.push('\n');
                for (name, p) in &j.pairwise {
                    let _ = write!(out, "| {} |", cell(name));
                    for c in WIN_CRITERIA {
                        match p.win_rate.get(*c) {
                            Some(v) => {
                                let _ = write!(out, " {v:.1} |");
                            }
                            None => out.push_str(" – |"),
                        }
                    }
                    let _ = writeln!(out, " {} | {} | {} |", p.judgments, p.retried, p.failures);
                }
            }
        }
        let scored: Vec<_> = self
            .methods
            .iter()
            .filter(|(_, m)| !m.scores.is_empty() || m.score_failures > 0)
            .collect();
        if !scored.is_empty() {
            let repeats = self.judge.as_ref().map_or(0, |j| j.score_repeats);
            let _ = writeln!(
                out,
                "\n1–10 scores (mean ± sample SD over {repeats} repeats):\n"
            );
            out.push_str("| method |");
            for c in SCORE_KEYS {
                let _ = write!(out, " {c} |");
            }
            out.push_str(" failed repeats |\n| --- |");
            for _ in 0..SCORE_KEYS.len() + 1 {
                out.push_str(" ---: |");
            }
            out.push('\n');
            for (name, m) in scored {
                let _ = write!(out, "| {} |", cell(name));
                for c in SCORE_KEYS {
                    match m.scores.get(*c) {
                        Some(s) => {
                            let _ = write!(out, " {:.2} ± {:.2} |", s.mean, s.sd);
                        }
                        None => out.push_str(" – |"),
                    }
                }
                let _ = writeln!(out, " {} |", m.score_failures);
            }
        }
        out
    }

    /// Checks the report against the contract: at least one question; per method exactly the recall keys
    /// `"1"`, `"2"`, `"5"`, `"10"`, `"20"` with finite values in `[0, 1]`, EM and F1 (when present) finite
    /// in `[0, 1]`, finite non-negative context tokens and latencies; finite non-negative stage times.
    /// All problems found are listed in one [`EvalError::InvalidData`].
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        if self.questions == 0 {
            problems.push("questions is 0".to_owned());
        }
        for (stage, s) in &self.index.stages {
            if !is_non_negative(s.secs) {
                problems.push(format!(
                    "stage {stage:?}: secs {} is not a finite non-negative number",
                    s.secs
                ));
            }
        }
        let expected: Vec<String> = RECALL_KS.iter().map(|k| k.to_string()).collect();
        if let Some(j) = &self.judge {
            for (name, p) in &j.pairwise {
                for (c, v) in &p.win_rate {
                    if !(v.is_finite() && (0.0..=100.0).contains(v)) {
                        problems.push(format!(
                            "judge: {name:?} win rate {c} = {v} is not a percentage"
                        ));
                    }
                }
            }
        }
        for (name, m) in &self.methods {
            for (c, sc) in &m.scores {
                if !(sc.mean.is_finite() && (1.0..=10.0).contains(&sc.mean) && sc.sd.is_finite()) {
                    problems.push(format!(
                        "method {name:?}: score {c} = {} ± {} is not a 1-10 mean",
                        sc.mean, sc.sd
                    ));
                }
            }
            // An empty recall map: not measured (a dataset without gold passages, or answers from a file).
            if m.recall.is_empty() {
                continue;
            }
            for key in &expected {
                if !m.recall.contains_key(key) {
                    problems.push(format!("method {name:?}: recall key {key:?} is missing"));
                }
            }
            for (key, value) in &m.recall {
                if !expected.contains(key) {
                    problems.push(format!(
                        "method {name:?}: unexpected recall key {key:?} (expected {})",
                        expected.join(", ")
                    ));
                }
                if !is_fraction(*value) {
                    problems.push(format!(
                        "method {name:?}: recall@{key} = {value} is not in [0, 1]"
                    ));
                }
            }
            for (what, value) in [("em", m.em), ("f1", m.f1)] {
                if let Some(v) = value {
                    if !is_fraction(v) {
                        problems.push(format!("method {name:?}: {what} = {v} is not in [0, 1]"));
                    }
                }
            }
            for (what, v) in [
                ("context_tokens_mean", m.context_tokens_mean),
                ("latency_ms.p50", m.latency_ms.p50),
                ("latency_ms.p95", m.latency_ms.p95),
            ] {
                if !is_non_negative(v) {
                    problems.push(format!(
                        "method {name:?}: {what} = {v} is not a finite non-negative number"
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(invalid(format!("bench report: {}", problems.join("; "))))
        }
    }

    /// Writes `dir/report.json`, pretty-printed, atomically (a unique temporary file in `dir`, fsync,
    /// rename), creating `dir` if needed. Returns the path written.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let path = dir.join(REPORT_FILE);
        let mut json = serde_json::to_string_pretty(self)
            .map_err(|e| invalid(format!("cannot encode the bench report: {e}")))?;
        json.push('\n');
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{REPORT_FILE}.tmp-{}-{n}", std::process::id()));
        let result = write_synced_then_rename(&tmp, &path, json.as_bytes());
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result?;
        // Make the rename durable where directories can be opened; failure here is harmless.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(path)
    }

    /// Reads a report from `path`: a `report.json` file, or a directory holding one.
    pub fn read(path: &Path) -> Result<Self> {
        let path = if path.is_dir() {
            path.join(REPORT_FILE)
        } else {
            path.to_path_buf()
        };
        let bytes = fs::read(&path).map_err(|e| io(&path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| EvalError::Parse {
            path,
            message: e.to_string(),
        })
    }
}

/// Writes `bytes` to `path` atomically: a unique temporary file beside it, fsync, rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}-{n}", std::process::id()));
    let result = write_synced_then_rename(&tmp, path, bytes);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_synced_then_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| io(tmp, e))?;
    file.write_all(bytes).map_err(|e| io(tmp, e))?;
    file.sync_all().map_err(|e| io(tmp, e))?;
    drop(file);
    fs::rename(tmp, path).map_err(|e| io(path, e))
}

/// The pairwise criteria, in table order (the keys of [`PairwiseReport::win_rate`]).
pub const WIN_CRITERIA: &[&str] = &["Comprehensiveness", "Empowerment", "Diversity", "Overall"];

/// The 1–10 score criteria, in table order (the keys of [`MethodReport::scores`]).
pub const SCORE_KEYS: &[&str] = &[
    "Comprehensiveness",
    "Empowerment",
    "Diversity",
    "Overall Quality",
];

/// `key value` pairs of a JSON object's numbers and strings, one level deep.
fn compact_stats(stats: &serde_json::Value) -> String {
    match stats {
        serde_json::Value::Object(map) => map
            .iter()
            .filter_map(|(k, v)| match v {
                serde_json::Value::Number(n) => Some(format!("{k} {n}")),
                serde_json::Value::String(s) => Some(format!("{k} {}", cell(s))),
                serde_json::Value::Array(a) if a.iter().all(|x| x.is_number()) => Some(format!(
                    "{k} [{}]",
                    a.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" · "),
        other => other.to_string(),
    }
}

fn is_non_negative(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

fn is_fraction(v: f64) -> bool {
    v.is_finite() && (0.0..=1.0).contains(&v)
}

fn percent(value: Option<f64>) -> String {
    match value {
        Some(v) => format!("{:.1}", v * 100.0),
        None => "–".to_owned(),
    }
}

/// Escapes the characters that would break a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let recall: BTreeMap<String, f64> = [
            ("1", 0.25),
            ("2", 0.5),
            ("5", 0.75),
            ("10", 0.8),
            ("20", 1.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let mut stages = BTreeMap::new();
        stages.insert("openie".to_owned(), StageReport { secs: 12.5 });
        stages.insert("embed".to_owned(), StageReport { secs: 3.25 });
        let mut methods = BTreeMap::new();
        methods.insert(
            "dense".to_owned(),
            MethodReport {
                recall: recall.clone(),
                context_tokens_mean: 812.4,
                latency_ms: Latency {
                    p50: 10.0,
                    p95: 20.5,
                },
                latency_after_embedding_ms: None,
                em: None,
                f1: None,
                failures: 0,
                stats: BTreeMap::new(),
                ..MethodReport::default()
            },
        );
        methods.insert(
            "hipporag2".to_owned(),
            MethodReport {
                recall,
                context_tokens_mean: 900.0,
                latency_ms: Latency {
                    p50: 30.0,
                    p95: 45.0,
                },
                latency_after_embedding_ms: None,
                em: Some(0.4),
                f1: Some(0.5123),
                failures: 2,
                stats: [("dense_fallback".to_owned(), 0.25)].into_iter().collect(),
                ..MethodReport::default()
            },
        );
        Report {
            dataset: "musique-100".to_owned(),
            questions: 100,
            config_hash: "abc123".to_owned(),
            index: IndexReport {
                stages,
                llm: LlmReport {
                    calls: 10,
                    prompt_tokens: 1000,
                    completion_tokens: 200,
                    cache_hits: 3,
                    ..LlmReport::default()
                },
                entities: 16235,
                relations: 17036,
                passages: 1890,
                ..IndexReport::default()
            },
            methods,
            notes: vec!["a note".to_owned()],
            dataset_info: None,
            judge: None,
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "kgrag-eval-report-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn json_round_trip_and_contract_fields() {
        let report = sample();
        let json = serde_json::to_string(&report).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report);

        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["dataset"], "musique-100");
        assert_eq!(value["questions"], 100);
        assert_eq!(value["index"]["stages"]["openie"]["secs"], 12.5);
        assert_eq!(value["index"]["llm"]["cache_hits"], 3);
        let dense = &value["methods"]["dense"];
        assert!(dense["em"].is_null() && dense["f1"].is_null());
        assert!(dense.as_object().unwrap().contains_key("em"));
        assert_eq!(dense["recall"]["10"], 0.8);
        assert_eq!(dense["latency_ms"]["p95"], 20.5);
        assert_eq!(value["methods"]["hipporag2"]["failures"], 2);

        // Unknown (future) fields are accepted.
        let mut extended = value.clone();
        extended["future_field"] = serde_json::json!(1);
        let back: Report = serde_json::from_value(extended).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn validate_accepts_good_and_lists_problems() {
        let report = sample();
        report.validate().unwrap();

        let mut bad = sample();
        bad.questions = 0;
        let m = bad.methods.get_mut("dense").unwrap();
        m.recall.remove("20");
        m.recall.insert("3".to_owned(), 0.5);
        m.recall.insert("1".to_owned(), 1.5);
        m.f1 = Some(f64::NAN);
        m.latency_ms.p95 = f64::INFINITY;
        let err = bad.validate().unwrap_err().to_string();
        for needle in [
            "questions is 0",
            "recall key \"20\" is missing",
            "unexpected recall key \"3\"",
            "recall@1 = 1.5",
            "f1 = NaN",
            "latency_ms.p95",
        ] {
            assert!(err.contains(needle), "{needle:?} not in {err}");
        }

        let mut bad = sample();
        bad.methods
            .get_mut("hipporag2")
            .unwrap()
            .recall
            .insert("2".to_owned(), -0.1);
        assert!(bad.validate().is_err());
    }

    #[test]
    fn markdown_has_tables_and_rows() {
        let md = sample().to_markdown();
        assert!(md.contains("musique-100"), "{md}");
        assert!(md.contains("abc123"));
        assert!(md.contains("| openie | 12.50 |"), "{md}");
        assert!(md.contains("note: a note"), "{md}");
        assert!(
            md.contains("- hipporag2 (means per question): dense_fallback 0.25"),
            "{md}"
        );
        assert!(md.contains(
            "| method | R@1 | R@2 | R@5 | R@10 | R@20 | EM | F1 | ctx tokens | p50 ms | p95 ms | failures |"
        ));
        assert!(
            md.contains(
                "| dense | 25.0 | 50.0 | 75.0 | 80.0 | 100.0 | – | – | 812.4 | 10.0 | 20.5 | 0 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| hipporag2 | 25.0 | 50.0 | 75.0 | 80.0 | 100.0 | 40.0 | 51.2 | 900.0 | 30.0 | 45.0 | 2 |"),
            "{md}"
        );
        assert!(md.contains("passages: 1890"));
        assert!(md.contains("10 calls"));
    }

    #[test]
    fn write_is_atomic_and_readable() {
        let dir = temp_dir("write").join("nested");
        let report = sample();
        let path = report.write(&dir).unwrap();
        assert_eq!(path, dir.join("report.json"));
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\n  \"dataset\": \"musique-100\""),
            "pretty-printed: {text}"
        );
        assert_eq!(Report::read(&path).unwrap(), report);
        assert_eq!(Report::read(&dir).unwrap(), report);
        // Overwrite, and no temporary file is left behind.
        report.write(&dir).unwrap();
        let names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["report.json".to_owned()]);

        fs::write(&path, "{ \"dataset\": ").unwrap();
        let err = Report::read(&path).unwrap_err().to_string();
        assert!(err.contains("report.json") && err.contains("line"), "{err}");
        let _ = fs::remove_dir_all(dir.parent().unwrap());
    }
}
