//! The hierarchy value both builders return, and its insertion into the graph store.

use std::collections::BTreeMap;

use kgrag_graph_store::{
    EntityRecord, KnowledgeGraph, NodeIndex, NodeKind as GraphNodeKind, RelationFacet,
};
use kgrag_types::{ChunkId, EntityId};
use serde::{Deserialize, Serialize};

use crate::cluster::StopReason;
use crate::summarize::{Finding, Outcome};
use crate::{HierarchyError, Result};

/// A node's stable identity: its layer and its position in that layer. Names are not identities (two
/// aggregates may share a name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId {
    /// Layer (0 = base entities).
    pub layer: u32,
    /// Position in the layer.
    pub idx: u32,
}

impl NodeId {
    /// The id of position `idx` on `layer`.
    pub fn new(layer: u32, idx: u32) -> Self {
        Self { layer, idx }
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "L{}:{}", self.layer, self.idx)
    }
}

/// What a hierarchy node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HNodeKind {
    /// A base entity (layer 0).
    Base,
    /// HiRAG: an attribute (summary) entity written for a cluster.
    Attribute,
    /// HiRAG: a singleton cluster's member carried up unchanged.
    Carried,
    /// HiRAG: a relation endpoint the summary named but that exists nowhere (type `UNKNOWN`).
    Unknown,
    /// LeanRAG: the aggregate entity of a cluster.
    Aggregate,
    /// LeanRAG: a singleton cluster's member copied up one level.
    Promoted,
    /// LeanRAG: the root aggregate over the last layer.
    Top,
}

impl HNodeKind {
    /// Whether the node is a copy of a node below (its graph node is its origin's).
    pub fn is_copy(self) -> bool {
        matches!(self, HNodeKind::Carried | HNodeKind::Promoted)
    }
}

/// One node of a hierarchy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HNode {
    /// Identity.
    pub id: NodeId,
    /// What it is.
    pub kind: HNodeKind,
    /// The node it stands for: itself, or for a copy the origin of the copied node.
    pub origin: NodeId,
    /// Graph-store key of a base node.
    #[serde(default)]
    pub key: Option<String>,
    /// Name.
    pub name: String,
    /// Entity type.
    pub entity_type: String,
    /// Description.
    pub description: String,
    /// Source chunks (LeanRAG aggregates: the children's, concatenated, so repeats occur).
    pub sources: Vec<ChunkId>,
    /// Number of relations incident to the node's origin (base relations for layer 0).
    pub degree: usize,
    /// Nodes on the layer above made from clusters this node belongs to (several with soft clustering).
    pub parents: Vec<NodeId>,
    /// Members of the cluster this node summarises or copies.
    pub children: Vec<NodeId>,
    /// LeanRAG findings.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// How the node's summary was written (`None` for base nodes, copies and unknown endpoints).
    #[serde(default)]
    pub outcome: Option<Outcome>,
    /// The embedding the next clustering round used (description embedding).
    #[serde(default)]
    pub embedding: Vec<f32>,
}

impl HNode {
    /// A node that stands for itself (its own origin), with no key, sources, links, findings, outcome or
    /// embedding yet.
    pub fn new(
        id: NodeId,
        kind: HNodeKind,
        name: String,
        entity_type: String,
        description: String,
    ) -> Self {
        Self {
            id,
            kind,
            origin: id,
            key: None,
            name,
            entity_type,
            description,
            sources: Vec::new(),
            degree: 0,
            parents: Vec::new(),
            children: Vec::new(),
            findings: Vec::new(),
            outcome: None,
            embedding: Vec::new(),
        }
    }
}

/// What a hierarchy relation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationKind {
    /// A base relation (LeanRAG keeps them to count crossings and build aggregation input).
    Base,
    /// HiRAG: a member → attribute-entity relation written by the summariser.
    Member,
    /// LeanRAG: crossing relations concatenated (λ ≤ τ, or short enough).
    Concat,
    /// LeanRAG: one sentence written by the LLM.
    Llm,
    /// LeanRAG: an extractive summary of the crossing relations (offline, or LLM fallback).
    Extractive,
}

/// A relation between two hierarchy nodes (LeanRAG: between origins; one per unordered pair).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HRelation {
    /// One endpoint.
    pub a: NodeId,
    /// The other endpoint.
    pub b: NodeId,
    /// Level the relation was created for (0 = base).
    pub level: u32,
    /// Description.
    pub description: String,
    /// Weight (HiRAG: the summariser's strength; LeanRAG: 1).
    pub weight: f64,
    /// What it is.
    pub kind: RelationKind,
    /// LeanRAG: λ, the number of stored relations crossing the two clusters (0 otherwise).
    pub crossing: usize,
}

