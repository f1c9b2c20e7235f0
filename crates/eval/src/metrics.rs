//! Answer and retrieval metrics as HippoRAG computes them, plus latency percentiles and a per-method
//! accumulator that turns per-question outcomes into a [`MethodReport`].
//!
//! - [`normalize_answer`], [`exact_match`], [`f1`]: SQuAD/MRQA answer normalisation and scores
//!   (HippoRAG's `utils/eval_utils.py` and `evaluation/qa_eval.py`).
//! - [`recall_at_k`]: fractional passage recall (HippoRAG's `evaluation/retrieval_eval.py`).
//! - [`percentile`]: numpy's default (linear) percentile.
//! - [`MethodAccumulator`]: collects [`QuestionResult`]s and averages them.

use std::collections::{BTreeMap, HashMap, HashSet};

use kgrag_types::is_python_whitespace;

use crate::report::{Latency, MethodReport};

/// The cut-offs at which passage recall is reported (the keys of [`MethodReport::recall`]).
pub const RECALL_KS: [usize; 5] = [1, 2, 5, 10, 20];

/// SQuAD's answer normalisation, in its order: lowercase → delete every ASCII punctuation character
/// (Python's `string.punctuation`) → replace the whole words `a`, `an`, `the` with a space → split on white
/// space and join with single spaces.
///
/// Word boundaries follow Python's `re` on `str` patterns: word characters are Unicode alphanumerics and
/// `_` (here [`char::is_alphanumeric`], which differs from Python's `str.isalnum` only for a few combining
/// marks). White space is Python's `str.isspace`.
///
/// ```
/// assert_eq!(kgrag_eval::normalize_answer("The Answer."), "answer");
/// assert_eq!(kgrag_eval::normalize_answer("an-apple"), "anapple");
/// ```
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let without_punctuation: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    let without_articles = remove_articles(&without_punctuation);
    without_articles
        .split(is_python_whitespace)
        .filter(|token| !token.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `re.sub(r"\b(a|an|the)\b", " ", s)`: a match is exactly a maximal run of word characters that equals one
/// of the articles, so the runs are replaced one by one.
fn remove_articles(s: &str) -> String {
    fn push_word(out: &mut String, word: &str) {
        if matches!(word, "a" | "an" | "the") {
            out.push(' ');
        } else {
            out.push_str(word);
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut word_start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        if is_word_char(c) {
            if word_start.is_none() {
                word_start = Some(i);
            }
        } else {
            if let Some(start) = word_start.take() {
                push_word(&mut out, &s[start..i]);
            }
            out.push(c);
        }
    }
    if let Some(start) = word_start {
        push_word(&mut out, &s[start..]);
    }
    out
}

fn tokens(s: &str) -> Vec<String> {
    normalize_answer(s)
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Exact match: 1.0 if the normalised prediction equals the normalised form of any gold answer, else 0.0
/// (also 0.0 when `golds` is empty).
pub fn exact_match(prediction: &str, golds: &[String]) -> f64 {
    let prediction = normalize_answer(prediction);
    if golds.iter().any(|g| normalize_answer(g) == prediction) {
        1.0
    } else {
        0.0
    }
}

/// Token F1 between the normalised prediction and each gold answer, maximised over the golds (0.0 when
/// `golds` is empty). Tokens are the white-space split of the normalised text; the overlap is the multiset
/// intersection; no overlap (including an empty prediction) scores 0.
pub fn f1(prediction: &str, golds: &[String]) -> f64 {
    let predicted = tokens(prediction);
    golds
        .iter()
        .map(|gold| f1_tokens(&predicted, &tokens(gold)))
        .fold(0.0, f64::max)
}

fn f1_tokens(predicted: &[String], gold: &[String]) -> f64 {
    let mut gold_counts: HashMap<&str, usize> = HashMap::new();
    for t in gold {
        *gold_counts.entry(t.as_str()).or_insert(0) += 1;
    }
    let mut common = 0usize;
    for t in predicted {
        if let Some(n) = gold_counts.get_mut(t.as_str()) {
            if *n > 0 {
                *n -= 1;
                common += 1;
            }
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / predicted.len() as f64;
    let recall = common as f64 / gold.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Fractional passage recall at `k`: `|set(top k of retrieved) ∩ set(gold)| / |set(gold)|`, 0.0 when `gold`
/// is empty. Passages are compared as exact strings (HippoRAG compares `title + "\n" + text`).
pub fn recall_at_k(retrieved: &[String], gold: &[String], k: usize) -> f64 {
    let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
    if gold.is_empty() {
        return 0.0;
    }
    let top: HashSet<&str> = retrieved.iter().take(k).map(String::as_str).collect();
    top.intersection(&gold).count() as f64 / gold.len() as f64
}

/// The `q`-th percentile of `values` with numpy's default linear interpolation between the sorted values;
/// `q` is clamped to `0..=100`. `None` for empty input or a NaN `q`. NaN values sort last
/// ([`f64::total_cmp`]).
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() || q.is_nan() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let q = q.clamp(0.0, 100.0);
    let position = (sorted.len() - 1) as f64 * q / 100.0;
    let lower = position.floor() as usize;
    let upper = (lower + 1).min(sorted.len() - 1);
    let t = position - lower as f64;
    let (a, b) = (sorted[lower], sorted[upper]);
    if t == 0.0 {
        return Some(a);
    }
    // numpy's `_lerp`: the form that is exact at both ends.
    let diff = b - a;
    Some(if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    })
}

/// Rounds to 4 decimals, as HippoRAG rounds its pooled scores.
pub(crate) fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// What one method did for one question: the input of [`MethodAccumulator::add`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuestionResult {
    /// Retrieved passage contents (`title + "\n" + text`), best first.
    pub retrieved: Vec<String>,
    /// Gold passage contents.
    pub gold: Vec<String>,
    /// The reader's answer, when the run generated one.
    pub prediction: Option<String>,
    /// Gold answers (answer and aliases), used with `prediction`.
    pub answers: Vec<String>,
    /// Tokens of the context the method built.
    pub context_tokens: usize,
    /// Wall-clock time of the question, in milliseconds.
    pub latency_ms: f64,
    /// Whether the method failed on this question.
    pub failed: bool,
    /// Per-query numbers to average (see [`MethodReport::stats`]).
    pub stats: BTreeMap<String, f64>,
}

impl QuestionResult {
    /// A successful retrieval without an answer.
    pub fn retrieval(
        retrieved: Vec<String>,
        gold: Vec<String>,
        context_tokens: usize,
        latency_ms: f64,
    ) -> Self {
        Self {
            retrieved,
            gold,
            context_tokens,
            latency_ms,
            ..Self::default()
        }
    }

    /// A failed question that took `latency_ms` before failing.
    pub fn failure(latency_ms: f64) -> Self {
        Self {
            latency_ms,
            failed: true,
            ..Self::default()
        }
    }

    /// The same result with the reader's `prediction` and the gold `answers`.
    pub fn with_answer(mut self, prediction: impl Into<String>, answers: Vec<String>) -> Self {
        self.prediction = Some(prediction.into());
        self.answers = answers;
        self
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Row {
    recall: [f64; RECALL_KS.len()],
    answer: Option<(f64, f64)>,
    context_tokens: usize,
    latency_ms: f64,
    failed: bool,
    stats: BTreeMap<String, f64>,
}

/// Collects per-question results of one method and averages them into a [`MethodReport`].
///
/// - **recall@k** for each of [`RECALL_KS`]: mean over all questions, failed ones counting 0, rounded to
///   4 decimals (HippoRAG's pooling);
/// - **em / f1**: `None` when no question has a prediction; otherwise the mean over the questions with a
///   prediction plus the failed questions (which count 0), rounded to 4 decimals;
/// - **context_tokens_mean**: mean over the questions that did not fail (0 when all failed);
/// - **latency**: p50 and p95 over all questions, failed ones included (0 when there are none);
/// - **failures**: the number of failed questions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MethodAccumulator {
    rows: Vec<Row>,
}

impl MethodAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one question.
    pub fn add(&mut self, result: &QuestionResult) {
        let row = if result.failed {
            Row {
                recall: [0.0; RECALL_KS.len()],
                answer: None,
                context_tokens: 0,
                latency_ms: result.latency_ms,
                failed: true,
                stats: BTreeMap::new(),
            }
        } else {
            Row {
                recall: RECALL_KS.map(|k| recall_at_k(&result.retrieved, &result.gold, k)),
                answer: result
                    .prediction
                    .as_deref()
                    .map(|p| (exact_match(p, &result.answers), f1(p, &result.answers))),
                context_tokens: result.context_tokens,
                latency_ms: result.latency_ms,
                failed: false,
                stats: result.stats.clone(),
            }
        };
        self.rows.push(row);
    }

    /// Number of questions recorded.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no question was recorded.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The averages over the questions recorded so far.
    pub fn finish(&self) -> MethodReport {
        let n = self.rows.len();
        let mut recall = BTreeMap::new();
        for (i, k) in RECALL_KS.iter().enumerate() {
            let sum: f64 = self.rows.iter().map(|r| r.recall[i]).sum();
            let mean = if n == 0 { 0.0 } else { round4(sum / n as f64) };
            recall.insert(k.to_string(), mean);
        }

        let any_prediction = self.rows.iter().any(|r| r.answer.is_some());
        let (em, f1) = if any_prediction {
            let scored: Vec<(f64, f64)> = self
                .rows
                .iter()
                .filter_map(|r| if r.failed { Some((0.0, 0.0)) } else { r.answer })
                .collect();
            let count = scored.len() as f64;
            let em: f64 = scored.iter().map(|s| s.0).sum();
            let f1: f64 = scored.iter().map(|s| s.1).sum();
            (Some(round4(em / count)), Some(round4(f1 / count)))
        } else {
            (None, None)
        };

        let succeeded: Vec<&Row> = self.rows.iter().filter(|r| !r.failed).collect();
        let context_tokens_mean = if succeeded.is_empty() {
            0.0
        } else {
            succeeded
                .iter()
                .map(|r| r.context_tokens as f64)
                .sum::<f64>()
                / succeeded.len() as f64
        };

        let latencies: Vec<f64> = self.rows.iter().map(|r| r.latency_ms).collect();
        let latency_ms = Latency {
            p50: percentile(&latencies, 50.0).unwrap_or(0.0),
            p95: percentile(&latencies, 95.0).unwrap_or(0.0),
        };

        let after: Vec<f64> = succeeded
            .iter()
            .filter_map(|r| r.stats.get("embed_ms").map(|e| (r.latency_ms - e).max(0.0)))
            .collect();
        let latency_after_embedding_ms = (!after.is_empty()).then(|| Latency {
            p50: percentile(&after, 50.0).unwrap_or(0.0),
            p95: percentile(&after, 95.0).unwrap_or(0.0),
        });

        let mut stats: BTreeMap<String, f64> = BTreeMap::new();
        for r in &succeeded {
            for (k, v) in &r.stats {
                *stats.entry(k.clone()).or_insert(0.0) += v;
            }
        }
        for v in stats.values_mut() {
            *v = round4(*v / succeeded.len().max(1) as f64);
        }

        MethodReport {
            recall,
            context_tokens_mean,
            latency_ms,
            em,
            f1,
            failures: self.rows.iter().filter(|r| r.failed).count() as u64,
            stats,
            latency_after_embedding_ms,
            ..MethodReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn normalisation_cases() {
        assert_eq!(normalize_answer("The Answer."), "answer");
        assert_eq!(normalize_answer("  A  cat's   toy!"), "cats toy");
        assert_eq!(normalize_answer("theater"), "theater");
        assert_eq!(normalize_answer("an-apple"), "anapple");
        assert_eq!(normalize_answer("a a the an"), "");
        assert_eq!(normalize_answer("The_the"), "thethe");
        assert_eq!(normalize_answer("théa the"), "théa");
        assert_eq!(
            normalize_answer("tab\tand\x1cseparator"),
            "tab and separator"
        );
        assert_eq!(normalize_answer("G. Stanley Hall"), "g stanley hall");
        assert_eq!(normalize_answer(""), "");
    }

    #[test]
    fn exact_match_cases() {
        assert_eq!(exact_match("The Answer.", &s(&["answer"])), 1.0);
        assert_eq!(
            exact_match("stanley hall", &s(&["G. Stanley Hall", "Stanley Hall"])),
            1.0
        );
        assert_eq!(
            exact_match("Hall", &s(&["G. Stanley Hall", "Stanley Hall"])),
            0.0
        );
        assert_eq!(exact_match("anything", &[]), 0.0);
        assert_eq!(exact_match("", &s(&["x"])), 0.0);
        // An empty prediction matches a gold that normalises to nothing, as in SQuAD.
        assert_eq!(exact_match("", &s(&["The"])), 1.0);
    }

    #[test]
    fn f1_cases() {
        // pred tokens: big red dog; gold: red dog → P = 2/3, R = 1, F1 = 0.8.
        assert!(close(f1("the big red dog", &s(&["red dog"])), 0.8));
        assert!(close(f1("red dog", &s(&["red dog"])), 1.0));
        assert_eq!(f1("cat", &s(&["red dog"])), 0.0);
        // Max over aliases.
        assert!(close(
            f1("Stanley Hall", &s(&["G. Stanley Hall", "Stanley Hall"])),
            1.0
        ));
        assert!(close(
            f1("Hall", &s(&["G. Stanley Hall", "Stanley Hall"])),
            2.0 * 1.0 * 0.5 / 1.5
        ));
        // Multiset intersection: "dog dog" vs "dog" has one common token.
        assert!(close(f1("dog dog", &s(&["dog"])), 2.0 * 0.5 * 1.0 / 1.5));
        assert_eq!(f1("", &s(&["red dog"])), 0.0);
        assert_eq!(f1("", &s(&["the"])), 0.0);
        assert_eq!(f1("red", &[]), 0.0);
    }

    #[test]
    fn recall_cases() {
        let gold = s(&["g1", "g2", "g3", "g4"]);
        assert!(close(recall_at_k(&s(&["g1", "g2", "x"]), &gold, 2), 0.5));
        assert!(close(recall_at_k(&s(&["g1", "x", "g2"]), &gold, 2), 0.25));
        // Duplicates in the retrieved list count once.
        assert!(close(recall_at_k(&s(&["g1", "g1", "g2"]), &gold, 3), 0.5));
        // k beyond the list.
        assert!(close(
            recall_at_k(&s(&["g1", "g3", "g4", "g2"]), &gold, 20),
            1.0
        ));
        // Duplicate gold passages count once.
        assert!(close(
            recall_at_k(&s(&["g1"]), &s(&["g1", "g1", "g2"]), 1),
            0.5
        ));
        assert_eq!(recall_at_k(&s(&["g1"]), &[], 5), 0.0);
        assert_eq!(recall_at_k(&s(&["g1"]), &gold, 0), 0.0);
    }

    #[test]
    fn percentile_cases() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert!(close(percentile(&v, 50.0).unwrap(), 2.5));
        assert!(close(percentile(&v, 95.0).unwrap(), 3.85));
        assert!(close(percentile(&v, 0.0).unwrap(), 1.0));
        assert!(close(percentile(&v, 100.0).unwrap(), 4.0));
        assert_eq!(percentile(&[7.0], 95.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, f64::NAN), None);
        // NaN sorts last and does not break the sort.
        assert!(close(percentile(&[f64::NAN, 1.0, 2.0], 0.0).unwrap(), 1.0));
    }

    #[test]
    fn accumulator_with_failures_and_rounding() {
        let gold = s(&["g1", "g2", "g3"]);
        let mut acc = MethodAccumulator::new();
        assert!(acc.is_empty());
        // Question 1: 1 of 3 gold at rank 1, all three by rank 5.
        acc.add(&QuestionResult::retrieval(
            s(&["g1", "x", "g2", "y", "g3"]),
            gold.clone(),
            100,
            10.0,
        ));
        // Question 2: nothing relevant.
        acc.add(&QuestionResult::retrieval(
            s(&["x"]),
            gold.clone(),
            200,
            20.0,
        ));
        // Question 3: failed.
        acc.add(&QuestionResult::failure(30.0));
        assert_eq!(acc.len(), 3);
        let r = acc.finish();
        // (1/3 + 0 + 0) / 3 = 0.11111… → 0.1111
        assert_eq!(r.recall["1"], 0.1111);
        assert_eq!(r.recall["2"], 0.1111);
        // (1 + 0 + 0) / 3 = 0.33333… → 0.3333
        assert_eq!(r.recall["5"], 0.3333);
        assert_eq!(r.recall["20"], 0.3333);
        assert_eq!(r.recall.len(), 5);
        assert_eq!(r.failures, 1);
        assert!(close(r.context_tokens_mean, 150.0));
        assert!(close(r.latency_ms.p50, 20.0));
        assert!(close(r.latency_ms.p95, 29.0));
        assert_eq!(r.em, None);
        assert_eq!(r.f1, None);
    }

    #[test]
    fn accumulator_answers() {
        let mut acc = MethodAccumulator::new();
        let answers = s(&["G. Stanley Hall", "Stanley Hall"]);
        acc.add(
            &QuestionResult::retrieval(vec![], vec![], 0, 1.0)
                .with_answer("Stanley Hall", answers.clone()),
        );
        acc.add(&QuestionResult::retrieval(vec![], vec![], 0, 1.0).with_answer("Hall", answers));
        let r = acc.finish();
        assert_eq!(r.em, Some(0.5));
        // (1 + 2/3) / 2 = 0.8333…
        assert_eq!(r.f1, Some(0.8333));
        acc.add(&QuestionResult::failure(1.0));
        let r = acc.finish();
        assert_eq!(r.em, Some(0.3333));
        assert_eq!(r.f1, Some(0.5556));
    }

    #[test]
    fn empty_accumulator() {
        let r = MethodAccumulator::new().finish();
        assert_eq!(r.recall.len(), 5);
        assert!(r.recall.values().all(|v| *v == 0.0));
        assert_eq!(r.latency_ms.p50, 0.0);
        assert_eq!(r.failures, 0);
    }
}
