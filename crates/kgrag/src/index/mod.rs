//! The index API, in the shape of tantivy's: an [`Index`] (cheap to clone, `Send + Sync`) hands out one
//! [`IndexWriter`] at a time and any number of [`IndexReader`]s, whose [`Searcher`]s are immutable
//! snapshots of one committed generation.
//!
//! ```text
//! documents ─▶ IndexWriter ── add_documents / delete_documents / rebuild ──▶ commit() ─▶ generation N
//!                                                                                          │
//!   IndexReader (reload: on commit | manual) ── searcher() ─▶ Searcher = Arc<generation N> ◀┘
//!                                              search / context / answer on &self, from any thread
//! ```
//!
//! - A **generation** holds the documents, the chunks and their passage vectors, and the methods' indexes,
//!   each loaded from the backend the first time a query needs it (a `OnceLock`), then shared by every
//!   searcher of that generation. A retriever (HippoRAG 2's PPR snapshot, HiRAG's mode) is also built once
//!   per generation and strategy.
//! - **One writer**: [`Index::writer`] takes the index's writer lock (a file lock, or PostgreSQL's advisory
//!   lock); a second writer fails at once, naming the holder. Changes are made in the writer's own copy and
//!   become visible only at [`IndexWriter::commit`]; a writer dropped without committing changes nothing.
//! - **Readers never lock**: [`IndexReader::searcher`] clones an `Arc`. With [`ReloadPolicy::OnCommit`] a
//!   commit through any clone of the [`Index`] is seen by the next `searcher()` call; commits by other
//!   processes are picked up by [`IndexReader::reload`]. A searcher taken before a commit keeps answering
//!   from its generation: the local backend keeps the folders of generations still held in this process.
//!
//! ```no_run
//! # async fn demo() -> kgrag::Result<()> {
//! use kgrag::config::Config;
//! use kgrag::documents::SourceDoc;
//! use kgrag::Index;
//!
//! let index = Index::create(std::path::Path::new("my.kgrag"), Config::default())?;
//! let mut writer = index.writer()?;
//! writer.add_documents(vec![SourceDoc::text("note-1", "Ada Lovelace wrote the first program.")]).await?;
//! writer.commit().await?;
//! drop(writer);
//!
//! let reader = index.reader()?;
//! let searcher = reader.searcher();
//! for hit in searcher.search("Who wrote the first program?", "hipporag2", 5).await? {
//!     println!("{:.3} {}", hit.score, hit.text);
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use kgrag_llm::{build_chat, build_embedder, ManagedChatModel, ResponseCache};
use kgrag_text::{Encoding, ExtractiveSummarizer};
use kgrag_types::{ChatModel, Embedder, Extractor};

use crate::config::{Config, ReaderMode};
use crate::index_dir::{self, Manifest, UsageEntry};
use crate::methods::Env;
use crate::storage::{self, IndexStore};
use crate::{KgragError, Result};

mod generation;
mod searcher;
mod writer;

pub(crate) use generation::Generation;
pub use searcher::{IndexReader, PassageHit, QueryAnswer, ReloadPolicy, Searcher};
pub use writer::{ChangeSummary, IndexWriter};

/// Memory the offline reader (HiRAG's and LeanRAG's extractive answers) may keep for sentence vectors
/// between questions: ~40,000 sentences at 384 dimensions, the sentences of the last ~100 HiRAG contexts
/// (each holds some hundreds). Unbounded, the memo grew with every new sentence a server was shown — at
/// 10,000 synthetic passages by ~0.5 MB per HiRAG question, past the build's own peak within 200.
const ANSWER_MEMO_BYTES: usize = 64 << 20;

/// [`ANSWER_MEMO_BYTES`] in sentences of `dim` floats (and ~100 bytes of text and map entry each).
fn answer_memo_sentences(dim: usize) -> usize {
    ANSWER_MEMO_BYTES / (dim.max(1) * std::mem::size_of::<f32>() + 100)
}

/// An index: its configuration, its models and its backend. Cheap to clone (an `Arc`), `Send + Sync`.
/// See the module docs.
#[derive(Clone)]
pub struct Index {
    pub(crate) shared: Arc<Shared>,
}

