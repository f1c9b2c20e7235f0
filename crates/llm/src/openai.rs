//! OpenAI-compatible chat and embeddings (OpenAI, vLLM, llama.cpp's server, …) through `async-openai`.
//!
//! Requests are sent as JSON we build ourselves and replies are read leniently, so servers that omit fields
//! OpenAI always sends (`created`, `object`, `usage`) still work. The API key is read from the environment
//! variable the config names and lives only inside the client, whose `Debug` output redacts it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::{HttpRequestFactory, ReqwestService};
use async_openai::Client;
use async_trait::async_trait;
use kgrag_types::{ChatRequest, ChatResponse, EmbedKind, FinishReason, ResponseFormat, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::error::{LlmError, Result};
use crate::managed::{ChatBackend, EmbedBackend};

/// Connection settings of an OpenAI-compatible server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Base URL including the version path, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// Name of the environment variable holding the API key; none for servers without authentication.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Concurrency, retries and timeouts.
    #[serde(default)]
    pub limits: crate::managed::Limits,
    /// Embeddings only: the vector dimension, when known in advance.
    #[serde(default)]
    pub dimension: Option<usize>,
    /// Embeddings only: texts per request.
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Chat only, optional: the provider's price per million prompt tokens (any currency), for the cost
    /// line of `kgrag index --estimate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_million_input: Option<f64>,
    /// Chat only, optional: the price per million completion tokens (the same currency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_million_output: Option<f64>,
}

fn default_batch() -> usize {
    64
}

fn build_client(config: &OpenAiConfig) -> Result<Client<OpenAIConfig>> {
    let key = match &config.api_key_env {
        Some(var) => {
            std::env::var(var).map_err(|_| LlmError::MissingApiKey { var: var.clone() })?
        }
        None => String::new(),
    };
    if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
        return Err(LlmError::Config(format!(
            "base_url {:?} must start with http:// or https://",
            config.base_url
        )));
    }
    #[cfg(feature = "https")]
    {
        // reqwest is built without a default crypto provider; use ring (installing twice is harmless).
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
    let cfg = OpenAIConfig::new()
        .with_api_base(config.base_url.trim_end_matches('/'))
        .with_api_key(key);
    // async-openai's default executor retries 429 and 5xx on its own; our `Managed` wrapper owns retries
    // (bounded, counted, jittered), so install the bare transport, with status capture, instead.
    let transport = StatusCapture {
        inner: ReqwestService::new(http.clone()),
    };
    Ok(Client::build(http, cfg).with_http_service(transport))
}

/// An HTTP error status with the body the server sent.
#[derive(Debug)]
struct HttpStatus {
    status: u16,
    body: String,
}

impl std::fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.body)
    }
}

impl std::error::Error for HttpStatus {}

/// The transport, turning every non-success response into [`HttpStatus`] before async-openai parses it:
/// OpenAI-compatible servers do not all send OpenAI's error shape (llama.cpp sends an integer `code`), and a
/// body async-openai cannot parse would lose the status that decides whether to retry.
#[derive(Clone)]
struct StatusCapture {
    inner: ReqwestService,
}

impl tower::Service<HttpRequestFactory> for StatusCapture {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<reqwest::Response, OpenAIError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), OpenAIError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequestFactory) -> Self::Future {
        let sent = self.inner.call(request);
        Box::pin(async move {
            let response = sent.await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let body = response.text().await.unwrap_or_default();
            Err(OpenAIError::Boxed(Box::new(HttpStatus {
                status: status.as_u16(),
                body,
            })))
        })
    }
}

/// The human part of an error body: `error.message`, `error` or `message` when JSON, else the text.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    found.unwrap_or_else(|| excerpt(body.trim()))
}

fn provider_label(config: &OpenAiConfig) -> String {
    format!("openai-compatible {} at {}", config.model, config.base_url)
}

fn map_error(provider: &str, err: OpenAIError) -> LlmError {
    match err {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpStatus>() {
            Ok(status) => LlmError::Http {
                provider: provider.to_owned(),
                status: status.status,
                message: error_message(&status.body),
            },
            Err(other) => LlmError::InvalidResponse {
                provider: provider.to_owned(),
                message: other.to_string(),
            },
        },
        OpenAIError::ApiError(resp) => LlmError::Http {
            provider: provider.to_owned(),
            status: resp.status_code.as_u16(),
            message: resp.api_error.message,
        },
        OpenAIError::Reqwest(e) => {
            if let Some(status) = e.status() {
                LlmError::Http {
                    provider: provider.to_owned(),
                    status: status.as_u16(),
                    message: e.to_string(),
                }
            } else if e.is_timeout() {
                LlmError::Timeout {
                    provider: provider.to_owned(),
                    timeout: std::time::Duration::from_secs(10),
                }
            } else if e.is_builder() {
                LlmError::Config(format!(
                    "{provider}: the request could not be built ({e}); https needs the `https` feature"
                ))
            } else if e.is_decode() || e.is_body() {
                LlmError::InvalidResponse {
                    provider: provider.to_owned(),
                    message: e.to_string(),
                }
            } else {
                let message = crate::error::error_chain(&e);
                LlmError::Connection {
                    provider: provider.to_owned(),
                    message,
                }
            }
        }
        OpenAIError::JSONDeserialize(e, content) => LlmError::InvalidResponse {
            provider: provider.to_owned(),
            message: format!("{e}; body starts {:?}", excerpt(&content)),
        },
        other => LlmError::InvalidResponse {
            provider: provider.to_owned(),
            message: other.to_string(),
        },
    }
}

