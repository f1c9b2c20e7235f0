//! LeanRAG built over the bundled fixture: G0 from its triples, extractive aggregation, determinism,
//! retrieval and the export.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kgrag_leanrag::{BaseGraph, LeanragConfig, LeanragIndex, LeanragRetriever, Models};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::{ChunkId, Entity, Relation, RetrievalRequest, Retriever};

/// G0 from the fixture's triples: an entity per phrase described by its facts, a relation per pair.
pub fn fixture_g0(passages: usize) -> BaseGraph {
    let ds = kgrag_eval::load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
    let kgrag_eval::ExtractionSource::Inline(list) = &ds.extraction else {
        panic!("the fixture ships its triples");
    };
    let mut entities: BTreeMap<String, Entity> = BTreeMap::new();
    let mut relations: BTreeMap<(String, String), Relation> = BTreeMap::new();
    let mut chunks = Vec::new();
    for (p, e) in ds.passages.iter().zip(list).take(passages) {
        let chunk: ChunkId = e.chunk_id.clone();
        chunks.push((chunk.clone(), p.content()));
        for t in &e.triples {
            let sentence = format!("{} {} {}.", t.subject(), t.predicate(), t.object());
            for name in [t.subject(), t.object()] {
                let ent = entities
                    .entry(name.to_uppercase())
                    .or_insert_with(|| Entity {
                        name: name.to_uppercase(),
                        entity_type: "THING".into(),
                        ..Entity::default()
                    });
                if !ent.description.contains(&sentence) {
                    if !ent.description.is_empty() {
                        ent.description.push(' ');
                    }
                    ent.description.push_str(&sentence);
                }
                ent.source_chunks.insert(chunk.clone());
            }
            let (a, b) = (t.subject().to_uppercase(), t.object().to_uppercase());
            if a != b {
                let key = if a < b { (a, b) } else { (b, a) };
                relations.entry(key.clone()).or_insert_with(|| Relation {
                    source: key.0.clone(),
                    target: key.1.clone(),
                    keywords: String::new(),
                    description: sentence.clone(),
                    weight: 1.0,
                    source_chunks: kgrag_types::VecSet::from([chunk.clone()]),
                });
            }
        }
    }
    let entities: Vec<Entity> = entities.into_values().collect();
    let relations: Vec<Relation> = relations.into_values().collect();
    BaseGraph::from_records(&entities, &relations, chunks).unwrap()
}

async fn build(g0: BaseGraph, config: &LeanragConfig) -> LeanragIndex {
    let models = Models {
        embedder: Arc::new(HashingEmbedder::new(64)),
        chat: None,
        scratch_dir: None,
    };
    LeanragIndex::build(g0, &models, config).await.unwrap()
}

/// Two questions of the fixture, asking for 20 passages each.
fn fixture_requests() -> Vec<RetrievalRequest> {
    [
        "Who founded the Quillmarsh Glassblowers Guild?",
        "Where did Tesk Amberlow grow up?",
    ]
    .into_iter()
    .map(|q| RetrievalRequest {
        query: q.into(),
        top_k: 20,
    })
    .collect()
}

