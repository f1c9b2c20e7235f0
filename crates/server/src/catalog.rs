//! The indexes a server serves, by name: opened on first use, the least recently used dropped from
//! memory past `max_loaded` (or a memory budget) — never one a request holds — and, under an indexes
//! root, created and dropped through the API.
//!
//! A request holds a [`Lease`] on the index it uses from the moment it resolves the name until its
//! answer (or its stream) ends; an index is only ever evicted with no lease out. Loads of one index are
//! made once (a second request for it waits for the first's load), and loads of different indexes one at
//! a time, so that the memory each load adds to the process can be measured.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use kgrag::config::Config;
use kgrag::{Index, IndexReader};

use crate::documents::WriterThread;
use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;

/// Where a named index comes from.
pub enum IndexSource {
    /// A folder holding an index (its files, or `storage.json` naming its PostgreSQL database): opened
    /// on first use and dropped from memory when evicted. With `create`, an empty index is made there
    /// when it holds none.
    Folder {
        /// The folder.
        path: PathBuf,
        /// Make an empty index when the folder holds none.
        create: bool,
    },
    /// An index already open: kept in memory for the server's life.
    Open(Index),
}

/// An index and the name it is served under (`/v1/indexes/{name}/…`, the model `name/strategy`).
pub struct NamedIndex {
    /// The name: 1 to 64 letters, digits, `_`, `-` or `.`, starting with a letter or a digit.
    pub name: String,
    /// Where it comes from.
    pub source: IndexSource,
}

impl NamedIndex {
    /// The index in `path`, served as `name`, opened on first use.
    pub fn folder(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            source: IndexSource::Folder {
                path: path.into(),
                create: false,
            },
        }
    }

    /// `index`, already open, served as `name`.
    pub fn open(name: impl Into<String>, index: Index) -> Self {
        Self {
            name: name.into(),
            source: IndexSource::Open(index),
        }
    }
}

/// Whether `name` may name an index: 1 to 64 of `A-Z a-z 0-9 _ - .`, the first a letter or a digit.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// What is wrong with `name` as an index's name (see [`valid_name`]), `None` when nothing is.
fn name_problem(name: &str) -> Option<String> {
    (!valid_name(name)).then(|| {
        format!(
            "index name {name:?}: give 1 to 64 letters, digits, '_', '-' or '.', starting with a \
             letter or a digit"
        )
    })
}

/// The configuration file an index made through the API keeps in its folder (read when it is opened
/// with nothing committed yet).
const FOLDER_CONFIG: &str = "kgrag.toml";

/// One loaded index: its reader, its writer's thread and what its load cost.
pub(crate) struct Served {
    pub(crate) name: String,
    pub(crate) reader: IndexReader,
    /// Makes the document changes, one at a time.
    pub(crate) writer: WriterThread,
    /// The reader the answers come from (`extractive`, `llm` or `none`: the configured `auto` resolved).
    pub(crate) reader_name: String,
    /// What the load added to the process's resident memory, at least the generation's bytes on disk.
    pub(crate) bytes: u64,
    /// Seconds the load took (the index, its models, its committed generation).
    pub(crate) load_secs: f64,
    /// Set when the index is dropped: its writer refuses the changes it has not started.
    dropped: Arc<AtomicBool>,
}

impl Served {
    /// Starts serving `index` (blocking: it loads the committed generation; each method's index loads on
    /// its first question).
    fn start(
        name: &str,
        index: Index,
        closing: Arc<AtomicBool>,
        metrics: Arc<Metrics>,
    ) -> kgrag::Result<Self> {
        let started = Instant::now();
        let before = kgrag::memory::resident_bytes();
        let reader = index.reader()?;
        // Each method's index loads when a question first needs it (as a searcher does): an evicted
        // index asked with one strategy loads that method only. Its memory is counted in full anyway:
        // at least the generation's bytes on disk.
        let searcher = reader.searcher();
        let on_disk = searcher
            .stats()
            .ok()
            .and_then(|s| s["bytes_total"].as_u64())
            .unwrap_or(0);
        let grew = match (before, kgrag::memory::resident_bytes()) {
            (Some(b), Some(a)) => a.saturating_sub(b),
            _ => 0,
        };
        let reader_name = serde_json::to_value(index.env().reader)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let dropped = Arc::new(AtomicBool::new(false));
        let writer = WriterThread::start(index, closing, dropped.clone(), metrics)
            .map_err(|e| kgrag::KgragError::Index(format!("cannot start the writer: {e}")))?;
        Ok(Self {
            name: name.to_owned(),
            reader,
            writer,
            reader_name,
            bytes: grew.max(on_disk),
            load_secs: started.elapsed().as_secs_f64(),
            dropped,
        })
    }
}

