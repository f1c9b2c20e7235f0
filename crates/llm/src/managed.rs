//! What wraps every provider: a concurrency limit, retries with exponential backoff and jitter, a
//! per-request timeout, accounting, and the response cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::StreamExt;
use kgrag_text::Encoding;
use kgrag_types::{ChatModel, ChatRequest, ChatResponse, EmbedKind, Embedder, Embeddings, Usage};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::cache::{chat_key, embedding_key, ResponseCache};
use crate::error::{LlmError, Result};

/// One attempt at a chat completion against a provider: no retries, no cache.
#[async_trait]
pub trait ChatBackend: Send + Sync {
    /// Provider name (`openai`, `ollama`, `local`); part of cache keys.
    fn provider(&self) -> &str;
    /// Model name; part of cache keys.
    fn model(&self) -> &str;
    /// Sends one request.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse>;
    /// Sends one request, handing the reply's pieces to `on_token` as they arrive (default: the whole
    /// reply once, from [`complete`](Self::complete)).
    async fn complete_stream(
        &self,
        request: &ChatRequest,
        on_token: &kgrag_types::TokenSink<'_>,
    ) -> Result<ChatResponse> {
        let reply = self.complete(request).await?;
        on_token(&reply.content);
        Ok(reply)
    }
}

/// One attempt at embedding a batch against a provider: no retries, no cache.
#[async_trait]
pub trait EmbedBackend: Send + Sync {
    /// Provider name; part of cache keys.
    fn provider(&self) -> &str;
    /// Model name; part of cache keys.
    fn model(&self) -> &str;
    /// The dimension, when known before the first call.
    fn dimension(&self) -> Option<usize>;
    /// Largest batch sent in one request.
    fn max_batch(&self) -> usize;
    /// How many batches of one embedding call may be in flight at once (the concurrency limit applies as
    /// well): a provider over the network takes as many as the limit allows (the default), so a large
    /// call is bound by the provider's throughput, not by one request's latency; an in-process model
    /// says 1 — its forward pass already uses every core, and overlapping batches was measured slower.
    fn batches_in_flight(&self) -> usize {
        usize::MAX
    }
    /// Whether the backend queues concurrent calls itself and merges them (the in-process encoder's
    /// batcher): then the concurrency limit does not hold calls back — it would keep the next batch from
    /// forming while one runs. `false` by default.
    fn queues_calls(&self) -> bool {
        false
    }
    /// Whether a query instruction changes the vector (see `Embedder::reads_instructions`); `true` unless
    /// the backend ignores it.
    fn reads_instructions(&self) -> bool {
        true
    }
    /// Embeds one batch; one vector per text, in order.
    async fn embed_batch(&self, texts: &[String], kind: &EmbedKind) -> Result<Vec<Vec<f32>>>;
}

/// Limits applied around a provider. In TOML, all fields are optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Requests in flight at once. The in-process encoder takes every call and merges concurrent ones
    /// into one forward pass, so for `[embedder] provider = "local"` this does not limit calls.
    pub concurrency: usize,
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// Time budget for one request including every retry, in seconds.
    pub max_retry_secs: f64,
    /// Backoff before the first retry, in milliseconds; doubles each retry.
    pub initial_backoff_ms: u64,
    /// Longest backoff, in milliseconds.
    pub max_backoff_ms: u64,
    /// Timeout of one attempt, in seconds.
    pub request_timeout_secs: f64,
    /// Seed of the backoff jitter.
    pub jitter_seed: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            concurrency: 8,
            max_attempts: 6,
            max_retry_secs: 300.0,
            initial_backoff_ms: 500,
            max_backoff_ms: 30_000,
            request_timeout_secs: 180.0,
            jitter_seed: 0,
        }
    }
}

impl Limits {
    fn request_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.request_timeout_secs.max(0.001))
    }
    fn max_total(&self) -> Duration {
        Duration::from_secs_f64(self.max_retry_secs.max(0.0))
    }
    /// Backoff before retry number `retry` (1-based), before jitter.
    fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .initial_backoff_ms
            .saturating_mul(1u64 << retry.saturating_sub(1).min(30));
        Duration::from_millis(exp.min(self.max_backoff_ms))
    }
}

