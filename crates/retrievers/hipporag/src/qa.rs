//! The QA reader (spec §6): the top `qa_top_k` passages framed as `Wikipedia Title: {passage}`, a one-shot
//! example, and the answer taken after `Answer:`.

use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message, Usage};

use crate::prompts::{QA_SHOT_ASSISTANT, QA_SHOT_USER, QA_SYSTEM};
use crate::{HippoConfig, HippoError, Result};

/// A reader's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReaderAnswer {
    /// The extracted short answer.
    pub answer: String,
    /// The model's whole reply.
    pub reply: String,
    /// Tokens of the call.
    pub usage: Usage,
    /// Whether the reply came from the response cache.
    pub cached: bool,
}

/// The reader's chat request for `question` over `passages` (each already `title\ntext`, best first).
pub fn qa_request<S: AsRef<str>>(
    question: &str,
    passages: &[S],
    config: &HippoConfig,
) -> ChatRequest {
    let mut user = kgrag_text::titled_passages(passages);
    user.push_str("Question: ");
    user.push_str(question);
    user.push_str("\nThought: ");
    ChatRequest {
        messages: vec![
            Message::system(QA_SYSTEM),
            Message::user(QA_SHOT_USER),
            Message::assistant(QA_SHOT_ASSISTANT),
            Message::user(user),
        ],
        settings: GenerationSettings {
            temperature: Some(config.llm_temperature),
            max_tokens: Some(config.max_new_tokens),
            ..GenerationSettings::default()
        },
    }
}

/// The answer in a reader reply: the text after the first `Answer:` (up to a second one), trimmed; the
/// whole reply, trimmed, when there is none.
pub fn extract_answer(reply: &str) -> String {
    let mut parts = reply.split("Answer:");
    let first = parts.next().unwrap_or_default();
    match parts.next() {
        Some(answer) => answer.trim().to_owned(),
        None => first.trim().to_owned(),
    }
}

/// Asks `chat` to answer `question` from the first `config.qa_top_k` of `passages`.
pub async fn answer<S: AsRef<str>>(
    chat: &dyn ChatModel,
    question: &str,
    passages: &[S],
    config: &HippoConfig,
) -> Result<ReaderAnswer> {
    let top = &passages[..passages.len().min(config.qa_top_k)];
    let response = chat
        .chat(&qa_request(question, top, config))
        .await
        .map_err(HippoError::Reader)?;
    Ok(ReaderAnswer {
        answer: extract_answer(&response.content),
        reply: response.content,
        usage: response.usage,
        cached: response.cached,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::testing::ScriptedChatModel;

    #[test]
    fn answer_extraction() {
        assert_eq!(
            extract_answer("Munch was born in Loten.\nAnswer: Loten."),
            "Loten."
        );
        assert_eq!(extract_answer("Answer: a Answer: b"), "a");
        assert_eq!(extract_answer("  just this \n"), "just this");
        assert_eq!(extract_answer("Thought: x\nAnswer:"), "");
    }

    #[tokio::test]
    async fn reader_prompt_frame_and_top_k() {
        let chat = ScriptedChatModel::new(["It is in the first passage.\nAnswer: Loten."]);
        let passages: Vec<String> = (0..7).map(|i| format!("T{i}\ntext {i}")).collect();
        let out = answer(&chat, "Where?", &passages, &HippoConfig::default())
            .await
            .unwrap();
        assert_eq!(out.answer, "Loten.");
        let req = &chat.requests()[0];
        assert_eq!(req.messages.len(), 4);
        let user = &req.messages[3].content;
        assert!(user.starts_with("Wikipedia Title: T0\ntext 0\n\nWikipedia Title: T1\n"));
        assert!(user.contains("Wikipedia Title: T4\ntext 4\n\n"));
        assert!(!user.contains("T5"));
        assert!(user.ends_with("Question: Where?\nThought: "));
        assert!(QA_SHOT_USER.starts_with("Wikipedia Title: "));
        assert!(QA_SHOT_ASSISTANT.contains("\nAnswer: "));
    }
}
