//! Hierarchical Leiden as graspologic's `hierarchical_leiden` builds it (the community hierarchy HiRAG
//! uses): Leiden on the graph gives level 0; every cluster with at least `max_cluster_size` nodes is
//! clustered again on its own induced subgraph (its own modularity, starting from singletons), giving the
//! next level; a re-split that yields one cluster stops there (recorded as unsplittable). Cluster ids are
//! unique across levels and assigned level by level, within a level in ascending order of the cluster's
//! smallest member node (spec `hirag.md` §6.1, ours: the reference numbers clusters in the order its queue
//! meets them). Index the graph's nodes in name order and this is "ascending smallest member name".
//!
//! The split threshold is **at least** `max_cluster_size` nodes, as graspologic-native's code does
//! (`compact_network.rs` filters `>=`); the spec's prose says "more than 10". A leaf cluster can still
//! have `max_cluster_size` or more nodes when Leiden returns it whole (listed in `unsplittable`).
//!
//! Differences from the reference, on purpose: each sub-run draws from its own generator seeded by
//! `(seed, parent cluster)`, so the result does not depend on queue order — the sub-runs of a level run in
//! parallel (rayon), their results taken in cluster order, the same for any thread count; Leiden iterates until its
//! quality stops improving instead of running one pass; `largest_component_only = false` clusters every
//! connected component instead of the largest one only (the reference's behaviour is the default).

use rayon::prelude::*;

use crate::leiden::{components_of, leiden, leiden_with, Graph, LeidenConfig, Partition, Scratch};
use crate::Result;

/// Hierarchical Leiden settings (HiRAG: max size 10, seed 0xDEADBEEF, largest component only).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HierarchicalConfig {
    /// Leiden settings of every run.
    pub leiden: LeidenConfig,
    /// Clusters of at least this many nodes are split again (10).
    pub max_cluster_size: usize,
    /// Cluster only the largest connected component (reference; ties: the one with the smallest node).
    pub largest_component_only: bool,
}

impl Default for HierarchicalConfig {
    fn default() -> Self {
        Self {
            leiden: LeidenConfig::default(),
            max_cluster_size: 10,
            largest_component_only: true,
        }
    }
}

/// One node's cluster at one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterRecord {
    /// Node (index in the input graph).
    pub node: usize,
    /// Cluster id (unique across levels).
    pub cluster: usize,
    /// The cluster it was split from (`None` on level 0).
    pub parent: Option<usize>,
    /// Level (0 = coarsest).
    pub level: usize,
    /// Whether this is the node's deepest cluster.
    pub is_final: bool,
}

/// The community hierarchy.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommunityHierarchy {
    /// One record per node and level its cluster exists on, by level then node.
    pub records: Vec<ClusterRecord>,
    /// Clusters of at least `max_cluster_size` nodes that Leiden could not split.
    pub unsplittable: Vec<usize>,
    /// Number of levels.
    pub levels: usize,
}

/// Connected components in order of their smallest node, each sorted.
fn components(g: &Graph) -> Vec<Vec<usize>> {
    let labels = components_of(g, &vec![0; g.node_count()]);
    let mut out = vec![Vec::new(); labels.iter().copied().max().map_or(0, |m| m + 1)];
    for (v, &c) in labels.iter().enumerate() {
        out[c].push(v);
    }
    out
}

