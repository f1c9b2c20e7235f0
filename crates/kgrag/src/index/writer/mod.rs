//! [`IndexWriter`]: the one writer of an index. It changes its own copy of the committed generation —
//! chunking, extraction, embedding and every method's index — and [`commit`](IndexWriter::commit) makes
//! the result the next generation, in the backend and for the readers.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use kgrag_graph_store::EmbeddingStore;
use kgrag_types::{ChunkId, Extraction, StageUsage};
use serde::{Deserialize, Serialize};

mod inputs;

pub(crate) use inputs::chunk_docs;
use inputs::chunking_name;

use super::generation::{empty_corpus, Committed};
use super::{Generation, Shared, WritingGuard};
use crate::documents::SourceDoc;
use crate::index_dir::{self, DocRecord, EmbedderInfo, Manifest, MethodEntry, UsageEntry};
use crate::methods::{self, Change, Corpus, Env, MethodIndex};
use crate::originals;
use crate::progress::{say, Stages};
use crate::storage::{self, NewGeneration, WriterLock};
use crate::{KgragError, Result};

/// A chunk of the corpus: its id and its text, shared with the passage store (never held twice).
type Passage = (ChunkId, Arc<str>);

/// What an add or delete did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSummary {
    /// Documents added or removed.
    pub documents: usize,
    /// Documents skipped (already present with the same text) or ids not found.
    pub skipped: Vec<String>,
    /// Chunks added or removed.
    pub chunks: usize,
    /// The generation that holds the change once committed (0 until then).
    pub generation: u64,
}

/// The writer's own copy of the index: what the next commit writes.
struct Work {
    /// The committed manifest this copy started from (`None`: nothing committed, or in memory).
    manifest: Option<Manifest>,
    /// The generation this copy started from (0: none).
    opened: u64,
    documents: Vec<DocRecord>,
    corpus: Corpus,
    triples_loaded: bool,
    methods: BTreeMap<String, Arc<dyn MethodIndex>>,
    stages: Vec<(String, f64)>,
    llm: BTreeMap<String, UsageEntry>,
    /// The LLM estimate of the last build from nothing (`None` after a change).
    estimate: Option<crate::estimate::Estimate>,
}

impl Work {
    /// Nothing loaded yet, based on `manifest`'s generation `opened`.
    fn empty(manifest: Option<Manifest>, opened: u64) -> Self {
        Self {
            manifest,
            opened,
            documents: Vec::new(),
            corpus: empty_corpus(),
            triples_loaded: true,
            methods: BTreeMap::new(),
            stages: Vec::new(),
            llm: BTreeMap::new(),
            estimate: None,
        }
    }

    fn copy(&self) -> Self {
        Self {
            manifest: self.manifest.clone(),
            opened: self.opened,
            documents: self.documents.clone(),
            corpus: Corpus {
                chunks: self.corpus.chunks.clone(),
                triples: self.corpus.triples.clone(),
                passages: self.corpus.passages.clone(),
                search: self.corpus.search.clone(),
            },
            triples_loaded: self.triples_loaded,
            methods: self.methods.clone(),
            stages: self.stages.clone(),
            llm: self.llm.clone(),
            estimate: self.estimate.clone(),
        }
    }
}

/// The one writer of an index. See the module docs. Its futures are not `Send` (the methods' builds run
/// on the calling thread); run it with `block_on` or on a local task.
pub struct IndexWriter {
    shared: Arc<Shared>,
    _lock: Option<WriterLock>,
    _writing: WritingGuard,
    /// The generation the writer's copy is based on, when loaded (its methods load lazily).
    base: Option<Arc<Generation>>,
    /// Whether `work` holds the base generation's contents yet (loaded on the first add or delete).
    loaded: bool,
    work: Work,
    /// Changed since the last commit.
    dirty: bool,
    /// The originals of files added since the last commit, stored at the commit.
    pending_originals: Vec<originals::Pending>,
}