/// Counters of what a provider was asked and what it cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageReport {
    /// Requests made to the wrapper (chat requests, or texts to embed).
    pub requests: u64,
    /// Requests answered by the provider (one per successful call; embeddings: per batch).
    pub calls: u64,
    /// Attempts sent, failed ones included.
    pub attempts: u64,
    /// Retries after a retryable failure.
    pub retries: u64,
    /// Requests that failed for good.
    pub failures: u64,
    /// Requests (or texts) answered from the cache.
    pub cache_hits: u64,
    /// Prompt tokens of provider calls (cache hits excluded).
    pub prompt_tokens: u64,
    /// Completion tokens of provider calls (cache hits excluded).
    pub completion_tokens: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    calls: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    failures: AtomicU64,
    cache_hits: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn report(&self) -> UsageReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        UsageReport {
            requests: get(&self.requests),
            calls: get(&self.calls),
            attempts: get(&self.attempts),
            retries: get(&self.retries),
            failures: get(&self.failures),
            cache_hits: get(&self.cache_hits),
            prompt_tokens: get(&self.prompt_tokens),
            completion_tokens: get(&self.completion_tokens),
        }
    }
}

/// A provider with limits, retries, accounting and an optional response cache around it. It implements
/// [`ChatModel`] when the backend is a [`ChatBackend`] and [`Embedder`] when it is an [`EmbedBackend`].
pub struct Managed<B> {
    backend: B,
    limits: Limits,
    semaphore: Semaphore,
    cache: Option<ResponseCache>,
    counters: Arc<Counters>,
    jitter: AtomicU64,
    learned_dim: AtomicUsize,
}

impl<B> std::fmt::Debug for Managed<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Managed")
            .field("limits", &self.limits)
            .field("cache", &self.cache)
            .field("usage", &self.counters.report())
            .finish_non_exhaustive()
    }
}

impl<B> Managed<B> {
    /// Wraps `backend` with `limits` and, when given, a response cache.
    pub fn new(backend: B, limits: Limits, cache: Option<ResponseCache>) -> Self {
        let permits = limits.concurrency.max(1);
        let seed = limits.jitter_seed;
        Self {
            backend,
            limits,
            semaphore: Semaphore::new(permits),
            cache,
            counters: Arc::new(Counters::default()),
            jitter: AtomicU64::new(seed ^ 0x9e37_79b9_7f4a_7c15),
            learned_dim: AtomicUsize::new(0),
        }
    }

    /// The wrapped provider.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// What has been asked and spent so far.
    pub fn usage(&self) -> UsageReport {
        self.counters.report()
    }

