//! Errors of the model providers.

use std::time::Duration;

/// What went wrong talking to a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The configuration cannot work (missing field, bad URL, unreadable model file).
    #[error("configuration error: {0}")]
    Config(String),
    /// The environment variable that should hold the API key is not set.
    #[error("the API key variable {var} is not set (the key is read from the environment, never from config)")]
    MissingApiKey {
        /// The variable's name.
        var: String,
    },
    /// The server answered with an HTTP error status.
    #[error("{provider} answered HTTP {status}: {message}")]
    Http {
        /// Provider and model, e.g. `openai gpt-4o-mini`.
        provider: String,
        /// HTTP status code.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The server could not be reached or the connection broke.
    #[error("{provider} could not be reached: {message}")]
    Connection {
        /// Provider and model.
        provider: String,
        /// What the HTTP client said.
        message: String,
    },
    /// No answer within the per-request timeout.
    #[error("{provider} did not answer within {timeout:?}")]
    Timeout {
        /// Provider and model.
        provider: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The server answered, but not with what the API promises.
    #[error("{provider} sent an unusable response: {message}")]
    InvalidResponse {
        /// Provider and model.
        provider: String,
        /// What is wrong with it.
        message: String,
    },
    /// An embedding holds NaN or an infinity (a broken model or a value out of f32's range).
    #[error("{provider} returned a non-finite value (NaN or infinity) at dimension {dimension} of the embedding of \"{text}\"")]
    NonFinite {
        /// Provider and model.
        provider: String,
        /// The text embedded (its first 80 characters).
        text: String,
        /// The first non-finite dimension.
        dimension: usize,
    },
    /// The server refused the request without an HTTP status we can read (Ollama's client reports only text).
    #[error("{provider} refused the request: {message}")]
    Rejected {
        /// Provider and model.
        provider: String,
        /// The server's message.
        message: String,
        /// Whether the server asked to try again later.
        retryable: bool,
    },
    /// Every attempt failed; `last` is the final failure.
    #[error("gave up after {attempts} attempts in {elapsed:?}: {last}")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed: Duration,
        /// The last error.
        last: Box<LlmError>,
    },
    /// The response cache could not be read or written.
    #[error("response cache {path}: {message}")]
    Cache {
        /// The cache file.
        path: String,
        /// What failed.
        message: String,
    },
    /// An in-process model failed.
    #[error("local model {model}: {message}")]
    Local {
        /// The model.
        model: String,
        /// What failed.
        message: String,
    },
}

impl LlmError {
    /// Whether another attempt may succeed: rate limits (429), server errors (5xx), request timeouts (408),
    /// connection failures and timeouts.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => {
                *status == 429 || *status == 408 || (500..=599).contains(status)
            }
            LlmError::Connection { .. } | LlmError::Timeout { .. } => true,
            LlmError::Rejected { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// The error as seen through the `kgrag-types` seams.
    pub fn into_types(self, what: impl Into<String>) -> kgrag_types::Error {
        kgrag_types::Error::backend(what, self)
    }
}

/// An error's message followed by those of its sources, joined by `: ` (HTTP clients hide the useful part,
/// such as "connection refused", in the source chain).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// Result alias of this crate.
pub type Result<T, E = LlmError> = std::result::Result<T, E>;
