//! LeanRAG against a real local model: SmolLM2 on llama.cpp's server (`cargo xtask test` passes in
//! `KGRAG_TEST_LLM_URL`; without it this test says so and passes unless `KGRAG_REQUIRE_LLM_SERVER` is set).
//! A 135M model fails the JSON often: what is checked is that the tree stays whole (fallbacks counted) and
//! an answer comes back.

use std::sync::Arc;

use kgrag_leanrag::{LeanragConfig, LeanragIndex, LeanragRetriever, Models};
use kgrag_llm::testing::{smollm2_chat, test_server_url};
use kgrag_types::testing::{CappedChat, HashingEmbedder};
use kgrag_types::{ChatModel, RetrievalRequest, Retriever};

use crate::build::fixture_g0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_with_smollm2_aggregates_and_answer() {
    let Some(url) = test_server_url() else { return };
    // Completions capped at 32 tokens: SmolLM2 writes about 10 tokens a second on two cores.
    let chat: Arc<dyn ChatModel> = Arc::new(CappedChat::new(smollm2_chat(url).unwrap(), 32));
    // The first four fixture passages: a few dozen entities, one aggregation round of a handful of clusters
    // (cluster size 5: small prompts that fit the test server's 2,048-token context), then the root. Every
    // call costs seconds on two cores, so the input is as small as still makes two layers.
    let config = LeanragConfig {
        cluster_size: 5,
        concurrency: 1,
        log_layers: false,
        ..LeanragConfig::default()
    };
    let embedder = Arc::new(HashingEmbedder::new(64));
    let models = Models {
        embedder: embedder.clone(),
        chat: Some(chat.clone()),
        scratch_dir: None,
    };
    let index = LeanragIndex::build(fixture_g0(4), &models, &config)
        .await
        .unwrap();
    let s = index.stats().clone();
    eprintln!("leanrag with SmolLM2: {s:?}");
    let aggregates = index.hierarchy().summary_nodes().count();
    assert!(
        aggregates >= 2,
        "aggregates of the first round and the root: {s:?}"
    );
    assert!(
        s.llm.calls >= aggregates as u64,
        "every aggregate asked the model: {s:?}"
    );
    let outcomes: usize = s.layers.iter().flat_map(|l| l.outcomes.values()).sum();
    eprintln!("aggregates {aggregates}, outcomes over rounds {outcomes}");
    let r = LeanragRetriever::new(Arc::new(index), embedder);
    let q = "Who founded the Quillmarsh Glassblowers Guild?";
    let ctx = r
        .retrieve(&RetrievalRequest {
            query: q.into(),
            top_k: 20,
        })
        .await
        .unwrap();
    let answer = kgrag_leanrag::answer::answer(chat.as_ref(), &ctx, q, &config)
        .await
        .unwrap();
    eprintln!("answer: {answer:?}");
    assert!(!answer.is_empty());
}
