//! A query is embedded once when the embedder ignores instructions (MiniLM, the hashing embedder): the
//! fact instruction's vector is the passage instruction's, so the rankings are those of two calls.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

mod common;

use kgrag_hipporag::{FilterMode, HippoConfig, HippoRetriever};
use kgrag_types::testing::HashingEmbedder;

#[tokio::test]
async fn an_embedder_that_ignores_instructions_embeds_each_query_once() {
    let (ds, _, _) = common::fixture();
    let config = HippoConfig {
        filter: FilterMode::None,
        ..HippoConfig::default()
    };
    let index = Arc::new(common::fixture_index(&config).await);
    let reading = Arc::new(HashingEmbedder::new(256));
    let ignoring = Arc::new(HashingEmbedder::new(256).saying_instructions_are_ignored());
    let r_reading =
        HippoRetriever::new(index.clone(), reading.clone(), None, config.clone()).unwrap();
    let r_ignoring = HippoRetriever::new(index, ignoring.clone(), None, config).unwrap();
    let questions: Vec<_> = ds.questions.iter().take(5).collect();
    for q in &questions {
        let (a, _) = r_reading.query(&q.question, 10).await.unwrap();
        let (b, _) = r_ignoring.query(&q.question, 10).await.unwrap();
        assert_eq!(a.passages, b.passages, "{}", q.question);
    }
    assert_eq!(reading.calls(), 2 * questions.len());
    assert_eq!(ignoring.calls(), questions.len());
}
