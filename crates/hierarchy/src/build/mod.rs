//! The two layer loops: HiRAG's HiIndex (spec hirag §5.3) and LeanRAG's aggregation tree (spec leanrag
//! §5.3–§5.5).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use futures_util::{stream, StreamExt};
use kgrag_text::Encoding;
use kgrag_types::{ChunkId, EmbedKind, Embedder};
use serde::{Deserialize, Serialize};

use crate::cluster::{
    cluster_layer, leanrag_max_depth, leanrag_stop, Assignment, ClusterConfig, LayerClustering,
    SparsityRule, SparsityTracker, StopReason,
};
use crate::model::{
    HNode, HNodeKind, HRelation, Hierarchy, LayerLog, Method, NodeId, RelationKind,
};
use crate::rng::SplitMix64;
use crate::summarize::{
    AggregateRequest, AttributeRequest, ClusterSummarizer, Member, Outcome, RelateRequest,
    RelationRow, HIRAG_MAX_CLUSTER_TOKENS,
};
use crate::{HierarchyError, Result};

mod hirag;
mod leanrag;

pub use self::hirag::build_hirag;
pub use self::leanrag::build_leanrag;

/// A base entity: graph key, name, type, description, sources and the embedding to cluster by (HiRAG and
/// LeanRAG embed the description).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaseEntity {
    /// Graph-store key of the entity's node.
    pub key: String,
    /// Name.
    pub name: String,
    /// Entity type.
    pub entity_type: String,
    /// Description (parts may be joined by `<SEP>`).
    pub description: String,
    /// Source chunks.
    pub sources: Vec<ChunkId>,
    /// Embedding of the description.
    pub embedding: Vec<f32>,
}

/// A base relation between two base entities (indices into the base list).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaseRelation {
    /// One endpoint.
    pub source: usize,
    /// The other endpoint.
    pub target: usize,
    /// Description.
    pub description: String,
}

/// HiRAG's HiIndex settings (spec hirag §2; defaults there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HiragConfig {
    /// Reduction, mixture and BIC scan.
    pub cluster: ClusterConfig,
    /// Soft membership threshold p(c|x) > 0.1.
    pub cluster_threshold: f64,
    /// The sparsity stop rule.
    pub stop: SparsityRule,
    /// Layer cap (50).
    pub max_layers: usize,
    /// Meta attribute types for attribute entities.
    pub entity_types: Vec<String>,
    /// Cluster prompt cap in cl100k tokens of names and descriptions (60,000).
    pub max_cluster_prompt_tokens: usize,
    /// Share of members kept per subsampling step of an oversized cluster (0.8).
    pub subsample_ratio: f64,
    /// Seed of the subsampling (224).
    pub sample_seed: u64,
    /// Summaries in flight at once (results are assembled in cluster order, so this never changes them).
    pub concurrency: usize,
    /// Texts per embedding call (64).
    pub embed_batch: usize,
    /// Print each round's N, k and sparsity to stderr as it happens (true); the same figures are always in
    /// [`Hierarchy::log`].
    pub log_layers: bool,
}

impl Default for HiragConfig {
    fn default() -> Self {
        Self {
            cluster: ClusterConfig::default(),
            cluster_threshold: 0.1,
            stop: SparsityRule::default(),
            max_layers: 50,
            entity_types: [
                "organization",
                "person",
                "location",
                "event",
                "product",
                "technology",
                "industry",
                "mathematics",
                "social sciences",
            ]
            .map(String::from)
            .to_vec(),
            max_cluster_prompt_tokens: HIRAG_MAX_CLUSTER_TOKENS,
            subsample_ratio: 0.8,
            sample_seed: 224,
            concurrency: 4,
            embed_batch: 64,
            log_layers: true,
        }
    }
}

/// How LeanRAG writes the relation between two aggregates (spec leanrag §5.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationRule {
    /// The paper: LLM sentence when λ > τ, else the crossing relations concatenated.
    #[default]
    CountThreshold,
    /// The shipped code: LLM sentence when the concatenation exceeds `length_per_level · (max_depth −
    /// layer)` cl100k tokens.
    LengthThreshold,
}

/// LeanRAG's aggregation settings (spec leanrag §2; defaults there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeanragConfig {
    /// Reduction, mixture and BIC scan.
    pub cluster: ClusterConfig,
    /// k floor = ⌊N / cluster_size⌋ (20).
    pub cluster_size: usize,
    /// Stop when a layer has at most this many nodes (2).
    pub min_layer_nodes: usize,
    /// Stop when a layer splits into at most this many clusters (4).
    pub min_clusters: usize,
    /// Layer cap; `None` = round(log₂₀ N₀) + 1.
    pub max_depth: Option<usize>,
    /// Relation rule.
    pub relation_rule: RelationRule,
    /// τ of the count rule (3).
    pub tau: usize,
    /// Token budget per remaining level of the length rule (80).
    pub length_per_level: usize,
    /// The relation sentence may have 40 · (layer + 1) words.
    pub relation_words_per_level: usize,
    /// Aggregation input budget in cl100k description tokens, half entities, half relations (12000).
    pub aggregate_prompt_tokens: usize,
    /// Summaries in flight at once (never changes the result).
    pub concurrency: usize,
    /// Texts per embedding call (64).
    pub embed_batch: usize,
    /// Print each round's N, k and sparsity to stderr as it happens (true); the same figures are always in
    /// [`Hierarchy::log`].
    pub log_layers: bool,
}

