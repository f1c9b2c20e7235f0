//! [`Pipeline`]: open or create an index, index documents (chunking → extraction → every enabled method's
//! index), insert and delete documents, and answer queries with any strategy. The bench and the CLI share
//! it; with an index directory every change is committed as a new generation (see [`crate::index_dir`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kgrag_graph_store::EmbeddingStore;
use kgrag_llm::{build_chat, build_embedder, ManagedChatModel, ResponseCache};
use kgrag_openie::{run_extraction, ExtractionStore, RunnerConfig};
use kgrag_text::{Chunker, ChunkerConfig, Encoding, ExtractiveSummarizer};
use kgrag_types::{
    ChatModel, ChunkId, Embedder, Extraction, Extractor, RetrievalRequest, RetrievedContext,
    Retriever,
};
use serde::{Deserialize, Serialize};

use crate::config::{Config, OpenIeMode, ReaderMode};
use crate::documents::SourceDoc;
use crate::index_dir::{self, DocRecord, EmbedderInfo, Manifest, MethodEntry, UsageEntry};
use crate::methods::{self, Change, Corpus, Env, MethodIndex};
use crate::progress::{say, Stages};
use crate::storage::{self, IndexStore, NewGeneration, PassageSearch};
use crate::{KgragError, Result};

/// A chunk id with its text.
/// A chunk of the corpus: its id and its text, shared with the passage store (never held twice).
type Passage = (ChunkId, Arc<str>);

/// One ranked passage of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassageHit {
    /// Rank, from 1.
    pub rank: usize,
    /// The chunk.
    pub chunk_id: ChunkId,
    /// The method's score.
    pub score: f64,
    /// Ids of the documents holding the chunk.
    pub documents: Vec<String>,
    /// The chunk's text.
    pub text: String,
}

/// What [`Pipeline::answer`] returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryAnswer {
    /// The strategy used.
    pub strategy: String,
    /// The question.
    pub question: String,
    /// The reader's answer (`None` with `reader = "none"`).
    pub answer: Option<String>,
    /// The ranked passages.
    pub passages: Vec<PassageHit>,
    /// The full retrieval output (rendered context, entities, paths, stats).
    pub context: RetrievedContext,
    /// Milliseconds in `retrieve` (query embedding included).
    pub retrieve_ms: f64,
    /// Milliseconds in the reader.
    pub answer_ms: f64,
}

/// What an insert or delete did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSummary {
    /// Documents added or removed.
    pub documents: usize,
    /// Documents skipped (already present with the same text) or ids not found.
    pub skipped: Vec<String>,
    /// Chunks added or removed.
    pub chunks: usize,
    /// The generation committed (0 without an index directory).
    pub generation: u64,
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

/// See [`Pipeline::snapshot`].
struct Snapshot {
    documents: Vec<DocRecord>,
    chunks: Vec<Passage>,
    triples: Vec<Extraction>,
    passages: Arc<EmbeddingStore>,
    search: Option<Arc<dyn PassageSearch>>,
    triples_loaded: bool,
    methods: BTreeMap<String, Arc<dyn MethodIndex>>,
    stages: Vec<(String, f64)>,
    llm: BTreeMap<String, UsageEntry>,
}

/// The embedder of [`Pipeline::inspect`]: the index's name and dimension, no model.
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

