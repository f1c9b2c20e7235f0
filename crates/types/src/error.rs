//! The error type of `kgrag-types` and of the trait seams.

/// A boxed error from a backend (an HTTP client, a model runtime, a store).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors raised by this crate and returned through the trait seams.
///
/// Implementations of [`ChatModel`](crate::ChatModel), [`Embedder`](crate::Embedder) and the other seams
/// wrap their own error types in [`Error::Backend`], so driver types never leak into callers; callers that
/// need the detail can downcast the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A string that should be an id of the given kind is not one.
    #[error("invalid {kind} id {value:?}: expected {kind}- followed by 32 lowercase hex digits")]
    InvalidId {
        /// The id kind (`chunk`, `entity`, `fact`, `doc`).
        kind: &'static str,
        /// The offending value.
        value: String,
    },
    /// Document bytes are not valid UTF-8.
    #[error(
        "document {source_name} is not valid UTF-8: first invalid byte at offset {valid_up_to}"
    )]
    InvalidUtf8 {
        /// Where the bytes came from (a path or a name given by the caller).
        source_name: String,
        /// Byte offset of the first invalid sequence.
        valid_up_to: usize,
    },
    /// An argument was outside its allowed range or shape.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A backend (model provider, store, extractor, retriever) failed.
    #[error("{what} failed: {source}")]
    Backend {
        /// Which component failed, e.g. `chat model gpt-4o-mini`.
        what: String,
        /// The backend's own error.
        #[source]
        source: BoxError,
    },
    /// A scripted test double was asked for more than its script holds, or was told to fail.
    #[error("scripted test double: {0}")]
    Scripted(String),
}

impl Error {
    /// Wraps a backend error with a label naming the failing component.
    pub fn backend(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Backend {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
