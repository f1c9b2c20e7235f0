//! HippoRAG 2 synonymy-edge construction for the MuSiQue phrases (16,235 MiniLM vectors): the exact k-NN
//! scan of every phrase (threshold 0.8, k 2047, cap 101) and adding the edges to the graph. Needs the dataset
//! and the MiniLM assets (skipped otherwise; the embeddings are cached in `target/bench-data/`).
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use kgrag_benches::musique_graph;
use kgrag_graph_store::synonymy::{add_synonymy_edges, scan, SynonymyConfig};

fn synonymy(c: &mut Criterion) {
    let Some(m) = musique_graph() else {
        return;
    };
    let rows: Vec<usize> = (0..m.phrases.len()).collect();
    let config = SynonymyConfig::default();
    let mut group = c.benchmark_group("synonymy_musique");
    group.sample_size(10);
    group.bench_function("scan_all_16235_phrases", |b| {
        b.iter(|| scan(&m.phrases, &m.phrase_index, &rows, &config).map(|p| p.len()))
    });
    group.bench_function("scan_and_add_edges", |b| {
        b.iter(|| {
            let mut g = m.graph.clone();
            add_synonymy_edges(
                &mut g,
                &m.phrases,
                &m.phrase_nodes,
                &m.phrase_index,
                &rows,
                &config,
            )
            .map(|s| s.accepted)
        })
    });
    group.finish();
}

criterion_group!(benches, synonymy);
criterion_main!(benches);