    /// A factor in [0.5, 1.0) from a splitmix64 stream, so concurrent retries spread out.
    fn jitter_factor(&self) -> f64 {
        use kgrag_types::hashing::{splitmix64_mix, SPLITMIX64_GAMMA};
        let z = splitmix64_mix(
            self.jitter
                .fetch_add(SPLITMIX64_GAMMA, Ordering::Relaxed)
                .wrapping_add(SPLITMIX64_GAMMA),
        );
        0.5 + 0.5 * ((z >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Runs `attempt` under the concurrency limit and timeout, retrying retryable failures.
    async fn with_retries<T, F, Fut>(&self, provider: &str, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.with_retries_while(provider, || true, attempt).await
    }

    /// [`with_retries`](Self::with_retries), retrying a failure only while `may_retry()` says so.
    async fn with_retries_while<T, F, Fut>(
        &self,
        provider: &str,
        may_retry: impl Fn() -> bool,
        attempt: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.retry_loop(provider, true, may_retry, attempt).await
    }

    /// The retry loop; each attempt under the concurrency limit when `limited`.
    async fn retry_loop<T, F, Fut>(
        &self,
        provider: &str,
        limited: bool,
        may_retry: impl Fn() -> bool,
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let started = Instant::now();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            Counters::add(&self.counters.attempts, 1);
            let outcome = {
                let _permit = if limited {
                    Some(self.semaphore.acquire().await.map_err(|_| {
                        LlmError::Config("the concurrency limiter was closed".to_owned())
                    })?)
                } else {
                    None
                };
                let timeout = self.limits.request_timeout();
                match tokio::time::timeout(timeout, attempt()).await {
                    Ok(result) => result,
                    Err(_) => Err(LlmError::Timeout {
                        provider: provider.to_owned(),
                        timeout,
                    }),
                }
            };
            let err = match outcome {
                Ok(value) => {
                    Counters::add(&self.counters.calls, 1);
                    return Ok(value);
                }
                Err(err) => err,
            };
            if !err.is_retryable() || !may_retry() {
                Counters::add(&self.counters.failures, 1);
                return Err(err);
            }
            let delay = self.limits.backoff(attempts).mul_f64(self.jitter_factor());
            if attempts >= self.limits.max_attempts.max(1)
                || started.elapsed() + delay > self.limits.max_total()
            {
                Counters::add(&self.counters.failures, 1);
                return Err(LlmError::RetriesExhausted {
                    attempts,
                    elapsed: started.elapsed(),
                    last: Box::new(err),
                });
            }
            Counters::add(&self.counters.retries, 1);
            tokio::time::sleep(delay).await;
        }
    }
}

fn label(provider: &str, model: &str) -> String {
    format!("{provider} model {model}")
}

/// Counts usage with o200k when the provider reported none.
fn fill_usage(request: &ChatRequest, response: &mut ChatResponse) {
    if response.usage != Usage::default() {
        return;
    }
    let count = |s: &str| Encoding::O200kBase.count(s).unwrap_or(0) as u64;
    response.usage = Usage {
        prompt_tokens: request.messages.iter().map(|m| count(&m.content)).sum(),
        completion_tokens: count(&response.content),
    };
}

impl<B: ChatBackend> Managed<B> {
    /// Chat with the provider's own error type (the [`ChatModel`] impl converts it).
    pub async fn chat_checked(&self, request: &ChatRequest) -> Result<ChatResponse> {
        self.chat_inner(request, None).await
    }

    /// [`chat_checked`](Self::chat_checked), streaming the reply to `on_token`: a cached reply is handed
    /// over whole; a failed attempt is retried only while nothing of it has been handed over (a retry
    /// would send the start twice).
    pub async fn chat_stream_checked(
        &self,
        request: &ChatRequest,
        on_token: &kgrag_types::TokenSink<'_>,
    ) -> Result<ChatResponse> {
        self.chat_inner(request, Some(on_token)).await
    }

    async fn chat_inner(
        &self,
        request: &ChatRequest,
        on_token: Option<&kgrag_types::TokenSink<'_>>,
    ) -> Result<ChatResponse> {
        Counters::add(&self.counters.requests, 1);
        let provider = self.backend.provider();
        let model = self.backend.model();
        let key = self
            .cache
            .as_ref()
            .map(|_| chat_key(provider, model, request));
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            if let Some(mut hit) = cache.get_chat(key)? {
                Counters::add(&self.counters.cache_hits, 1);
                hit.cached = true;
                if let Some(sink) = on_token {
                    sink(&hit.content);
                }
                return Ok(hit);
            }
        }
        let mut response = match on_token {
            None => {
                self.with_retries(provider, || self.backend.complete(request))
                    .await?
            }
            Some(sink) => {
                let sent = std::sync::atomic::AtomicBool::new(false);
                let counted = |piece: &str| {
                    sent.store(true, std::sync::atomic::Ordering::Relaxed);
                    sink(piece);
                };
                self.with_retries_while(
                    provider,
                    || !sent.load(std::sync::atomic::Ordering::Relaxed),
                    || self.backend.complete_stream(request, &counted),
                )
                .await?
            }
        };
        fill_usage(request, &mut response);
        Counters::add(&self.counters.prompt_tokens, response.usage.prompt_tokens);
        Counters::add(
            &self.counters.completion_tokens,
            response.usage.completion_tokens,
        );
        response.cached = false;
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            cache.put_chat(key, &response)?;
        }
        Ok(response)
    }
}

#[async_trait]
impl<B: ChatBackend> ChatModel for Managed<B> {
    fn model_name(&self) -> &str {
        self.backend.model()
    }

    async fn chat(&self, request: &ChatRequest) -> kgrag_types::Result<ChatResponse> {
        self.chat_checked(request)
            .await
            .map_err(|e| e.into_types(label(self.backend.provider(), self.backend.model())))
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_token: &kgrag_types::TokenSink<'_>,
    ) -> kgrag_types::Result<ChatResponse> {
        self.chat_stream_checked(request, on_token)
            .await
            .map_err(|e| e.into_types(label(self.backend.provider(), self.backend.model())))
    }
}

impl<B: EmbedBackend> Managed<B> {
    /// Batches of one call in flight at once: what the backend takes, within the concurrency limit.
    fn batches_in_flight(&self) -> usize {
        self.backend
            .batches_in_flight()
            .min(self.limits.concurrency)
            .max(1)
    }

