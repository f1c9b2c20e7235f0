//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the graph store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An argument is out of range or inconsistent (names what and why).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A node key or index that the graph does not hold.
    #[error("unknown node: {0}")]
    UnknownNode(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A stored file is damaged: truncated, checksum mismatch, wrong magic, undecodable payload.
    #[error("{path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A stored file was written by an incompatible version of this crate, or holds another kind of object.
    #[error("{path}: {reason}")]
    Incompatible {
        /// The file.
        path: PathBuf,
        /// Found versus expected.
        reason: String,
    },
    /// Encoding an object for storage failed.
    #[error("cannot encode {what}: {reason}")]
    Encode {
        /// What was being encoded.
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// The embedder failed while filling an [`crate::vector::EmbeddingStore`].
    #[error("embedding {what} failed: {source}")]
    Embedding {
        /// What was being embedded.
        what: String,
        /// The embedder's error.
        #[source]
        source: kgrag_types::Error,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, StoreError>;

pub(crate) fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::InvalidInput(message.into())
}
