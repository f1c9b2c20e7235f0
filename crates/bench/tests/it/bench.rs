//! `kgrag bench`'s answer-quality stage with a scripted judge: HiRAG's and NaiveRAG's published UltraDomain
//! Mix answers judged pairwise (2 × 130 requests), 1–10 scores with repeats, unusable verdicts counted,
//! and the files beside the report. Reads `$KGRAG_DATA_DIR/ultradomain-mix/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kgrag::eval::Report;
use kgrag::types::testing::ScriptedChatModel;
use kgrag::types::{ChatModel, ChatRequest};
use kgrag_bench::{run, run_with_judge, BenchArgs};

/// The data folder when it holds ultradomain-mix (`$KGRAG_DATA_DIR`, resolved against the workspace root when
/// relative: tests run in the crate folder); `None`, with the line saying why, skips the test (see
/// `kgrag_types::testing::data_file`).
fn data_dir() -> Option<PathBuf> {
    let file = kgrag::types::testing::data_file("ultradomain-mix/mix_unique_contexts.json")?;
    let dir = file.parent()?.parent()?.to_path_buf();
    if dir.is_absolute() || dir.is_dir() {
        return Some(dir);
    }
    Some(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir),
    )
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kgrag-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path, eval: &str) -> PathBuf {
    let path = dir.join("kgrag.toml");
    std::fs::write(
        &path,
        format!(
            "cache_dir = {:?}\n[eval]\n{eval}\n",
            dir.join("cache").display().to_string()
        ),
    )
    .unwrap();
    path
}

/// The text between `start` and `end` in the user message of `request`.
fn between<'a>(request: &'a ChatRequest, start: &str, end: &str) -> &'a str {
    let user = &request.messages[1].content;
    let from = user.find(start).map_or(0, |i| i + start.len());
    let to = user[from..].find(end).map_or(user.len(), |i| from + i);
    &user[from..to]
}

fn verdict(comprehensive: &str, others: &str) -> String {
    let w = |x: &str| format!("{{\"Winner\": \"{x}\", \"Explanation\": \"scripted\"}}");
    format!(
        "{{\"Comprehensiveness\": {}, \"Empowerment\": {}, \"Diversity\": {}, \"Overall Winner\": {}}}",
        w(comprehensive),
        w(others),
        w(others),
        w(others)
    )
}

fn scores(n: u8) -> String {
    let s = |x: u8| format!("{{\"score\": \"{x}\", \"Explanation\": \"scripted\"}}");
    format!(
        "{{\"Comprehensiveness\": {}, \"Empowerment\": {}, \"Diversity\": {}, \"Overall Quality\": {}}}",
        s(n),
        s(n),
        s(n),
        s(n)
    )
}

