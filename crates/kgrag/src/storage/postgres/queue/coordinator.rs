//! The coordinator's side of the queue: jobs queued and waited for, results read back.

use super::*;
use crate::env::{JobSpec, WorkQueue};

impl Inner {
    /// Queues the jobs not queued yet. A job already there keeps its state: one done since the caller
    /// looked for its result is not done again (the caller finds the result), a failed one stays failed
    /// until `kgrag queue retry-failed`.
    pub(super) async fn enqueue(&self, kind: &str, jobs: &[JobSpec]) -> Result<()> {
        let s = quoted(&self.schema);
        let max = self.options.max_attempts.max(1) as i32;
        for part in jobs.chunks(BATCH) {
            let labels: Vec<&str> = part.iter().map(|j| j.label.as_str()).collect();
            let keys: Vec<&str> = part.iter().map(|j| j.key.as_str()).collect();
            let payloads: Vec<&serde_json::Value> = part.iter().map(|j| &j.payload).collect();
            let sql = format!(
                "insert into {s}.jobs (kind, label, key, payload, max_attempts) \
                 select $1, l, k, p, $5 from unnest($2::text[], $3::text[], $4::jsonb[]) as t(l, k, p) \
                 on conflict (kind, key) do nothing"
            );
            self.retrying("queueing jobs", |c| {
                let (sql, labels, keys, payloads) = (&sql, &labels, &keys, &payloads);
                async move {
                    c.execute(sql.as_str(), &[&kind, labels, keys, payloads, &max])
                        .await
                        .map(|_| ())
                }
            })
            .await?;
        }
        Ok(())
    }

