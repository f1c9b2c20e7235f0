//! The worker's side of the queue: registering, claiming under a lease, storing results, failing.

use super::*;
use crate::env::JobSpec;

/// A job a worker claimed.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The job's row.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its label.
    pub label: String,
    /// Its key.
    pub key: String,
    /// What to do.
    pub payload: serde_json::Value,
    /// This attempt's number (1 for the first).
    pub attempts: i32,
    /// Attempts before it is parked.
    pub max_attempts: i32,
}

/// What a finished job leaves behind.
#[derive(Debug, Clone)]
pub enum JobResult {
    /// An extraction, under its extractor's fingerprint.
    Extraction {
        /// The extractor's fingerprint.
        fingerprint: String,
        /// The chunk's extraction (whole).
        extraction: Box<Extraction>,
    },
    /// Vectors of one model by text digest.
    Embeddings {
        /// The embedder's name.
        model: String,
        /// `(digest, vector)`.
        rows: Vec<(String, Vec<f32>)>,
    },
    /// A chat reply under its request digest.
    Reply {
        /// The request's digest.
        digest: String,
        /// The model's name.
        model: String,
        /// The reply.
        reply: Box<kgrag_types::ChatResponse>,
    },
    /// Nothing (the queue's own benchmark).
    Nothing,
}

