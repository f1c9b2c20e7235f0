//! HiRAG's graph as retrieval reads it: one flat undirected simple graph of base and summary entities
//! (spec §3), nodes indexed in name order — so "neighbours in name order" is index order and the
//! lexicographically first shortest path falls out of a plain breadth-first search — with adjacency lists,
//! degrees and the edges' relation data. Built once from the [`KnowledgeGraph`] the index writes into.

use std::collections::HashMap;

use kgrag_graph_store::{KnowledgeGraph, NodeKind};
use serde::{Deserialize, Serialize};

use crate::config::BridgeEdges;

/// A node: a base entity, a summary entity or an `UNKNOWN` relation endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HiNode {
    /// Name (the node's identity in HiRAG).
    pub name: String,
    /// Entity type.
    pub entity_type: String,
    /// Description (merged parts joined by `<SEP>`).
    pub description: String,
    /// Source chunks as positions in [`HiragIndex::chunks`](crate::HiragIndex::chunks), ascending (= by
    /// chunk id).
    pub sources: Vec<u32>,
    /// 0 for base entities, L ≥ 1 for summary entities created while summarising layer L − 1.
    pub layer: u32,
    /// Every `(level, community id)` the node belongs to, by level.
    pub clusters: Vec<(u32, u32)>,
    /// Whether the node is in the entity vectors (entity records and summary entities; not `UNKNOWN`
    /// endpoints).
    pub embedded: bool,
    /// o200k tokens of the node's entity-table row after its id (set by the index build).
    #[serde(default)]
    pub row_tokens: u32,
}

/// An edge between nodes `a < b`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HiEdge {
    /// Lower endpoint (node index).
    pub a: u32,
    /// Higher endpoint.
    pub b: u32,
    /// Summed strength.
    pub weight: f64,
    /// Merged descriptions joined by `<SEP>`.
    pub description: String,
    /// o200k tokens of `description` (budgets are walked on these).
    pub description_tokens: u32,
    /// Source chunks (positions in the index's chunk list), ascending.
    pub sources: Vec<u32>,
    /// HiRAG's `order` (minimum of the merged records; 1).
    pub order: u32,
    /// o200k tokens of the edge's relation-table row after its id (set by the index build).
    #[serde(default)]
    pub row_tokens: u32,
}

/// The graph. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HiGraph {
    nodes: Vec<HiNode>,
    edges: Vec<HiEdge>,
    /// Per node: `(neighbour, edge)` ascending by neighbour.
    adj: Vec<Vec<(u32, u32)>>,
    #[serde(skip)]
    by_name: HashMap<String, u32>,
}

impl HiGraph {
    /// A graph from nodes and edges; nodes are re-ordered by name (then by their input position), edges
    /// mapped accordingly and sorted by endpoints. Edges must join distinct existing nodes; a repeated pair
    /// is an error.
    pub fn new(nodes: Vec<HiNode>, edges: Vec<(usize, usize, HiEdge)>) -> crate::Result<Self> {
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by(|&x, &y| nodes[x].name.cmp(&nodes[y].name).then(x.cmp(&y)));
        let mut position = vec![0u32; nodes.len()];
        for (new, &old) in order.iter().enumerate() {
            position[old] = new as u32;
        }
        let mut slots: Vec<Option<HiNode>> = nodes.into_iter().map(Some).collect();
        let nodes: Vec<HiNode> = order.iter().filter_map(|&o| slots[o].take()).collect();
        let n = nodes.len();
        let mut mapped = Vec::with_capacity(edges.len());
        for (i, (x, y, mut e)) in edges.into_iter().enumerate() {
            if x >= n || y >= n || x == y {
                return Err(crate::HiragError::Input(format!(
                    "edge {i} joins nodes {x} and {y} of a graph of {n} nodes"
                )));
            }
            let (a, b) = (position[x].min(position[y]), position[x].max(position[y]));
            e.a = a;
            e.b = b;
            mapped.push(e);
        }
        mapped.sort_by_key(|e| (e.a, e.b));
        if let Some(w) = mapped
            .windows(2)
            .find(|w| (w[0].a, w[0].b) == (w[1].a, w[1].b))
        {
            return Err(crate::HiragError::Input(format!(
                "the pair {:?} – {:?} has two edges",
                nodes[w[0].a as usize].name, nodes[w[0].b as usize].name
            )));
        }
        let mut g = Self {
            nodes,
            edges: mapped,
            adj: Vec::new(),
            by_name: HashMap::new(),
        };
        g.rebuild();
        Ok(g)
    }

