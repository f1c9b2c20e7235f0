//! Ollama chat and embeddings through `ollama-rs` (`/api/chat`, `/api/embed`).
//!
//! Ollama cannot run in this project's CI, so this client is tested against recorded exchanges in the shape
//! Ollama's API documents, served by a local test server (`tests/it/providers.rs`), which also checks the request
//! bodies. `ollama-rs` reports HTTP errors as text without the status code; a reply that says the server is
//! busy (Ollama's queue-full answer) is treated as retryable, everything else as final.

use std::collections::BTreeMap;

use async_trait::async_trait;
use kgrag_types::{
    ChatRequest, ChatResponse, EmbedKind, FinishReason, ResponseFormat, Role, Usage,
};
use ollama_rs::error::OllamaError;
use ollama_rs::generation::chat::request::ChatMessageRequest;
use ollama_rs::generation::chat::{ChatMessage, MessageRole};
use ollama_rs::generation::embeddings::request::{EmbeddingsInput, GenerateEmbeddingsRequest};
use ollama_rs::generation::parameters::FormatType;
use ollama_rs::models::ModelOptions;
use ollama_rs::Ollama;
use serde::{Deserialize, Serialize};

use crate::error::{LlmError, Result};
use crate::managed::{ChatBackend, EmbedBackend};
use crate::openai::instructed;

/// Connection settings of an Ollama server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OllamaConfig {
    /// Host with scheme, e.g. `http://localhost`.
    #[serde(default = "default_host")]
    pub host: String,
    /// Port, Ollama's default 11434.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Model name, e.g. `llama3.1:8b`.
    pub model: String,
    /// Ollama model options (`num_ctx`, `repeat_penalty`, …) as Ollama names them. Request settings
    /// (temperature, seed, max tokens, top_p, stop) override these.
    #[serde(default)]
    pub options: BTreeMap<String, serde_json::Value>,
    /// Concurrency, retries and timeouts.
    #[serde(default)]
    pub limits: crate::managed::Limits,
    /// Embeddings only: the vector dimension, when known in advance.
    #[serde(default)]
    pub dimension: Option<usize>,
    /// Embeddings only: texts per request.
    #[serde(default = "default_batch")]
    pub batch_size: usize,
}

fn default_host() -> String {
    "http://localhost".to_owned()
}
fn default_port() -> u16 {
    11434
}
fn default_batch() -> usize {
    32
}

struct Client {
    ollama: Ollama,
    config: OllamaConfig,
    base_options: ModelOptions,
    label: String,
}

impl Client {
    fn new(config: OllamaConfig) -> Result<Self> {
        if !(config.host.starts_with("http://") || config.host.starts_with("https://")) {
            return Err(LlmError::Config(format!(
                "ollama host {:?} must start with http:// or https://",
                config.host
            )));
        }
        let options = serde_json::Value::Object(config.options.clone().into_iter().collect());
        let base_options: ModelOptions = serde_json::from_value(options)
            .map_err(|e| LlmError::Config(format!("ollama options: {e}")))?;
        let url = format!("{}:{}", config.host.trim_end_matches('/'), config.port);
        let ollama = Ollama::try_new(url.as_str())
            .map_err(|e| LlmError::Config(format!("ollama URL {url}: {e}")))?;
        Ok(Self {
            label: format!("ollama {} at {url}", config.model),
            ollama,
            config,
            base_options,
        })
    }

    fn map_error(&self, err: OllamaError) -> LlmError {
        let provider = self.label.clone();
        match err {
            OllamaError::ReqwestError(e) if e.is_timeout() => LlmError::Timeout {
                provider,
                timeout: std::time::Duration::from_secs(0),
            },
            OllamaError::ReqwestError(e) if e.is_decode() || e.is_body() => {
                LlmError::InvalidResponse {
                    provider,
                    message: e.to_string(),
                }
            }
            OllamaError::ReqwestError(e) => {
                let message = crate::error::error_chain(&e);
                LlmError::Connection { provider, message }
            }
            OllamaError::JsonError(e) => LlmError::InvalidResponse {
                provider,
                message: e.to_string(),
            },
            OllamaError::InternalError(e) => LlmError::Rejected {
                retryable: is_busy(&e.message),
                provider,
                message: e.message,
            },
            OllamaError::Other(text) => LlmError::Rejected {
                retryable: is_busy(&text),
                provider,
                message: text,
            },
            other => LlmError::InvalidResponse {
                provider,
                message: other.to_string(),
            },
        }
    }
}