/// What every clone of an [`Index`], its writer, readers and searchers share.
pub(crate) struct Shared {
    pub(crate) env: Arc<Env>,
    pub(crate) root: Option<PathBuf>,
    pub(crate) store: Option<Arc<dyn IndexStore>>,
    pub(crate) cache: Option<ResponseCache>,
    pub(crate) chat_usage: Option<Arc<dyn ManagedChatModel>>,
    /// The newest generation this process knows (`None`: not loaded yet).
    pub(crate) latest: RwLock<Option<Arc<Generation>>>,
    /// Serialises loading a generation from the backend.
    pub(crate) loading: Mutex<()>,
    /// An [`IndexWriter`] of this index is open in this process.
    pub(crate) writing: AtomicBool,
    /// Generations held by searchers in this process, with their counts: their files are kept.
    pub(crate) live: Arc<Mutex<BTreeMap<u64, usize>>>,
    /// Opened for inspection only (no models).
    pub(crate) inspect_only: bool,
}

/// An embedder and an optional chat model.
type Models = (Arc<dyn Embedder>, Option<Arc<dyn ChatModel>>);

/// How to open or create an [`Index`]: the configuration, and models given instead of the configured ones
/// (tests pass scripted models). Built with [`Index::options`].
#[derive(Default)]
pub struct IndexOptions {
    config: Option<Config>,
    models: Option<Models>,
    extractor: Option<Arc<dyn Extractor>>,
    cache_dir: Option<PathBuf>,
    progress: bool,
    distribute: Option<crate::distribute::DistributeOptions>,
}

impl IndexOptions {
    /// Builds as the coordinator of a build split across machines (`kgrag index --distribute`): what
    /// the models do goes to `kgrag worker`s through the backend's queue (PostgreSQL only); see
    /// [`crate::distribute`].
    pub fn distribute(mut self, options: crate::distribute::DistributeOptions) -> Self {
        self.distribute = Some(options);
        self
    }

    /// The configuration (default: for [`open`](Self::open) the one the index was built with, else
    /// [`Config::default`]). With an existing index, its settings must match the index's.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Uses these models instead of building the configured ones.
    pub fn models(mut self, embedder: Arc<dyn Embedder>, chat: Option<Arc<dyn ChatModel>>) -> Self {
        self.models = Some((embedder, chat));
        self
    }

    /// Uses `extractor` instead of the configured entity–relation extractor.
    pub fn extractor(mut self, extractor: Arc<dyn Extractor>) -> Self {
        self.extractor = Some(extractor);
        self
    }

    /// The cache folder (responses, embeddings, extractions, reports); default: the configuration's
    /// `cache_dir`, else `<index>/cache`, else (in memory) `target/kgrag-cache`.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Reports progress (bars and stage lines through [`crate::progress`]).
    pub fn progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// Opens the committed index in `dir` (an error when there is none). Nothing is loaded until a reader
    /// or a writer asks for it.
    pub fn open(self, dir: &Path) -> Result<Index> {
        let store = storage::for_existing(dir, self.config.as_ref().map(|c| &c.storage))?;
        let manifest = committed_manifest(dir, store.as_ref())?;
        let config = match self.config.clone() {
            Some(c) => c,
            None => {
                let stored = stored_config(store.as_ref(), &manifest)?;
                // The backend's own settings (search, clean-up) as the index was built with them.
                store.adopt_settings(&stored.storage);
                stored
            }
        };
        let index = self.assemble(config, Some(dir), Some(store))?;
        check_compatible(&index.shared.env, &manifest)?;
        Ok(index)
    }

    /// A new index in `dir` (created if missing); an error when `dir` already holds a committed index.
    pub fn create(self, dir: &Path) -> Result<Index> {
        let index = self.open_or_create(dir)?;
        if let Some(m) = index.committed()? {
            return Err(KgragError::Index(format!(
                "{} already holds an index (generation {}): open it, or rebuild it through a writer",
                dir.display(),
                m.generation
            )));
        }
        Ok(index)
    }

    /// The index in `dir`, new or existing, for building: an existing index is replaced by
    /// [`IndexWriter::rebuild`] (its settings may differ); reading it needs matching settings.
    pub fn open_or_create(self, dir: &Path) -> Result<Index> {
        let config = self.config.clone().unwrap_or_default();
        let store = storage::for_build(dir, &config.storage)?;
        self.assemble(config, Some(dir), Some(store))
    }

