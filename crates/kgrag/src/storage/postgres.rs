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

/// Numbers the load and staging folders of every store of the process (two pipelines of one process must
/// not share one).
static FOLDERS: AtomicU64 = AtomicU64::new(0);
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

use super::{IndexStore, Nearest, NewGeneration, PassageSearch, Pointer, WriterLock};
use crate::config::{StorageBackend, StorageConfig};
use crate::index_dir::{FileEntry, Manifest};
use crate::methods::{Corpus, Env, Method, MethodIndex};
use crate::{KgragError, Result};

/// The schema version this kgrag writes; [`MIGRATIONS`] brings any older schema to it.
pub const SCHEMA_VERSION: i32 = 3;

/// `(version, SQL)`: each migration, applied in order in one transaction. `{s}` is the quoted schema.
const MIGRATIONS: &[(i32, &str)] = &[
    (
    1,
    "create table {s}.generations (
        generation bigint primary key,
        manifest jsonb not null,
        committed_at timestamptz not null default now());
     create table {s}.documents (
        generation bigint not null, ord integer not null, id text not null, doc_id text not null,
        title text, source text not null, chunks text[] not null,
        primary key (generation, ord));
     create table {s}.passages (
        generation bigint not null, ord integer not null, chunk_id text not null, body text not null,
        embedding public.vector not null,
        primary key (generation, ord));
     create table {s}.extractions (
        generation bigint not null, ord integer not null, chunk_id text not null,
        extraction jsonb not null,
        primary key (generation, ord));
     create table {s}.graphs (
        generation bigint not null, method text not null, file text not null,
        node_slots integer not null, edge_slots integer not null,
        primary key (generation, method, file));
     create table {s}.graph_nodes (
        generation bigint not null, method text not null, file text not null, idx integer not null,
        key text not null, kind text not null, name text not null, node jsonb not null,
        primary key (generation, method, file, idx));
     create table {s}.graph_edges (
        generation bigint not null, method text not null, file text not null, idx integer not null,
        a integer not null, b integer not null, edge jsonb not null,
        primary key (generation, method, file, idx));
     create table {s}.method_files (
        generation bigint not null, method text not null, name text not null, sha256 text not null,
        data bytea not null,
        primary key (generation, method, name));
     -- Stored as they are: vector stores and graphs barely compress, and compressing tens of MB costs
     -- seconds per commit.
     alter table {s}.method_files alter column data set storage external;",
    ),
    (
        2,
        // Finished extractions shared between the machines that build the index (a cache across
        // generations, as the local extraction store is).
        "create table {s}.extraction_cache (
        fingerprint text not null, chunk_id text not null, extraction jsonb not null,
        stored_at timestamptz not null default now(),
        primary key (fingerprint, chunk_id));",
    ),
    (
        3,
        // HiRAG's and LeanRAG's layers and HiRAG's communities with their reports, as rows to query
        // (the methods load their index from `method_files`; these are written beside it).
        "create table {s}.hierarchy_nodes (
        generation bigint not null, method text not null, layer integer not null, idx integer not null,
        name text not null, kind text not null, node jsonb not null,
        primary key (generation, method, layer, idx));
     create table {s}.hierarchy_relations (
        generation bigint not null, method text not null, idx integer not null,
        a_layer integer not null, a_idx integer not null, b_layer integer not null, b_idx integer not null,
        relation jsonb not null,
        primary key (generation, method, idx));
     create table {s}.communities (
        generation bigint not null, method text not null, id integer not null, level integer not null,
        title text not null, parent integer, report text not null, community jsonb not null,
        primary key (generation, method, id));",
    ),
];

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

