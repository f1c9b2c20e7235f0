//! The pairwise LLM judge of HiRAG's and LightRAG's evaluation (spec hirag §8): two answers to one question
//! compared on Comprehensiveness, Empowerment, Diversity and an overall winner, asked in both orders, and
//! the win rates aggregated from the verdicts.
//!
//! - [`judge_request`]: our prompt; the reply must be the spec's JSON
//!   (`{"Comprehensiveness": {"Winner": "Answer 1" | "Answer 2", "Explanation": …}, "Empowerment": …,
//!   "Diversity": …, "Overall Winner": …}`), temperature 0.
//! - [`parse_verdict`]: tolerant — code fences, text around the object, `"answer 2"`, `"2"` — and an error
//!   naming what is missing, never a guess.
//! - [`judge_pair`]: both orders for one question, one corrective retry per order when the reply does not
//!   parse; failures are counted and leave their judgment out.
//! - [`win_rates`] counts by each judgment's explicit `swapped` flag; [`positional_win_rates`] applies the
//!   reference's rule to its verdict files, which carry no request index (the first `n` lines have method A
//!   as Answer 1, the rest swapped; the split stays at `n` even when lines are missing).

use std::collections::BTreeMap;
use std::path::Path;

use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message};
use serde::{Deserialize, Serialize};

use crate::Result;

/// The judged criteria, in report order.
pub const CRITERIA: [Criterion; 4] = [
    Criterion::Comprehensiveness,
    Criterion::Empowerment,
    Criterion::Diversity,
    Criterion::Overall,
];

/// One criterion of a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Criterion {
    /// How much detail covers every aspect of the question.
    Comprehensiveness,
    /// How well the answer helps the reader understand and judge.
    Empowerment,
    /// How varied the perspectives and insights are.
    Diversity,
    /// The judge's overall choice.
    Overall,
}

impl Criterion {
    /// The key of the criterion in the judge's JSON.
    pub fn key(self) -> &'static str {
        match self {
            Criterion::Comprehensiveness => "Comprehensiveness",
            Criterion::Empowerment => "Empowerment",
            Criterion::Diversity => "Diversity",
            Criterion::Overall => "Overall Winner",
        }
    }

    /// The criterion's name in reports: the JSON key, with `Overall` for `Overall Winner`.
    pub fn label(self) -> &'static str {
        match self {
            Criterion::Overall => "Overall",
            other => other.key(),
        }
    }
}

/// Which answer of the request won.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Winner {
    /// The answer shown first.
    Answer1,
    /// The answer shown second.
    Answer2,
}

/// The winners of one request, by criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Winner per criterion (every criterion of [`CRITERIA`] is present).
    pub winners: BTreeMap<Criterion, Winner>,
}

impl Verdict {
    /// The winner on `c`.
    pub fn winner(&self, c: Criterion) -> Option<Winner> {
        self.winners.get(&c).copied()
    }
}

/// One judged request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgment {
    /// The question's index.
    pub query_index: usize,
    /// Whether method B was shown as Answer 1.
    pub swapped: bool,
    /// The judge's verdict.
    pub verdict: Verdict,
}

/// The request for one comparison (`first` is shown as Answer 1).
pub fn judge_request(question: &str, first: &str, second: &str) -> ChatRequest {
    let system =
        "You are an impartial expert grader of answers to open questions. You compare two answers \
                  to the same question on three criteria and pick an overall winner.";
    let user = format!(
        "Judge the two answers below against these criteria.\n\
         - Comprehensiveness: how much detail the answer gives and how fully it covers every aspect of the \
         question.\n\
         - Diversity: how varied and rich the perspectives and insights it offers are.\n\
         - Empowerment: how well it helps the reader understand the topic and reach informed judgements.\n\n\
         For each criterion name the better answer and say why in one or two sentences; then name the \
         overall winner from the three. The order in which the answers appear says nothing about their \
         quality: judge the content only.\n\n\
         Question: {question}\n\n\
         **Answer 1:**\n{first}\n\n\
         **Answer 2:**\n{second}\n\n\
         Reply with only this JSON object:\n\
         {{\"Comprehensiveness\": {{\"Winner\": \"Answer 1\" or \"Answer 2\", \"Explanation\": \"...\"}}, \
         \"Empowerment\": {{\"Winner\": \"...\", \"Explanation\": \"...\"}}, \
         \"Diversity\": {{\"Winner\": \"...\", \"Explanation\": \"...\"}}, \
         \"Overall Winner\": {{\"Winner\": \"...\", \"Explanation\": \"...\"}}}}"
    );
    ChatRequest {
        messages: vec![Message::system(system), Message::user(user)],
        settings: GenerationSettings {
            temperature: Some(0.0),
            max_tokens: Some(6400),
            ..GenerationSettings::default()
        },
    }
}