/// Where an entry's index is kept.
enum Home {
    /// A folder (given, or found or made under the root).
    Folder { path: PathBuf, create: bool },
    /// Open for the server's life (never evicted).
    Pinned(Index),
}

struct Entry {
    home: Home,
    /// Found or made under the indexes root (may be dropped through the API).
    under_root: bool,
    served: Option<Arc<Served>>,
    leases: usize,
    last_used: u64,
    /// Held while this index loads.
    loading: Arc<tokio::sync::Mutex<()>>,
    /// The strategies it answered when last loaded (or as its manifest's configuration says).
    strategies: Option<Vec<String>>,
}

impl Entry {
    fn new(home: Home, under_root: bool) -> Self {
        Self {
            home,
            under_root,
            served: None,
            leases: 0,
            last_used: 0,
            loading: Arc::new(tokio::sync::Mutex::new(())),
            strategies: None,
        }
    }
}

#[derive(Default)]
struct Inner {
    entries: BTreeMap<String, Entry>,
    /// Indexes being dropped: not served, not made, not found under the root until their folder is gone.
    dropping: BTreeSet<String>,
    tick: u64,
}

/// How many indexes may stay loaded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// At most this many indexes in memory (`None`: no limit).
    pub max_loaded: Option<usize>,
    /// At most this many bytes of loaded indexes, each counted at what its load added to the process
    /// (`None`: no budget).
    pub memory_budget: Option<u64>,
}

/// What `GET /v1/indexes` says of one index.
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) default: bool,
    pub(crate) under_root: bool,
    pub(crate) served: Option<Arc<Served>>,
    pub(crate) leases: usize,
}

/// The served indexes.
pub(crate) struct Catalog {
    inner: Mutex<Inner>,
    root: Option<PathBuf>,
    config: Option<Config>,
    default: Option<String>,
    limits: Limits,
    metrics: Arc<Metrics>,
    closing: Arc<AtomicBool>,
    /// Held during any load: loads run one at a time (their memory is measured).
    one_load: tokio::sync::Mutex<()>,
}

/// The use of one loaded index by one request: while any is out, the index stays loaded.
pub(crate) struct Lease {
    catalog: Arc<Catalog>,
    served: Arc<Served>,
}

impl std::ops::Deref for Lease {
    type Target = Served;
    fn deref(&self) -> &Served {
        &self.served
    }
}

impl Clone for Lease {
    fn clone(&self) -> Self {
        let mut inner = self.catalog.lock();
        // Counted on the entry that holds this very index (not on one made since under its name).
        if let Some(e) = inner.entries.get_mut(&self.served.name) {
            if e.served
                .as_ref()
                .is_some_and(|s| Arc::ptr_eq(s, &self.served))
            {
                e.leases += 1;
            }
        }
        drop(inner);
        Self {
            catalog: self.catalog.clone(),
            served: self.served.clone(),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.catalog.release(&self.served);
    }
}

/// Drops evicted indexes off the async threads (freeing a large index takes a while) and gives the
/// freed pages back to the operating system.
fn dispose(victims: Vec<Arc<Served>>) {
    if victims.is_empty() {
        return;
    }
    let work = move || {
        drop(victims);
        kgrag::memory::release_free_memory();
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn_blocking(work);
        }
        Err(_) => work(),
    }
}