/// The schema's version (0: no schema yet), read without creating anything.
async fn schema_version(client: &Client, schema: &str, secrets: &Secrets) -> Result<i32> {
    let s = quoted(schema);
    let exists: Option<String> = col(
        &client
            .query_one(
                "select to_regclass($1)::text",
                &[&format!("{s}.schema_version")],
            )
            .await
            .map_err(secrets.on("reading the schema version"))?,
        0,
    )?;
    if exists.is_none() {
        return Ok(0);
    }
    col(
        &client
            .query_one(
                &format!("select coalesce(max(version), 0) from {s}.schema_version"),
                &[],
            )
            .await
            .map_err(secrets.on("reading the schema version"))?,
        0,
    )
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

/// Creates the schema and applies the migrations it lacks, under a transaction-level advisory lock (two
/// processes migrating at once apply each migration once). A schema that is current is only read: a
/// role without the right to create anything can open it.
async fn migrate(client: &mut Client, schema: &str, secrets: &Secrets) -> Result<()> {
    let found = schema_version(client, schema, secrets).await?;
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    if found > SCHEMA_VERSION {
        return Err(KgragError::Database(format!(
            "the schema {schema:?} has version {found}; this kgrag knows versions up to {SCHEMA_VERSION}: \
             use a newer kgrag"
        )));
    }
    let s = quoted(schema);
    let tx = client
        .transaction()
        .await
        .map_err(secrets.on("starting the migration"))?;
    tx.execute(
        "select pg_advisory_xact_lock($1)",
        &[&lock_key("kgrag migrate")],
    )
    .await
    .map_err(secrets.on("locking for the migration"))?;
    tx.batch_execute(&format!(
        "create extension if not exists vector with schema public;
         create schema if not exists {s};
         create table if not exists {s}.schema_version (
            version integer primary key,
            applied_at timestamptz not null default now());"
    ))
    .await
    .map_err(
        secrets.on("creating the schema (the pgvector extension must be installed on the server)"),
    )?;
    let current: i32 = col(
        &tx.query_one(
            &format!("select coalesce(max(version), 0) from {s}.schema_version"),
            &[],
        )
        .await
        .map_err(secrets.on("reading the schema version"))?,
        0,
    )?;
    if current > SCHEMA_VERSION {
        return Err(KgragError::Database(format!(
            "the schema {schema:?} has version {current}; this kgrag knows versions up to {SCHEMA_VERSION}: \
             use a newer kgrag"
        )));
    }
    for (version, sql) in MIGRATIONS {
        if *version <= current {
            continue;
        }
        tx.batch_execute(&sql.replace("{s}", &s))
            .await
            .map_err(secrets.on("migrating the schema"))?;
        tx.execute(
            &format!("insert into {s}.schema_version (version) values ($1)"),
            &[version],
        )
        .await
        .map_err(secrets.on("recording the schema version"))?;
    }
    tx.commit()
        .await
        .map_err(secrets.on("committing the migration"))?;
    Ok(())
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

impl PgStore {
    /// Connects to the database named by `config.url_env` and brings the schema up to date. `root` is
    /// the index directory (caches, `storage.json`).
    pub fn connect(root: &Path, config: &StorageConfig) -> Result<Self> {
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

    /// Writes `new` in one transaction on a connection of its own (in a thread with its own runtime, so
    /// that the generation's data is streamed from borrows).
    async fn write(&self, new: &NewGeneration<'_>, stage: &Path) -> Result<Manifest> {
        let s = self.s();
        let secrets = &self.secrets;
        let mut client = connect(&self.db, "kgrag writer", secrets).await?;
        let tx = client
            .transaction()
            .await
            .map_err(secrets.on("starting the commit"))?;
        tx.batch_execute(&format!(
            "set local search_path = {s}, public; lock table {s}.generations in exclusive mode"
        ))
        .await
        .map_err(secrets.on("locking the generations"))?;
        let head: Option<i64> = col(
            &tx.query_one(&format!("select max(generation) from {s}.generations"), &[])
                .await
                .map_err(secrets.on("reading the committed generation"))?,
            0,
        )?;
        let head = head.map(|g| g as u64);
        if let (Some(head), Some(mine)) = (head, new.opened) {
            if head != mine {
                return Err(KgragError::Index(format!(
                    "{} changed while this change was being built (generation {mine} was opened, {head} is \
                     committed now); nothing was written — run the command again",
                    self.location()
                )));
            }
        }
        let generation = head.unwrap_or(0).max(new.opened.unwrap_or(0)) + 1;
        let g = generation as i64;
        // Leftovers of this number (none: a failed transaction leaves nothing; a generation number is
        // reused only after a forced rebuild removed its row) go first.
        for t in GENERATION_TABLES {
            tx.execute(&format!("delete from {s}.{t} where generation = $1"), &[&g])
                .await
                .map_err(secrets.on("clearing the generation"))?;
        }
        let mut manifest = new.manifest.clone();
        manifest.generation = generation;
        manifest.files = Vec::new();

        // Documents.
        {
            let mut copy = Copy::start(&tx, &format!("copy {s}.documents (generation, ord, id, doc_id, title, source, chunks) from stdin binary"), &[
                Type::INT8,
                Type::INT4,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT_ARRAY,
            ], "writing the documents", secrets).await?;
            for (i, d) in manifest.documents.iter().enumerate() {
                let chunks: Vec<&str> = d.chunks.iter().map(|c| c.as_str()).collect();
                let ord = i as i32;
                copy.row(&[
                    &g,
                    &ord,
                    &d.id,
                    &d.doc_id.as_str(),
                    &d.title,
                    &d.source,
                    &chunks,
                ])
                .await?;
            }
            copy.finish().await?;
        }

        // Passages with their vectors.
        let vector_type = tx
            .prepare("select $1::public.vector")
            .await
            .map_err(secrets.on("looking up the vector type"))?
            .params()
            .first()
            .cloned()
            .ok_or_else(|| KgragError::Database("the vector type has no parameter".into()))?;
        let dim = new.passages.dim().unwrap_or(0);
        {
            let mut copy = Copy::start(&tx, &format!("copy {s}.passages (generation, ord, chunk_id, body, embedding) from stdin binary"), &[
                Type::INT8,
                Type::INT4,
                Type::TEXT,
                Type::TEXT,
                vector_type.clone(),
            ], "writing the passages", secrets).await?;
            let data = new
                .passages
                .index()
                .map(|i| i.as_slice())
                .unwrap_or_default();
            for (row, (key, text)) in new
                .passages
                .keys()
                .iter()
                .zip(new.passages.texts())
                .enumerate()
            {
                let v = Vector::from(data[row * dim..(row + 1) * dim].to_vec());
                let ord = row as i32;
                let body: &str = text;
                copy.row(&[&g, &ord, key, &body, &v]).await?;
            }
            copy.finish().await?;
        }

        // Extractions.
        {
            let mut copy = Copy::start(&tx, &format!("copy {s}.extractions (generation, ord, chunk_id, extraction) from stdin binary"), &[Type::INT8, Type::INT4, Type::TEXT, Type::JSONB], "writing the extractions", secrets).await?;
            for (i, x) in new.triples.iter().enumerate() {
                let ord = i as i32;
                copy.row(&[&g, &ord, &x.chunk_id.as_str(), &Json(x)])
                    .await?;
            }
            copy.finish().await?;
        }

        // Each method's index: its graphs as rows, its other files as checksummed blobs.
        for (name, index) in new.methods {
            let mdir = stage.join(name);
            std::fs::create_dir_all(&mdir).map_err(|source| KgragError::Io {
                path: mdir.clone(),
                source,
            })?;
            let saved = index.save(&mdir)?;
            let graphs = index.graphs();
            let mut files = Vec::new();
            for f in saved {
                let path = mdir.join(&f);
                let bytes = std::fs::read(&path).map_err(|source| KgragError::Io {
                    path: path.clone(),
                    source,
                })?;
                let sha = hex::encode(Sha256::digest(&bytes));
                files.push(FileEntry {
                    path: format!("{name}/{f}"),
                    bytes: bytes.len() as u64,
                    sha256: sha.clone(),
                });
                if let Some((_, graph)) = graphs.iter().find(|(file, _)| *file == f) {
                    write_graph(&tx, &s, g, name, &f, graph, secrets).await?;
                } else {
                    tx.execute(
                        &format!(
                            "insert into {s}.method_files (generation, method, name, sha256, data) \
                             values ($1, $2, $3, $4, $5)"
                        ),
                        &[&g, name, &f, &sha, &bytes],
                    )
                    .await
                    .map_err(secrets.on("writing a method's index"))?;
                }
                let _ = std::fs::remove_file(&path);
            }
            if let Some(entry) = manifest.methods.get_mut(name) {
                entry.files = files;
            }
            write_projections(&tx, &s, g, name, index.as_ref(), secrets).await?;
        }

        // The HNSW index of this generation's vectors, from the threshold up (pgvector indexes `vector`
        // up to 2,000 dimensions; above, the search stays exact).
        if dim > HNSW_MAX_DIM && new.passages.len() >= self.tuning().hnsw_min_rows {
            crate::progress::say(&format!(
                "note: no HNSW index: pgvector indexes at most {HNSW_MAX_DIM} dimensions, the passage vectors \
                 have {dim}; the dense strategy searches them exactly"
            ));
        }
        if dim > 0 && dim <= HNSW_MAX_DIM && new.passages.len() >= self.tuning().hnsw_min_rows {
            tx.batch_execute(&format!(
                "create index {name} on {s}.passages using hnsw ((embedding::public.vector({dim})) \
                 public.vector_cosine_ops) with (m = {m}, ef_construction = {ef}) where generation = {g}",
                name = hnsw_name(generation),
                m = self.tuning().hnsw_m,
                ef = self.tuning().hnsw_ef_construction,
            ))
            .await
            .map_err(secrets.on("building the HNSW index"))?;
        }

        if let Some(ms) = std::env::var("KGRAG_TEST_PG_STALL_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            // Tests kill the server here, inside the transaction, every row written.
            eprintln!("kgrag: test stall: generation {generation} written, not committed");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }

        let json = serde_json::to_value(&manifest)?;
        tx.execute(
            // The commit's own time (now() would be the transaction's start): the grace period of the
            // generation it replaces counts from here.
            &format!(
                "insert into {s}.generations (generation, manifest, committed_at) \
                 values ($1, $2, clock_timestamp())"
            ),
            &[&g, &json],
        )
        .await
        .map_err(secrets.on("writing the manifest"))?;
        tx.commit()
            .await
            .map_err(secrets.on("committing the generation"))?;

        // Committed. The clean-up below only frees space: its failure is a note, not an error.
        if let Err(err) = self.remove_replaced(&mut client, g).await {
            crate::progress::say(&format!(
                "note: generation {generation} is committed, but removing old generations failed ({err}); \
                 the next commit tries again"
            ));
        }
        Ok(manifest)
    }

    /// Removes the generations before the previous one (`committed - 1`) that were replaced longer than
    /// `replaced_grace_secs` ago, in one transaction (their `generations` rows first, so no reader starts
    /// on them), then their HNSW indexes (concurrently: readers are not blocked).
    async fn remove_replaced(&self, client: &mut Client, committed: i64) -> Result<()> {
        let s = self.s();
        let secrets = &self.secrets;
        let grace = self.tuning().replaced_grace_secs as f64;
        let tx = client
            .transaction()
            .await
            .map_err(secrets.on("starting the clean-up"))?;
        let mut old: Vec<i64> = Vec::new();
        for r in tx
            .query(
                &format!(
                    "select o.generation from {s}.generations o where o.generation < $1 and exists \
                     (select 1 from {s}.generations n where n.generation > o.generation \
                      and n.committed_at <= clock_timestamp() - make_interval(secs => $2))"
                ),
                &[&(committed - 1), &grace],
            )
            .await
            .map_err(secrets.on("listing old generations"))?
        {
            old.push(col(&r, 0)?);
        }
        if old.is_empty() {
            return Ok(());
        }
        let mut tables = GENERATION_TABLES.to_vec();
        tables.rotate_right(1); // `generations` first
        for t in tables {
            tx.execute(
                &format!("delete from {s}.{t} where generation = any($1)"),
                &[&old],
            )
            .await
            .map_err(secrets.on("removing old generations"))?;
        }
        tx.commit()
            .await
            .map_err(secrets.on("removing old generations"))?;
        for o in &old {
            client
                .batch_execute(&format!(
                    "drop index concurrently if exists {s}.{}",
                    hnsw_name(*o as u64)
                ))
                .await
                .map_err(secrets.on("removing an old HNSW index"))?;
        }
        Ok(())
    }

    /// Writes a method's files into `dir`: blobs as stored, graphs rebuilt from their rows and written as
    /// their file; every file is checked against the manifest's checksum.
    fn materialise(&self, manifest: &Manifest, method: &str, dir: &Path) -> Result<()> {
        let g = manifest.generation as i64;
        let m = method.to_owned();
        type GraphRows = (
            String,
            (u32, u32),
            Vec<(u32, Node)>,
            Vec<(u32, u32, u32, Edge)>,
        );
        let (blobs, graphs): (Vec<(String, Vec<u8>)>, Vec<GraphRows>) =
            self.snapshot(manifest.generation, move |client, secrets, s| async move {
                let mut blobs = Vec::new();
                for r in client
                    .query(
                        &format!(
                            "select name, data from {s}.method_files where generation = $1 and method = $2 \
                             order by name"
                        ),
                        &[&g, &m],
                    )
                    .await
                    .map_err(secrets.on("reading a method's index"))?
                {
                    blobs.push((col::<String>(&r, 0)?, col::<Vec<u8>>(&r, 1)?));
                }
                let mut graphs = Vec::new();
                for r in client
                    .query(
                        &format!(
                            "select file, node_slots, edge_slots from {s}.graphs where generation = $1 and \
                             method = $2 order by file"
                        ),
                        &[&g, &m],
                    )
                    .await
                    .map_err(secrets.on("reading a graph"))?
                {
                    let file: String = col(&r, 0)?;
                    let slots = |i: usize| -> Result<u32> {
                        u32::try_from(col::<i32>(&r, i)?).map_err(|_| {
                            KgragError::Index(format!("the graph {file} has a negative slot count"))
                        })
                    };
                    let bounds = (slots(1)?, slots(2)?);
                    let mut nodes = Vec::new();
                    for r in client
                        .query(
                            &format!(
                                "select idx, node from {s}.graph_nodes where generation = $1 and method = $2 \
                                 and file = $3 order by idx"
                            ),
                            &[&g, &m, &file],
                        )
                        .await
                        .map_err(secrets.on("reading a graph's nodes"))?
                    {
                        nodes.push((index(col(&r, 0)?)?, col::<Json<Node>>(&r, 1)?.0));
                    }
                    let mut edges = Vec::new();
                    for r in client
                        .query(
                            &format!(
                                "select idx, a, b, edge from {s}.graph_edges where generation = $1 and \
                                 method = $2 and file = $3 order by idx"
                            ),
                            &[&g, &m, &file],
                        )
                        .await
                        .map_err(secrets.on("reading a graph's edges"))?
                    {
                        edges.push((
                            index(col(&r, 0)?)?,
                            index(col(&r, 1)?)?,
                            index(col(&r, 2)?)?,
                            col::<Json<Edge>>(&r, 3)?.0,
                        ));
                    }
                    // More slots than rows is what a hand-edited table looks like: refuse it before
                    // allocating them.
                    if bounds.0 as usize > 4 * nodes.len() + 1_000_000
                        || bounds.1 as usize > 4 * edges.len() + 1_000_000
                    {
                        return Err(KgragError::Index(format!(
                            "the graph {file} claims {} node and {} edge slots for {} nodes and {} edges",
                            bounds.0,
                            bounds.1,
                            nodes.len(),
                            edges.len()
                        )));
                    }
                    graphs.push((file, bounds, nodes, edges));
                }
                Ok((blobs, graphs))
            })?;
        std::fs::create_dir_all(dir).map_err(|source| KgragError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        for (name, bytes) in blobs {
            safe_name(&name)?;
            let path = dir.join(&name);
            std::fs::write(&path, bytes).map_err(|source| KgragError::Io { path, source })?;
        }
        for (file, bounds, nodes, edges) in graphs {
            safe_name(&file)?;
            let graph = KnowledgeGraph::from_rows(bounds, nodes, edges)?;
            graph.save(&dir.join(&file))?;
        }
        let entry = manifest
            .methods
            .get(method)
            .ok_or_else(|| self.gone(manifest.generation))?;
        for f in &entry.files {
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|_| self.gone(manifest.generation))?;
            let sha = hex::encode(Sha256::digest(&bytes));
            if sha != f.sha256 {
                return Err(KgragError::Index(format!(
                    "{method}/{name} of generation {} in {} does not match its checksum: the rows were \
                     changed outside kgrag; rebuild with `kgrag index --force`",
                    manifest.generation,
                    self.location()
                )));
            }
        }
        Ok(())
    }
}

/// PostgreSQL's text cannot hold the character U+0000: a document with one is refused before anything
/// is written, naming it (the local backend stores it).
fn check_storable(new: &NewGeneration<'_>) -> Result<()> {
    let bad = |what: String| {
        Err(KgragError::Input(format!(
            "{what} holds the character U+0000, which PostgreSQL cannot store; remove it from the document \
             (the local backend stores it)"
        )))
    };
    for d in &new.manifest.documents {
        if d.id.contains('\0') || d.source.contains('\0') {
            return bad(format!("the id or source of document {:?}", d.id));
        }
        if d.title.as_deref().is_some_and(|t| t.contains('\0')) {
            return bad(format!("the title of document {:?}", d.id));
        }
    }
    for (key, text) in new.passages.keys().iter().zip(new.passages.texts()) {
        if text.contains('\0') {
            return bad(format!("chunk {key}"));
        }
    }
    Ok(())
}

/// A binary `COPY … from stdin` in progress: rows streamed to the server, errors naming what was written.
struct Copy<'a> {
    writer: std::pin::Pin<Box<BinaryCopyInWriter>>,
    what: &'static str,
    secrets: &'a Secrets,
}

impl<'a> Copy<'a> {
    async fn start(
        tx: &tokio_postgres::Transaction<'_>,
        sql: &str,
        types: &[Type],
        what: &'static str,
        secrets: &'a Secrets,
    ) -> Result<Copy<'a>> {
        let sink = tx
            .copy_in::<_, Bytes>(sql)
            .await
            .map_err(secrets.on(what))?;
        Ok(Copy {
            writer: Box::pin(BinaryCopyInWriter::new(sink, types)),
            what,
            secrets,
        })
    }

    async fn row(&mut self, values: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> Result<()> {
        self.writer
            .as_mut()
            .write(values)
            .await
            .map_err(self.secrets.on(self.what))
    }

    async fn finish(mut self) -> Result<()> {
        self.writer
            .as_mut()
            .finish()
            .await
            .map(|_| ())
            .map_err(self.secrets.on(self.what))
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

fn hnsw_name(generation: u64) -> String {
    format!("passages_hnsw_g{generation}")
}

/// HiRAG's and LeanRAG's hierarchy (every layer's nodes, the relations) and HiRAG's communities with
/// their reports, as rows of `hierarchy_nodes`, `hierarchy_relations` and `communities`.
async fn write_projections(
    tx: &tokio_postgres::Transaction<'_>,
    s: &str,
    g: i64,
    method: &str,
    index: &dyn MethodIndex,
    secrets: &Secrets,
) -> Result<()> {
    let hirag = crate::methods::hirag_index(index);
    let hierarchy = match (hirag, crate::methods::leanrag_index(index)) {
        (Some(h), _) => h.hierarchy(),
        (None, Some(l)) => l.hierarchy(),
        (None, None) => return Ok(()),
    };
    let mut copy = Copy::start(
        tx,
        &format!(
            "copy {s}.hierarchy_nodes (generation, method, layer, idx, name, kind, node) from stdin binary"
        ),
        &[
            Type::INT8,
            Type::TEXT,
            Type::INT4,
            Type::INT4,
            Type::TEXT,
            Type::TEXT,
            Type::JSONB,
        ],
        "writing the hierarchy's nodes",
        secrets,
    )
    .await?;
    for n in hierarchy.layers.iter().flatten() {
        let kind = serde_json::to_value(n.kind)?;
        let kind = kind.as_str().unwrap_or_default();
        let (layer, idx) = (n.id.layer as i32, n.id.idx as i32);
        // Without its vector: no use in SQL, and the index in `method_files` has it.
        let mut row = serde_json::to_value(n)?;
        if let Some(o) = row.as_object_mut() {
            o.remove("embedding");
        }
        copy.row(&[&g, &method, &layer, &idx, &n.name, &kind, &row])
            .await?;
    }
    copy.finish().await?;
    let mut copy = Copy::start(
        tx,
        &format!(
            "copy {s}.hierarchy_relations (generation, method, idx, a_layer, a_idx, b_layer, b_idx, \
             relation) from stdin binary"
        ),
        &[
            Type::INT8,
            Type::TEXT,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::JSONB,
        ],
        "writing the hierarchy's relations",
        secrets,
    )
    .await?;
    for (i, r) in hierarchy.relations.iter().enumerate() {
        let ids = [
            i as i32,
            r.a.layer as i32,
            r.a.idx as i32,
            r.b.layer as i32,
            r.b.idx as i32,
        ];
        copy.row(&[
            &g,
            &method,
            &ids[0],
            &ids[1],
            &ids[2],
            &ids[3],
            &ids[4],
            &Json(r),
        ])
        .await?;
    }
    copy.finish().await?;
    if let Some(h) = hirag {
        let mut copy = Copy::start(
            tx,
            &format!(
                "copy {s}.communities (generation, method, id, level, title, parent, report, community) \
                 from stdin binary"
            ),
            &[
                Type::INT8,
                Type::TEXT,
                Type::INT4,
                Type::INT4,
                Type::TEXT,
                Type::INT4,
                Type::TEXT,
                Type::JSONB,
            ],
            "writing the communities",
            secrets,
        )
        .await?;
        for c in h.communities() {
            let (id, level, parent) = (c.id as i32, c.level as i32, c.parent.map(|p| p as i32));
            copy.row(&[
                &g,
                &method,
                &id,
                &level,
                &c.title,
                &parent,
                &c.report_string,
                &Json(c),
            ])
            .await?;
        }
        copy.finish().await?;
    }
    Ok(())
}

async fn write_graph(
    tx: &tokio_postgres::Transaction<'_>,
    s: &str,
    g: i64,
    method: &str,
    file: &str,
    graph: &KnowledgeGraph,
    secrets: &Secrets,
) -> Result<()> {
    let (bounds, nodes, edges) = graph.rows();
    tx.execute(
        &format!(
            "insert into {s}.graphs (generation, method, file, node_slots, edge_slots) values ($1, $2, $3, $4, $5)"
        ),
        &[&g, &method, &file, &(bounds.0 as i32), &(bounds.1 as i32)],
    )
    .await
    .map_err(secrets.on("writing a graph"))?;
    {
        let mut copy = Copy::start(tx, &format!("copy {s}.graph_nodes (generation, method, file, idx, key, kind, name, node) from stdin binary"), &[
            Type::INT8,
            Type::TEXT,
            Type::TEXT,
            Type::INT4,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::JSONB,
        ], "writing a graph's nodes", secrets).await?;
        for (i, n) in nodes {
            let idx = i as i32;
            copy.row(&[
                &g,
                &method,
                &file,
                &idx,
                &n.key,
                &n.kind.as_str(),
                &n.name,
                &Json(n),
            ])
            .await?;
        }
        copy.finish().await?;
    }
    let mut copy = Copy::start(
        tx,
        &format!(
            "copy {s}.graph_edges (generation, method, file, idx, a, b, edge) from stdin binary"
        ),
        &[
            Type::INT8,
            Type::TEXT,
            Type::TEXT,
            Type::INT4,
            Type::INT4,
            Type::INT4,
            Type::JSONB,
        ],
        "writing a graph's edges",
        secrets,
    )
    .await?;
    for (i, a, b, edge) in edges {
        let (idx, a, b) = (i as i32, a as i32, b as i32);
        copy.row(&[&g, &method, &file, &idx, &a, &b, &Json(edge)])
            .await?;
    }
    copy.finish().await?;
    Ok(())
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
    fn location(&self) -> String {
        format!(
            "PostgreSQL schema {:?} (the database in ${})",
            self.config.schema, self.config.url_env
        )
    }

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
        let value: Option<serde_json::Value> = self.read(|client, secrets, s| async move {
            let row = client
                .query_opt(
                    &format!(
                        "select manifest from {s}.generations order by generation desc limit 1"
                    ),
                    &[],
                )
                .await
                .map_err(secrets.on("reading the committed generation"))?;
            row.map(|r| col(&r, 0)).transpose()
        })?;
        value
            .map(|v| {
                serde_json::from_value(v).map_err(|e| {
                    KgragError::Index(format!(
                        "the manifest in {} does not parse ({e}); rebuild with `kgrag index --force`",
                        self.location()
                    ))
                })
            })
            .transpose()
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
        let g = manifest.generation as i64;
        let rows: Vec<(String, String, Vec<f32>)> =
            self.snapshot(manifest.generation, move |client, secrets, s| async move {
                let rows = client
                    .query(
                        &format!(
                            "select chunk_id, body, embedding from {s}.passages where generation = $1 \
                             order by ord"
                        ),
                        &[&g],
                    )
                    .await
                    .map_err(secrets.on("reading the passages"))?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    out.push((col(r, 0)?, col(r, 1)?, col::<Vector>(r, 2)?.to_vec()));
                }
                Ok(out)
            })?;
        if rows.len() != manifest.chunks {
            return Err(self.gone(manifest.generation));
        }
        let dim = rows
            .first()
            .map_or(manifest.embedder.dimension, |r| r.2.len());
        let mut keys = Vec::with_capacity(rows.len());
        let mut texts = Vec::with_capacity(rows.len());
        let mut vectors = Vec::with_capacity(rows.len() * dim);
        for (k, t, v) in rows {
            if v.len() != dim {
                return Err(KgragError::Index(format!(
                    "passage {k} of {} has a {}-d vector, the others {dim}-d",
                    self.location(),
                    v.len()
                )));
            }
            keys.push(k);
            texts.push(Arc::from(t));
            vectors.extend_from_slice(&v);
        }
        Ok(EmbeddingStore::from_stored(
            "passages", keys, texts, dim, vectors,
        )?)
    }

    fn triples(&self, manifest: &Manifest) -> Result<Vec<Extraction>> {
        let g = manifest.generation as i64;
        self.snapshot(manifest.generation, move |client, secrets, s| async move {
            let rows = client
                .query(
                    &format!(
                        "select extraction from {s}.extractions where generation = $1 order by ord"
                    ),
                    &[&g],
                )
                .await
                .map_err(secrets.on("reading the extractions"))?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(col::<Json<Extraction>>(r, 0)?.0);
            }
            Ok(out)
        })
    }

    fn method(
        &self,
        manifest: &Manifest,
        method: &dyn Method,
        env: &Env,
        corpus: &Corpus,
    ) -> Result<Arc<dyn MethodIndex>> {
        let n = FOLDERS.fetch_add(1, Ordering::Relaxed);
        if manifest
            .methods
            .get(method.name())
            .is_some_and(|e| e.files.is_empty())
        {
            // Nothing stored (the dense method's index is the passage store).
            let empty = std::env::temp_dir().join("kgrag-pg-nothing");
            return method.load(&empty, env, corpus);
        }
        // Outside the index directory: a reader needs no right to write there.
        let dir = std::env::temp_dir().join(format!("kgrag-pg-load-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let result = self
            .materialise(manifest, method.name(), &dir.join(method.name()))
            .and_then(|()| method.load(&dir.join(method.name()), env, corpus));
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    fn commit(&self, new: NewGeneration<'_>) -> Result<Manifest> {
        let n = FOLDERS.fetch_add(1, Ordering::Relaxed);
        check_storable(&new)?;
        let stage = std::env::temp_dir().join(format!("kgrag-pg-stage-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&stage);
        std::fs::create_dir_all(&stage).map_err(|source| KgragError::Io {
            path: stage.clone(),
            source,
        })?;
        // The generation is streamed from borrows: a thread of its own with a runtime of its own.
        let result = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|source| KgragError::Io {
                            path: stage.clone(),
                            source,
                        })?;
                    rt.block_on(self.write(&new, &stage))
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(KgragError::Database(
                        "the commit's thread panicked".to_owned(),
                    ))
                })
        });
        let _ = std::fs::remove_dir_all(&stage);
        result
    }

    fn sizes(&self, manifest: &Manifest) -> Result<BTreeMap<String, u64>> {
        let g = manifest.generation as i64;
        let parts: Vec<(String, i64)> = self.read(|client, secrets, s| async move {
            let sql = format!(
                "select 'documents', coalesce(sum(pg_column_size(t.*)), 0)::bigint from {s}.documents t where generation = $1
                 union all select 'passages', coalesce(sum(pg_column_size(t.*)), 0)::bigint from {s}.passages t where generation = $1
                 union all select 'extractions', coalesce(sum(pg_column_size(t.*)), 0)::bigint from {s}.extractions t where generation = $1
                 union all select method, sum(b)::bigint from (
                    select method, pg_column_size(t.*) as b from {s}.method_files t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.graph_nodes t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.graph_edges t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.hierarchy_nodes t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.hierarchy_relations t where generation = $1
                    union all select method, pg_column_size(t.*) from {s}.communities t where generation = $1) x
                   group by method"
            );
            let rows = client
                .query(&sql, &[&g])
                .await
                .map_err(secrets.on("measuring the generation"))?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push((col(r, 0)?, col(r, 1)?));
            }
            Ok(out)
        })?;
        let mut out: BTreeMap<String, u64> = parts
            .into_iter()
            .map(|(k, v)| (k, v.max(0) as u64))
            .collect();
        for name in manifest.methods.keys() {
            out.entry(name.clone()).or_insert(0);
        }
        Ok(out)
    }

    fn shares_extractions(&self) -> bool {
        true
    }

    fn shared_extractions(
        &self,
        fingerprint: &str,
        chunks: &[kgrag_types::ChunkId],
    ) -> Result<Vec<Extraction>> {
        let fingerprint = fingerprint.to_owned();
        let ids: Vec<String> = chunks.iter().map(|c| c.as_str().to_owned()).collect();
        let (found, unreadable) = self.read(move |client, secrets, s| async move {
            let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
            let (mut out, mut unreadable) = (Vec::new(), 0usize);
            for part in ids.chunks(SHARE_BATCH) {
                for r in client
                    .query(
                        &format!(
                            "select chunk_id, extraction from {s}.extraction_cache where fingerprint = $1 \
                             and chunk_id = any($2)"
                        ),
                        &[&fingerprint, &part],
                    )
                    .await
                    .map_err(secrets.on("reading the shared extractions"))?
                {
                    // A row another version wrote, or one changed by hand, is skipped (extracted
                    // here), as the local store skips an entry it cannot read.
                    let x = col::<String>(&r, 0).and_then(|id| {
                        let v: serde_json::Value = col(&r, 1)?;
                        let x: Extraction = serde_json::from_value(v)?;
                        Ok((id, x))
                    });
                    match x {
                        Ok((id, x)) if wanted.contains(id.as_str()) && x.chunk_id.as_str() == id => {
                            out.push(x)
                        }
                        _ => unreadable += 1,
                    }
                }
            }
            Ok((out, unreadable))
        })?;
        if unreadable > 0 {
            crate::progress::say(&format!(
                "note: {unreadable} shared extractions in {} could not be read; those chunks are extracted \
                 here",
                self.location()
            ));
        }
        Ok(found)
    }

    fn share_extractions(&self, fingerprint: &str, found: &[Extraction]) -> Result<()> {
        if found.is_empty() {
            return Ok(());
        }
        let fingerprint = fingerprint.to_owned();
        let mut rows: Vec<(String, serde_json::Value)> = Vec::with_capacity(found.len());
        for x in found {
            rows.push((x.chunk_id.as_str().to_owned(), serde_json::to_value(x)?));
        }
        // One order for every writer (no deadlock between two machines sharing overlapping chunks).
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        self.read(move |client, secrets, s| async move {
            for part in rows.chunks(SHARE_BATCH) {
                let ids: Vec<&str> = part.iter().map(|(id, _)| id.as_str()).collect();
                let mut present = std::collections::HashSet::new();
                for r in client
                    .query(
                        &format!(
                            "select chunk_id from {s}.extraction_cache where fingerprint = $1 \
                             and chunk_id = any($2)"
                        ),
                        &[&fingerprint, &ids],
                    )
                    .await
                    .map_err(secrets.on("reading the shared extractions"))?
                {
                    present.insert(col::<String>(&r, 0)?);
                }
                let (ids, values): (Vec<&str>, Vec<&serde_json::Value>) = part
                    .iter()
                    .filter(|(id, _)| !present.contains(id))
                    .map(|(id, v)| (id.as_str(), v))
                    .unzip();
                if ids.is_empty() {
                    continue;
                }
                client
                    .execute(
                        &format!(
                            "insert into {s}.extraction_cache (fingerprint, chunk_id, extraction) \
                             select $1, c, x from unnest($2::text[], $3::jsonb[]) as t(c, x) \
                             on conflict do nothing"
                        ),
                        &[&fingerprint, &ids, &values],
                    )
                    .await
                    .map_err(secrets.on("sharing the extractions"))?;
            }
            Ok(())
        })
    }

    fn passage_search(&self, manifest: &Manifest) -> Result<Option<Arc<dyn PassageSearch>>> {
        if manifest.chunks == 0 {
            return Ok(None);
        }
        let g = manifest.generation;
        let name = hnsw_name(g);
        let schema = self.config.schema.clone();
        let hnsw: bool = self.read(|client, secrets, _| async move {
            let row = client
                .query_opt(
                    "select 1 from pg_indexes where schemaname = $1 and indexname = $2",
                    &[&schema, &name],
                )
                .await
                .map_err(secrets.on("looking for the HNSW index"))?;
            Ok(row.is_some())
        })?;
        // HNSW searches get a session of their own, set once: the index always (no scan or sort: a small
        // table would otherwise be scanned and sorted, which is exact, not what was asked for), its
        // ef_search, and strict-order
        // iterative scans so that a limit above ef_search is still filled in distance order.
        let client = if hnsw {
            let (db, secrets) = (self.db.clone(), self.secrets.clone());
            let ef = self.tuning().hnsw_ef_search;
            Arc::new(block(&self.handle, async move {
                let client = connect(&db, "kgrag hnsw reader", &secrets).await?;
                client
                    .batch_execute(&format!(
                        "set enable_seqscan = off; set enable_sort = off; set hnsw.ef_search = {ef}; \
                         set hnsw.iterative_scan = strict_order; set jit = off"
                    ))
                    .await
                    .map_err(secrets.on("setting up the HNSW session"))?;
                Ok(client)
            })?)
        } else {
            self.reader()?
        };
        Ok(Some(Arc::new(PgSearch {
            client,
            _runtime: self.runtime.clone(),
            handle: self.handle.clone(),
            secrets: self.secrets.clone(),
            s: self.s(),
            generation: g,
            hnsw,
        })))
    }
}

