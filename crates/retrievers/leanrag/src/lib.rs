//! # kgrag-leanrag
//!
//! LeanRAG (Zhang et al., AAAI-26) on kgrag's shared parts, as spec `leanrag.md` describes it:
//!
//! * [`BaseGraph`] — G0: the base layer of HiRAG's graph ([`BaseGraph::from_records`], `g0 = "hirag"`,
//!   shared with `kgrag-hirag` so nothing is extracted twice) or LeanRAG's own merge of its extraction
//!   ([`native_base_graph`], `g0 = "native"`).
//! * [`LeanragIndex`] — the aggregation tree of `kgrag-hierarchy` (hard GMM clusters, aggregate entities by
//!   an LLM or extractively, promoted copies, inter-aggregate relations by the configured rule, the root)
//!   with stable [`NodeId`](kgrag_hierarchy::NodeId)s, a vector index over the seed layers, statistics per
//!   layer, and an export in the reference's artefact formats ([`export`]).
//! * [`LeanragRetriever`] — spec §6: top-`top_n` seeds, ancestor chains and the pairwise lockstep LCA, the
//!   relations among each pair's path nodes, the aggregates on the paths, seed information and chunks
//!   ranked by seed count; the §6.4 layout with its cl100k token count. `passages` is the whole ranked chunk
//!   list (the context keeps the first `top_c`), so recall@k up to 20 is defined.
//! * [`answer`] — the `rag_response` prompt (our wording) or the offline extractive answer.
//!
//! ```
//! use kgrag_leanrag::{LeanragConfig, SeedLayers};
//!
//! let c = LeanragConfig::default();
//! assert_eq!((c.top_n, c.top_c, c.seed_layers), (10, 5, SeedLayers::Base));
//! assert_eq!(LeanragConfig::benchmark_profile("legal").top_n, 15);
//! ```

pub mod answer;
mod base;
pub mod config;
pub mod export;
mod index;
mod retrieve;

pub use base::{native_base_graph, BaseGraph, BaseNode};
pub use config::{DescriptionVectors, ExtractionMode, G0Source, LeanragConfig, SeedLayers};
pub use index::{LayerStats, LeanragIndex, LeanragStats, Models};
pub use retrieve::{lca_path, LeanragRetriever};

/// Errors of LeanRAG indexing and retrieval.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeanragError {
    /// A setting is unusable.
    #[error("leanrag configuration: {0}")]
    Config(String),
    /// The input is malformed (names what and where).
    #[error("leanrag input: {0}")]
    Input(String),
    /// A model call failed where no fallback exists (embedding the query).
    #[error("leanrag model: {0}")]
    Model(String),
    /// The aggregation failed.
    #[error(transparent)]
    Hierarchy(#[from] kgrag_hierarchy::HierarchyError),
    /// A vector index failed.
    #[error(transparent)]
    Store(#[from] kgrag_graph_store::StoreError),
    /// Token counting or summarising failed.
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
pub type Result<T> = std::result::Result<T, LeanragError>;

/// cl100k tokens of `text` (white-space words if the tokenizer fails).
pub(crate) fn cl100k(text: &str) -> usize {
    kgrag_text::Encoding::Cl100kBase
        .count(text)
        .unwrap_or_else(|_| text.split_whitespace().count())
}
