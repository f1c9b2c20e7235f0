//! HippoRAG 2 indexing (spec §4.1–§4.4, §4.6 inserts).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use kgrag_graph_store::hippo::{insert_chunks, phrase_key, sorted_phrases, HippoChunk};
use kgrag_graph_store::synonymy::{add_synonymy_edges, SynonymyStats};
use kgrag_graph_store::{EmbeddingStore, GraphCounts, KnowledgeGraph, NodeIndex, Precision};
use kgrag_types::{ChunkId, Embedder, Extraction, FactId, Triple};
use rayon::prelude::*;

use crate::held::HeldGraph;
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
    /// Seconds per stage, in order: `embed_phrases`, `embed_facts`, `graph`, `synonymy`, `pack_graph`
    /// (`pack_graph` packs the graph and makes the PPR arcs questions walk).
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
/// The graph is held packed, with what questions read of it beside it (see [`graph`](Self::graph)).
#[derive(Debug, Clone)]
pub struct HippoIndex {
    config: HippoConfig,
    graph: HeldGraph,
    passages: Arc<EmbeddingStore>,
    phrases: EmbeddingStore,
    phrase_nodes: Vec<NodeIndex>,
    facts: EmbeddingStore,
    fact_triples: Vec<Triple>,
    /// Each indexed chunk's normalised triples as rows of `facts` / `fact_triples`, in extraction order
    /// (each triple is held once, in `fact_triples`: a copy per chunk cost ~1 MB per 1,000 passages).
    chunk_facts: BTreeMap<ChunkId, Vec<u32>>,
}

/// What one [`HippoIndex::delete`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteStats {
    /// Passages removed from the graph.
    pub passages: usize,
    /// Chunk ids asked for that were not in the index (ignored).
    pub unknown: usize,
    /// Phrases left without any chunk, removed with all their edges.
    pub phrases: usize,
    /// Facts left without any chunk, removed from the fact store.
    pub facts: usize,
    /// Fact edges whose last occurrence went.
    pub fact_edges: usize,
}

/// The parts of a saved index besides the graph and the stores.
#[derive(serde::Deserialize)]
struct SavedMeta {
    config: HippoConfig,
    phrase_nodes: Vec<u32>,
    fact_triples: Vec<Triple>,
    chunk_facts: BTreeMap<ChunkId, Vec<u32>>,
}

/// [`SavedMeta`] as written: the index's parts borrowed, not copied.
#[derive(serde::Serialize)]
struct SavedMetaRef<'a> {
    config: &'a HippoConfig,
    phrase_nodes: Vec<u32>,
    fact_triples: &'a [Triple],
    chunk_facts: &'a BTreeMap<ChunkId, Vec<u32>>,
}

/// The parts of a saved index of meta format 2 (each chunk's triples themselves, not fact rows).
#[derive(serde::Deserialize)]
struct SavedMetaTriples {
    config: HippoConfig,
    phrase_nodes: Vec<u32>,
    fact_triples: Vec<Triple>,
    chunk_triples: BTreeMap<ChunkId, Vec<Triple>>,
}

const META_KIND: &str = "hipporag2-index";
// 3: each chunk's triples as fact rows; 2: as triples, the configuration with `fact_vectors`
// (`SavedMetaTriples`); 1: before `fact_vectors` (read by `legacy`, its facts f32).
const META_FORMAT: u32 = 3;
const META_FORMAT_TRIPLES: u32 = 2;

/// The saved parts of an index written before `fact_vectors` (meta format 1).
mod legacy {
    use std::collections::BTreeMap;

    use kgrag_graph_store::Precision;
    use kgrag_types::{ChunkId, Normalisation, Triple};

    use crate::{FilterMode, GraphWeights, HippoConfig, SeedWeighting};

    pub(super) const META_FORMAT: u32 = 1;

    /// [`HippoConfig`] before `fact_vectors`, field for field.
    #[derive(serde::Deserialize)]
    pub(super) struct Config {
        normalisation: Normalisation,
        drop_empty_phrases: bool,
        seed_weighting: SeedWeighting,
        graph_weights: GraphWeights,
        filter: FilterMode,
        linking_top_k: usize,
        retrieval_top_k: usize,
        qa_top_k: usize,
        passage_node_weight: f64,
        damping: f64,
        ppr_tol: f64,
        ppr_max_iter: usize,
        synonymy_threshold: f32,
        synonymy_knn_k: usize,
        synonymy_max_per_node: usize,
        synonymy_min_alnum: usize,
        llm_temperature: f32,
        max_new_tokens: u32,
        filter_max_tokens: u32,
        query_instruction_fact: String,
        query_instruction_passage: String,
        embed_batch: usize,
    }

