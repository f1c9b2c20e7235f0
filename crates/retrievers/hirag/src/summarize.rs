//! The LLM description summariser of spec §4.5 (our prompt) with the extractive summariser as fallback.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_text::{Budget, Encoding, ExtractiveSummarizer};
use kgrag_types::{
    ChatModel, ChatRequest, GenerationSettings, Message, Summarizer, SummaryRequest,
};

/// Input cap of a description summary (spec §4.5), o200k tokens.
const SUMMARY_INPUT_TOKENS: usize = 32_768;

/// Spec §4.5's long-description summary by a chat model: merge a list of descriptions of one entity (or
/// one relation) into a single coherent third-person description that resolves contradictions and names
/// the subject; `max_tokens` from the request (500). A failed call or an empty reply falls back to the
/// extractive summary (counted).
pub struct LlmDescriptionSummarizer {
    chat: Arc<dyn ChatModel>,
    fallback: Arc<ExtractiveSummarizer>,
    fallbacks: AtomicU64,
}

impl LlmDescriptionSummarizer {
    /// A summariser calling `chat` at temperature 0, falling back to `fallback`.
    pub fn new(chat: Arc<dyn ChatModel>, fallback: Arc<ExtractiveSummarizer>) -> Self {
        Self {
            chat,
            fallback,
            fallbacks: AtomicU64::new(0),
        }
    }

    /// Summaries replaced by the extractive fallback.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// The request sent for `request` (our wording).
    pub fn request(request: &SummaryRequest) -> ChatRequest {
        let mut list = String::new();
        let mut used = 0;
        for d in &request.descriptions {
            used += crate::tokens(d);
            if used > SUMMARY_INPUT_TOKENS {
                break;
            }
            list.push_str("- ");
            list.push_str(d.trim());
            list.push('\n');
        }
        let prompt = format!(
            "Several notes describe the same subject. Combine them into one description written in the \
             third person. Name the subject, keep every fact the notes agree on, and where two notes \
             contradict each other state the version that is best supported. Write plain prose only.\n\n\
             Subject: {}\nNotes:\n{list}\nDescription:",
            request.subject
        );
        ChatRequest {
            messages: vec![Message::user(prompt)],
            settings: GenerationSettings {
                temperature: Some(0.0),
                max_tokens: Some(request.max_tokens.clamp(1, u32::MAX as usize) as u32),
                ..GenerationSettings::default()
            },
        }
    }
}

#[async_trait]
impl Summarizer for LlmDescriptionSummarizer {
    fn fingerprint(&self) -> String {
        format!(
            "hirag-description-llm/v1/{}/{}",
            self.chat.model_name(),
            self.fallback.fingerprint()
        )
    }

    async fn summarize(&self, request: &SummaryRequest) -> kgrag_types::Result<String> {
        if let Ok(reply) = self.chat.chat(&Self::request(request)).await {
            let text = reply.content.trim();
            if !text.is_empty() {
                return Ok(text.to_owned());
            }
        }
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        self.fallback
            .summarize_texts(
                &request.descriptions,
                None,
                Budget::Tokens {
                    max: request.max_tokens,
                    encoding: Encoding::O200kBase,
                },
            )
            .await
            .map_err(|e| kgrag_types::Error::backend("extractive description summary", e))
    }
}
