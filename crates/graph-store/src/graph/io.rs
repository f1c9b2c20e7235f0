//! A knowledge graph on disk and in tables: saving and loading it, and its node and edge rows.

use std::collections::HashMap;
use std::path::Path;

use petgraph::stable_graph::{NodeIndex, StableUnGraph};
use petgraph::visit::NodeIndexable;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Edge, KnowledgeGraph, Node};
use crate::error::invalid;
use crate::{persist, Result, StoreError};

/// File format version of a saved graph.
const GRAPH_FORMAT: u32 = 1;
const GRAPH_KIND: &str = "graph";

impl KnowledgeGraph {
    /// Saves the graph to `path` atomically (checksummed, versioned).
    pub fn save(&self, path: &Path) -> Result<()> {
        persist::save(path, GRAPH_KIND, GRAPH_FORMAT, &self.g)
    }

    /// Loads a graph saved by [`save`](Self::save).
    pub fn load(path: &Path) -> Result<Self> {
        let g: StableUnGraph<Node, Edge> = persist::load(path, GRAPH_KIND, GRAPH_FORMAT)?;
        Self::from_petgraph(g).map_err(|reason| StoreError::Corrupt {
            path: path.to_path_buf(),
            reason,
        })
    }

    fn from_petgraph(g: StableUnGraph<Node, Edge>) -> std::result::Result<Self, String> {
        let mut out = Self {
            g,
            by_key: HashMap::new(),
            by_name: HashMap::new(),
        };
        let idx: Vec<NodeIndex> = out.g.node_indices().collect();
        for i in idx {
            let (key, name) = (out.g[i].key.clone(), out.g[i].name.clone());
            if out.by_key.insert(key.clone(), i).is_some() {
                return Err(format!("node key {key:?} appears twice"));
            }
            out.by_name.entry(name).or_default().push(i);
        }
        Ok(out)
    }

    /// The graph as table rows: `(node slots, edge slots)` — one past the highest node and edge index,
    /// counting the vacancies removals left — then every node `(index, data)` and every edge
    /// `(index, endpoint a, endpoint b, data)`, in index order. [`from_rows`](Self::from_rows) rebuilds
    /// exactly this graph from them (the same indices, vacancies and neighbour order), as a database
    /// backend stores a graph in a node table and an edge table.
    #[allow(clippy::type_complexity)]
    pub fn rows(
        &self,
    ) -> (
        (u32, u32),
        impl Iterator<Item = (u32, &Node)> + '_,
        impl Iterator<Item = (u32, u32, u32, &Edge)> + '_,
    ) {
        use petgraph::visit::EdgeIndexable;
        let bounds = (
            self.g.node_bound() as u32,
            EdgeIndexable::edge_bound(&self.g) as u32,
        );
        let nodes = self
            .g
            .node_indices()
            .map(|i| (i.index() as u32, &self.g[i]));
        let edges = self.g.edge_indices().filter_map(|e| {
            let (a, b) = self.g.edge_endpoints(e)?;
            Some((
                e.index() as u32,
                a.index() as u32,
                b.index() as u32,
                &self.g[e],
            ))
        });
        (bounds, nodes, edges)
    }

    /// The graph [`rows`](Self::rows) described. Nodes and edges must come in increasing index order,
    /// below their slot counts; an edge must join present nodes. The result equals the original graph
    /// in every respect a later change depends on: it goes through the same decoding as
    /// [`load`](Self::load).
    pub fn from_rows(
        (node_slots, edge_slots): (u32, u32),
        nodes: impl IntoIterator<Item = (u32, Node)>,
        edges: impl IntoIterator<Item = (u32, u32, u32, Edge)>,
    ) -> Result<Self> {
        #[derive(Serialize)]
        #[serde(rename = "EdgeProperty", rename_all = "lowercase")]
        enum EdgeProperty {
            Undirected,
        }
        // petgraph's serialised form of a stable graph: the present nodes, the vacant node slots, the
        // edge type, and one entry per edge slot.
        #[derive(Serialize)]
        #[serde(rename = "Graph")]
        struct Rows {
            nodes: Vec<Node>,
            node_holes: Vec<u32>,
            edge_property: EdgeProperty,
            edges: Vec<Option<(u32, u32, Edge)>>,
        }
        let mut rows = Rows {
            nodes: Vec::new(),
            node_holes: Vec::new(),
            edge_property: EdgeProperty::Undirected,
            edges: Vec::new(),
        };
        let mut next = 0u32;
        for (i, node) in nodes {
            if i < next || i >= node_slots {
                return Err(invalid(format!(
                    "node row {i} is out of order or past the {node_slots} node slots"
                )));
            }
            rows.node_holes.extend(next..i);
            rows.nodes.push(node);
            next = i + 1;
        }
        rows.node_holes.extend(next..node_slots);
        let present = |i: u32| i < node_slots && rows.node_holes.binary_search(&i).is_err();
        let mut slots: Vec<Option<(u32, u32, Edge)>> = Vec::new();
        for (e, a, b, edge) in edges {
            if (e as usize) < slots.len() || e >= edge_slots {
                return Err(invalid(format!(
                    "edge row {e} is out of order or past the {edge_slots} edge slots"
                )));
            }
            if !present(a) || !present(b) {
                return Err(invalid(format!(
                    "edge row {e} joins {a} and {b}, not both present nodes"
                )));
            }
            slots.resize_with(e as usize, || None);
            slots.push(Some((a, b, edge)));
        }
        slots.resize_with(edge_slots as usize, || None);
        rows.edges = slots;
        let bytes = postcard::to_stdvec(&rows).map_err(|e| StoreError::Encode {
            what: "graph rows".to_owned(),
            reason: e.to_string(),
        })?;
        let g: StableUnGraph<Node, Edge> = postcard::from_bytes(&bytes)
            .map_err(|e| invalid(format!("the graph rows do not form a graph: {e}")))?;
        Self::from_petgraph(g).map_err(invalid)
    }
}

/// Serialised, a graph is its petgraph form — what [`KnowledgeGraph::save`] writes inside its frame —
/// so a graph in a serde structure (e.g. held [`Packed`](crate::Packed)) comes back with the same
/// indices, vacancies and neighbour order, and its look-up maps rebuilt.
impl Serialize for KnowledgeGraph {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.g.serialize(s)
    }
}

impl<'de> Deserialize<'de> for KnowledgeGraph {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let g = StableUnGraph::<Node, Edge>::deserialize(d)?;
        Self::from_petgraph(g).map_err(serde::de::Error::custom)
    }
}
