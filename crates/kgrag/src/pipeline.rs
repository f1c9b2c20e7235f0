//! [`Pipeline`]: a one-owner convenience over the index API for scripts and tests — an [`Index`], a
//! [`Searcher`] pinned to the generation it last opened or committed, and a writer taken for each change
//! (so another process may change the index between two calls). Servers and threads use [`Index`],
//! [`IndexWriter`](crate::IndexWriter) and [`Searcher`] directly.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kgrag_llm::ResponseCache;
use kgrag_types::{
    ChatModel, ChunkId, Embedder, Extraction, Extractor, RetrievedContext, Retriever,
};

use crate::config::Config;
use crate::documents::SourceDoc;
pub use crate::index::{ChangeSummary, PassageHit, QueryAnswer};
use crate::index::{Index, IndexOptions, ReloadPolicy, Searcher};
use crate::index_dir::{DocRecord, Manifest, UsageEntry};
use crate::methods::{Corpus, MethodIndex};
use crate::{KgragError, Result};

/// An index and a searcher on its newest generation. See the module docs.
pub struct Pipeline {
    index: Index,
    searcher: Option<Searcher>,
}

impl Pipeline {
    /// A pipeline to build the index in `root` (in memory with `None`) with the models of `config`.
    pub fn new(config: Config, root: Option<&Path>, progress: bool) -> Result<Self> {
        Self::building(Index::options().config(config).progress(progress), root)
    }

    /// [`Pipeline::new`] with given models (tests use scripted ones); `cache_dir` holds the extraction
    /// store and the report cache.
    pub fn with_models(
        config: Config,
        cache_dir: PathBuf,
        embedder: Arc<dyn Embedder>,
        chat: Option<Arc<dyn ChatModel>>,
        root: Option<&Path>,
        progress: bool,
    ) -> Result<Self> {
        let options = Index::options()
            .config(config)
            .models(embedder, chat)
            .cache_dir(cache_dir)
            .progress(progress);
        Self::building(options, root)
    }

    fn building(options: IndexOptions, root: Option<&Path>) -> Result<Self> {
        let index = match root {
            Some(r) => options.open_or_create(r)?,
            None => options.in_memory()?,
        };
        Ok(Self {
            index,
            searcher: None,
        })
    }

    /// Opens the index in `root` (with `config` `None`, the configuration it was built with; otherwise
    /// `config`'s settings must match the index's) and loads its passage store.
    pub fn open(root: &Path, config: Option<Config>, progress: bool) -> Result<Self> {
        let mut options = Index::options().progress(progress);
        if let Some(c) = config {
            options = options.config(c);
        }
        Self::opened(options.open(root)?)
    }

    /// [`Pipeline::open`] with models given (tests).
    pub fn open_with_models(
        root: &Path,
        config: Config,
        embedder: Arc<dyn Embedder>,
        chat: Option<Arc<dyn ChatModel>>,
    ) -> Result<Self> {
        let cache = config.cache_dir_or(&root.join("cache"));
        let index = Index::options()
            .config(config)
            .models(embedder, chat)
            .cache_dir(cache)
            .open(root)?;
        Self::opened(index)
    }

    /// Opens the index in `root` without models (see [`Index::inspect`]).
    pub fn inspect(root: &Path) -> Result<Self> {
        Self::opened(Index::inspect(root)?)
    }

    fn opened(index: Index) -> Result<Self> {
        let searcher = index.reader_with(ReloadPolicy::Manual)?.searcher();
        Ok(Self {
            index,
            searcher: Some(searcher),
        })
    }

    /// Uses `extractor` instead of the configured entity–relation extractor (tests count its calls). The
    /// generation the pipeline holds is let go and loaded again.
    pub fn set_extractor(&mut self, extractor: Arc<dyn Extractor>) -> Result<()> {
        let reopen = self.searcher.take().is_some();
        if let Ok(mut latest) = self.index.shared.latest.write() {
            *latest = None;
        }
        let env = Arc::get_mut(&mut self.index.shared).and_then(|s| Arc::get_mut(&mut s.env));
        match env {
            Some(env) => env.extractor = Some(extractor),
            None => {
                return Err(KgragError::Config(
                    "the index is shared: set the extractor with Index::options().extractor".into(),
                ))
            }
        }
        if reopen {
            self.reopen()?;
        }
        Ok(())
    }

    /// The index.
    pub fn index_handle(&self) -> &Index {
        &self.index
    }

    /// The searcher on the pipeline's generation (loaded on first use).
    pub fn searcher(&mut self) -> Result<&Searcher> {
        if self.searcher.is_none() {
            self.searcher = Some(self.index.reader_with(ReloadPolicy::Manual)?.searcher());
        }
        self.searcher
            .as_ref()
            .ok_or_else(|| KgragError::Index("no searcher".into()))
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        self.index.config()
    }

