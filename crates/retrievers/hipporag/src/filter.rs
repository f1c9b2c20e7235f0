//! The recognition-memory filter (spec §5.3): one chat call that keeps the candidate facts needed to answer
//! a question, in a DSPy-style section format, mapped back onto the candidates by Ratcliff–Obershelp
//! similarity (Python's `difflib`).

use std::collections::HashMap;

use kgrag_openie::lenient::{parse_value, strip_fences};
use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message, Triple};
use serde_json::Value;

use crate::prompts::{FILTER_DEMOS, FILTER_SYSTEM};
use crate::HippoConfig;

/// The result of one filter call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilterOutcome {
    /// Positions of the kept candidates, in the model's order (duplicates possible, as in the reference).
    pub kept: Vec<usize>,
    /// Why nothing could be kept: the chat error or the parse problem (`None` also when the model chose
    /// `{"fact": []}`).
    pub error: Option<String>,
}

/// A fact list as the filter shows it: `{"fact": [["s", "p", "o"], ...]}` (JSON with Python's spacing).
pub fn fact_json<S: AsRef<str>>(facts: &[Vec<S>]) -> String {
    let rows: Vec<String> = facts
        .iter()
        .map(|f| {
            let parts: Vec<String> = f
                .iter()
                .map(|p| serde_json::to_string(p.as_ref()).unwrap_or_else(|_| "\"\"".to_owned()))
                .collect();
            format!("[{}]", parts.join(", "))
        })
        .collect();
    format!("{{\"fact\": [{}]}}", rows.join(", "))
}

fn triple_parts(t: &Triple) -> Vec<&str> {
    vec![t.subject(), t.predicate(), t.object()]
}

fn user_turn(question: &str, facts: &str) -> String {
    format!(
        "[[ ## question ## ]]\n{question}\n\n[[ ## fact_before_filter ## ]]\n{facts}\n\n\
         Respond with the field `[[ ## fact_after_filter ## ]]`, then end with the marker \
         `[[ ## completed ## ]]`."
    )
}

fn assistant_turn(facts: &str) -> String {
    format!("[[ ## fact_after_filter ## ]]\n{facts}\n\n[[ ## completed ## ]]")
}

/// The filter's chat request: system text, the ten demonstrations as user/assistant pairs, then the
/// question with its candidates. Temperature and token limit from `config`.
pub fn filter_request(question: &str, candidates: &[Triple], config: &HippoConfig) -> ChatRequest {
    let mut messages = vec![Message::system(FILTER_SYSTEM)];
    for demo in &FILTER_DEMOS {
        let cands: Vec<Vec<&str>> = demo.candidates.iter().map(|c| c.to_vec()).collect();
        let kept: Vec<Vec<&str>> = demo.kept.iter().map(|c| c.to_vec()).collect();
        messages.push(Message::user(user_turn(demo.question, &fact_json(&cands))));
        messages.push(Message::assistant(assistant_turn(&fact_json(&kept))));
    }
    let cands: Vec<Vec<&str>> = candidates.iter().map(triple_parts).collect();
    messages.push(Message::user(user_turn(question, &fact_json(&cands))));
    ChatRequest {
        messages,
        settings: GenerationSettings {
            temperature: Some(config.llm_temperature),
            max_tokens: Some(config.filter_max_tokens),
            ..GenerationSettings::default()
        },
    }
}

