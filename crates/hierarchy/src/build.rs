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
/// batch to its longest text), returning the vectors in input order; checks counts.
pub async fn embed_texts(
    embedder: &dyn Embedder,
    texts: &[String],
    batch: usize,
    what: &str,
) -> Result<Vec<Vec<f32>>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| (texts[i].len(), i));
    let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
    for part in order.chunks(batch.max(1)) {
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
        cluster_secs: secs,
        summary_secs: 0.0,
        outcomes: BTreeMap::new(),
    }
}

fn eprint_round(method: &str, log: &LayerLog) {
    eprintln!(
        "kgrag-hierarchy: {method} layer {}: N {} → k {} (BIC {}, tried {}), {} clusters, sparsity {:.4}{}",
        log.layer,
        log.n,
        log.k,
        log.k_bic,
        log.bic_ks.len(),
        log.clusters,
        log.sparsity,
        log.change
            .map_or_else(String::new, |c| format!(", change {c:.4}"))
    );
}

/// HiRAG's HiIndex over `base` (spec hirag §5.3): cluster the current layer (soft), stop on the sparsity
/// rule before summarising, ask `summarizer` for attribute entities of every non-singleton cluster (carry
/// singletons up), embed the new entities' descriptions, and repeat on the new entities until the rule, the
/// layer cap or ≤ 2 entities stops it. `relations` only feed member degrees (for the extractive names).
pub async fn build_hirag(
    base: Vec<BaseEntity>,
    relations: &[BaseRelation],
    embedder: &dyn Embedder,
    summarizer: &dyn ClusterSummarizer,
    config: &HiragConfig,
) -> Result<Hierarchy> {
    validate_base(&base, relations, embedder)?;
    if !(config.cluster_threshold >= 0.0 && config.cluster_threshold < 1.0) {
        return Err(HierarchyError::Config(format!(
            "cluster_threshold {} must lie in [0, 1)",
            config.cluster_threshold
        )));
    }
    if !(config.subsample_ratio > 0.0 && config.subsample_ratio < 1.0) {
        return Err(HierarchyError::Config(format!(
            "subsample_ratio {} must lie strictly between 0 and 1",
            config.subsample_ratio
        )));
    }
    let mut degrees = vec![0usize; base.len()];
    let mut seen = HashSet::new();
    for r in relations {
        let key = (r.source.min(r.target), r.source.max(r.target));
        if r.source != r.target && seen.insert(key) {
            degrees[r.source] += 1;
            degrees[r.target] += 1;
        }
    }
    let mut h = Hierarchy {
        method: Method::Hirag,
        layers: vec![base_layer(base, &degrees)],
        relations: Vec::new(),
        log: Vec::new(),
        stop: None,
        root: None,
    };
    let mut current: Vec<u32> = (0..h.layers[0].len() as u32).collect();
    if current.len() <= 2 {
        h.stop = Some(StopReason::TooFewNodes);
        return Ok(h);
    }
    let mut tracker = SparsityTracker::new(config.stop);
    let assignment = Assignment::Soft {
        threshold: config.cluster_threshold,
    };
    h.stop = Some(StopReason::LayerCap);
    for layer in 0..config.max_layers as u32 {
        let started = Instant::now();
        let rows: Vec<&[f32]> = current
            .iter()
            .map(|&i| h.layers[layer as usize][i as usize].embedding.as_slice())
            .collect();
        let clustering = cluster_layer(&rows, &config.cluster, assignment, 0)?;
        let mut log = log_round(layer, &clustering, started.elapsed().as_secs_f64());
        let (change, stop) = tracker.observe(log.sparsity);
        log.change = Some(change);
        if config.log_layers {
            eprint_round("hirag", &log);
        }
        if let Some(stop) = stop {
            h.log.push(log);
            h.stop = Some(stop);
            break;
        }
        let started = Instant::now();
        // Members of each cluster as ids on this layer; oversized prompts subsampled (seeded).
        let clusters: Vec<Vec<u32>> = clustering
            .clusters
            .iter()
            .map(|m| m.iter().map(|&p| current[p]).collect())
            .collect();
        let mut requests = Vec::new();
        for (ci, members) in clusters.iter().enumerate() {
            if members.len() < 2 {
                continue;
            }
            let nodes = &h.layers[layer as usize];
            let cost: Vec<usize> = members
                .iter()
                .map(|&m| tokens(&nodes[m as usize].name) + tokens(&nodes[m as usize].description))
                .collect();
            let mut kept: Vec<usize> = (0..members.len()).collect();
            let mut rng = SplitMix64::stream(config.sample_seed, u64::from(layer), ci as u64);
            while kept.iter().map(|&i| cost[i]).sum::<usize>() > config.max_cluster_prompt_tokens
                && kept.len() > 1
            {
                let target = ((kept.len() as f64 * config.subsample_ratio).floor() as usize).max(1);
                kept = rng
                    .subset(kept.len(), target)
                    .into_iter()
                    .map(|j| kept[j])
                    .collect();
            }
            requests.push((
                ci,
                AttributeRequest {
                    layer,
                    members: kept
                        .iter()
                        .map(|&i| member(&nodes[members[i] as usize]))
                        .collect(),
                    entity_types: config.entity_types.clone(),
                },
            ));
        }
        let replies: Vec<(usize, Result<_>)> = stream::iter(requests)
            .map(|(ci, req)| async move { (ci, summarizer.attribute_entities(&req).await) })
            .buffered(config.concurrency.max(1))
            .collect()
            .await;
        let mut replies: HashMap<usize, Result<_>> = replies.into_iter().collect();
        // Names of the layers built so far (upper-cased; the latest layer wins, first node within a layer).
        let mut older: HashMap<String, NodeId> = HashMap::new();
        for l in h.layers.iter().take(layer as usize + 1) {
            let mut seen = HashSet::new();
            for n in l {
                let upper = n.name.to_uppercase();
                if seen.insert(upper.clone()) {
                    older.insert(upper, n.id);
                }
            }
        }
        // Assemble the next layer in cluster order.
        let next_layer = layer + 1;
        let mut next: Vec<HNode> = Vec::new();
        let mut by_name: HashMap<String, u32> = HashMap::new();
        let mut new_relations = Vec::new();
        for (ci, members) in clusters.iter().enumerate() {
            if members.len() == 1 {
                let m = members[0];
                let id = NodeId::new(next_layer, next.len() as u32);
                let copy = copy_node(
                    &h.layers[layer as usize][m as usize],
                    id,
                    HNodeKind::Carried,
                );
                // De-duplicated by name, first wins: a singleton whose name is already on the next layer
                // (an earlier attribute entity, or its own copy from another soft cluster) links to it.
                let upper = copy.name.to_uppercase();
                let target = match by_name.get(&upper) {
                    Some(&idx) => {
                        let existing = &mut next[idx as usize];
                        let child = NodeId::new(layer, m);
                        if !existing.children.contains(&child) {
                            existing.children.push(child);
                        }
                        NodeId::new(next_layer, idx)
                    }
                    None => {
                        by_name.insert(upper, id.idx);
                        next.push(copy);
                        id
                    }
                };
                let parents = &mut h.layers[layer as usize][m as usize].parents;
                if !parents.contains(&target) {
                    parents.push(target);
                }
                continue;
            }
            let Some(reply) = replies.remove(&ci) else {
                continue;
            };
            let summary = reply?;
            *log.outcomes
                .entry(outcome_name(summary.outcome))
                .or_default() += 1;
            let children: Vec<NodeId> = members.iter().map(|&m| NodeId::new(layer, m)).collect();
            let mut made: HashMap<String, u32> = HashMap::new();
            for e in summary.entities {
                let upper = e.name.to_uppercase();
                let idx = match by_name.get(&upper) {
                    Some(&idx) => {
                        // An endpoint an earlier reply named without defining it becomes this entity.
                        let node = &mut next[idx as usize];
                        if node.kind == HNodeKind::Unknown {
                            node.kind = HNodeKind::Attribute;
                            node.entity_type = e.entity_type;
                            node.description = e.description;
                            node.outcome = Some(summary.outcome);
                        }
                        idx
                    }
                    None => {
                        let id = NodeId::new(next_layer, next.len() as u32);
                        let mut node = HNode::new(
                            id,
                            HNodeKind::Attribute,
                            e.name,
                            e.entity_type,
                            e.description,
                        );
                        node.outcome = Some(summary.outcome);
                        next.push(node);
                        by_name.insert(upper.clone(), id.idx);
                        id.idx
                    }
                };
                made.insert(upper, idx);
                let node = &mut next[idx as usize];
                for &c in &children {
                    if !node.children.contains(&c) {
                        node.children.push(c);
                    }
                }
                for &m in members {
                    let parents = &mut h.layers[layer as usize][m as usize].parents;
                    let p = NodeId::new(next_layer, idx);
                    if !parents.contains(&p) {
                        parents.push(p);
                    }
                }
            }
            let member_names: HashMap<String, u32> = members
                .iter()
                .map(|&m| (h.layers[layer as usize][m as usize].name.to_uppercase(), m))
                .collect();
            for r in summary.relations {
                let mut resolve = |name: &str, next: &mut Vec<HNode>| -> NodeId {
                    let upper = name.to_uppercase();
                    if let Some(&m) = member_names.get(&upper) {
                        return NodeId::new(layer, m);
                    }
                    if let Some(&i) = made.get(&upper).or_else(|| by_name.get(&upper)) {
                        return NodeId::new(next_layer, i);
                    }
                    if let Some(&id) = older.get(&upper) {
                        return id;
                    }
                    let id = NodeId::new(next_layer, next.len() as u32);
                    next.push(HNode::new(
                        id,
                        HNodeKind::Unknown,
                        name.to_owned(),
                        "UNKNOWN".into(),
                        r.description.clone(),
                    ));
                    by_name.insert(upper, id.idx);
                    id
                };
                let a = resolve(&r.source, &mut next);
                let b = resolve(&r.target, &mut next);
                if a != b {
                    new_relations.push(HRelation {
                        a,
                        b,
                        level: next_layer,
                        description: r.description,
                        weight: r.strength,
                        kind: RelationKind::Member,
                        crossing: 0,
                    });
                }
            }
        }
        let mut pairs = HashSet::new();
        for r in &new_relations {
            if !pairs.insert((r.a.min(r.b), r.a.max(r.b))) {
                continue;
            }
            for id in [r.a, r.b] {
                if id.layer == next_layer {
                    next[id.idx as usize].degree += 1;
                }
            }
        }
        // Embed the new attribute entities (descriptions; the name when the description is empty).
        let fresh: Vec<usize> = next
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == HNodeKind::Attribute)
            .map(|(i, _)| i)
            .collect();
        let texts: Vec<String> = fresh
            .iter()
            .map(|&i| {
                let n = &next[i];
                if n.description.trim().is_empty() {
                    n.name.clone()
                } else {
                    n.description.clone()
                }
            })
            .collect();
        let vectors = embed_texts(
            embedder,
            &texts,
            config.embed_batch,
            "attribute entity descriptions",
        )
        .await?;
        for (i, v) in fresh.into_iter().zip(vectors) {
            next[i].embedding = v;
        }
        log.summary_secs = started.elapsed().as_secs_f64();
        h.log.push(log);
        h.relations.extend(new_relations);
        current = next
            .iter()
            .filter(|n| matches!(n.kind, HNodeKind::Attribute | HNodeKind::Carried))
            .map(|n| n.id.idx)
            .collect();
        h.layers.push(next);
        if current.len() <= 2 {
            h.stop = Some(StopReason::TooFewNodes);
            break;
        }
    }
    Ok(h)
}

