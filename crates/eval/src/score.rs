//! LeanRAG's absolute 1–10 answer scores (spec leanrag §7): the judge rates one answer on
//! Comprehensiveness, Empowerment, Diversity and Overall Quality; every answer is scored `repeats` times
//! (5 in the paper) and the mean per repeat is reported as the mean ± sample standard deviation over the
//! repeats.
//!
//! The reply must be `{"Comprehensiveness": {"score": "<1-10>", "Explanation": …}, "Empowerment": …,
//! "Diversity": …, "Overall Quality": …}`; a score is an integer from 1 to 10 given as a number or a string
//! (`"8"`, `"8/10"`); anything else — out of range, fractional, words — is rejected with the criterion named,
//! and the request is retried with a correction. Each repeat carries its own `seed`, so repeats are distinct
//! requests for the response cache.

use std::collections::BTreeMap;

use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message};
use serde::{Deserialize, Serialize};

/// The scored criteria, in report order.
pub const SCORE_CRITERIA: [ScoreCriterion; 4] = [
    ScoreCriterion::Comprehensiveness,
    ScoreCriterion::Empowerment,
    ScoreCriterion::Diversity,
    ScoreCriterion::OverallQuality,
];

/// One scored criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScoreCriterion {
    /// Detail and coverage of every aspect of the question.
    Comprehensiveness,
    /// How well the answer helps the reader understand and judge.
    Empowerment,
    /// Variety of perspectives and insights.
    Diversity,
    /// The judge's overall rating.
    OverallQuality,
}

impl ScoreCriterion {
    /// The key in the judge's JSON.
    pub fn key(self) -> &'static str {
        match self {
            ScoreCriterion::Comprehensiveness => "Comprehensiveness",
            ScoreCriterion::Empowerment => "Empowerment",
            ScoreCriterion::Diversity => "Diversity",
            ScoreCriterion::OverallQuality => "Overall Quality",
        }
    }
}

/// The scores of one judged answer.
pub type Scores = BTreeMap<ScoreCriterion, u8>;

/// The request scoring `answer`, for repeat `repeat` (its seed).
pub fn score_request(question: &str, answer: &str, repeat: u64) -> ChatRequest {
    let system =
        "You are a strict expert grader. You rate one answer to an open question on a 1 to 10 \
                  scale per criterion and justify each rating with evidence from the answer.";
    let user = format!(
        "Rate the answer below on four criteria, each an integer from 1 to 10.\n\
         - Comprehensiveness: how much detail it gives and how fully it covers the question.\n\
         - Empowerment: how well it helps the reader understand the topic and reach informed judgements.\n\
         - Diversity: how varied and rich its perspectives and insights are.\n\
         - Overall Quality: your overall rating from the three.\n\
         Scale: 1-2 clearly deficient; 3-4 below average; 5-6 average; 7-8 above average with minor \
         shortcomings; 9-10 outstanding. Each explanation must point to parts of the answer.\n\n\
         Question: {question}\n\n\
         Answer:\n{answer}\n\n\
         Reply with only this JSON object:\n\
         {{\"Comprehensiveness\": {{\"score\": \"<1-10>\", \"Explanation\": \"...\"}}, \
         \"Empowerment\": {{\"score\": \"<1-10>\", \"Explanation\": \"...\"}}, \
         \"Diversity\": {{\"score\": \"<1-10>\", \"Explanation\": \"...\"}}, \
         \"Overall Quality\": {{\"score\": \"<1-10>\", \"Explanation\": \"...\"}}}}"
    );
    ChatRequest {
        messages: vec![Message::system(system), Message::user(user)],
        settings: GenerationSettings {
            temperature: Some(0.0),
            seed: Some(repeat),
            ..GenerationSettings::default()
        },
    }
}

fn score_of(v: &serde_json::Value) -> std::result::Result<u8, String> {
    let raw = match v {
        serde_json::Value::Object(m) => m
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("score"))
            .map(|(_, v)| v)
            .ok_or("no \"score\"")?,
        other => other,
    };
    let n: i64 = match raw {
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => i,
            None => return Err(format!("score {n} is not a whole number")),
        },
        serde_json::Value::String(s) => {
            let s = s.trim();
            let s = s.strip_suffix("/10").unwrap_or(s).trim();
            s.parse::<i64>()
                .map_err(|_| format!("score {s:?} is not a whole number"))?
        }
        other => return Err(format!("score {other} is not a number")),
    };
    u8::try_from(n)
        .ok()
        .filter(|s| (1..=10).contains(s))
        .ok_or_else(|| format!("score {n} is outside 1-10"))
}

