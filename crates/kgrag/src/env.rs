//! What every method builds and queries with: the models and settings ([`Env`]), the shared corpus
//! ([`Corpus`]), and the two things a method may ask of the index's backend — a search of the passage
//! vectors where they are stored ([`PassageSearch`]) and the extractions shared between machines
//! ([`SharedExtractions`]). The storage backends implement the last two; the methods only see them here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_graph_store::EmbeddingStore;
use kgrag_text::ExtractiveSummarizer;
use kgrag_types::{ChatModel, ChunkId, Embedder, Extraction};

use crate::config::{Config, ReaderMode};
use crate::Result;

/// The models and settings every method builds and queries with.
pub struct Env {
    /// The configuration.
    pub config: Config,
    /// The cache folder (responses, embeddings, extractions, HiRAG reports).
    pub cache_dir: PathBuf,
    /// The shared embedder.
    pub embedder: Arc<dyn Embedder>,
    /// The chat model, if any.
    pub chat: Option<Arc<dyn ChatModel>>,
    /// The reader after resolving `auto`: `llm`, `extractive` or `none`.
    pub reader: ReaderMode,
    /// The offline kit's summariser for extractive answers.
    pub answer_text: Arc<ExtractiveSummarizer>,
    /// Draw progress bars.
    pub progress: bool,
    /// An extractor used instead of the configured entity–relation extractor (tests count its calls).
    pub extractor: Option<Arc<dyn kgrag_types::Extractor>>,
    /// Notes said once (e.g. "no chat model: rule extraction").
    pub notes: std::sync::Mutex<Vec<String>>,
    /// Counts of the current build (`reused`, `extracted`, `failed` extractions).
    pub counts: std::sync::Mutex<BTreeMap<String, u64>>,
    /// The index's backend (none in memory), for the finished extractions it shares between machines.
    pub store: Option<Arc<dyn SharedExtractions>>,
}

impl Env {
    /// Records a note and tells the user, once (repeats are dropped).
    pub fn note(&self, note: impl Into<String>) {
        let note = note.into();
        if let Ok(mut notes) = self.notes.lock() {
            if !notes.contains(&note) {
                crate::progress::say(&format!("note: {note}"));
                notes.push(note);
            }
        }
    }

    /// Adds `n` to the count `name` of the current build.
    pub fn count(&self, name: &str, n: u64) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry(name.to_owned()).or_default() += n;
        }
    }

    /// The notes so far.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }
}

/// The shared part of an index: the chunks every method indexes and their passage vectors.
pub struct Corpus {
    /// `(chunk id, text)` in corpus order, one per distinct chunk; the texts are shared with `passages`.
    pub chunks: Vec<(ChunkId, Arc<str>)>,
    /// The chunks' OpenIE triples (HippoRAG 2's graph, HiRAG's `base = "openie_cache"`), by chunk; empty
    /// when no method needs them. Shared: the writer's copy and the committed generation it hands to
    /// the readers hold one list (a change copies it first).
    pub triples: Arc<Vec<Extraction>>,
    /// The passage store: every chunk embedded once (keys: chunk ids).
    pub passages: Arc<EmbeddingStore>,
    /// The backend's search of the committed passage vectors (PostgreSQL's pgvector), which the dense
    /// strategy uses instead of scanning `passages`; `None`: in memory.
    pub search: Option<Arc<dyn PassageSearch>>,
}

/// The passages nearest a query vector, searched where the vectors are stored.
#[async_trait]
pub trait PassageSearch: Send + Sync {
    /// The `k` passages nearest `query` by cosine, best first, as `(row of the passage store, cosine)`.
    /// `None`: the generation's vectors are no longer in the backend (replaced and removed); the caller
    /// searches its own copy.
    async fn nearest(&self, query: &[f32], k: usize) -> Result<Option<Nearest>>;
}

/// What [`PassageSearch::nearest`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Nearest {
    /// `(row, cosine)`, best first.
    pub hits: Vec<(usize, f64)>,
    /// An exact search's lowest and highest cosine over every passage (the in-memory search's
    /// normalisation); `None` for an approximate one (HNSW).
    pub range: Option<(f64, f64)>,
}

/// Finished extractions shared between the machines that build one index (a database backend), and where
/// the index is, for messages.
pub trait SharedExtractions: Send + Sync {
    /// Where the index is, for messages (never a database URL).
    fn location(&self) -> String;

    /// Whether the backend shares finished extractions between machines (see
    /// [`shared_extractions`](Self::shared_extractions)).
    fn shares_extractions(&self) -> bool {
        false
    }

    /// Finished extractions of `chunks` by the extractor `fingerprint` that the backend shares between
    /// machines (a database; none for files: the cache folder has them). A build on a machine whose
    /// cache lacks them takes them from here instead of extracting again.
    fn shared_extractions(
        &self,
        _fingerprint: &str,
        _chunks: &[kgrag_types::ChunkId],
    ) -> Result<Vec<Extraction>> {
        Ok(Vec::new())
    }

    /// Shares finished extractions (see [`shared_extractions`](Self::shared_extractions)): those of
    /// chunks not shared yet are stored; a chunk already shared keeps its first extraction.
    fn share_extractions(&self, _fingerprint: &str, _found: &[Extraction]) -> Result<()> {
        Ok(())
    }
}