    /// `SavedMeta` of format 1.
    #[derive(serde::Deserialize)]
    pub(super) struct SavedMeta {
        config: Config,
        phrase_nodes: Vec<u32>,
        fact_triples: Vec<Triple>,
        chunk_triples: BTreeMap<ChunkId, Vec<Triple>>,
    }

    impl From<SavedMeta> for super::SavedMetaTriples {
        fn from(m: SavedMeta) -> Self {
            let c = m.config;
            Self {
                config: HippoConfig {
                    normalisation: c.normalisation,
                    drop_empty_phrases: c.drop_empty_phrases,
                    seed_weighting: c.seed_weighting,
                    graph_weights: c.graph_weights,
                    filter: c.filter,
                    linking_top_k: c.linking_top_k,
                    retrieval_top_k: c.retrieval_top_k,
                    qa_top_k: c.qa_top_k,
                    passage_node_weight: c.passage_node_weight,
                    damping: c.damping,
                    ppr_tol: c.ppr_tol,
                    ppr_max_iter: c.ppr_max_iter,
                    synonymy_threshold: c.synonymy_threshold,
                    synonymy_knn_k: c.synonymy_knn_k,
                    synonymy_max_per_node: c.synonymy_max_per_node,
                    synonymy_min_alnum: c.synonymy_min_alnum,
                    llm_temperature: c.llm_temperature,
                    max_new_tokens: c.max_new_tokens,
                    filter_max_tokens: c.filter_max_tokens,
                    query_instruction_fact: c.query_instruction_fact,
                    query_instruction_passage: c.query_instruction_passage,
                    embed_batch: c.embed_batch,
                    // Every store written before held f32 vectors.
                    fact_vectors: Precision::F32,
                },
                phrase_nodes: m.phrase_nodes,
                fact_triples: m.fact_triples,
                chunk_triples: m.chunk_triples,
            }
        }
    }
}

/// The files of a saved index inside its folder.
pub const INDEX_FILES: [&str; 4] = ["graph.kg", "phrases.store", "facts.store", "hipporag2.meta"];

impl HippoIndex {
    /// An empty index over `passages` (keys: chunk ids; texts: the passages). Only `config`'s index-time
    /// keys matter here (normalisation, empty phrases, synonymy, embedding batch, the fact store's
    /// precision `fact_vectors`).
    pub fn new(passages: Arc<EmbeddingStore>, config: HippoConfig) -> Self {
        Self {
            graph: HeldGraph::default(),
            passages,
            phrases: EmbeddingStore::new("phrases"),
            phrase_nodes: Vec::new(),
            // A fact's text is its triple rendered: the store keeps keys and vectors only.
            facts: EmbeddingStore::with_precision("facts", config.fact_vectors).without_texts(),
            fact_triples: Vec::new(),
            chunk_facts: BTreeMap::new(),
            config,
        }
    }

