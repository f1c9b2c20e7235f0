//! The work queue of a distributed build (`jobs`, `workers`) and the caches its jobs fill
//! (`extraction_cache`, `embedding_cache`, `llm_cache`); see [`crate::distribute`].
//!
//! A job is claimed with `FOR UPDATE SKIP LOCKED` in batches, under a lease its worker renews while it
//! works (no transaction is held open across a model call); a claim takes jobs that are queued and due,
//! or running with a lease run out (their worker died). Each claim counts an attempt; a job that fails
//! waits `2^attempts` seconds before it is due again, and one whose attempts are spent is parked as
//! `failed` with its error. A result is written with `ON CONFLICT DO NOTHING` and its job marked done in
//! the same statement (the first write wins). Every statement that fails because the server went away (a restart, a network
//! cut) is tried again with backoff for up to [`PATIENCE`]; the queue's own connection is made again.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;

use super::*;
use crate::distribute::DistributeOptions;
use crate::env::FailedJob;

mod coordinator;
mod status;
mod worker;

pub use status::QueueStatus;
pub use worker::{Claimed, JobResult};

/// The advisory lock a coordinator's queue connection holds while a build of `schema` runs.
fn coordinator_key(schema: &str) -> i64 {
    lock_key(&format!("kgrag coordinator {schema}"))
}

/// How long a statement is retried while the server cannot be reached.
pub const PATIENCE: Duration = Duration::from_secs(600);

/// How often a waiting coordinator looks at its jobs.
const POLL: Duration = Duration::from_millis(10);

/// How often a coordinator says how the queue is doing.
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// A worker not seen for this long is not counted as alive.
const ALIVE_SECS: f64 = 30.0;

/// Rows per statement when jobs are queued or results read.
const BATCH: usize = 2000;

/// The work queue in one schema. Cheap to clone; its statements run on a runtime of its own, so any
/// executor may await it.
#[derive(Clone)]
pub struct PgQueue {
    inner: Arc<Inner>,
    handle: tokio::runtime::Handle,
    _runtime: Arc<Runtime>,
}

/// A coordinator's waiting jobs: `(kind, key)` → how many calls wait for it, and its outcome once known
/// (`None`: waiting; then the failure, if it failed). Two calls may wait for one job (the same prompt, the
/// same batch): the slot goes when the last of them has its outcome.
type Waiting = std::sync::Mutex<HashMap<(String, String), (usize, Option<Option<FailedJob>>)>>;

struct Inner {
    db: tokio_postgres::Config,
    secrets: Secrets,
    schema: String,
    options: DistributeOptions,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
    /// The coordinator's waiting jobs: `(kind, key)` → their outcome once known (`None`: waiting).
    waiting: Waiting,
    /// One waiter at a time looks at the jobs for all.
    polling: tokio::sync::Mutex<Instant>,
    /// Failed jobs seen by this coordinator.
    failed: std::sync::Mutex<Vec<FailedJob>>,
    /// What the workers' models did for this coordinator.
    usage: std::sync::Mutex<kgrag_llm::UsageReport>,
    /// This queue is a coordinator's: its connection holds the schema's coordinator lock (taken again
    /// whenever it connects again, after a restart of the server), which tells the workers a build runs.
    coordinator: bool,
}

/// Whether a statement's error means the server went away (try again) rather than a refusal.
fn transient(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        None => true,
        Some(c) => {
            let code = c.code();
            code.starts_with("08")
                || code.starts_with("57")
                || *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::TOO_MANY_CONNECTIONS
        }
    }
}