fn excerpt(s: &str) -> String {
    s.chars().take(200).collect()
}

/// The JSON body of a chat request: model, messages and every generation setting that is set.
pub(crate) fn chat_body(model: &str, request: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), json!(request.messages));
    body.insert("stream".into(), json!(false));
    let s = &request.settings;
    if let Some(t) = s.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(m) = s.max_tokens {
        body.insert("max_tokens".into(), json!(m));
    }
    if let Some(p) = s.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if let Some(seed) = s.seed {
        body.insert("seed".into(), json!(seed));
    }
    if !s.stop.is_empty() {
        body.insert("stop".into(), json!(s.stop));
    }
    if s.response_format == ResponseFormat::JsonObject {
        body.insert("response_format".into(), json!({"type": "json_object"}));
    }
    Value::Object(body)
}

pub(crate) fn parse_chat_reply(provider: &str, reply: &Value) -> Result<ChatResponse> {
    let bad = |message: String| LlmError::InvalidResponse {
        provider: provider.to_owned(),
        message,
    };
    let choice = reply
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| bad(format!("no choices in {}", excerpt(&reply.to_string()))))?;
    let content = match choice.pointer("/message/content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => return Err(bad(format!("message content is not text: {other}"))),
    };
    let finish_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("stop") | None => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some(other) => FinishReason::Other(other.to_owned()),
    };
    Ok(ChatResponse {
        content,
        usage: usage_of(reply.get("usage")),
        finish_reason,
        cached: false,
    })
}

/// The token counts of a reply's (or a stream's last chunk's) `usage` object; 0 where it has none.
fn usage_of(usage: Option<&Value>) -> Usage {
    let count = |key: &str| {
        usage
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Usage {
        prompt_tokens: count("prompt_tokens"),
        completion_tokens: count("completion_tokens"),
    }
}

/// Chat completions from an OpenAI-compatible server.
pub struct OpenAiChat {
    client: Client<OpenAIConfig>,
    config: OpenAiConfig,
    label: String,
}

impl std::fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiChat {
    /// A client for `config`; fails when the API key variable is named but unset.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        Ok(Self {
            client: build_client(&config)?,
            label: provider_label(&config),
            config,
        })
    }
}

#[async_trait]
impl ChatBackend for OpenAiChat {
    fn provider(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let body = chat_body(&self.config.model, request);
        let reply: Value = self
            .client
            .chat()
            .create_byot(body)
            .await
            .map_err(|e| map_error(&self.label, e))?;
        parse_chat_reply(&self.label, &reply)
    }

    /// The reply as server-sent events (`stream: true`, usage in the last chunk where the server sends
    /// it): each chunk's `delta.content` goes to `on_token` as it arrives.
    async fn complete_stream(
        &self,
        request: &ChatRequest,
        on_token: &kgrag_types::TokenSink<'_>,
    ) -> Result<ChatResponse> {
        use futures_util::StreamExt;
        let mut body = chat_body(&self.config.model, request);
        if let Some(map) = body.as_object_mut() {
            map.insert("stream".into(), Value::Bool(true));
            map.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let mut stream = self
            .client
            .chat()
            .create_stream_byot::<Value, Value>(body)
            .await
            .map_err(|e| map_error(&self.label, e))?;
        let mut content = String::new();
        let mut finish_reason = FinishReason::Stop;
        let mut usage = Usage::default();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| map_error(&self.label, e))?;
            if let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) {
                if let Some(piece) = choice.pointer("/delta/content").and_then(Value::as_str) {
                    if !piece.is_empty() {
                        on_token(piece);
                        content.push_str(piece);
                    }
                }
                match choice.get("finish_reason").and_then(Value::as_str) {
                    Some("length") => finish_reason = FinishReason::Length,
                    Some("stop") | None => {}
                    Some(other) => finish_reason = FinishReason::Other(other.to_owned()),
                }
            }
            if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
                usage = usage_of(Some(u));
            }
        }
        Ok(ChatResponse {
            content,
            usage,
            finish_reason,
            cached: false,
        })
    }
}

