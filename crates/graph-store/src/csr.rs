//! A read-only compressed sparse row (CSR) snapshot of a weighted graph, laid out for pull-style iteration.
//!
//! For every node `j` the snapshot lists its *incoming* arcs `(i, w_ij)` contiguously, sorted by `i`, and
//! keeps every node's *outgoing* strength `Σ_j w_ij`. For an undirected graph each edge `{a, b}` is the two
//! arcs `a→b` and `b→a`; a self-loop is one arc. Parallel arcs are summed. Dense node ids are `0..n`; a
//! snapshot taken from a [`KnowledgeGraph`](crate::KnowledgeGraph) maps them back to node indices.

use petgraph::stable_graph::NodeIndex;

use crate::error::invalid;
use crate::Result;

/// A CSR snapshot. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct CsrGraph {
    n: usize,
    directed: bool,
    /// `offsets[j]..offsets[j+1]` indexes the in-arcs of `j`.
    offsets: Vec<usize>,
    sources: Vec<u32>,
    weights: Vec<f64>,
    out_strength: Vec<f64>,
    nodes: Vec<NodeIndex>,
}

impl CsrGraph {
    /// Builds from `edges` `(a, b, weight)` over nodes `0..n`. Undirected: each edge becomes both arcs.
    /// Weights must be finite and ≥ 0; zero-weight edges are dropped; parallel arcs are summed.
    pub fn from_edges(n: usize, edges: &[(u32, u32, f64)], directed: bool) -> Result<Self> {
        if n > u32::MAX as usize {
            return Err(invalid(format!(
                "{n} nodes exceed the u32 range of a CSR snapshot"
            )));
        }
        // The arcs are placed by target straight into the snapshot's two lists (a counting sort), so no
        // list of all arcs is held beside them: first each target's number of in-arcs.
        let mut offsets = vec![0usize; n + 1];
        for (k, &(a, b, w)) in edges.iter().enumerate() {
            if a as usize >= n || b as usize >= n {
                return Err(invalid(format!(
                    "edge {k} ({a}, {b}) has an endpoint outside 0..{n}"
                )));
            }
            if !w.is_finite() || w < 0.0 {
                return Err(invalid(format!(
                    "edge {k} ({a}, {b}) has weight {w}; weights must be finite and non-negative"
                )));
            }
            if w == 0.0 {
                continue;
            }
            offsets[b as usize + 1] += 1;
            if !directed && a != b {
                offsets[a as usize + 1] += 1;
            }
        }
        for j in 0..n {
            offsets[j + 1] += offsets[j];
        }
        let mut sources = vec![0u32; offsets[n]];
        let mut weights = vec![0.0f64; offsets[n]];
        let mut next = offsets.clone();
        let mut place = |target: u32, source: u32, w: f64| {
            let slot = &mut next[target as usize];
            sources[*slot] = source;
            weights[*slot] = w;
            *slot += 1;
        };
        for &(a, b, w) in edges {
            if w == 0.0 {
                continue;
            }
            place(b, a, w);
            if !directed && a != b {
                place(a, b, w);
            }
        }
        drop(next);
        // Each target's in-arcs sorted by source (stably: parallel arcs keep their order) and parallel
        // arcs summed, the rows moved down over the room the sums free. Out-strengths add every arc, in
        // the order of (target, source).
        let mut out_strength = vec![0.0f64; n];
        let mut row: Vec<(u32, f64)> = Vec::new();
        let (mut start, mut write) = (0usize, 0usize);
        for j in 0..n {
            let end = offsets[j + 1];
            row.clear();
            row.extend(
                sources[start..end]
                    .iter()
                    .copied()
                    .zip(weights[start..end].iter().copied()),
            );
            row.sort_by_key(|&(s, _)| s);
            offsets[j] = write;
            let mut last = None;
            for &(s, w) in &row {
                out_strength[s as usize] += w;
                if last == Some(s) {
                    weights[write - 1] += w;
                    continue;
                }
                last = Some(s);
                sources[write] = s;
                weights[write] = w;
                write += 1;
            }
            start = end;
        }
        offsets[n] = write;
        sources.truncate(write);
        sources.shrink_to_fit();
        weights.truncate(write);
        weights.shrink_to_fit();
        Ok(Self {
            n,
            directed,
            offsets,
            sources,
            weights,
            out_strength,
            nodes: Vec::new(),
        })
    }

    pub(crate) fn with_nodes(mut self, nodes: Vec<NodeIndex>) -> Self {
        self.nodes = nodes;
        self
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.n
    }

    /// Number of stored arcs (twice the edges of an undirected graph, minus self-loops).
    pub fn arc_count(&self) -> usize {
        self.sources.len()
    }

