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

use std::collections::{BTreeSet, HashMap};

use kgrag_types::ChunkId;
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableUnGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences};

use crate::error::invalid;
use crate::{Result, StoreError};

mod io;
mod traverse;
mod types;

pub use types::{
    Edge, EdgeKind, EdgeWeighting, EntityRecord, FactCounts, GraphCounts, NeighbourOrder, Node,
    NodeKind, RelationFacet, SynonymyFacet, DESCRIPTION_SEPARATOR,
};

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

    /// Gives back the room the node and edge lists and the look-up maps grew beyond their contents (a
    /// list doubles as it grows: up to half of a large graph's edge list can be room). Nothing else
    /// changes.
    pub fn shrink_to_fit(&mut self) {
        self.g.shrink_to_fit();
        self.by_key.shrink_to_fit();
        self.by_name.shrink_to_fit();
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

    /// The edge between `a` and `b`, if any. Walks the two endpoints' edge lists in turn, so it costs
    /// at most twice the smaller degree (a walk of `a`'s list alone, as `find_edge` does, costs `a`'s
    /// degree: a frequent phrase's thousands for each fact added to it).
    pub fn edge_between(&self, a: NodeIndex, b: NodeIndex) -> Option<EdgeIndex> {
        let other = |e: &petgraph::stable_graph::EdgeReference<'_, Edge>, of: NodeIndex| {
            if e.source() == of {
                e.target()
            } else {
                e.source()
            }
        };
        let (mut from_a, mut from_b) = (self.g.edges(a), self.g.edges(b));
        loop {
            // An edge between the two is in both lists: the first list to end without it proves it
            // absent.
            let e = from_a.next()?;
            if other(&e, a) == b {
                return Some(e.id());
            }
            let e = from_b.next()?;
            if other(&e, b) == a {
                return Some(e.id());
            }
        }
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

    /// Adds `chunks` to a node's sources at once: linear in the node's sources after sorting `chunks`
    /// (one [`add_source`](Self::add_source) per chunk moves the sorted list each time, quadratic for a
    /// phrase found in many chunks).
    pub fn add_sources<'a>(
        &mut self,
        idx: NodeIndex,
        chunks: impl IntoIterator<Item = &'a ChunkId>,
    ) -> Result<()> {
        let node = self
            .g
            .node_weight_mut(idx)
            .ok_or_else(|| StoreError::UnknownNode(format!("index {}", idx.index())))?;
        node.sources.extend(chunks);
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
        let e = match self.edge_between(a, b) {
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
        self.edge_mut(a, b)?.fact_by_chunk.add(chunk, 1);
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

    fn merge_relation(slot: &mut Option<Box<RelationFacet>>, r: RelationFacet) {
        match slot {
            None => *slot = Some(Box::new(r)),
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
        if let Some(e) = self.edge_between(a, b) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(s: &str) -> ChunkId {
        ChunkId::from_content(s)
    }

    #[test]
    fn edge_between_finds_what_find_edge_finds() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut g = KnowledgeGraph::new();
        let nodes: Vec<NodeIndex> = (0..60)
            .map(|i| g.add_entity(&format!("k{i}"), &format!("n{i}")))
            .collect();
        // Two hubs linked to most nodes, and random pairs.
        let c = chunk("c");
        for &n in &nodes[2..] {
            for hub in [nodes[0], nodes[1]] {
                if rng.gen_bool(0.8) {
                    g.add_fact(hub, n, &c).unwrap();
                }
            }
        }
        for _ in 0..300 {
            let (a, b) = (nodes[rng.gen_range(0..60)], nodes[rng.gen_range(0..60)]);
            g.add_fact(a, b, &c).unwrap();
        }
        g.remove_node(nodes[5]);
        g.remove_node(nodes[1]);
        let mut found = 0;
        for &a in &nodes {
            for &b in &nodes {
                let want = g.g.find_edge(a, b);
                assert_eq!(g.edge_between(a, b), want, "{a:?} {b:?}");
                found += usize::from(want.is_some());
            }
        }
        assert!(found > 200, "{found}");
        // An index past the nodes has no edge.
        assert_eq!(g.edge_between(nodes[0], NodeIndex::new(999)), None);
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
        // Held packed, the graph unpacks equal, its look-ups rebuilt.
        let packed = crate::Packed::new(&g).unwrap();
        let unpacked = packed.get().unwrap();
        assert_eq!(unpacked, g);
        assert_eq!(unpacked.find("entity-4"), g.find("entity-4"));
        assert_eq!(unpacked.find("entity-5"), None);
        assert_eq!(
            postcard::to_stdvec(&unpacked.g).unwrap(),
            postcard::to_stdvec(&g.g).unwrap()
        );
        // A change after the round trip lands where it lands after a save and load.
        let dir = std::env::temp_dir().join(format!("kgrag-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        g.save(&dir.join("g.kg")).unwrap();
        let mut loaded = KnowledgeGraph::load(&dir.join("g.kg")).unwrap();
        let mut rebuilt = back;
        let mut repacked = unpacked;
        for k in 0..6 {
            let a = loaded.add_entity(&format!("entity-new-{k}"), "n");
            let b = rebuilt.add_entity(&format!("entity-new-{k}"), "n");
            let c = repacked.add_entity(&format!("entity-new-{k}"), "n");
            assert_eq!(a, b);
            assert_eq!(a, c);
            loaded.add_fact(a, nodes[0].1, &chunk("x")).unwrap();
            rebuilt.add_fact(b, nodes[0].1, &chunk("x")).unwrap();
            repacked.add_fact(c, nodes[0].1, &chunk("x")).unwrap();
        }
        assert_eq!(loaded, rebuilt);
        assert_eq!(loaded, repacked);
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
            sources: kgrag_types::VecSet::new(),
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
