//! The storage seam: where an index's generations live and how they are written, read and searched.
//!
//! [`IndexStore`] is what an [`Index`](crate::Index) asks of a backend: the committed
//! [`Manifest`], the one-writer lock, the passage store, the chunks' triples, each method's index, and the
//! commit of a new generation (all of it visible at once, or none of it). Two backends implement it:
//!
//! - [`local::LocalStore`] (default): files in the index directory, committed by `manifest.json`
//!   (see [`crate::index_dir`]).
//! - `postgres::PgStore` (feature `postgres`): PostgreSQL with pgvector, one transaction per generation;
//!   passages and their vectors, documents, triples and HippoRAG 2's graph (node and edge tables) as rows,
//!   the other parts of a method's index as checksummed blobs; the dense strategy searches the passage
//!   vectors with pgvector.
//!
//! The index directory exists with both: it holds the caches (responses, embeddings, extractions), and with
//! PostgreSQL a `storage.json` naming the backend, its schema and the variable holding the URL, so that
//! `kgrag query`, `stats`, `insert` and `delete` find the index without a configuration file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kgrag_graph_store::EmbeddingStore;
use kgrag_types::Extraction;
use serde::{Deserialize, Serialize};

use crate::config::{StorageBackend, StorageConfig};
pub use crate::env::{Nearest, PassageSearch, SharedExtractions};
use crate::index_dir::Manifest;
use crate::methods::{Corpus, Env, Method, MethodIndex};
use crate::{KgragError, Result};

pub mod local;
#[cfg(feature = "postgres")]
pub mod postgres;

/// The file in an index directory naming a database backend.
pub const POINTER: &str = "storage.json";

/// A generation to commit: its manifest (the store fills in the files it writes) and its contents.
pub struct NewGeneration<'a> {
    /// The generation this change started from (`None`: a build from nothing). The commit fails when
    /// another writer committed since.
    pub opened: Option<u64>,
    /// The manifest; `generation` and the file lists are set by the store.
    pub manifest: Manifest,
    /// The passage store.
    pub passages: &'a EmbeddingStore,
    /// The chunks' triples.
    pub triples: &'a [Extraction],
    /// The methods' indexes.
    pub methods: &'a BTreeMap<String, Arc<dyn MethodIndex>>,
    /// Generations still read in this process: a backend that removes old generations keeps these.
    pub keep: Vec<u64>,
}

/// The writer lock of an index: released when dropped (and by the system or the server when its holder
/// dies).
pub type WriterLock = Box<dyn std::any::Any + Send>;

/// One backend of the index. See the module docs.
pub trait IndexStore: SharedExtractions {
    /// The backend's description for `kgrag stats`.
    fn info(&self) -> serde_json::Value;

    /// The committed manifest (`None`: no index yet).
    fn committed(&self) -> Result<Option<Manifest>>;

    /// Takes the one-writer lock; a second writer fails at once with a message naming the holder.
    fn lock(&self) -> Result<WriterLock>;

    /// The passage store of `manifest`'s generation (also checks that the generation is complete).
    fn passages(&self, manifest: &Manifest) -> Result<EmbeddingStore>;

    /// The triples of `manifest`'s generation.
    fn triples(&self, manifest: &Manifest) -> Result<Vec<Extraction>>;

    /// `method`'s index in `manifest`'s generation.
    fn method(
        &self,
        manifest: &Manifest,
        method: &dyn Method,
        env: &Env,
        corpus: &Corpus,
    ) -> Result<Arc<dyn MethodIndex>>;

    /// Writes and commits a generation; returns its manifest as committed.
    fn commit(&self, generation: NewGeneration<'_>) -> Result<Manifest>;

    /// Bytes stored per part of `manifest`'s generation (`kgrag stats`).
    fn sizes(&self, manifest: &Manifest) -> Result<BTreeMap<String, u64>>;

    /// Takes the settings an index was built with (search, clean-up; not where it is) when it is opened
    /// without a configuration.
    fn adopt_settings(&self, _stored: &StorageConfig) {}

    /// What `storage.json` in the index directory records (`None`: no file, the index is the directory).
    fn pointer(&self) -> Option<Pointer> {
        None
    }

    /// A search of `manifest`'s passage vectors inside the backend (`None`: the dense strategy scans the
    /// passage store in memory).
    fn passage_search(&self, _manifest: &Manifest) -> Result<Option<Arc<dyn PassageSearch>>> {
        Ok(None)
    }

    /// The queue of a build split across machines (only a database backend has one).
    fn work_queue(
        &self,
        _options: &crate::distribute::DistributeOptions,
    ) -> Result<Arc<dyn crate::env::WorkQueue>> {
        Err(KgragError::Config(
            "a distributed build (--distribute) needs an index in PostgreSQL: set [storage] backend = \
             \"postgres\""
                .into(),
        ))
    }
}

/// What `storage.json` records: the backend and where it is, never the URL itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    /// The backend.
    pub backend: StorageBackend,
    /// The variable holding the URL.
    pub url_env: String,
    /// The schema.
    pub schema: String,
}

/// The backend for a build into `root` with `config` (`kgrag index`): `config`'s database when it names
/// one; else the database `root/storage.json` names (an index in PostgreSQL stays there — remove the file
/// to build into the folder instead); else the files of `root`.
pub fn for_build(root: &Path, config: &StorageConfig) -> Result<Arc<dyn IndexStore>> {
    match config.backend {
        StorageBackend::Postgres => postgres_store(root, config),
        StorageBackend::Local => for_existing(root, Some(config)),
    }
}

/// The backend of the index in `root`: the one its `storage.json` names, else `config`'s database if it
/// names one, else the files of `root`.
pub fn for_existing(root: &Path, config: Option<&StorageConfig>) -> Result<Arc<dyn IndexStore>> {
    let mut c = config.cloned().unwrap_or_default();
    if let Some(p) = read_pointer(root)? {
        c.backend = p.backend;
        c.url_env = p.url_env;
        c.schema = p.schema;
    }
    match c.backend {
        StorageBackend::Postgres => postgres_store(root, &c),
        StorageBackend::Local => Ok(Arc::new(local::LocalStore::new(root))),
    }
}

/// `root/storage.json`, if any.
pub fn read_pointer(root: &Path) -> Result<Option<Pointer>> {
    let path = root.join(POINTER);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            KgragError::Index(format!(
                "{} does not parse ({e}); it names the database of the index: fix it or remove it",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(KgragError::Io { path, source }),
    }
}

/// Writes (or, with `None`, removes) `root/storage.json`, atomically.
pub fn write_pointer(root: &Path, pointer: Option<&Pointer>) -> Result<()> {
    let path = root.join(POINTER);
    match pointer {
        Some(p) => {
            if read_pointer(root)?.as_ref() == Some(p) {
                return Ok(());
            }
            let bytes = serde_json::to_vec_pretty(p)?;
            kgrag_graph_store::persist::write_atomic(&path, &bytes)?;
            Ok(())
        }
        None => match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(KgragError::Io { path, source }),
        },
    }
}

#[cfg(feature = "postgres")]
fn postgres_store(root: &Path, config: &StorageConfig) -> Result<Arc<dyn IndexStore>> {
    Ok(Arc::new(postgres::PgStore::connect(root, config)?))
}

#[cfg(not(feature = "postgres"))]
fn postgres_store(_root: &Path, _config: &StorageConfig) -> Result<Arc<dyn IndexStore>> {
    Err(KgragError::Config(
        "storage.backend = \"postgres\" needs kgrag built with the `postgres` feature \
         (cargo install … --features postgres)"
            .into(),
    ))
}
