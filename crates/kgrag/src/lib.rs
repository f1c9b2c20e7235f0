//! # kgrag
//!
//! The facade of the kgrag workspace: one configuration file ([`config::Config`]) choosing the models and
//! every method's settings, and the benchmark pipeline ([`bench`]) that builds one index per dataset —
//! passages embedded once and shared by all methods — runs each method on every question and writes the
//! comparison report (passage recall@k, EM/F1, context tokens, latency, LLM cost).
//!
//! The `kgrag` binary exposes it as `kgrag bench`; `cargo xtask bench` builds and runs that.
//!
//! Methods available: `dense` ([`kgrag_dense`]), `hipporag2` ([`kgrag_hipporag`]) and HiRAG's five modes
//! `hirag`, `hirag-local`, `hirag-global`, `hirag-bridge`, `hirag-nobridge` ([`kgrag_hirag`], one index
//! shared by the five) and `leanrag` ([`kgrag_leanrag`], on HiRAG's base graph). Without a chat model the whole pipeline runs offline: triples from the dataset's
//! OpenIE cache (or the rule extractor), MiniLM embeddings on the CPU, HippoRAG 2 without its LLM filter,
//! HiRAG with extractive cluster summaries and community reports, extractive answers.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod config;
pub mod documents;
pub(crate) mod graphs;
pub mod index;
pub mod index_dir;
pub mod methods;
pub mod pipeline;
pub mod progress;
pub mod storage;

pub use index::{
    ChangeSummary, Index, IndexOptions, IndexReader, IndexWriter, PassageHit, QueryAnswer,
    ReloadPolicy, Searcher,
};
pub use pipeline::Pipeline;

pub use kgrag_dense as dense;
pub use kgrag_eval as eval;
pub use kgrag_graph_store as graph_store;
pub use kgrag_hipporag as hipporag;
pub use kgrag_hirag as hirag;
pub use kgrag_leanrag as leanrag;
pub use kgrag_llm as llm;
pub use kgrag_openie as openie;
pub use kgrag_text as text;
pub use kgrag_types as types;

use std::path::PathBuf;

/// Errors of the facade: configuration problems and whatever a stage of the pipeline reports.
#[derive(Debug, thiserror::Error)]
pub enum KgragError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The configuration or the command line asks for something impossible.
    #[error("configuration: {0}")]
    Config(String),
    /// An input document cannot be read (the message names the file and, for JSONL, the line).
    #[error("input: {0}")]
    Input(String),
    /// The index directory is missing, damaged or built with other settings.
    #[error("index: {0}")]
    Index(String),
    /// The database backend failed (the message never holds the database URL).
    #[error("database: {0}")]
    Database(String),
    /// A model call failed outside a method (e.g. the extractive reader's embeddings).
    #[error("model: {0}")]
    Model(String),
    /// Building a model or the response cache failed.
    #[error(transparent)]
    Llm(#[from] kgrag_llm::LlmError),
    /// Loading a dataset or writing the report failed.
    #[error(transparent)]
    Eval(#[from] kgrag_eval::EvalError),
    /// The graph or a vector store failed.
    #[error(transparent)]
    Store(#[from] kgrag_graph_store::StoreError),
    /// HippoRAG 2 failed.
    #[error(transparent)]
    Hippo(#[from] kgrag_hipporag::HippoError),
    /// HiRAG failed.
    #[error(transparent)]
    Hirag(#[from] kgrag_hirag::HiragError),
    /// LeanRAG failed.
    #[error(transparent)]
    Leanrag(#[from] kgrag_leanrag::LeanragError),
    /// Reading the OpenIE cache or extraction failed.
    #[error(transparent)]
    OpenIe(#[from] kgrag_openie::OpenIeError),
    /// Chunking failed.
    #[error(transparent)]
    Text(#[from] kgrag_text::Error),
}

/// The facade's result type.
pub type Result<T> = std::result::Result<T, KgragError>;