impl PgQueue {
    /// Registers a worker.
    pub async fn register(&self, id: &str, host: &str, concurrency: usize) -> Result<()> {
        let (id, host) = (id.to_owned(), host.to_owned());
        let pid = std::process::id() as i32;
        let concurrency = concurrency as i32;
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            q.retrying("registering the worker", move |c| {
                let (s, id, host) = (s.clone(), id.clone(), host.clone());
                async move {
                    c.execute(
                        &format!(
                            "insert into {s}.workers (id, host, pid, concurrency) values ($1, $2, $3, $4) \
                             on conflict (id) do update set seen_at = now(), stopped = false"
                        ),
                        &[&id, &host, &pid, &concurrency],
                    )
                    .await
                    .map(|_| ())
                }
            })
            .await
        })
        .await
    }

    /// A worker's heartbeat: it is alive, and the leases of `held` run `lease` from now.
    pub async fn heartbeat(&self, worker: &str, held: Vec<i64>, lease: Duration) -> Result<()> {
        let worker = worker.to_owned();
        let secs = lease.as_secs_f64();
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            q.retrying("renewing the leases", move |c| {
                let (s, worker, held) = (s.clone(), worker.clone(), held.clone());
                async move {
                    c.execute(
                        &format!("update {s}.workers set seen_at = now() where id = $1"),
                        &[&worker],
                    )
                    .await?;
                    if !held.is_empty() {
                        c.execute(
                            &format!(
                                "update {s}.jobs set lease_until = now() + make_interval(secs => $3) \
                                 where id = any($1) and worker = $2 and state = 'running'"
                            ),
                            &[&held, &worker, &secs],
                        )
                        .await?;
                    }
                    Ok(())
                }
            })
            .await
        })
        .await
    }

    /// Marks a worker stopped.
    pub async fn stopped(&self, worker: &str) -> Result<()> {
        let worker = worker.to_owned();
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            q.retrying("stopping the worker", move |c| {
                let (s, worker) = (s.clone(), worker.clone());
                async move {
                    c.execute(
                        &format!(
                            "update {s}.workers set stopped = true, seen_at = now() where id = $1"
                        ),
                        &[&worker],
                    )
                    .await
                    .map(|_| ())
                }
            })
            .await
        })
        .await
    }

    /// Claims up to `n` jobs for `worker` under a lease of `lease`; jobs whose attempts are spent (their
    /// workers died holding them) are parked instead of returned.
    pub async fn claim(&self, worker: &str, n: usize, lease: Duration) -> Result<Vec<Claimed>> {
        let worker = worker.to_owned();
        let secs = lease.as_secs_f64();
        let n = n.max(1) as i64;
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            let rows = q
                .retrying("claiming jobs", move |c| {
                    let (s, worker) = (s.clone(), worker.clone());
                    async move {
                        c.query(
                            &format!(
                                "with c as (select id from {s}.jobs where state in ('queued', 'running') \
                                 and ((state = 'queued' and not_before <= now()) or \
                                 (state = 'running' and lease_until < now())) \
                                 order by id limit $1 for update skip locked) \
                                 update {s}.jobs j set state = 'running', attempts = j.attempts + 1, \
                                 worker = $2, lease_until = now() + make_interval(secs => $3) from c \
                                 where j.id = c.id \
                                 returning j.id, j.kind, j.label, j.key, j.payload, j.attempts, j.max_attempts"
                            ),
                            &[&n, &worker, &secs],
                        )
                        .await
                    }
                })
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            let mut spent = Vec::new();
            for r in &rows {
                let job = Claimed {
                    id: col(r, 0)?,
                    kind: col(r, 1)?,
                    label: col(r, 2)?,
                    key: col(r, 3)?,
                    payload: col(r, 4)?,
                    attempts: col(r, 5)?,
                    max_attempts: col(r, 6)?,
                };
                if job.attempts > job.max_attempts {
                    spent.push(job.id);
                } else {
                    out.push(job);
                }
            }
            if !spent.is_empty() {
                let s = quoted(&q.schema);
                q.retrying("parking jobs", move |c| {
                    let (s, spent) = (s.clone(), spent.clone());
                    async move {
                        c.execute(
                            &format!(
                                "update {s}.jobs set state = 'failed', attempts = attempts - 1, \
                                 lease_until = null, finished_at = now(), error = coalesce(error || '; ', '') \
                                 || 'its worker stopped or lost the database while holding it, on every \
                                 attempt' where id = any($1)"
                            ),
                            &[&spent],
                        )
                        .await
                        .map(|_| ())
                    }
                })
                .await?;
            }
            Ok(out)
        })
        .await
    }

    /// Stores `result` (the first write of it wins) and marks the job done, in one statement.
    pub async fn complete(&self, worker: &str, id: i64, result: JobResult) -> Result<()> {
        let worker = worker.to_owned();
        let result = Arc::new(result);
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            q.retrying("storing a job's result", |c| {
                let (s, worker, result) = (&s, &worker, &result);
                async move { store_result(&c, s, worker, id, result).await }
            })
            .await
        })
        .await
    }

    /// Records a failed attempt: the job is due again after a backoff, or parked when its attempts are
    /// spent.
    pub async fn fail(&self, worker: &str, job: &Claimed, error: &str) -> Result<()> {
        let worker = worker.to_owned();
        let (id, error) = (job.id, error.to_owned());
        let park = job.attempts >= job.max_attempts;
        let backoff = 2f64.powi(job.attempts.clamp(0, 6));
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            q.retrying("recording a failed job", move |c| {
                let (s, worker, error) = (s.clone(), worker.clone(), error.clone());
                async move {
                    let sql = if park {
                        format!(
                            "update {s}.jobs set state = 'failed', error = $3, lease_until = null, \
                             finished_at = now() where id = $1 and worker = $2 and state = 'running'"
                        )
                    } else {
                        format!(
                            "update {s}.jobs set state = 'queued', error = $3, lease_until = null, \
                             not_before = now() + make_interval(secs => $4) \
                             where id = $1 and worker = $2 and state = 'running'"
                        )
                    };
                    if park {
                        c.execute(&sql, &[&id, &worker, &error]).await?;
                    } else {
                        c.execute(&sql, &[&id, &worker, &error, &backoff]).await?;
                    }
                    c.execute(
                        &format!(
                            "update {s}.workers set jobs_failed = jobs_failed + 1 where id = $1"
                        ),
                        &[&worker],
                    )
                    .await
                    .map(|_| ())
                }
            })
            .await
        })
        .await
    }

    /// Gives a claimed job back untried (its attempt not counted), due again in five seconds.
    pub async fn release(&self, worker: &str, id: i64) -> Result<()> {
        let worker = worker.to_owned();
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            q.retrying("giving a job back", move |c| {
                let (s, worker) = (s.clone(), worker.clone());
                async move {
                    c.execute(
                        &format!(
                            "update {s}.jobs set state = 'queued', attempts = greatest(attempts - 1, 0), \
                             lease_until = null, not_before = now() + interval '5 seconds' \
                             where id = $1 and worker = $2 and state = 'running'"
                        ),
                        &[&id, &worker],
                    )
                    .await
                    .map(|_| ())
                }
            })
            .await
        })
        .await
    }

    /// Queues `n` jobs that do nothing (the queue's own benchmark); returns nothing until they are in.
    pub async fn queue_noops(&self, n: usize, tag: &str) -> Result<()> {
        let jobs: Vec<JobSpec> = (0..n)
            .map(|i| JobSpec {
                key: format!("{tag}-{i}"),
                label: "noop".into(),
                payload: serde_json::Value::Null,
            })
            .collect();
        self.on(move |q| async move { q.enqueue("noop", &jobs).await })
            .await
    }

    /// Marks jobs of `worker` done without a result (the queue's own benchmark).
    pub async fn complete_many(&self, worker: &str, ids: Vec<i64>) -> Result<()> {
        let worker = worker.to_owned();
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            q.retrying("finishing jobs", move |c| {
                let (s, ids, worker) = (s.clone(), ids.clone(), worker.clone());
                async move {
                    c.execute(
                        &format!(
                            "update {s}.jobs set state = 'done', finished_at = now(), lease_until = null \
                             where id = any($1) and worker = $2"
                        ),
                        &[&ids, &worker],
                    )
                    .await
                    .map(|_| ())
                }
            })
            .await
        })
        .await
    }
}

