//! The timed cases, one per subcommand after `derive`: each prints what `cargo xtask perf` compares and
//! writes what the Python reference checks.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

#[cfg(not(feature = "linfa"))]
use anyhow::bail;
use anyhow::{anyhow, Context, Result};
use kgrag_benches::{data_dir, level0, merged, read_npy};
use kgrag_graph_store::ppr::{PprConfig, PprSolver};
use kgrag_graph_store::synonymy::{scan, SynonymyConfig};
use kgrag_graph_store::{CsrGraph, EdgeWeighting, ExactIndex, Metric, VectorIndex};
use kgrag_hipporag::{HippoIndex, HippoRetriever};
use kgrag_types::Embedder;
use serde_json::{json, Map, Value};

use crate::inputs::{
    build_index, build_index_timed, offline_config, questions, read_edges, read_rows, setup, texts,
    write_json, write_rows, Setup,
};

/// Passages asked of a retriever per query (the bench's recall@k needs 20).
const TOP_K: usize = 20;

fn best_of<T>(rounds: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..rounds {
        let t = Instant::now();
        let v = f()?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        last = Some(v);
    }
    let v = last.ok_or_else(|| anyhow!("no rounds"))?;
    Ok((best, v))
}

/// Case `synonymy_musique`: the exact k-NN scan of every phrase (HippoRAG 2's threshold, k and cap).
pub(crate) fn synonymy(dir: &Path, rounds: usize) -> Result<Value> {
    let (passages, phrases, _) = texts(dir)?;
    let (_, dim, data) = read_npy::<f32>(&dir.join("musique/vectors.npy"))?;
    let start = passages.len() * dim;
    let mut index = ExactIndex::new(dim, Metric::Cosine)?;
    index.add(&data[start..start + phrases.len() * dim])?;
    let rows: Vec<usize> = (0..phrases.len()).collect();
    let config = SynonymyConfig::default();
    let (ms, pairs) = best_of(rounds, || Ok(scan(&phrases, &index, &rows, &config)?))?;
    let mut s = String::with_capacity(pairs.len() * 24);
    for p in &pairs {
        let _ = writeln!(s, "{} {} {:.9}", p.from, p.to, p.cosine);
    }
    std::fs::create_dir_all(dir.join("out"))?;
    std::fs::write(dir.join("out/synonymy-ours.txt"), s)?;
    Ok(json!({"ms": ms, "pairs": pairs.len()}))
}

/// HippoRAG 2's retriever over `index` at the offline settings (no LLM filter).
fn offline_retriever(s: &Setup, index: &Arc<HippoIndex>) -> Result<HippoRetriever> {
    Ok(HippoRetriever::new(
        Arc::clone(index),
        Arc::clone(&s.embedder) as Arc<dyn Embedder>,
        None,
        offline_config(),
    )?)
}

/// Case `hipporag2_index_musique`: everything after the embeddings — phrase and fact stores from the
/// precomputed vectors, the graph, the synonymy edges and the retriever's CSR snapshot.
pub(crate) async fn hipporag2_index(dir: &Path, rounds: usize) -> Result<Value> {
    let s = setup(dir).await?;
    let mut best = f64::INFINITY;
    let mut last = None;
    let mut stages_ms = Map::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let (index, stages) = build_index_timed(&s).await?;
        let index = Arc::new(index);
        let built = t.elapsed();
        let retriever = offline_retriever(&s, &index)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if ms < best {
            best = ms;
            stages_ms = stages
                .into_iter()
                .map(|(stage, secs)| (stage, json!(secs * 1e3)))
                .collect();
            stages_ms.insert("retriever".into(), json!(ms - built.as_secs_f64() * 1e3));
        }
        drop(retriever);
        last = Some(index);
    }
    let index = last.ok_or_else(|| anyhow!("no rounds"))?;
    let csr = index.graph()?.csr(EdgeWeighting::HippoReference)?;
    Ok(json!({
        "ms": best, "stages_ms": stages_ms, "nodes": csr.node_count(), "arcs": csr.arc_count(),
        "phrases": index.phrases().len(), "facts": index.facts().len(),
    }))
}

