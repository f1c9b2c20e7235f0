//! The knowledge graph: passages, entities and summary entities joined by typed, weighted edges.
//!
//! One undirected simple graph serves all three methods. Each node pair has at most one edge; the edge
//! carries one *facet* per kind of link between the two nodes (a HippoRAG fact count, a synonymy cosine, a
//! HiRAG relation, cluster membership, a LeanRAG aggregated relation, a passage–entity context link), so that
//! every method's weighting is a view over the same stored data (see [`EdgeWeighting`]) and switching a
//! weighting never requires re-indexing.
//!
//! Nodes keep the index they were created with until they are removed ([`petgraph::stable_graph`]), so node
//! order — which breaks ties in rankings — is insertion order as long as nothing is removed. A removed
//! node's index is free and the next inserted node may take it (petgraph reuses vacant slots): after a
//! removal, re-read indices by key ([`KnowledgeGraph::find`]) rather than keeping old ones. Lookups by key (`chunk-…`, `entity-…`) and by
//! name are hash maps maintained on every change. Iteration orders are deterministic: by node index, or by
//! name where a spec asks for it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::Path;

use kgrag_types::ChunkId;
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableUnGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences, NodeIndexable};
use serde::{Deserialize, Serialize};

use crate::csr::CsrGraph;
use crate::error::invalid;
use crate::{persist, Result, StoreError};

/// Separator between merged descriptions (HiRAG's `<SEP>`).
pub const DESCRIPTION_SEPARATOR: &str = "<SEP>";

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeKind {
    /// A passage (chunk) of the corpus.
    Passage,
    /// An entity or phrase extracted from passages.
    Entity,
    /// A summary or aggregate entity created by a hierarchy layer (its layer is [`Node::layer`]).
    Summary,
}

impl NodeKind {
    /// Lower-case name used in exports.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Passage => "passage",
            NodeKind::Entity => "entity",
            NodeKind::Summary => "summary",
        }
    }
}

/// A node's data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Unique key: the chunk id for passages, `entity-<md5>` for entities, a method-chosen key for summaries.
    pub key: String,
    /// What the node stands for.
    pub kind: NodeKind,
    /// Display and look-up name (normalised entity name; the chunk id for passages).
    pub name: String,
    /// Entity type (most frequent among merged records; empty when unknown).
    pub entity_type: String,
    /// Description: merged descriptions joined by [`DESCRIPTION_SEPARATOR`]; the text for passages.
    pub description: String,
    /// Chunks the node was extracted from (sorted).
    pub sources: BTreeSet<ChunkId>,
    /// Hierarchy layer: 0 for passages and base entities, L ≥ 1 for summaries created over layer L − 1.
    pub layer: u32,
    /// Entity-type votes of the merged records, in first-seen order.
    type_votes: Vec<(String, u32)>,
}

impl Node {
    fn new(key: String, kind: NodeKind, name: String, layer: u32) -> Self {
        Self {
            key,
            kind,
            name,
            entity_type: String::new(),
            description: String::new(),
            sources: BTreeSet::new(),
            layer,
            type_votes: Vec::new(),
        }
    }
}

/// One record merged into an entity node by [`KnowledgeGraph::upsert_entity`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntityRecord {
    /// Node key (unique).
    pub key: String,
    /// Name (already normalised the way the method wants).
    pub name: String,
    /// Entity type of this record (empty = no vote).
    pub entity_type: String,
    /// Description of this record (may itself hold several parts joined by [`DESCRIPTION_SEPARATOR`]).
    pub description: String,
    /// Source chunks of this record.
    pub sources: BTreeSet<ChunkId>,
    /// Layer of the record; a merged node keeps the lowest.
    pub layer: u32,
    /// `Entity` or `Summary`.
    pub kind: Option<NodeKind>,
}

/// A relation (HiRAG/LeanRAG edge) between two entities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelationFacet {
    /// Merged descriptions joined by [`DESCRIPTION_SEPARATOR`], sorted and de-duplicated.
    pub description: String,
    /// Merged keywords joined by [`DESCRIPTION_SEPARATOR`], sorted and de-duplicated.
    pub keywords: String,
    /// Sum of the merged records' strengths.
    pub weight: f64,
    /// Union of source chunks.
    pub sources: BTreeSet<ChunkId>,
    /// Minimum `order` of the merged records (HiRAG; 1 by default).
    pub order: u32,
}