impl IndexWriter {
    pub(crate) fn open(shared: Arc<Shared>) -> Result<Self> {
        let writing = WritingGuard::take(&shared)?;
        let lock = shared.store.as_ref().map(|s| s.lock()).transpose()?;
        // Under the lock: the backend's generation is the one this writer changes.
        let (manifest, base) = match &shared.store {
            Some(store) => {
                let m = store.committed()?;
                let base = match (&m, shared.latest_known()) {
                    (Some(m), Some(k)) if k.number == m.generation => Some(k),
                    _ => None,
                };
                (m, base)
            }
            None => (None, shared.latest_known().filter(|g| g.number > 0)),
        };
        let opened = manifest
            .as_ref()
            .map(|m| m.generation)
            .or_else(|| base.as_ref().map(|b| b.number))
            .unwrap_or(0);
        let mut writer = Self {
            shared,
            _lock: lock,
            _writing: writing,
            base,
            loaded: false,
            work: Work::empty(manifest, opened),
            dirty: false,
            pending_originals: Vec::new(),
        };
        if writer.work.opened == 0 {
            writer.loaded = true;
        }
        Ok(writer)
    }

    fn env(&self) -> &Env {
        &self.shared.env
    }

    /// The generation the writer's changes start from (0: none).
    pub fn opened(&self) -> u64 {
        self.work.opened
    }

    /// The documents of the writer's copy (the committed ones until the first change is made).
    pub fn documents(&self) -> Result<Vec<DocRecord>> {
        if self.loaded {
            return Ok(self.work.documents.clone());
        }
        Ok(match (&self.base, &self.work.manifest) {
            (Some(b), _) => b.documents.clone(),
            (None, Some(m)) => m.documents.clone(),
            (None, None) => Vec::new(),
        })
    }

    /// Puts the committed generation's contents into the writer's copy (once).
    fn ensure_loaded(&mut self) -> Result<()> {
        if self.loaded {
            return Ok(());
        }
        let base = match self.base.clone() {
            Some(b) => b,
            None => {
                let Some(m) = self.work.manifest.clone() else {
                    self.loaded = true;
                    return Ok(());
                };
                // It guards no data: a load that panicked left nothing half-made behind it.
                let _loading = self
                    .shared
                    .loading
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let g = Arc::new(Generation::load(&self.shared, m)?);
                self.shared.publish(g.clone());
                self.base = Some(g.clone());
                g
            }
        };
        let corpus = Corpus {
            chunks: base.corpus.chunks.clone(),
            triples: if base.triples_loaded {
                base.corpus.triples.clone()
            } else {
                let (Some(store), Some(m)) = (&self.shared.store, &base.manifest) else {
                    return Err(KgragError::Index("the index's triples are missing".into()));
                };
                Arc::new(store.triples(m)?)
            },
            passages: base.corpus.passages.clone(),
            search: base.corpus.search.clone(),
        };
        let mut methods = BTreeMap::new();
        for name in base.method_names() {
            methods.insert(name.clone(), base.method(&name)?);
        }
        self.work = Work {
            manifest: base.manifest.clone(),
            opened: base.number,
            documents: base.documents.clone(),
            corpus,
            triples_loaded: true,
            methods,
            stages: base.stages.clone(),
            llm: base.llm.clone(),
            estimate: base.manifest.as_ref().and_then(|m| m.estimate.clone()),
        };
        self.loaded = true;
        Ok(())
    }

    /// Replaces the whole index with `docs`, indexed for `methods` (names of [`methods::METHOD_NAMES`];
    /// empty: `[index] methods`), reusing the caches (finished extractions, embeddings, reports).
    /// `prefilled` holds triples known already (a dataset's OpenIE cache), by chunk id. On failure the
    /// writer's copy is as it was.
    pub async fn rebuild(
        &mut self,
        docs: Vec<SourceDoc>,
        methods: &[String],
        prefilled: HashMap<ChunkId, Extraction>,
    ) -> Result<()> {
        let saved = self.work.copy();
        let was_loaded = self.loaded;
        self.loaded = true;
        match self.rebuild_inner(docs, methods, prefilled).await {
            Ok(()) => {
                self.dirty = true;
                Ok(())
            }
            Err(e) => {
                self.work = saved;
                self.loaded = was_loaded;
                Err(e)
            }
        }
    }