/// Reads a scorer reply. See the module docs.
pub fn parse_scores(reply: &str) -> std::result::Result<Scores, String> {
    let start = reply.find('{').ok_or("no JSON object in the reply")?;
    let end = reply.rfind('}').ok_or("no JSON object in the reply")?;
    if end < start {
        return Err("no JSON object in the reply".into());
    }
    let value: serde_json::Value = serde_json::from_str(&reply[start..=end])
        .map_err(|e| format!("the JSON object does not parse: {e}"))?;
    let map = value.as_object().ok_or("the reply is not a JSON object")?;
    let mut out = Scores::new();
    for c in SCORE_CRITERIA {
        let entry = map
            .iter()
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(c.key()))
            .map(|(_, v)| v)
            .ok_or_else(|| format!("no \"{}\"", c.key()))?;
        let s = score_of(entry).map_err(|e| format!("\"{}\": {e}", c.key()))?;
        out.insert(c, s);
    }
    Ok(out)
}

/// What scoring one answer did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreOutcome {
    /// Scores per repeat (`None`: that repeat failed).
    pub repeats: Vec<Option<Scores>>,
    /// Corrective retries used.
    pub retries: usize,
    /// Failed repeats, with the reason.
    pub failures: Vec<String>,
}

/// Scores `answer` `repeats` times, each with up to `max_retries` corrective retries.
pub async fn score_answer(
    judge: &dyn ChatModel,
    question: &str,
    answer: &str,
    repeats: u64,
    max_retries: usize,
) -> ScoreOutcome {
    let mut out = ScoreOutcome::default();
    for r in 0..repeats {
        let mut request = score_request(question, answer, r);
        let mut result = None;
        let mut last = String::new();
        for attempt in 0..=max_retries {
            match judge.chat(&request).await {
                Ok(reply) => match parse_scores(&reply.content) {
                    Ok(s) => {
                        out.retries += attempt;
                        result = Some(s);
                        break;
                    }
                    Err(problem) => {
                        request.messages.push(Message::assistant(reply.content));
                        request.messages.push(Message::user(format!(
                            "That reply cannot be used: {problem}. Reply again with only the JSON object, \
                             every \"score\" a whole number from 1 to 10."
                        )));
                        last = problem;
                    }
                },
                Err(e) => {
                    last = e.to_string();
                    break;
                }
            }
        }
        if result.is_none() {
            out.failures.push(format!("repeat {r}: {last}"));
        }
        out.repeats.push(result);
    }
    out
}

/// Mean ± sample standard deviation of one criterion over the repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanSd {
    /// Mean over repeats of the per-repeat mean over questions.
    pub mean: f64,
    /// Sample standard deviation of the per-repeat means (0 with one repeat).
    pub sd: f64,
    /// Repeats that had at least one score.
    pub repeats: usize,
}

/// Aggregates the outcomes of every question of one method (spec leanrag §7, Ours): per repeat r, the mean
/// over the questions scored in r; then the mean and sample standard deviation of those means.
pub fn aggregate_scores(outcomes: &[ScoreOutcome]) -> BTreeMap<ScoreCriterion, MeanSd> {
    let repeats = outcomes.iter().map(|o| o.repeats.len()).max().unwrap_or(0);
    let mut out = BTreeMap::new();
    for c in SCORE_CRITERIA {
        let means: Vec<f64> = (0..repeats)
            .filter_map(|r| {
                let scores: Vec<f64> = outcomes
                    .iter()
                    .filter_map(|o| o.repeats.get(r)?.as_ref()?.get(&c).copied())
                    .map(f64::from)
                    .collect();
                (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64)
            })
            .collect();
        let k = means.len();
        let mean = if k == 0 {
            0.0
        } else {
            means.iter().sum::<f64>() / k as f64
        };
        let sd = if k < 2 {
            0.0
        } else {
            (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1) as f64).sqrt()
        };
        out.insert(
            c,
            MeanSd {
                mean,
                sd,
                repeats: k,
            },
        );
    }
    out
}

