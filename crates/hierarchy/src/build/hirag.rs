//! HiRAG's HiIndex: soft-clustered layers summarised into attribute entities until the sparsity rule stops.

use super::*;

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