    /// Adds documents: new chunks are extracted and embedded, HippoRAG 2 is updated incrementally, HiRAG
    /// and LeanRAG are rebuilt from the stored extractions (reports and summaries reused). A document
    /// whose id is present with the same text is skipped; with another text it is an error (delete it
    /// first). On an index with nothing in it, this builds the `[index] methods`. On failure the writer's
    /// copy is as it was.
    pub async fn add_documents(&mut self, docs: Vec<SourceDoc>) -> Result<ChangeSummary> {
        self.ensure_loaded()?;
        if self.work.methods.is_empty() && self.work.documents.is_empty() {
            self.rebuild(docs, &[], HashMap::new()).await?;
            return Ok(ChangeSummary {
                documents: self.work.documents.len(),
                skipped: Vec::new(),
                chunks: self.work.corpus.chunks.len(),
                generation: 0,
            });
        }
        let saved = self.work.copy();
        match self.add_inner(docs).await {
            Ok(s) => {
                self.dirty |= s.documents > 0;
                Ok(s)
            }
            Err(e) => {
                self.work = saved;
                Err(e)
            }
        }
    }

    /// Removes documents by id (the user's id or the content hash): their chunks that no other document
    /// holds leave the passage store and every method (HippoRAG 2 as its spec's delete; HiRAG and LeanRAG
    /// rebuilt). Ids that match nothing are listed in the summary; when none matches it is an error. On
    /// failure the writer's copy is as it was.
    pub async fn delete_documents(&mut self, ids: &[String]) -> Result<ChangeSummary> {
        self.ensure_loaded()?;
        let saved = self.work.copy();
        match self.delete_inner(ids).await {
            Ok(s) => {
                self.dirty = true;
                Ok(s)
            }
            Err(e) => {
                self.work = saved;
                Err(e)
            }
        }
    }

    /// Drops every change since the last commit (or since the writer was opened).
    pub fn rollback(&mut self) {
        self.loaded = self.work.opened == 0 && self.base.is_none();
        self.work = Work::empty(self.work.manifest.clone(), self.work.opened);
        self.dirty = false;
        self.pending_originals.clear();
    }

    /// Writes the changes as a new generation (one atomic commit in the backend) and hands it to the
    /// readers; returns its number. Without changes nothing is written and the current number is
    /// returned.
    pub async fn commit(&mut self) -> Result<u64> {
        if !self.dirty {
            return Ok(self.work.opened);
        }
        // A distributed build commits only whole, unless told otherwise (then it names what is missing).
        if let Some(queue) = &self.shared.env.queue {
            let failed = queue.failed();
            if !failed.is_empty() {
                if !queue.allow_failed() {
                    return Err(crate::distribute::failed_error(&failed));
                }
                crate::progress::say(&format!(
                    "note: committing without {} failed jobs (--allow-failed): {}",
                    failed.len(),
                    crate::distribute::describe(&failed, 20)
                ));
            }
        }
        let generation = match self.shared.store.clone() {
            Some(store) => self.commit_to(store.as_ref())?,
            None => self.work.opened + 1,
        };
        if let Some(queue) = &self.shared.env.queue {
            if let Err(e) = queue.committed().await {
                self.shared
                    .env
                    .note(format!("the finished jobs could not be cleared ({e})"));
            }
        }
        self.dirty = false;
        self.work.opened = generation;
        // The readers' copy: the writer keeps its own for further changes.
        let committed = Committed {
            number: generation,
            manifest: self.work.manifest.clone(),
            documents: self.work.documents.clone(),
            corpus: Corpus {
                chunks: self.work.corpus.chunks.clone(),
                // In memory the next writer takes them from here; a backend stores them.
                triples: if self.shared.store.is_none() {
                    self.work.corpus.triples.clone()
                } else {
                    Arc::default()
                },
                passages: self.work.corpus.passages.clone(),
                search: self.work.corpus.search.clone(),
            },
            triples_loaded: self.shared.store.is_none(),
            stages: self.work.stages.clone(),
            llm: self.work.llm.clone(),
            methods: self.work.methods.clone(),
        };
        let g = Arc::new(Generation::committed(&self.shared, committed));
        self.shared.publish(g.clone());
        self.base = Some(g);
        Ok(generation)
    }

