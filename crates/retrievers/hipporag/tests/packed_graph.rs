//! The index holds its graph packed, with what questions read of it made beside it: the PPR arcs under
//! the index's own weighting and solver settings, each phrase's chunk count, each passage's node and the
//! graph's counts. A retriever whose settings differ makes its arcs from the graph unpacked and ranks as
//! a retriever over an index built with its settings; what is kept beside the graph agrees with the
//! graph, through a save and load, an insert and a delete.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

mod common;

use kgrag_graph_store::hippo::phrase_key;
use kgrag_graph_store::{KnowledgeGraph, NodeKind};
use kgrag_hipporag::{FilterMode, GraphWeights, HippoConfig, HippoIndex, NoProgress, QueryTrace};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::ChunkId;

type Answers = Vec<(Vec<(ChunkId, f64)>, QueryTrace)>;

/// Every fixture question's ranking and trace under `config`.
async fn answers(index: &Arc<HippoIndex>, config: &HippoConfig) -> Answers {
    common::answers(Arc::clone(index), config).await
}

/// What the index keeps beside its packed graph agrees with the graph unpacked.
fn check_beside(index: &HippoIndex) {
    let graph: KnowledgeGraph = index.graph().unwrap();
    assert_eq!(index.graph_counts(), &graph.counts());
    assert!(index.graph_packed_bytes() > 0);
    for row in 0..index.phrases().len() {
        let phrase = index.phrases().text(row).unwrap();
        let node = graph
            .node(graph.find(&phrase_key(phrase)).unwrap())
            .unwrap();
        assert_eq!(node.name, phrase);
        assert_eq!(index.phrase_chunks(phrase), node.sources.len(), "{phrase}");
        assert_eq!(
            index.phrase_node(row),
            graph.find(&phrase_key(phrase)),
            "{phrase}"
        );
    }
    let passages = graph
        .node_indices()
        .filter(|&n| graph.node(n).is_some_and(|x| x.kind == NodeKind::Passage))
        .count();
    assert_eq!(passages, index.chunk_facts().len());
    assert_eq!(index.phrase_chunks("no such phrase anywhere"), 0);
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kgrag-hippo-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[tokio::test]
async fn a_retriever_with_other_settings_walks_arcs_of_its_own_and_ranks_as_their_index() {
    let reference = HippoConfig {
        filter: FilterMode::None,
        ..HippoConfig::default()
    };
    let index = Arc::new(common::fixture_index(&reference).await);
    check_beside(&index);
    let mine = answers(&index, &reference).await;
    assert!(mine.iter().any(|(_, t)| !t.seeds.is_empty()));
    // Every passage is a vertex the walk reaches: ten come back for every question.
    assert!(mine.iter().all(|(r, _)| r.len() == 10));
    // Each seed is named by its phrase, as the graph names the phrase's node.
    let graph = index.graph().unwrap();
    for (_, trace) in &mine {
        for (name, _) in &trace.seeds {
            let node = graph.find(&phrase_key(name)).unwrap();
            assert_eq!(&graph.node(node).unwrap().name, name);
        }
    }
    // Another weighting, another damping: the retriever makes its own arcs from the unpacked graph and
    // gives what a retriever over an index built with those settings gives (which walks the index's).
    for other in [
        HippoConfig {
            graph_weights: GraphWeights::Clean,
            ..reference.clone()
        },
        HippoConfig {
            damping: 0.7,
            ppr_tol: 1e-9,
            ..reference.clone()
        },
    ] {
        let theirs = Arc::new(common::fixture_index(&other).await);
        let own = answers(&index, &other).await;
        assert_eq!(own, answers(&theirs, &other).await);
        assert_ne!(own, mine);
    }
}

/// `index`'s answers equal those of the same index saved and loaded (which makes what it keeps beside
/// the graph from the saved graph).
async fn answers_survive_a_reload(index: &HippoIndex, config: &HippoConfig, name: &str) -> Answers {
    let dir = temp_dir(name);
    index.save(&dir).unwrap();
    let loaded = HippoIndex::load(&dir, index.passages().clone()).unwrap();
    check_beside(&loaded);
    let want = answers(&Arc::new(index.clone()), config).await;
    assert_eq!(answers(&Arc::new(loaded), config).await, want);
    let _ = std::fs::remove_dir_all(&dir);
    want
}

#[tokio::test]
async fn what_is_kept_beside_the_graph_follows_a_reload_an_insert_and_a_delete() {
    let config = HippoConfig {
        filter: FilterMode::None,
        ..HippoConfig::default()
    };
    let (_, passages, extractions) = common::fixture();
    let embedder = HashingEmbedder::new(256);
    // Half the corpus, then the rest inserted, then three passages deleted.
    let mut index = HippoIndex::new(
        Arc::new(kgrag_graph_store::EmbeddingStore::new("passages")),
        config.clone(),
    );
    let chunks = index.chunks_from_extractions(&passages, &extractions);
    let half = chunks.len() / 2;
    index
        .insert(&chunks[..half], &embedder, &mut NoProgress)
        .await
        .unwrap();
    check_beside(&index);
    answers_survive_a_reload(&index, &config, "packed-half").await;
    index
        .insert(&chunks[half..], &embedder, &mut NoProgress)
        .await
        .unwrap();
    check_beside(&index);
    let whole = common::fixture_index(&config).await;
    assert_eq!(index.graph_counts(), whole.graph_counts());
    answers_survive_a_reload(&index, &config, "packed-all").await;
    // The passages and the phrases only they held go from what is kept beside the graph too.
    let gone: Vec<ChunkId> = chunks[..3].iter().map(|c| c.chunk.clone()).collect();
    let stats = index.delete(&gone).unwrap();
    assert_eq!(stats.passages, 3);
    assert!(stats.phrases > 0, "{stats:?}");
    check_beside(&index);
    let after = answers_survive_a_reload(&index, &config, "packed-deleted").await;
    for (ranking, _) in &after {
        assert!(ranking.iter().all(|(c, _)| !gone.contains(c)));
    }
}