    /// Looks at every waiting job once and records the outcomes found.
    async fn poll(&self) -> Result<()> {
        let mut by_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Ok(w) = self.waiting.lock() {
            for ((kind, key), (_, outcome)) in w.iter() {
                if outcome.is_none() {
                    by_kind.entry(kind.clone()).or_default().push(key.clone());
                }
            }
        }
        let s = quoted(&self.schema);
        for (kind, keys) in by_kind {
            for part in keys.chunks(BATCH) {
                let sql = format!(
                    "select key, state, label, coalesce(error, '') from {s}.jobs where kind = $1 \
                     and key = any($2) and state in ('done', 'failed')"
                );
                let rows = self
                    .retrying("waiting for jobs", |c| {
                        let (sql, kind, part) = (&sql, &kind, part);
                        async move { c.query(sql.as_str(), &[kind, &part]).await }
                    })
                    .await?;
                let mut found = Vec::with_capacity(rows.len());
                for r in &rows {
                    let key: String = col(r, 0)?;
                    let state: String = col(r, 1)?;
                    let failed = (state == "failed").then(|| FailedJob {
                        kind: kind.clone(),
                        label: col(r, 2).unwrap_or_default(),
                        key: key.clone(),
                        error: col(r, 3).unwrap_or_default(),
                    });
                    found.push((key, failed));
                }
                if let Ok(mut w) = self.waiting.lock() {
                    for (key, failed) in found {
                        if let Some(slot) = w.get_mut(&(kind.clone(), key)) {
                            slot.1 = Some(failed);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Queues `jobs` and waits for each to finish; one waiter at a time polls for all.
    async fn run(&self, kind: &str, jobs: Vec<JobSpec>) -> Result<Vec<FailedJob>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        if let Ok(mut w) = self.waiting.lock() {
            for j in &jobs {
                w.entry((kind.to_owned(), j.key.clone()))
                    .or_insert((0, None))
                    .0 += 1;
            }
        }
        let keys: Vec<(String, String)> = jobs
            .iter()
            .map(|j| (kind.to_owned(), j.key.clone()))
            .collect();
        let forget = |w: &Waiting| {
            if let Ok(mut w) = w.lock() {
                for k in &keys {
                    if let Some(slot) = w.get_mut(k) {
                        slot.0 = slot.0.saturating_sub(1);
                        if slot.0 == 0 {
                            w.remove(k);
                        }
                    }
                }
            }
        };
        if let Err(e) = self.enqueue(kind, &jobs).await {
            forget(&self.waiting);
            return Err(e);
        }
        drop(jobs);
        loop {
            if let Ok(mut last_status) = self.polling.try_lock() {
                if let Err(e) = self.poll().await {
                    forget(&self.waiting);
                    return Err(e);
                }
                if last_status.elapsed() >= STATUS_EVERY {
                    *last_status = Instant::now();
                    if let Ok(st) = self.status().await {
                        crate::progress::say(&st.to_string());
                    }
                }
            }
            let outcome: Option<Vec<FailedJob>> = self.waiting.lock().ok().and_then(|w| {
                let mut failed = Vec::new();
                for k in &keys {
                    match w.get(k) {
                        Some((_, Some(f))) => failed.extend(f.clone()),
                        _ => return None,
                    }
                }
                Some(failed)
            });
            if let Some(failed) = outcome {
                forget(&self.waiting);
                if !failed.is_empty() {
                    if let Ok(mut all) = self.failed.lock() {
                        for f in &failed {
                            if !all.contains(f) {
                                all.push(f.clone());
                            }
                        }
                    }
                }
                return Ok(failed);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[async_trait]
impl WorkQueue for PgQueue {
    async fn run(&self, kind: &str, jobs: Vec<JobSpec>) -> Result<Vec<FailedJob>> {
        let kind = kind.to_owned();
        self.on(move |q| async move { q.run(&kind, jobs).await })
            .await
    }

    async fn embeddings(
        &self,
        model: &str,
        digests: &[String],
    ) -> Result<HashMap<String, Vec<f32>>> {
        let model = model.to_owned();
        let digests = digests.to_vec();
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            let mut out = HashMap::with_capacity(digests.len());
            for part in digests.chunks(BATCH) {
                let sql = format!(
                    "select digest, vector from {s}.embedding_cache where model = $1 and digest = any($2)"
                );
                let rows = q
                    .retrying("reading the embedding cache", |c| {
                        let (sql, model, part) = (&sql, &model, part);
                        async move { c.query(sql.as_str(), &[model, &part]).await }
                    })
                    .await?;
                for r in &rows {
                    let d: String = col(r, 0)?;
                    let bytes: Vec<u8> = col(r, 1)?;
                    let v: Vec<f32> = bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    out.insert(d, v);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn chat_reply(&self, digest: &str) -> Result<Option<kgrag_types::ChatResponse>> {
        let digest = digest.to_owned();
        self.on(move |q| async move {
            let s = quoted(&q.schema);
            let sql = format!("select reply from {s}.llm_cache where digest = $1");
            let row = q
                .retrying("reading the reply cache", |c| {
                    let (sql, digest) = (&sql, &digest);
                    async move { c.query_opt(sql.as_str(), &[digest]).await }
                })
                .await?;
            match row {
                Some(r) => {
                    let v: serde_json::Value = col(&r, 0)?;
                    Ok(Some(serde_json::from_value(v)?))
                }
                None => Ok(None),
            }
        })
        .await
    }

    fn in_flight(&self) -> usize {
        self.inner.options.in_flight.max(1)
    }

    fn embed_batch(&self) -> usize {
        self.inner.options.embed_batch.max(1)
    }

    fn allow_failed(&self) -> bool {
        self.inner.options.allow_failed
    }

    fn failed(&self) -> Vec<FailedJob> {
        self.inner
            .failed
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default()
    }

    fn account(&self, calls: u64, prompt_tokens: u64, completion_tokens: u64, cache_hits: u64) {
        if let Ok(mut u) = self.inner.usage.lock() {
            u.requests += calls + cache_hits;
            u.calls += calls;
            u.attempts += calls;
            u.cache_hits += cache_hits;
            u.prompt_tokens += prompt_tokens;
            u.completion_tokens += completion_tokens;
        }
    }

    fn usage(&self) -> kgrag_llm::UsageReport {
        self.inner.usage.lock().map(|u| *u).unwrap_or_default()
    }

    async fn committed(&self) -> Result<()> {
        self.clear_done().await.map(|_| ())
    }
}
