//! Synonymy edges: an incremental insert (new phrases scanned against all) gives the same edges as a build
//! from scratch when no cap is reached; the guards (length, empty phrase, threshold, cap) hold.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use kgrag_graph_store::hippo::phrase_key;
use kgrag_graph_store::synonymy::{add_synonymy_edges, scan, SynonymyConfig};
use kgrag_graph_store::{ExactIndex, KnowledgeGraph, Metric, NodeIndex, VectorIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Phrases in groups of near-duplicate vectors (cosine ≈ 0.9 within a group).
fn data(n_groups: usize, per_group: usize, dim: usize) -> (Vec<String>, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(5);
    let mut names = Vec::new();
    let mut rows = Vec::new();
    for g in 0..n_groups {
        let centre: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
        for k in 0..per_group {
            names.push(format!("group {g} item {k}"));
            rows.extend(centre.iter().map(|c| c + rng.gen_range(-0.25..0.25)));
        }
    }
    (names, rows)
}

/// The set of accepted directions as (from key, to key).
fn directions(g: &KnowledgeGraph) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (_, lo, hi, e) in g.edges() {
        if let Some(s) = e.synonymy {
            let (a, b) = (
                g.node(lo).unwrap().key.clone(),
                g.node(hi).unwrap().key.clone(),
            );
            if s.from_low.is_some() {
                out.insert((a.clone(), b.clone()));
            }
            if s.from_high.is_some() {
                out.insert((b, a));
            }
        }
    }
    out
}

fn build(
    names: &[String],
    rows: &[f32],
    dim: usize,
    order: &[usize],
    split: usize,
) -> KnowledgeGraph {
    let mut g = KnowledgeGraph::new();
    let mut phrases = Vec::new();
    let mut nodes: Vec<NodeIndex> = Vec::new();
    let mut index = ExactIndex::new(dim, Metric::Cosine).unwrap();
    for part in [&order[..split], &order[split..]] {
        let first = phrases.len();
        for &i in part {
            phrases.push(names[i].clone());
            nodes.push(g.add_entity(&phrase_key(&names[i]), &names[i]));
            index.add(&rows[i * dim..(i + 1) * dim]).unwrap();
        }
        let new_rows: Vec<usize> = (first..phrases.len()).collect();
        add_synonymy_edges(
            &mut g,
            &phrases,
            &nodes,
            &index,
            &new_rows,
            &SynonymyConfig::default(),
        )
        .unwrap();
    }
    g
}

#[test]
fn incremental_equals_from_scratch() {
    let dim = 32;
    let (names, rows) = data(40, 6, dim);
    let order: Vec<usize> = (0..names.len()).collect();
    let full = build(&names, &rows, dim, &order, names.len());
    // Shuffled arrival, split in two inserts.
    let mut rng = StdRng::seed_from_u64(9);
    let mut shuffled = order.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.gen_range(0..=i));
    }
    let inc = build(&names, &rows, dim, &shuffled, 100);
    let (a, b) = (directions(&full), directions(&inc));
    assert!(a.len() > 200, "the data has synonyms: {}", a.len());
    assert_eq!(a, b);
}

#[test]
fn guards_and_cap() {
    let dim = 4;
    // Five identical vectors: "ab" is too short to scan, "" is never accepted, the cap is 2 here.
    let names: Vec<String> = ["ab", "", "abc", "abcd", "x y z"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows: Vec<f32> = (0..5).flat_map(|_| [1.0, 0.0, 0.0, 0.0]).collect();
    let index = ExactIndex::from_rows(dim, Metric::Cosine, &rows).unwrap();
    let config = SynonymyConfig {
        max_per_node: 2,
        ..SynonymyConfig::default()
    };
    let pairs = scan(&names, &index, &[0, 1, 2, 3, 4], &config).unwrap();
    let got: Vec<(usize, usize)> = pairs.iter().map(|p| (p.from, p.to)).collect();
    assert_eq!(got, vec![(2, 0), (2, 3), (3, 0), (3, 2), (4, 0), (4, 2)]);
    // Below the threshold nothing is accepted.
    let far = ExactIndex::from_rows(2, Metric::Cosine, &[1.0, 0.0, 0.6, 0.8]).unwrap();
    let names2 = vec!["abc".to_string(), "def".to_string()];
    assert!(scan(&names2, &far, &[0, 1], &SynonymyConfig::default())
        .unwrap()
        .is_empty());
    assert!(scan(&names2, &far, &[5], &SynonymyConfig::default()).is_err());
}
