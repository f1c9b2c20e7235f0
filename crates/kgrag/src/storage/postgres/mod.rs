//! The PostgreSQL + pgvector backend (feature `postgres`).
//!
//! Tables, in the configured schema (created and migrated by version on first use; `schema_version`
//! records what was applied):
//!
//! | table | one row per | notes |
//! | --- | --- | --- |
//! | `generations` | committed generation | its manifest (`jsonb`); the newest row is the index |
//! | `documents` | document of a generation | the user's id, content id, title, source, chunk ids |
//! | `passages` | chunk of a generation | chunk id, text, its vector (`vector`, L2-normalised) |
//! | `extractions` | chunk of a generation | its triples, entities and relations (`jsonb`) |
//! | `graphs`, `graph_nodes`, `graph_edges` | graph, node, edge | HippoRAG 2's graph with every facet (`jsonb`) |
//! | `method_files` | other part of a method's index | HiRAG's and LeanRAG's indexes, HippoRAG 2's stores (checksummed `bytea`) |
//! | `extraction_cache` | finished extraction (any generation) | shared by the machines that build the index |
//! | `hierarchy_nodes`, `hierarchy_relations`, `communities` | layer node, relation, community | HiRAG's and LeanRAG's layers, HiRAG's communities and reports, for SQL (the methods load `method_files`) |
//! | `jobs`, `workers` | job, worker of a distributed build | the queue of `kgrag index --distribute` and `kgrag worker` (see [`queue`]) |
//! | `embedding_cache`, `llm_cache` | vector by model and text digest, reply by request digest | what the workers' jobs leave for every later build |
//!
//! A generation is written in one transaction, its `generations` row last: a reader sees the previous
//! generation or the new one, never a mix, and a writer killed at any point leaves the previous generation
//! as it was. Readers read the newest `generations` row, then only rows of that generation, each load inside
//! one read-only REPEATABLE READ snapshot that first checks the generation is still there. After a commit,
//! generations older than the previous one that were replaced more than `replaced_grace_secs` ago are
//! deleted in one transaction (their `generations` rows first), then their HNSW indexes concurrently. One writer per schema: a session-level advisory lock, taken
//! at the start of a change and held to its end; the server releases it when the writer's connection
//! ends, however it ends. The dense strategy searches the passage vectors with pgvector's cosine distance
//! `<=>`: an HNSW index (built in the commit, for generations of at least `hnsw_min_rows` passages, up to
//! 2,000 dimensions; its own session forces the index and fills a limit in distance order) or an exact
//! scan below, which returns the top k with the range of every cosine. HippoRAG 2's PPR graph is read from the edge table once per generation, when the
//! method's index is loaded.
//!
//! The database URL comes only from the environment variable `url_env`. It is never logged and never part
//! of an error: messages say "the database in $VAR" and the server's own message, with the URL and its
//! password scrubbed should the driver ever repeat them.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use kgrag_graph_store::{Edge, EmbeddingStore, KnowledgeGraph, Node};
use kgrag_types::Extraction;
use pgvector::Vector;
use sha2::{Digest, Sha256};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{Json, Type};
use tokio_postgres::{Client, NoTls};

use super::{
    IndexStore, Nearest, NewGeneration, PassageSearch, Pointer, SharedExtractions, WriterLock,
};
use crate::config::{StorageBackend, StorageConfig};
use crate::index_dir::{FileEntry, Manifest};
use crate::methods::{Corpus, Env, Method, MethodIndex};
use crate::{KgragError, Result};

/// Numbers the load and staging folders of every store of the process (two pipelines of one process must
/// not share one).
static FOLDERS: AtomicU64 = AtomicU64::new(0);

pub mod queue;
mod read;
mod schema;
mod search;
mod shared;
mod write;

pub use queue::{Claimed, JobResult, PgQueue, QueueStatus, PATIENCE};
use schema::migrate;
pub use schema::SCHEMA_VERSION;
use write::hnsw_name;

/// Extractions per statement when they are shared (a statement's parameters stay far below PostgreSQL's
/// 1 GB).
const SHARE_BATCH: usize = 1000;

/// The most dimensions pgvector's HNSW index takes for `vector`.
const HNSW_MAX_DIM: usize = 2000;

/// The tables holding rows of a generation (`generations` last: written last, so its row commits them).
const GENERATION_TABLES: [&str; 11] = [
    "hierarchy_nodes",
    "hierarchy_relations",
    "communities",
    "documents",
    "passages",
    "extractions",
    "graphs",
    "graph_nodes",
    "graph_edges",
    "method_files",
    "generations",
];

