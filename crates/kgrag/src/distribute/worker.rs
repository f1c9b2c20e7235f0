//! `kgrag worker`: takes jobs from the queue of an index in PostgreSQL and does them with its own models
//! until the queue is drained (and no coordinator is running) or it is stopped.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kgrag_types::{ChatRequest, Chunk, EmbedKind};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::DistributeOptions;
use crate::env::Env;
use crate::graphs::{extractor_for, ExtractorRole};
use crate::storage::postgres::{Claimed, JobResult, PgQueue};
use crate::{Index, KgragError, Result};

/// Numbers the workers of one process.
static WORKERS: AtomicU64 = AtomicU64::new(0);

/// How a worker runs.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerOptions {
    /// Jobs done at once.
    pub concurrency: usize,
    /// Jobs claimed per statement (at most the free slots).
    pub claim_batch: usize,
    /// The lease on a claimed job, renewed every third of it while the job runs; a worker that dies
    /// gives its jobs back when it runs out.
    pub lease: Duration,
    /// How long a worker with nothing to do waits for work while no coordinator runs, before it exits.
    pub linger: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            claim_batch: 32,
            lease: Duration::from_secs(60),
            linger: Duration::from_secs(60),
        }
    }
}

/// What a worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerReport {
    /// The worker's id (`host:pid:n`).
    pub id: String,
    /// Jobs done by kind.
    pub done: BTreeMap<String, u64>,
    /// Attempts that failed.
    pub failed: u64,
}

/// A worker: the models of an [`Index`] (in memory, from the model configuration) and the queue of the
/// database its configuration names.
pub struct Worker {
    env: Arc<Env>,
    queue: PgQueue,
    options: WorkerOptions,
    id: String,
}

/// How one job went.
enum Outcome {
    Done(JobResult),
    Failed(String),
    /// The job needs models other than this worker's: it is given back and the worker stops.
    Mismatch(String),
}

impl Worker {
    /// A worker with `index`'s models, on the queue of the database `index`'s configuration names.
    pub fn new(index: &Index, options: WorkerOptions) -> Result<Self> {
        let env = index.shared.env.clone();
        let queue = PgQueue::open(&env.config.storage, DistributeOptions::default())?;
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        let id = format!(
            "{host}:{}:{}",
            std::process::id(),
            WORKERS.fetch_add(1, Ordering::Relaxed)
        );
        Ok(Self {
            env,
            queue,
            options,
            id,
        })
    }

