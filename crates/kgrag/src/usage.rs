//! Model usage of one request: [`counting`] runs a future and returns, beside its output, the chat calls
//! the index's model made for that future alone — also while other requests call the same model.
//!
//! The index's chat model is wrapped in [`ScopedChat`], which adds each call to the counter of the task
//! that made it (a tokio task-local). Calls made from tasks the future spawns are not counted.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_types::{ChatModel, ChatRequest, ChatResponse, StageUsage, UsageCounter};

tokio::task_local! {
    static REQUEST: Arc<UsageCounter>;
}

/// Runs `future` and returns its output with the chat calls made for it through an index's model (calls,
/// failures, cache hits, tokens).
pub async fn counting<F: Future>(future: F) -> (F::Output, StageUsage) {
    let counter = Arc::new(UsageCounter::default());
    let out = REQUEST.scope(counter.clone(), future).await;
    (out, counter.usage())
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
        let _ = REQUEST.try_with(|c| c.begin());
        let result = self.inner.chat(request).await;
        let _ = REQUEST.try_with(|c| c.end(&result));
        result
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_token: &kgrag_types::TokenSink<'_>,
    ) -> kgrag_types::Result<ChatResponse> {
        let _ = REQUEST.try_with(|c| c.begin());
        let result = self.inner.chat_stream(request, on_token).await;
        let _ = REQUEST.try_with(|c| c.end(&result));
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
        assert!(two.prompt_tokens > 0);
        // Outside any scope a call is made and counted nowhere.
        assert!(chat.chat(&request).await.is_ok());
    }
}
