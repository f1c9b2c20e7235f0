//! [`Generation`]: one committed state of an index, immutable and shared by every searcher that holds it.
//! The passage store is read when the generation is loaded; each method's index and each strategy's
//! retriever the first time it is asked for (once, whichever thread asks first).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use kgrag_graph_store::EmbeddingStore;
use kgrag_types::{ChunkId, Retriever};

use super::Shared;
use crate::index_dir::{DocRecord, Manifest, UsageEntry};
use crate::methods::{self, Corpus, MethodIndex};
use crate::{KgragError, Result};

/// One generation of an index. See the module docs.
pub(crate) struct Generation {
    /// The generation's number (0: nothing committed).
    pub(crate) number: u64,
    /// Its manifest (`None` in memory, or with nothing committed).
    pub(crate) manifest: Option<Manifest>,
    /// Its documents.
    pub(crate) documents: Vec<DocRecord>,
    /// Its chunks and passage vectors; its triples only when `triples_loaded`.
    pub(crate) corpus: Corpus,
    /// Whether `corpus.triples` holds the generation's triples (in memory) or they are in the backend.
    pub(crate) triples_loaded: bool,
    /// Seconds per stage of the build that made it.
    pub(crate) stages: Vec<(String, f64)>,
    /// Model usage per stage, over every build of the index.
    pub(crate) llm: BTreeMap<String, UsageEntry>,
    methods: BTreeMap<String, OnceLock<Arc<dyn MethodIndex>>>,
    retrievers: BTreeMap<&'static str, OnceLock<Arc<dyn Retriever>>>,
    /// Each chunk's documents: (index in `documents`, position among the document's chunks).
    homes: OnceLock<HashMap<ChunkId, Vec<(u32, u32)>>>,
    /// Serialises loading a method or building a retriever (never held while querying).
    loading: Mutex<()>,
    shared: std::sync::Weak<Shared>,
    live: Arc<Mutex<BTreeMap<u64, usize>>>,
}

/// What a writer hands over when it publishes a committed generation.
pub(crate) struct Committed {
    pub(crate) number: u64,
    pub(crate) manifest: Option<Manifest>,
    pub(crate) documents: Vec<DocRecord>,
    pub(crate) corpus: Corpus,
    pub(crate) triples_loaded: bool,
    pub(crate) stages: Vec<(String, f64)>,
    pub(crate) llm: BTreeMap<String, UsageEntry>,
    pub(crate) methods: BTreeMap<String, Arc<dyn MethodIndex>>,
}

impl Generation {
    fn assemble(shared: &Arc<Shared>, c: Committed) -> Self {
        let names: Vec<String> = match &c.manifest {
            Some(m) => m.methods.keys().cloned().collect(),
            None => c.methods.keys().cloned().collect(),
        };
        let mut methods = BTreeMap::new();
        let mut retrievers = BTreeMap::new();
        for name in names {
            let slot = OnceLock::new();
            if let Some(index) = c.methods.get(&name) {
                let _ = slot.set(index.clone());
            }
            if let Some(m) = methods::registry().iter().find(|m| m.name() == name) {
                for s in m.strategies() {
                    retrievers.insert(*s, OnceLock::new());
                }
            }
            methods.insert(name, slot);
        }
        if c.number > 0 {
            if let Ok(mut live) = shared.live.lock() {
                *live.entry(c.number).or_default() += 1;
            }
        }
        Self {
            number: c.number,
            manifest: c.manifest,
            documents: c.documents,
            corpus: c.corpus,
            triples_loaded: c.triples_loaded,
            stages: c.stages,
            llm: c.llm,
            methods,
            retrievers,
            homes: OnceLock::new(),
            loading: Mutex::new(()),
            shared: Arc::downgrade(shared),
            live: shared.live.clone(),
        }
    }

    /// A generation handed over by a writer.
    pub(crate) fn committed(shared: &Arc<Shared>, c: Committed) -> Self {
        Self::assemble(shared, c)
    }

    /// Nothing committed yet.
    pub(crate) fn empty(shared: &Arc<Shared>) -> Self {
        Self::assemble(
            shared,
            Committed {
                number: 0,
                manifest: None,
                documents: Vec::new(),
                corpus: empty_corpus(),
                triples_loaded: true,
                stages: Vec::new(),
                llm: BTreeMap::new(),
                methods: BTreeMap::new(),
            },
        )
    }

    /// Loads `manifest`'s generation from the backend: its passage store now (after checking the
    /// settings), the rest when first asked for.
    pub(crate) fn load(shared: &Arc<Shared>, manifest: Manifest) -> Result<Self> {
        super::check_compatible(&shared.env, &manifest)?;
        let store = shared
            .store
            .as_ref()
            .ok_or_else(|| KgragError::Index("no index to open".into()))?;
        let passages = store.passages(&manifest)?;
        let search = store.passage_search(&manifest)?;
        let corpus = Corpus {
            chunks: passages
                .keys()
                .zip(passages.texts())
                .filter_map(|(k, t)| Some((ChunkId::parse(k).ok()?, t.clone())))
                .collect(),
            triples: Arc::default(),
            passages: Arc::new(passages),
            search,
        };
        Ok(Self::assemble(
            shared,
            Committed {
                number: manifest.generation,
                documents: manifest.documents.clone(),
                stages: manifest.stages.clone(),
                llm: manifest.llm.clone(),
                manifest: Some(manifest),
                corpus,
                triples_loaded: false,
                methods: BTreeMap::new(),
            },
        ))
    }