    /// The worker's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Takes and does jobs until the queue is drained and no coordinator has run for
    /// [`WorkerOptions::linger`], or `stop` resolves (the jobs in hand are finished first).
    pub async fn run(&self, stop: impl std::future::Future<Output = ()>) -> Result<WorkerReport> {
        let o = &self.options;
        let concurrency = o.concurrency.max(1);
        let host = self.id.split(':').next().unwrap_or("").to_owned();
        self.queue.register(&self.id, &host, concurrency).await?;
        crate::progress::say(&format!(
            "worker {} takes jobs ({} at once)",
            self.id, concurrency
        ));
        let held: Arc<Mutex<HashSet<i64>>> = Arc::default();
        let beat = {
            let (queue, id, held, lease) =
                (self.queue.clone(), self.id.clone(), held.clone(), o.lease);
            tokio::spawn(async move {
                let every = (lease / 3).clamp(Duration::from_millis(100), Duration::from_secs(10));
                loop {
                    tokio::time::sleep(every).await;
                    let ids: Vec<i64> = held
                        .lock()
                        .map(|h| h.iter().copied().collect())
                        .unwrap_or_default();
                    if let Err(e) = queue.heartbeat(&id, ids, lease).await {
                        crate::progress::say(&format!("note: worker {id}: {e}"));
                    }
                }
            })
        };
        let slots = Arc::new(Semaphore::new(concurrency));
        let mut tasks: JoinSet<(String, bool, Option<String>)> = JoinSet::new();
        let mut report = WorkerReport {
            id: self.id.clone(),
            ..WorkerReport::default()
        };
        let mut idle_since: Option<Instant> = None;
        let mut last_look = Instant::now();
        let mut wait = Duration::from_millis(20);
        let mut stopping = false;
        let mut mismatch: Option<String> = None;
        let mut stop = std::pin::pin!(stop);
        let outcome: Result<()> = loop {
            while let Some(r) = tasks.try_join_next() {
                note(&mut report, &mut mismatch, r);
            }
            if stopping || mismatch.is_some() {
                break Ok(());
            }
            let free = slots.available_permits();
            if free > 0 {
                let claimed = match self
                    .queue
                    .claim(&self.id, free.min(o.claim_batch.max(1)), o.lease)
                    .await
                {
                    Ok(c) => c,
                    Err(e) => break Err(e),
                };
                if !claimed.is_empty() {
                    idle_since = None;
                    wait = Duration::from_millis(20);
                    for job in claimed {
                        let Ok(permit) = slots.clone().acquire_owned().await else {
                            break;
                        };
                        if let Ok(mut h) = held.lock() {
                            h.insert(job.id);
                        }
                        let (env, queue, id, held) = (
                            self.env.clone(),
                            self.queue.clone(),
                            self.id.clone(),
                            held.clone(),
                        );
                        tasks.spawn(async move {
                            let kind = job.kind.clone();
                            let (ok, mismatch) = match work(&env, &job).await {
                                Outcome::Done(result) => {
                                    match queue.complete(&id, job.id, result).await {
                                        Ok(()) => (true, None),
                                        // A result the database refuses is the job's failure; only a
                                        // database that cannot be reached at all stops the worker.
                                        Err(e) => {
                                            let why =
                                                format!("its result could not be stored: {e}");
                                            match queue.fail(&id, &job, &why).await {
                                                Ok(()) => (false, None),
                                                Err(e) => (false, Some(e.to_string())),
                                            }
                                        }
                                    }
                                }
                                Outcome::Failed(error) => {
                                    let _ = queue.fail(&id, &job, &error).await;
                                    (false, None)
                                }
                                Outcome::Mismatch(why) => {
                                    let _ = queue.release(&id, job.id).await;
                                    (false, Some(why))
                                }
                            };
                            if let Ok(mut h) = held.lock() {
                                h.remove(&job.id);
                            }
                            drop(permit);
                            (kind, ok, mismatch)
                        });
                    }
                    continue;
                }
            }
            // With nothing in hand, whether to stop: looked at once a second.
            if tasks.is_empty() && last_look.elapsed() >= Duration::from_secs(1) {
                last_look = Instant::now();
                let (open, coordinator) = match self.queue.idle_state().await {
                    Ok(s) => s,
                    Err(e) => break Err(e),
                };
                if open == 0 && !coordinator {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= o.linger {
                        break Ok(());
                    }
                } else {
                    idle_since = None;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = &mut stop => { stopping = true; }
                Some(r) = tasks.join_next(), if !tasks.is_empty() => note(&mut report, &mut mismatch, r),
            }
            // Idle, a worker asks for jobs every 50 ms at most: a stage that waits for one job at a time
            // (a coordinator's sequence of calls) is not held up by the workers' naps.
            wait = (wait * 2).min(Duration::from_millis(50));
        };
        while let Some(r) = tasks.join_next().await {
            note(&mut report, &mut mismatch, r);
        }
        beat.abort();
        let _ = self.queue.stopped(&self.id).await;
        outcome?;
        if let Some(why) = mismatch {
            return Err(KgragError::Config(why));
        }
        Ok(report)
    }
}

/// Adds a finished task to the report; a model mismatch or a result that could not be stored stops the
/// worker.
fn note(
    report: &mut WorkerReport,
    mismatch: &mut Option<String>,
    r: std::result::Result<(String, bool, Option<String>), tokio::task::JoinError>,
) {
    match r {
        Ok((kind, true, _)) => *report.done.entry(kind).or_default() += 1,
        Ok((_, false, why)) => {
            report.failed += 1;
            if why.is_some() && mismatch.is_none() {
                *mismatch = why;
            }
        }
        Err(e) => {
            report.failed += 1;
            if mismatch.is_none() {
                *mismatch = Some(format!("a job's task stopped: {e}"));
            }
        }
    }
}

/// Parses a job's payload field.
fn field<T: serde::de::DeserializeOwned>(
    job: &Claimed,
    name: &str,
) -> std::result::Result<T, String> {
    let v = job
        .payload
        .get(name)
        .cloned()
        .ok_or_else(|| format!("the job has no {name:?}"))?;
    serde_json::from_value(v).map_err(|e| format!("the job's {name:?} does not parse: {e}"))
}

/// Does one job with the worker's models.
async fn work(env: &Env, job: &Claimed) -> Outcome {
    let too_new = |e: String| {
        Outcome::Mismatch(format!(
            "job {} ({} {}) cannot be read by this worker ({e}): is the coordinator a newer kgrag?",
            job.id, job.kind, job.label
        ))
    };
    match job.kind.as_str() {
        "extract" => {
            let (role, fingerprint, chunk) = match (
                field::<ExtractorRole>(job, "role"),
                field::<String>(job, "fingerprint"),
                field::<Chunk>(job, "chunk"),
            ) {
                (Ok(r), Ok(f), Ok(c)) => (r, f, c),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return too_new(e),
            };
            let extractor = match extractor_for(env, role, "worker") {
                Ok(x) => x,
                Err(e) => return Outcome::Mismatch(e.to_string()),
            };
            let mine = extractor.fingerprint();
            if mine != fingerprint {
                return Outcome::Mismatch(format!(
                    "this worker's extractor is not the coordinator's (fingerprint {mine} here, \
                     {fingerprint} in the job): start the worker with the coordinator's model \
                     configuration"
                ));
            }
            match extractor.extract(&chunk).await {
                Ok(x) => Outcome::Done(JobResult::Extraction {
                    fingerprint,
                    extraction: Box::new(x),
                }),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
        "embed" => {
            let (model, kind, texts, digests) = match (
                field::<String>(job, "model"),
                field::<EmbedKind>(job, "kind"),
                field::<Vec<String>>(job, "texts"),
                field::<Vec<String>>(job, "digests"),
            ) {
                (Ok(m), Ok(k), Ok(t), Ok(d)) => (m, k, t, d),
                (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => {
                    return too_new(e)
                }
            };
            if env.embedder.model_name() != model || texts.len() != digests.len() {
                return Outcome::Mismatch(format!(
                    "this worker's embedder is {:?}, the coordinator's {model:?}: start the worker with \
                     the coordinator's model configuration",
                    env.embedder.model_name()
                ));
            }
            match env.embedder.embed(&texts, &kind).await {
                Ok(rows) if rows.len() == texts.len() => Outcome::Done(JobResult::Embeddings {
                    model,
                    rows: digests
                        .into_iter()
                        .zip(rows.rows().map(<[f32]>::to_vec))
                        .collect(),
                }),
                Ok(rows) => Outcome::Failed(format!(
                    "the embedder returned {} vectors for {} texts",
                    rows.len(),
                    texts.len()
                )),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
        "chat" => {
            let (model, request) = match (
                field::<String>(job, "model"),
                field::<ChatRequest>(job, "request"),
            ) {
                (Ok(m), Ok(r)) => (m, r),
                (Err(e), _) | (_, Err(e)) => return too_new(e),
            };
            let Some(chat) = env.chat.as_ref().filter(|c| c.model_name() == model) else {
                return Outcome::Mismatch(format!(
                    "this worker's chat model is {:?}, the coordinator's {model:?}: start the worker with \
                     the coordinator's model configuration",
                    env.chat.as_ref().map(|c| c.model_name().to_owned())
                ));
            };
            match chat.chat(&request).await {
                Ok(reply) => Outcome::Done(JobResult::Reply {
                    digest: job.key.clone(),
                    model,
                    reply: Box::new(reply),
                }),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
        "noop" => Outcome::Done(JobResult::Nothing),
        other => too_new(format!("unknown kind {other:?}")),
    }
}