fn is_busy(message: &str) -> bool {
    let m = message.to_lowercase();
    m.contains("server busy") || m.contains("try again") || m.contains("too many requests")
}

fn options_for(base: &ModelOptions, request: &ChatRequest) -> ModelOptions {
    let s = &request.settings;
    let mut o = base.clone();
    if let Some(t) = s.temperature {
        o = o.temperature(t);
    }
    if let Some(seed) = s.seed {
        // Ollama's seed is a signed 32-bit integer; fold larger seeds into range deterministically.
        o = o.seed((seed % (i32::MAX as u64)) as i32);
    }
    if let Some(m) = s.max_tokens {
        o = o.num_predict(i32::try_from(m).unwrap_or(i32::MAX));
    }
    if let Some(p) = s.top_p {
        o = o.top_p(p);
    }
    if !s.stop.is_empty() {
        o = o.stop(s.stop.clone());
    }
    o
}

/// Chat with an Ollama model.
pub struct OllamaChat {
    client: Client,
}

impl std::fmt::Debug for OllamaChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaChat")
            .field("config", &self.client.config)
            .finish_non_exhaustive()
    }
}

impl OllamaChat {
    /// A client for `config`.
    pub fn new(config: OllamaConfig) -> Result<Self> {
        Ok(Self {
            client: Client::new(config)?,
        })
    }
}

#[async_trait]
impl ChatBackend for OllamaChat {
    fn provider(&self) -> &str {
        "ollama"
    }

    fn model(&self) -> &str {
        &self.client.config.model
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let messages = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => MessageRole::System,
                    Role::User => MessageRole::User,
                    Role::Assistant => MessageRole::Assistant,
                };
                ChatMessage::new(role, m.content.clone())
            })
            .collect();
        let mut req = ChatMessageRequest::new(self.client.config.model.clone(), messages)
            .options(options_for(&self.client.base_options, request));
        if request.settings.response_format == ResponseFormat::JsonObject {
            req = req.format(FormatType::Json);
        }
        let reply = self
            .client
            .ollama
            .send_chat_messages(req)
            .await
            .map_err(|e| self.client.map_error(e))?;
        let usage = reply
            .final_data
            .as_ref()
            .map(|d| Usage {
                prompt_tokens: d.prompt_eval_count,
                completion_tokens: d.eval_count,
            })
            .unwrap_or_default();
        let finish_reason = match request.settings.max_tokens {
            Some(max) if usage.completion_tokens >= u64::from(max) => FinishReason::Length,
            _ => FinishReason::Stop,
        };
        Ok(ChatResponse {
            content: reply.message.content,
            usage,
            finish_reason,
            cached: false,
        })
    }
}

/// Embeddings from an Ollama model. Query instructions are prepended as for the OpenAI-compatible embedder.
pub struct OllamaEmbedder {
    client: Client,
}

impl std::fmt::Debug for OllamaEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaEmbedder")
            .field("config", &self.client.config)
            .finish_non_exhaustive()
    }
}

impl OllamaEmbedder {
    /// A client for `config`.
    pub fn new(config: OllamaConfig) -> Result<Self> {
        Ok(Self {
            client: Client::new(config)?,
        })
    }
}

#[async_trait]
impl EmbedBackend for OllamaEmbedder {
    fn provider(&self) -> &str {
        "ollama"
    }

    fn model(&self) -> &str {
        &self.client.config.model
    }

    fn dimension(&self) -> Option<usize> {
        self.client.config.dimension
    }

    fn max_batch(&self) -> usize {
        self.client.config.batch_size
    }

    async fn embed_batch(&self, texts: &[String], kind: &EmbedKind) -> Result<Vec<Vec<f32>>> {
        let input: Vec<String> = texts.iter().map(|t| instructed(t, kind)).collect();
        let req = GenerateEmbeddingsRequest::new(
            self.client.config.model.clone(),
            EmbeddingsInput::Multiple(input),
        )
        .options(self.client.base_options.clone());
        let reply = self
            .client
            .ollama
            .generate_embeddings(req)
            .await
            .map_err(|e| self.client.map_error(e))?;
        Ok(reply.embeddings)
    }
}