/// Stored relations of a LeanRAG build with an adjacency index by origin.
struct RelationStore {
    relations: Vec<HRelation>,
    by_origin: HashMap<NodeId, Vec<usize>>,
    pair: HashMap<(NodeId, NodeId), usize>,
}

impl RelationStore {
    fn new() -> Self {
        Self {
            relations: Vec::new(),
            by_origin: HashMap::new(),
            pair: HashMap::new(),
        }
    }

    /// Adds a relation, merging with the existing one of the same unordered pair (descriptions joined by
    /// ` | `).
    fn add(&mut self, r: HRelation) {
        let key = (r.a.min(r.b), r.a.max(r.b));
        if let Some(&i) = self.pair.get(&key) {
            let old = &mut self.relations[i];
            if !r.description.is_empty() && old.description != r.description {
                old.description = if old.description.is_empty() {
                    r.description
                } else {
                    format!("{} | {}", old.description, r.description)
                };
            }
            return;
        }
        let i = self.relations.len();
        self.pair.insert(key, i);
        self.by_origin.entry(r.a).or_default().push(i);
        self.by_origin.entry(r.b).or_default().push(i);
        self.relations.push(r);
    }

    fn degree(&self, origin: NodeId) -> usize {
        self.by_origin.get(&origin).map_or(0, Vec::len)
    }