/// Strings that must never appear in a message: the URL and its password.
#[derive(Clone)]
struct Secrets {
    variable: String,
    hide: Vec<String>,
}

impl Secrets {
    fn scrub(&self, text: String) -> String {
        let mut out = text;
        for h in &self.hide {
            if !h.is_empty() {
                out = out.replace(h.as_str(), "<hidden>");
            }
        }
        out
    }

    /// [`err`](Self::err) for `map_err`.
    fn on(&self, what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> KgragError + '_ {
        move |e| self.err(what, e)
    }

    /// A database error with what was being done, the server's message (and detail), scrubbed.
    fn err(&self, what: &str, e: tokio_postgres::Error) -> KgragError {
        let text = match e.as_db_error() {
            Some(db) => {
                let mut t = format!("{}: {}", db.severity(), db.message());
                if let Some(d) = db.detail() {
                    t.push_str(&format!(" ({d})"));
                }
                t
            }
            None => {
                let mut t = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    t.push_str(&format!(": {s}"));
                    source = s.source();
                }
                t
            }
        };
        KgragError::Database(self.scrub(format!(
            "{what} (the database in ${}): {text}",
            self.variable
        )))
    }
}

fn quoted(schema: &str) -> String {
    format!("\"{schema}\"")
}

/// A stable 64-bit advisory-lock key for `what`.
fn lock_key(what: &str) -> i64 {
    let d = Sha256::digest(what.as_bytes());
    i64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// The reader session: connected, JIT off (short queries).
async fn reader_session(db: &tokio_postgres::Config, secrets: &Secrets) -> Result<Client> {
    let client = connect(db, "kgrag reader", secrets).await?;
    client
        .batch_execute("set jit = off")
        .await
        .map_err(secrets.on("setting up the session"))?;
    Ok(client)
}

/// Connects without TLS (the URL's `sslmode` is not honoured: this build has no TLS for PostgreSQL) and
/// points the session at `schema`.
async fn connect(
    config: &tokio_postgres::Config,
    application: &str,
    secrets: &Secrets,
) -> Result<Client> {
    let mut config = config.clone();
    config.application_name(application);
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(secrets.on("connecting"))?;
    tokio::spawn(async move {
        // Ends when the client is dropped or the server goes away; requests then fail with the cause.
        let _ = connection.await;
    });
    Ok(client)
}

/// A column of a row, or an error saying the database holds what kgrag cannot read (never a panic).
fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    i: usize,
) -> Result<T> {
    row.try_get(i).map_err(|e| {
        KgragError::Index(format!(
            "the database holds a value kgrag cannot read (column {i}: {e}); was it written by another \
             version, or changed by hand? Rebuild with `kgrag index --force`"
        ))
    })
}

/// PostgreSQL with pgvector. See the module docs.
pub struct PgStore {
    /// Where the index is (schema, variable): fixed.
    config: StorageConfig,
    /// The settings of search and clean-up: the stored ones once the index is opened.
    tuning: std::sync::Mutex<StorageConfig>,
    db: tokio_postgres::Config,
    secrets: Secrets,
    runtime: Arc<Runtime>,
    handle: tokio::runtime::Handle,
    reader: std::sync::Mutex<Arc<Client>>,
}

/// The store's runtime, shut down without blocking when its last holder (the store or a search of its
/// passages) goes: a store may be dropped inside another runtime.
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The database `config` names (its URL read from `config.url_env`) and the strings never to show.
fn database(config: &StorageConfig) -> Result<(tokio_postgres::Config, Secrets)> {
    config.validate()?;
    let variable = config.url_env.clone();
    let url = std::env::var(&variable).map_err(|_| {
        KgragError::Config(format!(
            "storage.backend = \"postgres\": the environment variable {variable} is not set (it holds \
             the database URL, postgres://user:password@host:port/database)"
        ))
    })?;
    let mut secrets = Secrets {
        variable: variable.clone(),
        hide: vec![url.clone()],
    };
    let db: tokio_postgres::Config = url.parse().map_err(|_| {
        KgragError::Config(format!(
            "the value of {variable} is not a PostgreSQL URL or connection string"
        ))
    })?;
    if let Some(p) = db.get_password() {
        if let Ok(p) = std::str::from_utf8(p) {
            if p.len() >= 4 {
                secrets.hide.push(p.to_owned());
            }
        }
    }
    Ok((db, secrets))
}