/// HippoRAG synonymy between two phrases: the cosine accepted from each side's k-NN scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SynonymyFacet {
    /// Cosine accepted when scanning the neighbours of the edge's lower-index endpoint.
    pub from_low: Option<f32>,
    /// Cosine accepted when scanning the neighbours of the edge's higher-index endpoint.
    pub from_high: Option<f32>,
}

impl SynonymyFacet {
    /// The cosine (either direction).
    pub fn cosine(&self) -> Option<f32> {
        self.from_low.or(self.from_high)
    }
}

/// The kinds of link an edge can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EdgeKind {
    /// HippoRAG fact edge between subject and object phrases.
    Fact,
    /// Passage–entity link (HippoRAG context edge).
    Context,
    /// HippoRAG synonymy edge.
    Synonymy,
    /// HiRAG / LeanRAG relation from extraction (or member→summary relation).
    Relation,
    /// Cluster membership: a node and the summary node of its cluster.
    Membership,
    /// LeanRAG aggregated relation between two clusters of one layer.
    Aggregate,
}

impl EdgeKind {
    /// Every kind, in a fixed order.
    pub const ALL: [EdgeKind; 6] = [
        EdgeKind::Fact,
        EdgeKind::Context,
        EdgeKind::Synonymy,
        EdgeKind::Relation,
        EdgeKind::Membership,
        EdgeKind::Aggregate,
    ];

    /// Lower-case name used in exports.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Fact => "fact",
            EdgeKind::Context => "context",
            EdgeKind::Synonymy => "synonymy",
            EdgeKind::Relation => "relation",
            EdgeKind::Membership => "membership",
            EdgeKind::Aggregate => "aggregate",
        }
    }
}

/// An edge's data: one optional facet per kind of link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// HippoRAG fact occurrences per source chunk (a triple counted once per occurrence).
    pub fact_by_chunk: BTreeMap<ChunkId, u32>,
    /// Passage–entity link.
    pub context: bool,
    /// Synonymy cosines.
    pub synonymy: Option<SynonymyFacet>,
    /// Extracted relation.
    pub relation: Option<RelationFacet>,
    /// Cluster membership.
    pub membership: bool,
    /// Aggregated relation.
    pub aggregate: Option<RelationFacet>,
}

impl Edge {
    /// Total fact occurrences over all chunks.
    pub fn fact_count(&self) -> u32 {
        self.fact_by_chunk.values().sum()
    }

    /// Whether the edge carries a facet of `kind`.
    pub fn has(&self, kind: EdgeKind) -> bool {
        match kind {
            EdgeKind::Fact => !self.fact_by_chunk.is_empty(),
            EdgeKind::Context => self.context,
            EdgeKind::Synonymy => self.synonymy.is_some(),
            EdgeKind::Relation => self.relation.is_some(),
            EdgeKind::Membership => self.membership,
            EdgeKind::Aggregate => self.aggregate.is_some(),
        }
    }

    /// The kinds the edge carries, in [`EdgeKind::ALL`] order.
    pub fn kinds(&self) -> impl Iterator<Item = EdgeKind> + '_ {
        EdgeKind::ALL.into_iter().filter(|k| self.has(*k))
    }

    fn is_empty(&self) -> bool {
        self.kinds().next().is_none()
    }

    /// The edge's weight under `weighting`.
    pub fn weight(&self, weighting: EdgeWeighting) -> f64 {
        let ctx = if self.context { 1.0 } else { 0.0 };
        let facts = f64::from(self.fact_count());
        match weighting {
            EdgeWeighting::HippoReference => {
                // Ordered-pair map of the reference: each direction holds the fact count unless the
                // synonymy scan of that direction overwrote it with the cosine.
                let syn = self.synonymy.unwrap_or_default();
                let dir = |c: Option<f32>| c.map_or(facts, f64::from);
                let pair = if self.fact_by_chunk.is_empty() && self.synonymy.is_none() {
                    0.0
                } else {
                    dir(syn.from_low) + dir(syn.from_high)
                };
                pair + ctx
            }
            EdgeWeighting::HippoClean => {
                facts
                    + self
                        .synonymy
                        .and_then(|s| s.cosine())
                        .map_or(0.0, f64::from)
                    + ctx
            }
            EdgeWeighting::Relation => {
                self.relation.as_ref().map_or(0.0, |r| r.weight)
                    + self.aggregate.as_ref().map_or(0.0, |r| r.weight)
                    + if self.membership { 1.0 } else { 0.0 }
            }
            EdgeWeighting::Unit => 1.0,
        }
    }
}

