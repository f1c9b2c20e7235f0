//! The HippoRAG 2 graph of the MuSiQue OpenIE file (GPT-3.5 triples, 1,890 passages) with hashed phrase
//! embeddings: node and edge counts by type against the numbers derived from the spec (hipporag2.md §11),
//! synonymy edges against a brute-force scan, persistence round trip and damage, GraphML, PPR.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use kgrag_graph_store::hippo::{insert_chunks, HippoChunk};
use kgrag_graph_store::ppr::{personalized_pagerank, PprConfig};
use kgrag_graph_store::synonymy::{add_synonymy_edges, SynonymyConfig};
use kgrag_graph_store::{
    graphml, EdgeKind, EdgeWeighting, ExactIndex, KnowledgeGraph, Metric, NodeIndex, NodeKind,
    VectorIndex,
};
use kgrag_openie::read_openie_file;
use kgrag_types::testing::{data_file, HashingEmbedder};
use kgrag_types::{EmbedKind, Embedder, Normalisation};

/// Embeddings of `texts` by the deterministic hashing embedder (words and character trigrams): the checks
/// below are structural (counts, a brute-force scan), and MiniLM on 16,235 phrases costs CI three minutes;
/// MiniLM synonymy on this graph is measured by `cargo bench -p kgrag-benches --bench synonymy`.
async fn embed(texts: &[String]) -> ExactIndex {
    let embedder = HashingEmbedder::new(384);
    let mut idx = ExactIndex::new(embedder.dimension(), Metric::Cosine).unwrap();
    for part in texts.chunks(4096) {
        let e = embedder.embed(part, &EmbedKind::Document).await.unwrap();
        idx.add(e.as_slice()).unwrap();
    }
    idx
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn musique_hipporag_graph() {
    let Some(path) =
        data_file("musique-hipporag/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json")
    else {
        return;
    };
    let docs = read_openie_file(&path).unwrap();
    let chunks: Vec<HippoChunk> = docs
        .iter()
        .map(|d| {
            HippoChunk::from_raw(
                d.extraction.chunk_id.clone(),
                &d.passage,
                &d.extraction.triples,
                Normalisation::Ascii,
                false,
            )
        })
        .collect();
    let mut g = KnowledgeGraph::new();
    let ins = insert_chunks(&mut g, &chunks).unwrap();

    // Expected values, derived in hipporag2.md §11 from the file: 16,235 phrases (the empty one included),
    // 1,890 passages, 19,755 passage-phrase pairs, 20 self-loops, 16,509 unordered phrase pairs with fact
    // edges, 33,018 ordered fact keys (= 2 x 16,509) whose counts sum to 34,368 (= 2 x 17,184 occurrences).
    assert_eq!(ins.new_phrases.len(), 16_235);
    assert_eq!(ins.new_passages.len(), 1_890);
    assert_eq!(ins.self_loops, 20);
    assert_eq!(ins.fact_occurrences, 17_184);
    assert_eq!(ins.context_links, 19_755);
    let c = g.counts();
    assert_eq!(c.nodes_of(NodeKind::Entity), 16_235);
    assert_eq!(c.nodes_of(NodeKind::Passage), 1_890);
    assert_eq!(c.edges_of(EdgeKind::Fact), 16_509);
    assert_eq!(2 * c.edges_of(EdgeKind::Fact), 33_018);
    assert_eq!(c.edges_of(EdgeKind::Context), 19_755);
    assert_eq!(c.edges_of(EdgeKind::Synonymy), 0);
    let fact_weight: f64 = g
        .edges()
        .filter(|(_, _, _, e)| e.has(EdgeKind::Fact))
        .map(|(_, _, _, e)| e.weight(EdgeWeighting::HippoReference))
        .sum();
    assert_eq!(fact_weight, 34_368.0);
    assert!(
        g.find(&kgrag_graph_store::hippo::phrase_key("")).is_some(),
        "the empty phrase is a node"
    );
    assert_eq!(
        g.node(ins.new_passages[0]).unwrap().key,
        "chunk-9f22cba213a2f4d5f0116adf5a6576d7"
    );
    // Phrase nodes come first, sorted by phrase; then passages.
    let phrases: Vec<String> = ins.new_phrases.iter().map(|(p, _)| p.clone()).collect();
    let nodes: Vec<NodeIndex> = ins.new_phrases.iter().map(|(_, n)| *n).collect();
    assert!(phrases.windows(2).all(|w| w[0] < w[1]));
    assert!(nodes.last().unwrap() < &ins.new_passages[0]);

    // Synonymy edges over the phrase embeddings.
    let index = embed(&phrases).await;
    let config = SynonymyConfig::default();
    let rows: Vec<usize> = (0..phrases.len()).collect();
    let t = std::time::Instant::now();
    let stats = add_synonymy_edges(&mut g, &phrases, &nodes, &index, &rows, &config).unwrap();
    eprintln!("synonymy: {stats:?} in {:?}", t.elapsed());
    let c = g.counts();
    eprintln!("counts after synonymy: {c:?}");
    assert_eq!(
        stats.reverse_added, 0,
        "a fresh build scans every phrase itself"
    );
    assert!(c.edges_of(EdgeKind::Synonymy) > 1000, "{c:?}");
    assert_eq!(
        c.edges_of(EdgeKind::Fact),
        16_509,
        "facts survive as facets"
    );

    // Independent brute-force scan for a sample of phrases.
    let mut checked = 0;
    for u in (0..phrases.len()).step_by(31) {
        let mut cands: Vec<(f32, usize)> = (0..phrases.len())
            .map(|v| (dot(&index.vector(u).unwrap(), &index.vector(v).unwrap()), v))
            .filter(|(s, _)| *s >= 0.8)
            .collect();
        cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        cands.truncate(2047);
        let alnum = phrases[u]
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .count();
        let want: BTreeSet<usize> = if alnum > 2 {
            cands
                .iter()
                .filter(|(_, v)| *v != u && !phrases[*v].is_empty())
                .take(101)
                .map(|(_, v)| *v)
                .collect()
        } else {
            BTreeSet::new()
        };
        let row_of: BTreeMap<NodeIndex, usize> =
            nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let got: BTreeSet<usize> = g
            .incident(nodes[u])
            .into_iter()
            .filter(|(v, _, e)| {
                e.synonymy.is_some_and(|s| {
                    if nodes[u] < *v {
                        s.from_low.is_some()
                    } else {
                        s.from_high.is_some()
                    }
                })
            })
            .map(|(v, _, _)| row_of[&v])
            .collect();
        assert_eq!(got, want, "synonyms of {:?}", phrases[u]);
        checked += want.len();
    }
    assert!(checked > 10, "the sample holds synonyms ({checked})");

    // PPR on the full graph.
    let csr = g.csr(EdgeWeighting::HippoReference).unwrap();
    let mut reset = vec![0.0; csr.node_count()];
    for p in ["radio city", "india"] {
        if let Some(n) = g.find(&kgrag_graph_store::hippo::phrase_key(p)) {
            reset[csr.dense_id(n).unwrap()] = 1.0;
        }
    }
    for &p in &ins.new_passages {
        reset[csr.dense_id(p).unwrap()] += 0.05 / 1_890.0;
    }
    let (scores, st) = personalized_pagerank(&csr, &reset, PprConfig::default()).unwrap();
    assert!(st.converged, "{st:?}");
    assert!((scores.iter().sum::<f64>() - 1.0).abs() < 1e-9);

    // Persistence: identical round trip; damage is reported with the file name.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("musique-graph-{}", std::process::id()));
    let path = dir.join("graph.kg");
    g.save(&path).unwrap();
    let back = KnowledgeGraph::load(&path).unwrap();
    assert!(back == g, "round trip is identical");
    assert_eq!(
        back.find("chunk-9f22cba213a2f4d5f0116adf5a6576d7"),
        Some(ins.new_passages[0])
    );
    let bytes = std::fs::read(&path).unwrap();
    let mut bad = bytes.clone();
    bad[bytes.len() / 3] ^= 0x01;
    std::fs::write(&path, &bad).unwrap();
    let err = KnowledgeGraph::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("graph.kg") && err.contains("checksum"),
        "{err}"
    );
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = KnowledgeGraph::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("graph.kg") && err.contains("truncated"),
        "{err}"
    );

    // GraphML parses and has every node and edge.
    let gml = dir.join("graph.graphml");
    graphml::write_graphml(&g, EdgeWeighting::HippoReference, &gml).unwrap();
    let text = std::fs::read_to_string(&gml).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let count = |tag: &str| doc.descendants().filter(|n| n.has_tag_name(tag)).count();
    assert_eq!(count("node"), g.node_count());
    assert_eq!(count("edge"), g.edge_count());
    let _ = std::fs::remove_dir_all(&dir);
}