/// Runs hierarchical Leiden on `graph`.
pub fn hierarchical_leiden(
    graph: &Graph,
    config: &HierarchicalConfig,
) -> Result<CommunityHierarchy> {
    let mut comps = components(graph);
    // Isolated nodes carry no edge to cluster by (graspologic, fed an edge list, never sees them).
    comps.retain(|c| c.len() > 1);
    let nodes: Vec<usize> = if config.largest_component_only {
        // Largest component; ties: the one holding the smallest node (components come in node order).
        let mut best: Option<Vec<usize>> = None;
        for c in comps.drain(..) {
            if best.as_ref().is_none_or(|b| c.len() > b.len()) {
                best = Some(c);
            }
        }
        best.unwrap_or_default()
    } else {
        let mut all: Vec<usize> = comps.into_iter().flatten().collect();
        all.sort_unstable();
        all
    };
    let mut out = CommunityHierarchy::default();
    if nodes.is_empty() {
        return Ok(out);
    }
    // Every node of the graph (sorted and distinct, so `nodes` is 0..n): the induced graph is the graph.
    let top = if nodes.len() == graph.node_count() {
        leiden(graph, &config.leiden)?
    } else {
        let mut position = vec![usize::MAX; graph.node_count()];
        leiden(&graph.induced(&nodes, &mut position), &config.leiden)?
    };
    // Current clusters: (id, members as input-graph nodes).
    let mut parts: Vec<Vec<usize>> = vec![Vec::new(); top.communities];
    for (i, &c) in top.membership.iter().enumerate() {
        parts[c].push(nodes[i]);
    }
    // Ids within a level in ascending order of the smallest member (spec §6.1, ours): members are
    // sorted, so `part[0]` is the smallest.
    parts.retain(|p| !p.is_empty());
    parts.sort_unstable_by_key(|p| p[0]);
    let mut clusters: Vec<(usize, Vec<usize>)> = parts.into_iter().enumerate().collect();
    let mut next_id = clusters.len();
    let mut level = 0;
    // Per cluster id (ids are 0..next_id), whether it was split.
    let mut split: Vec<bool> = Vec::new();
    let mut records: Vec<ClusterRecord> = Vec::new();
    for (id, members) in &clusters {
        for &v in members {
            records.push(ClusterRecord {
                node: v,
                cluster: *id,
                parent: None,
                level,
                is_final: true,
            });
        }
    }
    loop {
        // The clusters of this level are split independently (each from its own seed), on rayon; the
        // results are taken in cluster order, so the outcome does not depend on the thread count.
        let runs: Vec<Option<Partition>> = clusters
            .par_iter()
            .map_init(
                || (vec![usize::MAX; graph.node_count()], Scratch::default()),
                |(position, scratch), (id, members)| {
                    if members.len() < config.max_cluster_size.max(2) {
                        return Ok(None);
                    }
                    let sub = graph.induced(members, position);
                    let cfg = LeidenConfig {
                        seed: config.leiden.seed ^ (*id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                        ..config.leiden
                    };
                    leiden_with(&sub, &cfg, scratch).map(Some)
                },
            )
            .collect::<Result<_>>()?;
        // (parent, members) of every split at this level; numbered once the level is complete.
        let mut pieces: Vec<(usize, Vec<usize>)> = Vec::new();
        for ((id, members), run) in clusters.iter().zip(runs) {
            let Some(p) = run else { continue };
            if p.communities <= 1 {
                out.unsplittable.push(*id);
                continue;
            }
            if split.len() <= *id {
                split.resize(*id + 1, false);
            }
            split[*id] = true;
            let mut parts: Vec<Vec<usize>> = vec![Vec::new(); p.communities];
            for (i, &c) in p.membership.iter().enumerate() {
                parts[c].push(members[i]);
            }
            pieces.extend(
                parts
                    .into_iter()
                    .filter(|p| !p.is_empty())
                    .map(|p| (*id, p)),
            );
        }
        if pieces.is_empty() {
            break;
        }
        pieces.sort_unstable_by_key(|(_, part)| part[0]);
        let mut children: Vec<(usize, Vec<usize>)> = Vec::with_capacity(pieces.len());
        for (parent, part) in pieces {
            let cid = next_id;
            next_id += 1;
            for &v in &part {
                records.push(ClusterRecord {
                    node: v,
                    cluster: cid,
                    parent: Some(parent),
                    level: level + 1,
                    is_final: true,
                });
            }
            children.push((cid, part));
        }
        level += 1;
        clusters = children;
    }
    for r in &mut records {
        r.is_final = !split.get(r.cluster).copied().unwrap_or(false);
    }
    // A node has one record per level, so the keys are distinct.
    records.sort_unstable_by_key(|r| (r.level, r.node));
    out.levels = level + 1;
    out.records = records;
    Ok(out)
}

/// One community of the schema (spec hirag §6.2).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Community {
    /// Cluster id.
    pub id: usize,
    /// Level (0 = coarsest).
    pub level: usize,
    /// `Cluster <id>`.
    pub title: String,
    /// Member nodes, sorted.
    pub nodes: Vec<usize>,
    /// Every edge incident to a member, as sorted pairs (may leave the community), sorted.
    pub edges: Vec<(usize, usize)>,
    /// Union of the members' source chunks, sorted.
    pub chunk_ids: Vec<String>,
    /// |chunk_ids| / the largest |chunk_ids| of any community.
    pub occurrence: f64,
    /// The community it was split from.
    pub parent: Option<usize>,
    /// Communities one level deeper split from it, sorted.
    pub sub_communities: Vec<usize>,
}

/// The community schema of a hierarchy: members, incident edges, chunks, occurrence and links, by id.
/// `sources[v]` are node v's source chunks.
pub fn community_schema(
    graph: &Graph,
    hierarchy: &CommunityHierarchy,
    sources: &[Vec<String>],
) -> Vec<Community> {
    let mut by_id: std::collections::BTreeMap<usize, Community> = std::collections::BTreeMap::new();
    for r in &hierarchy.records {
        let c = by_id.entry(r.cluster).or_insert_with(|| Community {
            id: r.cluster,
            level: r.level,
            title: format!("Cluster {}", r.cluster),
            parent: r.parent,
            ..Community::default()
        });
        c.nodes.push(r.node);
    }
    let links: Vec<(usize, usize)> = by_id
        .values()
        .filter_map(|c| c.parent.map(|p| (p, c.id)))
        .collect();
    for (p, child) in links {
        if let Some(parent) = by_id.get_mut(&p) {
            parent.sub_communities.push(child);
        }
    }
    for c in by_id.values_mut() {
        c.nodes.sort_unstable();
        c.nodes.dedup();
        c.sub_communities.sort_unstable();
        let mut edges = std::collections::BTreeSet::new();
        let mut chunks = std::collections::BTreeSet::new();
        for &v in &c.nodes {
            if v < graph.node_count() {
                for &(u, _) in graph.neighbours(v) {
                    let u = u as usize;
                    edges.insert((v.min(u), v.max(u)));
                }
            }
            if let Some(s) = sources.get(v) {
                chunks.extend(s.iter().cloned());
            }
        }
        c.edges = edges.into_iter().collect();
        c.chunk_ids = chunks.into_iter().collect();
    }
    let max = by_id
        .values()
        .map(|c| c.chunk_ids.len())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    for c in by_id.values_mut() {
        c.occurrence = c.chunk_ids.len() as f64 / max;
    }
    by_id.into_values().collect()
}