/// How an edge's facets become one weight for algorithms (PPR, Leiden, Dijkstra).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeWeighting {
    /// HippoRAG 2 reference (`graph_weights = "reference"`, spec hipporag2 §4.2): per direction, the synonymy
    /// cosine if that direction's scan accepted it, else the fact count; the two directions summed; plus 1 for
    /// a passage–phrase link. Fact-only pair = 2 × occurrences; mutual synonyms = 2·cos.
    HippoReference,
    /// HippoRAG 2 `graph_weights = "clean"`: fact occurrences + cosine (if either direction accepted it) + 1
    /// for a passage–phrase link.
    HippoClean,
    /// Relation strength (HiRAG/LeanRAG): relation weight + aggregate weight + 1 for membership.
    Relation,
    /// Every edge weighs 1.
    Unit,
}

/// Order in which a breadth-first search expands a node's neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighbourOrder {
    /// By node index (insertion order).
    Index,
    /// By node name, then index (HiRAG's bridge: the lexicographically first shortest path wins).
    Name,
}

/// Counts of nodes by kind and edges by facet kind (an edge with two facets counts under both).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphCounts {
    /// Nodes per kind.
    pub nodes: BTreeMap<NodeKind, usize>,
    /// Edges carrying each facet kind.
    pub edges: BTreeMap<EdgeKind, usize>,
    /// All edges (node pairs).
    pub edge_pairs: usize,
}

impl GraphCounts {
    /// Nodes of `kind`.
    pub fn nodes_of(&self, kind: NodeKind) -> usize {
        self.nodes.get(&kind).copied().unwrap_or(0)
    }

    /// Edges carrying `kind`.
    pub fn edges_of(&self, kind: EdgeKind) -> usize {
        self.edges.get(&kind).copied().unwrap_or(0)
    }
}

/// File format version of a saved graph.
const GRAPH_FORMAT: u32 = 1;
const GRAPH_KIND: &str = "graph";

/// The knowledge graph. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct KnowledgeGraph {
    g: StableUnGraph<Node, Edge>,
    by_key: HashMap<String, NodeIndex>,
    by_name: HashMap<String, Vec<NodeIndex>>,
}

impl PartialEq for KnowledgeGraph {
    fn eq(&self, other: &Self) -> bool {
        self.g.node_count() == other.g.node_count()
            && self.g.edge_count() == other.g.edge_count()
            && self
                .g
                .node_indices()
                .zip(other.g.node_indices())
                .all(|(a, b)| a == b && self.g[a] == other.g[b])
            && self
                .g
                .edge_indices()
                .zip(other.g.edge_indices())
                .all(|(a, b)| {
                    a == b
                        && self.g.edge_endpoints(a) == other.g.edge_endpoints(b)
                        && self.g[a] == other.g[b]
                })
    }
}

fn merge_parts(existing: &str, new: &str) -> String {
    let parts: BTreeSet<&str> = existing
        .split(DESCRIPTION_SEPARATOR)
        .chain(new.split(DESCRIPTION_SEPARATOR))
        .filter(|p| !p.is_empty())
        .collect();
    parts
        .into_iter()
        .collect::<Vec<_>>()
        .join(DESCRIPTION_SEPARATOR)
}

