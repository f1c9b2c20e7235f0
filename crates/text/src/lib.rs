//! # kgrag-text
//!
//! Token counting and chunking for kgrag.
//!
//! * [`Encoding`] — the two tiktoken encodings the methods budget with (`o200k_base` for HiRAG, `cl100k_base`
//!   for LeanRAG), vocabularies bundled in the binary: no download at run time.
//! * [`sentences`] and [`ExtractiveSummarizer`] — the offline kit's sentence splitter and extractive summary
//!   (a [`Summarizer`](kgrag_types::Summarizer) for runs without an LLM).
//! * [`SentenceMean`] — description vectors composed from sentence vectors, each sentence embedded once
//!   ([`DescriptionVectors`] chooses it in HiRAG's and LeanRAG's builds).
//! * [`hashed_vector`] — feature-hashed text vectors: the model-free embedding of scale tests.
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
pub mod composed;
mod encoding;
pub mod extractive;
mod sentence;
pub mod table;

pub use chunk::{Chunker, ChunkerConfig};
pub use composed::{DescriptionVectors, SentenceAliases, SentenceMean};
pub use encoding::Encoding;
pub use extractive::{Budget, ExtractiveSummarizer};
/// Feature-hashed text vectors (from `kgrag-types`, where the test double's embedder uses them too).
pub use kgrag_types::hashing::hashed_vector;
pub use sentence::sentences;

/// The passage block of a reader prompt in HippoRAG's QA format: each passage (already `title\ntext`) as
/// `Wikipedia Title: {passage}\n\n`, in the order given. Retrievers render their top passages with it, so
/// context tokens are counted on what a reader would see.
pub fn titled_passages<S: AsRef<str>>(passages: &[S]) -> String {
    let mut out = String::new();
    for p in passages {
        push_titled(&mut out, p.as_ref());
    }
    out
}

/// Appends one passage's block of [`titled_passages`].
fn push_titled(out: &mut String, passage: &str) {
    out.push_str("Wikipedia Title: ");
    out.push_str(passage);
    out.push_str("\n\n");
}

/// [`titled_passages`] and its `o200k_base` token count: the reader context a retriever reports. tiktoken
/// only fails on pathological input; then the count is of white-space separated words, so that a query is
/// never lost over a statistic.
pub fn reader_context<S: AsRef<str>>(passages: &[S]) -> (String, usize) {
    let rendered = titled_passages(passages);
    let tokens = block_tokens(&rendered);
    (rendered, tokens)
}

/// The reader blocks' token counts, cached per passage row: [`reader_context`] for retrievers that render
/// the same passages over and over (counting costs ~50 µs per passage, more than the rest of a HippoRAG 2
/// query's ranking). Exact: a block `Wikipedia Title: {p}\n\n` ends in a line break and the next begins
/// with a letter, and o200k's pre-tokeniser never joins the two, so the count of the whole context is the
/// sum of its blocks' counts (tested).
#[derive(Debug, Default)]
pub struct ReaderTokens {
    counts: Vec<std::sync::OnceLock<usize>>,
}

impl ReaderTokens {
    /// A cache for rows `0..passages` (rows past it are counted, not cached).
    pub fn new(passages: usize) -> Self {
        Self {
            counts: (0..passages).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }

    /// [`reader_context`] of the passages `(row, text)` in the order given. `text` must be the text of
    /// `row` in the store the cache was made for.
    pub fn reader_context<'a>(
        &self,
        passages: impl IntoIterator<Item = (usize, &'a str)>,
    ) -> (String, usize) {
        let mut rendered = String::new();
        let mut tokens = 0;
        for (row, text) in passages {
            let start = rendered.len();
            push_titled(&mut rendered, text);
            let block = &rendered[start..];
            tokens += match self.counts.get(row) {
                Some(cell) => *cell.get_or_init(|| block_tokens(block)),
                None => block_tokens(block),
            };
        }
        (rendered, tokens)
    }
}

/// The o200k count of one rendered block (white-space separated words if tiktoken fails).
fn block_tokens(block: &str) -> usize {
    Encoding::O200kBase
        .count(block)
        .unwrap_or_else(|_| block.split_whitespace().count())
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
    /// A document too large to chunk (token offsets are 32-bit: 4 GiB of text).
    #[error("{what} is {bytes} bytes, over the 4 GiB a document may have; split it")]
    TooLarge {
        /// The document, e.g. `document doc-…`.
        what: String,
        /// Its size in bytes.
        bytes: usize,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cached_block_counts_add_up_to_the_whole_context() {
        // Endings and beginnings that pre-tokenisers like to merge: spaces, punctuation, line breaks,
        // digits, non-Latin letters, an empty passage.
        let passages = [
            "Radio City\nRadio City is India's first private FM radio station.",
            "Trailing space \n",
            "Ends with punctuation?!",
            "",
            "1947\n2024 12",
            "\n\nleading breaks",
            "Ünïcödé 東京 — done…",
            "tabs\t\t",
            "   ",
        ];
        let cache = ReaderTokens::new(passages.len());
        for round in 0..2 {
            for start in 0..passages.len() {
                let picked: Vec<(usize, &str)> = (start..passages.len())
                    .chain(0..start)
                    .map(|r| (r, passages[r]))
                    .collect();
                let texts: Vec<&str> = picked.iter().map(|p| p.1).collect();
                let want = reader_context(&texts);
                assert_eq!(
                    cache.reader_context(picked),
                    want,
                    "round {round}, start {start}"
                );
            }
        }
        // Rows past the cache are counted, not cached.
        let want = reader_context(&["past the end"]);
        assert_eq!(cache.reader_context([(99, "past the end")]), want);
    }
}
