//! Parameter sweep for the HNSW defaults: build time and recall@10 against exact search on 20,000 random
//! 384-d unit vectors. `cargo run --release -p kgrag-graph-store --example hnsw_tune`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::time::Instant;

use kgrag_graph_store::{ExactIndex, HnswIndex, HnswParams, Metric, VectorIndex};

fn lcg_unit_vectors(seed: u64, n: usize, dim: usize) -> Vec<f32> {
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64).max(f64::EPSILON)
    };
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let row: Vec<f32> = (0..dim)
            .map(|_| {
                ((-2.0 * next().ln()).sqrt() * (2.0 * std::f64::consts::PI * next()).cos()) as f32
            })
            .collect();
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        out.extend(row.iter().map(|v| v / norm));
    }
    out
}

fn main() {
    let dim = 384;
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let data = lcg_unit_vectors(1, n, dim);
    let queries = lcg_unit_vectors(2, 200, dim);
    let exact = ExactIndex::from_rows(dim, Metric::Cosine, &data).unwrap();
    let t = Instant::now();
    let want = exact.search_batch(&queries, 10).unwrap();
    println!("exact batch of 200: {:?}", t.elapsed());
    for (m, efc, par) in [(24, 100, true), (16, 200, true), (32, 100, true)] {
        let params = HnswParams {
            max_connections: m,
            ef_construction: efc,
            parallel_build: par,
            ..HnswParams::default()
        };
        let mut h = HnswIndex::new(dim, Metric::Cosine, params).unwrap();
        let t = Instant::now();
        h.add(&data).unwrap();
        let build = t.elapsed();
        for efs in [200, 400, 800] {
            h.set_ef_search(efs);
            let h2 = &h;
            let t = Instant::now();
            let got: Vec<_> = (0..200)
                .map(|i| h2.search(&queries[i * dim..(i + 1) * dim], 10).unwrap())
                .collect();
            let q = t.elapsed() / 200;
            let mut found = 0;
            for (w, g) in want.iter().zip(&got) {
                let w: HashSet<usize> = w.iter().map(|x| x.id).collect();
                found += g.iter().filter(|x| w.contains(&x.id)).count();
            }
            println!("M {m} efc {efc} par {par}: build {build:?} ef_search {efs}: recall {:.4} query {q:?}", found as f64 / 2000.0);
        }
    }
}