/// Case `hipporag2_query_musique`: the 100 questions after their (precomputed) query embedding; writes
/// each question's top-5 passage rows.
pub(crate) async fn hipporag2_query(dir: &Path, rounds: usize) -> Result<Value> {
    use kgrag_types::{RetrievalRequest, Retriever};
    let s = setup(dir).await?;
    let index = Arc::new(build_index(&s).await?);
    let retriever = offline_retriever(&s, &index)?;
    let row_of: HashMap<&str, usize> = s
        .chunks
        .iter()
        .enumerate()
        .map(|(i, c)| (c.chunk.as_str(), i))
        .collect();
    let qs = questions(dir)?;
    let mut times = Vec::with_capacity(qs.len() * rounds);
    let mut top5 = Vec::with_capacity(qs.len());
    for round in 0..rounds {
        for q in &qs {
            let request = RetrievalRequest {
                query: q.clone(),
                top_k: TOP_K,
            };
            let t = Instant::now();
            let ctx = retriever.retrieve(&request).await?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            if round == 0 {
                let rows: Vec<usize> = ctx
                    .passages
                    .iter()
                    .take(5)
                    .filter_map(|p| row_of.get(p.chunk_id.as_str()).copied())
                    .collect();
                top5.push(rows);
            }
        }
    }
    write_json(&dir.join("out/hipporag2-top5-ours.json"), &json!(top5))?;
    let (p50, p95) = percentiles(&mut times);
    Ok(json!({"ms": p50, "p50_ms": p50, "p95_ms": p95, "queries": qs.len(), "rounds": rounds}))
}

fn percentiles(times: &mut [f64]) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if times.is_empty() {
            f64::NAN
        } else {
            times[((times.len() - 1) as f64 * q).round() as usize]
        }
    };
    (at(0.5), at(0.95))
}

/// Cases `ppr_musique` / `ppr_1m`: mean time per query over every reset vector, `rounds` times, at
/// HippoRAG 2's settings; writes the scores for the reference's check.
pub(crate) fn ppr(dir: &Path, name: &str, rounds: usize) -> Result<Value> {
    let d = dir.join(name);
    let (n, edges) = read_edges(&d.join("edges.txt"))?;
    let edges: Vec<(u32, u32, f64)> = edges
        .into_iter()
        .map(|(a, b, w)| (a as u32, b as u32, w))
        .collect();
    let csr = CsrGraph::from_edges(n, &edges, false)?;
    let resets = read_rows(&d.join("resets.txt"))?;
    let mut solver = PprSolver::new(&csr, PprConfig::default())?;
    let mut iterations = 0;
    let t = Instant::now();
    for _ in 0..rounds {
        for r in &resets {
            iterations = solver.run(r)?.iterations;
        }
    }
    let ms = t.elapsed().as_secs_f64() * 1e3 / (rounds * resets.len()).max(1) as f64;
    let mut scores = Vec::with_capacity(resets.len());
    for r in &resets {
        solver.run(r)?;
        scores.push(solver.scores().to_vec());
    }
    write_rows(&d.join("scores.txt"), &scores)?;
    Ok(
        json!({"ms": ms, "nodes": n, "arcs": csr.arc_count(), "iterations_last": iterations, "eliminated": solver.eliminated_nodes(), "swept_arcs": solver.swept_arcs()}),
    )
}

fn pca_points(dir: &Path) -> Result<kgrag_hierarchy::reduce::Points> {
    let (n, d, data) = read_npy::<f64>(&dir.join("musique/pca2.npy"))?;
    Ok(kgrag_hierarchy::reduce::Points::new(n, d, data)?)
}

/// Case `gmm_bic_musique`: one hierarchy layer's BIC scan and soft assignment on the PCA-reduced phrases.
pub(crate) fn gmm(dir: &Path, rounds: usize) -> Result<Value> {
    use kgrag_hierarchy::{cluster_points, Assignment, ClusterConfig, Gmm};
    let points = pca_points(dir)?;
    let config = ClusterConfig::default();
    let (ms, layer) = best_of(rounds, || {
        Ok(cluster_points(
            &points,
            &config,
            Assignment::Soft { threshold: 0.1 },
            0,
        )?)
    })?;
    let ll = Gmm::fit(&points, layer.k, &config.gmm)?.score(&points);
    Ok(json!({"ms": ms, "k": layer.k, "ks": layer.scan.ks, "mean_log_likelihood": ll}))
}

