//! Model usage of one request: [`counting`] runs a future and returns, beside its output, the chat calls
//! the index's model made for that future alone — also while other requests call the same model.
//!
//! The index's chat model is wrapped in [`ScopedChat`], which adds each call to the counter of the task
//! that made it (a tokio task-local). Calls made from tasks the future spawns are not counted.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_types::{ChatModel, ChatRequest, ChatResponse};
use serde::{Deserialize, Serialize};

/// The chat calls of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestUsage {
    /// Calls made (answers from the response cache included).
    pub calls: u64,
    /// Calls answered from the response cache.
    pub cache_hits: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

#[derive(Default)]
struct Counter {
    calls: AtomicU64,
    cache_hits: AtomicU64,
    failures: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl Counter {
    fn read(&self) -> RequestUsage {
        RequestUsage {
            calls: self.calls.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
        }
    }
}

tokio::task_local! {
    static REQUEST: Arc<Counter>;
}

/// Runs `future` and returns its output with the chat calls made for it through an index's model.
pub async fn counting<F: Future>(future: F) -> (F::Output, RequestUsage) {
    let counter = Arc::new(Counter::default());
    let out = REQUEST.scope(counter.clone(), future).await;
    (out, counter.read())
}

/// A chat model that adds each call to the [`counting`] scope it runs in (if any).
pub(crate) struct ScopedChat {
    inner: Arc<dyn ChatModel>,
}

impl ScopedChat {
    pub(crate) fn wrap(inner: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        Arc::new(Self { inner })
    }
}

#[async_trait]
impl ChatModel for ScopedChat {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> kgrag_types::Result<ChatResponse> {
        let result = self.inner.chat(request).await;
        let _ = REQUEST.try_with(|c| {
            c.calls.fetch_add(1, Ordering::Relaxed);
            match &result {
                Ok(r) => {
                    if r.cached {
                        c.cache_hits.fetch_add(1, Ordering::Relaxed);
                    }
                    c.prompt_tokens
                        .fetch_add(r.usage.prompt_tokens, Ordering::Relaxed);
                    c.completion_tokens
                        .fetch_add(r.usage.completion_tokens, Ordering::Relaxed);
                }
                Err(_) => {
                    c.failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::ScriptedChatModel;

    #[tokio::test]
    async fn each_scope_counts_its_own_calls() {
        let chat = ScopedChat::wrap(Arc::new(ScriptedChatModel::with_responder(|_| {
            Ok("ok".to_owned())
        })));
        let request = ChatRequest::user("hi");
        let (_, outside) = counting(async {}).await;
        assert_eq!(outside.calls, 0);
        let a = chat.clone();
        let b = chat.clone();
        let ra = request.clone();
        let rb = request.clone();
        let ((_, one), (_, two)) = tokio::join!(
            counting(async move { a.chat(&ra).await }),
            counting(async move {
                b.chat(&rb).await.ok();
                b.chat(&rb).await
            })
        );
        assert_eq!(one.calls, 1);
        assert_eq!(two.calls, 2);
        // Outside any scope a call is made and counted nowhere.
        assert!(chat.chat(&request).await.is_ok());
    }
}
