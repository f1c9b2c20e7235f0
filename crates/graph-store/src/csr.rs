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
        let mut arcs: Vec<(u32, u32, f64)> = Vec::with_capacity(edges.len() * 2);
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
            // Stored as (target, source, w) so that sorting groups in-arcs by target.
            arcs.push((b, a, w));
            if !directed && a != b {
                arcs.push((a, b, w));
            }
        }
        arcs.sort_unstable_by_key(|x| (x.0, x.1));
        let mut offsets = vec![0usize; n + 1];
        let mut sources = Vec::with_capacity(arcs.len());
        let mut weights: Vec<f64> = Vec::with_capacity(arcs.len());
        let mut out_strength = vec![0.0f64; n];
        let mut last: Option<(u32, u32)> = None;
        for &(t, s, w) in &arcs {
            out_strength[s as usize] += w;
            if last == Some((t, s)) {
                if let Some(x) = weights.last_mut() {
                    *x += w;
                }
                continue;
            }
            last = Some((t, s));
            offsets[t as usize + 1] += 1;
            sources.push(s);
            weights.push(w);
        }
        for j in 0..n {
            offsets[j + 1] += offsets[j];
        }
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
}
