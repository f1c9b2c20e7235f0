//! Leiden communities of your own graph, with nothing but `kgrag-community`.
//!
//! ```sh
//! cargo run -p kgrag --example leiden_only
//! ```
//!
//! Three cliques of five nodes joined in a ring by single edges: Leiden finds the three cliques. The run is
//! seeded, so the same graph gives the same partition.

use kgrag_community::{leiden, Graph, LeidenConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut edges = Vec::new();
    for c in 0..3 {
        let base = c * 5;
        for i in 0..5 {
            for j in i + 1..5 {
                edges.push((base + i, base + j, 1.0));
            }
        }
        // One edge to the next clique.
        edges.push((base + 4, (base + 5) % 15, 1.0));
    }
    let graph = Graph::from_edges(15, &edges)?;
    let config = LeidenConfig {
        seed: 42,
        ..LeidenConfig::default()
    };
    let p = leiden(&graph, &config)?;
    println!(
        "{} communities, modularity {:.4}, {} iterations",
        p.communities, p.quality, p.iterations
    );
    for c in 0..p.communities {
        let members: Vec<usize> = (0..15).filter(|&v| p.membership[v] == c).collect();
        println!("community {c}: {members:?}");
    }
    assert_eq!(p.communities, 3, "one community per clique");
    Ok(())
}
