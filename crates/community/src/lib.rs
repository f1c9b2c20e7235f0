//! # kgrag-community
//!
//! Communities of a knowledge graph and their reports, as HiRAG builds its global knowledge (spec
//! `hirag.md` §6):
//!
//! * [`leiden`](leiden::leiden) — the Leiden algorithm (Traag, Waltman & van Eck 2019) for modularity with a
//!   resolution parameter: our own implementation (why not `leiden-rs`: see the module docs), seeded,
//!   sequential and bit-for-bit reproducible, every community connected;
//! * [`hierarchical_leiden`] — graspologic's hierarchy (clusters of ≥ `max_cluster_size` nodes split again on
//!   their induced subgraph) and [`community_schema`] (members, incident edges, chunks, occurrence, links);
//! * [`report`] — community reports: packed context within a token budget with sub-report substitution,
//!   JSON reports from a chat model with one corrective retry and the extractive fallback, deepest level
//!   first, reuse of reports whose input is unchanged.
//!
//! ```
//! use kgrag_community::{leiden, Graph, LeidenConfig};
//!
//! // Two triangles joined by one edge: two communities.
//! let edges = [(0, 1, 1.0), (1, 2, 1.0), (0, 2, 1.0), (3, 4, 1.0), (4, 5, 1.0), (3, 5, 1.0), (2, 3, 1.0)];
//! let g = Graph::from_edges(6, &edges)?;
//! let p = leiden(&g, &LeidenConfig::default())?;
//! assert_eq!(p.membership, vec![0, 0, 0, 1, 1, 1]);
//! assert!((p.quality - 5.0 / 14.0).abs() < 1e-12);
//! # Ok::<(), kgrag_community::CommunityError>(())
//! ```

pub mod hierarchical;
pub mod leiden;
pub mod report;

pub use hierarchical::{
    community_schema, hierarchical_leiden, ClusterRecord, Community, CommunityHierarchy,
    HierarchicalConfig,
};
pub use leiden::{leiden, Graph, LeidenConfig, Partition};

/// Errors of community detection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommunityError {
    /// A configuration value is unusable.
    #[error("invalid community configuration: {0}")]
    Config(String),
    /// The input is malformed (names what and where).
    #[error("invalid community input: {0}")]
    Input(String),
    /// An extractive report failed (embedding its sentences).
    #[error("extractive report: {0}")]
    Text(#[from] kgrag_text::Error),
}

/// Result alias of this crate.
pub type Result<T, E = CommunityError> = std::result::Result<T, E>;