    /// The methods of the generation, in registry order.
    pub(crate) fn method_names(&self) -> Vec<String> {
        methods::METHOD_NAMES
            .iter()
            .filter(|m| self.methods.contains_key(**m))
            .map(|m| (*m).to_owned())
            .collect()
    }

    /// `name`'s index, loaded from the backend on first use.
    pub(crate) fn method(&self, name: &str) -> Result<Arc<dyn MethodIndex>> {
        let Some(slot) = self.methods.get(name) else {
            return Err(self.missing(name));
        };
        if let Some(index) = slot.get() {
            return Ok(index.clone());
        }
        let _loading = self
            .loading
            .lock()
            // It guards no data: a load that panicked left nothing half-made behind it.
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = slot.get() {
            return Ok(index.clone());
        }
        let shared = self
            .shared
            .upgrade()
            .ok_or_else(|| KgragError::Index("the index was closed".into()))?;
        let (Some(store), Some(manifest)) = (&shared.store, &self.manifest) else {
            return Err(KgragError::Config(format!(
                "the {name} index was not built"
            )));
        };
        let method = methods::registry()
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| KgragError::Config(format!("unknown method {name:?}")))?;
        let index = store
            .method(manifest, method.as_ref(), &shared.env, &self.corpus)
            .map_err(|e| match e {
                KgragError::Store(kgrag_graph_store::StoreError::Incompatible { path, reason }) => {
                    KgragError::Index(format!(
                        "the {name} index {} was written by another version of kgrag ({reason}): rebuild \
                         with `kgrag index --force` (cached LLM replies and extractions are reused)",
                        path.display()
                    ))
                }
                other => other,
            })?;
        let _ = slot.set(index.clone());
        Ok(index)
    }

    fn missing(&self, name: &str) -> KgragError {
        let have = self.method_names();
        match (&self.manifest, self.number) {
            (_, 0) => KgragError::Index(
                "the index has nothing committed yet: add documents through a writer and commit".into(),
            ),
            (Some(_), _) => KgragError::Index(format!(
                "the index has no {name} part (it has: {}); add it with `kgrag index … --methods {name}`",
                have.join(", "),
            )),
            (None, _) => KgragError::Config(format!(
                "the {name} index was not built (built: {})",
                have.join(", ")
            )),
        }
    }

    /// The retriever of `strategy`, built on first use and shared.
    pub(crate) fn retriever(&self, strategy: &str) -> Result<Arc<dyn Retriever>> {
        let method = methods::method_of(strategy).ok_or_else(|| {
            KgragError::Config(format!(
                "unknown strategy {strategy:?}; strategies: {}",
                methods::strategies().join(", ")
            ))
        })?;
        let Some(slot) = self.retrievers.get(strategy) else {
            return Err(self.missing(method.name()));
        };
        if let Some(r) = slot.get() {
            return Ok(r.clone());
        }
        let index = self.method(method.name())?;
        let _loading = self
            .loading
            .lock()
            // It guards no data: a load that panicked left nothing half-made behind it.
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = slot.get() {
            return Ok(r.clone());
        }
        let shared = self
            .shared
            .upgrade()
            .ok_or_else(|| KgragError::Index("the index was closed".into()))?;
        let r: Arc<dyn Retriever> =
            Arc::from(index.retriever(strategy, &shared.env, &self.corpus)?);
        let _ = slot.set(r.clone());
        Ok(r)
    }

    /// The strategies this generation can answer (those of its methods), in report order.
    pub(crate) fn strategies(&self) -> Vec<&'static str> {
        methods::strategies()
            .into_iter()
            .filter(|s| self.retrievers.contains_key(s))
            .collect()
    }

    fn homes(&self) -> &HashMap<ChunkId, Vec<(u32, u32)>> {
        self.homes.get_or_init(|| {
            let mut map: HashMap<ChunkId, Vec<(u32, u32)>> = HashMap::new();
            for (i, d) in self.documents.iter().enumerate() {
                for (k, c) in d.chunks.iter().enumerate() {
                    map.entry(c.clone()).or_default().push((i as u32, k as u32));
                }
            }
            map
        })
    }

    /// The ids of the documents holding a chunk.
    pub(crate) fn documents_of(&self, chunk: &ChunkId) -> Vec<String> {
        self.homes()
            .get(chunk)
            .map(|h| {
                h.iter()
                    .filter_map(|&(i, _)| self.documents.get(i as usize).map(|d| d.id.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Where a chunk came from: its first document's file, pages and section.
    pub(crate) fn source_of(&self, chunk: &ChunkId) -> Option<crate::citations::PassageSource> {
        let &(i, k) = self.homes().get(chunk)?.first()?;
        let d = self.documents.get(i as usize)?;
        Some(crate::citations::PassageSource::of(d, k as usize))
    }

    /// The document with the user's id `id`.
    pub(crate) fn document(&self, id: &str) -> Option<&DocRecord> {
        self.documents.iter().find(|d| d.id == id)
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        if self.number == 0 {
            return;
        }
        if let Ok(mut live) = self.live.lock() {
            if let Some(n) = live.get_mut(&self.number) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    live.remove(&self.number);
                }
            }
        }
    }
}

/// A corpus with nothing in it.
pub(crate) fn empty_corpus() -> Corpus {
    Corpus {
        chunks: Vec::new(),
        triples: Arc::default(),
        passages: Arc::new(EmbeddingStore::new("passages")),
        search: None,
    }
}