#[tokio::test]
async fn fixture_tree_retrieval_determinism_and_export() {
    let config = LeanragConfig {
        cluster_size: 5,
        log_layers: false,
        ..LeanragConfig::default()
    };
    let g0 = fixture_g0(usize::MAX);
    let n0 = g0.entities.len();
    assert!(n0 > 50, "{n0}");
    let index = Arc::new(build(g0.clone(), &config).await);
    let h = index.hierarchy();
    let s = index.stats();
    assert_eq!(s.entities, n0);
    assert!(h.layers.len() >= 2, "{:?}", s.nodes_per_layer);
    let root = h.root.unwrap();
    // Every base node has exactly one ancestor chain ending at the root.
    for n in &h.layers[0] {
        assert_eq!(*h.ancestors(n.id).last().unwrap(), root, "{}", n.name);
    }
    assert!(s.relations_by_kind.get("base").copied().unwrap_or(0) > 0);
    assert!(!s.layers.is_empty());
    assert_eq!(s.seed_vectors, n0);

    let again = build(g0, &config).await;
    assert_eq!(index.hierarchy(), again.hierarchy());
    let embedder = Arc::new(HashingEmbedder::new(64));
    let r1 = LeanragRetriever::new(index.clone(), embedder.clone());
    let r2 = LeanragRetriever::new(Arc::new(again), embedder);
    for req in fixture_requests() {
        let a = r1.retrieve(&req).await.unwrap();
        let b = r2.retrieve(&req).await.unwrap();
        assert_eq!(a.rendered, b.rendered);
        assert_eq!(a.passages, b.passages);
        assert_eq!(
            a.entities.iter().filter(|e| e.layer == 0).count(),
            config.top_n
        );
        assert!(!a.passages.is_empty());
        assert!(a.rendered.starts_with("\n    entity_information:\n"));
        assert!(a.stats["text_units"] <= config.top_c as f64);
        assert_eq!(
            a.context_tokens,
            kgrag_text::Encoding::Cl100kBase.count(&a.rendered).unwrap()
        );
        // With ten seeds there are 45 pairs and as many paths.
        assert_eq!(a.paths.len(), 45);
    }

    // The seed vectors on disk, screened per query: the same seeds (ties included), scores and contexts.
    let scratch = std::env::temp_dir().join(format!("kgrag-leanrag-disk-{}", std::process::id()));
    let mut on_disk = (*index).clone();
    assert!(on_disk.set_seed_vectors_dir(Some(&scratch)).unwrap());
    let r4 = LeanragRetriever::new(Arc::new(on_disk), Arc::new(HashingEmbedder::new(64)));
    let mut seed = 5u64;
    for t in 0..40 {
        let v: Vec<f32> = (0..64)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        let (a, b) = (r1.seeds(&v).unwrap(), r4.seeds(&v).unwrap());
        assert_eq!(a.len(), config.top_n);
        let bits = |s: &[(kgrag_hierarchy::NodeId, f32)]| {
            s.iter().map(|(n, x)| (*n, x.to_bits())).collect::<Vec<_>>()
        };
        assert_eq!(bits(&a), bits(&b), "query vector {t}");
    }
    for req in fixture_requests() {
        let (a, b) = (
            r1.retrieve(&req).await.unwrap(),
            r4.retrieve(&req).await.unwrap(),
        );
        assert_eq!((a.rendered, a.passages), (b.rendered, b.passages));
    }
    let _ = std::fs::remove_dir_all(&scratch);

    // The base nodes' vectors live once, in the seed index: the nodes keep no copy, and the export
    // still writes a vector for every node that has one (the seeds' as the index holds them).
    assert!(h.layers[0].iter().all(|n| n.embedding.is_empty()));
    let with_own: usize = h.layers[1..]
        .iter()
        .flatten()
        .filter(|n| !n.embedding.is_empty())
        .count();
    let dir = std::env::temp_dir().join(format!("kgrag-leanrag-export-{}", std::process::id()));
    let files = kgrag_leanrag::export::export_reference(&index, &dir).unwrap();
    assert_eq!(files.len(), 7);
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(dir.join("entity_vectors.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), n0 + with_own);
    let npy = std::fs::read(dir.join("entity_vectors.npy")).unwrap();
    let values = &npy[npy.len() - rows.len() * 64 * 4..];
    let first: Vec<f32> = values[..64 * 4]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let norm: f32 = first.iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!(
        (norm - 1.0).abs() < 1e-5,
        "a seed row is the index's normalised vector: {norm}"
    );
    // Saved and read back, the index answers alike.
    let saved = dir.join("leanrag.index");
    index.save(&saved).unwrap();
    let loaded = Arc::new(LeanragIndex::load(&saved).unwrap());
    assert_eq!(loaded.hierarchy(), index.hierarchy());
    let r3 = LeanragRetriever::new(loaded, Arc::new(HashingEmbedder::new(64)));
    let req = RetrievalRequest {
        query: "Who founded the Quillmarsh Glassblowers Guild?".into(),
        top_k: 20,
    };
    assert_eq!(
        r3.retrieve(&req).await.unwrap().rendered,
        r1.retrieve(&req).await.unwrap().rendered
    );
    let levels = std::fs::read_to_string(dir.join("all_entities.json")).unwrap();
    assert_eq!(levels.lines().count(), index.hierarchy().layers.len());
    let last: serde_json::Value = serde_json::from_str(levels.lines().last().unwrap()).unwrap();
    assert_eq!(
        last.as_array().unwrap().len(),
        1,
        "the last line holds the top node"
    );
    let base = std::fs::read_to_string(dir.join("relation.jsonl")).unwrap();
    assert_eq!(base.lines().count(), s.relations_by_kind["base"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With seeds on the base layer the nodes above it let go of their sources, and `node_sources` makes them
/// again: the same multisets, in the same order, as the build made them (an index with seeds on the
/// aggregates keeps them).
#[tokio::test]
async fn aggregate_sources_are_made_again_from_the_children() {
    let base = LeanragConfig {
        cluster_size: 5,
        log_layers: false,
        ..LeanragConfig::default()
    };
    let kept = LeanragConfig {
        seed_layers: kgrag_leanrag::SeedLayers::Aggregate,
        ..base.clone()
    };
    let held = build(fixture_g0(usize::MAX), &kept).await;
    let hh = held.hierarchy();
    let chunks: Vec<(ChunkId, String)> = held
        .chunks()
        .iter()
        .map(|(c, t)| (c.clone(), t.clone()))
        .collect();
    let dropped = LeanragIndex::from_hierarchy(hh.clone(), chunks, &base).unwrap();
    let hd = dropped.hierarchy();
    assert!(hd.layers.len() >= 3, "{:?}", hd.layer_sizes());
    let mut compared = 0;
    for (ld, lh) in hd.layers.iter().zip(&hh.layers).skip(1) {
        for (nd, nh) in ld.iter().zip(lh) {
            assert!(nd.sources.is_empty(), "{} holds its sources", nd.name);
            assert!(!nh.sources.is_empty(), "{} has no sources", nh.name);
            assert_eq!(
                dropped.node_sources(nd.id).as_ref(),
                &nh.sources[..],
                "{}",
                nd.name
            );
            assert_eq!(held.node_sources(nh.id).as_ref(), &nh.sources[..]);
            compared += 1;
        }
    }
    assert!(compared > 10, "{compared}");
    // The root's are every base node's, repeats kept.
    let root = hd.root.unwrap();
    let all: usize = hd.layers[0].iter().map(|n| n.sources.len()).sum();
    assert_eq!(dropped.node_sources(root).len(), all);
    // Saved and read again, the index holds none and makes the same.
    let dir = std::env::temp_dir().join(format!("kgrag-leanrag-sources-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("leanrag.index");
    dropped.save(&path).unwrap();
    let loaded = LeanragIndex::load(&path).unwrap();
    assert_eq!(loaded.hierarchy(), dropped.hierarchy());
    assert_eq!(loaded.node_sources(root), dropped.node_sources(root));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tree reduced by PCA (no UMAP layout start in its rounds) saves and loads: the index file is
/// postcard, read field by field in order, so a field left out when `None` shifted every later one.
#[tokio::test]
async fn a_tree_reduced_by_pca_saves_and_loads() {
    let mut config = LeanragConfig {
        cluster_size: 5,
        log_layers: false,
        ..LeanragConfig::default()
    };
    config.cluster.reduction = kgrag_hierarchy::Reduction::Pca(4);
    let index = build(fixture_g0(usize::MAX), &config).await;
    let log = &index.hierarchy().log;
    assert!(!log.is_empty() && log.iter().all(|l| l.umap_init.is_none()));
    assert!(!index.stats().layers.is_empty());
    let dir = std::env::temp_dir().join(format!("kgrag-leanrag-pca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("leanrag.index");
    index.save(&path).unwrap();
    let back = LeanragIndex::load(&path).unwrap();
    assert_eq!(back.hierarchy(), index.hierarchy());
    // Every figure but the stage timings, which are not saved.
    let mut built = index.stats().clone();
    built.secs.clear();
    assert_eq!(back.stats(), &built);
    let _ = std::fs::remove_dir_all(&dir);
}