    /// Re-derives the adjacency and the name map (after deserialising).
    pub fn rebuild(&mut self) {
        let mut adj = vec![Vec::new(); self.nodes.len()];
        for (i, e) in self.edges.iter().enumerate() {
            adj[e.a as usize].push((e.b, i as u32));
            adj[e.b as usize].push((e.a, i as u32));
        }
        for list in &mut adj {
            list.sort_unstable();
        }
        self.adj = adj;
        self.by_name = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i as u32))
            .collect();
    }

    /// Copies the entity and summary nodes of `kg` (passages are not HiRAG nodes) and its relation edges.
    /// `sources` maps a chunk id to its position in the index's chunk list (unknown chunks are dropped).
    pub(crate) fn from_knowledge_graph(
        kg: &KnowledgeGraph,
        sources: &HashMap<String, u32>,
        embedded: impl Fn(&str) -> bool,
    ) -> crate::Result<Self> {
        let map_sources = |s: &mut dyn Iterator<Item = &kgrag_types::ChunkId>| -> Vec<u32> {
            let mut v: Vec<u32> = s.filter_map(|c| sources.get(c.as_str()).copied()).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let mut dense: HashMap<kgrag_graph_store::NodeIndex, usize> = HashMap::new();
        let mut nodes = Vec::new();
        for idx in kg.node_indices() {
            let Some(n) = kg.node(idx) else { continue };
            if n.kind == NodeKind::Passage {
                continue;
            }
            dense.insert(idx, nodes.len());
            nodes.push(HiNode {
                name: n.name.clone(),
                entity_type: n.entity_type.clone(),
                description: n.description.clone(),
                sources: map_sources(&mut n.sources.iter()),
                layer: n.layer,
                clusters: Vec::new(),
                embedded: embedded(&n.name),
                row_tokens: 0,
            });
        }
        let mut edges = Vec::new();
        for (_, x, y, e) in kg.edges() {
            let (Some(&a), Some(&b), Some(r)) = (dense.get(&x), dense.get(&y), e.relation.as_ref())
            else {
                continue;
            };
            edges.push((
                a,
                b,
                HiEdge {
                    a: 0,
                    b: 0,
                    weight: r.weight,
                    description: r.description.clone(),
                    description_tokens: crate::tokens(&r.description) as u32,
                    sources: map_sources(&mut r.sources.iter()),
                    order: r.order,
                    row_tokens: 0,
                },
            ));
        }
        Self::new(nodes, edges)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes, in name order.
    pub fn nodes(&self) -> &[HiNode] {
        &self.nodes
    }

    /// The edges, by endpoints.
    pub fn edges(&self) -> &[HiEdge] {
        &self.edges
    }

    /// The nodes (in name order) and the edges (by endpoints, which index the nodes), taken apart: what
    /// a graph made to be converted hands over without copying its texts.
    pub fn into_parts(self) -> (Vec<HiNode>, Vec<HiEdge>) {
        (self.nodes, self.edges)
    }

    /// Node `i`.
    pub fn node(&self, i: u32) -> Option<&HiNode> {
        self.nodes.get(i as usize)
    }

    /// Edge `i`.
    pub fn edge(&self, i: u32) -> Option<&HiEdge> {
        self.edges.get(i as usize)
    }

    pub(crate) fn node_mut(&mut self, i: usize) -> Option<&mut HiNode> {
        self.nodes.get_mut(i)
    }

    /// Counts every node's and edge's table-row tokens (in parallel; degrees are final by now).
    pub(crate) fn count_row_tokens(&mut self) {
        use rayon::prelude::*;
        let nodes: Vec<u32> = (0..self.nodes.len() as u32)
            .into_par_iter()
            .map(|n| crate::table::row_rest_tokens(crate::table::entity_cells(self, n)))
            .collect();
        let edges: Vec<u32> = (0..self.edges.len() as u32)
            .into_par_iter()
            .map(|e| crate::table::row_rest_tokens(crate::table::edge_cells(self, e)))
            .collect();
        for (n, t) in self.nodes.iter_mut().zip(nodes) {
            n.row_tokens = t;
        }
        for (e, t) in self.edges.iter_mut().zip(edges) {
            e.row_tokens = t;
        }
    }

    /// The node named `name`.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// `(neighbour, edge)` pairs of node `i`, ascending by neighbour (= name order).
    pub fn neighbours(&self, i: u32) -> &[(u32, u32)] {
        self.adj.get(i as usize).map_or(&[], Vec::as_slice)
    }

    /// Number of edges at node `i`.
    pub fn degree(&self, i: u32) -> usize {
        self.neighbours(i).len()
    }

    /// The edge joining `a` and `b`, if any.
    pub fn edge_between(&self, a: u32, b: u32) -> Option<u32> {
        let list = self.neighbours(a);
        list.binary_search_by_key(&b, |&(n, _)| n)
            .ok()
            .map(|p| list[p].1)
    }
}

/// A bridge path (spec §7.2 step 5): node sequence (nodes may repeat) and the positions `i` where
/// `nodes[i] → nodes[i + 1]` jumps over a gap with no path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgePath {
    /// The nodes in order.
    pub nodes: Vec<u32>,
    /// Jump positions, ascending.
    pub jumps: Vec<usize>,
}

