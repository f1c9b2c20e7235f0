//! HippoRAG 2 graph construction from per-chunk triples (spec hipporag2 §3, §4.1–§4.2).
//!
//! - [`prepare_triples`]: the validity filter's de-duplication (exact raw duplicates within a chunk, first
//!   occurrence kept) followed by normalisation; two raw triples that normalise to the same triple both stay.
//! - [`insert_chunks`]: for the chunks not yet in the graph, adds the new phrase nodes (sorted by phrase, as
//!   the reference's `np.unique` orders them), then the passage nodes, then one fact occurrence per triple
//!   between subject and object (self-loops skipped and counted) and one context link per passage and unique
//!   phrase. Synonymy edges come afterwards from [`crate::synonymy`], with the phrase embeddings.
//!
//! Phrase node keys are `entity-` + md5(phrase); passage keys are the chunk ids. A phrase node's `sources`
//! are the chunks whose triples contain it: their number is HippoRAG's node-specificity denominator n(p).

use std::collections::{BTreeSet, HashMap, HashSet};

use kgrag_types::{ChunkId, EntityId, Normalisation, Triple};
use petgraph::stable_graph::NodeIndex;

use crate::{KnowledgeGraph, Result};

/// One chunk to insert: id, passage text and its normalised triples (from [`prepare_triples`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HippoChunk {
    /// Chunk id.
    pub chunk: ChunkId,
    /// Passage text.
    pub text: String,
    /// Normalised triples.
    pub triples: Vec<Triple>,
}

impl HippoChunk {
    /// A chunk from its raw (extracted) triples, prepared by [`prepare_triples`].
    pub fn from_raw(
        chunk: ChunkId,
        text: &str,
        raw: &[Triple],
        normalisation: Normalisation,
        drop_empty: bool,
    ) -> Self {
        Self {
            chunk,
            text: text.to_owned(),
            triples: prepare_triples(raw, normalisation, drop_empty),
        }
    }
}

/// De-duplicates raw triples (exact, first kept) and normalises them; with `drop_empty`, triples whose
/// subject or object normalises to `""` are dropped (the reference keeps a `""` phrase node).
pub fn prepare_triples(
    raw: &[Triple],
    normalisation: Normalisation,
    drop_empty: bool,
) -> Vec<Triple> {
    let mut seen = HashSet::new();
    raw.iter()
        .filter(|t| seen.insert(*t))
        .map(|t| t.normalised(normalisation))
        .filter(|t| !drop_empty || (!t.subject().is_empty() && !t.object().is_empty()))
        .collect()
}

/// The distinct phrases (subjects and objects) of `chunks`' triples, sorted as the reference's
/// `np.unique` sorts them: the order phrase nodes are created and phrases embedded in.
pub fn sorted_phrases<'a>(chunks: impl IntoIterator<Item = &'a HippoChunk>) -> Vec<&'a str> {
    let mut phrases: Vec<&str> = chunks
        .into_iter()
        .flat_map(|c| c.triples.iter())
        .flat_map(|t| [t.subject(), t.object()])
        .collect();
    phrases.sort_unstable();
    phrases.dedup();
    phrases
}

/// The node key of a (normalised) phrase.
pub fn phrase_key(phrase: &str) -> String {
    EntityId::from_content(phrase).as_str().to_owned()
}

/// What [`insert_chunks`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HippoInsert {
    /// Phrase nodes created, with their phrase, in creation order (sorted by phrase).
    pub new_phrases: Vec<(String, NodeIndex)>,
    /// Passage nodes created, in input order.
    pub new_passages: Vec<NodeIndex>,
    /// Chunks skipped because their passage was already in the graph.
    pub skipped_chunks: usize,
    /// Fact occurrences added.
    pub fact_occurrences: usize,
    /// Triples whose subject equals their object (not stored).
    pub self_loops: usize,
    /// Passage–phrase links added.
    pub context_links: usize,
}

