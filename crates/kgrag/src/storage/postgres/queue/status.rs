//! What `kgrag queue` shows and does: the queue's state, failed jobs queued again.

use super::*;

/// The queue as `kgrag queue status` shows it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct QueueStatus {
    /// `kind label` → state → jobs.
    pub jobs: BTreeMap<String, BTreeMap<String, i64>>,
    /// Workers seen in the last 30 seconds.
    pub workers_alive: i64,
    /// Whether a coordinator (the index's writer) is running.
    pub coordinator: bool,
    /// Jobs finished per second over the last minute.
    pub rate: f64,
    /// Seconds left at that rate (`None`: nothing is finishing).
    pub seconds_left: Option<f64>,
    /// Jobs queued or running.
    pub open: i64,
    /// The parked jobs (the first 20).
    pub failed: Vec<FailedJob>,
    /// Parked jobs in all.
    pub failed_total: i64,
}

impl std::fmt::Display for QueueStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.jobs.is_empty() {
            write!(f, "queue: empty")?;
        } else {
            let parts: Vec<String> = self
                .jobs
                .iter()
                .map(|(what, states)| {
                    let n = |s: &str| states.get(s).copied().unwrap_or(0);
                    let total: i64 = states.values().sum();
                    let mut p = format!("{what} {}/{total} done", n("done"));
                    for s in ["running", "queued", "failed"] {
                        if n(s) > 0 {
                            p.push_str(&format!(", {} {s}", n(s)));
                        }
                    }
                    p
                })
                .collect();
            write!(f, "queue: {}", parts.join(" · "))?;
        }
        write!(
            f,
            " · {} workers alive · coordinator {}",
            self.workers_alive,
            if self.coordinator {
                "running"
            } else {
                "not running"
            }
        )?;
        if self.rate > 0.0 {
            write!(f, " · {:.1} jobs/s", self.rate)?;
        }
        if let Some(s) = self.seconds_left {
            if self.open > 0 {
                write!(f, " · ~{} left", duration(s))?;
            }
        }
        for j in &self.failed {
            write!(
                f,
                "\n  failed: {} {} {}: {}",
                j.kind, j.label, j.key, j.error
            )?;
        }
        if self.failed_total > self.failed.len() as i64 {
            write!(
                f,
                "\n  … and {} more failed",
                self.failed_total - self.failed.len() as i64
            )?;
        }
        Ok(())
    }
}

/// `s` seconds as `1 h 02 min`, `3 min 05 s` or `12 s`.
fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

impl PgQueue {
    /// The queue's state (see [`QueueStatus`]).
    pub async fn status(&self) -> Result<QueueStatus> {
        self.on(|q| async move { q.status().await }).await
    }

    /// Puts every parked job back in the queue with its attempts reset; returns how many.
    pub async fn retry_failed(&self) -> Result<u64> {
        self.on(|q| async move {
            let s = quoted(&q.schema);
            q.retrying("re-queueing the failed jobs", move |c| {
                let s = s.clone();
                async move {
                    c.execute(
                        &format!(
                            "update {s}.jobs set state = 'queued', attempts = 0, not_before = now(), \
                             lease_until = null, worker = null, finished_at = null where state = 'failed'"
                        ),
                        &[],
                    )
                    .await
                }
            })
            .await
        })
        .await
    }
}

impl Inner {
    pub(super) async fn status(&self) -> Result<QueueStatus> {
        let s = quoted(&self.schema);
        let rows = self
            .retrying("reading the queue", |c| {
                let s = &s;
                async move {
                    c.query(
                        &format!(
                            "select kind || ' ' || label, state, count(*) from {s}.jobs group by 1, 2"
                        ),
                        &[],
                    )
                    .await
                }
            })
            .await?;
        let mut st = QueueStatus::default();
        for r in &rows {
            let what: String = col(r, 0)?;
            let state: String = col(r, 1)?;
            let n: i64 = col(r, 2)?;
            if state == "queued" || state == "running" {
                st.open += n;
            }
            if state == "failed" {
                st.failed_total += n;
            }
            st.jobs.entry(what).or_default().insert(state, n);
        }
        let row = self
            .retrying("reading the workers", |c| {
                let s = &s;
                async move {
                    c.query_one(
                        &format!(
                            "select (select count(*) from {s}.workers where not stopped and \
                             seen_at > now() - make_interval(secs => $1)), \
                             (select count(*) from {s}.jobs where state = 'done' and \
                             finished_at > now() - interval '60 seconds'), \
                             (select extract(epoch from now() - min(finished_at))::float8 from {s}.jobs \
                             where state = 'done' and finished_at > now() - interval '60 seconds')"
                        ),
                        &[&ALIVE_SECS],
                    )
                    .await
                }
            })
            .await?;
        st.workers_alive = col(&row, 0)?;
        let recent: i64 = col(&row, 1)?;
        let span: Option<f64> = col(&row, 2)?;
        if let Some(span) = span {
            st.rate = recent as f64 / span.max(1.0);
        }
        if st.rate > 0.0 {
            st.seconds_left = Some(st.open as f64 / st.rate);
        }
        if st.failed_total > 0 {
            let rows = self
                .retrying("reading the failed jobs", |c| {
                    let s = &s;
                    async move {
                        c.query(
                            &format!(
                                "select kind, label, key, coalesce(error, '') from {s}.jobs \
                                 where state = 'failed' order by id limit 20"
                            ),
                            &[],
                        )
                        .await
                    }
                })
                .await?;
            for r in &rows {
                st.failed.push(FailedJob {
                    kind: col(r, 0)?,
                    label: col(r, 1)?,
                    key: col(r, 2)?,
                    error: col(r, 3)?,
                });
            }
        }
        st.coordinator = self.coordinator_alive().await?;
        Ok(st)
    }
}
