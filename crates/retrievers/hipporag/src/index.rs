//! HippoRAG 2 indexing (spec §4.1–§4.4, §4.6 inserts).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kgrag_graph_store::hippo::{insert_chunks, phrase_key, HippoChunk};
use kgrag_graph_store::synonymy::{add_synonymy_edges, SynonymyStats};
use kgrag_graph_store::{EmbeddingStore, KnowledgeGraph, NodeIndex};
use kgrag_types::{ChunkId, Embedder, Extraction, FactId, Triple};

use crate::{HippoConfig, HippoError, Result};

/// Receives progress while an index is built: one stage at a time.
pub trait IndexProgress {
    /// A stage starts; `total` is its number of work items (0 when unknown).
    fn start(&mut self, stage: &str, total: usize);
    /// `n` more items of the current stage are done.
    fn advance(&mut self, n: usize);
    /// The stage ended after `secs` seconds.
    fn finish(&mut self, stage: &str, secs: f64);
}

/// Progress that goes nowhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl IndexProgress for NoProgress {
    fn start(&mut self, _stage: &str, _total: usize) {}
    fn advance(&mut self, _n: usize) {}
    fn finish(&mut self, _stage: &str, _secs: f64) {}
}

/// What one [`HippoIndex::insert`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InsertStats {
    /// Seconds per stage, in order: `embed_phrases`, `embed_facts`, `graph`, `synonymy`.
    pub stages: Vec<(String, f64)>,
    /// Passages added to the graph.
    pub new_passages: usize,
    /// Chunks skipped because they were already indexed (or repeated in the input).
    pub skipped_chunks: usize,
    /// Phrases embedded.
    pub new_phrases: usize,
    /// Facts embedded.
    pub new_facts: usize,
    /// Fact occurrences added as edges.
    pub fact_occurrences: usize,
    /// Triples with subject = object (not stored as edges).
    pub self_loops: usize,
    /// Passage–phrase links added.
    pub context_links: usize,
    /// Synonymy scan results.
    pub synonymy: SynonymyStats,
}

/// The HippoRAG 2 index: the graph and the phrase and fact stores over a passage store shared with the
/// other methods. Rows of the phrase store map to graph nodes, rows of the fact store to their triples.
#[derive(Debug)]
pub struct HippoIndex {
    config: HippoConfig,
    graph: KnowledgeGraph,
    passages: Arc<EmbeddingStore>,
    phrases: EmbeddingStore,
    phrase_nodes: Vec<NodeIndex>,
    facts: EmbeddingStore,
    fact_triples: Vec<Triple>,
}

impl HippoIndex {
    /// An empty index over `passages` (keys: chunk ids; texts: the passages). Only `config`'s index-time
    /// keys matter here (normalisation, empty phrases, synonymy, embedding batch).
    pub fn new(passages: Arc<EmbeddingStore>, config: HippoConfig) -> Self {
        Self {
            config,
            graph: KnowledgeGraph::new(),
            passages,
            phrases: EmbeddingStore::new("phrases"),
            phrase_nodes: Vec::new(),
            facts: EmbeddingStore::new("facts"),
            fact_triples: Vec::new(),
        }
    }

    /// The configuration the index was built with.
    pub fn config(&self) -> &HippoConfig {
        &self.config
    }

    /// The graph.
    pub fn graph(&self) -> &KnowledgeGraph {
        &self.graph
    }

    /// The shared passage store.
    pub fn passages(&self) -> &Arc<EmbeddingStore> {
        &self.passages
    }

    /// The phrase store (keys `entity-<md5>`, texts the normalised phrases).
    pub fn phrases(&self) -> &EmbeddingStore {
        &self.phrases
    }

    /// The graph node of phrase row `row`.
    pub fn phrase_node(&self, row: usize) -> Option<NodeIndex> {
        self.phrase_nodes.get(row).copied()
    }

    /// The fact store (keys `fact-<md5>`, texts the rendered triples).
    pub fn facts(&self) -> &EmbeddingStore {
        &self.facts
    }

    /// The triple of fact row `row`.
    pub fn fact(&self, row: usize) -> Option<&Triple> {
        self.fact_triples.get(row)
    }

    /// `n(p)`: the number of chunks whose triples contain `phrase` (0 for an unknown phrase).
    pub fn phrase_chunks(&self, phrase: &str) -> usize {
        self.graph
            .find(&phrase_key(phrase))
            .and_then(|n| self.graph.node(n))
            .map_or(0, |node| node.sources.len())
    }

    /// Prepares chunks from extractions: `passages` are `(chunk id, passage text)` in corpus order; the raw
    /// triples of each chunk's extraction (none when absent) go through the validity filter and the
    /// configured normalisation.
    pub fn chunks_from_extractions(
        &self,
        passages: &[(ChunkId, String)],
        extractions: &[Extraction],
    ) -> Vec<HippoChunk> {
        let by_id: HashMap<&ChunkId, &Extraction> =
            extractions.iter().map(|e| (&e.chunk_id, e)).collect();
        passages
            .iter()
            .map(|(id, text)| {
                let raw = by_id.get(id).map_or(&[][..], |e| e.triples.as_slice());
                HippoChunk::from_raw(
                    id.clone(),
                    text,
                    raw,
                    self.config.normalisation,
                    self.config.drop_empty_phrases,
                )
            })
            .collect()
    }

