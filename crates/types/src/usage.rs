//! Counting what a chat model was asked: [`CountingChat`] wraps any [`ChatModel`] and counts calls,
//! failures, cache hits and tokens, so that a pipeline stage can report what it cost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::traits::{ChatModel, ChatRequest, ChatResponse};

/// Model usage of one stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageUsage {
    /// Calls made (cache hits included).
    pub calls: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Calls answered from the response cache.
    pub cache_hits: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// Counters of chat calls (calls, failures, cache hits, tokens), updated from any thread: what
/// [`CountingChat`] keeps, and what a caller can keep for one request of its own.
#[derive(Debug, Default)]
pub struct UsageCounter {
    calls: AtomicU64,
    failures: AtomicU64,
    cache_hits: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl UsageCounter {
    /// Counts a call as it starts (a call in flight is counted).
    pub fn begin(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts the outcome of a call [`UsageCounter::begin`] counted: a failure, or its cache hit and tokens.
    pub fn end(&self, result: &crate::Result<ChatResponse>) {
        match result {
            Ok(r) => {
                if r.cached {
                    self.cache_hits.fetch_add(1, Ordering::Relaxed);
                }
                self.prompt_tokens
                    .fetch_add(r.usage.prompt_tokens, Ordering::Relaxed);
                self.completion_tokens
                    .fetch_add(r.usage.completion_tokens, Ordering::Relaxed);
            }
            Err(_) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// What was counted so far.
    pub fn usage(&self) -> StageUsage {
        StageUsage {
            calls: self.calls.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
        }
    }
}

/// A [`ChatModel`] that forwards to another and counts calls (cache hits included), cache hits and
/// tokens, so that each index stage can report what it cost.
pub struct CountingChat {
    inner: Arc<dyn ChatModel>,
    counter: UsageCounter,
}

impl CountingChat {
    /// Counts the calls made through it to `inner`.
    pub fn new(inner: Arc<dyn ChatModel>) -> Self {
        Self {
            inner,
            counter: UsageCounter::default(),
        }
    }

    /// What was counted so far.
    pub fn usage(&self) -> StageUsage {
        self.counter.usage()
    }
}

#[async_trait]
impl ChatModel for CountingChat {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> crate::Result<ChatResponse> {
        self.counter.begin();
        let result = self.inner.chat(request).await;
        self.counter.end(&result);
        result
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_token: &crate::TokenSink<'_>,
    ) -> crate::Result<ChatResponse> {
        self.counter.begin();
        let result = self.inner.chat_stream(request, on_token).await;
        self.counter.end(&result);
        result
    }
}