    /// Embeds with the provider's own error type (the [`Embedder`] impl converts it).
    pub async fn embed_checked(&self, texts: &[String], kind: &EmbedKind) -> Result<Embeddings> {
        let provider = self.backend.provider();
        let model = self.backend.model();
        Counters::add(&self.counters.requests, texts.len() as u64);
        let mut rows: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        let keys: Vec<String> = match &self.cache {
            Some(_) => texts
                .iter()
                .map(|t| embedding_key(provider, model, kind, t))
                .collect(),
            None => Vec::new(),
        };
        if let Some(cache) = &self.cache {
            for (row, key) in rows.iter_mut().zip(&keys) {
                // A non-finite vector cached by an older version is embedded again.
                if let Some(v) = cache
                    .get_embedding(key)?
                    .filter(|v| v.iter().all(|x| x.is_finite()))
                {
                    *row = Some(v);
                    Counters::add(&self.counters.cache_hits, 1);
                }
            }
        }
        // A text that comes more than once is embedded once (its first place); the others copy it.
        let mut first: HashMap<&str, usize> = HashMap::new();
        let mut copies: Vec<(usize, usize)> = Vec::new();
        let mut missing: Vec<usize> = Vec::new();
        for i in (0..texts.len()).filter(|&i| rows[i].is_none()) {
            match first.entry(texts[i].as_str()) {
                std::collections::hash_map::Entry::Occupied(e) => copies.push((i, *e.get())),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(i);
                    missing.push(i);
                }
            }
        }
        // Batches go out up to `width` at a time and are taken back in order, each checked and cached
        // as it comes back; a batch's vectors do not depend on which batches were in flight with it.
        let width = self.batches_in_flight();
        let batches: Vec<_> = missing
            .chunks(self.backend.max_batch().max(1))
            .map(|batch| async move {
                let batch_texts: Vec<String> = batch.iter().map(|&i| texts[i].clone()).collect();
                // A backend that queues calls itself is not held back by the limit.
                let limited = !self.backend.queues_calls();
                let vectors = self
                    .retry_loop(
                        provider,
                        limited,
                        || true,
                        || self.backend.embed_batch(&batch_texts, kind),
                    )
                    .await?;
                Ok::<_, LlmError>((batch, batch_texts, vectors))
            })
            .collect();
        let mut done = futures_util::stream::iter(batches).buffered(width);
        while let Some(outcome) = done.next().await {
            let (batch, batch_texts, vectors) = outcome?;
            if vectors.len() != batch.len() {
                return Err(LlmError::InvalidResponse {
                    provider: label(provider, model),
                    message: format!(
                        "{} embeddings returned for {} texts",
                        vectors.len(),
                        batch.len()
                    ),
                });
            }
            // Tokens are what a hosted embedding API bills; an in-process model costs none, and loading
            // the o200k vocabulary only to count them would cost a quarter of a second per process.
            if provider != "local" {
                let prompt_tokens: usize = batch_texts
                    .iter()
                    .map(|t| Encoding::O200kBase.count(t).unwrap_or(0))
                    .sum();
                Counters::add(&self.counters.prompt_tokens, prompt_tokens as u64);
            }
            // NaN or ∞ is an error naming the text, before anything is cached or scored with it.
            for (text, v) in batch_texts.iter().zip(&vectors) {
                if let Some(dimension) = v.iter().position(|x| !x.is_finite()) {
                    return Err(LlmError::NonFinite {
                        provider: label(provider, model),
                        text: text.chars().take(80).collect(),
                        dimension,
                    });
                }
            }
            if let Some(cache) = &self.cache {
                cache.put_embeddings(
                    batch
                        .iter()
                        .zip(&vectors)
                        .map(|(&i, v)| (keys[i].as_str(), v.as_slice())),
                )?;
            }
            for (&i, v) in batch.iter().zip(vectors) {
                rows[i] = Some(v);
            }
        }
        for (i, from) in copies {
            rows[i] = rows[from].clone();
        }
        let rows: Vec<Vec<f32>> = rows.into_iter().flatten().collect();
        let embeddings = Embeddings::from_rows(rows).map_err(|e| LlmError::InvalidResponse {
            provider: label(provider, model),
            message: e.to_string(),
        })?;
        if !embeddings.is_empty() {
            self.learned_dim.store(embeddings.dim(), Ordering::Relaxed);
        }
        Ok(embeddings)
    }
}

