//! Vector indexes: HNSW recall against exact search, persistence, corruption.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::path::PathBuf;

use kgrag_graph_store::vector::{load_index, new_index};
use kgrag_graph_store::{ExactIndex, HnswIndex, HnswParams, IndexKind, Metric, VectorIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn unit_vectors(rng: &mut StdRng, n: usize, dim: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        // Gaussian by Box-Muller, then normalised: uniform on the sphere.
        let row: Vec<f32> = (0..dim)
            .map(|_| {
                let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
                let u2: f64 = rng.gen_range(0.0..1.0);
                ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
            })
            .collect();
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        out.extend(row.iter().map(|v| v / norm));
    }
    out
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kgrag-vectors-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn hnsw_recall_at_10_on_10k_random_unit_vectors() {
    let dim = 384;
    let mut rng = StdRng::seed_from_u64(42);
    let data = unit_vectors(&mut rng, 10_000, dim);
    let queries = unit_vectors(&mut rng, 200, dim);
    let exact = ExactIndex::from_rows(dim, Metric::Cosine, &data).unwrap();
    let t = std::time::Instant::now();
    // Default graph and search parameters; only the insertion is parallel, to keep the test short (a
    // sequential build gives a reproducible graph with the same parameters, and takes twice as long).
    let params = HnswParams {
        parallel_build: true,
        ..HnswParams::default()
    };
    let mut hnsw = HnswIndex::new(dim, Metric::Cosine, params).unwrap();
    hnsw.add(&data).unwrap();
    eprintln!("hnsw build (test profile): {:?}", t.elapsed());
    let want = exact.search_batch(&queries, 10).unwrap();
    let got = hnsw.search_batch(&queries, 10).unwrap();
    let mut found = 0;
    for (qi, (w, g)) in want.iter().zip(&got).enumerate() {
        let w: HashSet<usize> = w.iter().map(|h| h.id).collect();
        found += g.iter().filter(|h| w.contains(&h.id)).count();
        // Returned scores are the exact cosines of the hits.
        let q = &queries[qi * dim..(qi + 1) * dim];
        for h in g {
            let s: f32 = exact
                .vector(h.id)
                .unwrap()
                .iter()
                .zip(q)
                .map(|(a, b)| a * b)
                .sum();
            assert!((s - h.score).abs() < 1e-5, "{s} vs {}", h.score);
        }
    }
    let recall = found as f64 / (10.0 * want.len() as f64);
    eprintln!("hnsw recall@10 = {recall:.4}");
    assert!(recall >= 0.95, "recall@10 {recall}");
    // Batch and single-query exact search agree on the ids.
    let single = exact.search(&queries[..dim], 10).unwrap();
    let ids = |h: &[kgrag_graph_store::Hit]| h.iter().map(|x| x.id).collect::<Vec<_>>();
    assert_eq!(ids(&single), ids(&want[0]));
    // Indexed vectors find themselves first.
    let me = hnsw.search(&data[5 * dim..6 * dim], 1).unwrap();
    assert_eq!(me[0].id, 5);
}

#[test]
fn save_load_round_trip_and_corruption() {
    let dim = 16;
    let mut rng = StdRng::seed_from_u64(1);
    let data = unit_vectors(&mut rng, 500, dim);
    let q = unit_vectors(&mut rng, 5, dim);
    for kind in [IndexKind::Exact, IndexKind::Hnsw(HnswParams::default())] {
        for metric in [Metric::Cosine, Metric::InnerProduct] {
            let mut idx = new_index(kind, dim, metric, data.len()).unwrap();
            let scaled: Vec<f32> = data
                .iter()
                .enumerate()
                .map(|(i, v)| v * (1.0 + (i % 7) as f32))
                .collect();
            // Two inserts, the second with longer rows: the saved index must reload to the same answers.
            let half = scaled.len() / 2 / dim * dim;
            idx.add(&scaled[..half]).unwrap();
            let longer: Vec<f32> = scaled[half..].iter().map(|v| v * 1.1).collect();
            idx.add(&longer).unwrap();
            let path = tmp(&format!("{kind:?}-{metric:?}.idx")
                .replace(['(', ')', ' ', ':', ',', '{', '}'], ""));
            idx.save(&path).unwrap();
            let back = load_index(&path).unwrap();
            assert_eq!(back.len(), idx.len());
            assert_eq!(back.metric(), metric);
            for i in 0..idx.len() {
                assert_eq!(back.vector(i), idx.vector(i));
            }
            assert_eq!(
                back.search_batch(&q, 10).unwrap(),
                idx.search_batch(&q, 10).unwrap(),
                "{kind:?} {metric:?}: same answers after reload"
            );
            let bytes = std::fs::read(&path).unwrap();
            let mut bad = bytes.clone();
            let mid = bad.len() / 2;
            bad[mid] ^= 1;
            std::fs::write(&path, &bad).unwrap();
            let err = load_index(&path).unwrap_err().to_string();
            assert!(err.contains("checksum") && err.contains(".idx"), "{err}");
            std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
            let err = load_index(&path).unwrap_err().to_string();
            assert!(err.contains("truncated"), "{err}");
        }
    }
}

#[test]
fn inner_product_hnsw_matches_exact_on_small_sets() {
    let dim = 8;
    let mut rng = StdRng::seed_from_u64(3);
    let mut data = unit_vectors(&mut rng, 300, dim);
    for (i, v) in data.iter_mut().enumerate() {
        *v *= 1.0 + ((i / dim) % 5) as f32;
    }
    let exact = ExactIndex::from_rows(dim, Metric::InnerProduct, &data).unwrap();
    let mut hnsw = HnswIndex::new(dim, Metric::InnerProduct, HnswParams::default()).unwrap();
    // Added in two parts, the second with longer rows: forces the rebuild with a new scale.
    hnsw.add(&data[..150 * dim]).unwrap();
    let longer: Vec<f32> = data[150 * dim..].iter().map(|v| v * 3.0).collect();
    hnsw.add(&longer).unwrap();
    let mut all = data[..150 * dim].to_vec();
    all.extend_from_slice(&longer);
    let exact_all = ExactIndex::from_rows(dim, Metric::InnerProduct, &all).unwrap();
    let q = unit_vectors(&mut rng, 20, dim);
    let a = exact_all.search_batch(&q, 5).unwrap();
    let b = hnsw.search_batch(&q, 5).unwrap();
    let ids = |h: &[kgrag_graph_store::Hit]| h.iter().map(|x| x.id).collect::<Vec<_>>();
    let agree = a.iter().zip(&b).filter(|(x, y)| ids(x) == ids(y)).count();
    assert!(agree >= 19, "{agree}/20 queries identical");
    assert_eq!(exact.len(), 300);
}
