//! Incremental inserts (spec §4.6): indexing the fixture in two overlapping batches, starting from an empty
//! passage store, gives the same index and the same rankings as one insert of everything (no phrase reaches
//! the 101-synonym cap here); a failed insert changes nothing and can be retried.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod common;

use kgrag_graph_store::{EdgeKind, EdgeWeighting, EmbeddingStore, KnowledgeGraph};
use kgrag_hipporag::{FilterMode, HippoConfig, HippoIndex, HippoRetriever, NoProgress};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::{ChunkId, Embedder};

fn name(g: &KnowledgeGraph, n: kgrag_graph_store::NodeIndex) -> String {
    g.node(n).unwrap().name.clone()
}

/// Facts as (phrase, phrase) -> reference weight; synonymy as directed (from, to) -> cosine; context pairs.
#[allow(clippy::type_complexity)]
fn edges(
    g: &KnowledgeGraph,
) -> (
    BTreeMap<(String, String), f64>,
    BTreeMap<(String, String), f32>,
    BTreeSet<(String, String)>,
) {
    let (mut facts, mut syn, mut ctx) = (BTreeMap::new(), BTreeMap::new(), BTreeSet::new());
    for (_, lo, hi, e) in g.edges() {
        let (a, b) = (name(g, lo), name(g, hi));
        if e.has(EdgeKind::Fact) {
            let key = if a <= b {
                (a.clone(), b.clone())
            } else {
                (b.clone(), a.clone())
            };
            facts.insert(key, e.weight(EdgeWeighting::HippoReference));
        }
        if let Some(s) = e.synonymy {
            if let Some(c) = s.from_low {
                syn.insert((a.clone(), b.clone()), c);
            }
            if let Some(c) = s.from_high {
                syn.insert((b.clone(), a.clone()), c);
            }
        }
        if e.context {
            ctx.insert((a, b));
        }
    }
    (facts, syn, ctx)
}

#[tokio::test]
async fn two_inserts_equal_one() {
    let (ds, passages, extractions) = common::fixture();
    let embedder = Arc::new(HashingEmbedder::new(256));
    let config = HippoConfig {
        filter: FilterMode::None,
        // Loose enough that hashed phrase vectors give synonymy edges to compare.
        synonymy_threshold: 0.5,
        ..HippoConfig::default()
    };

    let mut whole = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config.clone());
    let chunks = whole.chunks_from_extractions(&passages, &extractions);
    let stats = whole
        .insert(&chunks, embedder.as_ref(), &mut NoProgress)
        .await
        .unwrap();
    assert_eq!(stats.new_passages, 31);
    assert!(stats.synonymy.accepted > 0, "{stats:?}");

    let mut parts = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config.clone());
    let first = parts
        .insert(&chunks[..15], embedder.as_ref(), &mut NoProgress)
        .await
        .unwrap();
    assert_eq!(first.new_passages, 15);
    // The second batch overlaps the first by five chunks, which are skipped.
    let second = parts
        .insert(&chunks[10..], embedder.as_ref(), &mut NoProgress)
        .await
        .unwrap();
    assert_eq!(second.skipped_chunks, 5);
    assert_eq!(second.new_passages, 16);
    assert_eq!(
        second.synonymy.scanned + first.synonymy.scanned,
        stats.synonymy.scanned
    );

    // Same stores (rows may come in another order), same chunk counts n(p), same edges.
    let keys = |s: &EmbeddingStore| s.keys().map(str::to_owned).collect::<BTreeSet<_>>();
    assert_eq!(keys(parts.passages()), keys(whole.passages()));
    assert_eq!(keys(parts.phrases()), keys(whole.phrases()));
    assert_eq!(keys(parts.facts()), keys(whole.facts()));
    for p in whole.phrases().texts() {
        assert_eq!(parts.phrase_chunks(p), whole.phrase_chunks(p), "n({p:?})");
    }
    // The fact store keeps no texts: each row's key is its triple's rendering hashed.
    assert!(!parts.facts().keeps_texts() && parts.facts().texts().is_empty());
    for row in 0..parts.facts().len() {
        let t = parts.fact(row).unwrap();
        assert_eq!(
            parts.facts().key(row).unwrap(),
            kgrag_types::FactId::from_content(&t.render()).as_str()
        );
    }
    let graph = parts.graph().unwrap();
    for row in 0..parts.phrases().len() {
        let n = parts.phrase_node(row).unwrap();
        assert_eq!(name(&graph, n), parts.phrases().text(row).unwrap());
    }
    assert_eq!(edges(&graph), edges(&whole.graph().unwrap()));
    assert_eq!(
        parts.graph().unwrap().counts(),
        whole.graph().unwrap().counts()
    );

    // Same rankings and PPR scores.
    let r_whole =
        HippoRetriever::new(Arc::new(whole), embedder.clone(), None, config.clone()).unwrap();
    let r_parts = HippoRetriever::new(Arc::new(parts), embedder.clone(), None, config).unwrap();
    for q in &ds.questions {
        let (a, ta) = r_whole.query(&q.question, 31).await.unwrap();
        let (b, tb) = r_parts.query(&q.question, 31).await.unwrap();
        assert_eq!(ta.kept, tb.kept, "{}", q.id);
        assert_eq!(a.passages.len(), b.passages.len());
        for (x, y) in a.passages.iter().zip(&b.passages) {
            assert!((x.score - y.score).abs() < 1e-9, "{}: {x:?} vs {y:?}", q.id);
        }
        let ids = |c: &kgrag_types::RetrievedContext| {
            c.passages
                .iter()
                .map(|p| p.chunk_id.clone())
                .collect::<Vec<_>>()
        };
        // Equal scores may swap places (vertex order differs); compare as sets of the top 5.
        let top = |v: Vec<ChunkId>| v.into_iter().take(5).collect::<BTreeSet<_>>();
        assert_eq!(top(ids(&a)), top(ids(&b)), "{}", q.id);
    }
}