fn winner_of(v: &serde_json::Value) -> Option<Winner> {
    let s = match v {
        serde_json::Value::Object(m) => m
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("winner"))
            .map(|(_, v)| v)?
            .as_str()?,
        serde_json::Value::String(s) => s.as_str(),
        _ => return None,
    };
    let s: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    match s.as_str() {
        "answer1" | "1" => Some(Winner::Answer1),
        "answer2" | "2" => Some(Winner::Answer2),
        _ => None,
    }
}

/// The first balanced `{…}` of `text` (braces inside strings ignored).
fn first_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, c) in text[start..].char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(&text[start..start + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Reads a judge reply. See the module docs.
pub fn parse_verdict(reply: &str) -> std::result::Result<Verdict, String> {
    let object = first_object(reply).ok_or("no JSON object in the reply")?;
    let value: serde_json::Value =
        serde_json::from_str(object).map_err(|e| format!("the JSON object does not parse: {e}"))?;
    let map = value.as_object().ok_or("the reply is not a JSON object")?;
    let mut winners = BTreeMap::new();
    for c in CRITERIA {
        let entry = map
            .iter()
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(c.key()))
            .map(|(_, v)| v)
            .ok_or_else(|| format!("no \"{}\"", c.key()))?;
        let w = winner_of(entry).ok_or_else(|| {
            format!(
                "\"{}\" names no winner (\"Answer 1\" or \"Answer 2\")",
                c.key()
            )
        })?;
        winners.insert(c, w);
    }
    Ok(Verdict { winners })
}

/// Reads a reference verdict file (one judge JSON object per line); unparsable lines are errors naming the
/// line.
pub fn read_verdict_file(path: &Path) -> Result<Vec<Verdict>> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::error::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            parse_verdict(l).map_err(|e| {
                crate::error::invalid(format!("{} line {}: {e}", path.display(), i + 1))
            })
        })
        .collect()
}

/// Win rates of method A against method B, per criterion, in percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WinRates {
    /// Verdicts counted.
    pub judgments: usize,
    /// A's wins per criterion.
    pub wins: BTreeMap<Criterion, usize>,
    /// A's win percentage per criterion (B's is 100 minus it).
    pub percent: BTreeMap<Criterion, f64>,
}

fn rates(judgments: usize, wins: BTreeMap<Criterion, usize>) -> WinRates {
    let percent = wins
        .iter()
        .map(|(c, w)| {
            let p = if judgments == 0 {
                0.0
            } else {
                100.0 * *w as f64 / judgments as f64
            };
            (*c, p)
        })
        .collect();
    WinRates {
        judgments,
        wins,
        percent,
    }
}

/// A's win rates from judgments that say whether they were swapped.
pub fn win_rates(judgments: &[Judgment]) -> WinRates {
    let mut wins: BTreeMap<Criterion, usize> = CRITERIA.iter().map(|c| (*c, 0)).collect();
    for j in judgments {
        for c in CRITERIA {
            let a_won = matches!(
                (j.verdict.winner(c), j.swapped),
                (Some(Winner::Answer1), false) | (Some(Winner::Answer2), true)
            );
            if a_won {
                *wins.entry(c).or_default() += 1;
            }
        }
    }
    rates(judgments.len(), wins)
}

/// A's win rates from a reference verdict list: positions `< n` had A as Answer 1, the others B.
pub fn positional_win_rates(verdicts: &[Verdict], n: usize) -> WinRates {
    let judgments: Vec<Judgment> = verdicts
        .iter()
        .enumerate()
        .map(|(i, v)| Judgment {
            query_index: if i < n { i } else { i - n },
            swapped: i >= n,
            verdict: v.clone(),
        })
        .collect();
    win_rates(&judgments)
}