/// Inserts `chunks` into `graph`. See the module docs.
pub fn insert_chunks(graph: &mut KnowledgeGraph, chunks: &[HippoChunk]) -> Result<HippoInsert> {
    let mut out = HippoInsert::default();
    let mut fresh: Vec<&HippoChunk> = Vec::new();
    let mut seen_chunks = HashSet::new();
    for c in chunks {
        if graph.find(c.chunk.as_str()).is_some() || !seen_chunks.insert(&c.chunk) {
            out.skipped_chunks += 1;
        } else {
            fresh.push(c);
        }
    }
    // The phrases in sorted order (their nodes are created in it), looked up by hash below: a tree
    // compared strings ~20 times per look-up, two look-ups per triple.
    let phrases = sorted_phrases(fresh.iter().copied());
    let mut node_of: HashMap<&str, NodeIndex> = HashMap::with_capacity(phrases.len());
    for p in phrases {
        let key = phrase_key(p);
        let idx = match graph.find(&key) {
            Some(idx) => idx,
            None => {
                let idx = graph.add_entity(&key, p);
                out.new_phrases.push((p.to_owned(), idx));
                idx
            }
        };
        node_of.insert(p, idx);
    }
    let mut passages = Vec::with_capacity(fresh.len());
    for c in &fresh {
        let idx = graph.add_passage(&c.chunk, &c.text);
        out.new_passages.push(idx);
        passages.push(idx);
    }
    // Each phrase's new sources, added at once per phrase below.
    let mut sources: Vec<(NodeIndex, &ChunkId)> = Vec::new();
    for (c, &pnode) in fresh.iter().zip(&passages) {
        let mut linked: BTreeSet<NodeIndex> = BTreeSet::new();
        for t in &c.triples {
            let (Some(&s), Some(&o)) = (node_of.get(t.subject()), node_of.get(t.object())) else {
                continue;
            };
            if graph.add_fact(s, o, &c.chunk)? {
                out.fact_occurrences += 1;
            } else {
                out.self_loops += 1;
            }
            linked.insert(s);
            linked.insert(o);
        }
        for e in linked {
            sources.push((e, &c.chunk));
            graph.add_context(pnode, e)?;
            out.context_links += 1;
        }
    }
    sources.sort_unstable_by_key(|&(node, _)| node);
    for run in sources.chunk_by(|a, b| a.0 == b.0) {
        graph.add_sources(run[0].0, run.iter().map(|&(_, c)| c))?;
    }
    drop(sources);
    graph.shrink_to_fit();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EdgeKind, EdgeWeighting, NodeKind};

    #[test]
    fn builds_nodes_and_edges() {
        let raw = vec![
            Triple::new("Radio City", "located in", "India"),
            Triple::new("Radio City", "located in", "India"),
            Triple::new("radio city!", "located in", "india"),
            Triple::new("India", "is", "INDIA"),
        ];
        let triples = prepare_triples(&raw, Normalisation::Ascii, false);
        assert_eq!(
            triples.len(),
            3,
            "exact duplicate removed, near duplicate kept"
        );
        let chunk = ChunkId::from_content("p1");
        let mut g = KnowledgeGraph::new();
        let ins = insert_chunks(
            &mut g,
            &[HippoChunk {
                chunk: chunk.clone(),
                text: "p1".into(),
                triples,
            }],
        )
        .unwrap();
        assert_eq!(ins.new_phrases.len(), 2);
        assert_eq!(ins.new_phrases[0].0, "india");
        assert_eq!(ins.fact_occurrences, 2);
        assert_eq!(ins.self_loops, 1);
        assert_eq!(ins.context_links, 2);
        let c = g.counts();
        assert_eq!(c.nodes_of(NodeKind::Entity), 2);
        assert_eq!(c.nodes_of(NodeKind::Passage), 1);
        assert_eq!(c.edges_of(EdgeKind::Fact), 1);
        assert_eq!(c.edges_of(EdgeKind::Context), 2);
        assert_eq!(g.node(ins.new_phrases[0].1).unwrap().sources.len(), 1);
        let (a, b) = (ins.new_phrases[0].1, ins.new_phrases[1].1);
        let e = g.edge(g.edge_between(a, b).unwrap()).unwrap();
        assert_eq!(e.weight(EdgeWeighting::HippoReference), 4.0);
        // Re-inserting the same chunk changes nothing.
        let again = insert_chunks(
            &mut g,
            &[HippoChunk {
                chunk,
                text: "p1".into(),
                triples: vec![],
            }],
        )
        .unwrap();
        assert_eq!(again.skipped_chunks, 1);
        assert_eq!(g.counts(), c);
    }
}