impl HiGraph {
    /// The path through `keys` in order, as the reference's `find_path_with_required_nodes` builds it:
    /// from each key entity to the next the lexicographically first unweighted shortest path is appended;
    /// where no path exists the next key is appended as a jump and the walk goes on from it. Like the
    /// reference, the walk starts with an empty path, and only a step towards an intermediate key entity
    /// appended to an empty path brings its start along; every other step appends its path without the
    /// first node. So the first key entity is dropped when there is no intermediate one: one key entity
    /// gives an empty path, two give the shortest path between them without its first node (adjacent
    /// key entities: the second alone, and no bridge edge). The first step failing drops it too.
    pub fn bridge_path(&self, keys: &[u32]) -> BridgePath {
        if keys.len() < 2 {
            return BridgePath::default();
        }
        // Each step starts from a key entity, not from where the previous step ended, so the searches
        // are independent: run them on the thread pool, each worker with its own scratch space.
        use rayon::prelude::*;
        let steps: Vec<Option<Vec<u32>>> = keys
            .par_windows(2)
            .map_init(
                || Bfs::new(self.node_count()),
                |bfs, w| bfs.path(self, w[0], w[1]),
            )
            .collect();
        let last = steps.len() - 1;
        let mut out = BridgePath::default();
        for (i, (step, &next)) in steps.into_iter().zip(&keys[1..]).enumerate() {
            match step {
                Some(p) if i < last && out.nodes.is_empty() => out.nodes.extend_from_slice(&p),
                Some(p) => out.nodes.extend_from_slice(&p[1..]),
                None => {
                    if let Some(end) = out.nodes.len().checked_sub(1) {
                        out.jumps.push(end);
                    }
                    out.nodes.push(next);
                }
            }
        }
        out
    }

    /// The bridge's edges (spec §7.2 step 6), de-duplicated and ranked by [`rank_edges`](Self::rank_edges):
    /// every edge among the path's nodes, or only those between consecutive nodes (never across a jump).
    pub fn bridge_edges(&self, path: &BridgePath, rule: BridgeEdges) -> Vec<u32> {
        let mut edges: Vec<u32> = match rule {
            BridgeEdges::AllAmongPathNodes => {
                let mut nodes: Vec<u32> = path.nodes.clone();
                nodes.sort_unstable();
                nodes.dedup();
                nodes
                    .iter()
                    .flat_map(|&u| {
                        self.neighbours(u)
                            .iter()
                            .filter(|&&(v, _)| u < v && nodes.binary_search(&v).is_ok())
                            .map(|&(_, e)| e)
                            .collect::<Vec<_>>()
                    })
                    .collect()
            }
            BridgeEdges::PathOnly => path
                .nodes
                .windows(2)
                .enumerate()
                .filter(|(i, _)| path.jumps.binary_search(i).is_err())
                .filter_map(|(_, w)| self.edge_between(w[0], w[1]))
                .collect(),
        };
        self.rank_edges(&mut edges);
        edges
    }