/// The cache folder of `config` for an index in `root` (`config.cache_dir`, else `<root>/cache`, else
/// `target/kgrag-cache`), created, and the response cache in it. Another process (a running `kgrag index`)
/// may hold the cache: then it says so and goes on without one rather than fail.
pub fn open_response_cache(
    config: &Config,
    root: Option<&Path>,
) -> Result<(PathBuf, Option<ResponseCache>)> {
    let fallback = root
        .map(|r| r.join("cache"))
        .unwrap_or_else(|| PathBuf::from("target/kgrag-cache"));
    let cache_dir = config.cache_dir_or(&fallback);
    std::fs::create_dir_all(&cache_dir).map_err(io(&cache_dir))?;
    let cache = match ResponseCache::open(cache_dir.join("responses.redb")) {
        Ok(c) => Some(c),
        Err(e) => {
            say(&format!(
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

/// An index and the models to build and query it. See the module docs.
pub struct Pipeline {
    env: Env,
    chat_usage: Option<Arc<dyn ManagedChatModel>>,
    cache: Option<ResponseCache>,
    root: Option<PathBuf>,
    store: Option<Arc<dyn IndexStore>>,
    manifest: Option<Manifest>,
    documents: Vec<DocRecord>,
    corpus: Corpus,
    triples_loaded: bool,
    methods: BTreeMap<String, Arc<dyn MethodIndex>>,
    stages: Vec<(String, f64)>,
    llm: BTreeMap<String, UsageEntry>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KgragError + '_ {
    move |source| KgragError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Pipeline {
    /// A pipeline with the models of `config` (embedder and chat model through the response cache in the
    /// cache folder: `config.cache_dir`, else `<root>/cache`, else `target/kgrag-cache`). `root` is the
    /// index directory (none: in memory, as the bench runs). Nothing is read from `root` here: see
    /// [`Pipeline::open`].
    pub fn new(config: Config, root: Option<&Path>, progress: bool) -> Result<Self> {
        let store = root
            .map(|r| storage::for_build(r, &config.storage))
            .transpose()?;
        Self::new_with_store(config, root, store, progress)
    }

    fn new_with_store(
        config: Config,
        root: Option<&Path>,
        store: Option<Arc<dyn IndexStore>>,
        progress: bool,
    ) -> Result<Self> {
        config.validate()?;
        let (cache_dir, cache) = open_response_cache(&config, root)?;
        let embedder = build_embedder(&config.embedder, cache.clone())?;
        let chat = match &config.chat {
            Some(c) => Some(build_chat(c, cache.clone())?),
            None => None,
        };
        let chat_dyn = chat.clone().map(|c| c as Arc<dyn ChatModel>);
        let mut p = Self::assemble(config, cache_dir, embedder, chat_dyn, root, store, progress)?;
        p.chat_usage = chat;
        p.cache = cache;
        Ok(p)
    }

    /// A pipeline with given models (tests use scripted ones); `cache_dir` holds the extraction store and
    /// the report cache.
    pub fn with_models(
        config: Config,
        cache_dir: PathBuf,
        embedder: Arc<dyn Embedder>,
        chat: Option<Arc<dyn ChatModel>>,
        root: Option<&Path>,
        progress: bool,
    ) -> Result<Self> {
        let store = root
            .map(|r| storage::for_build(r, &config.storage))
            .transpose()?;
        Self::assemble(config, cache_dir, embedder, chat, root, store, progress)
    }

    fn assemble(
        mut config: Config,
        cache_dir: PathBuf,
        embedder: Arc<dyn Embedder>,
        chat: Option<Arc<dyn ChatModel>>,
        root: Option<&Path>,
        store: Option<Arc<dyn IndexStore>>,
        progress: bool,
    ) -> Result<Self> {
        config.validate()?;
        if crate::progress::quiet() {
            config.hirag.log_layers = false;
            config.leanrag.log_layers = false;
        }
        let reader = resolve_reader(config.reader, chat.is_some())?;
        let answer_text = Arc::new(ExtractiveSummarizer::new(
            embedder.clone(),
            Encoding::O200kBase,
        ));
        Ok(Self {
            env: Env {
                config,
                cache_dir,
                embedder,
                chat,
                reader,
                answer_text,
                progress,
                extractor: None,
                notes: Mutex::new(Vec::new()),
                counts: Mutex::new(BTreeMap::new()),
                store: store.clone(),
            },
            chat_usage: None,
            cache: None,
            root: root.map(Path::to_path_buf),
            store,
            manifest: None,
            documents: Vec::new(),
            corpus: Corpus {
                chunks: Vec::new(),
                triples: Vec::new(),
                passages: Arc::new(EmbeddingStore::new("passages")),
                search: None,
            },
            triples_loaded: true,
            methods: BTreeMap::new(),
            stages: Vec::new(),
            llm: BTreeMap::new(),
        })
    }

    /// Uses `extractor` instead of the configured entity–relation extractor (tests count its calls).
    pub fn set_extractor(&mut self, extractor: Arc<dyn Extractor>) {
        self.env.extractor = Some(extractor);
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.env.config
    }

    /// The committed manifest (`None` before the first commit or in memory).
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// The documents of the index.
    pub fn documents(&self) -> &[DocRecord] {
        &self.documents
    }

    /// The corpus: chunks, triples, passage vectors.
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    /// Notes said once during this session (offline fallbacks, failures).
    pub fn notes(&self) -> Vec<String> {
        self.env.notes()
    }

    /// Seconds per stage of the last build.
    pub fn stages(&self) -> &[(String, f64)] {
        &self.stages
    }

    /// Model usage per stage (over all builds of the index).
    pub fn llm_usage(&self) -> &BTreeMap<String, UsageEntry> {
        &self.llm
    }

    /// A built or loaded method's index.
    pub fn method_index(&mut self, method: &str) -> Result<Arc<dyn MethodIndex>> {
        self.ensure_method(method)
    }

    /// Opens the index in `root`. With `config` `None` the configuration it was built with is used;
    /// otherwise `config`'s settings must match the index's (embedder, chunking, extraction, every indexed
    /// method's index settings): a difference is an error naming the keys. Nothing is embedded or rebuilt:
    /// the passage store is read now, each method's index when first asked for.
    pub fn open(root: &Path, config: Option<Config>, progress: bool) -> Result<Self> {
        let store = storage::for_existing(root, config.as_ref().map(|c| &c.storage))?;
        let manifest = committed_manifest(root, store.as_ref())?;
        let config = match config {
            Some(c) => c,
            None => {
                let stored = stored_config(store.as_ref(), &manifest)?;
                // The backend's own settings (search, clean-up) as the index was built with them.
                store.adopt_settings(&stored.storage);
                stored
            }
        };
        let mut p = Self::new_with_store(config, Some(root), Some(store), progress)?;
        p.attach(manifest)?;
        Ok(p)
    }

    /// Opens the index in `root` to read what it holds (`kgrag stats`, `kgrag export`) without loading
    /// any model: its embedder is a stand-in with the index's name and dimension that refuses to embed, so
    /// queries, inserts and deletes fail; every method index loads as usual.
    pub fn inspect(root: &Path) -> Result<Self> {
        let store = storage::for_existing(root, None)?;
        let manifest = committed_manifest(root, store.as_ref())?;
        let mut config = stored_config(store.as_ref(), &manifest)?;
        store.adopt_settings(&config.storage);
        // No models here: nothing is read or answered.
        config.reader = ReaderMode::None;
        let cache_dir = config.cache_dir_or(&root.join("cache"));
        let embedder = Arc::new(NoEmbedder {
            name: manifest.embedder.name.clone(),
            dimension: manifest.embedder.dimension,
        });
        let mut p = Self::assemble(
            config,
            cache_dir.clone(),
            embedder,
            None,
            Some(root),
            Some(store),
            false,
        )?;
        p.cache = ResponseCache::open(cache_dir.join("responses.redb")).ok();
        p.attach(manifest)?;
        Ok(p)
    }

    /// [`Pipeline::open`] with models given (tests).
    pub fn open_with_models(
        root: &Path,
        config: Config,
        embedder: Arc<dyn Embedder>,
        chat: Option<Arc<dyn ChatModel>>,
    ) -> Result<Self> {
        let store = storage::for_existing(root, Some(&config.storage))?;
        let manifest = committed_manifest(root, store.as_ref())?;
        let cache = config.cache_dir_or(&root.join("cache"));
        let mut p = Self::assemble(
            config,
            cache,
            embedder,
            chat,
            Some(root),
            Some(store),
            false,
        )?;
        p.attach(manifest)?;
        Ok(p)
    }

    fn attach(&mut self, manifest: Manifest) -> Result<()> {
        self.check_compatible(&manifest)?;
        let Some(store) = self.store.clone() else {
            return Err(KgragError::Index("no index to open".into()));
        };
        let passages = store.passages(&manifest)?;
        let search = store.passage_search(&manifest)?;
        self.corpus = Corpus {
            chunks: passages
                .keys()
                .iter()
                .zip(passages.texts())
                .filter_map(|(k, t)| Some((ChunkId::parse(k).ok()?, t.clone())))
                .collect(),
            triples: Vec::new(),
            passages: Arc::new(passages),
            search,
        };
        self.triples_loaded = false;
        self.documents = manifest.documents.clone();
        self.llm = manifest.llm.clone();
        self.stages = manifest.stages.clone();
        self.manifest = Some(manifest);
        Ok(())
    }

    /// The manifest committed in the index's backend now (`None`: nothing committed, or in memory). Unlike
    /// [`manifest`](Self::manifest) this asks the backend: another process may have committed since.
    pub fn committed(&self) -> Result<Option<Manifest>> {
        match &self.store {
            Some(store) => store.committed(),
            None => Ok(None),
        }
    }

    /// Checks the embedder and the settings against an index's manifest.
    pub fn check_compatible(&self, manifest: &Manifest) -> Result<()> {
        let (name, dim) = (
            self.env.embedder.model_name().to_owned(),
            self.env.embedder.dimension(),
        );
        if manifest.embedder.name != name || (dim != 0 && manifest.embedder.dimension != dim) {
            return Err(KgragError::Index(format!(
                "the index was built with the embedder {:?} ({} dimensions); the configuration gives {name:?} \
                 ({dim} dimensions): query it with its own [embedder], or rebuild with `kgrag index --force`",
                manifest.embedder.name, manifest.embedder.dimension
            )));
        }
        let methods: Vec<&str> = manifest.methods.keys().map(String::as_str).collect();
        let now = settings(&self.env.config, &methods);
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

    /// The response cache the models go through (`None`: running without one).
    pub fn response_cache(&self) -> Option<ResponseCache> {
        self.cache.clone()
    }

    /// The chat model's usage so far in this session (calls, tokens, cache hits; zero without a chat
    /// model): the bench takes differences around each method's questions.
    pub fn chat_usage_now(&self) -> UsageEntry {
        self.usage()
    }

    fn usage(&self) -> UsageEntry {
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

    fn add_usage(&mut self, stage: &str, before: UsageEntry) {
        let used = self.usage().since(&before);
        self.llm.entry(stage.to_owned()).or_default().add(&used);
    }

    fn chunker(&self) -> Result<Chunker> {
        Ok(Chunker::new(self.env.config.index.chunking)?)
    }

    /// Chunks `docs` into records; returns the records and the chunks not yet in `known`, in order. Each
    /// document is dropped once chunked and each chunk's text moved, so that the corpus is never held
    /// twice (as documents and as chunks).
    fn chunk_docs(
        &self,
        docs: Vec<SourceDoc>,
        known: &HashSet<ChunkId>,
    ) -> Result<(Vec<DocRecord>, Vec<Passage>)> {
        let chunker = self.chunker()?;
        let mut records = Vec::with_capacity(docs.len());
        let mut fresh = Vec::new();
        let mut seen: HashSet<ChunkId> = known.clone();
        for d in docs {
            let chunks = chunker
                .chunk(&d.document)
                .map_err(|e| KgragError::Input(format!("{}: chunking failed: {e}", d.source)))?;
            let mut ids = Vec::with_capacity(chunks.len());
            for c in chunks {
                if seen.insert(c.id.clone()) {
                    fresh.push((c.id.clone(), Arc::from(c.text)));
                }
                ids.push(c.id);
            }
            records.push(DocRecord {
                id: d.id,
                doc_id: d.document.id,
                title: d.document.title,
                source: d.source,
                chunks: ids,
            });
        }
        Ok((records, fresh))
    }

    fn needs_triples(&self, methods: &[String]) -> bool {
        methods::registry()
            .iter()
            .any(|m| methods.iter().any(|x| x == m.name()) && m.needs_triples(&self.env.config))
    }

    /// The triples of `chunks`: from `prefilled` (a dataset's OpenIE cache), else the configured
    /// extractor through the resumable extraction store.
    async fn triples_for(
        &self,
        chunks: &[Passage],
        prefilled: &mut HashMap<ChunkId, Extraction>,
    ) -> Result<Vec<Extraction>> {
        let missing: Vec<&Passage> = chunks
            .iter()
            .filter(|(id, _)| !prefilled.contains_key(id))
            .collect();
        if !missing.is_empty() {
            let chat = self.env.chat.clone();
            let extractor: Box<dyn Extractor> = match (self.env.config.openie, chat) {
                (OpenIeMode::CacheOnly, _) => {
                    return Err(KgragError::Config(format!(
                        "{} of {} chunks have no cached OpenIE triples (first: {}); set openie = \"rules\" \
                         (offline), \"llm\" (with a [chat] model) or \"auto\"",
                        missing.len(),
                        chunks.len(),
                        missing[0].0
                    )))
                }
                (OpenIeMode::Rules, _) => Box::new(kgrag_openie::RuleExtractor),
                (OpenIeMode::Llm, Some(chat)) | (OpenIeMode::Auto, Some(chat)) => {
                    Box::new(kgrag_openie::HippoOpenIe::new(chat))
                }
                (OpenIeMode::Llm, None) => {
                    return Err(KgragError::Config(
                        "openie = \"llm\" needs a [chat] model".to_owned(),
                    ))
                }
                (OpenIeMode::Auto, None) => {
                    self.env.note(
                        "no [chat] model configured: running offline — triples and entities by the rule \
                         extractor, summaries and answers extractive",
                    );
                    Box::new(kgrag_openie::RuleExtractor)
                }
            };
            let docs =
                crate::graphs::chunk_passages(missing.iter().copied(), ChunkerConfig::hipporag())?;
            let found = extract_chunks(&self.env, extractor.as_ref(), &docs, "triples").await?;
            for e in found {
                prefilled.entry(e.chunk_id.clone()).or_insert(e);
            }
        }
        Ok(chunks
            .iter()
            .filter_map(|(id, _)| prefilled.get(id).cloned())
            .collect())
    }

    /// `base` with the passages of `fresh` embedded into it (a copy; `base` when nothing is new).
    async fn embed_passages(
        &self,
        base: &Arc<EmbeddingStore>,
        fresh: &[Passage],
        stages: &mut Stages,
    ) -> Result<Arc<EmbeddingStore>> {
        if fresh.is_empty() {
            return Ok(base.clone());
        }
        let t = Instant::now();
        let mut store = base.as_ref().clone();
        let bar = stages.bar(fresh.len(), "embed_passages");
        store
            .insert(
                fresh,
                self.env.embedder.as_ref(),
                self.env.config.hipporag.embed_batch,
                |n| bar.inc(n as u64),
            )
            .await?;
        bar.finish_and_clear();
        stages.record("embed_passages", t.elapsed().as_secs_f64());
        Ok(Arc::new(store))
    }

    /// Builds the index of `docs` from nothing for `methods` (names of [`methods::METHOD_NAMES`]; empty:
    /// `[index] methods`), reusing the caches (finished extractions, embeddings, reports), and commits it
    /// when the pipeline has an index directory. `prefilled` holds triples known already (a dataset's
    /// OpenIE cache), by chunk id.
    pub async fn index(
        &mut self,
        docs: Vec<SourceDoc>,
        methods: &[String],
        prefilled: HashMap<ChunkId, Extraction>,
    ) -> Result<u64> {
        let _lock = self.write_lock()?;
        let saved = self.snapshot();
        let out = self.index_inner(docs, methods, prefilled).await;
        if out.is_err() {
            self.restore(saved);
        }
        out
    }

    async fn index_inner(
        &mut self,
        docs: Vec<SourceDoc>,
        methods: &[String],
        mut prefilled: HashMap<ChunkId, Extraction>,
    ) -> Result<u64> {
        let methods = self.method_list(methods)?;
        self.reset_counts();
        if docs.is_empty() {
            return Err(KgragError::Input("no documents to index".into()));
        }
        let mut stages = Stages::new(self.env.progress, true);
        let t = Instant::now();
        let (records, chunks) = self.chunk_docs(docs, &HashSet::new())?;
        stages.record("chunking", t.elapsed().as_secs_f64());
        say(&format!(
            "{} documents, {} chunks ({})",
            records.len(),
            chunks.len(),
            chunking_name(&self.env.config.index.chunking)
        ));
        let triples = if self.needs_triples(&methods) {
            let before = self.usage();
            let t = Instant::now();
            let tr = self.triples_for(&chunks, &mut prefilled).await?;
            stages.record("extraction", t.elapsed().as_secs_f64());
            self.add_usage("extraction", before);
            tr
        } else {
            Vec::new()
        };
        let empty = Arc::new(EmbeddingStore::new("passages"));
        let passages = self.embed_passages(&empty, &chunks, &mut stages).await?;
        self.corpus = Corpus {
            chunks,
            triples,
            passages,
            search: None,
        };
        self.triples_loaded = true;
        self.documents = records;
        self.methods.clear();
        self.build_methods(&methods, &Change::Full, &mut stages)
            .await?;
        self.stages = stages.into_secs();
        self.commit().await
    }

    fn reset_counts(&self) {
        if let Ok(mut c) = self.env.counts.lock() {
            c.clear();
        }
    }

    fn method_list(&self, methods: &[String]) -> Result<Vec<String>> {
        let asked: Vec<String> = if methods.is_empty() {
            self.env.config.index.methods.clone()
        } else {
            methods.to_vec()
        };
        for m in &asked {
            if !methods::METHOD_NAMES.contains(&m.as_str()) {
                return Err(KgragError::Config(format!(
                    "unknown method {m:?}; methods: {}",
                    methods::METHOD_NAMES.join(", ")
                )));
            }
        }
        if asked.is_empty() {
            return Err(KgragError::Config("no method to index".into()));
        }
        Ok(methods::METHOD_NAMES
            .iter()
            .filter(|m| asked.iter().any(|a| a == *m))
            .map(|m| (*m).to_owned())
            .collect())
    }

    async fn build_methods(
        &mut self,
        methods: &[String],
        change: &Change,
        stages: &mut Stages,
    ) -> Result<()> {
        let mut built: BTreeMap<String, Arc<dyn MethodIndex>> = BTreeMap::new();
        for m in methods::registry() {
            if !methods.iter().any(|x| x == m.name()) {
                continue;
            }
            let previous = self.methods.get(m.name()).cloned();
            let before = self.usage();
            let t = Instant::now();
            let out = m
                .build(&self.env, &self.corpus, &built, previous, change)
                .await?;
            for (stage, secs) in &out.stages {
                stages.record(stage, *secs);
            }
            tracing::info!(
                method = m.name(),
                secs = t.elapsed().as_secs_f64(),
                "method built"
            );
            self.add_usage(m.name(), before);
            built.insert(m.name().to_owned(), Arc::from(out.index));
        }
        self.methods = built;
        Ok(())
    }

    fn ensure_triples(&mut self) -> Result<()> {
        if self.triples_loaded {
            return Ok(());
        }
        let (Some(store), Some(m)) = (&self.store, &self.manifest) else {
            return Ok(());
        };
        self.corpus.triples = store.triples(m)?;
        self.triples_loaded = true;
        Ok(())
    }

    fn ensure_method(&mut self, name: &str) -> Result<Arc<dyn MethodIndex>> {
        if let Some(m) = self.methods.get(name) {
            return Ok(m.clone());
        }
        let (Some(store), Some(manifest)) = (&self.store, &self.manifest) else {
            return Err(KgragError::Config(format!(
                "the {name} index was not built"
            )));
        };
        if !manifest.methods.contains_key(name) {
            return Err(KgragError::Index(format!(
                "the index in {} has no {name} part (it has: {}); add it with `kgrag index … --methods {}`",
                store.location(),
                manifest.methods.keys().cloned().collect::<Vec<_>>().join(", "),
                name
            )));
        }
        let method = methods::registry()
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| KgragError::Config(format!("unknown method {name:?}")))?;
        let index = store.method(manifest, method.as_ref(), &self.env, &self.corpus)?;
        self.methods.insert(name.to_owned(), index.clone());
        Ok(index)
    }

    /// The methods of the index: the committed ones, else (in memory) those built.
    fn indexed_methods(&self) -> Vec<String> {
        match &self.manifest {
            Some(m) => m.methods.keys().cloned().collect(),
            None => self.methods.keys().cloned().collect(),
        }
    }

    fn load_all(&mut self) -> Result<Vec<String>> {
        self.ensure_triples()?;
        let names = self.indexed_methods();
        for n in &names {
            self.ensure_method(n)?;
        }
        // Registry order.
        Ok(methods::METHOD_NAMES
            .iter()
            .filter(|m| names.iter().any(|n| n == *m))
            .map(|m| (*m).to_owned())
            .collect())
    }

    /// Adds documents: new chunks are extracted and embedded, HippoRAG 2 is updated incrementally, HiRAG and
    /// LeanRAG are rebuilt from the stored extractions (reports and summaries reused). A document whose id
    /// is present with the same text is skipped; with another text it is an error (delete it first).
    pub async fn insert(&mut self, docs: Vec<SourceDoc>) -> Result<ChangeSummary> {
        let _lock = self.write_lock()?;
        let saved = self.snapshot();
        let out = self.insert_inner(docs).await;
        if out.is_err() {
            self.restore(saved);
        }
        out
    }

    async fn insert_inner(&mut self, docs: Vec<SourceDoc>) -> Result<ChangeSummary> {
        let methods = self.load_all()?;
        self.reset_counts();
        let mut summary = ChangeSummary::default();
        let by_id: HashMap<&str, &DocRecord> =
            self.documents.iter().map(|d| (d.id.as_str(), d)).collect();
        let mut new_docs = Vec::new();
        for d in docs {
            match by_id.get(d.id.as_str()) {
                Some(old) if old.doc_id == d.document.id => summary.skipped.push(d.id.clone()),
                Some(_) => {
                    return Err(KgragError::Input(format!(
                        "{}: the index already has a document {:?} with another text; `kgrag delete {}` first \
                         (an edit is a delete and an insert)",
                        d.source, d.id, d.id
                    )))
                }
                None => new_docs.push(d),
            }
        }
        if new_docs.is_empty() {
            summary.generation = self.manifest.as_ref().map_or(0, |m| m.generation);
            return Ok(summary);
        }
        let mut stages = Stages::new(self.env.progress, true);
        let known: HashSet<ChunkId> = self
            .corpus
            .chunks
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        let (records, fresh) = self.chunk_docs(new_docs, &known)?;
        if self.needs_triples(&methods) {
            let before = self.usage();
            let t = Instant::now();
            let mut none = HashMap::new();
            let tr = self.triples_for(&fresh, &mut none).await?;
            stages.record("extraction", t.elapsed().as_secs_f64());
            self.add_usage("extraction", before);
            self.corpus.triples.extend(tr);
        }
        let passages = self
            .embed_passages(&self.corpus.passages, &fresh, &mut stages)
            .await?;
        self.corpus.passages = passages;
        self.corpus.chunks.extend(fresh.iter().cloned());
        summary.documents = records.len();
        summary.chunks = fresh.len();
        self.documents.extend(records);
        let change = Change::Insert(fresh.iter().map(|(id, _)| id.clone()).collect());
        self.build_methods(&methods, &change, &mut stages).await?;
        self.stages = stages.into_secs();
        summary.generation = self.commit().await?;
        Ok(summary)
    }

    /// Removes documents by id (the user's id or the content hash): their chunks that no other document
    /// holds leave the passage store and every method (HippoRAG 2 as its spec's delete; HiRAG and LeanRAG
    /// rebuilt). Ids that match nothing are listed in the summary; when none matches it is an error.
    pub async fn delete(&mut self, ids: &[String]) -> Result<ChangeSummary> {
        let _lock = self.write_lock()?;
        let saved = self.snapshot();
        let out = self.delete_inner(ids).await;
        if out.is_err() {
            self.restore(saved);
        }
        out
    }

    async fn delete_inner(&mut self, ids: &[String]) -> Result<ChangeSummary> {
        let methods = self.load_all()?;
        self.reset_counts();
        let mut summary = ChangeSummary::default();
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let (gone, keep): (Vec<DocRecord>, Vec<DocRecord>) =
            self.documents.iter().cloned().partition(|d| {
                wanted.contains(d.id.as_str()) || wanted.contains(d.doc_id.as_str())
            });
        for id in ids {
            if !gone.iter().any(|d| &d.id == id || d.doc_id.as_str() == id) {
                summary.skipped.push(id.clone());
            }
        }
        if gone.is_empty() {
            let sample: Vec<&str> = self
                .documents
                .iter()
                .take(5)
                .map(|d| d.id.as_str())
                .collect();
            return Err(KgragError::Input(format!(
                "no document with the id(s) {}; the index has {} documents (e.g. {})",
                ids.join(", "),
                self.documents.len(),
                sample.join(", ")
            )));
        }
        let still: HashSet<&ChunkId> = keep.iter().flat_map(|d| d.chunks.iter()).collect();
        let removed: BTreeSet<ChunkId> = gone
            .iter()
            .flat_map(|d| d.chunks.iter())
            .filter(|c| !still.contains(c))
            .cloned()
            .collect();
        let mut stages = Stages::new(self.env.progress, true);
        let mut store = self.corpus.passages.as_ref().clone();
        store.remove_where(|k| ChunkId::parse(k).is_ok_and(|c| removed.contains(&c)));
        self.corpus.passages = Arc::new(store);
        self.corpus.chunks.retain(|(id, _)| !removed.contains(id));
        self.corpus
            .triples
            .retain(|e| !removed.contains(&e.chunk_id));
        summary.documents = gone.len();
        summary.chunks = removed.len();
        self.documents = keep;
        let change = Change::Delete(removed.into_iter().collect());
        self.build_methods(&methods, &change, &mut stages).await?;
        self.stages = stages.into_secs();
        summary.generation = self.commit().await?;
        Ok(summary)
    }

    /// The index's writer lock (none in memory).
    fn write_lock(&self) -> Result<Option<storage::WriterLock>> {
        self.store.as_ref().map(|s| s.lock()).transpose()
    }

    /// The in-memory state, to put back when a change fails half-way (the committed generation on disk
    /// is untouched by a failed change).
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            documents: self.documents.clone(),
            chunks: self.corpus.chunks.clone(),
            triples: self.corpus.triples.clone(),
            passages: self.corpus.passages.clone(),
            search: self.corpus.search.clone(),
            triples_loaded: self.triples_loaded,
            methods: self.methods.clone(),
            stages: self.stages.clone(),
            llm: self.llm.clone(),
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.documents = s.documents;
        self.corpus = Corpus {
            chunks: s.chunks,
            triples: s.triples,
            passages: s.passages,
            search: s.search,
        };
        self.triples_loaded = s.triples_loaded;
        self.methods = s.methods;
        self.stages = s.stages;
        self.llm = s.llm;
    }

    /// Writes a new generation and commits it (no-op in memory). Returns the generation.
    async fn commit(&mut self) -> Result<u64> {
        let Some(store) = self.store.clone() else {
            return Ok(0);
        };
        let t = Instant::now();
        let entries = self
            .methods
            .iter()
            .map(|(name, index)| {
                (
                    name.clone(),
                    MethodEntry {
                        files: Vec::new(),
                        stats: index.stats(),
                    },
                )
            })
            .collect();
        let names: Vec<&str> = self.methods.keys().map(String::as_str).collect();
        let settings = settings(&self.env.config, &names);
        let extraction = self
            .env
            .counts
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        let manifest = Manifest {
            format: index_dir::FORMAT,
            kgrag_version: env!("CARGO_PKG_VERSION").to_owned(),
            generation: 0,
            config_hash: index_dir::settings_hash(&settings),
            settings,
            config: serde_json::to_value(&self.env.config)?,
            embedder: EmbedderInfo {
                name: self.env.embedder.model_name().to_owned(),
                dimension: self
                    .corpus
                    .passages
                    .dim()
                    .unwrap_or_else(|| self.env.embedder.dimension()),
            },
            documents: self.documents.clone(),
            chunks: self.corpus.chunks.len(),
            files: Vec::new(),
            methods: entries,
            llm: self.llm.clone(),
            stages: self.stages.clone(),
            extraction,
            notes: self.env.notes(),
        };
        let manifest = store.commit(NewGeneration {
            opened: self.manifest.as_ref().map(|m| m.generation),
            manifest,
            passages: &self.corpus.passages,
            triples: &self.corpus.triples,
            methods: &self.methods,
        })?;
        // Committed: nothing below may turn that into a failure.
        let generation = manifest.generation;
        if let Some(root) = &self.root {
            if let Err(e) = storage::write_pointer(root, store.pointer().as_ref()) {
                say(&format!(
                    "note: could not write {} ({e}); pass the [storage] settings with --config to open                      the index",
                    root.join(storage::POINTER).display()
                ));
            }
        }
        self.corpus.search = match store.passage_search(&manifest) {
            Ok(s) => s,
            Err(e) => {
                say(&format!(
                    "note: the dense strategy searches in memory in this session ({e})"
                ));
                None
            }
        };
        self.manifest = Some(manifest);
        say(&format!(
            "committed generation {generation} to {} ({:.2} s)",
            store.location(),
            t.elapsed().as_secs_f64()
        ));
        Ok(generation)
    }

    /// The index of the method serving `strategy` (loaded on first use).
    fn index_for(&mut self, strategy: &str) -> Result<Arc<dyn MethodIndex>> {
        let method = methods::method_of(strategy).ok_or_else(|| {
            KgragError::Config(format!(
                "unknown strategy {strategy:?}; strategies: {}",
                methods::strategies().join(", ")
            ))
        })?;
        self.ensure_method(method.name())
    }

    /// A retriever for `strategy` (loading its method's index on first use).
    pub fn retriever(&mut self, strategy: &str) -> Result<Box<dyn Retriever>> {
        let index = self.index_for(strategy)?;
        index.retriever(strategy, &self.env, &self.corpus)
    }

    /// The reader's answer to `question` from `ctx` (retrieved with `strategy`).
    pub async fn read(
        &mut self,
        strategy: &str,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>> {
        let index = self.index_for(strategy)?;
        index
            .answer(strategy, &self.env, &self.corpus, question, ctx)
            .await
    }

    /// Retrieves `top_k` passages for `question` with `strategy` and reads the answer.
    pub async fn answer(
        &mut self,
        question: &str,
        strategy: &str,
        top_k: usize,
    ) -> Result<QueryAnswer> {
        let retriever = self.retriever(strategy)?;
        let t = Instant::now();
        let ctx = retriever
            .retrieve(&RetrievalRequest {
                query: question.to_owned(),
                top_k,
            })
            .await
            .map_err(|e| KgragError::Model(format!("{strategy}: retrieval failed: {e}")))?;
        let retrieve_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let answer = self.read(strategy, question, &ctx).await?;
        let answer_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut docs_of: HashMap<&ChunkId, Vec<String>> = HashMap::new();
        for d in &self.documents {
            for c in &d.chunks {
                docs_of.entry(c).or_default().push(d.id.clone());
            }
        }
        let passages = ctx
            .passages
            .iter()
            .take(top_k)
            .enumerate()
            .map(|(i, p)| PassageHit {
                rank: i + 1,
                chunk_id: p.chunk_id.clone(),
                score: p.score,
                documents: docs_of.get(&p.chunk_id).cloned().unwrap_or_default(),
                text: self
                    .corpus
                    .passages
                    .text_of(p.chunk_id.as_str())
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect();
        Ok(QueryAnswer {
            strategy: strategy.to_owned(),
            question: question.to_owned(),
            answer,
            passages,
            context: ctx,
            retrieve_ms,
            answer_ms,
        })
    }

    /// The graph of `method` (default: `hipporag2`, else `hirag`) as GraphML, with the method's name.
    pub fn graphml(&mut self, method: Option<&str>) -> Result<(String, String)> {
        let candidates: Vec<String> = match method {
            Some(m) => vec![m.to_owned()],
            None => {
                let have = self.indexed_methods();
                ["hipporag2", "hirag"]
                    .iter()
                    .filter(|m| have.iter().any(|h| h == *m))
                    .map(|m| (*m).to_owned())
                    .collect()
            }
        };
        for m in &candidates {
            let index = self.ensure_method(m)?;
            if let Some(g) = index.graphml() {
                return Ok((m.clone(), g));
            }
        }
        Err(KgragError::Config(format!(
            "no graph to export{}: GraphML comes from hipporag2 or hirag",
            method.map(|m| format!(" from {m}")).unwrap_or_default()
        )))
    }

    /// Everything `kgrag stats` prints: documents, chunks, per-method statistics, files by part, caches,
    /// model usage per stage.
    pub fn stats(&self) -> Result<serde_json::Value> {
        let Some(m) = &self.manifest else {
            return Err(KgragError::Index("the index is not committed".into()));
        };
        let (parts, storage) = match &self.store {
            Some(store) => (store.sizes(m)?, store.info()),
            None => (BTreeMap::new(), serde_json::Value::Null),
        };
        let (chat_entries, embedding_entries, cache_error) =
            match self.cache.as_ref().map(ResponseCache::entries) {
                Some(Ok((a, b))) => (a, b, None),
                Some(Err(e)) => (0, 0, Some(e.to_string())),
                None => (0, 0, Some("the response cache is not open".to_owned())),
            };
        let extraction_entries = ExtractionStore::open(self.env.cache_dir.join("extractions.redb"))
            .ok()
            .and_then(|s| s.len().ok())
            .unwrap_or(0);
        Ok(serde_json::json!({
            "generation": m.generation,
            "kgrag_version": m.kgrag_version,
            "config_hash": m.config_hash,
            "embedder": m.embedder,
            "documents": m.documents.len(),
            "chunks": m.chunks,
            "methods": m.methods.iter().map(|(k, v)| (k.clone(), v.stats.clone())).collect::<BTreeMap<_, _>>(),
            "bytes_by_part": parts,
            "bytes_total": parts.values().sum::<u64>(),
            "storage": storage,
            "cache": {
                "dir": self.env.cache_dir,
                "chat_replies": chat_entries,
                "embeddings": embedding_entries,
                "extractions": extraction_entries,
                "error": cache_error,
            },
            "llm_by_stage": m.llm,
            "last_build_stages": m.stages,
            "last_build_extraction": m.extraction,
            "notes": m.notes,
        }))
    }
}

fn chunking_name(c: &ChunkerConfig) -> String {
    match c {
        ChunkerConfig::Passage { .. } => "one chunk per document".into(),
        ChunkerConfig::TokenWindow {
            encoding,
            size,
            overlap,
        } => format!("{size}-token windows overlapping by {overlap}, {encoding:?}"),
    }
}

/// The settings an index with `methods` depends on.
pub fn settings(config: &Config, methods: &[&str]) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    // The embedder's keys that change its vectors (not where its files are, its batch or its limits).
    out.insert(
        "embedder".to_owned(),
        methods::json_without(
            &config.embedder,
            &["model_dir", "limits", "batch_size", "api_key_env"],
        ),
    );
    out.insert("chunking".to_owned(), methods::json(&config.index.chunking));
    out.insert("openie".to_owned(), methods::json(&config.openie));
    for m in methods::registry() {
        if methods.contains(&m.name()) {
            out.insert(m.name().to_owned(), m.settings(config));
        }
    }
    out
}

/// Extracts `chunks` with `extractor` through the resumable runner (the extraction store in the cache
/// folder: a finished chunk is never extracted again); chunks that fail get nothing (`what` names it in
/// the note) and a rerun retries them.
pub(crate) async fn extract_chunks(
    env: &Env,
    extractor: &dyn Extractor,
    chunks: &[kgrag_types::Chunk],
    what: &str,
) -> Result<Vec<Extraction>> {
    let store = ExtractionStore::open(env.cache_dir.join("extractions.redb"))?;
    // Extractions another machine finished for this index (a database backend): into the local store
    // first, so that the run reuses them. A failure here only costs extraction work.
    let fingerprint = extractor.fingerprint();
    let mut shared: HashSet<ChunkId> = HashSet::new();
    let backend = env.store.as_ref().filter(|b| b.shares_extractions());
    if let Some(backend) = backend {
        let mut missing = Vec::new();
        for c in chunks {
            if store.get(&fingerprint, &c.id)?.is_none() {
                missing.push(c.id.clone());
            }
        }
        if !missing.is_empty() {
            let pulled = backend
                .shared_extractions(&fingerprint, &missing)
                .and_then(|found| {
                    if !found.is_empty() {
                        store.put_many(&fingerprint, &found)?;
                    }
                    Ok(found)
                });
            match pulled {
                Ok(found) => {
                    if !found.is_empty() {
                        // Counted among `reused` too: the run finds them in the local store.
                        env.count("shared", found.len() as u64);
                    }
                    shared.extend(found.into_iter().map(|x| x.chunk_id));
                }
                Err(e) => env.note(format!(
                    "could not take the extractions shared in {} ({e}); extracting here",
                    backend.location()
                )),
            }
        }
    }
    let (found, summary) = run_extraction(
        extractor,
        chunks,
        &store,
        &RunnerConfig {
            progress: env.progress && !crate::progress::quiet(),
            ..RunnerConfig::default()
        },
    )
    .await?;
    if let Some(backend) = backend {
        // Failed chunks are not in `found`: only finished work is shared (the backend uploads what it
        // lacks).
        let new: Vec<Extraction> = found
            .iter()
            .filter(|x| !shared.contains(&x.chunk_id))
            .cloned()
            .collect();
        if let Err(e) = backend.share_extractions(&fingerprint, &new) {
            env.note(format!(
                "could not share the extractions in {} ({e}); other machines extract them again",
                backend.location()
            ));
        }
    }
    env.count("reused", summary.reused as u64);
    env.count("extracted", summary.extracted as u64);
    env.count("failed", summary.failed.len() as u64);
    say(&format!(
        "extraction ({what}): {} chunks, {} from the store, {} extracted, {} failed",
        summary.chunks,
        summary.reused,
        summary.extracted,
        summary.failed.len()
    ));
    if !summary.failed.is_empty() {
        env.note(format!(
            "extraction failed for {} of {} chunks; they have no {what} (a rerun retries them)",
            summary.failed.len(),
            chunks.len()
        ));
    }
    Ok(found)
}