fn args(data: PathBuf, out: &Path, config: PathBuf) -> BenchArgs {
    let mut a = BenchArgs::new(data);
    a.dataset = Some("ultradomain-mix".into());
    a.methods = vec!["none".into()];
    a.answers = vec!["hirag-deepseek".into(), "naive-deepseek".into()];
    a.baseline = Some("naive-deepseek".into());
    a.out = Some(out.to_path_buf());
    a.config = Some(config);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_mix_answers_are_judged_in_both_orders() {
    let Some(data) = data_dir() else {
        return;
    };
    let dir = temp("canned");
    let out = dir.join("out");
    // The longer answer wins Comprehensiveness; Answer 1 wins everything else.
    let judge = Arc::new(ScriptedChatModel::with_responder(|r| {
        let first = between(r, "**Answer 1:**\n", "\n\n**Answer 2:**").len();
        let second = between(r, "**Answer 2:**\n", "\n\nReply with").len();
        Ok(verdict(
            if first >= second {
                "Answer 1"
            } else {
                "Answer 2"
            },
            "Answer 1",
        ))
    }));
    let outcome = run_with_judge(
        &args(data.clone(), &out, config(&dir, "score_repeats = 0")),
        Some(judge.clone() as Arc<dyn ChatModel>),
    )
    .await
    .unwrap();
    assert_eq!(judge.calls(), 2 * 130, "both orders of every question");

    let report = &outcome.report;
    report.validate().unwrap();
    assert_eq!(report.questions, 130);
    let j = report.judge.as_ref().unwrap();
    assert_eq!(j.baseline, "naive-deepseek");
    assert_eq!(j.llm.calls, 260);
    assert_eq!(j.model, "scripted-chat");
    let p = &j.pairwise["hirag-deepseek"];
    assert_eq!((p.judgments, p.failures, p.retried), (260, 0, 0));
    // Answer 1 in both orders: each method wins one of the two orders of every question.
    assert_eq!(p.win_rate["Overall"], 50.0);
    assert_eq!(p.win_rate["Diversity"], 50.0);
    // Comprehensiveness: the longer answer wins both orders.
    let mix = data.join("ultradomain-mix");
    let lens = |f: &str| -> Vec<usize> {
        std::fs::read_to_string(mix.join(f))
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["answer"].as_str().unwrap().len()
            })
            .collect()
    };
    let (hi, naive) = (
        lens("mix_hi_result_deepseek.jsonl"),
        lens("mix_naive_result_deepseek.jsonl"),
    );
    let longer = hi.iter().zip(&naive).filter(|(h, n)| h > n).count();
    let ties = hi.iter().zip(&naive).filter(|(h, n)| h == n).count();
    let expected = 100.0 * (2 * longer + ties) as f64 / 260.0;
    assert!(
        (p.win_rate["Comprehensiveness"] - expected).abs() < 1e-4,
        "{} vs {expected}",
        p.win_rate["Comprehensiveness"]
    );
    let hirag = &report.methods["hirag-deepseek"];
    assert!(hirag.recall.is_empty() && hirag.answers_from.is_some());
    assert!(report.methods["naive-deepseek"].scores.is_empty());

    // The files beside the report.
    assert_eq!(Report::read(&out).unwrap(), *report);
    let judgments =
        std::fs::read_to_string(out.join("judgments/hirag-deepseek-vs-naive-deepseek.jsonl"))
            .unwrap();
    assert_eq!(judgments.lines().count(), 260);
    let first: serde_json::Value = serde_json::from_str(judgments.lines().next().unwrap()).unwrap();
    assert_eq!(first["query_index"], 0);
    assert_eq!(first["swapped"], false);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("Win rate (%) against `naive-deepseek`"), "{md}");
    assert!(md.contains("| hirag-deepseek | "), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<th>Comprehensiveness</th>"), "{html}");
    assert!(out.join("plots/win_rates.svg").is_file());
    assert!(out.join("plots/win_rates.png").is_file());
    let answers = std::fs::read_to_string(out.join("answers/hirag-deepseek.jsonl")).unwrap();
    assert_eq!(answers.lines().count(), 130);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scores_repeat_and_unusable_verdicts_are_counted_not_guessed() {
    let Some(data) = data_dir() else {
        return;
    };
    let dir = temp("scores");
    let out = dir.join("out");
    let ds = kgrag::eval::load("ultradomain-mix", &data).unwrap();
    let q0 = ds.questions[0].question.clone();
    let q1 = ds.questions[1].question.clone();
    let judge = Arc::new(ScriptedChatModel::with_responder(move |r| {
        let user = &r.messages[1].content;
        let retry = r.messages.len() > 2;
        if user.starts_with("Rate the answer") {
            // Repeat 0 scores 6, repeat 1 scores 9; question 0's first repeat-0 reply is out of range.
            let seed = r.settings.seed.unwrap_or(0);
            if user.contains(&q0) && seed == 0 && !retry {
                return Ok(scores(11));
            }
            return Ok(scores(if seed == 0 { 6 } else { 9 }));
        }
        if user.contains(&q0) {
            return Ok("I prefer the first one.".into());
        }
        if user.contains(&q1) && !retry {
            return Ok("```json\n{\"Comprehensiveness\": {\"Winner\": \"Answer 3\"}}\n```".into());
        }
        Ok(verdict("Answer 2", "Answer 2"))
    }));
    let mut a = args(
        data.clone(),
        &out,
        config(&dir, "score_repeats = 2\nscore_retries = 1"),
    );
    a.limit = Some(3);
    let outcome = run_with_judge(&a, Some(judge.clone() as Arc<dyn ChatModel>))
        .await
        .unwrap();
    let report = &outcome.report;
    report.validate().unwrap();
    let j = report.judge.as_ref().unwrap();
    let p = &j.pairwise["hirag-deepseek"];
    // Question 0: both orders unusable after the retry; question 1: both repaired by the retry.
    assert_eq!((p.judgments, p.failures, p.retried), (4, 2, 2), "{p:?}");
    // Answer 2 always: hirag wins the swapped order only.
    assert_eq!(p.win_rate["Overall"], 50.0);
    for m in ["hirag-deepseek", "naive-deepseek"] {
        let s = &report.methods[m].scores["Overall Quality"];
        assert_eq!(s.repeats, 2);
        assert!((s.mean - 7.5).abs() < 1e-9, "{m}: {s:?}");
        assert!((s.sd - 4.5f64.sqrt()).abs() < 1e-4, "{m}: {s:?}");
        assert_eq!(report.methods[m].score_failures, 0);
    }
    // Pairwise: 6 first replies + 4 retries; scores: 2 methods × 3 questions × 2 repeats + 2 retries.
    assert_eq!(judge.calls(), 6 + 4 + 12 + 2);
    assert_eq!(j.llm.calls, judge.calls() as u64);
    assert!(report
        .notes
        .iter()
        .any(|n| n.contains("2 of 6 verdicts unusable")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_dataset_triples_extracts_every_chunk_by_the_configured_extractor() {
    let dir = temp("no-dataset-triples");
    let config = dir.join("kgrag.toml");
    std::fs::write(
        &config,
        format!(
            "cache_dir = {:?}\nopenie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n",
            dir.join("cache").display().to_string()
        ),
    )
    .unwrap();
    let run_with = |no_dataset_triples: bool, out: &str| {
        let mut a = BenchArgs::new(PathBuf::from("/nonexistent"));
        a.dataset = Some("kgrag-fixture".into());
        a.methods = vec!["hipporag2".into()];
        a.limit = Some(2);
        a.config = Some(config.clone());
        a.out = Some(dir.join(out));
        a.no_dataset_triples = no_dataset_triples;
        a
    };
    let shipped = run(&run_with(false, "shipped")).await.unwrap().report;
    let rules = run(&run_with(true, "rules")).await.unwrap().report;
    assert!(!shipped
        .notes
        .iter()
        .any(|n| n.contains("--no-dataset-triples")));
    assert!(
        rules
            .notes
            .iter()
            .any(|n| n.contains("--no-dataset-triples")),
        "{:?}",
        rules.notes
    );
    // The fixture's hand-written triples and the rule extractor's give different graphs.
    assert_ne!(
        (shipped.index.entities, shipped.index.relations),
        (rules.index.entities, rules.index.relations)
    );
    assert!(rules.index.relations > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
