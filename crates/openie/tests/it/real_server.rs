//! Smoke test with a real model: HippoRAG OpenIE through the OpenAI-compatible client against llama.cpp's
//! server with SmolLM2 (started by `cargo xtask test`, URL in `KGRAG_TEST_LLM_URL`). Only that it finishes and
//! fills the diagnostics is asserted: a 135M model's triples are not worth checking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kgrag_llm::{build_chat, ChatConfig, Limits, OpenAiConfig};
use kgrag_openie::{run_extraction, ExtractionStore, HippoOpenIe, RunnerConfig};
use kgrag_text::{Chunker, ChunkerConfig};
use kgrag_types::{Document, GenerationSettings};

#[tokio::test]
async fn hippo_openie_over_two_passages_with_smollm2() {
    let url = match std::env::var("KGRAG_TEST_LLM_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            assert!(
                std::env::var_os("KGRAG_REQUIRE_LLM_SERVER").is_none(),
                "KGRAG_TEST_LLM_URL is not set but KGRAG_REQUIRE_LLM_SERVER is"
            );
            eprintln!("KGRAG_TEST_LLM_URL not set: skipping (run `cargo xtask test`)");
            return;
        }
    };
    let chat = build_chat(
        &ChatConfig::Openai(OpenAiConfig {
            base_url: url,
            model: "smollm2".into(),
            api_key_env: None,
            limits: Limits {
                max_attempts: 2,
                ..Limits::default()
            },
            dimension: None,
            batch_size: 8,
            price_per_million_input: None,
            price_per_million_output: None,
        }),
        None,
    )
    .unwrap();
    // Short generations keep the test fast; truncated JSON goes through the repair path.
    let openie = HippoOpenIe::new(chat.clone()).with_settings(GenerationSettings {
        temperature: Some(0.0),
        max_tokens: Some(32),
        ..GenerationSettings::default()
    });
    let chunker = Chunker::new(ChunkerConfig::hipporag()).unwrap();
    let chunks: Vec<_> = [
        "Radio City\nRadio City is India's first private FM radio station.",
        "Marie Curie\nMarie Curie was a physicist born in Warsaw.",
    ]
    .iter()
    .flat_map(|t| chunker.chunk(&Document::new(*t)).unwrap())
    .collect();
    let dir = std::env::temp_dir().join(format!("kgrag-openie-smoke-{}", std::process::id()));
    let store = ExtractionStore::open(dir.join("x.redb")).unwrap();
    let (extractions, summary) =
        run_extraction(&openie, &chunks, &store, &RunnerConfig { concurrency: 2 })
            .await
            .unwrap();
    assert_eq!(extractions.len(), 2, "{summary:?}");
    for e in &extractions {
        assert_eq!(e.diagnostics.llm_calls, 2);
        assert!(e.diagnostics.prompt_tokens > 0 && e.diagnostics.completion_tokens > 0);
    }
    assert_eq!(summary.llm_calls, 4);
    let _ = std::fs::remove_dir_all(&dir);
}
