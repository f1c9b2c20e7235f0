//! Case `umap_musique`: our UMAP against umap-learn on the vectors HiRAG's first two clustering rounds
//! reduce on MuSiQue.
//!
//! `kgrag-perf umap DIR` builds HiRAG's index of musique-100 through `kgrag bench` (offline, UMAP), writes
//! the inputs of its first two rounds to `DIR/umap/layer0.npy` (every base entity's vector) and
//! `layer1.npy` (the attribute and carried entities the first round made), then per layer: times our UMAP
//! (best of the rounds), its trustworthiness (k = 15), and the k and sparsity HiRAG's cluster step makes of
//! the layout — at the configured seed and over seeds 0..12, as `benches/python/umap_learn.py` does with
//! umap-learn.

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use kgrag::hirag::HiragConfig;
use kgrag_benches::{data_dir, write_npy};
use kgrag_hierarchy::umap::{trustworthiness, umap, UmapConfig};
use kgrag_hierarchy::{cluster_points, Assignment, ClusterConfig, HNodeKind, Points};
use serde_json::{json, Map, Value};

/// Seeds whose spread of k and sparsity is reported (umap_learn.py runs the same ones).
const SEEDS: [u64; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];

pub(crate) async fn run(dir: &Path, rounds: usize) -> Result<Value> {
    let out = dir.join("umap");
    std::fs::create_dir_all(&out)?;
    let config_path = out.join("kgrag.toml");
    std::fs::write(&config_path, "[cluster]\nreduction = \"umap\"\n")?;
    let mut args = kgrag_bench::BenchArgs::new(data_dir());
    args.dataset = Some("musique-100".to_owned());
    args.methods = vec!["hirag".to_owned()];
    args.limit = Some(1);
    args.config = Some(config_path);
    args.out = Some(out.join("bench"));
    let outcome = kgrag_bench::run(&args).await?;
    let searcher = outcome
        .searcher
        .ok_or_else(|| anyhow!("the bench built no index"))?;
    let method = searcher.method_index("hirag")?;
    let index =
        kgrag::methods::hirag_index(method.as_ref()).ok_or_else(|| anyhow!("no HiRAG index"))?;
    let hierarchy = index.hierarchy()?;
    let cluster = index.config().cluster;
    let mut layers = Map::new();
    let mut layer0_ms = f64::NAN;
    for (name, layer) in [("layer0", 0usize), ("layer1", 1usize)] {
        let Some(nodes) = hierarchy.layers.get(layer) else {
            continue;
        };
        let rows: Vec<&[f32]> = nodes
            .iter()
            .filter(|n| layer == 0 || matches!(n.kind, HNodeKind::Attribute | HNodeKind::Carried))
            .map(|n| n.embedding.as_slice())
            .collect();
        let dim = rows.first().map_or(0, |r| r.len());
        let flat: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        write_npy(&out.join(format!("{name}.npy")), rows.len(), dim, &flat)
            .with_context(|| format!("writing {name}.npy"))?;
        let v = measure(&rows, &cluster, rounds)?;
        if layer == 0 {
            layer0_ms = v["ms"].as_f64().unwrap_or(f64::NAN);
        }
        std::fs::write(out.join(format!("{name}.ours.json")), v.to_string())?;
        layers.insert(name.to_owned(), v);
    }
    let built: Vec<Value> = index
        .stats()
        .hierarchy_rounds
        .iter()
        .map(|r| json!({"layer": r.layer, "n": r.n, "k": r.k, "sparsity": r.sparsity, "init": r.umap_init}))
        .collect();
    Ok(json!({"ms": layer0_ms, "layers": layers, "index_rounds": built, "dir": out}))
}

/// Our UMAP of one layer's rows: the best time of `rounds`, the steps' seconds, trustworthiness, and the
/// clusters HiRAG's step makes of the layout at the configured seed and at each of [`SEEDS`].
fn measure(rows: &[&[f32]], cluster: &ClusterConfig, rounds: usize) -> Result<Value> {
    let n = rows.len();
    let base = UmapConfig::for_layer(n, cluster.gmm.seed);
    let mut best = f64::INFINITY;
    let mut layout = None;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let l = umap(rows, &base)?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        layout = Some(l);
    }
    let layout = layout.ok_or_else(|| anyhow!("no layout"))?;
    let trust = if n > 31 {
        Some(trustworthiness(rows, &layout, 15)?)
    } else {
        None
    };
    let soft = Assignment::Soft {
        threshold: HiragConfig::default().cluster_threshold,
    };
    let clusters_of = |coords: Vec<f64>, dim: usize| -> Result<(usize, f64)> {
        let points = Points::new(n, dim, coords)?;
        let c = cluster_points(&points, cluster, soft, 0)?;
        Ok((c.k, c.sparsity()))
    };
    let (k, sparsity) = clusters_of(layout.coords.clone(), layout.dim)?;
    let mut seeds = Vec::new();
    for seed in SEEDS {
        let l = umap(
            rows,
            &UmapConfig {
                seed,
                ..base.clone()
            },
        )?;
        let (k, s) = clusters_of(l.coords, l.dim)?;
        seeds.push(json!({"seed": seed, "k": k, "sparsity": s}));
    }
    let ks: Vec<u64> = seeds.iter().filter_map(|s| s["k"].as_u64()).collect();
    let sp: Vec<f64> = seeds
        .iter()
        .filter_map(|s| s["sparsity"].as_f64())
        .collect();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
        }
    };
    let kf: Vec<f64> = ks.iter().map(|&k| k as f64).collect();
    let range = |v: &[f64]| {
        json!([
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        ])
    };
    Ok(json!({
        "n": n,
        "ms": best,
        "steps_secs": {
            "neighbours": layout.secs.neighbours, "graph": layout.secs.graph,
            "init": layout.secs.init, "layout": layout.secs.layout,
        },
        "init": layout.init,
        "epochs": layout.n_epochs,
        "trustworthiness": trust,
        "k": k,
        "sparsity": sparsity,
        "seeds": seeds,
        "k_range": [ks.iter().min(), ks.iter().max()],
        "k_median": median(&kf),
        "sparsity_range": range(&sp),
        "sparsity_median": median(&sp),
    }))
}
