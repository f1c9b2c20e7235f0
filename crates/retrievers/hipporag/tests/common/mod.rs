//! The fixture the integration tests index: `kgrag-fixture`'s 31 passages with their inline triples.
#![allow(clippy::unwrap_used, clippy::panic, dead_code)]

use std::sync::Arc;

use kgrag_eval::{Dataset, ExtractionSource};
use kgrag_graph_store::EmbeddingStore;
use kgrag_hipporag::{HippoConfig, HippoIndex, HippoRetriever, NoProgress, QueryTrace};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::{ChunkId, Extraction};

/// The dataset, its passages as `(chunk id, title + text)` in corpus order, and its triples.
pub fn fixture() -> (Dataset, Vec<(ChunkId, String)>, Vec<Extraction>) {
    let ds = kgrag_eval::load("kgrag-fixture", std::path::Path::new("unused")).unwrap();
    let ExtractionSource::Inline(extractions) = &ds.extraction else {
        panic!("inline triples expected");
    };
    let extractions = extractions.clone();
    let passages = ds
        .passages
        .iter()
        .map(|p| (p.chunk_id(), p.content()))
        .collect();
    (ds, passages, extractions)
}

/// The fixture indexed with `config` and the 256-dimension hashing embedder.
pub async fn fixture_index(config: &HippoConfig) -> HippoIndex {
    let (_, passages, extractions) = fixture();
    let mut index = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config.clone());
    let chunks = index.chunks_from_extractions(&passages, &extractions);
    index
        .insert(&chunks, &HashingEmbedder::new(256), &mut NoProgress)
        .await
        .unwrap();
    index
}

/// Every fixture question's ranked chunk ids with their scores, and its trace, from a retriever over
/// `index` with `config` (the 256-dimension hashing embedder).
pub async fn answers(
    index: Arc<HippoIndex>,
    config: &HippoConfig,
) -> Vec<(Vec<(ChunkId, f64)>, QueryTrace)> {
    let (ds, _, _) = fixture();
    let r = HippoRetriever::new(
        index,
        Arc::new(HashingEmbedder::new(256)),
        None,
        config.clone(),
    )
    .unwrap();
    let mut out = Vec::new();
    for q in &ds.questions {
        let (ctx, trace) = r.query(&q.question, 10).await.unwrap();
        let ranking = ctx
            .passages
            .iter()
            .map(|p| (p.chunk_id.clone(), p.score))
            .collect();
        out.push((ranking, trace));
    }
    out
}
