//! Hierarchical Leiden (HiRAG's settings: max cluster size 10, seed 0xDEADBEEF, γ 1, θ 0.001) on the
//! MuSiQue entity graph (phrases linked by their fact counts) and on a synthetic graph of 100k nodes and
//! exactly 1M distinct edges (planted groups of 100 plus random edges): time, level-0 modularity and levels; with
//! `KGRAG_GRASPOLOGIC_PYTHON` set to a Python with `graspologic-native`, also graspologic-native's
//! `hierarchical_leiden` on the same edge list in the same run (`benches/python/leiden_graspologic.py`),
//! its level-0 modularity computed here with the same formula, and the time ratio.
#![allow(missing_docs)]

use std::fmt::Write as _;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use kgrag_benches::{
    bench_data_dir, level0, musique_entity_edges, musique_graph, synthetic_leiden_1m,
};
use kgrag_community::{hierarchical_leiden, Graph, HierarchicalConfig};

struct Case {
    name: &'static str,
    n: usize,
    edges: Vec<(usize, usize, f64)>,
}

fn musique() -> Option<Case> {
    let m = musique_graph()?;
    Some(Case {
        name: "musique_entities",
        n: m.phrase_nodes.len(),
        edges: musique_entity_edges(&m),
    })
}

fn synthetic() -> Case {
    let (n, edges) = synthetic_leiden_1m();
    Case {
        name: "synthetic_100k_1m",
        n,
        edges,
    }
}

fn compare(case: &Case, g: &Graph, ours_secs: f64, ours_q: f64) {
    let dir = bench_data_dir().join(format!("leiden-{}", case.name));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let mut s = String::with_capacity(case.edges.len() * 16);
    let _ = writeln!(s, "{}", case.n);
    for (a, b, w) in &case.edges {
        let _ = writeln!(s, "{a} {b} {w}");
    }
    if std::fs::write(dir.join("edges.txt"), s).is_err() {
        return;
    }
    let Some(python) = std::env::var_os("KGRAG_GRASPOLOGIC_PYTHON") else {
        eprintln!(
            "{}: edges written to {}; set KGRAG_GRASPOLOGIC_PYTHON to compare",
            case.name,
            dir.display()
        );
        return;
    };
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/leiden_graspologic.py");
    let out = match std::process::Command::new(python)
        .arg(&script)
        .arg(&dir)
        .args(["--rounds", "3"])
        .output()
    {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return eprintln!(
                "{}: script failed: {}",
                case.name,
                String::from_utf8_lossy(&o.stderr)
            )
        }
        Err(e) => return eprintln!("{}: cannot run the script: {e}", case.name),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{} graspologic-native: {}", case.name, text.trim());
    let secs = text
        .split("\"secs_min\":")
        .nth(1)
        .and_then(|s| s.split([',', '}']).next())
        .and_then(|v| v.trim().parse::<f64>().ok());
    let Ok(level0_text) = std::fs::read_to_string(dir.join("graspologic_level0.txt")) else {
        return;
    };
    let mut membership: Vec<usize> = (0..case.n).map(|v| 1_000_000_000 + v).collect();
    let mut ids = std::collections::HashMap::new();
    for line in level0_text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(node), Some(cluster)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(node), next) = (node.parse::<usize>(), ids.len()) else {
            continue;
        };
        if node < case.n {
            membership[node] = *ids.entry(cluster.to_owned()).or_insert(next);
        }
    }
    let mut next = ids.len();
    for c in &mut membership {
        if *c >= 1_000_000_000 {
            *c = next;
            next += 1;
        }
    }
    let q = g.modularity(&membership, 1.0).unwrap_or(f64::NAN);
    if let Some(sk) = secs {
        println!(
            "{}: kgrag {ours_secs:.3} s (level-0 Q {ours_q:.4}), graspologic-native {sk:.3} s (level-0 Q {q:.4}), \
             ratio graspologic/kgrag = {:.2}",
            case.name,
            sk / ours_secs
        );
    }
}

fn community(c: &mut Criterion) {
    let mut cases: Vec<Case> = musique().into_iter().collect();
    cases.push(synthetic());
    // graspologic-native clusters every component of the edge list it is given (HiRAG restricts it to the
    // largest component beforehand), so the comparison clusters every component too.
    // One Leiden iteration per run, as graspologic-native is given (`iterations=1`); our default (iterate
    // until stable, at most 100) is printed as an extra row.
    let config = HierarchicalConfig {
        largest_component_only: false,
        leiden: kgrag_community::LeidenConfig {
            max_iterations: 1,
            ..kgrag_community::LeidenConfig::default()
        },
        ..HierarchicalConfig::default()
    };
    for case in &cases {
        let Ok(g) = Graph::from_edges(case.n, &case.edges) else {
            continue;
        };
        let mut best = f64::INFINITY;
        let mut result = None;
        for _ in 0..3 {
            // Timed from the edge list, as graspologic-native's call builds its network from the list.
            let t = Instant::now();
            result = Graph::from_edges(case.n, &case.edges)
                .and_then(|g| hierarchical_leiden(&g, &config))
                .ok();
            best = best.min(t.elapsed().as_secs_f64());
        }
        let Some(h) = result else { continue };
        let q = g.modularity(&level0(&h, case.n), 1.0).unwrap_or(f64::NAN);
        let level0_clusters = h
            .records
            .iter()
            .filter(|r| r.level == 0)
            .map(|r| r.cluster)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        println!(
            "{}: {} nodes, {} edges; kgrag hierarchical Leiden (graph build included) best of 3 {best:.3} s, {} levels, {} level-0 clusters, level-0 Q {q:.4}, {} records",
            case.name,
            case.n,
            case.edges.len(),
            h.levels,
            level0_clusters,
            h.records.len()
        );
        for iterations in [1, 100] {
            let cfg = kgrag_community::LeidenConfig {
                max_iterations: iterations,
                ..kgrag_community::LeidenConfig::default()
            };
            let t = Instant::now();
            if let Ok(p) = kgrag_community::leiden(&g, &cfg) {
                println!(
                    "{}: flat Leiden, max_iterations {iterations}: {:.3} s, {} iterations run, {} communities, Q {:.4}",
                    case.name,
                    t.elapsed().as_secs_f64(),
                    p.iterations,
                    p.communities,
                    p.quality
                );
            }
        }
        let default = HierarchicalConfig {
            largest_component_only: false,
            ..HierarchicalConfig::default()
        };
        let t = Instant::now();
        if let Ok(h) = hierarchical_leiden(&g, &default) {
            println!(
                "{}: kgrag hierarchical Leiden, default iterations: {:.3} s, level-0 Q {:.4}",
                case.name,
                t.elapsed().as_secs_f64(),
                g.modularity(&level0(&h, case.n), 1.0).unwrap_or(f64::NAN)
            );
        }
        compare(case, &g, best, q);
        if case.name == "musique_entities" {
            let mut group = c.benchmark_group("community");
            group.sample_size(10);
            group.bench_function("hierarchical_leiden_musique", |b| {
                b.iter(|| hierarchical_leiden(&g, &config).map(|h| h.levels))
            });
            group.finish();
        }
    }
}

criterion_group!(benches, community);
criterion_main!(benches);