impl PgStore {
    /// Connects to the database named by `config.url_env` and brings the schema up to date. `root` is
    /// the index directory (caches, `storage.json`).
    pub fn connect(root: &Path, config: &StorageConfig) -> Result<Self> {
        let (db, secrets) = database(config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kgrag-postgres")
            .enable_all()
            .build()
            .map_err(|source| KgragError::Io {
                path: root.to_path_buf(),
                source,
            })?;
        let handle = runtime.handle().clone();
        let runtime = Arc::new(Runtime(Some(runtime)));
        let (db2, secrets2, schema) = (db.clone(), secrets.clone(), config.schema.clone());
        let reader = block(&handle, async move {
            let mut client = reader_session(&db2, &secrets2).await?;
            migrate(&mut client, &schema, &secrets2).await?;
            Ok(client)
        })?;
        Ok(Self {
            config: config.clone(),
            tuning: std::sync::Mutex::new(config.clone()),
            db,
            secrets,
            runtime,
            handle,
            reader: std::sync::Mutex::new(Arc::new(reader)),
        })
    }

    fn tuning(&self) -> StorageConfig {
        self.tuning
            .lock()
            .map(|t| t.clone())
            .unwrap_or_else(|_| self.config.clone())
    }

    fn s(&self) -> String {
        quoted(&self.config.schema)
    }

    /// The reader connection, connected again if the server closed it (a restart, an idle timeout).
    fn reader(&self) -> Result<Arc<Client>> {
        let current =
            self.reader.lock().map(|r| r.clone()).map_err(|_| {
                KgragError::Database("the reader connection's lock is poisoned".into())
            })?;
        if !current.is_closed() {
            return Ok(current);
        }
        let (db, secrets) = (self.db.clone(), self.secrets.clone());
        let fresh = Arc::new(block(&self.handle, async move {
            reader_session(&db, &secrets).await
        })?);
        if let Ok(mut r) = self.reader.lock() {
            *r = fresh.clone();
        }
        Ok(fresh)
    }

    /// Runs `f` with the reader connection on the store's runtime and waits for it.
    fn read<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>, Secrets, String) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        block(
            &self.handle,
            f(self.reader()?, self.secrets.clone(), self.s()),
        )
    }

    /// Runs `f` inside one read-only REPEATABLE READ transaction on a connection of its own, after
    /// checking that `generation` is still there: the rows `f` reads are all of that generation, whole,
    /// whatever a writer commits or removes meanwhile.
    fn snapshot<T, F, Fut>(&self, generation: u64, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>, Secrets, String) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let (db, secrets, s) = (self.db.clone(), self.secrets.clone(), self.s());
        let gone = self.gone(generation);
        block(&self.handle, async move {
            let client = Arc::new(connect(&db, "kgrag loader", &secrets).await?);
            client
                .batch_execute("begin isolation level repeatable read read only")
                .await
                .map_err(secrets.on("starting a snapshot"))?;
            let there = client
                .query_opt(
                    &format!("select 1 from {s}.generations where generation = $1"),
                    &[&(generation as i64)],
                )
                .await
                .map_err(secrets.on("reading the generation"))?;
            if there.is_none() {
                return Err(gone);
            }
            let out = f(client.clone(), secrets.clone(), s).await?;
            client
                .batch_execute("commit")
                .await
                .map_err(secrets.on("ending a snapshot"))?;
            Ok(out)
        })
    }

    /// The generation's rows must be there: a reader that opened a generation two commits ago finds them
    /// deleted.
    fn gone(&self, generation: u64) -> KgragError {
        KgragError::Index(format!(
            "generation {generation} of {} is incomplete or was replaced by newer commits since it was \
             opened; open the index again",
            self.location()
        ))
    }
}

/// A row index from the database (never negative).
fn index(i: i32) -> Result<u32> {
    u32::try_from(i).map_err(|_| KgragError::Index(format!("the database holds the row index {i}")))
}

/// A file name from the database must be a plain name (it becomes a path under the load folder).
fn safe_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0');
    if ok {
        Ok(())
    } else {
        Err(KgragError::Index(format!(
            "the database names the index file {name:?}, which is not a plain file name"
        )))
    }
}

/// Runs `fut` on `handle`'s runtime and waits for it from a thread outside it (callers may be inside
/// another runtime).
fn block<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| KgragError::Database("the database task stopped".into()))?
}