/// Embeddings from an OpenAI-compatible server. Query instructions are prepended as
/// `Instruct: {instruction}\nQuery: {text}` (the NV-Embed / E5-instruct convention); set none for models
/// that take raw queries.
pub struct OpenAiEmbedder {
    client: Client<OpenAIConfig>,
    config: OpenAiConfig,
    label: String,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// A client for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        Ok(Self {
            client: build_client(&config)?,
            label: provider_label(&config),
            config,
        })
    }
}

/// The text sent for embedding under `kind`.
pub(crate) fn instructed(text: &str, kind: &EmbedKind) -> String {
    match kind {
        EmbedKind::Query {
            instruction: Some(i),
        } if !i.is_empty() => format!("Instruct: {i}\nQuery: {text}"),
        _ => text.to_owned(),
    }
}

pub(crate) fn parse_embedding_reply(
    provider: &str,
    reply: &Value,
    n: usize,
) -> Result<Vec<Vec<f32>>> {
    let bad = |message: String| LlmError::InvalidResponse {
        provider: provider.to_owned(),
        message,
    };
    let data = reply
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(format!("no data array in {}", excerpt(&reply.to_string()))))?;
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(pos, |i| i as usize);
        let vector = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("item {pos} has no embedding array")))?
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| bad(format!("item {pos} has a non-numeric embedding value")))?;
        let slot = out
            .get_mut(index)
            .ok_or_else(|| bad(format!("index {index} out of range for {n} inputs")))?;
        *slot = Some(vector);
    }
    out.into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| bad(format!("no embedding for input {i}"))))
        .collect()
}

#[async_trait]
impl EmbedBackend for OpenAiEmbedder {
    fn provider(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn dimension(&self) -> Option<usize> {
        self.config.dimension
    }

    fn max_batch(&self) -> usize {
        self.config.batch_size
    }

    async fn embed_batch(&self, texts: &[String], kind: &EmbedKind) -> Result<Vec<Vec<f32>>> {
        let input: Vec<String> = texts.iter().map(|t| instructed(t, kind)).collect();
        let body = json!({"model": self.config.model, "input": input, "encoding_format": "float"});
        let reply: Value = self
            .client
            .embeddings()
            .create_byot(body)
            .await
            .map_err(|e| map_error(&self.label, e))?;
        parse_embedding_reply(&self.label, &reply, texts.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::Message;

    #[test]
    fn body_carries_every_setting() {
        let mut r = ChatRequest::user("hi");
        r.messages.insert(0, Message::system("be brief"));
        r.settings.temperature = Some(0.0);
        r.settings.max_tokens = Some(32);
        r.settings.seed = Some(7);
        r.settings.stop = vec!["\n\n".into()];
        r.settings.response_format = ResponseFormat::JsonObject;
        let body = chat_body("m", &r);
        assert_eq!(
            body,
            json!({"model": "m", "stream": false, "temperature": 0.0, "max_tokens": 32, "seed": 7,
                   "stop": ["\n\n"], "response_format": {"type": "json_object"},
                   "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn lenient_reply_parsing() {
        let r = parse_chat_reply(
            "p",
            &json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "length"}]}),
        )
        .unwrap();
        assert_eq!(
            (r.content.as_str(), r.finish_reason, r.usage),
            ("ok", FinishReason::Length, Usage::default())
        );
        let err = parse_chat_reply("p", &json!({"error": "x"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no choices"), "{err}");
        let e = parse_embedding_reply(
            "p",
            &json!({"data": [{"index": 1, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}),
            2,
        )
        .unwrap();
        assert_eq!(e, vec![vec![2.0], vec![1.0]]);
        assert!(parse_embedding_reply(
            "p",
            &json!({"data": [{"index": 0, "embedding": [1.0]}]}),
            2
        )
        .is_err());
    }

    #[test]
    fn missing_key_variable_is_named() {
        let err = OpenAiChat::new(OpenAiConfig {
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            api_key_env: Some("KGRAG_TEST_SURELY_UNSET_KEY".into()),
            dimension: None,
            batch_size: 8,
            price_per_million_input: None,
            price_per_million_output: None,
            limits: Default::default(),
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("KGRAG_TEST_SURELY_UNSET_KEY is not set"),
            "{err}"
        );
    }

    #[test]
    fn error_messages_from_various_servers() {
        assert_eq!(
            error_message(
                r#"{"error":{"message":"File Not Found","type":"not_found_error","code":404}}"#
            ),
            "File Not Found"
        );
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message("  Bad Gateway\n"), "Bad Gateway");
    }

    #[test]
    fn instructions_prefix_queries_only() {
        let q = EmbedKind::Query {
            instruction: Some("find facts".into()),
        };
        assert_eq!(instructed("who?", &q), "Instruct: find facts\nQuery: who?");
        assert_eq!(instructed("who?", &EmbedKind::Document), "who?");
    }
}