    /// Whether arcs were taken as directed.
    pub fn is_directed(&self) -> bool {
        self.directed
    }

    /// In-arcs of `j` as (sources, weights).
    pub fn in_arcs(&self, j: usize) -> (&[u32], &[f64]) {
        match (self.offsets.get(j), self.offsets.get(j + 1)) {
            (Some(&a), Some(&b)) => (&self.sources[a..b], &self.weights[a..b]),
            _ => (&[], &[]),
        }
    }

    /// Total weight leaving each node.
    pub fn out_strength(&self) -> &[f64] {
        &self.out_strength
    }

    /// For a snapshot of a [`KnowledgeGraph`](crate::KnowledgeGraph): the node index of dense id `i`.
    pub fn node_index(&self, i: usize) -> Option<NodeIndex> {
        self.nodes.get(i).copied()
    }

    /// For a snapshot of a [`KnowledgeGraph`](crate::KnowledgeGraph): the dense id of `idx`.
    pub fn dense_id(&self, idx: NodeIndex) -> Option<usize> {
        self.nodes.binary_search(&idx).ok()
    }

    /// Dense id → node index map (empty for snapshots not taken from a graph).
    pub fn node_indices(&self) -> &[NodeIndex] {
        &self.nodes
    }

    pub(crate) fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    pub(crate) fn sources(&self) -> &[u32] {
        &self.sources
    }

    pub(crate) fn weights(&self) -> &[f64] {
        &self.weights
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undirected_parallel_edges_sum() {
        let g = CsrGraph::from_edges(
            3,
            &[(0, 1, 1.0), (1, 0, 2.0), (1, 2, 0.0), (2, 2, 4.0)],
            false,
        )
        .unwrap();
        assert_eq!(g.in_arcs(0), (&[1u32][..], &[3.0][..]));
        assert_eq!(g.in_arcs(1), (&[0u32][..], &[3.0][..]));
        assert_eq!(g.in_arcs(2), (&[2u32][..], &[4.0][..]));
        assert_eq!(g.out_strength(), &[3.0, 3.0, 4.0]);
        assert!(CsrGraph::from_edges(2, &[(0, 5, 1.0)], false).is_err());
        assert!(CsrGraph::from_edges(2, &[(0, 1, -1.0)], false).is_err());
        assert!(CsrGraph::from_edges(2, &[(0, 1, f64::NAN)], false).is_err());
        let d = CsrGraph::from_edges(2, &[(0, 1, 1.0)], true).unwrap();
        assert_eq!(d.in_arcs(0).0.len(), 0);
        assert_eq!(d.out_strength(), &[1.0, 0.0]);
    }

    /// Against the definition: every arc listed under its target by source, parallel arcs summed in
    /// the order given, out-strengths the sum of every arc in (target, source) order — on random graphs
    /// with parallel edges, self-loops and zero weights, both directed and not.
    #[test]
    fn the_snapshot_is_the_definition_s() {
        use std::collections::BTreeMap;
        let mut state = 7u64;
        let mut draw = |m: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % m
        };
        for round in 0..40 {
            let n = 1 + draw(30) as usize;
            let directed = round % 2 == 0;
            let edges: Vec<(u32, u32, f64)> = (0..draw(120))
                .map(|_| {
                    let w = if draw(6) == 0 {
                        0.0
                    } else {
                        draw(1000) as f64 / 7.0
                    };
                    (draw(n as u64) as u32, draw(n as u64) as u32, w)
                })
                .collect();
            let g = CsrGraph::from_edges(n, &edges, directed).unwrap();
            let mut arcs: BTreeMap<(u32, u32), Vec<f64>> = BTreeMap::new();
            for &(a, b, w) in edges.iter().filter(|e| e.2 != 0.0) {
                arcs.entry((b, a)).or_default().push(w);
                if !directed && a != b {
                    arcs.entry((a, b)).or_default().push(w);
                }
            }
            let mut out = vec![0.0f64; n];
            for (&(_, s), ws) in &arcs {
                for w in ws {
                    out[s as usize] += w;
                }
            }
            for j in 0..n as u32 {
                let (sources, weights): (Vec<u32>, Vec<f64>) = arcs
                    .range((j, 0)..=(j, u32::MAX))
                    .map(|(&(_, s), ws)| (s, ws.iter().fold(0.0, |x, w| x + w)))
                    .unzip();
                assert_eq!(
                    g.in_arcs(j as usize),
                    (&sources[..], &weights[..]),
                    "round {round}, node {j}"
                );
            }
            assert_eq!(g.out_strength(), &out[..], "round {round}");
            assert_eq!(g.arc_count(), arcs.len());
        }
    }
}