/// What one clustering round saw and did (logged for every round, including the one that stopped).
/// The two timings are left out of equality and serialisation, so a rebuild compares (and saves) equal.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LayerLog {
    /// The layer that was clustered.
    pub layer: u32,
    /// Its node count N.
    pub n: usize,
    /// Mixture components fitted.
    pub k: usize,
    /// BIC's choice.
    pub k_bic: usize,
    /// Non-empty clusters.
    pub clusters: usize,
    /// Sparsity of the clusters.
    pub sparsity: f64,
    /// HiRAG: relative change of sparsity from the previous layer.
    #[serde(default)]
    pub change: Option<f64>,
    /// Dimension after reduction.
    pub reduced_dim: usize,
    /// Component counts the BIC scan tried.
    pub bic_ks: Vec<usize>,
    /// Their BIC values.
    pub bic: Vec<f64>,
    /// Soft assignment: points given their argmax because no posterior passed the threshold.
    pub rescued: usize,
    /// How UMAP started its layout when the reduction was UMAP (spectral, or the PCA fallback).
    // Written even when `None`: the index files are postcard, whose fields are read by position.
    #[serde(default)]
    pub umap_init: Option<crate::umap::UmapInit>,
    /// Seconds spent clustering.
    #[serde(skip)]
    pub cluster_secs: f64,
    /// Seconds spent summarising and embedding the summaries (0 when the round stopped the loop).
    #[serde(skip)]
    pub summary_secs: f64,
    /// Summaries by how they were written.
    pub outcomes: BTreeMap<String, usize>,
}

impl PartialEq for LayerLog {
    fn eq(&self, o: &Self) -> bool {
        (
            self.layer,
            self.n,
            self.k,
            self.k_bic,
            self.clusters,
            self.reduced_dim,
            self.rescued,
        ) == (
            o.layer,
            o.n,
            o.k,
            o.k_bic,
            o.clusters,
            o.reduced_dim,
            o.rescued,
        ) && self.sparsity.to_bits() == o.sparsity.to_bits()
            && self.change.map(f64::to_bits) == o.change.map(f64::to_bits)
            && self.bic_ks == o.bic_ks
            && self.umap_init == o.umap_init
            && self
                .bic
                .iter()
                .map(|b| b.to_bits())
                .eq(o.bic.iter().map(|b| b.to_bits()))
            && self.outcomes == o.outcomes
    }
}

/// Which method built a hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// HiRAG's HiIndex.
    Hirag,
    /// LeanRAG's aggregation tree.
    Leanrag,
}

/// Layers of nodes over a base layer, their links and relations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hierarchy {
    /// The builder.
    pub method: Method,
    /// Nodes per layer; `layers[0]` are the base entities in input order.
    pub layers: Vec<Vec<HNode>>,
    /// Relations in creation order (LeanRAG includes the base relations, merged per pair).
    pub relations: Vec<HRelation>,
    /// One entry per clustering round.
    pub log: Vec<LayerLog>,
    /// Why the layer loop ended.
    pub stop: Option<StopReason>,
    /// LeanRAG's root (the single top node).
    pub root: Option<NodeId>,
}

impl Hierarchy {
    /// A node by id.
    pub fn node(&self, id: NodeId) -> Option<&HNode> {
        self.layers.get(id.layer as usize)?.get(id.idx as usize)
    }

    /// Node count per layer.
    pub fn layer_sizes(&self) -> Vec<usize> {
        self.layers.iter().map(Vec::len).collect()
    }

    /// Nodes above the base layer that are not copies (HiRAG attribute and unknown entities, LeanRAG
    /// aggregates and the root).
    pub fn summary_nodes(&self) -> impl Iterator<Item = &HNode> {
        self.layers
            .iter()
            .skip(1)
            .flatten()
            .filter(|n| !n.kind.is_copy())
    }

    /// The chain of first parents from `id` up to the top (excluding `id`). With hard clustering (LeanRAG)
    /// every node has one parent per level, so this is its ancestor chain.
    pub fn ancestors(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut cur = id;
        while let Some(p) = self.node(cur).and_then(|n| n.parents.first().copied()) {
            out.push(p);
            cur = p;
        }
        out
    }