/// Writes a job's result and marks it done: one statement, so all of it or nothing (the connection is
/// shared by the worker's jobs: no transaction spans statements on it).
async fn store_result(
    c: &Client,
    s: &str,
    worker: &str,
    id: i64,
    result: &JobResult,
) -> std::result::Result<(), tokio_postgres::Error> {
    let done = format!(
        "j as (update {s}.jobs set state = 'done', finished_at = now(), lease_until = null, error = null \
         where id = $1 returning 1) \
         update {s}.workers set jobs_done = jobs_done + (select count(*) from j) where id = $2"
    );
    match result {
        JobResult::Extraction {
            fingerprint,
            extraction,
        } => {
            let v = serde_json::to_value(extraction.as_ref()).unwrap_or(serde_json::Value::Null);
            c.execute(
                &format!(
                    "with r as (insert into {s}.extraction_cache (fingerprint, chunk_id, extraction) \
                     values ($3, $4, $5) on conflict do nothing), {done}"
                ),
                &[&id, &worker, fingerprint, &extraction.chunk_id.as_str(), &v],
            )
            .await?;
        }
        JobResult::Embeddings { model, rows } => {
            let digests: Vec<&str> = rows.iter().map(|(d, _)| d.as_str()).collect();
            let vectors: Vec<Vec<u8>> = rows
                .iter()
                .map(|(_, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect())
                .collect();
            c.execute(
                &format!(
                    "with r as (insert into {s}.embedding_cache (model, digest, vector) \
                     select $3, d, v from unnest($4::text[], $5::bytea[]) as t(d, v) \
                     on conflict do nothing), {done}"
                ),
                &[&id, &worker, model, &digests, &vectors],
            )
            .await?;
        }
        JobResult::Reply {
            digest,
            model,
            reply,
        } => {
            let v = serde_json::to_value(reply.as_ref()).unwrap_or(serde_json::Value::Null);
            c.execute(
                &format!(
                    "with r as (insert into {s}.llm_cache (digest, model, reply) values ($3, $4, $5) \
                     on conflict do nothing), {done}"
                ),
                &[&id, &worker, digest, model, &v],
            )
            .await?;
        }
        JobResult::Nothing => {
            c.execute(&format!("with {done}"), &[&id, &worker]).await?;
        }
    }
    Ok(())
}
