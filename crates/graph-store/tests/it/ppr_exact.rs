//! Personalized PageRank against the exact solution of its linear system (nalgebra LU), on small random
//! graphs: directed and undirected, with dangling nodes, zero-weight rows and parallel edges.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kgrag_graph_store::ppr::{personalized_pagerank, PprConfig, PprSolver};
use kgrag_graph_store::CsrGraph;
use nalgebra::{DMatrix, DVector};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Solves x = (1-d) r + d (Pᵀ x + r (aᵀ x)) where P = row-normalised W and a marks dangling rows.
fn exact(n: usize, edges: &[(u32, u32, f64)], directed: bool, reset: &[f64], d: f64) -> Vec<f64> {
    let mut w = DMatrix::<f64>::zeros(n, n);
    for &(a, b, x) in edges {
        w[(a as usize, b as usize)] += x;
        if !directed && a != b {
            w[(b as usize, a as usize)] += x;
        }
    }
    let total: f64 = reset.iter().sum();
    let r = DVector::from_iterator(n, reset.iter().map(|v| v / total));
    let mut m = DMatrix::<f64>::identity(n, n);
    for i in 0..n {
        let s: f64 = (0..n).map(|j| w[(i, j)]).sum();
        for j in 0..n {
            if s > 0.0 {
                m[(j, i)] -= d * w[(i, j)] / s;
            } else {
                m[(j, i)] -= d * r[j];
            }
        }
    }
    let rhs = &r * (1.0 - d);
    m.lu().solve(&rhs).unwrap().iter().copied().collect()
}

fn random_graph(rng: &mut StdRng, n: usize) -> Vec<(u32, u32, f64)> {
    let m = rng.gen_range(0..n * 3);
    let mut edges = Vec::new();
    for _ in 0..m {
        let a = rng.gen_range(0..n as u32);
        let b = rng.gen_range(0..n as u32);
        // Some zero weights (edges that must not count) and a wide weight range.
        let w = match rng.gen_range(0..5) {
            0 => 0.0,
            1 => rng.gen_range(0.001..0.01),
            _ => rng.gen_range(0.1..10.0),
        };
        edges.push((a, b, w));
    }
    edges
}

#[test]
fn ppr_matches_the_linear_system() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut dangling_seen = 0;
    for case in 0..300 {
        let n = rng.gen_range(1..40);
        let edges = random_graph(&mut rng, n);
        let directed = case % 2 == 0;
        let mut reset: Vec<f64> = (0..n)
            .map(|_| {
                if rng.gen_bool(0.3) {
                    rng.gen_range(0.0..1.0)
                } else {
                    0.0
                }
            })
            .collect();
        if reset.iter().sum::<f64>() == 0.0 {
            reset[rng.gen_range(0..n)] = 1.0;
        }
        let d = [0.5, 0.85, 0.15][case % 3];
        let csr = CsrGraph::from_edges(n, &edges, directed).unwrap();
        dangling_seen += csr.out_strength().iter().filter(|s| **s == 0.0).count();
        let want = exact(n, &edges, directed, &reset, d);
        // Sequential sweeps, and the parallel path (conjugate gradients when undirected, Jacobi steps
        // when directed).
        for parallel_min_arcs in [usize::MAX, 0] {
            let config = PprConfig {
                damping: d,
                tolerance: 1e-13,
                parallel_min_arcs,
                ..PprConfig::default()
            };
            let (x, stats) = personalized_pagerank(&csr, &reset, config).unwrap();
            assert!(stats.converged, "case {case}: {stats:?}");
            for (i, (a, b)) in x.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < 1e-8,
                    "case {case} (n {n}, directed {directed}, d {d}, parallel from {parallel_min_arcs}) \
                     node {i}: {a} vs {b}"
                );
            }
            let sum: f64 = x.iter().sum();
            assert!((sum - 1.0).abs() < 1e-12, "case {case}: sum {sum}");
        }
    }
    assert!(
        dangling_seen > 100,
        "the random graphs exercise dangling nodes"
    );
}

