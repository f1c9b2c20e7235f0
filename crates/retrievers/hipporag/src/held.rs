//! HippoRAG 2's graph as the index holds it between changes: packed (no question reads the structure),
//! with what questions do read of it made once beside it — the Personalized PageRank arcs under the
//! index's own weighting and solver settings, each phrase's chunk count `n(p)`, each passage's node and
//! the graph's counts.
//!
//! As structures, the graph costs ~4.5 MB per 1,000 synthetic passages (every passage's text, every
//! phrase's source list, every fact edge's per-chunk counts, two key maps); packed, a fraction of it.
//! An insert or a delete unpacks it, changes it and packs it again; a retriever whose weighting or
//! solver settings differ from the index's makes its own arcs from an unpacked copy.

use std::sync::Arc;

use kgrag_graph_store::ppr::{PprConfig, PprSolver};
use kgrag_graph_store::{EdgeWeighting, GraphCounts, KnowledgeGraph, NodeIndex, Packed};
use kgrag_types::ChunkId;

use crate::{HippoConfig, Result};

/// A graph's PPR arcs under one weighting and one solver's settings: the solver every query's is forked
/// from (never run itself) and its dense vertex ids.
#[derive(Debug)]
pub(crate) struct Walk {
    weighting: EdgeWeighting,
    ppr: PprConfig,
    /// Holds the arcs the forks share.
    solver: PprSolver,
    /// Dense vertex id → graph node (ascending: a node's vertex is found by binary search).
    vertex_nodes: Vec<NodeIndex>,
}

impl Walk {
    /// The arcs of `graph` under `weighting`, prepared for a solver with `ppr`.
    pub(crate) fn new(
        graph: &KnowledgeGraph,
        weighting: EdgeWeighting,
        ppr: PprConfig,
    ) -> Result<Self> {
        let csr = graph.csr(weighting)?;
        let solver = PprSolver::new(&csr, ppr)?.without_buffers();
        Ok(Self {
            weighting,
            ppr,
            solver,
            vertex_nodes: csr.node_indices().to_vec(),
        })
    }

    /// Whether this walk serves a retriever with `weighting` and `ppr`.
    pub(crate) fn serves(&self, weighting: EdgeWeighting, ppr: &PprConfig) -> bool {
        self.weighting == weighting && self.ppr == *ppr
    }

    /// A solver of its own for one query (shares the arcs).
    pub(crate) fn solver(&self) -> PprSolver {
        self.solver.fork()
    }

    /// Vertices (the length of a reset vector).
    pub(crate) fn vertex_count(&self) -> usize {
        self.solver.node_count()
    }

    /// The vertex of graph node `node`.
    pub(crate) fn vertex(&self, node: NodeIndex) -> Option<usize> {
        self.vertex_nodes.binary_search(&node).ok()
    }
}

/// The PPR solver settings of `config` (its query-time keys).
pub(crate) fn ppr_config(config: &HippoConfig) -> PprConfig {
    PprConfig {
        damping: config.damping,
        tolerance: config.ppr_tol,
        max_iterations: config.ppr_max_iter,
        ..PprConfig::default()
    }
}

/// The graph packed, and what questions read of it. Clones share both.
#[derive(Debug, Clone, Default)]
pub(crate) struct HeldGraph {
    /// `None`: the empty graph.
    packed: Option<Packed<KnowledgeGraph>>,
    /// The walk under the index configuration's weighting and solver settings (`None` for an empty
    /// graph, or settings no solver takes: a retriever then makes its own and reports why).
    walk: Option<Arc<Walk>>,
    /// `n(p)` by phrase row: the number of chunks whose triples hold the phrase.
    phrase_chunks: Arc<[u32]>,
    /// Each passage's node, by chunk id (sorted).
    passage_nodes: Arc<[(ChunkId, NodeIndex)]>,
    counts: GraphCounts,
}

impl HeldGraph {
    /// Packs `graph`; `phrase_nodes` are the phrase rows' nodes, `config` the index's configuration.
    pub(crate) fn new(
        graph: &KnowledgeGraph,
        phrase_nodes: &[NodeIndex],
        config: &HippoConfig,
    ) -> Result<Self> {
        if graph.node_count() == 0 {
            return Ok(Self::default());
        }
        let phrase_chunks = phrase_nodes
            .iter()
            .map(|&n| {
                graph
                    .node(n)
                    .map_or(0, |x| u32::try_from(x.sources.len()).unwrap_or(u32::MAX))
            })
            .collect();
        let mut passage_nodes: Vec<(ChunkId, NodeIndex)> = graph
            .node_indices()
            .filter_map(|n| {
                let id = ChunkId::parse(&graph.node(n)?.key).ok()?;
                Some((id, n))
            })
            .collect();
        passage_nodes.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        // Settings no solver takes are the retriever's to report, as they were before the graph was packed.
        let walk = Walk::new(graph, config.graph_weights.weighting(), ppr_config(config))
            .ok()
            .map(Arc::new);
        Ok(Self {
            packed: Some(Packed::new(graph)?),
            walk,
            phrase_chunks,
            passage_nodes: passage_nodes.into(),
            counts: graph.counts(),
        })
    }

    /// The graph, unpacked (a new copy each call).
    pub(crate) fn get(&self) -> Result<KnowledgeGraph> {
        match &self.packed {
            Some(p) => Ok(p.get()?),
            None => Ok(KnowledgeGraph::new()),
        }
    }

    /// The walk made with the index, when it serves `weighting` and `ppr`.
    pub(crate) fn walk(&self, weighting: EdgeWeighting, ppr: &PprConfig) -> Option<Arc<Walk>> {
        self.walk
            .as_ref()
            .filter(|w| w.serves(weighting, ppr))
            .cloned()
    }

    /// `n(p)` of phrase row `row`.
    pub(crate) fn phrase_chunks(&self, row: usize) -> usize {
        self.phrase_chunks.get(row).map_or(0, |&n| n as usize)
    }

    /// The passage node of `chunk`.
    pub(crate) fn passage_node(&self, chunk: &str) -> Option<NodeIndex> {
        let i = self
            .passage_nodes
            .binary_search_by(|(c, _)| c.as_str().cmp(chunk))
            .ok()?;
        self.passage_nodes.get(i).map(|&(_, n)| n)
    }

    /// Node and edge counts.
    pub(crate) fn counts(&self) -> &GraphCounts {
        &self.counts
    }

    /// Bytes the packed graph holds.
    pub(crate) fn packed_len(&self) -> usize {
        self.packed.as_ref().map_or(0, Packed::packed_len)
    }
}