    /// Inserts `chunks` (spec §4.1 steps 3–6 and §4.6): chunks already in the graph are skipped; passages,
    /// phrases and facts not yet in their stores are embedded with `embedder` (the embedder of the passage
    /// store); then passage, phrase, fact and context edges are added and the new phrases scanned for
    /// synonyms. Retrievers built before an insert keep their snapshot: build new ones afterwards.
    ///
    /// The insert is all or nothing: it works on copies of the stores and the graph and commits them only
    /// when every step succeeded, so a failed embedding call (or any other error) leaves the index as it
    /// was and the same insert can simply be retried. If the passage store is shared (another `Arc` holds
    /// it) and new passages are embedded, the index continues with its own copy.
    pub async fn insert(
        &mut self,
        chunks: &[HippoChunk],
        embedder: &dyn Embedder,
        progress: &mut dyn IndexProgress,
    ) -> Result<InsertStats> {
        let mut stats = InsertStats::default();
        let mut seen = HashSet::new();
        let mut fresh: Vec<HippoChunk> = Vec::new();
        for c in chunks {
            if self.graph.find(c.chunk.as_str()).is_some() || !seen.insert(c.chunk.clone()) {
                stats.skipped_chunks += 1;
            } else {
                fresh.push(c.clone());
            }
        }
        if fresh.is_empty() {
            return Ok(stats);
        }
        let batch = self.config.embed_batch.max(1);

        // Passages the shared store does not hold yet (all of them are there when the caller embedded the
        // corpus first, as the bench does).
        let passage_items: Vec<(String, String)> = fresh
            .iter()
            .filter(|c| self.passages.row(c.chunk.as_str()).is_none())
            .map(|c| (c.chunk.as_str().to_owned(), c.text.clone()))
            .collect();
        let mut passages = None;
        if !passage_items.is_empty() {
            let t = Instant::now();
            progress.start("embed_passages", passage_items.len());
            let mut store = self.passages.as_ref().clone();
            store
                .insert(&passage_items, embedder, batch, |n| progress.advance(n))
                .await?;
            passages = Some(store);
            finish(progress, &mut stats, "embed_passages", t);
        }

        // Phrases, sorted like the reference's np.unique, embedded if new.
        let phrase_set: BTreeSet<&str> = fresh
            .iter()
            .flat_map(|c| c.triples.iter())
            .flat_map(|t| [t.subject.as_str(), t.object.as_str()])
            .collect();
        let items: Vec<(String, String)> = phrase_set
            .iter()
            .map(|p| (phrase_key(p), (*p).to_owned()))
            .filter(|(k, _)| self.phrases.row(k).is_none())
            .collect();
        stats.new_phrases = items.len();
        let t = Instant::now();
        progress.start("embed_phrases", items.len());
        let mut phrases = self.phrases.clone();
        phrases
            .insert(&items, embedder, batch, |n| progress.advance(n))
            .await?;
        finish(progress, &mut stats, "embed_phrases", t);

        // Facts in corpus order of first occurrence.
        let mut fact_items: Vec<(String, String)> = Vec::new();
        let mut fact_new: Vec<Triple> = Vec::new();
        let mut pending = HashSet::new();
        for t in fresh.iter().flat_map(|c| c.triples.iter()) {
            let key = FactId::from_triple(t).as_str().to_owned();
            if self.facts.row(&key).is_none() && pending.insert(key.clone()) {
                fact_items.push((key, t.render()));
                fact_new.push(t.clone());
            }
        }
        stats.new_facts = fact_items.len();
        let t = Instant::now();
        progress.start("embed_facts", fact_items.len());
        let mut facts = self.facts.clone();
        facts
            .insert(&fact_items, embedder, batch, |n| progress.advance(n))
            .await?;
        finish(progress, &mut stats, "embed_facts", t);

        // Graph: phrase nodes, passage nodes, fact and context edges.
        let t = Instant::now();
        progress.start("graph", fresh.len());
        let mut graph = self.graph.clone();
        let ins = insert_chunks(&mut graph, &fresh)?;
        progress.advance(fresh.len());
        stats.new_passages = ins.new_passages.len();
        stats.fact_occurrences = ins.fact_occurrences;
        stats.self_loops = ins.self_loops;
        stats.context_links = ins.context_links;
        let first_new_row = self.phrase_nodes.len();
        let mut phrase_nodes = self.phrase_nodes.clone();
        for row in first_new_row..phrases.len() {
            let key = phrases.key(row).unwrap_or_default();
            let node = graph.find(key).ok_or_else(|| {
                HippoError::Invalid(format!(
                    "phrase {:?} has a vector but no graph node",
                    phrases.text(row).unwrap_or_default()
                ))
            })?;
            phrase_nodes.push(node);
        }
        finish(progress, &mut stats, "graph", t);

        // Synonymy edges for the new phrases.
        let t = Instant::now();
        let new_rows: Vec<usize> = (first_new_row..phrases.len()).collect();
        progress.start("synonymy", new_rows.len());
        if let Some(index) = phrases.index() {
            stats.synonymy = add_synonymy_edges(
                &mut graph,
                phrases.texts(),
                &phrase_nodes,
                index,
                &new_rows,
                &self.config.synonymy(),
            )?;
        }
        progress.advance(new_rows.len());
        finish(progress, &mut stats, "synonymy", t);

        // Commit.
        if let Some(store) = passages {
            self.passages = Arc::new(store);
        }
        self.phrases = phrases;
        self.facts = facts;
        self.fact_triples.extend(fact_new);
        self.graph = graph;
        self.phrase_nodes = phrase_nodes;
        Ok(stats)
    }
}

fn finish(progress: &mut dyn IndexProgress, stats: &mut InsertStats, stage: &str, t: Instant) {
    let secs = t.elapsed().as_secs_f64();
    progress.finish(stage, secs);
    stats.stages.push((stage.to_owned(), secs));
}
