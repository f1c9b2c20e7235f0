//! # kgrag-text
//!
//! Token counting and chunking for kgrag.
//!
//! * [`Encoding`] — the two tiktoken encodings the methods budget with (`o200k_base` for HiRAG, `cl100k_base`
//!   for LeanRAG), vocabularies bundled in the binary: no download at run time.
//! * [`sentences`] and [`ExtractiveSummarizer`] — the offline kit's sentence splitter and extractive summary
//!   (a [`Summarizer`](kgrag_types::Summarizer) for runs without an LLM).
//! * [`table`] — prompt tables in the CSV form of HiRAG and LeanRAG.
//! * [`Chunker`] — HiRAG/LeanRAG token windows with overlap, or HippoRAG's one chunk per passage, keeping each
//!   chunk's byte, character and token offsets in its document.
//!
//! ```
//! use kgrag_text::{Chunker, ChunkerConfig, Encoding};
//! use kgrag_types::Document;
//!
//! let doc = Document::new("Radio City is India's first private FM radio station. ".repeat(300));
//! let chunks = Chunker::new(ChunkerConfig::hirag())?.chunk(&doc)?;
//! assert!(chunks.len() > 1);
//! assert_eq!(chunks[1].span.token_start, 1100);
//! assert_eq!(Encoding::O200kBase.count("hello world")?, 2);
//! # Ok::<(), kgrag_text::Error>(())
//! ```

mod chunk;
mod encoding;
pub mod extractive;
mod sentence;
pub mod table;

pub use chunk::{Chunker, ChunkerConfig};
pub use encoding::Encoding;
pub use extractive::{Budget, ExtractiveSummarizer};
pub use sentence::sentences;

/// The passage block of a reader prompt in HippoRAG's QA format: each passage (already `title\ntext`) as
/// `Wikipedia Title: {passage}\n\n`, in the order given. Retrievers render their top passages with it, so
/// context tokens are counted on what a reader would see.
pub fn titled_passages<S: AsRef<str>>(passages: &[S]) -> String {
    let mut out = String::new();
    for p in passages {
        out.push_str("Wikipedia Title: ");
        out.push_str(p.as_ref());
        out.push_str("\n\n");
    }
    out
}

/// [`titled_passages`] and its `o200k_base` token count: the reader context a retriever reports. tiktoken
/// only fails on pathological input; then the count is of white-space separated words, so that a query is
/// never lost over a statistic.
pub fn reader_context<S: AsRef<str>>(passages: &[S]) -> (String, usize) {
    let rendered = titled_passages(passages);
    let tokens = Encoding::O200kBase
        .count(&rendered)
        .unwrap_or_else(|_| rendered.split_whitespace().count());
    (rendered, tokens)
}

/// Errors of token counting and chunking.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The chunker configuration is unusable.
    #[error("invalid chunker configuration: {0}")]
    InvalidConfig(String),
    /// Embedding sentences for an extractive summary failed.
    #[error("extractive summary: {0}")]
    Embedding(String),
    /// The tokenizer failed on a text (tiktoken's pre-tokenising regex can give up on pathological input).
    #[error("{encoding} tokenizer failed on {what}: {message}")]
    Tokenizer {
        /// The encoding's name.
        encoding: &'static str,
        /// What was being tokenised, e.g. `document doc-…`.
        what: String,
        /// The tokenizer's message.
        message: String,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
