//! One hierarchy clustering layer on the MuSiQue entities (16,235 MiniLM phrase vectors, 384-d): PCA to two
//! dimensions, then the BIC scan over k = 1 .. 49 with its early stop and the soft assignment of the chosen
//! mixture (spec hirag §5.2). Criterion times the PCA and a single mixture fit; the whole layer is timed
//! directly and compared with scikit-learn's `GaussianMixture` on the same reduced matrix in the same run
//! when `KGRAG_SKLEARN_PYTHON` names a Python with scikit-learn (`benches/python/gmm_sklearn.py`).
//! Needs the dataset and the MiniLM assets (skipped otherwise; embeddings cached in `target/bench-data/`).
#![allow(missing_docs)]

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use kgrag_benches::{bench_data_dir, musique_graph, write_npy};
use kgrag_hierarchy::reduce::{reduce, Points, Reduction};
use kgrag_hierarchy::{cluster_points, Assignment, ClusterConfig, Gmm, GmmConfig, LayerClustering};

fn layer(points: &Points, config: &ClusterConfig) -> Option<LayerClustering> {
    cluster_points(points, config, Assignment::Soft { threshold: 0.1 }, 0).ok()
}

fn compare_with_sklearn(points: &Points, config: &ClusterConfig) {
    let rounds = 3;
    let mut best = f64::INFINITY;
    let mut result = None;
    for _ in 0..rounds {
        let t = Instant::now();
        result = layer(points, config);
        best = best.min(t.elapsed().as_secs_f64());
    }
    let Some(ours) = result else {
        eprintln!("hierarchy: the layer failed");
        return;
    };
    let mut sizes = ours.sizes();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    println!(
        "hierarchy layer (kgrag): N {} d {} → k {} after {} k tried, best of {rounds}: {best:.3} s; sparsity {:.4}; \
         cluster sizes {:?}",
        points.len(),
        points.dim(),
        ours.k,
        ours.scan.ks.len(),
        ours.sparsity(),
        sizes
    );
    println!("hierarchy layer (kgrag): BIC {:?}", ours.scan.bics);
    let path = bench_data_dir().join("hierarchy-musique-pca2.npy");
    if let Err(e) = write_npy(&path, points.len(), points.dim(), points.as_slice()) {
        eprintln!("hierarchy: cannot write {}: {e}", path.display());
        return;
    }
    let Some(python) = std::env::var_os("KGRAG_SKLEARN_PYTHON") else {
        eprintln!(
            "hierarchy: reduced matrix written to {}; set KGRAG_SKLEARN_PYTHON to compare with scikit-learn",
            path.display()
        );
        return;
    };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/gmm_sklearn.py");
    match std::process::Command::new(python)
        .arg(&script)
        .arg(&path)
        .args(["--rounds", &rounds.to_string()])
        .output()
    {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            println!("hierarchy layer (scikit-learn): {}", text.trim());
            let secs = text
                .split("\"secs_min\":")
                .nth(1)
                .and_then(|s| s.split([',', '}']).next())
                .and_then(|v| v.trim().parse::<f64>().ok());
            if let Some(sk) = secs {
                println!(
                    "hierarchy layer: kgrag {best:.3} s, scikit-learn {sk:.3} s, ratio scikit-learn/kgrag = {:.1}",
                    sk / best
                );
            }
        }
        Ok(out) => eprintln!(
            "hierarchy: scikit-learn script failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("hierarchy: cannot run the scikit-learn script: {e}"),
    }
}

fn hierarchy(c: &mut Criterion) {
    let Some(m) = musique_graph() else {
        return;
    };
    let dim = 384;
    let Ok(values) = m.phrase_index.values() else {
        return;
    };
    let rows: Vec<&[f32]> = values.chunks(dim).collect();
    let t = Instant::now();
    let Ok(points) = reduce(&rows, Reduction::Pca(2)) else {
        eprintln!("hierarchy: PCA failed");
        return;
    };
    eprintln!(
        "hierarchy: PCA {} × {dim} → {} in {:.3} s",
        rows.len(),
        points.dim(),
        t.elapsed().as_secs_f64()
    );
    let config = ClusterConfig::default();
    let mut group = c.benchmark_group("hierarchy_musique");
    group.sample_size(10);
    group.bench_function("pca2_16235x384", |b| {
        b.iter(|| reduce(&rows, Reduction::Pca(2)).map(|p| p.len()))
    });
    group.bench_function("gmm_fit_k10_n_init5", |b| {
        b.iter(|| Gmm::fit(&points, 10, &GmmConfig::default()).map(|g| g.n_iter()))
    });
    group.finish();
    compare_with_sklearn(&points, &config);
}

criterion_group!(benches, hierarchy);
criterion_main!(benches);
