//! In-process models on candle (feature `local`): a BERT sentence embedder and a GGUF llama chat model.
//!
//! Both run on the CPU in a blocking thread, so the async runtime stays responsive.

mod chat;
mod embed;

pub use chat::LocalChat;
pub use embed::LocalEmbedder;

use crate::error::LlmError;

fn local_err(model: &str, e: impl std::fmt::Display) -> LlmError {
    LlmError::Local {
        model: model.to_owned(),
        message: e.to_string(),
    }
}