#[async_trait]
impl<B: EmbedBackend> Embedder for Managed<B> {
    fn model_name(&self) -> &str {
        self.backend.model()
    }

    fn dimension(&self) -> usize {
        self.backend
            .dimension()
            .unwrap_or_else(|| self.learned_dim.load(Ordering::Relaxed))
    }

    async fn embed(&self, texts: &[String], kind: &EmbedKind) -> kgrag_types::Result<Embeddings> {
        self.embed_checked(texts, kind)
            .await
            .map_err(|e| e.into_types(label(self.backend.provider(), self.backend.model())))
    }

    fn calls_in_flight(&self) -> usize {
        self.batches_in_flight()
    }

    fn reads_instructions(&self) -> bool {
        self.backend.reads_instructions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A backend that fails with scripted errors, then answers.
    struct Flaky {
        script: Mutex<Vec<LlmError>>,
        calls: AtomicU64,
    }

    impl Flaky {
        fn new(mut errors: Vec<LlmError>) -> Self {
            errors.reverse();
            Self {
                script: Mutex::new(errors),
                calls: AtomicU64::new(0),
            }
        }
    }

    fn http(status: u16) -> LlmError {
        LlmError::Http {
            provider: "test".into(),
            status,
            message: "scripted".into(),
        }
    }

    #[async_trait]
    impl ChatBackend for Flaky {
        fn provider(&self) -> &str {
            "test"
        }
        fn model(&self) -> &str {
            "flaky"
        }
        async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            if let Some(e) = self.script.lock().unwrap().pop() {
                return Err(e);
            }
            Ok(ChatResponse {
                content: format!("echo {}", request.messages[0].content),
                ..ChatResponse::default()
            })
        }
    }

    fn fast_limits() -> Limits {
        Limits {
            initial_backoff_ms: 1,
            max_backoff_ms: 5,
            max_attempts: 4,
            ..Limits::default()
        }
    }

    #[tokio::test]
    async fn retries_retryable_errors_then_succeeds() {
        let m = Managed::new(Flaky::new(vec![http(429), http(503)]), fast_limits(), None);
        let r = m
            .chat_checked(&ChatRequest::user("hi there"))
            .await
            .unwrap();
        assert_eq!(r.content, "echo hi there");
        let u = m.usage();
        assert_eq!((u.attempts, u.retries, u.calls, u.failures), (3, 2, 1, 0));
        // No usage from the backend: counted with the tokenizer.
        assert_eq!(u.prompt_tokens, 2);
        assert_eq!(u.completion_tokens, 3);
    }

