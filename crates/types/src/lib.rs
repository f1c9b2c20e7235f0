//! # kgrag-types
//!
//! The ground every kgrag crate stands on:
//!
//! * **ids** — content hashes with a kind prefix, compatible with HippoRAG ([`ChunkId`], [`EntityId`],
//!   [`FactId`], [`DocId`]);
//! * **normalisation** — HippoRAG's ASCII rule and a Unicode-aware alternative ([`Normalisation`]);
//! * **data model** — [`Document`], [`Chunk`], [`Entity`], [`Relation`], [`Triple`], [`Extraction`],
//!   [`RetrievedContext`], all serde-serialisable;
//! * **seams** — the traits [`ChatModel`], [`Embedder`], [`Extractor`], [`Summarizer`], [`Retriever`], each
//!   usable as a trait object and as a generic bound;
//! * **test doubles** — scripted implementations of every trait in [`testing`] (feature `test-utils`).
//!
//! ```
//! use kgrag_types::{ChunkId, EntityId, FactId, Normalisation, Triple};
//!
//! let passage = "Radio City\nRadio City is India's first private FM radio station.";
//! let chunk = ChunkId::from_content(passage);
//! assert!(chunk.as_str().starts_with("chunk-"));
//!
//! let phrase = Normalisation::Ascii.apply("Radio City!");
//! assert_eq!(phrase, "radio city");
//! assert_eq!(EntityId::from_name("Radio City!", Normalisation::Ascii), EntityId::from_content("radio city"));
//!
//! let fact = Triple::new("Radio City", "located in", "India").normalised(Normalisation::Ascii);
//! assert_eq!(fact.render(), "('radio city', 'located in', 'india')");
//! let _id = FactId::from_triple(&fact);
//! ```

mod error;
pub mod fileio;
pub mod hashing;
mod id;
pub mod json;
mod model;
mod normalize;
pub mod paths;
mod traits;
mod usage;
pub mod vecset;

#[cfg(any(test, feature = "test-utils"))]
pub mod testing;

pub use error::{BoxError, Error, Result};
pub use id::{md5_hex, ChunkId, DocId, EntityId, FactId};
pub use model::{
    Chunk, ContextEntity, ContextRelation, ContextReport, Diagnostics, Document, Entity,
    Extraction, IssueSeverity, Outcome, ParseIssue, Relation, RetrievedContext, ScoredChunk,
    ScoredTriple, Span, Triple,
};
pub use normalize::{is_python_whitespace, python_strip, Normalisation};
pub use traits::{
    embed_one, retrieve_by_vector, ChatModel, ChatRequest, ChatResponse, EmbedKind, Embedder,
    Embeddings, Extractor, FinishReason, GenerationSettings, Message, ResponseFormat,
    RetrievalRequest, Retriever, Role, Summarizer, SummaryRequest, TokenSink, Usage,
};
pub use usage::{CountingChat, StageUsage, UsageCounter};
pub use vecset::VecSet;