impl Catalog {
    /// A catalog of `indexes`: the named ones, plus every index folder under its root; its default
    /// answers the routes without a name (else the first index named).
    pub(crate) fn new(
        indexes: crate::Indexes,
        metrics: Arc<Metrics>,
        closing: Arc<AtomicBool>,
    ) -> Result<Self, String> {
        let crate::Indexes {
            named,
            root,
            config,
            default,
            limits,
        } = indexes;
        let mut entries = BTreeMap::new();
        let mut first = None;
        for ni in named {
            if let Some(problem) = name_problem(&ni.name) {
                return Err(problem);
            }
            if entries.contains_key(&ni.name) {
                return Err(format!("index name {:?} is given twice", ni.name));
            }
            let home = match ni.source {
                IndexSource::Folder { path, create } => {
                    if create {
                        std::fs::create_dir_all(&path).map_err(|e| {
                            format!("index {:?}: cannot create {}: {e}", ni.name, path.display())
                        })?;
                    }
                    if !path.is_dir() {
                        return Err(format!(
                            "index {:?}: {} is not a folder (build one with `kgrag index FOLDER \
                             --index {}`)",
                            ni.name,
                            path.display(),
                            path.display()
                        ));
                    }
                    Home::Folder { path, create }
                }
                IndexSource::Open(index) => Home::Pinned(index),
            };
            first.get_or_insert_with(|| ni.name.clone());
            entries.insert(ni.name, Entry::new(home, false));
        }
        if let Some(root) = &root {
            if !root.is_dir() {
                return Err(format!("--indexes {}: not a folder", root.display()));
            }
        }
        let default = match default {
            Some(d) => Some(d),
            None => first,
        };
        let catalog = Self {
            inner: Mutex::new(Inner {
                entries,
                ..Inner::default()
            }),
            root,
            config,
            default,
            limits,
            metrics,
            closing,
            one_load: tokio::sync::Mutex::new(()),
        };
        catalog.rescan();
        if let Some(d) = &catalog.default {
            if !catalog.lock().entries.contains_key(d) {
                return Err(format!("the default index {d:?} is not served"));
            }
        }
        Ok(catalog)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The index the routes without a name answer from.
    pub(crate) fn default_name(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// The indexes root, if any.
    pub(crate) fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Adds the index folders under the root that are not served yet (made there by `kgrag index`
    /// since the last look); folders starting with `.`, folders served already (under another name) and
    /// indexes being dropped are skipped.
    pub(crate) fn rescan(&self) {
        let Some(root) = &self.root else { return };
        let Ok(dir) = std::fs::read_dir(root) else {
            return;
        };
        let mut found: Vec<(String, PathBuf)> = dir
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                valid_name(&name).then(|| (name, e.path()))
            })
            .collect();
        // Only folders under a name not served yet are new (usually none: nothing more to look at).
        let served: Vec<PathBuf> = {
            let inner = self.lock();
            found.retain(|(name, _)| {
                !inner.entries.contains_key(name) && !inner.dropping.contains(name)
            });
            if found.is_empty() {
                return;
            }
            inner
                .entries
                .values()
                .filter_map(|e| match &e.home {
                    Home::Folder { path, .. } => Some(path.clone()),
                    Home::Pinned(_) => None,
                })
                .collect()
        };
        found.sort();
        let served: HashSet<PathBuf> = served
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        let found: Vec<(String, PathBuf)> = found
            .into_iter()
            .filter(|(_, p)| p.canonicalize().is_ok_and(|c| !served.contains(&c)))
            .collect();
        let mut inner = self.lock();
        for (name, path) in found {
            if inner.dropping.contains(&name) {
                continue;
            }
            inner
                .entries
                .entry(name)
                .or_insert_with(|| Entry::new(Home::Folder { path, create: true }, true));
        }
    }

    /// Whether `name` is served (after a look under the root for new folders).
    pub(crate) fn contains(&self, name: &str) -> bool {
        if self.lock().entries.contains_key(name) {
            return true;
        }
        self.rescan();
        self.lock().entries.contains_key(name)
    }

    /// Every served index, by name.
    pub(crate) fn list(&self) -> Vec<Listed> {
        self.rescan();
        let inner = self.lock();
        inner
            .entries
            .iter()
            .map(|(name, e)| Listed {
                name: name.clone(),
                default: self.default.as_deref() == Some(name.as_str()),
                under_root: e.under_root,
                served: e.served.clone(),
                leases: e.leases,
            })
            .collect()
    }

    /// The loaded indexes (for `/metrics` and the shutdown's flush).
    pub(crate) fn loaded(&self) -> Vec<Arc<Served>> {
        self.lock()
            .entries
            .values()
            .filter_map(|e| e.served.clone())
            .collect()
    }

    /// What `/metrics` says of the loaded indexes.
    pub(crate) fn loaded_info(&self) -> Vec<crate::metrics::LoadedIndex> {
        let inner = self.lock();
        inner
            .entries
            .iter()
            .filter_map(|(name, e)| {
                let s = e.served.as_ref()?;
                let searcher = s.reader.searcher();
                Some(crate::metrics::LoadedIndex {
                    name: name.clone(),
                    generation: searcher.generation(),
                    documents: searcher.documents().len(),
                    bytes: s.bytes,
                    in_use: e.leases,
                })
            })
            .collect()
    }

    /// The strategies `name` answers, without loading it: those of its loaded generation, else those it
    /// answered when last loaded, else those its manifest's configuration builds (empty when it has
    /// none yet).
    pub(crate) fn strategies(&self, name: &str) -> Vec<String> {
        let path = {
            let inner = self.lock();
            let Some(e) = inner.entries.get(name) else {
                return Vec::new();
            };
            if let Some(s) = &e.served {
                return strategies_of(s);
            }
            if let Some(s) = &e.strategies {
                return s.clone();
            }
            match &e.home {
                Home::Folder { path, .. } => path.clone(),
                Home::Pinned(_) => return Vec::new(),
            }
        };
        let found: Vec<String> = Index::built_with(&path)
            .map(|c| {
                kgrag::methods::registry()
                    .iter()
                    .filter(|m| c.index.methods.iter().any(|x| x == m.name()))
                    .flat_map(|m| m.strategies().iter().map(|s| (*s).to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(e) = self.lock().entries.get_mut(name) {
            e.strategies.get_or_insert_with(|| found.clone());
        }
        found
    }

    /// The loaded index `name`, if it is loaded (nothing is loaded for asking).
    pub(crate) fn if_loaded(&self, name: &str) -> Option<Arc<Served>> {
        self.lock().entries.get(name).and_then(|e| e.served.clone())
    }

    /// A lease on `name`, loading it first if it is not in memory (and evicting the least recently used
    /// unleased indexes past the limits). 404 when there is no such index; 503 when it cannot be loaded.
    pub(crate) async fn lease(self: &Arc<Self>, name: &str) -> ApiResult<Lease> {
        if !self.contains(name) {
            return Err(no_index(name));
        }
        loop {
            let loading = {
                let mut inner = self.lock();
                inner.tick += 1;
                let tick = inner.tick;
                let Some(e) = inner.entries.get_mut(name) else {
                    return Err(no_index(name));
                };
                if let Some(served) = &e.served {
                    e.leases += 1;
                    e.last_used = tick;
                    return Ok(Lease {
                        catalog: self.clone(),
                        served: served.clone(),
                    });
                }
                e.loading.clone()
            };
            let guard = loading.clone().lock_owned().await;
            // Loaded by the request this one waited for: take a lease on it.
            if self.if_loaded(name).is_some() {
                continue;
            }
            // The load runs on a task of its own: a request that goes away (its timeout, its client)
            // does not throw it away. Its lease comes back here, or is released with the task's output.
            let (catalog, name) = (self.clone(), name.to_owned());
            return tokio::spawn(async move { catalog.load(&name, loading, guard).await })
                .await
                .map_err(|_| ApiError::internal("loading an index failed inside the server"))?;
        }
    }

    /// Loads `name` (its entry's `loading` lock held: `_guard`) and installs it with a lease for the
    /// caller; then evicts past the limits.
    async fn load(
        self: Arc<Self>,
        name: &str,
        loading: Arc<tokio::sync::Mutex<()>>,
        _guard: tokio::sync::OwnedMutexGuard<()>,
    ) -> ApiResult<Lease> {
        let _one = self.one_load.lock().await;
        // The entry as it is now: gone, or made again under this name since, is not this load's.
        let same = |e: &Entry| Arc::ptr_eq(&e.loading, &loading);
        let source = {
            let inner = self.lock();
            match inner.entries.get(name).filter(|e| same(e)) {
                None => return Err(no_index(name)),
                Some(e) => match &e.home {
                    Home::Pinned(index) => Err(index.clone()),
                    Home::Folder { path, create } => Ok((path.clone(), *create, e.under_root)),
                },
            }
        };
        let (name_owned, config) = (name.to_owned(), self.config.clone());
        let (closing, metrics) = (self.closing.clone(), self.metrics.clone());
        let loaded = tokio::task::spawn_blocking(move || {
            let index = match source {
                Err(index) => index,
                Ok((path, create, under_root)) => open_folder(&path, config, create, under_root)?,
            };
            Served::start(&name_owned, index, closing, metrics)
        })
        .await;
        let served = match loaded {
            Ok(Ok(s)) => Arc::new(s),
            Ok(Err(e)) => {
                self.metrics.index_load_failed(name);
                return Err(ApiError::unavailable(format!(
                    "index {name:?} could not be loaded: {e}"
                )));
            }
            Err(_) => {
                self.metrics.index_load_failed(name);
                return Err(ApiError::internal(format!(
                    "loading index {name:?} failed inside the server"
                )));
            }
        };
        self.metrics.index_loaded(name, served.load_secs);
        let (lease, victims) = {
            let mut inner = self.lock();
            inner.tick += 1;
            let tick = inner.tick;
            let Some(e) = inner
                .entries
                .get_mut(name)
                .filter(|e| same(e) && e.served.is_none())
            else {
                // Dropped (or made again) while it loaded.
                drop(inner);
                served.dropped.store(true, Ordering::SeqCst);
                dispose(vec![served]);
                return Err(no_index(name));
            };
            e.strategies = Some(strategies_of(&served));
            e.served = Some(served.clone());
            e.leases += 1;
            e.last_used = tick;
            let lease = Lease {
                catalog: self.clone(),
                served,
            };
            (lease, self.evictions(&mut inner))
        };
        dispose(victims);
        Ok(lease)
    }

    fn release(&self, served: &Arc<Served>) {
        let victims = {
            let mut inner = self.lock();
            inner.tick += 1;
            let tick = inner.tick;
            match inner.entries.get_mut(&served.name) {
                Some(e) if e.served.as_ref().is_some_and(|s| Arc::ptr_eq(s, served)) => {
                    e.leases = e.leases.saturating_sub(1);
                    e.last_used = tick;
                }
                _ => {}
            }
            self.evictions(&mut inner)
        };
        dispose(victims);
    }

    /// Takes out of the catalog the least recently used unleased indexes while the loaded ones are past
    /// the limits (an index in use or pinned stays: the limit is then exceeded until it is released).
    fn evictions(&self, inner: &mut Inner) -> Vec<Arc<Served>> {
        let mut victims = Vec::new();
        loop {
            let (count, bytes) = inner
                .entries
                .values()
                .filter_map(|e| e.served.as_ref())
                .fold((0usize, 0u64), |(n, b), s| (n + 1, b + s.bytes));
            let over = self.limits.max_loaded.is_some_and(|m| count > m)
                || self
                    .limits
                    .memory_budget
                    .is_some_and(|m| bytes > m && count > 1);
            if !over {
                break;
            }
            let victim = inner
                .entries
                .iter()
                .filter(|(_, e)| {
                    e.served.is_some() && e.leases == 0 && matches!(e.home, Home::Folder { .. })
                })
                .min_by_key(|(_, e)| e.last_used)
                .map(|(n, _)| n.clone());
            let Some(name) = victim else { break };
            if let Some(e) = inner.entries.get_mut(&name) {
                if let Some(s) = e.served.take() {
                    e.strategies = Some(strategies_of(&s));
                    self.metrics.index_evicted(&name);
                    victims.push(s);
                }
            }
        }
        victims
    }

    /// Loads `name` now, on this thread, if it is not loaded (a server over one open index loads it at
    /// start, so that a broken index fails there).
    pub(crate) fn preload(&self, name: &str) -> kgrag::Result<()> {
        let index = {
            let inner = self.lock();
            match inner.entries.get(name) {
                Some(Entry {
                    served: None,
                    home: Home::Pinned(index),
                    ..
                }) => index.clone(),
                _ => return Ok(()),
            }
        };
        let served = Served::start(name, index, self.closing.clone(), self.metrics.clone())?;
        self.metrics.index_loaded(name, served.load_secs);
        let mut inner = self.lock();
        if let Some(e) = inner.entries.get_mut(name) {
            e.served.get_or_insert_with(|| Arc::new(served));
        }
        Ok(())
    }

    /// Makes an empty index `name` under the root, with `config_text` (TOML) as its configuration
    /// (else the server's, else the defaults), kept in its folder. It is made in a hidden folder and moved
    /// into place once whole. 409 when the name is taken.
    pub(crate) async fn create(&self, name: &str, config_text: Option<String>) -> ApiResult<()> {
        let Some(root) = self.root.clone() else {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "conflict",
                "this server makes no indexes: start it with --indexes ROOT to create them under ROOT",
            ));
        };
        if let Some(problem) = name_problem(name) {
            return Err(ApiError::unprocessable(problem));
        }
        let config = match &config_text {
            Some(text) => Some(Config::parse(text).map_err(|e| {
                ApiError::unprocessable(format!("\"config\" is not a valid kgrag.toml: {e}"))
            })?),
            None => self.config.clone(),
        };
        let path = root.join(name);
        let taken_now = |inner: &Inner| {
            inner.entries.contains_key(name) || inner.dropping.contains(name) || path.exists()
        };
        if self.contains(name) || taken_now(&self.lock()) {
            return Err(taken(name));
        }
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let making = root.join(format!(".creating-{name}-{nonce}"));
        let dir = making.clone();
        let made = tokio::task::spawn_blocking(move || -> kgrag::Result<()> {
            let made = (|| {
                std::fs::create_dir(&dir).map_err(|source| kgrag::KgragError::Io {
                    path: dir.clone(),
                    source,
                })?;
                if let Some(text) = &config_text {
                    kgrag::graph_store::persist::write_atomic(
                        &dir.join(FOLDER_CONFIG),
                        text.as_bytes(),
                    )
                    .map_err(|e| kgrag::KgragError::Index(e.to_string()))?;
                }
                let mut options = Index::options();
                if let Some(c) = config {
                    options = options.config(c);
                }
                options.create(&dir).map(drop)
            })();
            if made.is_err() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            made
        })
        .await
        .map_err(|_| ApiError::internal("creating the index failed inside the server"))?;
        made?;
        let mut inner = self.lock();
        if taken_now(&inner) {
            drop(inner);
            let _ = std::fs::remove_dir_all(&making);
            return Err(taken(name));
        }
        if let Err(e) = std::fs::rename(&making, &path) {
            drop(inner);
            let _ = std::fs::remove_dir_all(&making);
            return Err(ApiError::internal(format!(
                "index {name:?} was made but could not be moved to {}: {e}",
                path.display()
            )));
        }
        inner.entries.insert(
            name.to_owned(),
            Entry::new(Home::Folder { path, create: true }, true),
        );
        Ok(())
    }

    /// Stops serving `name` and deletes its folder (an index under the root only): new requests get
    /// 404 at once; requests in flight finish on it, and the changes they have not started are refused.
    /// The rest runs on a task of its own, so that a request that goes away does not leave it half done.
    /// An index in PostgreSQL keeps its database schema (drop it there).
    pub(crate) async fn drop_index(self: &Arc<Self>, name: &str) -> ApiResult<()> {
        let (path, served) = {
            let mut inner = self.lock();
            let Some(e) = inner.entries.get(name) else {
                return Err(no_index(name));
            };
            let refuse = |why: String| {
                Err(ApiError::new(
                    axum::http::StatusCode::CONFLICT,
                    "conflict",
                    why,
                ))
            };
            if !e.under_root {
                return refuse(format!(
                    "index {name:?} was given on the command line (--index): it is not dropped through \
                     the API"
                ));
            }
            if self.default.as_deref() == Some(name) {
                return refuse(format!("index {name:?} is the server's default index"));
            }
            let Some(e) = inner.entries.remove(name) else {
                return Err(no_index(name));
            };
            let Home::Folder { path, .. } = e.home else {
                return Ok(());
            };
            inner.dropping.insert(name.to_owned());
            if let Some(s) = &e.served {
                s.dropped.store(true, Ordering::SeqCst);
            }
            (path, e.served)
        };
        self.metrics.forget_index(name);
        let (catalog, name) = (self.clone(), name.to_owned());
        tokio::spawn(async move {
            // A change that has started commits first; then the folder is moved aside and removed.
            if let Some(s) = &served {
                s.writer.flush().await;
            }
            drop(served);
            let nonce = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let aside = path.with_file_name(format!(".dropped-{name}-{nonce}"));
            // Until the folder is moved aside the name stays taken (a look under the root would serve
            // it again); if it cannot be moved, it stays so.
            std::fs::rename(&path, &aside).map_err(|e| {
                ApiError::internal(format!(
                    "index {name:?} is no longer served, but its folder {} could not be removed: {e}",
                    path.display()
                ))
            })?;
            catalog.lock().dropping.remove(&name);
            tokio::task::spawn_blocking(move || {
                if let Err(e) = std::fs::remove_dir_all(&aside) {
                    tracing::warn!("removing {}: {e}", aside.display());
                }
            });
            Ok(())
        })
        .await
        .map_err(|_| ApiError::internal("dropping the index failed inside the server"))?
    }

    /// Waits until every loaded index's writer has finished the changes submitted so far.
    pub(crate) async fn flush_all(&self) {
        for served in self.loaded() {
            served.writer.flush().await;
        }
    }

    /// Whether the server is shutting down.
    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}

fn strategies_of(served: &Served) -> Vec<String> {
    served
        .reader
        .searcher()
        .strategies()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// Opens the index in `path`: with its folder's `kgrag.toml` when it is under the root and has one (the
/// configuration it was made with through the API), else with `config`, else with the one it was built
/// with; an empty one (made with `create`) with the configuration found, else the defaults. The folder
/// must be there (a load never makes one).
fn open_folder(
    path: &Path,
    config: Option<Config>,
    create: bool,
    under_root: bool,
) -> kgrag::Result<Index> {
    if !path.is_dir() {
        return Err(kgrag::KgragError::Index(format!(
            "{} is not there any more",
            path.display()
        )));
    }
    let own = path.join(FOLDER_CONFIG);
    let config = match (under_root && own.is_file(), config) {
        (true, _) => Some(Config::load(&own)?),
        (false, c) => c,
    };
    let committed = path.join("manifest.json").is_file() || path.join("storage.json").is_file();
    if committed || !create {
        let mut options = Index::options();
        if let Some(c) = config {
            options = options.config(c);
        }
        return options.open(path);
    }
    Index::options()
        .config(config.unwrap_or_default())
        .open_or_create(path)
}

/// 404 for an index that does not exist or that the client may not see (the same words either way).
pub(crate) fn no_index(name: &str) -> ApiError {
    ApiError::not_found(format!("no index {name:?}"))
}

fn taken(name: &str) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "conflict",
        format!("an index {name:?} exists already"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for ok in ["wiki", "Wiki_2", "a", "contracts-2024.q3"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", ".hidden", "-x", "a/b", "a b", "ä", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