/// Splits a reply into its `[[ ## name ## ]]` sections (name → text up to the next marker, trimmed).
pub fn sections(reply: &str) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in reply.lines() {
        let l = line.trim();
        if let Some(name) = l
            .strip_prefix("[[ ## ")
            .and_then(|r| r.strip_suffix(" ## ]]"))
        {
            if let Some((n, body)) = current.take() {
                out.entry(n)
                    .or_insert_with(|| body.join("\n").trim().to_owned());
            }
            current = Some((name.trim().to_owned(), Vec::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push(line);
        }
    }
    if let Some((n, body)) = current {
        out.entry(n)
            .or_insert_with(|| body.join("\n").trim().to_owned());
    }
    out
}

/// Parses the facts of a filter reply (spec §5.3): the `fact_after_filter` section (the first one), code
/// fences removed, parsed as strict JSON or else the Python-literal subset, shaped
/// `{"fact": [[str, ...], ...]}`. Anything else — no section, prose, a cut-off reply, a non-string element —
/// is an error (the caller keeps nothing and falls back to dense retrieval).
pub fn parse_reply(reply: &str) -> Result<Vec<Vec<String>>, String> {
    let secs = sections(reply);
    let body = secs
        .get("fact_after_filter")
        .ok_or_else(|| "the reply has no [[ ## fact_after_filter ## ]] section".to_owned())?;
    let body = strip_fences(body);
    let value = parse_value(body.trim()).ok_or_else(|| {
        "the fact_after_filter section is neither JSON nor a Python literal".to_owned()
    })?;
    let Value::Object(mut object) = value else {
        return Err("the fact_after_filter section is not an object".to_owned());
    };
    let Some(Value::Array(items)) = object.remove("fact") else {
        return Err("the fact_after_filter object has no \"fact\" list".to_owned());
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Array(parts) => parts
                .into_iter()
                .map(|p| match p {
                    Value::String(s) => Ok(s),
                    other => Err(format!("a fact element is not a string: {other}")),
                })
                .collect(),
            other => Err(format!("a fact is not a list: {other}")),
        })
        .collect()
}

/// Python's tuple repr of a list of strings, as the candidates are rendered.
fn render_parts(parts: &[String]) -> String {
    let quoted: Vec<String> = parts.iter().map(|p| format!("'{p}'")).collect();
    if quoted.len() == 1 {
        format!("({},)", quoted[0])
    } else {
        format!("({})", quoted.join(", "))
    }
}

/// Maps generated facts onto candidates: each to the candidate with the highest [`ratio`] of the rendered
/// strings (ties: the earlier candidate), in the generated order, duplicates kept.
pub fn map_to_candidates(generated: &[Vec<String>], candidates: &[Triple]) -> Vec<usize> {
    if candidates.is_empty() {
        return Vec::new();
    }
    let rendered: Vec<String> = candidates.iter().map(Triple::render).collect();
    generated
        .iter()
        .map(|g| {
            let word = render_parts(g);
            let mut best = (0usize, f64::NEG_INFINITY);
            for (i, c) in rendered.iter().enumerate() {
                let r = ratio(c, &word);
                if r > best.1 {
                    best = (i, r);
                }
            }
            best.0
        })
        .collect()
}

/// Runs the filter on `candidates`. Never fails: a chat error or an unparsable reply keeps nothing and is
/// reported in [`FilterOutcome::error`] (the caller then falls back to dense retrieval).
pub async fn recognise(
    chat: &dyn ChatModel,
    question: &str,
    candidates: &[Triple],
    config: &HippoConfig,
) -> FilterOutcome {
    if candidates.is_empty() {
        return FilterOutcome::default();
    }
    let request = filter_request(question, candidates, config);
    let reply = match chat.chat(&request).await {
        Ok(r) => r.content,
        Err(e) => {
            return FilterOutcome {
                kept: Vec::new(),
                error: Some(format!("filter call failed: {e}")),
            }
        }
    };
    match parse_reply(&reply) {
        Ok(facts) => FilterOutcome {
            kept: map_to_candidates(&facts, candidates),
            error: None,
        },
        Err(e) => FilterOutcome {
            kept: Vec::new(),
            error: Some(e),
        },
    }
}

