//! The bench against a real local model: SmolLM2 on llama.cpp's server, which `cargo xtask test` starts
//! and passes in `KGRAG_TEST_LLM_URL` (without it the test says so and passes, unless
//! `KGRAG_REQUIRE_LLM_SERVER` is set). Three fixture questions, dense and HippoRAG 2 answers by the model,
//! the model as its own judge (pairwise and 1–10). A 135M model with 16-token replies rarely writes a
//! usable verdict: what is checked is that every request is answered or counted and the report is valid.

use std::path::PathBuf;

use kgrag_bench::{run, BenchArgs};
use kgrag_llm::testing::test_server_url;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_bench_with_smollm2_answers_and_judge() {
    let Some(url) = test_server_url() else { return };
    let dir = std::env::temp_dir().join(format!("kgrag-bench-smollm2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("kgrag.toml");
    std::fs::write(
        &config,
        format!(
            "cache_dir = {:?}\nreader = \"llm\"\n\
             [chat]\nprovider = \"openai\"\nbase_url = {url:?}\nmodel = \"smollm2\"\n\
             [chat.limits]\nmax_attempts = 2\nrequest_timeout_secs = 120.0\n\
             [hipporag]\nfilter = \"none\"\nmax_new_tokens = 16\n\
             [eval]\nscore_repeats = 1\nscore_retries = 0\njudge_max_tokens = 16\nconcurrency = 1\n",
            dir.join("cache").display().to_string()
        ),
    )
    .unwrap();
    let mut args = BenchArgs::new(PathBuf::from("/nonexistent"));
    args.dataset = Some("kgrag-fixture".into());
    args.methods = vec!["dense".into(), "hipporag2".into()];
    args.limit = Some(3);
    args.config = Some(config);
    args.out = Some(dir.join("out"));
    let outcome = run(&args).await.unwrap();
    let report = &outcome.report;
    report.validate().unwrap();
    eprintln!("{}", report.judge_markdown());
    for m in ["dense", "hipporag2"] {
        let r = &report.methods[m];
        let llm = r.llm.unwrap();
        assert_eq!(
            llm.calls + llm.cache_hits,
            3,
            "{m}: one reader call per question: {llm:?}"
        );
        assert!(
            r.em.is_some() && r.f1.is_some(),
            "{m}: EM/F1 from the model's answers"
        );
        assert_eq!(r.recall.len(), 5);
    }
    let j = report.judge.as_ref().unwrap();
    assert_eq!(j.baseline, "dense");
    let p = &j.pairwise["hipporag2"];
    assert_eq!(
        p.judgments + p.failures,
        6,
        "both orders of 3 questions: {p:?}"
    );
    // Pairwise: 6 first requests + one retry per unusable first reply; scores: 2 methods × 3 answers.
    assert!(j.llm.calls >= 6 + 6 && j.llm.calls <= 12 + 6, "{:?}", j.llm);
    for m in ["dense", "hipporag2"] {
        let r = &report.methods[m];
        let scored = r.scores.get("Overall Quality").map_or(0, |s| s.repeats);
        assert!(scored <= 1 && r.score_failures <= 3, "{m}: {r:?}");
    }
    assert!(dir.join("out/report.html").is_file());
    assert!(dir.join("out/judgments/hipporag2-vs-dense.jsonl").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}