#[tokio::test]
async fn failed_insert_changes_nothing_and_can_be_retried() {
    let (_, passages, extractions) = common::fixture();
    let config = HippoConfig {
        filter: FilterMode::None,
        ..HippoConfig::default()
    };
    let mut index = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config);
    let chunks = index.chunks_from_extractions(&passages, &extractions);
    // The 31 passages embed in one call of the batch of 64, the 161 phrases need three: the second fails.
    let failing = HashingEmbedder::new(64).fail_after(2);
    let err = index
        .insert(&chunks, &failing, &mut NoProgress)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("phrases store"), "{err}");
    assert!(index.passages().is_empty() && index.phrases().is_empty() && index.facts().is_empty());
    assert_eq!(index.graph().unwrap().node_count(), 0);

    let ok = HashingEmbedder::new(64);
    let stats = index.insert(&chunks, &ok, &mut NoProgress).await.unwrap();
    assert_eq!(stats.new_passages, 31);
    assert_eq!(index.phrases().len(), stats.new_phrases);
    assert_eq!(ok.dimension(), 64);
}

/// `insert_owned` (chunks moved in, their triples kept without a copy) builds the index `insert` builds,
/// and counts the same skipped chunks: those already indexed and repeats within the call.
#[tokio::test]
async fn an_owned_insert_builds_what_an_insert_builds() {
    let (_, passages, extractions) = common::fixture();
    let embedder = HashingEmbedder::new(128);
    let config = HippoConfig {
        filter: FilterMode::None,
        synonymy_threshold: 0.5,
        ..HippoConfig::default()
    };
    let mut by_ref = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config.clone());
    let mut by_value = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config);
    let chunks = by_ref.chunks_from_extractions(&passages, &extractions);
    // A first part, then everything with one chunk repeated: 15 known + 1 repeat skipped.
    let mut again = chunks.clone();
    again.push(chunks[20].clone());
    let a1 = by_ref
        .insert(&chunks[..15], &embedder, &mut NoProgress)
        .await
        .unwrap();
    let b1 = by_value
        .insert_owned(chunks[..15].to_vec(), &embedder, &mut NoProgress)
        .await
        .unwrap();
    let a2 = by_ref
        .insert(&again, &embedder, &mut NoProgress)
        .await
        .unwrap();
    let b2 = by_value
        .insert_owned(again, &embedder, &mut NoProgress)
        .await
        .unwrap();
    for (a, b) in [(&a1, &b1), (&a2, &b2)] {
        assert_eq!(
            (a.skipped_chunks, a.new_passages, a.new_phrases, a.new_facts),
            (b.skipped_chunks, b.new_passages, b.new_phrases, b.new_facts)
        );
    }
    assert_eq!(a2.skipped_chunks, 16);
    assert_eq!(by_ref.phrases(), by_value.phrases());
    assert_eq!(by_ref.facts(), by_value.facts());
    assert_eq!(by_ref.chunk_facts(), by_value.chunk_facts());
    assert_eq!(
        edges(&by_ref.graph().unwrap()),
        edges(&by_value.graph().unwrap())
    );
    assert_eq!(
        by_ref.graph().unwrap().counts(),
        by_value.graph().unwrap().counts()
    );
}