    fn commit_to(&mut self, store: &dyn storage::IndexStore) -> Result<u64> {
        let t = Instant::now();
        let env = &self.shared.env;
        // The originals first: a generation never names a file the index has not stored.
        let keep_originals = env.config.index.keep_originals;
        if let (Some(root), true) = (&self.shared.root, keep_originals) {
            match originals::store(root, &self.pending_originals) {
                Ok(present) => {
                    for d in &mut self.work.documents {
                        if let Some(f) = &mut d.file {
                            f.kept = present.contains(&f.digest);
                        }
                    }
                }
                Err(e) => say(&format!("note: the original files were not kept ({e})")),
            }
        }
        let entries = self
            .work
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
        let names: Vec<&str> = self.work.methods.keys().map(String::as_str).collect();
        let settings = methods::settings(&env.config, &names);
        let extraction = env.counts.lock().map(|c| c.clone()).unwrap_or_default();
        let manifest = Manifest {
            format: index_dir::FORMAT,
            kgrag_version: env!("CARGO_PKG_VERSION").to_owned(),
            generation: 0,
            config_hash: index_dir::settings_hash(&settings),
            settings,
            config: serde_json::to_value(&env.config)?,
            embedder: EmbedderInfo {
                name: env.embedder.model_name().to_owned(),
                dimension: self
                    .work
                    .corpus
                    .passages
                    .dim()
                    .unwrap_or_else(|| env.embedder.dimension()),
            },
            documents: self.work.documents.clone(),
            chunks: self.work.corpus.chunks.len(),
            files: Vec::new(),
            methods: entries,
            llm: self.work.llm.clone(),
            stages: self.work.stages.clone(),
            extraction,
            notes: env.notes(),
            estimate: self.work.estimate.clone(),
        };
        let manifest = store.commit(NewGeneration {
            opened: self.work.manifest.as_ref().map(|m| m.generation),
            manifest,
            passages: &self.work.corpus.passages,
            triples: &self.work.corpus.triples,
            methods: &self.work.methods,
            keep: self.shared.live_generations(),
        })?;
        // Committed: nothing below may turn that into a failure.
        let generation = manifest.generation;
        self.pending_originals.clear();
        if let Some(root) = &self.shared.root {
            let named: HashSet<String> = manifest
                .documents
                .iter()
                .filter_map(|d| d.file.as_ref().filter(|f| f.kept).map(|f| f.digest.clone()))
                .collect();
            originals::retain(root, &named);
        }
        if let Some(root) = &self.shared.root {
            if let Err(e) = storage::write_pointer(root, store.pointer().as_ref()) {
                say(&format!(
                    "note: could not write {} ({e}); pass the [storage] settings with --config to open \
                     the index",
                    root.join(storage::POINTER).display()
                ));
            }
        }
        self.work.corpus.search = match store.passage_search(&manifest) {
            Ok(s) => s,
            Err(e) => {
                say(&format!(
                    "note: the dense strategy searches in memory in this session ({e})"
                ));
                None
            }
        };
        self.work.manifest = Some(manifest);
        say(&format!(
            "committed generation {generation} to {} ({:.2} s)",
            store.location(),
            t.elapsed().as_secs_f64()
        ));
        Ok(generation)
    }

    fn add_usage(&mut self, stage: &str, before: UsageEntry) {
        let used = self.shared.usage().since(&before);
        self.work
            .llm
            .entry(stage.to_owned())
            .or_default()
            .add(&used);
    }

