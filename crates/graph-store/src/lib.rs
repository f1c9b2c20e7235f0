//! # kgrag-graph-store
//!
//! The knowledge graph and vector indexes that extraction fills and that hierarchy, community detection and
//! the retrievers read:
//!
//! - [`KnowledgeGraph`]: passages, entities and summary entities on a petgraph stable graph, one edge per
//!   node pair carrying typed facets (fact counts, context links, synonymy cosines, relations, membership,
//!   aggregated relations) with the specs' merge rules; look-ups by key and name, degree, neighbours,
//!   connected components, BFS and Dijkstra paths; weights as views ([`EdgeWeighting`]).
//! - [`CsrGraph`]: a read-only compressed snapshot for algorithms, and [`ppr`]: Personalized PageRank that
//!   reaches the fixed point igraph's PRPACK computes (dangling nodes restart by the reset vector).
//! - [`vector`]: [`ExactIndex`] and [`HnswIndex`] behind [`VectorIndex`], cosine or inner product.
//! - [`synonymy`]: HippoRAG 2's synonymy edges, with incremental inserts that only scan new phrases.
//! - [`hippo`]: HippoRAG 2 phrase/passage/fact graph construction from triples.
//! - [`persist`]: versioned, checksummed files written atomically; [`IndexDir`]: the graph and named
//!   vector indexes of one index directory; [`graphml`]: GraphML export.
//!
//! ```
//! use kgrag_graph_store::{EdgeWeighting, KnowledgeGraph, ppr::{personalized_pagerank, PprConfig}};
//! use kgrag_types::ChunkId;
//!
//! let mut g = KnowledgeGraph::new();
//! let a = g.add_entity("entity-a", "a");
//! let b = g.add_entity("entity-b", "b");
//! g.add_fact(a, b, &ChunkId::from_content("passage"))?;
//! let csr = g.csr(EdgeWeighting::HippoReference)?;
//! let (scores, stats) = personalized_pagerank(&csr, &[1.0, 0.0], PprConfig::default())?;
//! assert!(stats.converged && (scores[0] - 2.0 / 3.0).abs() < 1e-9);
//! # Ok::<(), kgrag_graph_store::StoreError>(())
//! ```

mod csr;
mod error;
mod graph;
pub mod graphml;
pub mod hippo;
mod index_dir;
mod packed;
pub mod persist;
pub mod ppr;
pub mod synonymy;
pub mod vector;

pub use csr::CsrGraph;
pub use error::{Result, StoreError};
pub use graph::{
    Edge, EdgeKind, EdgeWeighting, EntityRecord, FactCounts, GraphCounts, KnowledgeGraph,
    NeighbourOrder, Node, NodeKind, RelationFacet, SynonymyFacet, DESCRIPTION_SEPARATOR,
};
pub use index_dir::IndexDir;
pub use packed::Packed;
pub use petgraph::stable_graph::{EdgeIndex, NodeIndex};
pub use vector::{
    EmbeddingStore, ExactIndex, Hit, HnswIndex, HnswParams, IndexKind, Metric, Precision,
    ScreenedIndex, TopKRange, VectorIndex,
};