/// The writer lock: its own connection holding a session-level advisory lock. Dropping it unlocks and
/// closes the connection (the server also releases the lock when the connection ends, however it ends).
struct PgLock {
    client: Option<Client>,
    key: i64,
    handle: tokio::runtime::Handle,
}

impl Drop for PgLock {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let key = self.key;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            // Unlocked before the next writer can ask: closing alone releases it only once the server
            // has noticed.
            let _ = client
                .execute("select pg_advisory_unlock($1)", &[&key])
                .await;
            drop(client);
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(std::time::Duration::from_secs(10));
    }
}

impl IndexStore for PgStore {
    fn info(&self) -> serde_json::Value {
        serde_json::json!({
            "backend": "postgres",
            "schema": self.config.schema,
            "url_env": self.config.url_env,
            "schema_version": SCHEMA_VERSION,
            "hnsw_min_rows": self.tuning().hnsw_min_rows,
        })
    }

    fn adopt_settings(&self, stored: &StorageConfig) {
        if stored.validate().is_err() {
            return; // a hand-edited manifest: the defaults stay
        }
        if let Ok(mut t) = self.tuning.lock() {
            *t = StorageConfig {
                backend: self.config.backend,
                url_env: self.config.url_env.clone(),
                schema: self.config.schema.clone(),
                ..stored.clone()
            };
        }
    }

    fn pointer(&self) -> Option<Pointer> {
        Some(Pointer {
            backend: StorageBackend::Postgres,
            url_env: self.config.url_env.clone(),
            schema: self.config.schema.clone(),
        })
    }

    fn committed(&self) -> Result<Option<Manifest>> {
        self.read_committed()
    }

    fn lock(&self) -> Result<WriterLock> {
        let (db, secrets) = (self.db.clone(), self.secrets.clone());
        let key = lock_key(&format!("kgrag writer {}", self.config.schema));
        let me = format!("kgrag writer pid {}", std::process::id());
        let (client, holder) = block(&self.handle, async move {
            let client = connect(&db, &me, &secrets).await?;
            let got: bool = col(
                &client
                    .query_one("select pg_try_advisory_lock($1)", &[&key])
                    .await
                    .map_err(secrets.on("taking the writer lock"))?,
                0,
            )?;
            if got {
                return Ok((client, None));
            }
            // Who holds it: the advisory lock's halves are classid (high) and objid (low).
            let holder: Option<String> = client
                .query_opt(
                    "select a.application_name from pg_locks l join pg_stat_activity a on a.pid = l.pid \
                     where l.locktype = 'advisory' and l.granted and l.classid::bigint = ($1::bigint >> 32) & 4294967295 \
                     and l.objid::bigint = $1::bigint & 4294967295 and l.objsubid = 1 limit 1",
                    &[&key],
                )
                .await
                .ok()
                .flatten()
                .and_then(|r| r.try_get(0).ok());
            Ok((
                client,
                Some(holder.unwrap_or_else(|| "holder unknown".to_owned())),
            ))
        })?;
        if let Some(holder) = holder {
            return Err(KgragError::Index(format!(
                "{} is being changed by another kgrag process ({holder}); wait for it to finish",
                self.location()
            )));
        }
        Ok(Box::new(PgLock {
            client: Some(client),
            key,
            handle: self.handle.clone(),
        }))
    }

    fn passages(&self, manifest: &Manifest) -> Result<EmbeddingStore> {
        self.read_passages(manifest)
    }

    fn triples(&self, manifest: &Manifest) -> Result<Vec<Extraction>> {
        self.read_triples(manifest)
    }

    fn method(
        &self,
        manifest: &Manifest,
        method: &dyn Method,
        env: &Env,
        corpus: &Corpus,
    ) -> Result<Arc<dyn MethodIndex>> {
        self.read_method(manifest, method, env, corpus)
    }

    fn commit(&self, new: NewGeneration<'_>) -> Result<Manifest> {
        self.commit_generation(new)
    }

    fn sizes(&self, manifest: &Manifest) -> Result<BTreeMap<String, u64>> {
        self.read_sizes(manifest)
    }

    fn passage_search(&self, manifest: &Manifest) -> Result<Option<Arc<dyn PassageSearch>>> {
        self.search_of(manifest)
    }

    fn work_queue(
        &self,
        options: &crate::distribute::DistributeOptions,
    ) -> Result<Arc<dyn crate::env::WorkQueue>> {
        Ok(Arc::new(PgQueue::open_coordinator(
            &self.config,
            options.clone(),
        )?))
    }
}