    fn reset_counts(&self) {
        if let Ok(mut c) = self.env().counts.lock() {
            c.clear();
        }
    }

    fn method_list(&self, methods: &[String]) -> Result<Vec<String>> {
        method_list(self.env(), methods)
    }

    async fn rebuild_inner(
        &mut self,
        docs: Vec<SourceDoc>,
        methods: &[String],
        mut prefilled: HashMap<ChunkId, Extraction>,
    ) -> Result<()> {
        let methods = self.method_list(methods)?;
        self.reset_counts();
        if docs.is_empty() {
            return Err(KgragError::Input("no documents to index".into()));
        }
        let mut stages = Stages::new(self.env().progress, true);
        let t = Instant::now();
        let (records, chunks, pending) = chunk_docs(self.env(), docs, &HashSet::new())?;
        self.pending_originals = pending;
        stages.record("chunking", t.elapsed().as_secs_f64());
        say(&format!(
            "{} documents, {} chunks ({})",
            records.len(),
            chunks.len(),
            chunking_name(&self.env().config.index.chunking)
        ));
        // With a chat model, what the build is expected to ask of it (before any call), for `kgrag stats`.
        self.work.estimate = match self.env().chat {
            Some(_) => Some(crate::estimate::estimate(
                self.env(),
                &methods,
                records.len(),
                &chunks,
                &|id| prefilled.contains_key(id),
            )?),
            None => None,
        };
        let triples = if self.needs_triples(&methods) {
            let before = self.shared.usage();
            let t = Instant::now();
            let tr = self.triples_for(&chunks, &mut prefilled).await?;
            // The extractor's whole records (descriptions, relations) are gone, the corpus keeps triples
            // and names: their pages go back before the builds allocate.
            crate::memory::release_free_memory();
            stages.record("extraction", t.elapsed().as_secs_f64());
            self.add_usage("extraction", before);
            tr
        } else {
            Vec::new()
        };
        let empty = Arc::new(EmbeddingStore::new("passages"));
        let passages = self.embed_passages(&empty, &chunks, &mut stages).await?;
        self.work.corpus = Corpus {
            chunks,
            triples: Arc::new(triples),
            passages,
            search: None,
        };
        self.work.triples_loaded = true;
        self.work.documents = records;
        self.work.methods.clear();
        self.build_methods(&methods, &Change::Full, &mut stages)
            .await?;
        self.work.stages = stages.into_secs();
        Ok(())
    }