    /// Writes the hierarchy into `graph`: summary nodes (kind `Summary`, with their layer), HiRAG member
    /// relations as relation facets, LeanRAG membership edges child → parent and inter-aggregate relations
    /// as aggregate facets. A HiRAG graph gets no membership edges: its hierarchy exists in the graph only as
    /// the member → summary relations the summariser wrote (spec hirag §3, §5.5), which is the graph Leiden
    /// and the bridge path see; the parent/children links stay in the [`Hierarchy`]. Base nodes must already be in the graph under their keys; copies map to their
    /// origin's node. A HiRAG attribute entity whose name equals an existing node's name merges into it
    /// (spec hirag §5.5; the node keeps its lower layer); LeanRAG aggregates get keys
    /// `leanrag:L<layer>:<idx>`, so names never merge them.
    pub fn insert_into(&self, graph: &mut KnowledgeGraph) -> Result<GraphLinks> {
        let mut links = GraphLinks {
            nodes: self.layers.iter().map(|l| vec![None; l.len()]).collect(),
            ..GraphLinks::default()
        };
        for layer in &self.layers {
            for node in layer {
                let idx = match node.kind {
                    HNodeKind::Base => {
                        let key = node.key.as_deref().unwrap_or("");
                        graph.find(key).ok_or_else(|| {
                            HierarchyError::Input(format!(
                                "base entity {} ({:?}) has key {key:?}, which is not in the graph",
                                node.id, node.name
                            ))
                        })?
                    }
                    HNodeKind::Carried | HNodeKind::Promoted => {
                        links.get(node.origin).ok_or_else(|| {
                            HierarchyError::Input(format!("copy {} has no origin node", node.id))
                        })?
                    }
                    HNodeKind::Attribute | HNodeKind::Unknown => {
                        let existing = graph.find_by_name(&node.name).first().copied();
                        let key = match existing.and_then(|i| graph.node(i)) {
                            Some(n) if n.kind != GraphNodeKind::Passage => {
                                links.merged += 1;
                                n.key.clone()
                            }
                            _ => {
                                links.added += 1;
                                EntityId::from_content(&node.name).as_str().to_owned()
                            }
                        };
                        graph.upsert_entity(EntityRecord {
                            key,
                            name: node.name.clone(),
                            entity_type: node.entity_type.clone(),
                            description: node.description.clone(),
                            sources: Default::default(),
                            layer: node.id.layer,
                            kind: Some(GraphNodeKind::Summary),
                        })?
                    }
                    HNodeKind::Aggregate | HNodeKind::Top => {
                        links.added += 1;
                        graph.upsert_entity(EntityRecord {
                            key: format!("leanrag:L{}:{}", node.id.layer, node.id.idx),
                            name: node.name.clone(),
                            entity_type: node.entity_type.clone(),
                            description: node.description.clone(),
                            sources: node.sources.iter().cloned().collect(),
                            layer: node.id.layer,
                            kind: Some(GraphNodeKind::Summary),
                        })?
                    }
                };
                let slot = links
                    .nodes
                    .get_mut(node.id.layer as usize)
                    .and_then(|l| l.get_mut(node.id.idx as usize))
                    .ok_or_else(|| {
                        HierarchyError::Input(format!(
                            "node {} ({:?}) is not at its own position in the hierarchy",
                            node.id, node.name
                        ))
                    })?;
                *slot = Some(idx);
            }
        }
        let memberships = if self.method == Method::Leanrag {
            &self.layers[..]
        } else {
            &[]
        };
        for layer in memberships.iter().skip(1) {
            for node in layer {
                let Some(parent) = links.get(node.id) else {
                    continue;
                };
                for &child in &node.children {
                    let Some(c) = links.get(child) else { continue };
                    if c != parent
                        && graph.edge_between(c, parent).is_none_or(|e| {
                            graph
                                .edge(e)
                                .is_some_and(|e| !e.has(kgrag_graph_store::EdgeKind::Membership))
                        })
                    {
                        graph.add_membership(c, parent)?;
                        links.memberships += 1;
                    }
                }
            }
        }
        for r in &self.relations {
            let (Some(a), Some(b)) = (links.get(r.a), links.get(r.b)) else {
                return Err(HierarchyError::Input(format!(
                    "relation {} – {} names a node that does not exist",
                    r.a, r.b
                )));
            };
            if a == b {
                continue;
            }
            let facet = RelationFacet {
                description: r.description.clone(),
                keywords: String::new(),
                weight: r.weight,
                sources: Default::default(),
                order: 1,
            };
            match r.kind {
                RelationKind::Base => {}
                RelationKind::Member => {
                    graph.upsert_relation(a, b, facet)?;
                    links.relations += 1;
                }
                RelationKind::Concat | RelationKind::Llm | RelationKind::Extractive => {
                    graph.upsert_aggregate(a, b, facet)?;
                    links.aggregates += 1;
                }
            }
        }
        Ok(links)
    }
}

/// Where [`Hierarchy::insert_into`] put each node, and what it added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GraphLinks {
    /// Graph node of every hierarchy node, per layer (copies share their origin's node).
    pub nodes: Vec<Vec<Option<NodeIndex>>>,
    /// Summary nodes written under a key of their own (LeanRAG aggregates, new HiRAG attribute entities).
    pub added: usize,
    /// Summary nodes merged into an existing node of the same name (HiRAG).
    pub merged: usize,
    /// Membership edges added.
    pub memberships: usize,
    /// Relation facets written (HiRAG member relations).
    pub relations: usize,
    /// Aggregate facets written (LeanRAG inter-aggregate relations).
    pub aggregates: usize,
}

impl GraphLinks {
    /// The graph node of a hierarchy node.
    pub fn get(&self, id: NodeId) -> Option<NodeIndex> {
        *self.nodes.get(id.layer as usize)?.get(id.idx as usize)?
    }
}
