//! # kgrag-hirag
//!
//! HiRAG (Huang et al., arXiv 2503.10150) on kgrag's shared parts, as spec `hirag.md` describes it:
//!
//! * [`HiragIndex`] — the base entity–relation graph (the two-stage extraction with HiRAG's name
//!   normalisation and merge rules, the rule extractor offline, or the dataset's HippoRAG OpenIE triples
//!   through [`openie_extractions`]), the HiIndex summary layers of `kgrag-hierarchy` written into the graph
//!   as the spec's graph has them (member → summary relations only), entity vectors (`"NAME"` + description, or offline the description alone: `entity_text`)
//!   for every entity including the summary entities, hierarchical Leiden communities over the whole graph
//!   and their reports (LLM or extractive, deepest level first, reused when their input is unchanged), index
//!   statistics, and an export in the reference's working-directory formats ([`export`]).
//! * [`HiragRetriever`] — every mode of spec §7.3 ([`Mode`]: `hi`, `hi_local`, `hi_global`, `hi_bridge`,
//!   `hi_nobridge`) with their budgets and section layout, the deterministic bridge path of §7.2 and both
//!   `bridge_edges` rules. Each call returns the ranked text units as passages, so passage recall@k is
//!   defined for HiRAG.
//! * [`answer`] — the answer prompt of §7.3 (our wording) through a [`ChatModel`](kgrag_types::ChatModel),
//!   or the offline kit's extractive answer.
//!
//! Where this crate departs from the reference on purpose (all from the spec's "Ours" decisions): key
//! entities are ordered by retrieval rank, not by a Python set; `hi_local` works; a missing chunk is skipped;
//! entities with identical embeddings are kept; PCA replaces UMAP.
//!
//! ```
//! use kgrag_hirag::{HiragConfig, Mode};
//!
//! let config = HiragConfig::default();
//! assert_eq!((config.top_k, config.top_m, config.level), (20, 10, 2));
//! assert_eq!(Mode::from_method_name("hirag-bridge"), Some(Mode::HiBridge));
//! ```

pub mod answer;
pub mod config;
pub mod export;
mod graph;
mod index;
mod openie;
mod retrieve;
mod summarize;
mod table;

pub use config::{
    BaseSource, BridgeEdges, ClusterDescription, DescriptionVectors, EntityText, ExtractionMode,
    HiragConfig, Mode,
};
pub use graph::{BridgePath, HiEdge, HiGraph, HiNode};
pub use index::{
    base_records, merge_records, ChunkRecord, CommunityRecord, HierarchyRound, HiragBase,
    HiragIndex, IndexStats, MergedRecords, Models,
};
pub use kgrag_community::report::Report as CommunityReport;
pub use kgrag_types::{CountingChat, StageUsage};
pub use openie::{fact_sentence_aliases, openie_extractions, openie_extractions_of};
pub use retrieve::{HiragRetriever, FAIL_RESPONSE};
pub use summarize::LlmDescriptionSummarizer;

/// Errors of HiRAG indexing and retrieval.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HiragError {
    /// A setting is unusable.
    #[error("hirag configuration: {0}")]
    Config(String),
    /// The input is malformed (names what and where).
    #[error("hirag input: {0}")]
    Input(String),
    /// A model call failed where no fallback exists (embedding the query or the entities).
    #[error("hirag model: {0}")]
    Model(String),
    /// The hierarchy (HiIndex) failed.
    #[error(transparent)]
    Hierarchy(#[from] kgrag_hierarchy::HierarchyError),
    /// Community detection or reports failed.
    #[error(transparent)]
    Community(#[from] kgrag_community::CommunityError),
    /// The graph or a vector store failed.
    #[error(transparent)]
    Store(#[from] kgrag_graph_store::StoreError),
    /// Token counting or chunking failed.
    #[error(transparent)]
    Text(#[from] kgrag_text::Error),
    /// An export file could not be written.
    #[error("{path}: {message}")]
    Export {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, HiragError>;

/// o200k tokens of `text` (white-space words if the tokenizer fails).
pub(crate) fn tokens(text: &str) -> usize {
    kgrag_text::Encoding::O200kBase
        .count(text)
        .unwrap_or_else(|_| text.split_whitespace().count())
}