    /// An index held in memory only (the bench's): commits publish generations to its readers, nothing
    /// is written.
    pub fn in_memory(self) -> Result<Index> {
        let config = self.config.clone().unwrap_or_default();
        self.assemble(config, None, None)
    }

    fn assemble(
        self,
        mut config: Config,
        root: Option<&Path>,
        store: Option<Arc<dyn IndexStore>>,
    ) -> Result<Index> {
        config.validate()?;
        if crate::progress::quiet() {
            config.hirag.log_layers = false;
            config.leanrag.log_layers = false;
        }
        let (cache_dir, embedder, chat, chat_usage, cache) = match self.models {
            Some((embedder, chat)) => {
                let cache_dir = match self.cache_dir {
                    Some(d) => d,
                    None => default_cache_dir(&config, root),
                };
                (cache_dir, embedder, chat, None, None)
            }
            None => {
                let (cache_dir, cache) = open_response_cache(&config, root, self.cache_dir)?;
                let embedder: Arc<dyn Embedder> = build_embedder(&config.embedder, cache.clone())?;
                let chat = match &config.chat {
                    Some(c) => Some(build_chat(c, cache.clone())?),
                    None => None,
                };
                let chat_dyn = chat.clone().map(|c| c as Arc<dyn ChatModel>);
                let usage = chat.map(|c| c as Arc<dyn ManagedChatModel>);
                (cache_dir, embedder, chat_dyn, usage, cache)
            }
        };
        // A coordinator hands what its models do to the workers.
        let queue = match (&self.distribute, &store) {
            (None, _) => None,
            (Some(o), Some(store)) => Some(store.work_queue(o)?),
            (Some(_), None) => {
                return Err(KgragError::Config(
                    "a distributed build needs an index in PostgreSQL ([storage] backend = \"postgres\")"
                        .into(),
                ))
            }
        };
        let (embedder, chat, chat_usage) = match (&queue, &self.distribute) {
            (Some(q), Some(o)) => {
                let queued = chat.map(|c| crate::distribute::QueuedChat::wrap(&c, q.clone()));
                (
                    crate::distribute::QueuedEmbedder::wrap(embedder, q.clone(), o.local_below),
                    queued.clone().map(|c| c as Arc<dyn ChatModel>),
                    queued.map(|c| c as Arc<dyn ManagedChatModel>),
                )
            }
            _ => (embedder, chat, chat_usage),
        };
        // Every chat call is also counted for the request that made it (`crate::usage::counting`).
        let chat = chat.map(crate::usage::ScopedChat::wrap);
        let reader = resolve_reader(config.reader, chat.is_some())?;
        let answer_text = Arc::new(
            ExtractiveSummarizer::new(embedder.clone(), Encoding::O200kBase)
                .with_memo_limit(answer_memo_sentences(embedder.dimension())),
        );
        let env = Env {
            config,
            cache_dir,
            embedder,
            chat,
            reader,
            answer_text,
            progress: self.progress,
            extractor: self.extractor,
            notes: Mutex::new(Vec::new()),
            counts: Mutex::new(BTreeMap::new()),
            store: store
                .clone()
                .map(|s| s as Arc<dyn crate::env::SharedExtractions>),
            queue,
        };
        Ok(Index {
            shared: Arc::new(Shared {
                env: Arc::new(env),
                root: root.map(Path::to_path_buf),
                store,
                cache,
                chat_usage,
                latest: RwLock::new(None),
                loading: Mutex::new(()),
                writing: AtomicBool::new(false),
                live: Arc::new(Mutex::new(BTreeMap::new())),
                inspect_only: false,
            }),
        })
    }
}

impl Index {
    /// Options to open or create an index with (configuration, models, cache folder, progress).
    pub fn options() -> IndexOptions {
        IndexOptions::default()
    }

    /// Opens the committed index in `dir` with the configuration it was built with.
    pub fn open(dir: &Path) -> Result<Index> {
        Self::options().open(dir)
    }

    /// A new index in `dir` with `config`.
    pub fn create(dir: &Path, config: Config) -> Result<Index> {
        Self::options().config(config).create(dir)
    }