    /// De-duplicates `edges` and orders them as HiRAG ranks relations: degree sum (`rank`) descending,
    /// weight descending, then the endpoints' names ascending.
    pub fn rank_edges(&self, edges: &mut Vec<u32>) {
        edges.sort_unstable();
        edges.dedup();
        let key = |e: u32| {
            self.edge(e).map_or((0, 0.0, 0, 0), |x| {
                (self.degree(x.a) + self.degree(x.b), x.weight, x.a, x.b)
            })
        };
        edges.sort_by(|&x, &y| {
            let (rx, wx, ax, bx) = key(x);
            let (ry, wy, ay, by) = key(y);
            ry.cmp(&rx)
                .then(wy.total_cmp(&wx))
                .then((ax, bx).cmp(&(ay, by)))
        });
    }
}

/// Shortest-path search with scratch space reused across calls (one per worker).
///
/// [`Bfs::path`] is a bidirectional breadth-first search: it grows the smaller of the two frontiers one
/// whole layer at a time until they meet, so a query touches the two balls around its ends rather than
/// everything within the distance of `from` (on a 100,000-passage graph most of the graph). The path it
/// returns is the one a plain breadth-first search from `from` would (see [`Bfs::path`]).
pub(crate) struct Bfs {
    /// Per node, the round in which the forward / backward search reached it, and its depth there.
    fstamp: Vec<u32>,
    fdepth: Vec<u32>,
    bstamp: Vec<u32>,
    bdepth: Vec<u32>,
    /// Per node, the round in which it was found to lie on a shortest path.
    on: Vec<u32>,
    round: u32,
    /// Each side's nodes in visiting order, with the end of every layer.
    fnodes: Vec<u32>,
    flayers: Vec<usize>,
    bnodes: Vec<u32>,
    blayers: Vec<usize>,
}

