//! The bench's errors.

use std::path::PathBuf;

/// What can go wrong in a bench run: a bad argument or file, or whatever the index, the dataset or a model
/// reports.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The arguments or the configuration ask for something impossible (the message names it).
    #[error("configuration: {0}")]
    Config(String),
    /// Building or querying the index failed.
    #[error(transparent)]
    Kgrag(#[from] kgrag::KgragError),
    /// Loading a dataset or writing the report failed.
    #[error(transparent)]
    Eval(#[from] kgrag_eval::EvalError),
    /// Building a model failed.
    #[error(transparent)]
    Llm(#[from] kgrag_llm::LlmError),
    /// Writing a record file failed.
    #[error(transparent)]
    Store(#[from] kgrag_graph_store::StoreError),
    /// Reading a dataset's OpenIE file failed.
    #[error(transparent)]
    OpenIe(#[from] kgrag_openie::OpenIeError),
}

/// The bench's result type.
pub type Result<T> = std::result::Result<T, BenchError>;
