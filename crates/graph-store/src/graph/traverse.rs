//! Reading a knowledge graph's structure: degree, neighbours, connected components, breadth-first and
//! Dijkstra paths, and compressed snapshots for algorithms.

use std::collections::{HashMap, HashSet, VecDeque};

use petgraph::stable_graph::{EdgeIndex, NodeIndex};
use petgraph::visit::{EdgeRef, IntoEdgeReferences, NodeIndexable};

use super::{Edge, EdgeWeighting, KnowledgeGraph, NeighbourOrder};
use crate::csr::CsrGraph;
use crate::Result;

impl KnowledgeGraph {
    /// Number of edges at `idx`.
    pub fn degree(&self, idx: NodeIndex) -> usize {
        self.g.edges(idx).count()
    }

    /// Neighbours of `idx`, ascending index.
    pub fn neighbours(&self, idx: NodeIndex) -> Vec<NodeIndex> {
        let mut out: Vec<NodeIndex> = self.g.neighbors(idx).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Edges at `idx` as (neighbour, edge index, data), ascending neighbour index.
    pub fn incident(&self, idx: NodeIndex) -> Vec<(NodeIndex, EdgeIndex, &Edge)> {
        let mut out: Vec<_> = self
            .g
            .edges(idx)
            .map(|e| {
                let other = if e.source() == idx {
                    e.target()
                } else {
                    e.source()
                };
                (other, e.id(), e.weight())
            })
            .collect();
        out.sort_unstable_by_key(|x| x.0);
        out
    }

    /// Connected components (edges of any kind), each sorted by index, ordered by their smallest index.
    pub fn connected_components(&self) -> Vec<Vec<NodeIndex>> {
        let mut seen = vec![false; self.g.node_bound()];
        let mut out = Vec::new();
        for start in self.g.node_indices() {
            if std::mem::replace(&mut seen[start.index()], true) {
                continue;
            }
            let mut comp = vec![start];
            let mut queue = VecDeque::from([start]);
            while let Some(u) = queue.pop_front() {
                for v in self.g.neighbors(u) {
                    if !std::mem::replace(&mut seen[v.index()], true) {
                        comp.push(v);
                        queue.push_back(v);
                    }
                }
            }
            comp.sort_unstable();
            out.push(comp);
        }
        out
    }

    fn sorted_neighbours(&self, u: NodeIndex, order: NeighbourOrder) -> Vec<NodeIndex> {
        let mut ns = self.neighbours(u);
        if order == NeighbourOrder::Name {
            ns.sort_by(|a, b| self.g[*a].name.cmp(&self.g[*b].name).then(a.cmp(b)));
        }
        ns
    }

    /// An unweighted shortest path from `from` to `to` (both included) by breadth-first search, expanding
    /// neighbours in `order`; `None` when `to` is unreachable.
    pub fn shortest_path(
        &self,
        from: NodeIndex,
        to: NodeIndex,
        order: NeighbourOrder,
    ) -> Result<Option<Vec<NodeIndex>>> {
        self.check(from)?;
        self.check(to)?;
        if from == to {
            return Ok(Some(vec![from]));
        }
        let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
        parent.insert(from, from);
        let mut queue = VecDeque::from([from]);
        while let Some(u) = queue.pop_front() {
            for v in self.sorted_neighbours(u, order) {
                if parent.contains_key(&v) {
                    continue;
                }
                parent.insert(v, u);
                if v == to {
                    return Ok(Some(Self::unwind(&parent, from, to)));
                }
                queue.push_back(v);
            }
        }
        Ok(None)
    }

    fn unwind(
        parent: &HashMap<NodeIndex, NodeIndex>,
        from: NodeIndex,
        to: NodeIndex,
    ) -> Vec<NodeIndex> {
        let mut path = vec![to];
        let mut cur = to;
        while cur != from && path.len() <= parent.len() {
            match parent.get(&cur) {
                Some(&p) => {
                    path.push(p);
                    cur = p;
                }
                None => break,
            }
        }
        path.reverse();
        path
    }

    /// A least-cost path by Dijkstra, the cost of an edge being `cost(edge)` (must be finite and ≥ 0;
    /// others make the edge impassable). Ties between equal-cost paths go to the lower node index.
    /// Returns the path and its cost, or `None` when `to` is unreachable.
    pub fn cheapest_path(
        &self,
        from: NodeIndex,
        to: NodeIndex,
        cost: impl Fn(&Edge) -> f64,
    ) -> Result<Option<(Vec<NodeIndex>, f64)>> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        self.check(from)?;
        self.check(to)?;
        #[derive(PartialEq)]
        struct Key(f64);
        impl Eq for Key {}
        impl PartialOrd for Key {
            fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Key {
            fn cmp(&self, o: &Self) -> std::cmp::Ordering {
                self.0.total_cmp(&o.0)
            }
        }
        let mut dist: HashMap<NodeIndex, f64> = HashMap::new();
        let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
        let mut settled: HashSet<NodeIndex> = HashSet::new();
        let mut heap = BinaryHeap::new();
        dist.insert(from, 0.0);
        parent.insert(from, from);
        heap.push(Reverse((Key(0.0), from)));
        while let Some(Reverse((Key(d), u))) = heap.pop() {
            if dist.get(&u).is_some_and(|&best| d > best) || !settled.insert(u) {
                continue;
            }
            if u == to {
                return Ok(Some((Self::unwind(&parent, from, to), d)));
            }
            for (v, _, e) in self.incident(u) {
                if settled.contains(&v) {
                    continue;
                }
                let c = cost(e);
                if !c.is_finite() || c < 0.0 {
                    continue;
                }
                let nd = d + c;
                let better = match dist.get(&v) {
                    None => true,
                    Some(&old) => nd < old || (nd == old && parent.get(&v).is_some_and(|&p| u < p)),
                };
                if better {
                    dist.insert(v, nd);
                    parent.insert(v, u);
                    heap.push(Reverse((Key(nd), v)));
                }
            }
        }
        Ok(None)
    }

    /// A compressed snapshot for algorithms: every node (dense index = rank of the node index), every edge
    /// with its weight under `weighting`; edges of weight 0 are left out.
    pub fn csr(&self, weighting: EdgeWeighting) -> Result<CsrGraph> {
        self.csr_with(|e| e.weight(weighting))
    }

    /// Like [`csr`](Self::csr) with a custom weight function.
    pub fn csr_with(&self, weight: impl Fn(&Edge) -> f64) -> Result<CsrGraph> {
        let nodes: Vec<NodeIndex> = self.g.node_indices().collect();
        let mut dense = vec![u32::MAX; self.g.node_bound()];
        for (i, n) in nodes.iter().enumerate() {
            dense[n.index()] = i as u32;
        }
        let mut arcs = Vec::with_capacity(self.g.edge_count());
        for e in (&self.g).edge_references() {
            let w = weight(e.weight());
            if w != 0.0 {
                arcs.push((dense[e.source().index()], dense[e.target().index()], w));
            }
        }
        CsrGraph::from_edges(nodes.len(), &arcs, false).map(|c| c.with_nodes(nodes))
    }
}