#[cfg(feature = "linfa")]
pub(crate) fn gmm_linfa(dir: &Path) -> Result<Value> {
    crate::linfa_case::run(&pca_points(dir)?)
}

#[cfg(not(feature = "linfa"))]
pub(crate) fn gmm_linfa(_dir: &Path) -> Result<Value> {
    bail!("gmm-linfa needs the `linfa` feature (cargo xtask perf builds with it)")
}

fn leiden_config() -> kgrag_community::HierarchicalConfig {
    // graspologic-native clusters every component it is given and runs one Leiden iteration per level
    // (`iterations=1`), so ours does too (HiRAG's other settings are the defaults).
    kgrag_community::HierarchicalConfig {
        largest_component_only: false,
        leiden: kgrag_community::LeidenConfig {
            max_iterations: 1,
            ..kgrag_community::LeidenConfig::default()
        },
        ..kgrag_community::HierarchicalConfig::default()
    }
}

/// Cases `leiden_musique` / `leiden_1m`: hierarchical Leiden from the edge list (graph build included, as
/// graspologic-native's call builds its network from the list); level-0 modularity.
pub(crate) fn leiden(dir: &Path, name: &str, rounds: usize) -> Result<Value> {
    use kgrag_community::{hierarchical_leiden, Graph};
    let (n, edges) = read_edges(&dir.join(name).join("edges.txt"))?;
    let edges = merged(edges);
    let config = leiden_config();
    let (ms, h) = best_of(rounds, || {
        Ok(hierarchical_leiden(
            &Graph::from_edges(n, &edges)?,
            &config,
        )?)
    })?;
    let g = Graph::from_edges(n, &edges)?;
    let q = g.modularity(&level0(&h, n), 1.0)?;
    Ok(json!({"ms": ms, "modularity": q, "levels": h.levels, "records": h.records.len()}))
}