/// What judging one question did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairOutcome {
    /// The judgments obtained (up to two: A first, then swapped).
    pub judgments: Vec<Judgment>,
    /// Requests whose reply parsed only after the corrective retry.
    pub retried: usize,
    /// Requests that failed (model error, or no parsable verdict after the retry), with the reason.
    pub failures: Vec<String>,
}

/// Judges `answer_a` against `answer_b` for question `query_index` in both orders. See the module docs.
pub async fn judge_pair(
    judge: &dyn ChatModel,
    query_index: usize,
    question: &str,
    answer_a: &str,
    answer_b: &str,
) -> PairOutcome {
    let mut out = PairOutcome::default();
    for swapped in [false, true] {
        let (first, second) = if swapped {
            (answer_b, answer_a)
        } else {
            (answer_a, answer_b)
        };
        let request = judge_request(question, first, second);
        let reply = match judge.chat(&request).await {
            Ok(r) => r.content,
            Err(e) => {
                out.failures
                    .push(format!("question {query_index} (swapped: {swapped}): {e}"));
                continue;
            }
        };
        match parse_verdict(&reply) {
            Ok(verdict) => out.judgments.push(Judgment {
                query_index,
                swapped,
                verdict,
            }),
            Err(problem) => {
                let mut retry = request.clone();
                retry.messages.push(Message::assistant(reply));
                retry.messages.push(Message::user(format!(
                    "That reply cannot be used: {problem}. Reply again with only the JSON object, every \
                     \"Winner\" being \"Answer 1\" or \"Answer 2\"."
                )));
                let parsed = match judge.chat(&retry).await {
                    Ok(r) => parse_verdict(&r.content),
                    Err(e) => Err(e.to_string()),
                };
                match parsed {
                    Ok(verdict) => {
                        out.retried += 1;
                        out.judgments.push(Judgment {
                            query_index,
                            swapped,
                            verdict,
                        });
                    }
                    Err(e) => out
                        .failures
                        .push(format!("question {query_index} (swapped: {swapped}): {e}")),
                }
            }
        }
    }
    out
}

