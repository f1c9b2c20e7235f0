//! Personalized PageRank per query: on the MuSiQue HippoRAG 2 graph (needs the dataset and the MiniLM
//! assets; skipped otherwise) and on a synthetic graph of 100,000 nodes and 1,000,000 random weighted
//! undirected edges. Settings: HippoRAG 2's (damping 0.5, L1 tolerance 1e-10), damping 0.85 at 1e-10, and
//! damping 0.5 at a loose 1e-6.
//!
//! The graphs, reset vectors and our scores are exported to `target/bench-data/ppr-*`; when
//! `KGRAG_IGRAPH_PYTHON` names a Python with python-igraph, `benches/python/ppr_igraph.py` then times
//! igraph's `personalized_pagerank(implementation="prpack")` on the same inputs in the same run, checks its
//! scores against ours and the ratio is printed.
#![allow(missing_docs)]

use std::fmt::Write as _;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use kgrag_benches::{bench_data_dir, musique_graph, musique_resets, synthetic_ppr_1m};
use kgrag_graph_store::ppr::{PprConfig, PprSolver};
use kgrag_graph_store::{CsrGraph, EdgeWeighting};

struct Case {
    name: &'static str,
    csr: CsrGraph,
    edges: Vec<(u32, u32, f64)>,
    resets: Vec<Vec<f64>>,
}

fn synthetic() -> Option<Case> {
    let (n, edges, resets) = synthetic_ppr_1m();
    let csr = CsrGraph::from_edges(n, &edges, false).ok()?;
    Some(Case {
        name: "synthetic_100k_nodes_1M_edges",
        csr,
        edges,
        resets,
    })
}

fn musique() -> Option<Case> {
    let m = musique_graph()?;
    let csr = m.graph.csr(EdgeWeighting::HippoReference).ok()?;
    let edges: Vec<(u32, u32, f64)> = m
        .graph
        .edges()
        .filter_map(|(_, a, b, e)| {
            let w = e.weight(EdgeWeighting::HippoReference);
            Some((csr.dense_id(a)? as u32, csr.dense_id(b)? as u32, w))
        })
        .filter(|e| e.2 != 0.0)
        .collect();
    let resets = musique_resets(&m, &csr, 20);
    Some(Case {
        name: "musique_hipporag2",
        csr,
        edges,
        resets,
    })
}

const SETTINGS: [(&str, f64, f64); 3] = [
    ("d0.5_tol1e-10_hipporag", 0.5, 1e-10),
    ("d0.85_tol1e-10", 0.85, 1e-10),
    ("d0.5_tol1e-6", 0.5, 1e-6),
];

fn export(case: &Case) -> std::io::Result<std::path::PathBuf> {
    let dir = bench_data_dir().join(format!("ppr-{}", case.name));
    std::fs::create_dir_all(&dir)?;
    let mut s = String::with_capacity(case.edges.len() * 24);
    let _ = writeln!(s, "{}", case.csr.node_count());
    for (a, b, w) in &case.edges {
        let _ = writeln!(s, "{a} {b} {w:e}");
    }
    std::fs::write(dir.join("edges.txt"), s)?;
    let mut r = String::new();
    let mut sc = String::new();
    for reset in &case.resets {
        let line: Vec<String> = reset.iter().map(|v| format!("{v:e}")).collect();
        let _ = writeln!(r, "{}", line.join(" "));
        let mut solver = PprSolver::new(&case.csr, PprConfig::default())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        solver
            .run(reset)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let line: Vec<String> = solver.scores().iter().map(|v| format!("{v:e}")).collect();
        let _ = writeln!(sc, "{}", line.join(" "));
    }
    std::fs::write(dir.join("resets.txt"), r)?;
    std::fs::write(dir.join("scores.txt"), sc)?;
    Ok(dir)
}

/// Our mean time per query (ms) over all resets, `rounds` times, at HippoRAG's settings.
fn our_ms_per_query(case: &Case, rounds: usize) -> f64 {
    let Ok(mut solver) = PprSolver::new(&case.csr, PprConfig::default()) else {
        return f64::NAN;
    };
    let t = Instant::now();
    for _ in 0..rounds {
        for r in &case.resets {
            let _ = solver.run(r);
        }
    }
    t.elapsed().as_secs_f64() * 1e3 / (rounds * case.resets.len()) as f64
}

fn compare_with_igraph(case: &Case) {
    let dir = match export(case) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{}: export failed: {e}", case.name);
            return;
        }
    };
    let Some(python) = std::env::var_os("KGRAG_IGRAPH_PYTHON") else {
        eprintln!(
            "{}: exported to {}; set KGRAG_IGRAPH_PYTHON to compare with python-igraph",
            case.name,
            dir.display()
        );
        return;
    };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/ppr_igraph.py");
    let ours = our_ms_per_query(case, 5);
    match std::process::Command::new(python)
        .arg(&script)
        .arg(&dir)
        .output()
    {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            print!("{text}");
            let igraph_ms = text
                .lines()
                .find_map(|l| l.strip_prefix("igraph_ms_per_query "))
                .and_then(|v| v.trim().parse::<f64>().ok());
            if let Some(ig) = igraph_ms {
                println!(
                    "{}: kgrag {ours:.3} ms/query, igraph prpack {ig:.3} ms/query, ratio igraph/kgrag = {:.2}",
                    case.name,
                    ig / ours
                );
            }
        }
        Ok(out) => eprintln!(
            "{}: igraph script failed: {}",
            case.name,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("{}: cannot run the igraph script: {e}", case.name),
    }
}

fn ppr(c: &mut Criterion) {
    let mut cases: Vec<Case> = synthetic().into_iter().collect();
    cases.extend(musique());
    for case in &cases {
        eprintln!(
            "{}: {} nodes, {} arcs",
            case.name,
            case.csr.node_count(),
            case.csr.arc_count()
        );
        let mut group = c.benchmark_group(format!("ppr_{}", case.name));
        group.sample_size(10);
        for (label, d, tol) in SETTINGS {
            let config = PprConfig {
                damping: d,
                tolerance: tol,
                ..PprConfig::default()
            };
            let Ok(mut solver) = PprSolver::new(&case.csr, config) else {
                continue;
            };
            if let Ok(stats) = solver.run(&case.resets[0]) {
                eprintln!("{} {label}: {} iterations", case.name, stats.iterations);
            }
            let mut k = 0;
            group.bench_function(label, |b| {
                b.iter(|| {
                    k = (k + 1) % case.resets.len();
                    solver.run(&case.resets[k]).map(|s| s.iterations)
                })
            });
        }
        group.finish();
        compare_with_igraph(case);
    }
}

criterion_group!(benches, ppr);
criterion_main!(benches);