    /// Relations with both endpoints among `origins`, in creation order.
    fn within(&self, origins: &HashSet<NodeId>) -> Vec<usize> {
        let mut out: Vec<usize> = origins
            .iter()
            .flat_map(|o| self.by_origin.get(o).into_iter().flatten().copied())
            .filter(|&i| {
                let r = &self.relations[i];
                origins.contains(&r.a) && origins.contains(&r.b)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The plain descriptions inside a stored relation: a concatenated relation's `relationship<|>A<|>B<|>text`
/// lines reduced to their texts (recursively, since lower levels' concatenations nest), else the
/// description itself. These are what an extractive relation sentence is chosen from.
fn plain_descriptions(r: &HRelation) -> Vec<String> {
    if r.kind != RelationKind::Concat {
        return vec![r.description.clone()];
    }
    r.description
        .lines()
        .filter_map(|line| {
            let text = line.rsplit("<|>").next()?.trim();
            (!text.is_empty()).then(|| text.to_owned())
        })
        .collect()
}

fn origin_name(h: &Hierarchy, id: NodeId) -> String {
    h.node(id).map_or_else(String::new, |n| n.name.clone())
}

#[allow(clippy::too_many_arguments)]
async fn aggregate_node(
    h: &Hierarchy,
    store: &RelationStore,
    children: &[NodeId],
    id: NodeId,
    kind: HNodeKind,
    entity_type: &str,
    layer: u32,
    summarizer: &dyn ClusterSummarizer,
    prompt_tokens: usize,
) -> Result<HNode> {
    let nodes: Vec<&HNode> = children.iter().filter_map(|&c| h.node(c)).collect();
    let members: Vec<Member> = nodes
        .iter()
        .map(|n| Member {
            degree: store.degree(n.origin),
            ..member(n)
        })
        .collect();
    let origins: HashSet<NodeId> = nodes.iter().map(|n| n.origin).collect();
    let relations: Vec<RelationRow> = store
        .within(&origins)
        .into_iter()
        .map(|i| {
            let r = &store.relations[i];
            RelationRow {
                source: origin_name(h, r.a),
                target: origin_name(h, r.b),
                description: r.description.clone(),
                rank: store.degree(r.a) + store.degree(r.b),
            }
        })
        .collect();
    let summary = summarizer
        .aggregate(&AggregateRequest {
            layer,
            members,
            relations,
            prompt_tokens: Some(prompt_tokens),
        })
        .await?;
    let mut node = HNode::new(
        id,
        kind,
        summary.name,
        entity_type.to_owned(),
        summary.description,
    );
    node.sources = nodes
        .iter()
        .flat_map(|n| n.sources.iter().cloned())
        .collect();
    node.children = children.to_vec();
    node.findings = summary.findings;
    node.outcome = Some(summary.outcome);
    Ok(node)
}

/// LeanRAG's aggregation tree over `base` (spec leanrag §5.3): per layer, hard clusters with
/// k = max(⌊N / cluster_size⌋, k_BIC), one aggregate per cluster (singletons promoted as copies), relations
/// between the new aggregates from the stored relations crossing their clusters, until `max_depth`, ≤ 2
/// nodes or ≤ 4 clusters; then one root. Base relations are merged per unordered pair (descriptions joined
/// by ` | `) and kept in [`Hierarchy::relations`] as kind `Base`.
pub async fn build_leanrag(
    base: Vec<BaseEntity>,
    relations: &[BaseRelation],
    embedder: &dyn Embedder,
    summarizer: &dyn ClusterSummarizer,
    config: &LeanragConfig,
) -> Result<Hierarchy> {
    validate_base(&base, relations, embedder)?;
    if config.cluster_size == 0 {
        return Err(HierarchyError::Config(
            "cluster_size must be at least 1".into(),
        ));
    }
    let mut store = RelationStore::new();
    for r in relations {
        if r.source == r.target {
            continue;
        }
        store.add(HRelation {
            a: NodeId::new(0, r.source as u32),
            b: NodeId::new(0, r.target as u32),
            level: 0,
            description: r.description.clone(),
            weight: 1.0,
            kind: RelationKind::Base,
            crossing: 0,
        });
    }
    let degrees: Vec<usize> = (0..base.len())
        .map(|i| store.degree(NodeId::new(0, i as u32)))
        .collect();
    let n0 = base.len();
    let mut h = Hierarchy {
        method: Method::Leanrag,
        layers: vec![base_layer(base, &degrees)],
        relations: Vec::new(),
        log: Vec::new(),
        stop: None,
        root: None,
    };
    if n0 == 0 {
        h.stop = Some(StopReason::TooFewNodes);
        return Ok(h);
    }
    let max_depth = config.max_depth.unwrap_or_else(|| leanrag_max_depth(n0));
    h.stop = Some(StopReason::LayerCap);
    for layer in 0..max_depth as u32 {
        let li = layer as usize;
        let n = h.layers[li].len();
        if let Some(stop) = leanrag_stop(n, None, config.min_layer_nodes, config.min_clusters) {
            h.stop = Some(stop);
            break;
        }
        let started = Instant::now();
        let rows: Vec<&[f32]> = h.layers[li]
            .iter()
            .map(|n| n.embedding.as_slice())
            .collect();
        let clustering = cluster_layer(
            &rows,
            &config.cluster,
            Assignment::Hard,
            n / config.cluster_size,
        )?;
        let mut log = log_round(layer, &clustering, started.elapsed().as_secs_f64());
        if config.log_layers {
            eprint_round("leanrag", &log);
        }
        if let Some(stop) = leanrag_stop(
            n,
            Some(clustering.clusters.len()),
            config.min_layer_nodes,
            config.min_clusters,
        ) {
            h.log.push(log);
            h.stop = Some(stop);
            break;
        }
        let started = Instant::now();
        let next_layer = layer + 1;
        let clusters: Vec<Vec<NodeId>> = clustering
            .clusters
            .iter()
            .map(|m| m.iter().map(|&i| NodeId::new(layer, i as u32)).collect())
            .collect();
        let aggregates: Vec<Result<HNode>> = {
            let h_ref = &h;
            let store_ref = &store;
            stream::iter(clusters.iter().enumerate())
                .map(|(ci, members)| async move {
                    let id = NodeId::new(next_layer, ci as u32);
                    if members.len() == 1 {
                        let of = h_ref.node(members[0]).ok_or_else(|| {
                            HierarchyError::Input(format!("missing node {}", members[0]))
                        })?;
                        return Ok(copy_node(of, id, HNodeKind::Promoted));
                    }
                    aggregate_node(
                        h_ref,
                        store_ref,
                        members,
                        id,
                        HNodeKind::Aggregate,
                        "aggregate entity",
                        layer,
                        summarizer,
                        config.aggregate_prompt_tokens,
                    )
                    .await
                })
                .buffered(config.concurrency.max(1))
                .collect()
                .await
        };
        let mut next = Vec::with_capacity(aggregates.len());
        for a in aggregates {
            let a = a?;
            if let Some(o) = a.outcome {
                *log.outcomes.entry(outcome_name(o)).or_default() += 1;
            }
            for &c in &a.children {
                h.layers[li][c.idx as usize].parents = vec![a.id];
            }
            next.push(a);
        }
        let fresh: Vec<usize> = (0..next.len())
            .filter(|&i| next[i].kind == HNodeKind::Aggregate)
            .collect();
        let texts: Vec<String> = fresh.iter().map(|&i| next[i].description.clone()).collect();
        let vectors = embed_texts(
            embedder,
            &texts,
            config.embed_batch,
            "aggregate descriptions",
        )
        .await?;
        for (&i, v) in fresh.iter().zip(vectors) {
            next[i].embedding = v;
        }
        h.layers.push(next);
        // Inter-cluster relations among the new aggregates (promoted copies excluded).
        let mut cluster_of: HashMap<NodeId, usize> = HashMap::new();
        for (ci, members) in clusters.iter().enumerate() {
            if h.layers[next_layer as usize][ci].kind != HNodeKind::Aggregate {
                continue;
            }
            for &m in members {
                if let Some(n) = h.node(m) {
                    cluster_of.insert(n.origin, ci);
                }
            }
        }
        let mut crossing: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for (i, r) in store.relations.iter().enumerate() {
            if let (Some(&ca), Some(&cb)) = (cluster_of.get(&r.a), cluster_of.get(&r.b)) {
                if ca != cb {
                    crossing
                        .entry((ca.min(cb), ca.max(cb)))
                        .or_default()
                        .push(i);
                }
            }
        }
        let word_limit = config.relation_words_per_level * (li + 1);
        let mut pending = Vec::new();
        for ((ca, cb), rels) in crossing {
            let lines: Vec<String> = rels
                .iter()
                .map(|&i| {
                    let r = &store.relations[i];
                    format!(
                        "relationship<|>{}<|>{}<|>{}",
                        origin_name(&h, r.a),
                        origin_name(&h, r.b),
                        r.description
                    )
                })
                .collect();
            let lines = lines.join("\n");
            let use_llm = match config.relation_rule {
                RelationRule::CountThreshold => rels.len() > config.tau,
                RelationRule::LengthThreshold => {
                    tokens(&lines) > config.length_per_level * max_depth.saturating_sub(li)
                }
            };
            let a = &h.layers[next_layer as usize][ca];
            let b = &h.layers[next_layer as usize][cb];
            pending.push((
                a.id,
                b.id,
                rels.len(),
                use_llm,
                RelateRequest {
                    layer,
                    a: (a.name.clone(), a.findings.clone()),
                    b: (b.name.clone(), b.findings.clone()),
                    lines,
                    descriptions: rels
                        .iter()
                        .flat_map(|&i| plain_descriptions(&store.relations[i]))
                        .collect(),
                    word_limit,
                },
            ));
        }
        let written: Vec<Result<HRelation>> = stream::iter(pending)
            .map(|(a, b, lambda, use_llm, req)| async move {
                let (description, kind) = if use_llm {
                    let s = summarizer.relate(&req).await?;
                    let kind = match s.outcome {
                        Outcome::Llm | Outcome::Retried => RelationKind::Llm,
                        Outcome::Fallback | Outcome::Extractive => RelationKind::Extractive,
                    };
                    (s.text, kind)
                } else {
                    (req.lines, RelationKind::Concat)
                };
                Ok(HRelation {
                    a,
                    b,
                    level: next_layer,
                    description,
                    weight: 1.0,
                    kind,
                    crossing: lambda,
                })
            })
            .buffered(config.concurrency.max(1))
            .collect()
            .await;
        for r in written {
            store.add(r?);
        }
        log.summary_secs = started.elapsed().as_secs_f64();
        h.log.push(log);
    }
    // The root: the single last node, or one aggregate over the last layer.
    let last = h.layers.len() - 1;
    let top: Vec<NodeId> = h.layers[last].iter().map(|n| n.id).collect();
    if top.len() == 1 {
        h.root = Some(top[0]);
    } else {
        let id = NodeId::new(last as u32 + 1, 0);
        let mut root = aggregate_node(
            &h,
            &store,
            &top,
            id,
            HNodeKind::Top,
            "community",
            last as u32,
            summarizer,
            config.aggregate_prompt_tokens,
        )
        .await?;
        let v = embed_texts(
            embedder,
            std::slice::from_ref(&root.description),
            1,
            "the root description",
        )
        .await?;
        root.embedding = v.into_iter().next().unwrap_or_default();
        for &c in &top {
            h.layers[last][c.idx as usize].parents = vec![id];
        }
        h.layers.push(vec![root]);
        h.root = Some(id);
    }
    for r in store.relations.iter_mut() {
        r.weight = 1.0;
    }
    for layer in &mut h.layers {
        for n in layer.iter_mut() {
            if n.kind != HNodeKind::Base {
                n.degree = store.degree(n.origin);
            }
        }
    }
    h.relations = store.relations;
    Ok(h)
}