impl Default for LeanragConfig {
    fn default() -> Self {
        Self {
            cluster: ClusterConfig::default(),
            cluster_size: 20,
            min_layer_nodes: 2,
            min_clusters: 4,
            max_depth: None,
            relation_rule: RelationRule::CountThreshold,
            tau: 3,
            length_per_level: 80,
            relation_words_per_level: 40,
            aggregate_prompt_tokens: crate::summarize::AGGREGATE_PROMPT_TOKENS,
            concurrency: 4,
            embed_batch: 64,
            log_layers: true,
        }
    }
}

/// Embeds `texts` (document kind) in batches of similar length (less padding for embedders that pad a
/// batch to its longest text), returning the vectors in input order; checks counts. Up to the embedder's
/// [`calls_in_flight`](Embedder::calls_in_flight) batches are in flight at once (one for an in-process
/// model; a provider over the network or a distributed build's queue takes more); the vectors never
/// depend on it.
pub async fn embed_texts(
    embedder: &dyn Embedder,
    texts: &[String],
    batch: usize,
    what: &str,
) -> Result<Vec<Vec<f32>>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| (texts[i].len(), i));
    let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
    let mut batches = stream::iter(order.chunks(batch.max(1)).map(|part| async move {
        let chunk: Vec<String> = part.iter().map(|&i| texts[i].clone()).collect();
        let rows = embedder
            .embed(&chunk, &EmbedKind::Document)
            .await
            .map_err(|source| HierarchyError::Embedding {
                what: what.to_owned(),
                source,
            })?;
        if rows.len() != chunk.len() {
            return Err(HierarchyError::Input(format!(
                "the embedder returned {} vectors for {} {what}",
                rows.len(),
                chunk.len()
            )));
        }
        Ok((part, rows))
    }))
    .buffered(embedder.calls_in_flight().max(1));
    while let Some(done) = batches.next().await {
        let (part, rows) = done?;
        for (&i, row) in part.iter().zip(rows.rows()) {
            out[i] = row.to_vec();
        }
    }
    Ok(out)
}

fn validate_base(
    base: &[BaseEntity],
    relations: &[BaseRelation],
    embedder: &dyn Embedder,
) -> Result<()> {
    let dim = base.first().map_or(0, |b| b.embedding.len());
    if !base.is_empty() && embedder.dimension() != 0 && embedder.dimension() != dim {
        return Err(HierarchyError::Input(format!(
            "base embeddings have dimension {dim} but the embedder {} writes {}: summaries must be embedded \
             in the same space as the entities",
            embedder.model_name(),
            embedder.dimension()
        )));
    }
    for (i, b) in base.iter().enumerate() {
        if b.embedding.is_empty() || b.embedding.len() != dim {
            return Err(HierarchyError::Input(format!(
                "base entity {i} ({:?}) has an embedding of dimension {}, expected {dim} (non-zero)",
                b.name,
                b.embedding.len()
            )));
        }
    }
    for (i, r) in relations.iter().enumerate() {
        if r.source >= base.len() || r.target >= base.len() {
            return Err(HierarchyError::Input(format!(
                "base relation {i} joins entities {} and {}, but there are {} base entities",
                r.source,
                r.target,
                base.len()
            )));
        }
    }
    Ok(())
}

fn base_layer(base: Vec<BaseEntity>, degrees: &[usize]) -> Vec<HNode> {
    base.into_iter()
        .enumerate()
        .map(|(i, b)| {
            let mut node = HNode::new(
                NodeId::new(0, i as u32),
                HNodeKind::Base,
                b.name,
                b.entity_type,
                b.description,
            );
            node.key = Some(b.key);
            node.sources = b.sources;
            node.degree = degrees.get(i).copied().unwrap_or(0);
            node.embedding = b.embedding;
            node
        })
        .collect()
}

/// A copy of `of` one layer up (HiRAG carried, LeanRAG promoted): same content and origin, `of` as child.
fn copy_node(of: &HNode, id: NodeId, kind: HNodeKind) -> HNode {
    HNode {
        id,
        kind,
        key: None,
        parents: Vec::new(),
        children: vec![of.id],
        outcome: None,
        ..of.clone()
    }
}

fn member(n: &HNode) -> Member {
    Member {
        name: n.name.clone(),
        entity_type: n.entity_type.clone(),
        description: n.description.clone(),
        degree: n.degree,
    }
}

fn tokens(text: &str) -> usize {
    Encoding::Cl100kBase
        .count(text)
        .unwrap_or_else(|_| text.split_whitespace().count())
}

/// The outcome's serialised name (`llm`, `retried`, `fallback`, `extractive`).
fn outcome_name(o: Outcome) -> String {
    serde_json::to_value(o)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn log_round(layer: u32, c: &LayerClustering, secs: f64) -> LayerLog {
    LayerLog {
        layer,
        n: c.n,
        k: c.k,
        k_bic: c.scan.best_k,
        clusters: c.clusters.len(),
        sparsity: c.sparsity(),
        change: None,
        reduced_dim: c.reduced_dim,
        bic_ks: c.scan.ks.clone(),
        bic: c.scan.bics.clone(),
        rescued: c.rescued,
        umap_init: c.umap_init,
        cluster_secs: secs,
        summary_secs: 0.0,
        outcomes: BTreeMap::new(),
    }
}

fn eprint_round(method: &str, log: &LayerLog) {
    eprintln!(
        "kgrag-hierarchy: {method} layer {}: N {} → k {} (BIC {}, tried {}), {} clusters, sparsity {:.4}{}{}",
        log.layer,
        log.n,
        log.k,
        log.k_bic,
        log.bic_ks.len(),
        log.clusters,
        log.sparsity,
        log.change
            .map_or_else(String::new, |c| format!(", change {c:.4}")),
        match log.umap_init {
            Some(crate::umap::UmapInit::Pca) => ", UMAP started from PCA (graph in pieces)",
            _ => "",
        }
    );
}