    /// A new index held in memory with `config`.
    pub fn in_memory(config: Config) -> Result<Index> {
        Self::options().config(config).in_memory()
    }

    /// The configuration the committed index in `dir` was built with, as its manifest stores it (read
    /// without opening the index or loading a model).
    pub fn built_with(dir: &Path) -> Result<Config> {
        let store = storage::for_existing(dir, None)?;
        let manifest = committed_manifest(dir, store.as_ref())?;
        stored_config(store.as_ref(), &manifest)
    }

    /// Opens the index in `dir` to read what it holds (statistics, graphs) without loading any model:
    /// its embedder is a stand-in with the index's name and dimension that refuses to embed, so queries
    /// and changes fail; every method's index loads as usual.
    pub fn inspect(dir: &Path) -> Result<Index> {
        let store = storage::for_existing(dir, None)?;
        let manifest = committed_manifest(dir, store.as_ref())?;
        let mut config = stored_config(store.as_ref(), &manifest)?;
        store.adopt_settings(&config.storage);
        // No models here: nothing is read or answered.
        config.reader = ReaderMode::None;
        let cache_dir = config.cache_dir_or(&dir.join("cache"));
        let embedder = Arc::new(NoEmbedder {
            name: manifest.embedder.name.clone(),
            dimension: manifest.embedder.dimension,
        });
        let mut index = Self::options()
            .models(embedder, None)
            .cache_dir(cache_dir.clone())
            .assemble(config, Some(dir), Some(store))?;
        if let Some(shared) = Arc::get_mut(&mut index.shared) {
            shared.cache = ResponseCache::open(cache_dir.join("responses.redb")).ok();
            shared.inspect_only = true;
        }
        Ok(index)
    }

    /// The writer: holds the index's writer lock until dropped. A second writer (in this process or
    /// another) fails at once with a message naming the holder.
    pub fn writer(&self) -> Result<IndexWriter> {
        IndexWriter::open(self.shared.clone())
    }

    /// A reader that sees every commit made through this index ([`ReloadPolicy::OnCommit`]); the
    /// committed generation is loaded now when it is not yet.
    pub fn reader(&self) -> Result<IndexReader> {
        self.reader_with(ReloadPolicy::OnCommit)
    }

    /// A reader with the given reload policy.
    pub fn reader_with(&self, policy: ReloadPolicy) -> Result<IndexReader> {
        let generation = self.shared.current()?;
        Ok(IndexReader::new(self.shared.clone(), policy, generation))
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.shared.env.config
    }

    /// The index directory (`None` in memory).
    pub fn root(&self) -> Option<&Path> {
        self.shared.root.as_deref()
    }

    /// The manifest committed in the backend now (`None`: nothing committed, or in memory). Another
    /// process may have committed since this index was opened.
    pub fn committed(&self) -> Result<Option<Manifest>> {
        match &self.shared.store {
            Some(store) => store.committed(),
            None => Ok(None),
        }
    }

    /// Checks the models and the settings in use against an index's manifest: a difference is an error
    /// naming the keys.
    pub fn check_compatible(&self, manifest: &Manifest) -> Result<()> {
        check_compatible(&self.shared.env, manifest)
    }

    /// Notes said once so far (offline fallbacks, failures).
    pub fn notes(&self) -> Vec<String> {
        self.shared.env.notes()
    }

    /// The response cache the models go through (`None`: running without one, or models given).
    pub fn response_cache(&self) -> Option<ResponseCache> {
        self.shared.cache.clone()
    }

    /// The chat model's usage so far (calls, tokens, cache hits; zero without a configured chat model).
    pub fn chat_usage(&self) -> UsageEntry {
        self.shared.usage()
    }

    /// The models and settings the methods build and query with.
    pub fn env(&self) -> &Env {
        &self.shared.env
    }