    /// Writes the index into the folder `dir` (the files of [`files`](Self::files), each checksummed and
    /// replaced atomically). The passage store is not written: it is shared, and the caller saves it.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|source| {
            HippoError::Store(kgrag_graph_store::StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })
        })?;
        self.graph.get()?.save(&dir.join(INDEX_FILES[0]))?;
        self.phrases.save(&dir.join(INDEX_FILES[1]))?;
        self.facts.save(&dir.join(INDEX_FILES[2]))?;
        let meta = SavedMetaRef {
            config: &self.config,
            phrase_nodes: self.phrase_nodes.iter().map(|n| n.index() as u32).collect(),
            fact_triples: &self.fact_triples,
            chunk_facts: &self.chunk_facts,
        };
        kgrag_graph_store::persist::save(&dir.join(INDEX_FILES[3]), META_KIND, META_FORMAT, &meta)?;
        Ok(())
    }

    /// Reads an index written by [`save`](Self::save) over the shared `passages` store; nothing is
    /// embedded or rebuilt. The parts are checked against each other (row counts, phrase nodes).
    pub fn load(dir: &Path, passages: Arc<EmbeddingStore>) -> Result<Self> {
        let graph = KnowledgeGraph::load(&dir.join(INDEX_FILES[0]))?;
        let phrases = EmbeddingStore::load(&dir.join(INDEX_FILES[1]))?;
        // An index saved with the fact texts: they are the triples rendered, so they are not kept.
        let facts = EmbeddingStore::load(&dir.join(INDEX_FILES[2]))?.without_texts();
        let frame = kgrag_graph_store::persist::read_frame(&dir.join(INDEX_FILES[3]))?;
        frame.expect(
            &[META_KIND],
            &[legacy::META_FORMAT, META_FORMAT_TRIPLES, META_FORMAT],
        )?;
        let corrupt = |reason: String| {
            HippoError::Store(kgrag_graph_store::StoreError::Corrupt {
                path: dir.to_path_buf(),
                reason,
            })
        };
        let meta: SavedMeta = match frame.version() {
            META_FORMAT => frame.decode()?,
            v => {
                let m: SavedMetaTriples = if v == legacy::META_FORMAT {
                    frame.decode::<legacy::SavedMeta>()?.into()
                } else {
                    frame.decode()?
                };
                let chunk_facts = rows_of_triples(&facts, m.chunk_triples).map_err(corrupt)?;
                SavedMeta {
                    config: m.config,
                    phrase_nodes: m.phrase_nodes,
                    fact_triples: m.fact_triples,
                    chunk_facts,
                }
            }
        };
        if let Some((c, row)) = meta.chunk_facts.iter().find_map(|(c, rows)| {
            rows.iter()
                .find(|&&r| r as usize >= meta.fact_triples.len())
                .map(|r| (c, r))
        }) {
            return Err(corrupt(format!(
                "chunk {c} names fact row {row} of {}",
                meta.fact_triples.len()
            )));
        }
        if meta.phrase_nodes.len() != phrases.len() || meta.fact_triples.len() != facts.len() {
            return Err(corrupt(format!(
                "{} phrase nodes for {} phrase rows, {} triples for {} fact rows",
                meta.phrase_nodes.len(),
                phrases.len(),
                meta.fact_triples.len(),
                facts.len()
            )));
        }
        let mut phrase_nodes = Vec::with_capacity(meta.phrase_nodes.len());
        for (row, &n) in meta.phrase_nodes.iter().enumerate() {
            let node = NodeIndex::new(n as usize);
            let key = phrases.key(row).unwrap_or_default();
            if graph.node(node).map(|x| x.key.as_str()) != Some(key) {
                return Err(corrupt(format!(
                    "phrase row {row} ({key}) does not match graph node {n}"
                )));
            }
            phrase_nodes.push(node);
        }
        let graph = HeldGraph::new(&graph, &phrase_nodes, &meta.config)?;
        Ok(Self {
            config: meta.config,
            graph,
            passages,
            phrases,
            phrase_nodes,
            facts,
            fact_triples: meta.fact_triples,
            chunk_facts: meta.chunk_facts,
        })
    }

    /// Keeps the fact vectors (the largest part of the index: ~7.6 MB per 1,000 MuSiQue-sized passages at
    /// 256 dimensions, f16) in unnamed scratch files under `dir` instead of memory, or, with `None`, in
    /// memory. A query screens every fact in memory (their int8 copy) and reads from the file only the
    /// rows the screen cannot decide, so rankings and scores are unchanged. Only an f16 fact store
    /// (`fact_vectors = "f16"`) can: returns whether the vectors are on disk now.
    pub fn set_fact_vectors_dir(&mut self, dir: Option<&Path>) -> Result<bool> {
        match dir {
            Some(dir) if self.facts.precision() == Precision::F16 => {
                self.facts.rows_on_disk(dir)?;
                Ok(true)
            }
            Some(_) => Ok(false),
            None => {
                self.facts.rows_in_memory()?;
                Ok(false)
            }
        }
    }

    /// Keeps the phrase vectors (f32, one row per phrase; no query reads them: an insert scans its new
    /// phrases against them for synonyms) in unnamed scratch files under `dir` (created if missing)
    /// instead of memory, or, with `None`, in memory. Synonymy finds the same pairs either way: the file
    /// holds the same values. The saved index holds them inline either way.
    pub fn set_phrase_vectors_dir(&mut self, dir: Option<&Path>) -> Result<()> {
        match dir {
            Some(dir) => self.phrases.rows_on_disk(dir)?,
            None => self.phrases.rows_in_memory()?,
        }
        Ok(())
    }

    /// The files [`save`](Self::save) writes: [`INDEX_FILES`], and the fact vectors' own file when they
    /// are on disk ([`set_fact_vectors_dir`](Self::set_fact_vectors_dir)).
    pub fn files(&self) -> Vec<String> {
        let mut out: Vec<String> = INDEX_FILES.iter().map(|f| (*f).to_owned()).collect();
        if self.facts.rows_are_on_disk() {
            let rows = EmbeddingStore::rows_path(Path::new(INDEX_FILES[2]));
            out.push(rows.to_string_lossy().into_owned());
        }
        out
    }

    /// Replaces the shared passage store by `passages`, which must hold every indexed passage with the
    /// vectors it had (e.g. the same store after more passages were embedded into it): an insert then
    /// finds the new passages there instead of embedding them again.
    pub fn set_passages(&mut self, passages: Arc<EmbeddingStore>) {
        self.passages = passages;
    }

    /// Every indexed chunk's normalised triples as rows of the fact store ([`fact`](Self::fact)), in
    /// extraction order (a triple a chunk holds twice: its row twice).
    pub fn chunk_facts(&self) -> &BTreeMap<ChunkId, Vec<u32>> {
        &self.chunk_facts
    }

    /// The normalised triples of the indexed chunk `chunk`, in extraction order (`None` when it is not
    /// indexed).
    pub fn chunk_triples<'a>(
        &'a self,
        chunk: &ChunkId,
    ) -> Option<impl Iterator<Item = &'a Triple> + 'a> {
        let rows = self.chunk_facts.get(chunk)?;
        Some(
            rows.iter()
                .filter_map(move |&r| self.fact_triples.get(r as usize)),
        )
    }

    /// Removes chunks (spec §4.6 delete): each passage vertex with its context edges; the chunk's fact
    /// occurrences (fact edges left with no occurrence and no synonymy go); facts no remaining chunk holds
    /// leave the fact store; phrases no remaining chunk holds leave the phrase store and the graph with
    /// all their edges (fact and synonymy). The passage rows leave the index's passage store (the index
    /// continues with its own copy when the store is shared). Unknown ids are ignored and counted.
    /// Retrievers built before keep their snapshot: build new ones afterwards.
    pub fn delete(&mut self, chunks: &[ChunkId]) -> Result<DeleteStats> {
        let mut stats = DeleteStats::default();
        let mut gone: BTreeSet<ChunkId> = BTreeSet::new();
        for c in chunks {
            // Every indexed chunk has a passage node and an entry here (none when it held no triple).
            if self.chunk_facts.contains_key(c) {
                gone.insert(c.clone());
            } else {
                stats.unknown += 1;
            }
        }
        if gone.is_empty() {
            return Ok(stats);
        }
        let mut graph = self.graph.get()?;
        let mut orphan_phrases: BTreeSet<NodeIndex> = BTreeSet::new();
        for c in &gone {
            let mut pairs: BTreeSet<(NodeIndex, NodeIndex)> = BTreeSet::new();
            let mut phrases: BTreeSet<NodeIndex> = BTreeSet::new();
            for t in self.chunk_triples(c).into_iter().flatten() {
                let (Some(s), Some(o)) = (
                    graph.find(&phrase_key(t.subject())),
                    graph.find(&phrase_key(t.object())),
                ) else {
                    continue;
                };
                phrases.insert(s);
                phrases.insert(o);
                if s != o {
                    pairs.insert((s.min(o), s.max(o)));
                }
            }
            for (a, b) in pairs {
                let before = graph.edge_between(a, b).is_some();
                graph.remove_fact_chunk(a, b, c);
                if before && graph.edge_between(a, b).is_none() {
                    stats.fact_edges += 1;
                }
            }
            for p in phrases {
                if graph.remove_source(p, c)? == 0 {
                    orphan_phrases.insert(p);
                }
            }
            if let Some(node) = graph.find(c.as_str()) {
                graph.remove_node(node);
                stats.passages += 1;
            }
        }
        let mut gone_phrase_keys: HashSet<String> = HashSet::new();
        for p in orphan_phrases {
            if let Some(node) = graph.remove_node(p) {
                gone_phrase_keys.insert(node.key);
            }
        }
        stats.phrases = gone_phrase_keys.len();

        let mut chunk_facts = self.chunk_facts.clone();
        for c in &gone {
            chunk_facts.remove(c);
        }
        // Facts in order of first occurrence over the remaining chunks in corpus order (the passage
        // store's row order), as a build without the deleted chunks orders them: a fact first seen in a
        // deleted chunk moves to where it is first seen now.
        let gone_keys: HashSet<&str> = gone.iter().map(ChunkId::as_str).collect();
        let mut corpus_order: Vec<&ChunkId> = Vec::with_capacity(chunk_facts.len());
        let mut placed: HashSet<&ChunkId> = HashSet::new();
        for key in self.passages.keys() {
            if gone_keys.contains(key) {
                continue;
            }
            let Ok(id) = ChunkId::parse(key) else {
                continue;
            };
            if let Some((c, _)) = chunk_facts.get_key_value(&id) {
                if placed.insert(c) {
                    corpus_order.push(c);
                }
            }
        }
        for c in chunk_facts.keys() {
            if placed.insert(c) {
                corpus_order.push(c);
            }
        }
        // Old row → new row of each fact a remaining chunk holds.
        let mut new_row: Vec<Option<u32>> = vec![None; self.fact_triples.len()];
        let mut fact_rows: Vec<usize> = Vec::new();
        for c in corpus_order {
            for &r in chunk_facts.get(c).map_or(&[][..], Vec::as_slice) {
                if let Some(slot @ None) = new_row.get_mut(r as usize) {
                    *slot = Some(fact_row(fact_rows.len()));
                    fact_rows.push(r as usize);
                }
            }
        }
        for rows in chunk_facts.values_mut() {
            for r in rows.iter_mut() {
                *r = new_row.get(*r as usize).copied().flatten().ok_or_else(|| {
                    HippoError::Invalid(format!("fact row {r} is not in the fact store"))
                })?;
            }
        }
        drop(new_row);
        let facts = self.facts.select_rows(&fact_rows)?;
        let fact_triples: Vec<Triple> = fact_rows
            .iter()
            .filter_map(|&r| self.fact_triples.get(r).cloned())
            .collect();
        stats.facts = self.fact_triples.len() - fact_triples.len();

        let mut phrases = self.phrases.clone();
        let phrase_map = phrases.remove_where(|k| gone_phrase_keys.contains(k))?;
        let phrase_nodes: Vec<NodeIndex> = self
            .phrase_nodes
            .iter()
            .zip(&phrase_map)
            .filter(|(_, m)| m.is_some())
            .map(|(n, _)| *n)
            .collect();

        let mut passages = self.passages.as_ref().clone();
        passages.remove_where(|k| gone_keys.contains(k))?;
        let graph = HeldGraph::new(&graph, &phrase_nodes, &self.config)?;

        self.graph = graph;
        self.chunk_facts = chunk_facts;
        self.facts = facts;
        self.fact_triples = fact_triples;
        self.phrases = phrases;
        self.phrase_nodes = phrase_nodes;
        self.passages = Arc::new(passages);
        Ok(stats)
    }

    /// The configuration the index was built with.
    pub fn config(&self) -> &HippoConfig {
        &self.config
    }

    /// The graph, unpacked: a new copy each call (at 30,000 passages a fraction of a second and the
    /// graph's size in memory). The index holds it packed — no question reads the structure — with what
    /// questions read kept beside it: the PPR arcs under its configuration's weighting and solver
    /// settings, each phrase's chunk count, each passage's node and [`graph_counts`](Self::graph_counts).
    pub fn graph(&self) -> Result<KnowledgeGraph> {
        self.graph.get()
    }

    /// The graph's nodes by kind and edges by facet.
    pub fn graph_counts(&self) -> &GraphCounts {
        self.graph.counts()
    }

    /// Bytes the packed graph holds in memory.
    pub fn graph_packed_bytes(&self) -> usize {
        self.graph.packed_len()
    }

    /// The graph as held, with what questions read of it.
    pub(crate) fn held_graph(&self) -> &HeldGraph {
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

    /// The fact store (keys `fact-<md5>` of the rendered triples; it keeps no texts: a row's text is
    /// [`fact`](Self::fact)`(row)` rendered).
    pub fn facts(&self) -> &EmbeddingStore {
        &self.facts
    }

    /// The triple of fact row `row`.
    pub fn fact(&self, row: usize) -> Option<&Triple> {
        self.fact_triples.get(row)
    }

    /// `n(p)`: the number of chunks whose triples contain `phrase` (0 for an unknown phrase).
    pub fn phrase_chunks(&self, phrase: &str) -> usize {
        self.phrases
            .row(&phrase_key(phrase))
            .map_or(0, |row| self.graph.phrase_chunks(row))
    }

    /// Prepares chunks from extractions: `passages` are `(chunk id, passage text)` in corpus order; the raw
    /// triples of each chunk's extraction (none when absent) go through the validity filter and the
    /// configured normalisation.
    pub fn chunks_from_extractions<T: AsRef<str>>(
        &self,
        passages: &[(ChunkId, T)],
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
                    text.as_ref(),
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
    /// synonyms; the graph is then packed. Retrievers built before an insert keep their snapshot: build new
    /// ones afterwards.
    ///
    /// The insert is all or nothing: it works on copies of the stores and the graph and commits them only
    /// when every step succeeded, so a failed embedding call (or any other error) leaves the index as it
    /// was and the same insert can simply be retried. If the passage store is shared (another `Arc` holds
    /// it) and new passages are embedded, the index continues with its own copy.
    pub async fn insert(
        &mut self,
        chunks: &[HippoChunk],
        embedder: &dyn Embedder,
        progress: &mut (dyn IndexProgress + Send),
    ) -> Result<InsertStats> {
        // Only the chunks not in the graph yet are copied; the ones left out count as skipped.
        let fresh: Vec<HippoChunk> = chunks
            .iter()
            .filter(|c| !self.chunk_facts.contains_key(&c.chunk))
            .cloned()
            .collect();
        let known = chunks.len() - fresh.len();
        let mut stats = self.insert_owned(fresh, embedder, progress).await?;
        stats.skipped_chunks += known;
        Ok(stats)
    }

    /// [`insert`](Self::insert) of chunks given by value: they are not copied, and their triples become
    /// the index's (no second copy is held while the stores fill). On an error the index is unchanged, as
    /// with `insert`, but the chunks are gone: a retry prepares them again.
    pub async fn insert_owned(
        &mut self,
        chunks: Vec<HippoChunk>,
        embedder: &dyn Embedder,
        progress: &mut (dyn IndexProgress + Send),
    ) -> Result<InsertStats> {
        let mut stats = InsertStats::default();
        let mut seen = HashSet::new();
        let mut fresh: Vec<HippoChunk> = Vec::with_capacity(chunks.len());
        for c in chunks {
            if self.chunk_facts.contains_key(&c.chunk) || !seen.insert(c.chunk.clone()) {
                stats.skipped_chunks += 1;
            } else {
                fresh.push(c);
            }
        }
        drop(seen);
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
            finish(progress, &mut stats, "embed_passages", t.elapsed());
        }
        drop(passage_items);

        // Phrases, sorted like the reference's np.unique, embedded if new (their md5 keys in parallel).
        let phrase_list = sorted_phrases(fresh.iter());
        let items: Vec<(String, String)> = phrase_list
            .par_iter()
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
        drop(items);
        drop(phrase_list);
        finish(progress, &mut stats, "embed_phrases", t.elapsed());

        // Facts in corpus order of first occurrence (each triple rendered and hashed once, in parallel).
        let triples: Vec<&Triple> = fresh.iter().flat_map(|c| c.triples.iter()).collect();
        let mut rendered: Vec<(String, String)> = triples
            .par_iter()
            .map(|t| {
                let text = t.render();
                (FactId::from_content(&text).as_str().to_owned(), text)
            })
            .collect();
        // Each new fact at its first occurrence (its key and text move out of `rendered`), and the fact
        // row of every triple: a known fact's row, or the row the new fact gets (new facts are appended
        // in order).
        let first_new_fact = self.facts.len();
        let mut first: Vec<usize> = Vec::new();
        let mut triple_rows: Vec<u32> = Vec::with_capacity(rendered.len());
        {
            let mut pending: HashMap<&str, u32> = HashMap::new();
            for (i, (key, _)) in rendered.iter().enumerate() {
                let row = match self.facts.row(key) {
                    Some(row) => row,
                    None => *pending.entry(key).or_insert_with(|| {
                        first.push(i);
                        fact_row(first_new_fact + first.len() - 1)
                    }) as usize,
                };
                triple_rows.push(fact_row(row));
            }
        }
        let fact_items: Vec<(String, String)> = first
            .iter()
            .map(|&i| std::mem::take(&mut rendered[i]))
            .collect();
        drop((rendered, triples));
        stats.new_facts = fact_items.len();
        let t = Instant::now();
        progress.start("embed_facts", fact_items.len());
        let mut facts = self.facts.clone();
        let rows = facts
            .insert(&fact_items, embedder, batch, |n| progress.advance(n))
            .await?;
        if rows
            .iter()
            .enumerate()
            .any(|(j, &row)| row != first_new_fact + j)
        {
            return Err(HippoError::Invalid(
                "the fact store did not append the new facts in order".into(),
            ));
        }
        drop((fact_items, rows));
        finish(progress, &mut stats, "embed_facts", t.elapsed());

        // Graph: phrase nodes, passage nodes, fact and context edges. It is built once the phrases and
        // facts are embedded, not beside them: the two would hold the graph and every fact's key and text
        // at once (at 30,000 synthetic passages ~250 MB together), for ~2 s saved.
        let t = Instant::now();
        progress.start("graph", fresh.len());
        let mut graph = self.graph.get()?;
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
        finish(progress, &mut stats, "graph", t.elapsed());

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
        finish(progress, &mut stats, "synonymy", t.elapsed());

        // The graph packed, with what questions read of it (the PPR arcs among them); the structure goes.
        let t = Instant::now();
        progress.start("pack_graph", 1);
        let graph = HeldGraph::new(&graph, &phrase_nodes, &self.config)?;
        progress.advance(1);
        finish(progress, &mut stats, "pack_graph", t.elapsed());

        // Commit.
        if let Some(store) = passages {
            self.passages = Arc::new(store);
        }
        self.phrases = phrases;
        self.facts = facts;
        // Each new fact's triple moves out of the chunk where it first occurs (`first` is ascending), and
        // every chunk keeps only the rows of its triples.
        self.fact_triples.reserve(first.len());
        let mut next_first = first.iter().copied().peekable();
        let mut offset = 0usize;
        for c in fresh {
            let n = c.triples.len();
            for (k, t) in c.triples.into_iter().enumerate() {
                if next_first.next_if_eq(&(offset + k)).is_some() {
                    self.fact_triples.push(t);
                }
            }
            let rows = triple_rows.get(offset..offset + n).unwrap_or_default();
            self.chunk_facts.insert(c.chunk, rows.to_vec());
            offset += n;
        }
        self.graph = graph;
        self.phrase_nodes = phrase_nodes;
        Ok(stats)
    }
}

