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

/// A [`ChatModel`] that forwards to another and counts calls (cache hits included), cache hits and
/// tokens, so that each index stage can report what it cost.
pub struct CountingChat {
    inner: Arc<dyn ChatModel>,
    calls: AtomicU64,
    failures: AtomicU64,
    cache_hits: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl CountingChat {
    /// Counts the calls made through it to `inner`.
    pub fn new(inner: Arc<dyn ChatModel>) -> Self {
        Self {
            inner,
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
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

#[async_trait]
impl ChatModel for CountingChat {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> crate::Result<ChatResponse> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        match self.inner.chat(request).await {
            Ok(r) => {
                if r.cached {
                    self.cache_hits.fetch_add(1, Ordering::Relaxed);
                }
                self.prompt_tokens
                    .fetch_add(r.usage.prompt_tokens, Ordering::Relaxed);
                self.completion_tokens
                    .fetch_add(r.usage.completion_tokens, Ordering::Relaxed);
                Ok(r)
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }
}