    /// What building `methods` (empty: `[index] methods`) over `docs` would ask of the chat model —
    /// calls, prompt and completion tokens per stage, and the cost when `[chat]` gives prices — without
    /// calling it. Chunks with triples in `prefilled` (a dataset's OpenIE file) or with an extraction in
    /// the cache folder's store are not counted. See [`crate::estimate`].
    pub fn estimate(
        &self,
        docs: Vec<crate::documents::SourceDoc>,
        methods: &[String],
        prefilled: &std::collections::HashSet<kgrag_types::ChunkId>,
    ) -> Result<crate::estimate::Estimate> {
        let env = &self.shared.env;
        let methods = writer::method_list(env, methods)?;
        // The build's own chunks, as the writer cuts them.
        let (records, chunks, _) = writer::chunk_docs(env, docs, &Default::default())?;
        crate::estimate::estimate(env, &methods, records.len(), &chunks, &|id| {
            prefilled.contains(id)
        })
    }
}

impl Shared {
    pub(crate) fn usage(&self) -> UsageEntry {
        self.chat_usage
            .as_ref()
            .map(|c| {
                let u = c.usage();
                UsageEntry {
                    calls: u.calls,
                    prompt_tokens: u.prompt_tokens,
                    completion_tokens: u.completion_tokens,
                    cache_hits: u.cache_hits,
                    retries: u.retries,
                    failures: u.failures,
                }
            })
            .unwrap_or_default()
    }

    /// The newest generation known here, loading the committed one on first use (an empty generation
    /// when nothing is committed).
    pub(crate) fn current(self: &Arc<Self>) -> Result<Arc<Generation>> {
        if let Some(g) = self.latest_known() {
            return Ok(g);
        }
        self.refresh()
    }

    pub(crate) fn latest_known(&self) -> Option<Arc<Generation>> {
        self.latest.read().ok().and_then(|g| g.clone())
    }

    /// Asks the backend for its committed generation and loads it when it is newer than the newest known
    /// here; returns the newest.
    pub(crate) fn refresh(self: &Arc<Self>) -> Result<Arc<Generation>> {
        let _loading = self
            .loading
            .lock()
            // It guards no data: a load that panicked left nothing half-made behind it.
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let known = self.latest_known();
        let committed = self.store.as_ref().map(|s| s.committed()).transpose()?;
        let newest = match (committed.flatten(), known) {
            (Some(m), Some(k)) if k.number >= m.generation => k,
            (Some(m), _) => Arc::new(Generation::load(self, m)?),
            (None, Some(k)) => k,
            (None, None) => Arc::new(Generation::empty(self)),
        };
        self.publish(newest.clone());
        Ok(newest)
    }

    /// Makes `generation` the newest known, unless a newer one is.
    pub(crate) fn publish(&self, generation: Arc<Generation>) {
        if let Ok(mut latest) = self.latest.write() {
            let newer = latest
                .as_ref()
                .is_none_or(|l| generation.number >= l.number);
            if newer {
                *latest = Some(generation);
            }
        }
    }