/// The dense strategy's search of one generation's passage vectors with pgvector.
struct PgSearch {
    client: Arc<Client>,
    /// Keeps the runtime (and the connection's task) alive as long as the search.
    _runtime: Arc<Runtime>,
    handle: tokio::runtime::Handle,
    secrets: Secrets,
    s: String,
    generation: u64,
    hnsw: bool,
}

#[async_trait]
impl PassageSearch for PgSearch {
    async fn nearest(&self, query: &[f32], k: usize) -> Result<Option<Nearest>> {
        let (client, secrets, s) = (self.client.clone(), self.secrets.clone(), self.s.clone());
        let (g, hnsw, dim) = (self.generation as i64, self.hnsw, query.len());
        let limit = k.max(1) as i64;
        let q = Vector::from(query.to_vec());
        let (tx, rx) = futures_channel::oneshot::channel();
        self.handle.spawn(async move {
            let out = async {
                let e = |err| secrets.err("searching the passage vectors", err);
                let mut hits = Vec::new();
                let mut range = None;
                if hnsw {
                    // The partial expression index of this generation: the generation and the dimension
                    // are literals of the query, as in the index's definition.
                    for r in client
                        .query(
                            &format!(
                                "select ord, 1 - (embedding::public.vector({dim}) operator(public.<=>) \
                                 $1::public.vector({dim})) from {s}.passages where generation = {g} \
                                 order by embedding::public.vector({dim}) operator(public.<=>) \
                                 $1::public.vector({dim}) limit $2"
                            ),
                            &[&q, &limit],
                        )
                        .await
                        .map_err(e)?
                    {
                        hits.push((index(col(&r, 0)?)? as usize, col::<f64>(&r, 1)?));
                    }
                } else {
                    // Every passage's cosine, the best k returned with the range of all of them (the
                    // in-memory search normalises by it).
                    for r in client
                        .query(
                            &format!(
                                "select ord, c, min(c) over (), max(c) over () from (select ord, \
                                 1 - (embedding operator(public.<=>) $1) as c from {s}.passages \
                                 where generation = $2) t order by c desc, ord limit $3"
                            ),
                            &[&q, &g, &limit],
                        )
                        .await
                        .map_err(e)?
                    {
                        hits.push((index(col(&r, 0)?)? as usize, col::<f64>(&r, 1)?));
                        range = Some((col::<f64>(&r, 2)?, col::<f64>(&r, 3)?));
                    }
                }
                Ok::<_, KgragError>(Nearest { hits, range })
            }
            .await;
            let _ = tx.send(out);
        });
        let found = rx
            .await
            .map_err(|_| KgragError::Database("the database task stopped".into()))??;
        if found.hits.is_empty() {
            // Replaced and removed since it was opened (a generation with passages has rows).
            return Ok(None);
        }
        Ok(Some(found))
    }
}