/// The report entry of one method judged against the baseline: the win rates of its judgments (the
/// method being answer A of [`judge_pair`]), retries and failures.
pub fn pairwise_report(outcomes: &[PairOutcome]) -> crate::report::PairwiseReport {
    let judgments: Vec<Judgment> = outcomes
        .iter()
        .flat_map(|o| o.judgments.iter().cloned())
        .collect();
    let rates = win_rates(&judgments);
    crate::report::PairwiseReport {
        judgments: judgments.len() as u64,
        retried: outcomes.iter().map(|o| o.retried as u64).sum(),
        failures: outcomes.iter().map(|o| o.failures.len() as u64).sum(),
        win_rate: if judgments.is_empty() {
            BTreeMap::new()
        } else {
            rates
                .percent
                .iter()
                .map(|(c, p)| (c.label().to_owned(), crate::metrics::round4(*p)))
                .collect()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::ScriptedChatModel;

    fn reply(w: [&str; 4]) -> String {
        format!(
            "```json\n{{\"Comprehensiveness\": {{\"Winner\": \"{}\", \"Explanation\": \"x {{ y }}\"}}, \
             \"Empowerment\": {{\"Winner\": \"{}\", \"Explanation\": \"\"}}, \
             \"Diversity\": {{\"Winner\": \"{}\", \"Explanation\": \"\"}}, \
             \"Overall Winner\": {{\"Winner\": \"{}\", \"Explanation\": \"\"}}}}\n```\nDone.",
            w[0], w[1], w[2], w[3]
        )
    }

    /// HiRAG's published win rates from its verdict files (spec hirag §8, §11), and the wrong split.
    #[test]
    fn win_rates_reproduce_hirag_published_numbers() {
        let cases = [
            (
                "mix_eval_hi_naive_result_openai.jsonl",
                130,
                259,
                [216, 229, 226, 227],
                [83.4, 88.4, 87.3, 87.6],
            ),
            (
                "mix_eval_hi_graphrag_result_openai.jsonl",
                130,
                259,
                [150, 168, 154, 166],
                [57.9, 64.9, 59.5, 64.1],
            ),
            (
                "cs_eval_hi_graphrag_result_openai.jsonl",
                100,
                200,
                [119, 123, 139, 128],
                [59.5, 61.5, 69.5, 64.0],
            ),
        ];
        for (file, n, t, wins, percent) in cases {
            let Some(path) = kgrag_types::testing::data_file(&format!("ultradomain-mix/{file}"))
            else {
                return;
            };
            let verdicts = read_verdict_file(&path).unwrap();
            assert_eq!(verdicts.len(), t, "{file}");
            let r = positional_win_rates(&verdicts, n);
            for (i, c) in CRITERIA.iter().enumerate() {
                assert_eq!(r.wins[c], wins[i], "{file} {c:?}");
                assert_eq!(
                    format!("{:.1}", r.percent[c]),
                    format!("{:.1}", percent[i]),
                    "{file} {c:?}"
                );
            }
        }
        // Splitting at T/2 instead of N is the classic mistake: it does not give the published numbers.
        let Some(path) = kgrag_types::testing::data_file(
            "ultradomain-mix/mix_eval_hi_naive_result_openai.jsonl",
        ) else {
            return;
        };
        let r = positional_win_rates(&read_verdict_file(&path).unwrap(), 129);
        let got: Vec<String> = CRITERIA
            .iter()
            .map(|c| format!("{:.1}", r.percent[c]))
            .collect();
        assert_eq!(got, ["83.8", "88.8", "87.6", "88.0"]);
    }

    #[test]
    fn verdicts_parse_tolerantly_and_fail_by_name() {
        let v = parse_verdict(&reply(["Answer 1", "answer 2", "2", "Answer 1"])).unwrap();
        assert_eq!(
            v.winner(Criterion::Comprehensiveness),
            Some(Winner::Answer1)
        );
        assert_eq!(v.winner(Criterion::Empowerment), Some(Winner::Answer2));
        assert_eq!(v.winner(Criterion::Diversity), Some(Winner::Answer2));
        assert_eq!(v.winner(Criterion::Overall), Some(Winner::Answer1));
        let err = parse_verdict(&reply(["Answer 1", "Answer 3", "1", "1"])).unwrap_err();
        assert!(err.contains("Empowerment"), "{err}");
        let err = parse_verdict("{\"Comprehensiveness\": {\"Winner\": \"Answer 1\"}}").unwrap_err();
        assert!(err.contains("Empowerment"), "{err}");
        assert!(parse_verdict("no json here").is_err());
        assert!(parse_verdict("{\"a\": ").is_err());
    }

    #[tokio::test]
    async fn both_orders_retry_once_and_count_failures() {
        // A first: parses; swapped: garbage, then a good retry.
        let judge = ScriptedChatModel::new([
            reply(["Answer 1", "Answer 1", "Answer 2", "Answer 1"]),
            "I think the first one is better.".to_owned(),
            reply(["Answer 2", "Answer 2", "Answer 2", "Answer 2"]),
        ]);
        let out = judge_pair(&judge, 7, "Q?", "A's answer", "B's answer").await;
        assert_eq!(out.judgments.len(), 2);
        assert_eq!((out.retried, out.failures.len()), (1, 0));
        assert!(!out.judgments[0].swapped && out.judgments[1].swapped);
        let requests = judge.requests();
        assert_eq!(requests.len(), 3);
        // The swap shows B first; the retry carries the bad reply and names the problem.
        assert!(
            requests[1].messages[1].content.find("B's answer")
                < requests[1].messages[1].content.find("A's answer")
        );
        assert_eq!(requests[2].messages.len(), 4);
        assert!(requests[2].messages[3].content.contains("no JSON object"));
        // A won everything: first verdict A = Answer 1 except Diversity; swapped verdict Answer 2 = A.
        let r = win_rates(&out.judgments);
        assert_eq!(r.wins[&Criterion::Comprehensiveness], 2);
        assert_eq!(r.wins[&Criterion::Diversity], 1);
        assert_eq!(r.percent[&Criterion::Overall], 100.0);

        // Broken twice: a failure, never a guessed verdict.
        let judge = ScriptedChatModel::new(["nope", "still nope", "{}", "{}"]);
        let out = judge_pair(&judge, 0, "Q?", "a", "b").await;
        assert!(out.judgments.is_empty());
        assert_eq!(out.failures.len(), 2);
        assert_eq!(win_rates(&out.judgments).judgments, 0);
    }
}
