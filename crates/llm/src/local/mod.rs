//! In-process models (feature `local`): a BERT sentence embedder (our encoder, see `bert`) and a GGUF
//! llama chat model on candle.
//!
//! Both run on the CPU in a blocking thread, so the async runtime stays responsive.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod attention;
mod batcher;
mod bert;
mod chat;
mod elementwise;
mod embed;
mod gemm;
#[cfg(target_arch = "x86_64")]
mod int8;

pub use chat::LocalChat;
pub use embed::LocalEmbedder;

use crate::error::LlmError;

fn local_err(model: &str, e: impl std::fmt::Display) -> LlmError {
    LlmError::Local {
        model: model.to_owned(),
        message: e.to_string(),
    }
}