impl KnowledgeGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.g.node_count()
    }

    /// Number of edges (node pairs).
    pub fn edge_count(&self) -> usize {
        self.g.edge_count()
    }

    /// Node indices in ascending order.
    pub fn node_indices(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.g.node_indices()
    }

    /// Edges as (index, low endpoint, high endpoint, data), in ascending edge index order.
    pub fn edges(&self) -> impl Iterator<Item = (EdgeIndex, NodeIndex, NodeIndex, &Edge)> + '_ {
        (&self.g).edge_references().map(|e| {
            let (a, b) = (e.source(), e.target());
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            (e.id(), lo, hi, e.weight())
        })
    }

    /// The node at `idx`.
    pub fn node(&self, idx: NodeIndex) -> Option<&Node> {
        self.g.node_weight(idx)
    }

    /// The edge at `idx`.
    pub fn edge(&self, idx: EdgeIndex) -> Option<&Edge> {
        self.g.edge_weight(idx)
    }

    /// The node with `key`.
    pub fn find(&self, key: &str) -> Option<NodeIndex> {
        self.by_key.get(key).copied()
    }

    /// Nodes named `name`, ascending index (several layers may share a name).
    pub fn find_by_name(&self, name: &str) -> &[NodeIndex] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The edge between `a` and `b`, if any.
    pub fn edge_between(&self, a: NodeIndex, b: NodeIndex) -> Option<EdgeIndex> {
        self.g.find_edge(a, b)
    }

    /// The edge's endpoints, lower index first.
    pub fn endpoints(&self, e: EdgeIndex) -> Option<(NodeIndex, NodeIndex)> {
        self.g
            .edge_endpoints(e)
            .map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
    }

    /// Counts of nodes by kind and edges by facet.
    pub fn counts(&self) -> GraphCounts {
        let mut c = GraphCounts::default();
        for n in self.g.node_weights() {
            *c.nodes.entry(n.kind).or_default() += 1;
        }
        for e in self.g.edge_weights() {
            for k in e.kinds() {
                *c.edges.entry(k).or_default() += 1;
            }
        }
        c.edge_pairs = self.g.edge_count();
        c
    }

    fn add_node(&mut self, node: Node) -> NodeIndex {
        let key = node.key.clone();
        let name = node.name.clone();
        let idx = self.g.add_node(node);
        self.by_key.insert(key, idx);
        let list = self.by_name.entry(name).or_default();
        let pos = list.partition_point(|&x| x < idx);
        list.insert(pos, idx);
        idx
    }

    /// Adds the passage node of `chunk` (text kept as its description) or returns the existing one.
    pub fn add_passage(&mut self, chunk: &ChunkId, text: &str) -> NodeIndex {
        if let Some(idx) = self.find(chunk.as_str()) {
            return idx;
        }
        let mut node = Node::new(
            chunk.as_str().to_owned(),
            NodeKind::Passage,
            chunk.as_str().to_owned(),
            0,
        );
        node.description = text.to_owned();
        node.sources.insert(chunk.clone());
        self.add_node(node)
    }

    /// Adds a bare entity node (HippoRAG phrase: key and name, nothing else) or returns the existing one.
    pub fn add_entity(&mut self, key: &str, name: &str) -> NodeIndex {
        if let Some(idx) = self.find(key) {
            return idx;
        }
        self.add_node(Node::new(
            key.to_owned(),
            NodeKind::Entity,
            name.to_owned(),
            0,
        ))
    }

    /// Inserts or merges an entity record with HiRAG's rules (spec hirag §4.4): type = most frequent vote
    /// (ties: first seen), description = sorted set of parts joined by `<SEP>`, sources = union, layer =
    /// lowest. A record of kind `Entity` merging into a `Summary` node makes it an `Entity`. Every record
    /// merged over the node's life votes for its type; the reference counts an existing node's stored type
    /// as a single vote, so across separate insert batches the two can differ.
    pub fn upsert_entity(&mut self, record: EntityRecord) -> Result<NodeIndex> {
        if record.key.is_empty() {
            return Err(invalid(format!(
                "entity record {:?} has an empty key",
                record.name
            )));
        }
        let kind = record.kind.unwrap_or(NodeKind::Entity);
        if kind == NodeKind::Passage {
            return Err(invalid(format!(
                "entity record {:?} cannot have kind passage; use add_passage",
                record.key
            )));
        }
        let idx = match self.find(&record.key) {
            Some(idx) => idx,
            None => self.add_node(Node::new(
                record.key.clone(),
                kind,
                record.name.clone(),
                record.layer,
            )),
        };
        let node = &mut self.g[idx];
        if node.kind == NodeKind::Passage {
            return Err(invalid(format!(
                "key {:?} belongs to a passage node",
                record.key
            )));
        }
        if kind == NodeKind::Entity {
            node.kind = NodeKind::Entity;
        }
        node.layer = node.layer.min(record.layer);
        if !record.entity_type.is_empty() {
            match node
                .type_votes
                .iter_mut()
                .find(|(t, _)| *t == record.entity_type)
            {
                Some((_, n)) => *n += 1,
                None => node.type_votes.push((record.entity_type.clone(), 1)),
            }
            let mut best: Option<&(String, u32)> = None;
            for v in &node.type_votes {
                if best.is_none_or(|b| v.1 > b.1) {
                    best = Some(v);
                }
            }
            if let Some((t, _)) = best {
                node.entity_type = t.clone();
            }
        }
        node.description = merge_parts(&node.description, &record.description);
        node.sources.extend(record.sources);
        Ok(idx)
    }

    /// Adds `chunk` to a node's sources (e.g. a HippoRAG phrase seen in that passage).
    pub fn add_source(&mut self, idx: NodeIndex, chunk: &ChunkId) -> Result<()> {
        let node = self
            .g
            .node_weight_mut(idx)
            .ok_or_else(|| StoreError::UnknownNode(format!("index {}", idx.index())))?;
        if !node.sources.contains(chunk) {
            node.sources.insert(chunk.clone());
        }
        Ok(())
    }

    /// Removes `chunk` from a node's sources; returns how many sources are left.
    pub fn remove_source(&mut self, idx: NodeIndex, chunk: &ChunkId) -> Result<usize> {
        let node = self
            .g
            .node_weight_mut(idx)
            .ok_or_else(|| StoreError::UnknownNode(format!("index {}", idx.index())))?;
        node.sources.remove(chunk);
        Ok(node.sources.len())
    }

    /// Replaces a node's description (after an LLM or extractive summary of the merged parts).
    pub fn set_description(&mut self, idx: NodeIndex, description: String) -> Result<()> {
        let node = self
            .g
            .node_weight_mut(idx)
            .ok_or_else(|| StoreError::UnknownNode(format!("{idx:?}")))?;
        node.description = description;
        Ok(())
    }

    fn check(&self, idx: NodeIndex) -> Result<()> {
        if self.g.contains_node(idx) {
            Ok(())
        } else {
            Err(StoreError::UnknownNode(format!("index {}", idx.index())))
        }
    }

    fn edge_mut(&mut self, a: NodeIndex, b: NodeIndex) -> Result<&mut Edge> {
        self.check(a)?;
        self.check(b)?;
        if a == b {
            return Err(invalid(format!(
                "self-loop on {:?} is not stored",
                self.g[a].key
            )));
        }
        let e = match self.g.find_edge(a, b) {
            Some(e) => e,
            None => self.g.add_edge(a, b, Edge::default()),
        };
        Ok(&mut self.g[e])
    }

    /// Counts one fact occurrence between phrases `a` and `b` from `chunk`. Self-loops are skipped
    /// (returns `false`), as the reference does.
    pub fn add_fact(&mut self, a: NodeIndex, b: NodeIndex, chunk: &ChunkId) -> Result<bool> {
        if a == b {
            self.check(a)?;
            return Ok(false);
        }
        *self
            .edge_mut(a, b)?
            .fact_by_chunk
            .entry(chunk.clone())
            .or_default() += 1;
        Ok(true)
    }

    /// Links a passage and an entity.
    pub fn add_context(&mut self, passage: NodeIndex, entity: NodeIndex) -> Result<()> {
        self.edge_mut(passage, entity)?.context = true;
        Ok(())
    }

    /// Records that the k-NN scan of `from` accepted `to` with cosine `cos` (overwrites that direction).
    pub fn set_synonymy(&mut self, from: NodeIndex, to: NodeIndex, cos: f32) -> Result<()> {
        if !cos.is_finite() {
            return Err(invalid(format!("synonymy cosine {cos} is not finite")));
        }
        let low = from < to;
        let syn = self
            .edge_mut(from, to)?
            .synonymy
            .get_or_insert_with(SynonymyFacet::default);
        if low {
            syn.from_low = Some(cos);
        } else {
            syn.from_high = Some(cos);
        }
        Ok(())
    }

    /// Number of synonymy neighbours that `node`'s own scan accepted.
    pub fn synonymy_accepted(&self, node: NodeIndex) -> usize {
        self.g
            .edges(node)
            .filter(|e| {
                e.weight().synonymy.is_some_and(|s| {
                    let other = if e.source() == node {
                        e.target()
                    } else {
                        e.source()
                    };
                    if node < other {
                        s.from_low.is_some()
                    } else {
                        s.from_high.is_some()
                    }
                })
            })
            .count()
    }

    fn merge_relation(slot: &mut Option<RelationFacet>, r: RelationFacet) {
        match slot {
            None => *slot = Some(r),
            Some(old) => {
                old.description = merge_parts(&old.description, &r.description);
                old.keywords = merge_parts(&old.keywords, &r.keywords);
                old.weight += r.weight;
                old.sources.extend(r.sources);
                old.order = old.order.min(r.order);
            }
        }
    }

    /// Inserts or merges a relation with HiRAG's rules (spec hirag §4.4): weight = sum, description and
    /// keywords = sorted set join, sources = union, order = min. Self-relations are rejected.
    pub fn upsert_relation(&mut self, a: NodeIndex, b: NodeIndex, r: RelationFacet) -> Result<()> {
        if !r.weight.is_finite() {
            return Err(invalid(format!(
                "relation weight {} is not finite",
                r.weight
            )));
        }
        Self::merge_relation(&mut self.edge_mut(a, b)?.relation, r);
        Ok(())
    }

    /// Links a node with the summary node of its cluster.
    pub fn add_membership(&mut self, member: NodeIndex, summary: NodeIndex) -> Result<()> {
        self.edge_mut(member, summary)?.membership = true;
        Ok(())
    }

    /// Inserts or merges an aggregated (inter-cluster) relation, with the merge rules of relations.
    pub fn upsert_aggregate(&mut self, a: NodeIndex, b: NodeIndex, r: RelationFacet) -> Result<()> {
        if !r.weight.is_finite() {
            return Err(invalid(format!(
                "aggregate weight {} is not finite",
                r.weight
            )));
        }
        Self::merge_relation(&mut self.edge_mut(a, b)?.aggregate, r);
        Ok(())
    }

    /// Removes the fact occurrences that `chunk` contributed between `a` and `b`; drops the edge when no
    /// facet is left.
    pub fn remove_fact_chunk(&mut self, a: NodeIndex, b: NodeIndex, chunk: &ChunkId) {
        if let Some(e) = self.g.find_edge(a, b) {
            self.g[e].fact_by_chunk.remove(chunk);
            if self.g[e].is_empty() {
                self.g.remove_edge(e);
            }
        }
    }

    /// Removes a node with all its edges. Other nodes keep their indices.
    pub fn remove_node(&mut self, idx: NodeIndex) -> Option<Node> {
        let node = self.g.remove_node(idx)?;
        self.by_key.remove(&node.key);
        if let Some(list) = self.by_name.get_mut(&node.name) {
            list.retain(|&x| x != idx);
            if list.is_empty() {
                self.by_name.remove(&node.name);
            }
        }
        Some(node)
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(s: &str) -> ChunkId {
        ChunkId::from_content(s)
    }

    #[test]
    fn rows_rebuild_the_same_graph_holes_and_all() {
        let mut g = KnowledgeGraph::new();
        let mut nodes = Vec::new();
        for i in 0..12 {
            let p = g.add_passage(&chunk(&format!("p{i}")), &format!("text {i}"));
            let e = g.add_entity(&format!("entity-{i}"), &format!("e{i}"));
            g.add_context(p, e).unwrap();
            nodes.push((p, e));
        }
        for i in 0..11 {
            g.add_fact(nodes[i].1, nodes[i + 1].1, &chunk(&format!("p{i}")))
                .unwrap();
            g.set_synonymy(nodes[i].1, nodes[(i + 5) % 12].1, 0.9)
                .unwrap();
        }
        // Vacancies in the middle and at the end, of nodes and of edges.
        for i in [3, 7, 11] {
            g.remove_node(nodes[i].0);
        }
        g.remove_node(nodes[5].1);
        let (bounds, node_rows, edge_rows) = g.rows();
        let back = KnowledgeGraph::from_rows(
            bounds,
            node_rows.map(|(i, n)| (i, n.clone())),
            edge_rows.map(|(e, a, b, x)| (e, a, b, x.clone())),
        )
        .unwrap();
        assert_eq!(back, g);
        assert_eq!(
            postcard::to_stdvec(&back.g).unwrap(),
            postcard::to_stdvec(&g.g).unwrap()
        );
        // A change after the round trip lands where it lands after a save and load.
        let dir = std::env::temp_dir().join(format!("kgrag-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        g.save(&dir.join("g.kg")).unwrap();
        let mut loaded = KnowledgeGraph::load(&dir.join("g.kg")).unwrap();
        let mut rebuilt = back;
        for k in 0..6 {
            let a = loaded.add_entity(&format!("entity-new-{k}"), "n");
            let b = rebuilt.add_entity(&format!("entity-new-{k}"), "n");
            assert_eq!(a, b);
            loaded.add_fact(a, nodes[0].1, &chunk("x")).unwrap();
            rebuilt.add_fact(b, nodes[0].1, &chunk("x")).unwrap();
        }
        assert_eq!(loaded, rebuilt);
        assert_eq!(
            loaded.neighbours(nodes[0].1),
            rebuilt.neighbours(nodes[0].1)
        );
        let _ = std::fs::remove_dir_all(&dir);
        // Rows that cannot be a graph are errors.
        let (bounds, node_rows, _) = g.rows();
        let rows: Vec<(u32, Node)> = node_rows.map(|(i, n)| (i, n.clone())).collect();
        assert!(KnowledgeGraph::from_rows(bounds, rows.iter().rev().cloned(), []).is_err());
        assert!(
            KnowledgeGraph::from_rows(bounds, rows.clone(), [(0, 3, 400, Edge::default())])
                .is_err()
        );
    }

    #[test]
    fn entity_merge_rules() {
        let mut g = KnowledgeGraph::new();
        let rec = |t: &str, d: &str, c: &str, layer| EntityRecord {
            key: "entity-a".into(),
            name: "A".into(),
            entity_type: t.into(),
            description: d.into(),
            sources: [chunk(c)].into(),
            layer,
            kind: None,
        };
        let a = g.upsert_entity(rec("PERSON", "b desc", "1", 1)).unwrap();
        g.upsert_entity(rec("ORG", "a desc", "2", 0)).unwrap();
        g.upsert_entity(rec("ORG", "b desc", "2", 2)).unwrap();
        let n = g.node(a).unwrap();
        assert_eq!(n.entity_type, "ORG");
        assert_eq!(n.description, "a desc<SEP>b desc");
        assert_eq!(n.sources.len(), 2);
        assert_eq!(n.layer, 0);
        // Tie between votes: first seen wins.
        let mut g = KnowledgeGraph::new();
        let a = g.upsert_entity(rec("PERSON", "", "1", 0)).unwrap();
        g.upsert_entity(rec("ORG", "", "1", 0)).unwrap();
        assert_eq!(g.node(a).unwrap().entity_type, "PERSON");
        assert_eq!(g.find_by_name("A"), &[a]);
    }

    #[test]
    fn relation_merge_rules_and_weights() {
        let mut g = KnowledgeGraph::new();
        let a = g.add_entity("entity-a", "a");
        let b = g.add_entity("entity-b", "b");
        let r = |d: &str, w, order| RelationFacet {
            description: d.into(),
            keywords: String::new(),
            weight: w,
            sources: BTreeSet::new(),
            order,
        };
        g.upsert_relation(a, b, r("y", 2.0, 3)).unwrap();
        g.upsert_relation(b, a, r("x", 5.0, 1)).unwrap();
        let e = g.edge(g.edge_between(a, b).unwrap()).unwrap();
        let rel = e.relation.as_ref().unwrap();
        assert_eq!(rel.description, "x<SEP>y");
        assert_eq!(rel.weight, 7.0);
        assert_eq!(rel.order, 1);
        assert_eq!(e.weight(EdgeWeighting::Relation), 7.0);
        assert!(g.upsert_relation(a, a, r("z", 1.0, 1)).is_err());
    }

    #[test]
    fn hippo_reference_weights() {
        let mut g = KnowledgeGraph::new();
        let a = g.add_entity("entity-a", "a");
        let b = g.add_entity("entity-b", "b");
        let p = g.add_passage(&chunk("p"), "p");
        let c = chunk("p");
        g.add_fact(a, b, &c).unwrap();
        g.add_fact(b, a, &c).unwrap();
        assert!(!g.add_fact(a, a, &c).unwrap());
        g.add_context(p, a).unwrap();
        let ab = g.edge_between(a, b).unwrap();
        // Fact-only pair: 2 x occurrences.
        assert_eq!(
            g.edge(ab).unwrap().weight(EdgeWeighting::HippoReference),
            4.0
        );
        assert_eq!(g.edge(ab).unwrap().weight(EdgeWeighting::HippoClean), 2.0);
        // One direction overwritten by synonymy: cos + fact count of the other direction.
        g.set_synonymy(a, b, 0.9).unwrap();
        let w = g.edge(ab).unwrap().weight(EdgeWeighting::HippoReference);
        assert!((w - 2.9).abs() < 1e-6, "{w}");
        assert_eq!(g.synonymy_accepted(a), 1);
        assert_eq!(g.synonymy_accepted(b), 0);
        // Mutual synonyms: 2 cos; the fact count is lost.
        g.set_synonymy(b, a, 0.9).unwrap();
        let w = g.edge(ab).unwrap().weight(EdgeWeighting::HippoReference);
        assert!((w - 1.8).abs() < 1e-6, "{w}");
        let w = g.edge(ab).unwrap().weight(EdgeWeighting::HippoClean);
        assert!((w - 2.9).abs() < 1e-6, "{w}");
        let pa = g.edge_between(p, a).unwrap();
        assert_eq!(
            g.edge(pa).unwrap().weight(EdgeWeighting::HippoReference),
            1.0
        );
        let counts = g.counts();
        assert_eq!(counts.edges_of(EdgeKind::Fact), 1);
        assert_eq!(counts.edges_of(EdgeKind::Synonymy), 1);
        assert_eq!(counts.edges_of(EdgeKind::Context), 1);
        assert_eq!(counts.nodes_of(NodeKind::Passage), 1);
        g.remove_fact_chunk(a, b, &c);
        assert!(g.edge_between(a, b).is_some(), "synonymy facet remains");
    }

    #[test]
    fn paths_and_components() {
        // a - b - d, a - c - d, e alone.  Names chosen so that name order differs from index order.
        let mut g = KnowledgeGraph::new();
        let a = g.add_entity("k-a", "a");
        let b = g.add_entity("k-b", "z");
        let c = g.add_entity("k-c", "c");
        let d = g.add_entity("k-d", "d");
        let e = g.add_entity("k-e", "e");
        let r = RelationFacet {
            weight: 1.0,
            ..RelationFacet::default()
        };
        g.upsert_relation(a, b, r.clone()).unwrap();
        g.upsert_relation(b, d, r.clone()).unwrap();
        g.upsert_relation(a, c, r.clone()).unwrap();
        g.upsert_relation(
            c,
            d,
            RelationFacet {
                weight: 5.0,
                ..r.clone()
            },
        )
        .unwrap();
        assert_eq!(
            g.shortest_path(a, d, NeighbourOrder::Index).unwrap(),
            Some(vec![a, b, d])
        );
        assert_eq!(
            g.shortest_path(a, d, NeighbourOrder::Name).unwrap(),
            Some(vec![a, c, d])
        );
        assert_eq!(g.shortest_path(a, e, NeighbourOrder::Name).unwrap(), None);
        let (path, cost) = g
            .cheapest_path(a, d, |e| {
                e.relation.as_ref().map_or(f64::INFINITY, |r| r.weight)
            })
            .unwrap()
            .unwrap();
        assert_eq!(path, vec![a, b, d]);
        assert_eq!(cost, 2.0);
        assert_eq!(g.connected_components(), vec![vec![a, b, c, d], vec![e]]);
        // Zero-cost edges do not make parents cycle.
        let (zpath, zcost) = g
            .cheapest_path(c, b, |e| {
                if e.relation.as_ref().is_some_and(|r| r.weight == 5.0) {
                    0.0
                } else {
                    1.0
                }
            })
            .unwrap()
            .unwrap();
        assert_eq!(zcost, 1.0);
        assert_eq!(zpath.first(), Some(&c));
        assert_eq!(zpath.last(), Some(&b));
        assert_eq!(g.degree(a), 2);
        assert_eq!(g.neighbours(d), vec![b, c]);
        g.remove_node(b);
        assert_eq!(
            g.shortest_path(a, d, NeighbourOrder::Index).unwrap(),
            Some(vec![a, c, d])
        );
        assert_eq!(g.find("k-b"), None);
        assert_eq!(g.find("k-d"), Some(d));
    }
}