impl PgQueue {
    /// The queue of the schema `config` names (the schema is created or migrated on first use).
    pub fn open(config: &StorageConfig, options: DistributeOptions) -> Result<Self> {
        let (db, secrets) = database(config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kgrag-queue")
            .enable_all()
            .build()
            .map_err(|e| KgragError::Database(format!("starting the queue's runtime: {e}")))?;
        let handle = runtime.handle().clone();
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                secrets,
                schema: config.schema.clone(),
                options,
                client: tokio::sync::Mutex::new(None),
                waiting: std::sync::Mutex::new(HashMap::new()),
                polling: tokio::sync::Mutex::new(Instant::now()),
                failed: std::sync::Mutex::new(Vec::new()),
                usage: std::sync::Mutex::new(kgrag_llm::UsageReport::default()),
                coordinator: false,
            }),
            handle,
            _runtime: Arc::new(Runtime(Some(runtime))),
        })
    }

    /// The queue of a coordinator: its connection, made now, holds the schema's coordinator lock (see
    /// [`coordinator_alive`](Self::coordinator_alive)), taken again whenever the connection is made again.
    pub fn open_coordinator(config: &StorageConfig, options: DistributeOptions) -> Result<Self> {
        let mut q = Self::open(config, options)?;
        if let Some(inner) = Arc::get_mut(&mut q.inner) {
            inner.coordinator = true;
        }
        // Connected now and kept connected (every 5 s, while the queue lives): after a restart of the
        // server the lock is taken again even in a stage that queues nothing for minutes. Failures here
        // are met again, and reported, by the next statement.
        let announce = Arc::downgrade(&q.inner);
        q.handle.spawn(async move {
            while let Some(inner) = announce.upgrade() {
                let _ = inner.client().await;
                drop(inner);
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        Ok(q)
    }

    /// The options it runs with.
    pub fn options(&self) -> &DistributeOptions {
        &self.inner.options
    }

    /// Runs `f` on the queue's runtime and waits for it (from any executor).
    async fn on<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let fut = f(self.inner.clone());
        let (tx, rx) = futures_channel::oneshot::channel();
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.await
            .map_err(|_| KgragError::Database("the queue's task stopped".into()))?
    }

    /// Whether a coordinator of the schema runs (its queue connection holds the coordinator lock).
    pub async fn coordinator_alive(&self) -> Result<bool> {
        self.on(|q| async move { q.coordinator_alive().await })
            .await
    }

    /// Jobs queued or running, and whether a coordinator is running.
    pub async fn idle_state(&self) -> Result<(i64, bool)> {
        self.on(|q| async move {
            let s = quoted(&q.schema);
            let open: i64 = q
                .retrying("reading the queue", move |c| {
                    let s = s.clone();
                    async move {
                        c.query_one(
                            &format!(
                                "select count(*) from {s}.jobs where state in ('queued', 'running')"
                            ),
                            &[],
                        )
                        .await
                    }
                })
                .await
                .and_then(|r| col(&r, 0))?;
            Ok((open, q.coordinator_alive().await?))
        })
        .await
    }

    /// Removes the jobs that are done (their results stay in the caches): after a commit.
    pub async fn clear_done(&self) -> Result<u64> {
        self.on(|q| async move {
            let s = quoted(&q.schema);
            q.retrying("clearing finished jobs", move |c| {
                let s = s.clone();
                async move {
                    c.execute(&format!("delete from {s}.jobs where state = 'done'"), &[])
                        .await
                }
            })
            .await
        })
        .await
    }
}

impl Inner {
    /// The queue's connection, made (again) if there is none or the server closed it.
    async fn client(&self) -> Result<Arc<Client>> {
        let mut guard = self.client.lock().await;
        if let Some(c) = guard.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let mut c = connect(&self.db, "kgrag queue", &self.secrets).await?;
        migrate(&mut c, &self.schema, &self.secrets).await?;
        if self.coordinator {
            // Held by this connection for its life; a second coordinator cannot get this far (it holds
            // no writer lock), so the answer is not needed.
            c.query_one(
                "select pg_try_advisory_lock($1)",
                &[&coordinator_key(&self.schema)],
            )
            .await
            .map_err(self.secrets.on("announcing the coordinator"))?;
        }
        let c = Arc::new(c);
        *guard = Some(c.clone());
        Ok(c)
    }

    /// Drops `client` as the queue's connection (it failed): the next statement connects again.
    async fn forget(&self, client: Option<Arc<Client>>) {
        let mut guard = self.client.lock().await;
        if let (Some(now), Some(bad)) = (guard.as_ref(), client.as_ref()) {
            if Arc::ptr_eq(now, bad) {
                *guard = None;
            }
        }
    }

    /// Runs `f` on the queue's connection; a failure because the server went away is tried again with
    /// backoff (connecting again) for up to [`PATIENCE`], telling the user once.
    async fn retrying<T, F, Fut>(&self, what: &str, f: F) -> Result<T>
    where
        F: Fn(Arc<Client>) -> Fut,
        Fut: Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    {
        let started = Instant::now();
        let mut wait = Duration::from_millis(200);
        let mut told = false;
        loop {
            let outcome = match self.client().await {
                Ok(c) => match f(c.clone()).await {
                    Ok(v) => return Ok(v),
                    Err(e) if !transient(&e) => return Err(self.secrets.err(what, e)),
                    Err(e) => {
                        self.forget(Some(c)).await;
                        self.secrets.err(what, e)
                    }
                },
                Err(e) => e,
            };
            if started.elapsed() > PATIENCE {
                return Err(outcome);
            }
            if !told {
                crate::progress::say(&format!(
                    "note: {outcome}; trying again for up to {} s",
                    PATIENCE.as_secs()
                ));
                told = true;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        }
    }

    async fn coordinator_alive(&self) -> Result<bool> {
        let key = coordinator_key(&self.schema);
        let row = self
            .retrying("looking for the coordinator", move |c| async move {
                c.query_one(
                    "select exists (select 1 from pg_locks where locktype = 'advisory' and granted \
                     and database = (select oid from pg_database where datname = current_database()) \
                     and classid::bigint = ($1::bigint >> 32) & 4294967295 \
                     and objid::bigint = $1::bigint & 4294967295 and objsubid = 1)",
                    &[&key],
                )
                .await
            })
            .await?;
        col(&row, 0)
    }
}