#[test]
fn sweeps_conjugate_gradients_and_jacobi_reach_the_same_fixed_point() {
    let mut rng = StdRng::seed_from_u64(11);
    let n = 20_000;
    let edges: Vec<(u32, u32, f64)> = (0..100_000)
        .map(|_| {
            (
                rng.gen_range(0..n as u32),
                rng.gen_range(0..n as u32),
                rng.gen_range(0.5..2.0),
            )
        })
        .collect();
    let csr = CsrGraph::from_edges(n, &edges, false).unwrap();
    let mut reset = vec![0.0; n];
    for _ in 0..10 {
        reset[rng.gen_range(0..n)] = 1.0;
    }
    let seq = PprConfig {
        parallel_min_arcs: usize::MAX,
        ..PprConfig::default()
    };
    let par = PprConfig {
        parallel_min_arcs: 0,
        ..PprConfig::default()
    };
    let (a, sa) = personalized_pagerank(&csr, &reset, seq).unwrap();
    let (b, sb) = personalized_pagerank(&csr, &reset, par).unwrap();
    assert!(sa.converged && sb.converged);
    // Sequential sweeps are over-relaxed Gauss–Seidel, the parallel path on an undirected graph conjugate
    // gradients (from a sparse start: the reset is on 10 nodes): the same fixed point, both within the
    // tolerance of it, conjugate gradients in fewer operator products than the power iteration needs.
    let power_steps = (1e-10f64).ln() / 0.5f64.ln();
    assert!((sb.iterations as f64) < power_steps, "{sb:?}");
    let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum::<f64>();
    assert!(diff < 1e-9, "L1 difference {diff}");
    // A dense reset starts conjugate gradients densely: the same fixed point again.
    let dense: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64).collect();
    let (c, _) = personalized_pagerank(&csr, &dense, seq).unwrap();
    let (e, se) = personalized_pagerank(&csr, &dense, par).unwrap();
    assert!(se.converged, "{se:?}");
    let diff = c.iter().zip(&e).map(|(x, y)| (x - y).abs()).sum::<f64>();
    assert!(diff < 1e-9, "dense reset: L1 difference {diff}");
    // The directed graph takes Jacobi steps in parallel: the same fixed point as the sequential sweeps.
    let directed = CsrGraph::from_edges(n, &edges, true).unwrap();
    let (f, sf) = personalized_pagerank(&directed, &reset, seq).unwrap();
    let (g, sg) = personalized_pagerank(&directed, &reset, par).unwrap();
    assert!(sf.converged && sg.converged);
    let diff = f.iter().zip(&g).map(|(x, y)| (x - y).abs()).sum::<f64>();
    assert!(diff < 1e-9, "directed: L1 difference {diff}");
    // Each path is deterministic.
    let (a2, _) = personalized_pagerank(&csr, &reset, seq).unwrap();
    assert_eq!(a, a2);
    // A reused solver gives the same answer again, and a different reset changes it.
    let mut solver = PprSolver::new(&csr, par).unwrap();
    solver.run(&reset).unwrap();
    assert_eq!(solver.scores(), &b[..]);
    let mut other = vec![0.0; n];
    other[0] = 1.0;
    solver.run(&other).unwrap();
    assert_ne!(solver.scores(), &b[..]);
    // A fork shares the arcs, not the buffers: same bits as a solver of its own, and a run of one
    // leaves the other's scores as they were — on the parallel path and the sequential one.
    for (config, want) in [(par, &b), (seq, &a)] {
        let mut first = PprSolver::new(&csr, config).unwrap();
        let mut fork = first.fork();
        assert_eq!(fork.swept_arcs(), first.swept_arcs());
        fork.run(&reset).unwrap();
        assert_eq!(fork.scores(), &want[..]);
        first.run(&other).unwrap();
        assert_eq!(fork.scores(), &want[..]);
        assert_ne!(first.scores(), &want[..]);
        let mut again = first.fork();
        again.run(&reset).unwrap();
        assert_eq!(again.scores(), &want[..]);
        // Without its buffers a solver still counts the nodes, its forks run as before, and it makes
        // its buffers again at its own next run.
        let mut bare = PprSolver::new(&csr, config).unwrap().without_buffers();
        assert_eq!(bare.node_count(), n);
        assert!(bare.scores().is_empty());
        let mut from_bare = bare.fork();
        from_bare.run(&reset).unwrap();
        assert_eq!(from_bare.scores(), &want[..]);
        bare.run(&reset).unwrap();
        assert_eq!(bare.scores(), &want[..]);
    }
    // At HippoRAG's settings the iteration count is small.
    assert!(sa.iterations < 60, "{sa:?}");
}