/// The level-0 modularity (our formula) of a partition file of `node cluster` lines over `NAME`'s graph;
/// nodes the file does not list are singletons.
pub(crate) fn modularity(dir: &Path, name: &str, file: &Path) -> Result<Value> {
    use kgrag_community::Graph;
    let (n, edges) = read_edges(&dir.join(name).join("edges.txt"))?;
    let g = Graph::from_edges(n, &merged(edges))?;
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut membership: Vec<Option<usize>> = vec![None; n];
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for line in text.lines() {
        let mut p = line.split_whitespace();
        let (Some(node), Some(cluster)) = (p.next(), p.next()) else {
            continue;
        };
        let node: usize = node.parse()?;
        let next = ids.len();
        if node < n {
            membership[node] = Some(*ids.entry(cluster).or_insert(next));
        }
    }
    let mut next = ids.len();
    let membership: Vec<usize> = membership
        .into_iter()
        .map(|c| {
            c.unwrap_or_else(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    Ok(json!({"modularity": g.modularity(&membership, 1.0)?}))
}

/// Cases `hirag_query_musique` and `leanrag_query_musique`: `kgrag bench` on musique-100 with the HiRAG and
/// LeanRAG methods (offline, through the default response cache); their query latency after the query
/// embedding (p50, p95), and with it, and the embedding's mean time, apart.
pub(crate) async fn method_query(dir: &Path) -> Result<Value> {
    let mut args = kgrag_bench::BenchArgs::new(data_dir());
    args.dataset = Some("musique-100".to_owned());
    args.methods = vec!["hirag".to_owned(), "leanrag".to_owned()];
    args.out = Some(dir.join("bench"));
    let outcome = kgrag_bench::run(&args).await?;
    let mut out = Map::new();
    for (method, case) in [
        ("hirag", "hirag_query_musique"),
        ("leanrag", "leanrag_query_musique"),
    ] {
        let m = outcome
            .report
            .methods
            .get(method)
            .ok_or_else(|| anyhow!("the bench report has no {method}"))?;
        // The judged figure leaves the query embedding out: the first method embeds every question, the
        // next finds the vectors cached, so latencies with it compare the cache, not the methods.
        let after = m.latency_after_embedding_ms.ok_or_else(|| {
            anyhow!("{method} reports no per-query embedding time (stat embed_ms)")
        })?;
        out.insert(
            case.to_owned(),
            json!({
                "ms": after.p50, "p95_ms": after.p95,
                "with_embedding_p50_ms": m.latency_ms.p50,
                "with_embedding_p95_ms": m.latency_ms.p95,
                "embedding_mean_ms": m.stats.get("embed_ms"),
            }),
        );
    }
    Ok(Value::Object(out))
}

/// Case `index_musique_full`: `kgrag bench` on musique-100 with every method, offline, from an empty
/// response cache (so every text is embedded): wall time, and the seconds of each index stage.
pub(crate) async fn index_full(dir: &Path) -> Result<Value> {
    let full = dir.join("full");
    let cache = full.join("cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&full)?;
    let config = full.join("kgrag.toml");
    std::fs::write(
        &config,
        format!("cache_dir = {:?}\n", cache.to_string_lossy()),
    )?;
    let mut args = kgrag_bench::BenchArgs::new(data_dir());
    args.dataset = Some("musique-100".to_owned());
    args.out = Some(full.join("bench"));
    args.config = Some(config);
    let t = Instant::now();
    let outcome = kgrag_bench::run(&args).await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let stages: Map<String, Value> = outcome
        .report
        .index
        .stages
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.secs)))
        .collect();
    let recall: Map<String, Value> = outcome
        .report
        .methods
        .iter()
        .map(|(k, m)| (k.clone(), json!(m.recall)))
        .collect();
    Ok(json!({"ms": ms, "stages_secs": stages, "recall": recall}))
}

/// The machine's measured limits: the f32 matrix-product rate of the kernel our exact k-NN uses (a
/// 4096 × 4096 × 384 product, the rows split over the cores as the synonymy scan splits them) and the
/// read bandwidth of a 512 MiB array summed by every core.
pub(crate) fn peak(rounds: usize) -> Result<Value> {
    use ndarray::linalg::general_mat_mul;
    use ndarray::Array2;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let (m, n, k) = (4096usize, 4096usize, 384usize);
    let a = Array2::from_shape_fn((m, k), |(i, j)| ((i * 31 + j * 17) % 97) as f32 / 97.0);
    let b = Array2::from_shape_fn((n, k), |(i, j)| ((i * 13 + j * 7) % 89) as f32 / 89.0);
    let rows = m.div_ceil(threads);
    let (gemm_ms, _) = best_of(rounds, || {
        std::thread::scope(|scope| {
            for t in 0..threads {
                let (a, b) = (&a, &b);
                scope.spawn(move || {
                    let lo = (t * rows).min(m);
                    let hi = ((t + 1) * rows).min(m);
                    let part = a.slice_axis(ndarray::Axis(0), ndarray::Slice::from(lo..hi));
                    let mut c = Array2::<f32>::zeros((hi - lo, n));
                    general_mat_mul(1.0, &part, &b.t(), 0.0, &mut c);
                    std::hint::black_box(c[[0, 0]]);
                });
            }
        });
        Ok(())
    })?;
    let gflops = 2.0 * (m * n * k) as f64 / (gemm_ms * 1e6);
    let words = 64usize << 20; // 64 Mi f64 = 512 MiB
    let data: Vec<f64> = (0..words).map(|i| (i % 1000) as f64).collect();
    let per = words.div_ceil(threads);
    let (read_ms, _) = best_of(rounds, || {
        let total: f64 = std::thread::scope(|scope| {
            let handles: Vec<_> = data
                .chunks(per)
                .map(|c| scope.spawn(move || c.iter().sum::<f64>()))
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).sum()
        });
        std::hint::black_box(total);
        Ok(())
    })?;
    let gbs = (words * 8) as f64 / (read_ms * 1e6);
    Ok(json!({
        "threads": threads, "sgemm_gflops": gflops, "sgemm_ms": gemm_ms,
        "read_gb_per_s": gbs, "read_ms": read_ms,
    }))
}
