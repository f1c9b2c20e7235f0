//! # kgrag-hierarchy
//!
//! Layers of more abstract entities over a knowledge graph's base entities, as HiRAG and LeanRAG build
//! them (specs `hirag.md` §5 and `leanrag.md` §5):
//!
//! * [`reduce`] — PCA (our documented substitute for the references' UMAP) or no reduction;
//! * [`gmm`] — full-covariance Gaussian mixtures (k-means++ seeding, EM, restarts) and the BIC scan over
//!   k = 1 .. min(N, 50) − 1 with its early stop;
//! * [`cluster`] — one clustering round with soft (HiRAG) or hard (LeanRAG) assignment, sparsity, and both
//!   methods' stop rules;
//! * [`summarize`] — the [`ClusterSummarizer`] seam: HiRAG attribute entities, LeanRAG aggregate entities and
//!   inter-aggregate relation sentences, by an LLM ([`LlmClusterSummarizer`], our own prompts, tolerant
//!   parsing, a corrective retry, extractive fallback) or extractively ([`ExtractiveClusterSummarizer`],
//!   the offline kit);
//! * [`build_hirag`] / [`build_leanrag`] — the layer loops, returning a [`Hierarchy`] (layers of nodes with
//!   stable [`NodeId`]s, parent/children links, relations, a per-round [`LayerLog`]) that
//!   [`Hierarchy::insert_into`] writes into a [`KnowledgeGraph`](kgrag_graph_store::KnowledgeGraph).
//!
//! Everything random is seeded from config; summaries are requested concurrently but assembled in cluster
//! order, so the same inputs and the same (cached) model give the same hierarchy.
//!
//! ```
//! use kgrag_hierarchy::cluster::{cluster_layer, leanrag_max_depth, sparsity, SparsityTracker};
//! use kgrag_hierarchy::{Assignment, ClusterConfig, SparsityRule, StopReason};
//!
//! // HiRAG's sparsity of clusters of sizes 4 and 2 over 6 entities: 1 − (12 + 2) / 30.
//! assert!((sparsity(&[4, 2], 6) - 0.5333).abs() < 1e-4);
//! // The stop rule: 0.60 after the initial 0.01 goes on; 0.62 changed by 3.3 % → stable, stop.
//! let mut rule = SparsityTracker::new(SparsityRule::default());
//! assert_eq!(rule.observe(0.60).1, None);
//! assert_eq!(rule.observe(0.62).1, Some(StopReason::Stable));
//! // LeanRAG's depth for 10,000 base entities.
//! assert_eq!(leanrag_max_depth(10_000), 4);
//! // Identical embeddings form one cluster; nothing is dropped.
//! let rows = vec![vec![0.5f32, 0.5]; 3];
//! let c = cluster_layer(&rows, &ClusterConfig::default(), Assignment::Soft { threshold: 0.1 }, 0)?;
//! assert_eq!(c.clusters, vec![vec![0, 1, 2]]);
//! # Ok::<(), kgrag_hierarchy::HierarchyError>(())
//! ```

mod build;
pub mod cluster;
mod error;
pub mod gmm;
mod model;
pub mod reduce;
mod rng;
pub mod summarize;
pub mod umap;

pub use build::{
    build_hirag, build_leanrag, embed_texts, BaseEntity, BaseRelation, HiragConfig, LeanragConfig,
    RelationRule,
};
pub use cluster::{
    cluster_layer, cluster_points, sparsity, Assignment, ClusterConfig, LayerClustering,
    SparsityRule, StopReason,
};
pub use error::{HierarchyError, Result};
pub use gmm::{BicScan, Gmm, GmmConfig, Posteriors};
pub use model::{
    GraphLinks, HNode, HNodeKind, HRelation, Hierarchy, LayerLog, Method, NodeId, RelationKind,
};
pub use reduce::{Points, Reduction};
pub use summarize::{
    AggregateRequest, AggregateSummary, AttributeRequest, AttributeSummary, ClusterSummarizer,
    ExtractiveClusterSummarizer, Finding, LlmClusterSummarizer, Member, Outcome, RelateRequest,
    RelateSummary, RelationRow, SummaryEntity, SummaryRelation, SummaryStats,
};
