//! Exact versus HNSW k-NN on 20,000 random 384-d unit vectors (the size of a MuSiQue-scale phrase or
//! fact store): build time, one query (k = 10) and a batch of 100 queries (k = 10).
//! HNSW runs at its default parameters (M 24, ef_construction 100, ef_search 800), sequential build.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use kgrag_benches::Lcg;
use kgrag_graph_store::{ExactIndex, HnswIndex, HnswParams, Metric, VectorIndex};

fn vectors(c: &mut Criterion) {
    let dim = 384;
    let mut rng = Lcg::new(3);
    let data = rng.unit_vectors(20_000, dim);
    let queries = rng.unit_vectors(100, dim);
    let Ok(exact) = ExactIndex::from_rows(dim, Metric::Cosine, &data) else {
        return;
    };
    let mut group = c.benchmark_group("knn_20k_x_384");
    group.sample_size(10);
    group.bench_function("exact_build", |b| {
        b.iter(|| ExactIndex::from_rows(dim, Metric::Cosine, &data).map(|i| i.len()))
    });
    group.bench_function("exact_query_k10", |b| {
        b.iter(|| exact.search(&queries[..dim], 10))
    });
    group.bench_function("exact_batch100_k10", |b| {
        b.iter(|| exact.search_batch(&queries, 10))
    });
    let t = std::time::Instant::now();
    let Ok(mut hnsw) = HnswIndex::new(dim, Metric::Cosine, HnswParams::default()) else {
        return;
    };
    if hnsw.add(&data).is_err() {
        return;
    }
    eprintln!("hnsw sequential build: {:?}", t.elapsed());
    let t = std::time::Instant::now();
    let mut par = match HnswIndex::new(
        dim,
        Metric::Cosine,
        HnswParams {
            parallel_build: true,
            ..HnswParams::default()
        },
    ) {
        Ok(h) => h,
        Err(_) => return,
    };
    let _ = par.add(&data);
    eprintln!("hnsw parallel build: {:?}", t.elapsed());
    group.bench_function("hnsw_query_k10", |b| {
        b.iter(|| hnsw.search(&queries[..dim], 10))
    });
    group.bench_function("hnsw_batch100_k10", |b| {
        b.iter(|| hnsw.search_batch(&queries, 10))
    });
    group.finish();
}

criterion_group!(benches, vectors);
criterion_main!(benches);