    /// Builds `methods` over the writer's corpus. Offline every build is bound by the processor, so the
    /// methods build one after another (one build's peak memory at a time). With a chat model the builds
    /// run at the same time on this task: each waits only on what it depends on — LeanRAG on HiRAG's
    /// base layer, not on HiRAG's hierarchy and reports — and the model's requests of all of them share its
    /// concurrency. Either way every method builds what it would alone.
    async fn build_methods(
        &mut self,
        methods: &[String],
        change: &Change,
        stages: &mut Stages,
    ) -> Result<()> {
        let selected: Vec<Box<dyn methods::Method>> = methods::registry()
            .into_iter()
            .filter(|m| methods.iter().any(|x| x == m.name()))
            .collect();
        let handoff = methods::Handoff::new(&self.env().config, methods);
        let together = self.env().chat.is_some() && selected.len() > 1;
        let mut built: BTreeMap<String, Arc<dyn MethodIndex>> = BTreeMap::new();
        let mut outs = Vec::with_capacity(selected.len());
        if together {
            let before = self.shared.usage();
            let builds = selected.iter().map(|m| {
                self.build_one(m.as_ref(), change, &handoff)
                    .map(|r| r.map(|(out, secs)| (m.name(), out, secs)))
            });
            outs = futures_util::future::try_join_all(builds).await?;
            // One counter saw the overlapping builds' calls (none with models handed in): LeanRAG's
            // aggregation counts its own, and the rest are HiRAG's (dense and HippoRAG 2 build without
            // the model; HippoRAG's extraction is the `extraction` stage, before). Retries are not
            // counted per method: they stay with HiRAG.
            if self.shared.chat_usage.is_some() {
                let mut rest = self.shared.usage().since(&before);
                for m in &selected {
                    self.work.llm.entry(m.name().to_owned()).or_default();
                }
                let lean = outs
                    .iter()
                    .find_map(|(_, out, _)| methods::leanrag_index(out.index.as_ref()))
                    .map(|l| usage_entry(&l.stats().llm));
                if let Some(lean) = lean {
                    rest = rest.since(&lean);
                    self.work
                        .llm
                        .entry("leanrag".to_owned())
                        .or_default()
                        .add(&lean);
                }
                let owner = if methods.iter().any(|m| m == "hirag") {
                    "hirag"
                } else {
                    "leanrag"
                };
                self.work
                    .llm
                    .entry(owner.to_owned())
                    .or_default()
                    .add(&rest);
            }
        } else {
            // Dense and HippoRAG 2 first: HippoRAG 2's build holds its whole graph unpacked (and packs it
            // at the end), so it passes its peak while no other index is held, and leaves a small index
            // behind; then HiRAG, whose build holds the most of the rest (its graph, hierarchy and report
            // inputs); LeanRAG (which takes HiRAG's base layer) last. Every method at 30,000 synthetic
            // passages, resident peak: 953 MB with HiRAG first, 913 MB with HippoRAG 2 first (the
            // questions' peak is ~900). Each builds what it would alone; stages keep the registry's order.
            let mut order: Vec<&Box<dyn methods::Method>> = selected.iter().collect();
            order.sort_by_key(|m| match m.name() {
                "hirag" => 1,
                "leanrag" => 2,
                _ => 0,
            });
            for m in order {
                let before = self.shared.usage();
                let (out, secs) = self.build_one(m.as_ref(), change, &handoff).await?;
                self.add_usage(m.name(), before);
                outs.push((m.name(), out, secs));
                // What the build freed goes back before the next one stacks on it.
                crate::memory::release_free_memory();
            }
            outs.sort_by_key(|(name, _, _)| selected.iter().position(|m| m.name() == *name));
        }
        for (name, out, secs) in outs {
            for (stage, secs) in &out.stages {
                stages.record(stage, *secs);
            }
            tracing::info!(method = name, secs, "method built");
            built.insert(name.to_owned(), Arc::from(out.index));
        }
        self.work.methods = built;
        if together {
            crate::memory::release_free_memory();
        }
        Ok(())
    }

    /// One method's build, and its seconds. HiRAG's closes the handoff when it ends, so a LeanRAG build
    /// waiting on it never waits for nothing.
    async fn build_one(
        &self,
        m: &dyn methods::Method,
        change: &Change,
        handoff: &methods::Handoff,
    ) -> Result<(methods::Built, f64)> {
        let previous = self.work.methods.get(m.name()).cloned();
        let t = Instant::now();
        let out = m
            .build(
                &self.shared.env,
                &self.work.corpus,
                handoff,
                previous,
                change,
            )
            .await;
        if m.name() == "hirag" {
            handoff.close();
        }
        Ok((out?, t.elapsed().as_secs_f64()))
    }

    /// The methods of the writer's copy, in registry order.
    fn indexed_methods(&self) -> Vec<String> {
        methods::METHOD_NAMES
            .iter()
            .filter(|m| self.work.methods.contains_key(**m))
            .map(|m| (*m).to_owned())
            .collect()
    }