impl Bfs {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            fstamp: vec![0; n],
            fdepth: vec![0; n],
            bstamp: vec![0; n],
            bdepth: vec![0; n],
            on: vec![0; n],
            round: 0,
            fnodes: Vec::new(),
            flayers: Vec::new(),
            bnodes: Vec::new(),
            blayers: Vec::new(),
        }
    }

    /// The lexicographically first unweighted shortest path from `from` to `to` (both included), which is
    /// the path of a breadth-first search from `from` that expands neighbours in name (= index) order and
    /// fixes a node's parent at its first discovery. `None` when `to` is unreachable.
    ///
    /// The two searches meet at depth `A` from `from` and `B` from `to`, and every shortest path has
    /// length `D = A + B`. The nodes on some shortest path are marked layer by layer back from the meeting
    /// layer on both sides; the path then takes, from `from`, the smallest marked neighbour one step
    /// further each time.
    pub(crate) fn path(&mut self, g: &HiGraph, from: u32, to: u32) -> Option<Vec<u32>> {
        if from == to {
            return Some(vec![from]);
        }
        self.round = self.round.wrapping_add(1);
        if self.round == 0 {
            for v in [&mut self.fstamp, &mut self.bstamp, &mut self.on] {
                v.iter_mut().for_each(|s| *s = 0);
            }
            self.round = 1;
        }
        let round = self.round;
        self.fnodes.clear();
        self.bnodes.clear();
        self.flayers.clear();
        self.blayers.clear();
        self.fnodes.push(from);
        self.flayers.push(1);
        self.fstamp[from as usize] = round;
        self.fdepth[from as usize] = 0;
        self.bnodes.push(to);
        self.blayers.push(1);
        self.bstamp[to as usize] = round;
        self.bdepth[to as usize] = 0;
        // Grow one side a whole layer at a time until a node is reached from both.
        let met = loop {
            let flen = self.fnodes.len() - frontier_start(&self.flayers);
            let blen = self.bnodes.len() - frontier_start(&self.blayers);
            if flen == 0 || blen == 0 {
                return None;
            }
            let met = if flen <= blen {
                grow(
                    g,
                    round,
                    &mut self.fnodes,
                    &mut self.flayers,
                    &mut self.fstamp,
                    &mut self.fdepth,
                    &self.bstamp,
                )
            } else {
                grow(
                    g,
                    round,
                    &mut self.bnodes,
                    &mut self.blayers,
                    &mut self.bstamp,
                    &mut self.bdepth,
                    &self.fstamp,
                )
            };
            if met {
                break true;
            }
        };
        debug_assert!(met);
        let (a, b) = (self.flayers.len() as u32 - 1, self.blayers.len() as u32 - 1);
        let total = a + b;
        // The meeting layer: reached from both sides at depths A and B (any node reached from both is,
        // since no shortest path is shorter than A + B).
        let last = frontier_start(&self.flayers);
        for &v in &self.fnodes[last..] {
            if self.bstamp[v as usize] == round && self.bdepth[v as usize] == b {
                self.on[v as usize] = round;
            }
        }
        let blast = frontier_start(&self.blayers);
        for &v in &self.bnodes[blast..] {
            if self.fstamp[v as usize] == round && self.fdepth[v as usize] == a {
                self.on[v as usize] = round;
            }
        }
        // Back from the meeting layer on each side: a node is on a shortest path when a neighbour one
        // layer further out is.
        mark_back(
            g,
            round,
            &self.fnodes,
            &self.flayers,
            &self.fstamp,
            &self.fdepth,
            &mut self.on,
        );
        mark_back(
            g,
            round,
            &self.bnodes,
            &self.blayers,
            &self.bstamp,
            &self.bdepth,
            &mut self.on,
        );
        let mut path = Vec::with_capacity(total as usize + 1);
        path.push(from);
        let mut cur = from;
        for step in 1..=total {
            let next = g.neighbours(cur).iter().map(|&(v, _)| v).find(|&v| {
                let i = v as usize;
                self.on[i] == round
                    && if step <= a {
                        self.fstamp[i] == round && self.fdepth[i] == step
                    } else {
                        self.bstamp[i] == round && self.bdepth[i] == total - step
                    }
            })?;
            path.push(next);
            cur = next;
        }
        Some(path)
    }
}

/// Where a side's last layer starts.
fn frontier_start(layers: &[usize]) -> usize {
    if layers.len() < 2 {
        0
    } else {
        layers[layers.len() - 2]
    }
}

/// Adds the next layer of one side (`nodes` / `layers`, marks `stamp` / `depth`); whether it reached a
/// node the other side (`other`) has reached.
fn grow(
    g: &HiGraph,
    round: u32,
    nodes: &mut Vec<u32>,
    layers: &mut Vec<usize>,
    stamp: &mut [u32],
    depth: &mut [u32],
    other: &[u32],
) -> bool {
    let start = frontier_start(layers);
    let end = nodes.len();
    let next_depth = layers.len() as u32;
    let mut met = false;
    for at in start..end {
        let u = nodes[at];
        for &(v, _) in g.neighbours(u) {
            let i = v as usize;
            if stamp[i] == round {
                continue;
            }
            stamp[i] = round;
            depth[i] = next_depth;
            nodes.push(v);
            met |= other[i] == round;
        }
    }
    layers.push(nodes.len());
    met
}

/// Marks, layer by layer inward from one side's last layer, the nodes with a marked neighbour one layer
/// further out.
fn mark_back(
    g: &HiGraph,
    round: u32,
    nodes: &[u32],
    layers: &[usize],
    stamp: &[u32],
    depth: &[u32],
    on: &mut [u32],
) {
    for layer in (0..layers.len().saturating_sub(1)).rev() {
        let start = if layer == 0 { 0 } else { layers[layer - 1] };
        for &v in &nodes[start..layers[layer]] {
            let further = g.neighbours(v).iter().any(|&(u, _)| {
                let i = u as usize;
                on[i] == round && stamp[i] == round && depth[i] == layer as u32 + 1
            });
            if further {
                on[v as usize] = round;
            }
        }
    }
}
