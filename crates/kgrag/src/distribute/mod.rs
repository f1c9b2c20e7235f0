//! A build split across machines: a coordinator (`kgrag index --distribute`) and any number of workers
//! (`kgrag worker`) sharing one PostgreSQL database (see `docs/distributed.md`).
//!
//! The coordinator runs the build as one process would — it reads and chunks the documents, runs every
//! stage that needs the whole corpus and commits — but what a model does goes to the workers through the
//! [`WorkQueue`] of the index's database: each chunk's extraction, each batch of texts to embed and each
//! chat call (summaries, reports). The coordinator's models are wrapped ([`QueuedEmbedder`],
//! [`QueuedChat`]) so that every stage sends its work without knowing; extraction sends whole chunks (see
//! `graphs::extract_chunks`). Workers leave results where every later build finds them: the shared
//! extraction cache, an embedding cache keyed by model and text digest, a reply cache keyed by request
//! digest; a result is written once (the first write wins), so work done twice is harmless and work done
//! is never lost.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_types::{ChatModel, ChatRequest, ChatResponse, EmbedKind, Embedder, Embeddings};
use sha2::{Digest, Sha256};

pub use crate::env::{FailedJob, JobSpec, WorkQueue};
use crate::KgragError;

#[cfg(feature = "postgres")]
pub mod worker;

/// How a coordinator runs its queue (`kgrag index --distribute`).
#[derive(Debug, Clone, PartialEq)]
pub struct DistributeOptions {
    /// Commit even when jobs failed on every attempt (the build goes on without them and names them).
    pub allow_failed: bool,
    /// Attempts of a job before it is parked as failed.
    pub max_attempts: u32,
    /// Jobs a stage keeps queued at once (extraction queues every chunk at once).
    pub in_flight: usize,
    /// Texts per embedding job.
    pub embed_batch: usize,
    /// Embedding calls of fewer texts are made by the coordinator itself (a round trip through the
    /// queue costs more than embedding a few texts).
    pub local_below: usize,
}

impl Default for DistributeOptions {
    fn default() -> Self {
        Self {
            allow_failed: false,
            max_attempts: 3,
            in_flight: 256,
            embed_batch: 64,
            local_below: 16,
        }
    }
}

/// The error of a build that stops because jobs failed: each named with its error. (`--allow-failed`
/// lets a build commit without failed extractions and chat calls; a failed embedding stops its stage.)
pub fn failed_error(failed: &[FailedJob]) -> KgragError {
    KgragError::Index(format!(
        "{} jobs failed on every attempt and are parked: {}; fix the cause, then run `kgrag queue \
         retry-failed` and the build again (finished work is kept), or build with --allow-failed to commit \
         without them",
        failed.len(),
        describe(failed, 5)
    ))
}

/// Up to `n` failed jobs as `kind label key: error`, `; `-separated.
pub fn describe(failed: &[FailedJob], n: usize) -> String {
    let mut parts: Vec<String> = failed
        .iter()
        .take(n)
        .map(|f| format!("{} {} {} ({})", f.kind, f.label, short(&f.key), f.error))
        .collect();
    if failed.len() > n {
        parts.push(format!("and {} more", failed.len() - n));
    }
    parts.join("; ")
}

/// A job key shortened for messages: an extraction's chunk id, else the first 16 characters.
fn short(key: &str) -> &str {
    match key.rsplit_once('|') {
        Some((_, chunk)) => chunk,
        None => key.get(..16).unwrap_or(key),
    }
}

/// The digest a vector of `text` embedded as `kind` is stored under (with the model beside it).
pub fn embed_digest(kind: &EmbedKind, text: &str) -> String {
    let mut h = Sha256::new();
    match kind {
        EmbedKind::Document => h.update(b"d\0"),
        EmbedKind::Query { instruction } => {
            h.update(b"q\0");
            h.update(instruction.as_deref().unwrap_or("").as_bytes());
            h.update(b"\0");
        }
    }
    h.update(text.as_bytes());
    hex::encode(h.finalize())
}

/// The digest a reply of `model` to `request` is stored under.
pub fn chat_digest(model: &str, request: &ChatRequest) -> crate::Result<String> {
    let mut h = Sha256::new();
    h.update(model.as_bytes());
    h.update(b"\0");
    h.update(serde_json::to_vec(request)?);
    Ok(hex::encode(h.finalize()))
}

fn backend(what: &str, message: String) -> kgrag_types::Error {
    kgrag_types::Error::backend(what.to_owned(), message)
}

/// A coordinator's embedder: texts not embedded yet go to the workers in jobs of
/// [`WorkQueue::embed_batch`] texts; the vectors come back from the embedding cache. Calls of fewer than
/// `local_below` texts are embedded here.
pub struct QueuedEmbedder {
    inner: Arc<dyn Embedder>,
    queue: Arc<dyn WorkQueue>,
    local_below: usize,
}

impl QueuedEmbedder {
    /// Wraps `inner` (the coordinator's own embedder: its name, dimension, and the small calls).
    pub fn wrap(
        inner: Arc<dyn Embedder>,
        queue: Arc<dyn WorkQueue>,
        local_below: usize,
    ) -> Arc<dyn Embedder> {
        Arc::new(Self {
            inner,
            queue,
            local_below,
        })
    }
}

#[async_trait]
impl Embedder for QueuedEmbedder {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn calls_in_flight(&self) -> usize {
        (self.queue.in_flight() / 4).max(2)
    }

