//! LeanRAG's aggregation: hard-clustered layers, aggregate entities and the relations between them, up to the root.

use super::*;

/// Stored relations of a LeanRAG build with an adjacency index by origin.
pub(super) struct RelationStore {
    pub(super) relations: Vec<HRelation>,
    pub(super) by_origin: HashMap<NodeId, Vec<usize>>,
    pub(super) pair: HashMap<(NodeId, NodeId), usize>,
}

impl RelationStore {
    pub(super) fn new() -> Self {
        Self {
            relations: Vec::new(),
            by_origin: HashMap::new(),
            pair: HashMap::new(),
        }
    }

    /// Adds a relation, merging with the existing one of the same unordered pair (descriptions joined by
    /// ` | `).
    pub(super) fn add(&mut self, r: HRelation) {
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

    pub(super) fn degree(&self, origin: NodeId) -> usize {
        self.by_origin.get(&origin).map_or(0, Vec::len)
    }

    /// Relations with both endpoints among `origins`, in creation order.
    pub(super) fn within(&self, origins: &HashSet<NodeId>) -> Vec<usize> {
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
pub(super) fn plain_descriptions(r: &HRelation) -> Vec<String> {
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

pub(super) fn origin_name(h: &Hierarchy, id: NodeId) -> String {
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
    relations: Vec<BaseRelation>,
    embedder: &dyn Embedder,
    summarizer: &dyn ClusterSummarizer,
    config: &LeanragConfig,
) -> Result<Hierarchy> {
    validate_base(&base, &relations, embedder)?;
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
            description: r.description,
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
        // Each pair's lines and request are made when it is due (at most `concurrency` at once): in the
        // first layer nearly every relation crosses, and a request holds its relations' texts twice.
        let (hr, sr) = (&h, &store);
        let written: Vec<Result<HRelation>> = stream::iter(crossing)
            .map(|((ca, cb), rels)| async move {
                let lines: Vec<String> = rels
                    .iter()
                    .map(|&i| {
                        let r = &sr.relations[i];
                        format!(
                            "relationship<|>{}<|>{}<|>{}",
                            origin_name(hr, r.a),
                            origin_name(hr, r.b),
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
                let a = &hr.layers[next_layer as usize][ca];
                let b = &hr.layers[next_layer as usize][cb];
                let (description, kind) = if use_llm {
                    let req = RelateRequest {
                        layer,
                        a: (a.name.clone(), a.findings.clone()),
                        b: (b.name.clone(), b.findings.clone()),
                        lines,
                        descriptions: rels
                            .iter()
                            .flat_map(|&i| plain_descriptions(&sr.relations[i]))
                            .collect(),
                        word_limit,
                    };
                    let s = summarizer.relate(&req).await?;
                    let kind = match s.outcome {
                        Outcome::Llm | Outcome::Retried => RelationKind::Llm,
                        Outcome::Fallback | Outcome::Extractive => RelationKind::Extractive,
                    };
                    (s.text, kind)
                } else {
                    (lines, RelationKind::Concat)
                };
                Ok(HRelation {
                    a: a.id,
                    b: b.id,
                    level: next_layer,
                    description,
                    weight: 1.0,
                    kind,
                    crossing: rels.len(),
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