/// `difflib.SequenceMatcher(None, a, b).ratio()`: `2·M / (|a| + |b|)` over code points, where `M` is the
/// number of characters in the matching blocks found by the Ratcliff–Obershelp recursion, with Python's
/// "autojunk" heuristic on `b` (when `b` has ≥ 200 characters, characters occurring more than
/// `|b|/100 + 1` times do not start matches). 1.0 for two empty strings.
pub fn ratio(a: &str, b: &str) -> f64 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    let mut b2j: HashMap<char, Vec<usize>> = HashMap::new();
    for (j, &c) in b.iter().enumerate() {
        b2j.entry(c).or_default().push(j);
    }
    if b.len() >= 200 {
        let ntest = b.len() / 100 + 1;
        b2j.retain(|_, idx| idx.len() <= ntest);
    }
    let mut matched = 0usize;
    let mut queue = vec![(0usize, a.len(), 0usize, b.len())];
    while let Some((alo, ahi, blo, bhi)) = queue.pop() {
        let (i, j, k) = longest_match(&a, &b, &b2j, alo, ahi, blo, bhi);
        if k > 0 {
            matched += k;
            if alo < i && blo < j {
                queue.push((alo, i, blo, j));
            }
            if i + k < ahi && j + k < bhi {
                queue.push((i + k, ahi, j + k, bhi));
            }
        }
    }
    2.0 * matched as f64 / total as f64
}