/// A fact row as held in [`HippoIndex`]'s chunk lists (a store holds fewer than 2³² rows).
fn fact_row(row: usize) -> u32 {
    u32::try_from(row).unwrap_or(u32::MAX)
}

/// Each chunk's triples as rows of `facts` (keys `fact-<md5>` of the rendered triple): what an index
/// saved with the triples themselves holds. Fails naming a triple without a row.
fn rows_of_triples(
    facts: &EmbeddingStore,
    chunk_triples: BTreeMap<ChunkId, Vec<Triple>>,
) -> std::result::Result<BTreeMap<ChunkId, Vec<u32>>, String> {
    chunk_triples
        .into_iter()
        .map(|(chunk, triples)| {
            let rows = triples
                .iter()
                .map(|t| {
                    facts
                        .row(FactId::from_triple(t).as_str())
                        .map(fact_row)
                        .ok_or_else(|| format!("chunk {chunk}'s triple {t:?} has no fact row"))
                })
                .collect::<std::result::Result<Vec<u32>, String>>()?;
            Ok((chunk, rows))
        })
        .collect()
}

fn finish(
    progress: &mut (dyn IndexProgress + Send),
    stats: &mut InsertStats,
    stage: &str,
    elapsed: std::time::Duration,
) {
    let secs = elapsed.as_secs_f64();
    progress.finish(stage, secs);
    stats.stages.push((stage.to_owned(), secs));
}