    async fn add_inner(&mut self, docs: Vec<SourceDoc>) -> Result<ChangeSummary> {
        let methods = self.indexed_methods();
        self.reset_counts();
        let mut summary = ChangeSummary::default();
        let by_id: HashMap<&str, &DocRecord> = self
            .work
            .documents
            .iter()
            .map(|d| (d.id.as_str(), d))
            .collect();
        let mut new_docs = Vec::new();
        for d in docs {
            match by_id.get(d.id.as_str()) {
                Some(old) if old.doc_id == d.document.id => summary.skipped.push(d.id.clone()),
                Some(_) => {
                    return Err(KgragError::Conflict(format!(
                        "{}: the index already has a document {:?} with another text; `kgrag delete {}` first \
                         (an edit is a delete and an insert)",
                        d.source, d.id, d.id
                    )))
                }
                None => new_docs.push(d),
            }
        }
        if new_docs.is_empty() {
            return Ok(summary);
        }
        let mut stages = Stages::new(self.env().progress, true);
        let known: HashSet<ChunkId> = self
            .work
            .corpus
            .chunks
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        let (records, fresh, pending) = chunk_docs(self.env(), new_docs, &known)?;
        self.pending_originals.extend(pending);
        if self.needs_triples(&methods) {
            let before = self.shared.usage();
            let t = Instant::now();
            let mut none = HashMap::new();
            let tr = self.triples_for(&fresh, &mut none).await?;
            stages.record("extraction", t.elapsed().as_secs_f64());
            self.add_usage("extraction", before);
            Arc::make_mut(&mut self.work.corpus.triples).extend(tr);
        }
        let passages = self
            .embed_passages(&self.work.corpus.passages, &fresh, &mut stages)
            .await?;
        self.work.corpus.passages = passages;
        self.work.corpus.chunks.extend(fresh.iter().cloned());
        summary.documents = records.len();
        summary.chunks = fresh.len();
        self.work.documents.extend(records);
        let change = Change::Insert(fresh.iter().map(|(id, _)| id.clone()).collect());
        self.build_methods(&methods, &change, &mut stages).await?;
        self.work.stages = stages.into_secs();
        self.work.estimate = None;
        Ok(summary)
    }

    async fn delete_inner(&mut self, ids: &[String]) -> Result<ChangeSummary> {
        let methods = self.indexed_methods();
        self.reset_counts();
        let mut summary = ChangeSummary::default();
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let (gone, keep): (Vec<DocRecord>, Vec<DocRecord>) =
            self.work.documents.iter().cloned().partition(|d| {
                wanted.contains(d.id.as_str()) || wanted.contains(d.doc_id.as_str())
            });
        for id in ids {
            if !gone.iter().any(|d| &d.id == id || d.doc_id.as_str() == id) {
                summary.skipped.push(id.clone());
            }
        }
        if gone.is_empty() {
            let sample: Vec<&str> = self
                .work
                .documents
                .iter()
                .take(5)
                .map(|d| d.id.as_str())
                .collect();
            return Err(KgragError::Input(format!(
                "no document with the id(s) {}; the index has {} documents (e.g. {})",
                ids.join(", "),
                self.work.documents.len(),
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
        let mut stages = Stages::new(self.env().progress, true);
        let mut store = self.work.corpus.passages.as_ref().clone();
        store.remove_where(|k| ChunkId::parse(k).is_ok_and(|c| removed.contains(&c)))?;
        self.work.corpus.passages = Arc::new(store);
        self.work
            .corpus
            .chunks
            .retain(|(id, _)| !removed.contains(id));
        Arc::make_mut(&mut self.work.corpus.triples).retain(|e| !removed.contains(&e.chunk_id));
        summary.documents = gone.len();
        summary.chunks = removed.len();
        self.work.documents = keep;
        let change = Change::Delete(removed.into_iter().collect());
        self.build_methods(&methods, &change, &mut stages).await?;
        self.work.stages = stages.into_secs();
        self.work.estimate = None;
        Ok(summary)
    }
}

/// The methods to build, in registry order: `methods`, else `[index] methods`; an unknown name is an error.
pub(crate) fn method_list(env: &Env, methods: &[String]) -> Result<Vec<String>> {
    let asked: Vec<String> = if methods.is_empty() {
        env.config.index.methods.clone()
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

/// A method's own count of its model calls as a usage entry (retries are not counted per stage).
fn usage_entry(u: &StageUsage) -> UsageEntry {
    UsageEntry {
        calls: u.calls,
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        cache_hits: u.cache_hits,
        retries: 0,
        failures: u.failures,
    }
}