    /// The committed manifest of the pipeline's generation (`None` before the first commit or in memory).
    pub fn manifest(&self) -> Option<&Manifest> {
        self.searcher.as_ref().and_then(Searcher::manifest)
    }

    /// The documents of the pipeline's generation.
    pub fn documents(&self) -> &[DocRecord] {
        self.searcher.as_ref().map_or(&[], Searcher::documents)
    }

    /// The corpus of the pipeline's generation.
    pub fn corpus(&mut self) -> Result<&Corpus> {
        Ok(self.searcher()?.corpus())
    }

    /// Notes said once so far (offline fallbacks, failures).
    pub fn notes(&self) -> Vec<String> {
        self.index.notes()
    }

    /// Seconds per stage of the last build.
    pub fn stages(&self) -> &[(String, f64)] {
        self.searcher.as_ref().map_or(&[], Searcher::stages)
    }

    /// Model usage per stage (over all builds of the index).
    pub fn llm_usage(&self) -> BTreeMap<String, UsageEntry> {
        self.searcher
            .as_ref()
            .map(|s| s.llm_usage().clone())
            .unwrap_or_default()
    }

    /// A method's index in the pipeline's generation.
    pub fn method_index(&mut self, method: &str) -> Result<Arc<dyn MethodIndex>> {
        self.searcher()?.method_index(method)
    }

    /// The manifest committed in the backend now (another process may have committed since).
    pub fn committed(&self) -> Result<Option<Manifest>> {
        self.index.committed()
    }

    /// Checks the models and settings against an index's manifest.
    pub fn check_compatible(&self, manifest: &Manifest) -> Result<()> {
        self.index.check_compatible(manifest)
    }

    /// The response cache the models go through.
    pub fn response_cache(&self) -> Option<ResponseCache> {
        self.index.response_cache()
    }

    /// The chat model's usage so far in this session.
    pub fn chat_usage_now(&self) -> UsageEntry {
        self.index.chat_usage()
    }

    /// Builds the index of `docs` from nothing for `methods` and commits it (see
    /// [`IndexWriter::rebuild`](crate::IndexWriter::rebuild)); returns the generation.
    pub async fn index(
        &mut self,
        docs: Vec<SourceDoc>,
        methods: &[String],
        prefilled: HashMap<ChunkId, Extraction>,
    ) -> Result<u64> {
        let mut writer = self.index.writer()?;
        writer.rebuild(docs, methods, prefilled).await?;
        let generation = writer.commit().await?;
        drop(writer);
        self.reopen()?;
        Ok(generation)
    }

    /// Adds documents and commits (see
    /// [`IndexWriter::add_documents`](crate::IndexWriter::add_documents)).
    pub async fn insert(&mut self, docs: Vec<SourceDoc>) -> Result<ChangeSummary> {
        let mut writer = self.index.writer()?;
        let mut summary = writer.add_documents(docs).await?;
        summary.generation = writer.commit().await?;
        drop(writer);
        self.reopen()?;
        Ok(summary)
    }

    /// Removes documents by id and commits (see
    /// [`IndexWriter::delete_documents`](crate::IndexWriter::delete_documents)).
    pub async fn delete(&mut self, ids: &[String]) -> Result<ChangeSummary> {
        let mut writer = self.index.writer()?;
        let mut summary = writer.delete_documents(ids).await?;
        summary.generation = writer.commit().await?;
        drop(writer);
        self.reopen()?;
        Ok(summary)
    }

    fn reopen(&mut self) -> Result<()> {
        self.searcher = Some(self.index.reader_with(ReloadPolicy::Manual)?.searcher());
        Ok(())
    }

    /// The retriever of `strategy`.
    pub fn retriever(&mut self, strategy: &str) -> Result<Arc<dyn Retriever>> {
        self.searcher()?.retriever(strategy)
    }

    /// The reader's answer to `question` from `ctx` (retrieved with `strategy`).
    pub async fn read(
        &mut self,
        strategy: &str,
        question: &str,
        ctx: &RetrievedContext,
    ) -> Result<Option<String>> {
        self.searcher()?.read(strategy, question, ctx).await
    }

    /// Retrieves `top_k` passages for `question` with `strategy` and reads the answer.
    pub async fn answer(
        &mut self,
        question: &str,
        strategy: &str,
        top_k: usize,
    ) -> Result<QueryAnswer> {
        self.searcher()?.answer(question, strategy, top_k).await
    }

    /// The graph of `method` as GraphML (see [`Searcher::graphml`]).
    pub fn graphml(&mut self, method: Option<&str>) -> Result<(String, String)> {
        self.searcher()?.graphml(method)
    }

    /// Everything `kgrag stats` prints (see [`Searcher::stats`]).
    pub fn stats(&self) -> Result<serde_json::Value> {
        self.searcher
            .as_ref()
            .ok_or_else(|| KgragError::Index("the index is not committed".into()))?
            .stats()
    }
}
