//! The crate's error type.

use std::path::{Path, PathBuf};

/// Everything that can go wrong while loading a dataset or reading and writing a report.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A file (or a bundled text) is not valid JSON or TOML of the expected shape.
    #[error("cannot parse {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// Files a dataset needs are not there.
    #[error("dataset {dataset}: {} missing file(s):\n{}\n{hint}", .files.len(), list_paths(.files))]
    MissingFiles {
        /// The dataset.
        dataset: String,
        /// Every missing file, with its full path.
        files: Vec<PathBuf>,
        /// Where the data is published and how to point kgrag at it.
        hint: String,
    },
    /// A file's content is not what the manifest says.
    #[error("{path}: sha256 mismatch: expected {expected}, found {actual}")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The sha256 the manifest gives.
        expected: String,
        /// The sha256 of the file as found.
        actual: String,
    },
    /// No dataset of that name is known.
    #[error("unknown dataset {name:?}; known datasets: {}", .known.join(", "))]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// The names that are known.
        known: Vec<String>,
    },
    /// Data that parsed but is inconsistent (names what and where).
    #[error("invalid data: {0}")]
    InvalidData(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, EvalError>;

fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| format!("  {}", p.display()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn io(path: &Path, source: std::io::Error) -> EvalError {
    EvalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> EvalError {
    EvalError::InvalidData(message.into())
}