/// The report entries of one method's scores: [`aggregate_scores`] by criterion name, and the number of
/// failed repeats.
pub fn score_summaries(
    outcomes: &[ScoreOutcome],
) -> (BTreeMap<String, crate::report::ScoreSummary>, u64) {
    let summaries = aggregate_scores(outcomes)
        .into_iter()
        .filter(|(_, m)| m.repeats > 0)
        .map(|(c, m)| {
            (
                c.key().to_owned(),
                crate::report::ScoreSummary {
                    mean: crate::metrics::round4(m.mean),
                    sd: crate::metrics::round4(m.sd),
                    repeats: m.repeats as u64,
                },
            )
        })
        .collect();
    let failures = outcomes.iter().map(|o| o.failures.len() as u64).sum();
    (summaries, failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::ScriptedChatModel;

    fn reply(s: [&str; 4]) -> String {
        format!(
            "{{\"Comprehensiveness\": {{\"score\": {}, \"Explanation\": \"e\"}}, \"Empowerment\": {{\"score\": {}}}, \
             \"Diversity\": {{\"score\": {}}}, \"Overall Quality\": {{\"score\": {}}}}}",
            s[0], s[1], s[2], s[3]
        )
    }

    #[test]
    fn scores_are_whole_numbers_from_one_to_ten() {
        let s = parse_scores(&reply(["\"8\"", "7", "\"9/10\"", "\" 10 \""])).unwrap();
        assert_eq!(
            s.values().copied().collect::<Vec<_>>(),
            [8, 7, 9, 10],
            "Comprehensiveness, Empowerment, Diversity, Overall Quality"
        );
        for (bad, needle) in [
            (reply(["11", "7", "7", "7"]), "outside 1-10"),
            (reply(["0", "7", "7", "7"]), "outside 1-10"),
            (reply(["\"seven\"", "7", "7", "7"]), "not a whole number"),
            (reply(["7.5", "7", "7", "7"]), "not a whole number"),
            (reply(["null", "7", "7", "7"]), "not a number"),
        ] {
            let err = parse_scores(&bad).unwrap_err();
            assert!(
                err.contains("Comprehensiveness") && err.contains(needle),
                "{err}"
            );
        }
        let err = parse_scores("{\"Comprehensiveness\": {\"score\": 5}}").unwrap_err();
        assert!(err.contains("Empowerment"), "{err}");
    }

    #[tokio::test]
    async fn repeats_are_distinct_requests_retried_and_aggregated() {
        let judge = ScriptedChatModel::new([
            reply(["8", "8", "8", "8"]),
            reply(["12", "8", "8", "8"]),
            reply(["6", "6", "6", "6"]),
        ]);
        let a = score_answer(&judge, "Q?", "answer", 2, 2).await;
        assert_eq!((a.retries, a.failures.len()), (1, 0));
        let requests = judge.requests();
        assert_eq!(requests[0].settings.seed, Some(0));
        assert_eq!(requests[1].settings.seed, Some(1));
        assert!(requests[2]
            .messages
            .last()
            .unwrap()
            .content
            .contains("outside 1-10"));
        // A second question: repeat 0 fails for good (two unusable replies), repeat 1 scores 10.
        let judge = ScriptedChatModel::new([
            "no json".to_owned(),
            "still none".to_owned(),
            reply(["10", "10", "10", "10"]),
        ]);
        let b = score_answer(&judge, "Q2?", "answer", 2, 1).await;
        assert_eq!(b.repeats[0], None);
        assert_eq!(b.failures.len(), 1);
        // Repeat means: r0 = 8 (a only), r1 = (6 + 10) / 2 = 8 → mean 8, sd 0; Overall the same.
        let agg = aggregate_scores(&[a, b]);
        let o = agg[&ScoreCriterion::OverallQuality];
        assert_eq!((o.mean, o.sd, o.repeats), (8.0, 0.0, 2));
        let one = ScoreOutcome {
            repeats: vec![
                Some(SCORE_CRITERIA.iter().map(|c| (*c, 7)).collect()),
                Some(SCORE_CRITERIA.iter().map(|c| (*c, 9)).collect()),
            ],
            ..ScoreOutcome::default()
        };
        let agg = aggregate_scores(&[one]);
        let c = agg[&ScoreCriterion::Comprehensiveness];
        assert_eq!(c.mean, 8.0);
        assert!((c.sd - 2f64.sqrt()).abs() < 1e-12);
    }
}
