//! The bench's answer-quality stage: answers read from files (`--answers`), the pairwise judge of every
//! method against the baseline and the 1–10 scores, with the judge's usage counted and every judgment
//! written beside the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::stream::{self, StreamExt};
use kgrag_eval::judge::{judge_pair, pairwise_report, PairOutcome};
use kgrag_eval::score::{score_answer, score_summaries, ScoreOutcome};
use kgrag_eval::{JudgeReport, LlmReport, Question, ScoreSummary};
use kgrag_types::{ChatModel, ChatRequest, ChatResponse};
use serde::Serialize;

use kgrag::config::EvalSection;
use kgrag::progress::Stages;

use crate::{BenchError, Result};

/// A chat model that counts its requests, tokens and cache hits (the judge's cost in the report), with an
/// optional cap on completion tokens. Unlike [`kgrag_types::CountingChat`], which counts the tokens a cache
/// hit repeats, the tokens here are only those the provider was paid for, as in the rest of the report.
pub struct CountingChat {
    inner: Arc<dyn ChatModel>,
    max_tokens: Option<u32>,
    requests: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cache_hits: AtomicU64,
}

impl CountingChat {
    /// Wraps `inner`; `max_tokens` caps every request's completion tokens.
    pub fn new(inner: Arc<dyn ChatModel>, max_tokens: Option<u32>) -> Self {
        Self {
            inner,
            max_tokens,
            requests: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
        }
    }

    /// Requests so far (failed ones included), tokens of answered calls not from the cache, cache hits.
    pub fn report(&self) -> LlmReport {
        LlmReport {
            calls: self.requests.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            ..LlmReport::default()
        }
    }
}

#[async_trait]
impl ChatModel for CountingChat {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> kgrag_types::Result<ChatResponse> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let reply = match self.max_tokens {
            Some(cap) => {
                let mut capped = request.clone();
                let asked = capped.settings.max_tokens.unwrap_or(cap);
                capped.settings.max_tokens = Some(asked.min(cap));
                self.inner.chat(&capped).await?
            }
            None => self.inner.chat(request).await?,
        };
        if reply.cached {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.prompt_tokens
                .fetch_add(reply.usage.prompt_tokens, Ordering::Relaxed);
            self.completion_tokens
                .fetch_add(reply.usage.completion_tokens, Ordering::Relaxed);
        }
        Ok(reply)
    }
}

/// One `--answers` argument: `NAME=FILE`, or `NAME` alone for the dataset's published answers
/// (manifest role `answers-NAME`).
pub fn parse_answers_arg(
    arg: &str,
    dataset_files: &BTreeMap<String, PathBuf>,
) -> Result<(String, PathBuf)> {
    if let Some((name, file)) = arg.split_once('=') {
        let name = name.trim();
        if name.is_empty() || file.trim().is_empty() {
            return Err(BenchError::Config(format!(
                "--answers {arg:?}: expected NAME=FILE"
            )));
        }
        return Ok((name.to_owned(), PathBuf::from(file.trim())));
    }
    let name = arg.trim();
    match dataset_files.get(&format!("answers-{name}")) {
        Some(path) => Ok((name.to_owned(), path.clone())),
        None => {
            let published: Vec<&str> = dataset_files
                .keys()
                .filter_map(|k| k.strip_prefix("answers-"))
                .collect();
            Err(BenchError::Config(format!(
                "--answers {name:?}: the dataset publishes no such answers ({}); give NAME=FILE",
                if published.is_empty() {
                    "it publishes none".to_owned()
                } else {
                    format!("published: {}", published.join(", "))
                }
            )))
        }
    }
}

/// Reads answers from JSON lines (`{"query": …, "answer": …}`, HiRAG's result files; `question` and
/// `result` are accepted too) and lines them up with `questions`: by position when the texts agree, else
/// by question text. Questions the file does not answer get `None`. A bad line is an error naming the file
/// and the line.
pub fn read_answer_file(path: &Path, questions: &[Question]) -> Result<Vec<Option<String>>> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |line: usize, what: String| {
        BenchError::Config(format!("{}: line {line}: {what}", path.display()))
    };
    let mut rows: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(i + 1, e.to_string()))?;
        let field = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| v.get(*k).and_then(serde_json::Value::as_str))
                .map(str::to_owned)
        };
        let query = field(&["query", "question", "input"])
            .ok_or_else(|| bad(i + 1, "no \"query\" string".to_owned()))?;
        let answer = field(&["answer", "result"])
            .ok_or_else(|| bad(i + 1, "no \"answer\" string".to_owned()))?;
        rows.push((query, answer));
    }
    let mut by_text: BTreeMap<&str, &str> = BTreeMap::new();
    for (q, a) in &rows {
        by_text.entry(q.as_str()).or_insert(a.as_str());
    }
    Ok(questions
        .iter()
        .enumerate()
        .map(|(i, q)| match rows.get(i) {
            Some((text, answer)) if text.trim() == q.question.trim() => Some(answer.clone()),
            _ => by_text.get(q.question.as_str()).map(|a| (*a).to_owned()),
        })
        .collect())
}

