//! Two kgrag crates used alone: Leiden splits a small social graph into its communities
//! (`kgrag-community`), then Personalized PageRank from one person ranks everyone, and the ranking stays
//! inside that person's community first (`kgrag-graph-store`).

use kgrag_community::{leiden, Graph, LeidenConfig};
use kgrag_graph_store::ppr::{PprConfig, PprSolver};
use kgrag_graph_store::CsrGraph;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let names = ["alice", "bob", "carol", "dave", "erin", "frank"];
    // Two triangles joined by one light edge.
    let edges = [
        (0, 1, 2.0),
        (1, 2, 1.0),
        (0, 2, 1.0),
        (2, 3, 0.2),
        (3, 4, 1.0),
        (4, 5, 1.0),
        (3, 5, 1.0),
    ];

    let graph = Graph::from_edges(names.len(), &edges)?;
    // The CSR snapshot takes 32-bit node ids.
    let edges32: Vec<(u32, u32, f64)> = edges
        .iter()
        .map(|&(a, b, w)| (a as u32, b as u32, w))
        .collect();
    let partition = leiden(
        &graph,
        &LeidenConfig {
            seed: 42,
            ..LeidenConfig::default()
        },
    )?;
    println!(
        "leiden: {} communities, modularity {:.4}",
        partition.communities, partition.quality
    );
    for c in 0..partition.communities {
        let members: Vec<&str> = (0..names.len())
            .filter(|&v| partition.membership[v] == c)
            .map(|v| names[v])
            .collect();
        println!("  community {c}: {}", members.join(", "));
    }
    if partition.communities != 2 || partition.membership[0] == partition.membership[3] {
        return Err("expected the two triangles as the two communities".into());
    }

    let csr = CsrGraph::from_edges(names.len(), &edges32, false)?;
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
        "ppr from alice: {} iterations, converged: {}",
        run.iterations, run.converged
    );
    let mut ranked: Vec<(usize, f64)> = solver.scores().iter().copied().enumerate().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (v, s) in &ranked {
        println!("  {:<6} {s:.6}  (community {})", names[*v], partition.membership[*v]);
    }
    // Alice's own community ranks above the other one.
    let first_three: Vec<usize> = ranked.iter().take(3).map(|(v, _)| *v).collect();
    if first_three
        .iter()
        .any(|&v| partition.membership[v] != partition.membership[0])
    {
        return Err("PPR from alice should rank her own triangle first".into());
    }
    Ok(())
}