    /// The generations held here (their files must stay).
    pub(crate) fn live_generations(&self) -> Vec<u64> {
        self.live
            .lock()
            .map(|l| l.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// Releases the in-process writer flag when dropped.
pub(crate) struct WritingGuard(Arc<Shared>);

impl WritingGuard {
    pub(crate) fn take(shared: &Arc<Shared>) -> Result<Self> {
        if shared.inspect_only {
            return Err(KgragError::Index(
                "this index was opened for inspection only: open it with its models to change it"
                    .into(),
            ));
        }
        if shared
            .writing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(KgragError::Index(format!(
                "{} is being changed by another writer of this process; commit or drop it first",
                shared
                    .store
                    .as_ref()
                    .map_or_else(|| "the in-memory index".to_owned(), |s| s.location())
            )));
        }
        Ok(Self(shared.clone()))
    }
}

impl Drop for WritingGuard {
    fn drop(&mut self) {
        self.0.writing.store(false, Ordering::Release);
    }
}

/// The cache folder of `config` for an index in `root` when none is given: `config.cache_dir`, else
/// `<root>/cache`, else `target/kgrag-cache`.
fn default_cache_dir(config: &Config, root: Option<&Path>) -> PathBuf {
    let fallback = root
        .map(|r| r.join("cache"))
        .unwrap_or_else(|| PathBuf::from("target/kgrag-cache"));
    config.cache_dir_or(&fallback)
}

/// The cache folder of `config` for an index in `root` (`dir`, else `config.cache_dir`, else
/// `<root>/cache`, else `target/kgrag-cache`), created, and the response cache in it. Another process
/// (a running `kgrag index`) may hold the cache: then it says so and goes on without one rather than fail.
pub fn open_response_cache(
    config: &Config,
    root: Option<&Path>,
    dir: Option<PathBuf>,
) -> Result<(PathBuf, Option<ResponseCache>)> {
    let cache_dir = dir.unwrap_or_else(|| default_cache_dir(config, root));
    std::fs::create_dir_all(&cache_dir).map_err(|source| KgragError::Io {
        path: cache_dir.clone(),
        source,
    })?;
    let cache = match ResponseCache::open(cache_dir.join("responses.redb")) {
        Ok(c) => Some(c),
        Err(e) => {
            crate::progress::say(&format!(
                "note: the response cache is in use or unreadable ({e}); running without it"
            ));
            None
        }
    };
    Ok((cache_dir, cache))
}

/// Resolves `reader = "auto"` against the chat model.
pub fn resolve_reader(reader: ReaderMode, has_chat: bool) -> Result<ReaderMode> {
    Ok(match (reader, has_chat) {
        (ReaderMode::Auto, true) | (ReaderMode::Llm, true) => ReaderMode::Llm,
        (ReaderMode::Llm, false) => {
            return Err(KgragError::Config(
                "reader = \"llm\" needs a [chat] model".to_owned(),
            ))
        }
        (ReaderMode::Auto, false) => ReaderMode::Extractive,
        (other, _) => other,
    })
}

/// The committed manifest of the index in `root` (stored by `store`); its absence is an error saying how
/// to build an index.
fn committed_manifest(root: &Path, store: &dyn IndexStore) -> Result<Manifest> {
    store.committed()?.ok_or_else(|| {
        KgragError::Index(format!(
            "no index in {} (nothing committed): build one with `kgrag index <PATH> --index {}`",
            store.location(),
            root.display()
        ))
    })
}

/// The configuration an index was built with, as its manifest stores it.
fn stored_config(store: &dyn IndexStore, manifest: &Manifest) -> Result<Config> {
    serde_json::from_value(manifest.config.clone()).map_err(|e| {
        KgragError::Index(format!(
            "the configuration stored with the index in {} does not parse ({e}); pass --config",
            store.location()
        ))
    })
}

/// Checks `env`'s embedder and settings against an index's manifest.
pub(crate) fn check_compatible(env: &Env, manifest: &Manifest) -> Result<()> {
    let (name, dim) = (
        env.embedder.model_name().to_owned(),
        env.embedder.dimension(),
    );
    if manifest.embedder.name != name || (dim != 0 && manifest.embedder.dimension != dim) {
        return Err(KgragError::Index(format!(
            "the index was built with the embedder {:?} ({} dimensions); the configuration gives {name:?} \
             ({dim} dimensions): query it with its own [embedder], or rebuild with `kgrag index --force`",
            manifest.embedder.name, manifest.embedder.dimension
        )));
    }
    let methods: Vec<&str> = manifest.methods.keys().map(String::as_str).collect();
    let now = crate::methods::settings(&env.config, &methods);
    let diff = index_dir::diff_settings(&manifest.settings, &now);
    if !diff.is_empty() {
        return Err(KgragError::Index(format!(
            "the configuration differs from the one the index was built with in {} setting(s) the index \
             depends on:\n  {}\nuse the index's settings, or rebuild with `kgrag index --force`",
            diff.len(),
            diff.join("\n  ")
        )));
    }
    Ok(())
}

/// The embedder of [`Index::inspect`]: the index's name and dimension, no model.
struct NoEmbedder {
    name: String,
    dimension: usize,
}

#[async_trait::async_trait]
impl Embedder for NoEmbedder {
    fn model_name(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(
        &self,
        _texts: &[String],
        _kind: &kgrag_types::EmbedKind,
    ) -> kgrag_types::Result<kgrag_types::Embeddings> {
        Err(kgrag_types::Error::backend(
            "inspection",
            "this index was opened for inspection only (no embedder loaded)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_shared<T: Send + Sync + Clone>() {}

    #[test]
    fn the_api_types_can_be_shared_between_threads() {
        is_shared::<Index>();
        is_shared::<IndexReader>();
        is_shared::<Searcher>();
        fn is_send<T: Send>() {}
        is_send::<IndexWriter>();
    }
}