/// What judging produced: the report block, the 1–10 scores per method, and the raw records.
pub struct Judged {
    /// The report's `judge` block.
    pub report: JudgeReport,
    /// Scores and failed repeats per method.
    pub scores: BTreeMap<String, (BTreeMap<String, ScoreSummary>, u64)>,
    /// Pairwise outcomes per method (against the baseline), for `judgments/*.jsonl`.
    pub pairwise: BTreeMap<String, Vec<PairOutcome>>,
    /// Score outcomes per method, per question, for `scores/*.jsonl`.
    pub score_outcomes: BTreeMap<String, Vec<(usize, ScoreOutcome)>>,
}

/// Judges every method with answers against `baseline` (both orders) and scores every method's answers,
/// as `eval` asks. Questions where either answer is missing or empty are skipped for that pair.
pub async fn judge_methods(
    judge: &CountingChat,
    questions: &[Question],
    answers: &BTreeMap<String, Vec<Option<String>>>,
    baseline: &str,
    eval: &EvalSection,
    progress: bool,
) -> Judged {
    let stages = Stages::new(progress, false);
    let mut pairwise = BTreeMap::new();
    let mut report = JudgeReport {
        model: judge.model_name().to_owned(),
        baseline: baseline.to_owned(),
        score_repeats: eval.score_repeats,
        ..JudgeReport::default()
    };
    if eval.pairwise {
        if let Some(base) = answers.get(baseline) {
            for (name, theirs) in answers.iter().filter(|(n, _)| n.as_str() != baseline) {
                let jobs: Vec<(usize, &str, &str, &str)> = questions
                    .iter()
                    .enumerate()
                    .filter_map(|(i, q)| {
                        let a = usable(theirs.get(i)?)?;
                        let b = usable(base.get(i)?)?;
                        Some((i, q.question.as_str(), a, b))
                    })
                    .collect();
                let bar = stages.bar(jobs.len(), &format!("judge {name}"));
                let outcomes: Vec<PairOutcome> = stream::iter(jobs)
                    .map(|(i, q, a, b)| {
                        let bar = &bar;
                        async move {
                            let o = judge_pair(judge, i, q, a, b).await;
                            bar.inc(1);
                            o
                        }
                    })
                    .buffered(eval.concurrency.max(1))
                    .collect()
                    .await;
                drop(bar);
                report
                    .pairwise
                    .insert(name.clone(), pairwise_report(&outcomes));
                pairwise.insert(name.clone(), outcomes);
            }
        }
    }
    let mut scores = BTreeMap::new();
    let mut score_outcomes = BTreeMap::new();
    if eval.score_repeats > 0 {
        for (name, theirs) in answers {
            let jobs: Vec<(usize, &str, &str)> = questions
                .iter()
                .enumerate()
                .filter_map(|(i, q)| Some((i, q.question.as_str(), usable(theirs.get(i)?)?)))
                .collect();
            if jobs.is_empty() {
                continue;
            }
            let bar = stages.bar(jobs.len(), &format!("score {name}"));
            let outcomes: Vec<(usize, ScoreOutcome)> = stream::iter(jobs)
                .map(|(i, q, a)| {
                    let bar = &bar;
                    async move {
                        let o =
                            score_answer(judge, q, a, eval.score_repeats, eval.score_retries).await;
                        bar.inc(1);
                        (i, o)
                    }
                })
                .buffered(eval.concurrency.max(1))
                .collect()
                .await;
            drop(bar);
            let plain: Vec<ScoreOutcome> = outcomes.iter().map(|(_, o)| o.clone()).collect();
            scores.insert(name.clone(), score_summaries(&plain));
            score_outcomes.insert(name.clone(), outcomes);
        }
    }
    report.llm = judge.report();
    Judged {
        report,
        scores,
        pairwise,
        score_outcomes,
    }
}

#[derive(Serialize)]
struct AnswerLine<'a> {
    query: &'a str,
    answer: &'a str,
}

fn usable(a: &Option<String>) -> Option<&str> {
    a.as_deref().filter(|s| !s.trim().is_empty())
}