    fn reads_instructions(&self) -> bool {
        self.inner.reads_instructions()
    }

    async fn embed(&self, texts: &[String], kind: &EmbedKind) -> kgrag_types::Result<Embeddings> {
        if texts.len() < self.local_below {
            return self.inner.embed(texts, kind).await;
        }
        let what = "embedding through the workers";
        let model = self.inner.model_name().to_owned();
        let digests: Vec<String> = texts.iter().map(|t| embed_digest(kind, t)).collect();
        let mut unique: Vec<(String, &String)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (d, t) in digests.iter().zip(texts) {
            if seen.insert(d.as_str()) {
                unique.push((d.clone(), t));
            }
        }
        let wanted: Vec<String> = unique.iter().map(|(d, _)| d.clone()).collect();
        let dim = self.inner.dimension();
        // A vector of another length is another model's under the same name: not this one's.
        let fits = |v: &Vec<f32>| dim == 0 || v.len() == dim;
        let mut have: HashMap<String, Vec<f32>> = self
            .queue
            .embeddings(&model, &wanted)
            .await
            .map_err(|e| backend(what, e.to_string()))?;
        have.retain(|_, v| fits(v));
        let missing: Vec<&(String, &String)> = unique
            .iter()
            .filter(|(d, _)| !have.contains_key(d))
            .collect();
        if !missing.is_empty() {
            let kind_json = serde_json::to_value(kind).map_err(|e| backend(what, e.to_string()))?;
            let mut jobs = Vec::new();
            for part in missing.chunks(self.queue.embed_batch().max(1)) {
                let mut h = Sha256::new();
                h.update(model.as_bytes());
                for (d, _) in part {
                    h.update(d.as_bytes());
                }
                jobs.push(JobSpec {
                    key: hex::encode(h.finalize()),
                    label: "embeddings".into(),
                    payload: serde_json::json!({
                        "model": model,
                        "kind": kind_json,
                        "texts": part.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
                        "digests": part.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>(),
                    }),
                });
            }
            let failed = self
                .queue
                .run("embed", jobs)
                .await
                .map_err(|e| backend(what, e.to_string()))?;
            if !failed.is_empty() {
                return Err(backend(what, failed_error(&failed).to_string()));
            }
            let wanted: Vec<String> = missing.iter().map(|(d, _)| d.clone()).collect();
            have.extend(
                self.queue
                    .embeddings(&model, &wanted)
                    .await
                    .map_err(|e| backend(what, e.to_string()))?
                    .into_iter()
                    .filter(|(_, v)| fits(v)),
            );
        }
        let mut rows = Vec::with_capacity(texts.len());
        for d in &digests {
            match have.get(d) {
                Some(v) => rows.push(v.clone()),
                None => {
                    return Err(backend(
                        what,
                        format!(
                            "a job finished but its vector {d} is not in the embedding cache with \
                             dimension {dim} (is another model stored under the name {model:?}?)"
                        ),
                    ))
                }
            }
        }
        Embeddings::from_rows(rows)
    }
}

/// A coordinator's chat model: each call is a job for the workers (unless its reply is stored already);
/// the reply comes back from the reply cache. Its usage is what the workers' models did for the build.
pub struct QueuedChat {
    model: String,
    queue: Arc<dyn WorkQueue>,
}

impl std::fmt::Debug for QueuedChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedChat")
            .field("model", &self.model)
            .finish()
    }
}

impl QueuedChat {
    /// Wraps the coordinator's chat model (its name keys the replies).
    pub fn wrap(inner: &Arc<dyn ChatModel>, queue: Arc<dyn WorkQueue>) -> Arc<Self> {
        Arc::new(Self {
            model: inner.model_name().to_owned(),
            queue,
        })
    }

    fn count(&self, reply: &ChatResponse, stored_before: bool) {
        if stored_before || reply.cached {
            self.queue.account(0, 0, 0, 1);
        } else {
            self.queue.account(
                1,
                reply.usage.prompt_tokens,
                reply.usage.completion_tokens,
                0,
            );
        }
    }
}

impl kgrag_llm::ManagedChatModel for QueuedChat {
    fn usage(&self) -> kgrag_llm::UsageReport {
        self.queue.usage()
    }
}

#[async_trait]
impl ChatModel for QueuedChat {
    fn model_name(&self) -> &str {
        &self.model
    }

    async fn chat(&self, request: &ChatRequest) -> kgrag_types::Result<ChatResponse> {
        let what = "chat through the workers";
        let err = |e: KgragError| backend(what, e.to_string());
        let digest = chat_digest(&self.model, request).map_err(err)?;
        if let Some(reply) = self.queue.chat_reply(&digest).await.map_err(err)? {
            self.count(&reply, true);
            return Ok(reply);
        }
        let payload = serde_json::json!({ "model": self.model, "request": request });
        let job = JobSpec {
            key: digest.clone(),
            label: "chat".into(),
            payload,
        };
        let failed = self.queue.run("chat", vec![job]).await.map_err(err)?;
        if let Some(f) = failed.first() {
            return Err(backend(what, f.error.clone()));
        }
        let reply = self
            .queue
            .chat_reply(&digest)
            .await
            .map_err(err)?
            .ok_or_else(|| {
                backend(
                    what,
                    format!("a job finished but its reply {digest} is not in the reply cache"),
                )
            })?;
        self.count(&reply, false);
        Ok(reply)
    }
}