    #[tokio::test]
    async fn does_not_retry_client_errors() {
        let m = Managed::new(Flaky::new(vec![http(400)]), fast_limits(), None);
        let err = m.chat_checked(&ChatRequest::user("x")).await.unwrap_err();
        assert!(matches!(err, LlmError::Http { status: 400, .. }));
        assert_eq!(m.backend().calls.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn stops_at_the_attempt_bound() {
        let errors = (0..10).map(|_| http(500)).collect();
        let m = Managed::new(Flaky::new(errors), fast_limits(), None);
        let err = m.chat_checked(&ChatRequest::user("x")).await.unwrap_err();
        assert!(
            err.to_string().starts_with("gave up after 4 attempts"),
            "{err}"
        );
        assert_eq!(m.usage().failures, 1);
    }

    #[tokio::test]
    async fn stops_at_the_time_bound() {
        let errors = (0..10).map(|_| http(500)).collect();
        let limits = Limits {
            initial_backoff_ms: 200,
            max_backoff_ms: 200,
            max_attempts: 10,
            max_retry_secs: 0.05,
            ..Limits::default()
        };
        let m = Managed::new(Flaky::new(errors), limits, None);
        let err = m.chat_checked(&ChatRequest::user("x")).await.unwrap_err();
        assert!(
            err.to_string().starts_with("gave up after 1 attempts"),
            "{err}"
        );
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let l = Limits {
            initial_backoff_ms: 100,
            max_backoff_ms: 1000,
            ..Limits::default()
        };
        let ms: Vec<u128> = (1..=6).map(|r| l.backoff(r).as_millis()).collect();
        assert_eq!(ms, vec![100, 200, 400, 800, 1000, 1000]);
        let m = Managed::new(Flaky::new(vec![]), l, None);
        for _ in 0..100 {
            let f = m.jitter_factor();
            assert!((0.5..1.0).contains(&f), "{f}");
        }
    }

    #[tokio::test]
    async fn cache_serves_repeats_without_calling_the_backend() {
        let dir = std::env::temp_dir().join(format!("kgrag-managed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = ResponseCache::open(dir.join("c.redb")).unwrap();
        let m = Managed::new(Flaky::new(vec![]), fast_limits(), Some(cache.clone()));
        let first = m.chat_checked(&ChatRequest::user("q")).await.unwrap();
        let second = m.chat_checked(&ChatRequest::user("q")).await.unwrap();
        assert!(!first.cached && second.cached);
        assert_eq!(first.content, second.content);
        assert_eq!(m.backend().calls.load(Ordering::Relaxed), 1);
        // A fresh wrapper over the same file (a rerun) pays nothing either.
        let rerun = Managed::new(Flaky::new(vec![]), fast_limits(), Some(cache));
        assert!(
            rerun
                .chat_checked(&ChatRequest::user("q"))
                .await
                .unwrap()
                .cached
        );
        assert_eq!(rerun.backend().calls.load(Ordering::Relaxed), 0);
        assert_eq!(rerun.usage().cache_hits, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An embedding backend that counts the texts it embeds; a text's vector is its length, then 1.
    struct Counting {
        texts: AtomicU64,
    }

    #[async_trait]
    impl EmbedBackend for Counting {
        fn provider(&self) -> &str {
            "test"
        }
        fn model(&self) -> &str {
            "counting"
        }
        fn dimension(&self) -> Option<usize> {
            Some(2)
        }
        fn max_batch(&self) -> usize {
            2
        }
        async fn embed_batch(&self, texts: &[String], _kind: &EmbedKind) -> Result<Vec<Vec<f32>>> {
            self.texts.fetch_add(texts.len() as u64, Ordering::Relaxed);
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    #[tokio::test]
    async fn a_repeated_text_is_embedded_once() {
        let m = Managed::new(
            Counting {
                texts: AtomicU64::new(0),
            },
            fast_limits(),
            None,
        );
        let texts: Vec<String> = ["a", "bb", "a", "ccc", "bb", "a"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let e = m.embed_checked(&texts, &EmbedKind::Document).await.unwrap();
        assert_eq!(m.backend().texts.load(Ordering::Relaxed), 3);
        let firsts: Vec<f32> = e.rows().map(|r| r[0]).collect();
        assert_eq!(firsts, vec![1.0, 2.0, 1.0, 3.0, 2.0, 1.0]);
    }

    /// An embedding backend whose vector for a text containing "bad" holds `poison` at dimension 2.
    struct Poisoned {
        poison: f32,
        calls: AtomicU64,
    }

    #[async_trait]
    impl EmbedBackend for Poisoned {
        fn provider(&self) -> &str {
            "test"
        }
        fn model(&self) -> &str {
            "poisoned"
        }
        fn dimension(&self) -> Option<usize> {
            Some(4)
        }
        fn max_batch(&self) -> usize {
            8
        }
        async fn embed_batch(&self, texts: &[String], _kind: &EmbedKind) -> Result<Vec<Vec<f32>>> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.5f32; 4];
                    if t.contains("bad") {
                        v[2] = self.poison;
                    }
                    v
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn non_finite_embeddings_are_errors_naming_the_text_and_never_cached() {
        let dir = std::env::temp_dir().join(format!("kgrag-managed-nan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (i, poison) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY]
            .into_iter()
            .enumerate()
        {
            let cache = ResponseCache::open(dir.join(format!("c{i}.redb"))).unwrap();
            let m = Managed::new(
                Poisoned {
                    poison,
                    calls: AtomicU64::new(0),
                },
                fast_limits(),
                Some(cache),
            );
            let texts = vec!["fine".to_owned(), "a bad passage".to_owned()];
            let err = m
                .embed_checked(&texts, &EmbedKind::Document)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, LlmError::NonFinite { text, dimension: 2, .. } if text == "a bad passage"),
                "{err}"
            );
            assert!(err.to_string().contains("a bad passage"), "{err}");
            // Not retried (a model that returns NaN returns it again), and nothing of the batch cached.
            assert_eq!(m.backend().calls.load(Ordering::Relaxed), 1);
            let ok = m
                .embed_checked(&texts[..1], &EmbedKind::Document)
                .await
                .unwrap();
            assert_eq!(ok.len(), 1);
            assert_eq!(m.usage().cache_hits, 0);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
