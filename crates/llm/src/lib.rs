//! # kgrag-llm
//!
//! The model providers behind kgrag's [`ChatModel`](kgrag_types::ChatModel) and
//! [`Embedder`](kgrag_types::Embedder) traits:
//!
//! * [`openai`] — any OpenAI-compatible server (OpenAI, vLLM, llama.cpp's server) through `async-openai`;
//! * [`ollama`] — Ollama through `ollama-rs`;
//! * `local` (feature `local`) — in-process candle models: the all-MiniLM-L6-v2 sentence embedder and a
//!   llama-architecture GGUF chat model (SmolLM2-135M-Instruct for plumbing tests).
//!
//! Every provider is wrapped in [`Managed`]: a concurrency limit; retries with exponential backoff and jitter
//! on 429, 408, 5xx, connection errors and timeouts, bounded in attempts and total time; a per-request
//! timeout; accounting of calls, tokens, retries and cache hits ([`UsageReport`]); and a persistent
//! [`ResponseCache`] keyed by a hash of provider, model, messages and every generation setting, so a rerun
//! costs nothing and a killed run loses nothing. API keys are read from an environment variable the config
//! names, and never appear in config files, logs, errors or `Debug` output.
//!
//! Pick a provider in config and build it with [`build_chat`] / [`build_embedder`]:
//!
//! ```
//! use kgrag_llm::{build_chat, ChatConfig};
//!
//! let config: ChatConfig = serde_json::from_str(
//!     r#"{"provider": "openai", "base_url": "http://127.0.0.1:8080/v1", "model": "smollm2"}"#,
//! )?;
//! let chat = build_chat(&config, None)?;
//! assert_eq!(chat.model_name(), "smollm2");
//! assert_eq!(chat.usage().calls, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cache;
pub mod config;
mod error;
pub mod hashing;
#[cfg(feature = "local")]
pub mod local;
pub mod managed;
pub mod ollama;
pub mod openai;
#[cfg(feature = "test-utils")]
pub mod testing;

pub use cache::ResponseCache;
pub use config::{
    asset_path, asset_roots, build_chat, build_embedder, missing_assets_hint, user_assets_dir,
    ChatConfig, EmbedderConfig, EncoderPrecision, LocalChatConfig, LocalEmbedderConfig,
    ManagedChatModel, ManagedEmbedder,
};
pub use error::{LlmError, Result};
pub use hashing::{HashingEmbedder, HashingEmbedderConfig};
pub use managed::{Limits, Managed, UsageReport};
pub use ollama::OllamaConfig;
pub use openai::OpenAiConfig;