/// Writes `dir/answers/<method>.jsonl` (`{query, answer}` per answered question: the shape `--answers`
/// reads), `dir/judgments/<method>-vs-<baseline>.jsonl` (`{query_index, swapped, verdict}`) and
/// `dir/scores/<method>.jsonl` (`{query_index, repeats, failures}`), and `dir/sources/<method>.jsonl` (per
/// question, `{query_index, sources}`: where its top passages came from — document, file, pages, section,
/// label), atomically. Returns the files written.
pub fn write_records(
    dir: &Path,
    questions: &[Question],
    answers: &BTreeMap<String, Vec<Option<String>>>,
    sources: &BTreeMap<String, Vec<Vec<kgrag::citations::PassageSource>>>,
    judged: Option<&Judged>,
) -> Result<Vec<PathBuf>> {
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for (name, per_question) in sources {
        let mut text = String::new();
        for (i, list) in per_question.iter().enumerate() {
            text.push_str(&json_line(&serde_json::json!({
                "query_index": i,
                "sources": list,
            }))?);
        }
        files.push((
            dir.join("sources")
                .join(format!("{}.jsonl", file_safe(name))),
            text,
        ));
    }
    for (name, list) in answers {
        let mut text = String::new();
        for (q, a) in questions.iter().zip(list) {
            if let Some(a) = a {
                text.push_str(&json_line(&AnswerLine {
                    query: &q.question,
                    answer: a,
                })?);
            }
        }
        files.push((
            dir.join("answers")
                .join(format!("{}.jsonl", file_safe(name))),
            text,
        ));
    }
    if let Some(j) = judged {
        for (name, outcomes) in &j.pairwise {
            let mut text = String::new();
            for o in outcomes {
                for judgment in &o.judgments {
                    text.push_str(&json_line(judgment)?);
                }
            }
            let file = format!(
                "{}-vs-{}.jsonl",
                file_safe(name),
                file_safe(&j.report.baseline)
            );
            files.push((dir.join("judgments").join(file), text));
        }
        for (name, outcomes) in &j.score_outcomes {
            let mut text = String::new();
            for (i, o) in outcomes {
                text.push_str(&json_line(&serde_json::json!({
                    "query_index": i,
                    "repeats": o.repeats,
                    "failures": o.failures,
                }))?);
            }
            files.push((
                dir.join("scores")
                    .join(format!("{}.jsonl", file_safe(name))),
                text,
            ));
        }
    }
    for (path, text) in &files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| BenchError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        kgrag_graph_store::persist::write_atomic(path, text.as_bytes())?;
    }
    Ok(files.into_iter().map(|(path, _)| path).collect())
}

fn json_line<T: Serialize>(value: &T) -> Result<String> {
    let mut s = serde_json::to_string(value)
        .map_err(|e| BenchError::Config(format!("cannot encode a record: {e}")))?;
    s.push('\n');
    Ok(s)
}

/// A method name as a file name: anything but letters, digits, `-`, `_` and `.` becomes `_`.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn q(text: &str) -> Question {
        Question {
            id: text.to_owned(),
            question: text.to_owned(),
            answers: Vec::new(),
            gold: Vec::new(),
            paragraphs: Vec::new(),
        }
    }

    #[test]
    fn answer_files_line_up_by_position_then_text_and_name_bad_lines() {
        let dir = std::env::temp_dir().join(format!("kgrag-answers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.jsonl");
        std::fs::write(
            &path,
            "{\"query\": \"b\", \"answer\": \"B\"}\n\n{\"query\": \"a\", \"result\": \"A\"}\n",
        )
        .unwrap();
        let got = read_answer_file(&path, &[q("a"), q("b"), q("c")]).unwrap();
        assert_eq!(got, vec![Some("A".into()), Some("B".into()), None]);
        std::fs::write(
            &path,
            "{\"query\": \"a\", \"answer\": \"A\"}\n{\"query\": 3}\n",
        )
        .unwrap();
        let err = read_answer_file(&path, &[q("a")]).unwrap_err().to_string();
        assert!(err.contains("a.jsonl: line 2"), "{err}");
        std::fs::write(&path, "{\"query\": \"a\", \"answer\": \"A\"}\nnot json\n").unwrap();
        let err = read_answer_file(&path, &[q("a")]).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);

        let files: BTreeMap<String, PathBuf> =
            [("answers-hirag".to_owned(), PathBuf::from("h.jsonl"))].into();
        assert_eq!(
            parse_answers_arg("hirag", &files).unwrap(),
            ("hirag".to_owned(), PathBuf::from("h.jsonl"))
        );
        assert_eq!(
            parse_answers_arg("mine=x.jsonl", &files).unwrap().1,
            PathBuf::from("x.jsonl")
        );
        let err = parse_answers_arg("naive", &files).unwrap_err().to_string();
        assert!(err.contains("published: hirag"), "{err}");
    }
}
