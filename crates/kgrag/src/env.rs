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
    /// The work queue of a build split across machines (`kgrag index --distribute`): chunk extraction
    /// goes to the workers through it (the models of a coordinator are wrapped to send theirs too).
    pub queue: Option<Arc<dyn WorkQueue>>,
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

/// One job for the workers of a distributed build.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// What identifies the job's result (a second job with the same kind and key is the same job).
    pub key: String,
    /// What the job is part of, for progress (`triples`, `passages`, `hirag summaries`, …).
    pub label: String,
    /// What the worker needs to do it.
    pub payload: serde_json::Value,
}

/// A job that failed on every attempt and is parked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FailedJob {
    /// Its kind (`extract`, `embed`, `chat`).
    pub kind: String,
    /// Its label.
    pub label: String,
    /// Its key.
    pub key: String,
    /// The last attempt's error.
    pub error: String,
}

/// The queue a coordinator hands work to, and where the workers leave its results (a database backend;
/// see [`crate::distribute`]).
#[async_trait]
pub trait WorkQueue: Send + Sync {
    /// Queues the jobs of `kind` not queued yet and waits until each is done or parked as failed; returns
    /// the failed ones (each also remembered for [`failed`](Self::failed)).
    async fn run(&self, kind: &str, jobs: Vec<JobSpec>) -> Result<Vec<FailedJob>>;

    /// The vectors the workers stored for `model`, by digest (those found).
    async fn embeddings(
        &self,
        model: &str,
        digests: &[String],
    ) -> Result<std::collections::HashMap<String, Vec<f32>>>;

    /// The chat reply the workers stored under `digest`, if any.
    async fn chat_reply(&self, digest: &str) -> Result<Option<kgrag_types::ChatResponse>>;

    /// Jobs a coordinator keeps queued at once per stage (the stages' concurrency).
    fn in_flight(&self) -> usize;

    /// Texts per embedding job.
    fn embed_batch(&self) -> usize;

    /// Whether a build may commit with failed jobs (`--allow-failed`).
    fn allow_failed(&self) -> bool;

    /// Every job of this build found failed so far.
    fn failed(&self) -> Vec<FailedJob>;

    /// Adds what the workers' models did for this build (calls, tokens, replies they had cached) to
    /// [`usage`](Self::usage).
    fn account(&self, calls: u64, prompt_tokens: u64, completion_tokens: u64, cache_hits: u64);

    /// What the workers' models did for this build, counted as the coordinator's own chat model would
    /// count it (the build's usage per stage).
    fn usage(&self) -> kgrag_llm::UsageReport;

    /// The build committed: the finished jobs go (their results stay in the caches).
    async fn committed(&self) -> Result<()> {
        Ok(())
    }
}