/// Sparse undirected graphs (paths, stars, trees with a few extra edges): most nodes have one or two
/// neighbours, so the sequential solver eliminates many of them; the scores of kept and eliminated nodes
/// must both be the linear system's, for every relaxation factor.
#[test]
fn eliminated_low_degree_nodes_get_exact_scores() {
    let mut rng = StdRng::seed_from_u64(23);
    let mut eliminated_seen = 0;
    for case in 0..200 {
        let n = rng.gen_range(2..60);
        let mut edges: Vec<(u32, u32, f64)> = (1..n as u32)
            .map(|v| {
                let parent = match case % 3 {
                    0 => v - 1,               // a path
                    1 => 0,                   // a star
                    _ => rng.gen_range(0..v), // a random tree
                };
                (parent, v, rng.gen_range(0.1..5.0))
            })
            .collect();
        for _ in 0..rng.gen_range(0..4) {
            let (a, b) = (rng.gen_range(0..n as u32), rng.gen_range(0..n as u32));
            edges.push((a, b, rng.gen_range(0.1..5.0)));
        }
        // An isolated node now and then (dangling: restarts by the reset vector).
        let n = if case % 5 == 0 { n + 1 } else { n };
        let mut reset: Vec<f64> = (0..n).map(|_| rng.gen_range(0.0..1.0)).collect();
        reset[rng.gen_range(0..n)] += 1.0;
        let d = [0.5, 0.85, 0.3][case % 3];
        let want = exact(n, &edges, false, &reset, d);
        let csr = CsrGraph::from_edges(n, &edges, false).unwrap();
        for relaxation in [Some(1.0), None, Some(1.05)] {
            let config = PprConfig {
                damping: d,
                tolerance: 1e-13,
                relaxation,
                ..PprConfig::default()
            };
            let mut solver = PprSolver::new(&csr, config).unwrap();
            eliminated_seen += solver.eliminated_nodes();
            let stats = solver.run(&reset).unwrap();
            assert!(stats.converged, "case {case}: {stats:?}");
            for (i, (a, b)) in solver.scores().iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < 1e-9,
                    "case {case} (n {n}, d {d}, ω {relaxation:?}) node {i}: {a} vs {b}"
                );
            }
        }
    }
    assert!(eliminated_seen > 1000, "{eliminated_seen} nodes eliminated");
}

#[test]
fn relaxation_is_checked_and_defaults_inside_the_convergence_range() {
    let g = CsrGraph::from_edges(3, &[(0, 1, 1.0), (1, 2, 1.0)], false).unwrap();
    for bad in [0.0, -1.0, 2.0, f64::NAN] {
        let config = PprConfig {
            relaxation: Some(bad),
            ..PprConfig::default()
        };
        assert!(PprSolver::new(&g, config).is_err(), "ω = {bad}");
        // Also where the Jacobi path ignores it.
        let parallel = PprConfig {
            parallel_min_arcs: 0,
            ..config
        };
        assert!(PprSolver::new(&g, parallel).is_err(), "ω = {bad}, parallel");
    }
    use kgrag_graph_store::ppr::default_relaxation;
    assert_eq!(default_relaxation(0.5), 1.1);
    for d in [0.0, 0.15, 0.5, 0.85, 0.99] {
        let w = default_relaxation(d);
        assert!((1.0..2.0 / (1.0 + d)).contains(&w), "d {d}: ω {w}");
    }
}