#[allow(clippy::too_many_arguments)]
fn longest_match(
    a: &[char],
    b: &[char],
    b2j: &HashMap<char, Vec<usize>>,
    alo: usize,
    ahi: usize,
    blo: usize,
    bhi: usize,
) -> (usize, usize, usize) {
    let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0usize);
    let mut j2len: HashMap<usize, usize> = HashMap::new();
    for (i, ch) in a.iter().enumerate().take(ahi).skip(alo) {
        let mut next: HashMap<usize, usize> = HashMap::new();
        if let Some(js) = b2j.get(ch) {
            for &j in js {
                if j < blo {
                    continue;
                }
                if j >= bhi {
                    break;
                }
                let k = j
                    .checked_sub(1)
                    .and_then(|p| j2len.get(&p))
                    .copied()
                    .unwrap_or(0)
                    + 1;
                next.insert(j, k);
                if k > bestsize {
                    besti = i + 1 - k;
                    bestj = j + 1 - k;
                    bestsize = k;
                }
            }
        }
        j2len = next;
    }
    // Extend over characters that were left out of b2j as popular (no junk function is used).
    while besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1] {
        besti -= 1;
        bestj -= 1;
        bestsize += 1;
    }
    while besti + bestsize < ahi
        && bestj + bestsize < bhi
        && a[besti + bestsize] == b[bestj + bestsize]
    {
        bestsize += 1;
    }
    (besti, bestj, bestsize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::ScriptedChatModel;

    #[test]
    fn ratio_matches_python_difflib() {
        // Values from CPython 3.12: difflib.SequenceMatcher(None, a, b).ratio().
        assert!((ratio("abcd", "bcde") - 0.75).abs() < 1e-12);
        assert!((ratio("", "") - 1.0).abs() < 1e-12);
        assert!((ratio("abc", "") - 0.0).abs() < 1e-12);
        // SequenceMatcher(None, "private Thread currentThread;", "private volatile Thread currentThread;")
        assert!(
            (ratio(
                "private Thread currentThread;",
                "private volatile Thread currentThread;"
            ) - 0.865_671_641_791_044_7)
                .abs()
                < 1e-12
        );
        // The documented example: ratio() of "abxcd" vs "abcd" = 2*4/9.
        assert!((ratio("abxcd", "abcd") - 8.0 / 9.0).abs() < 1e-12);
    }

    #[test]
    fn autojunk_applies_to_long_second_strings() {
        // 200 'a's then "xyz": 'a' is popular in b, so it starts no match; the match "xyz" is then extended
        // backwards over the 'a's that precede it in both strings.
        let b = format!("{}xyz", "a".repeat(200));
        let a = format!("{}xyz", "a".repeat(5));
        assert!((ratio(&a, &b) - 16.0 / 211.0).abs() < 1e-12);
    }

    fn cands() -> Vec<Triple> {
        vec![
            Triple::new("oslo", "capital of", "norway"),
            Triple::new("edvard munch", "born in", "loten"),
            Triple::new("the scream", "painted by", "edvard munch"),
        ]
    }

    #[test]
    fn parses_sections_and_maps_back() {
        let reply = "[[ ## fact_after_filter ## ]]\n{\"fact\": [[\"the scream\", \"painted by\", \"edvard munch\"], [\"Edvard Munch\", \"was born in\", \"Loten\"]]}\n\n[[ ## completed ## ]]";
        let facts = parse_reply(reply).unwrap();
        assert_eq!(facts.len(), 2);
        assert_eq!(map_to_candidates(&facts, &cands()), vec![2, 1]);
        // Python-literal form is accepted too.
        let reply = "[[ ## fact_after_filter ## ]]\n{'fact': [['oslo', 'capital of', 'norway']]}\n[[ ## completed ## ]]";
        assert_eq!(
            map_to_candidates(&parse_reply(reply).unwrap(), &cands()),
            vec![0]
        );
    }

    #[test]
    fn bad_replies_keep_nothing() {
        assert!(parse_reply("I think the second fact.").is_err());
        assert!(parse_reply("[[ ## fact_after_filter ## ]]\nnone of them").is_err());
        assert!(parse_reply("[[ ## fact_after_filter ## ]]\n{\"fact\": \"x\"}").is_err());
        // A reply cut off by the token limit is not repaired (unlike OpenIE output).
        assert!(parse_reply(
            "[[ ## fact_after_filter ## ]]\n{\"fact\": [[\"a\", \"b\", \"c\"], [\"d\""
        )
        .is_err());
        assert!(
            parse_reply("[[ ## fact_after_filter ## ]]\n{\"fact\": [[\"a\", 1, \"c\"]]}").is_err()
        );
        // Code fences around the object are fine.
        let fenced = "[[ ## fact_after_filter ## ]]\n```json\n{\"fact\": [[\"a\", \"b\", \"c\"]]}\n```\n[[ ## completed ## ]]";
        assert_eq!(parse_reply(fenced).unwrap(), vec![vec!["a", "b", "c"]]);
        let empty =
            parse_reply("[[ ## fact_after_filter ## ]]\n{\"fact\": []}\n\n[[ ## completed ## ]]");
        assert_eq!(empty.unwrap().len(), 0);
    }

    #[test]
    fn request_shape() {
        let req = filter_request("Who painted it?", &cands(), &HippoConfig::default());
        assert_eq!(req.messages.len(), 1 + 2 * FILTER_DEMOS.len() + 1);
        let last = &req.messages.last().unwrap().content;
        assert!(last.starts_with("[[ ## question ## ]]\nWho painted it?\n\n[[ ## fact_before_filter ## ]]\n{\"fact\": [[\"oslo\", \"capital of\", \"norway\"], "));
        assert!(last.contains("[[ ## fact_after_filter ## ]]"));
        assert_eq!(req.settings.max_tokens, Some(512));
        assert_eq!(req.settings.temperature, Some(0.0));
        for m in req
            .messages
            .iter()
            .skip(2)
            .step_by(2)
            .take(FILTER_DEMOS.len())
        {
            assert!(m
                .content
                .starts_with("[[ ## fact_after_filter ## ]]\n{\"fact\": ["));
            assert!(m.content.ends_with("[[ ## completed ## ]]"));
        }
    }

    #[tokio::test]
    async fn scripted_model_keeps_and_fails() {
        let chat = ScriptedChatModel::new([
            "[[ ## fact_after_filter ## ]]\n{\"fact\": [[\"edvard munch\", \"born in\", \"loten\"]]}\n\n[[ ## completed ## ]]",
            "[[ ## fact_after_filter ## ]]\n{\"fact\": []}\n\n[[ ## completed ## ]]",
            "no idea",
        ]);
        let cfg = HippoConfig::default();
        let out = recognise(&chat, "q", &cands(), &cfg).await;
        assert_eq!(out.kept, vec![1]);
        assert!(out.error.is_none());
        let out = recognise(&chat, "q", &cands(), &cfg).await;
        assert!(out.kept.is_empty() && out.error.is_none());
        let out = recognise(&chat, "q", &cands(), &cfg).await;
        assert!(out.kept.is_empty());
        assert!(out.error.unwrap().contains("fact_after_filter"));
        chat.push_error("server down");
        let out = recognise(&chat, "q", &cands(), &cfg).await;
        assert!(out.error.unwrap().contains("server down"));
        assert_eq!(chat.calls(), 4);
    }
}
