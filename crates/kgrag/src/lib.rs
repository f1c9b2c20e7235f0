//! # kgrag
//!
//! Knowledge-graph RAG as one library: an index of your documents that HippoRAG 2, HiRAG (five modes),
//! LeanRAG and dense retrieval all answer from — passages chunked, extracted and embedded once, each
//! method's index built beside them — in files or in PostgreSQL + pgvector, configured by one TOML file
//! ([`config::Config`]).
//!
//! The index API has tantivy's shape ([`index`]): an [`Index`] (cheap to clone, `Send + Sync`), one
//! [`IndexWriter`] at a time (`add_documents`, `delete_documents`, `rebuild`, `commit`), and readers whose
//! [`Searcher`]s are immutable snapshots of one committed generation, queried from any thread.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! # rt.block_on(async {
//! use kgrag::config::Config;
//! use kgrag::documents::SourceDoc;
//! use kgrag::Index;
//!
//! // Offline and model-free: rule extraction, a hashing embedder, extractive answers.
//! let config = Config::parse(
//!     "openie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n\
//!      [index]\nmethods = [\"dense\", \"hipporag2\"]\n",
//! )?;
//! let dir = std::env::temp_dir().join(format!("kgrag-doc-{}", std::process::id()));
//! let index = Index::create(&dir, config)?;
//!
//! let mut writer = index.writer()?;
//! writer.add_documents(vec![
//!     SourceDoc::text("curie", "Marie Curie was born in Warsaw. She won the Nobel Prize in 1903."),
//!     SourceDoc::text("warsaw", "Warsaw is the capital of Poland. The Vistula flows through Warsaw."),
//! ]).await?;
//! assert_eq!(writer.commit().await?, 1);
//! drop(writer);
//!
//! let searcher = index.reader()?.searcher();
//! let hits = searcher.search("Which river flows through Curie's birthplace?", "hipporag2", 2).await?;
//! assert_eq!(hits.len(), 2);
//! let answer = searcher.answer("Where was Marie Curie born?", "dense", 1).await?;
//! assert!(answer.answer.is_some());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! Strategies: `dense` ([`kgrag_dense`]), `hipporag2` ([`kgrag_hipporag`]), HiRAG's `hirag`, `hirag-local`,
//! `hirag-global`, `hirag-bridge`, `hirag-nobridge` ([`kgrag_hirag`], one index for the five) and
//! `leanrag` ([`kgrag_leanrag`], on HiRAG's base graph); [`methods`] is their registry. Without a chat model
//! everything runs offline: triples by the rule extractor (or a dataset's OpenIE cache), MiniLM embeddings
//! on the CPU, HippoRAG 2 without its LLM filter, HiRAG and LeanRAG with extractive summaries and reports,
//! extractive answers. The `kgrag` command line is the `kgrag-cli` crate; the benchmark, `kgrag-bench`.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod answer;
pub mod citations;
pub mod config;
pub mod distribute;
pub mod documents;
pub mod env;
pub mod estimate;
pub(crate) mod graphs;
pub mod index;
pub mod index_dir;
pub mod memory;
pub mod methods;
pub mod originals;
pub mod pipeline;
pub mod progress;
pub mod storage;
pub mod usage;

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
    /// An input conflicts with what the index holds (a document id present with another text).
    #[error("conflict: {0}")]
    Conflict(String),
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
