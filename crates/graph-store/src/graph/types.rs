//! The data on a knowledge graph's nodes and edges: node and edge kinds, edge facets, weightings and
//! counts.

use std::collections::BTreeMap;

use kgrag_types::{ChunkId, VecSet};
use serde::{Deserialize, Serialize};

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
    pub sources: VecSet<ChunkId>,
    /// Hierarchy layer: 0 for passages and base entities, L ≥ 1 for summaries created over layer L − 1.
    pub layer: u32,
    /// Entity-type votes of the merged records, in first-seen order.
    pub(super) type_votes: Vec<(String, u32)>,
}

impl Node {
    pub(super) fn new(key: String, kind: NodeKind, name: String, layer: u32) -> Self {
        Self {
            key,
            kind,
            name,
            entity_type: String::new(),
            description: String::new(),
            sources: VecSet::new(),
            layer,
            type_votes: Vec::new(),
        }
    }
}

/// One record merged into an entity node by [`KnowledgeGraph::upsert_entity`].
///
/// [`KnowledgeGraph::upsert_entity`]: super::KnowledgeGraph::upsert_entity
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
    pub sources: VecSet<ChunkId>,
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
    pub sources: VecSet<ChunkId>,
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

/// Fact occurrences per source chunk, sorted by chunk: a map kept as one array that grows as a `VecSet`
/// does ([`kgrag_types::vecset::reserve_one`]: exactly sized while small — most fact edges have one
/// chunk, and a `BTreeMap` node is ~300 bytes for that one entry). Serialised as a map, the
/// form it had as a `BTreeMap`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FactCounts(Vec<(ChunkId, u32)>);

impl FactCounts {
    /// Adds `n` occurrences from `chunk`.
    pub fn add(&mut self, chunk: &ChunkId, n: u32) {
        match self.0.binary_search_by(|(c, _)| c.cmp(chunk)) {
            Ok(i) => self.0[i].1 = self.0[i].1.saturating_add(n),
            Err(i) => {
                kgrag_types::vecset::reserve_one(&mut self.0);
                self.0.insert(i, (chunk.clone(), n));
            }
        }
    }

    /// Removes `chunk`'s occurrences; returns them (0 when it had none).
    pub fn remove(&mut self, chunk: &ChunkId) -> u32 {
        match self.0.binary_search_by(|(c, _)| c.cmp(chunk)) {
            Ok(i) => {
                let (_, n) = self.0.remove(i);
                self.0.shrink_to_fit();
                n
            }
            Err(_) => 0,
        }
    }

    /// Occurrences from `chunk` (0 when none).
    pub fn get(&self, chunk: &ChunkId) -> u32 {
        self.0
            .binary_search_by(|(c, _)| c.cmp(chunk))
            .map_or(0, |i| self.0[i].1)
    }

    /// Total occurrences over all chunks.
    pub fn total(&self) -> u32 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    /// Whether no chunk contributed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many chunks contributed.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `(chunk, occurrences)` in chunk order.
    pub fn iter(&self) -> impl Iterator<Item = (&ChunkId, u32)> + '_ {
        self.0.iter().map(|(c, n)| (c, *n))
    }
}

impl Serialize for FactCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(c, n)| (c, n)))
    }
}

impl<'de> Deserialize<'de> for FactCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<ChunkId, u32>::deserialize(d)?;
        let mut v = Vec::with_capacity(map.len());
        v.extend(map);
        Ok(Self(v))
    }
}

/// An edge's data: one optional facet per kind of link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// HippoRAG fact occurrences per source chunk (a triple counted once per occurrence).
    pub fact_by_chunk: FactCounts,
    /// Passage–entity link.
    pub context: bool,
    /// Synonymy cosines.
    pub synonymy: Option<SynonymyFacet>,
    /// Extracted relation (boxed: most edges of a HippoRAG graph carry none, and an inline facet would
    /// make every edge ~150 bytes larger).
    pub relation: Option<Box<RelationFacet>>,
    /// Cluster membership.
    pub membership: bool,
    /// Aggregated relation (boxed, as `relation`).
    pub aggregate: Option<Box<RelationFacet>>,
}

impl Edge {
    /// Total fact occurrences over all chunks.
    pub fn fact_count(&self) -> u32 {
        self.fact_by_chunk.total()
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

    pub(super) fn is_empty(&self) -> bool {
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
