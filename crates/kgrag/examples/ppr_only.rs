//! Personalized PageRank on your own graph, with nothing but `kgrag-graph-store`.
//!
//! ```sh
//! cargo run -p kgrag --example ppr_only
//! ```
//!
//! The graph is a small weighted, undirected edge list; the walk restarts at node 0 with probability
//! 1 − damping (HippoRAG 2 uses damping 0.5).

use kgrag_graph_store::ppr::{PprConfig, PprSolver};
use kgrag_graph_store::CsrGraph;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let names = ["alice", "bob", "carol", "dave", "erin", "frank"];
    // (from, to, weight): two triangles joined by one light edge.
    let edges = [
        (0, 1, 2.0),
        (1, 2, 1.0),
        (0, 2, 1.0),
        (2, 3, 0.2),
        (3, 4, 1.0),
        (4, 5, 1.0),
        (3, 5, 1.0),
    ];
    let csr = CsrGraph::from_edges(names.len(), &edges, false)?;
    let mut solver = PprSolver::new(
        &csr,
        PprConfig {
            damping: 0.5,
            ..PprConfig::default()
        },
    )?;
    let mut reset = vec![0.0; names.len()];
    reset[0] = 1.0;
    let run = solver.run(&reset)?;
    println!(
        "{} iterations, converged: {}, residual {:.2e}",
        run.iterations, run.converged, run.residual
    );
    let mut ranked: Vec<(usize, f64)> = solver.scores().iter().copied().enumerate().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (v, s) in ranked {
        println!("{:<6} {s:.6}", names[v]);
    }
    let total: f64 = solver.scores().iter().sum();
    assert!((total - 1.0).abs() < 1e-9, "PPR scores sum to 1");
    Ok(())
}
