//! Hierarchical Leiden and offline community reports on the MuSiQue entity graph: the phrases of the
//! dataset's GPT-3.5 OpenIE (1,890 passages), indexed in name order, linked by their triples (weight = the
//! number of triples joining the pair). HiRAG's settings (max cluster size 10, seed 0xDEADBEEF, largest
//! component only) and every component; the hierarchy's invariants are checked on real data, then every
//! community of the reference hierarchy gets an extractive report, and a rebuild reuses all of them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kgrag_community::report::{
    generate_reports, CommunityInput, Outcome, Report, ReportEntity, ReportRelation,
    REPORT_CONTEXT_TOKENS,
};
use kgrag_community::{
    community_schema, hierarchical_leiden, CommunityHierarchy, Graph, HierarchicalConfig,
};
use kgrag_openie::read_openie_file;
use kgrag_text::{Encoding, ExtractiveSummarizer};
use kgrag_types::testing::{data_file, HashingEmbedder};
use kgrag_types::Normalisation;

struct EntityGraph {
    names: Vec<String>,
    /// First triple mentioning each phrase, as a sentence.
    descriptions: Vec<String>,
    sources: Vec<Vec<String>>,
    edges: Vec<(usize, usize, f64)>,
    /// One description per unordered pair (its first triple).
    pair_text: HashMap<(usize, usize), String>,
}

fn entity_graph() -> Option<EntityGraph> {
    let docs = read_openie_file(&data_file(
        "musique-hipporag/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json",
    )?)
    .unwrap();
    let mut triples = Vec::new();
    for d in &docs {
        for t in &d.extraction.triples {
            let t = t.normalised(Normalisation::Ascii);
            if !t.subject().is_empty() && !t.object().is_empty() {
                triples.push((d.extraction.chunk_id.clone(), t));
            }
        }
    }
    let names: Vec<String> = triples
        .iter()
        .flat_map(|(_, t)| [t.subject().to_owned(), t.object().to_owned()])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut descriptions = vec![String::new(); names.len()];
    let mut sources: Vec<BTreeSet<String>> = vec![BTreeSet::new(); names.len()];
    let mut edges = Vec::new();
    let mut pair_text = HashMap::new();
    for (chunk, t) in &triples {
        let (a, b) = (index[t.subject()], index[t.object()]);
        let sentence = format!("{} {} {}.", t.subject(), t.predicate(), t.object());
        for v in [a, b] {
            if descriptions[v].is_empty() {
                descriptions[v] = sentence.clone();
            }
            sources[v].insert(chunk.to_string());
        }
        if a != b {
            edges.push((a, b, 1.0));
            pair_text
                .entry((a.min(b), a.max(b)))
                .or_insert_with(|| sentence.clone());
        }
    }
    Some(EntityGraph {
        names,
        descriptions,
        sources: sources
            .into_iter()
            .map(|s| s.into_iter().collect())
            .collect(),
        edges,
        pair_text,
    })
}

/// Connected components of `g` with at least one edge, each sorted, in order of their smallest node.
fn components(g: &Graph) -> Vec<Vec<usize>> {
    let mut seen = vec![false; g.node_count()];
    let mut out = Vec::new();
    for s in 0..g.node_count() {
        if seen[s] || g.neighbours(s).is_empty() {
            continue;
        }
        seen[s] = true;
        let mut comp = vec![s];
        let mut stack = vec![s];
        while let Some(v) = stack.pop() {
            for &(u, _) in g.neighbours(v) {
                if !seen[u as usize] {
                    seen[u as usize] = true;
                    comp.push(u as usize);
                    stack.push(u as usize);
                }
            }
        }
        comp.sort_unstable();
        out.push(comp);
    }
    out
}

/// Checks the hierarchy's invariants: level 0 covers exactly `considered`, each level covers a node at
/// most once with connected clusters numbered by smallest member, final clusters are small or unsplittable.
fn check(g: &Graph, h: &CommunityHierarchy, considered: &BTreeSet<usize>, max: usize) {
    let mut last_id: Option<usize> = None;
    for level in 0..h.levels {
        let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for r in h.records.iter().filter(|r| r.level == level) {
            assert!(
                seen.insert(r.node),
                "node {} twice on level {level}",
                r.node
            );
            assert!(considered.contains(&r.node));
            members.entry(r.cluster).or_default().push(r.node);
        }
        if level == 0 {
            assert_eq!(
                &seen, considered,
                "level 0 covers exactly the nodes to cluster"
            );
        }
        // Ids run on from the previous level, in ascending order of the smallest member.
        let ids: Vec<usize> = members.keys().copied().collect();
        assert_eq!(ids[0], last_id.map_or(0, |l| l + 1), "level {level}");
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1));
        let firsts: Vec<usize> = members.values().map(|m| m[0]).collect();
        assert!(firsts.windows(2).all(|w| w[0] < w[1]), "level {level}");
        last_id = ids.last().copied();
        // Every cluster is connected.
        for (id, nodes) in &members {
            let set: BTreeSet<usize> = nodes.iter().copied().collect();
            let mut reached = BTreeSet::from([nodes[0]]);
            let mut stack = vec![nodes[0]];
            while let Some(v) = stack.pop() {
                for &(u, _) in g.neighbours(v) {
                    let u = u as usize;
                    if set.contains(&u) && reached.insert(u) {
                        stack.push(u);
                    }
                }
            }
            assert_eq!(reached.len(), nodes.len(), "cluster {id} is disconnected");
        }
    }
    // Each node ends in one final cluster, smaller than `max` unless Leiden could not split it.
    let mut finals: BTreeMap<usize, usize> = BTreeMap::new();
    for r in h.records.iter().filter(|r| r.is_final) {
        *finals.entry(r.cluster).or_default() += 1;
    }
    assert_eq!(finals.values().sum::<usize>(), considered.len());
    for (c, size) in &finals {
        assert!(
            *size < max || h.unsplittable.contains(c),
            "final cluster {c} has {size} nodes"
        );
    }
}

#[tokio::test]
async fn musique_hierarchy_and_offline_reports() {
    let Some(eg) = entity_graph() else {
        return;
    };
    let g = Graph::from_edges(eg.names.len(), &eg.edges).unwrap();
    let reference = HierarchicalConfig::default();
    let every = HierarchicalConfig {
        largest_component_only: false,
        ..reference
    };
    let comps = components(&g);
    // The largest component; ties: the one holding the smallest node (components come in that order).
    let mut largest: &Vec<usize> = &comps[0];
    for c in &comps {
        if c.len() > largest.len() {
            largest = c;
        }
    }
    let lcc_nodes: BTreeSet<usize> = largest.iter().copied().collect();
    let all_nodes: BTreeSet<usize> = comps.iter().flatten().copied().collect();
    let t = std::time::Instant::now();
    let h = hierarchical_leiden(&g, &reference).unwrap();
    let all = hierarchical_leiden(&g, &every).unwrap();
    let secs = t.elapsed().as_secs_f64();
    check(&g, &h, &lcc_nodes, reference.max_cluster_size);
    check(&g, &all, &all_nodes, every.max_cluster_size);
    let (lcc, clustered) = (lcc_nodes.len(), all_nodes.len());
    eprintln!(
        "{} phrases, {} triple edges; largest component {lcc} nodes, {} levels, {} records, {} unsplittable; \
         every component: {clustered} nodes, {} levels ({:.2} s for both)",
        eg.names.len(),
        eg.edges.len(),
        h.levels,
        h.records.len(),
        h.unsplittable.len(),
        all.levels,
        secs
    );
    assert!(lcc > eg.names.len() / 2 && clustered > lcc);
    assert_eq!(h, hierarchical_leiden(&g, &reference).unwrap());

    // The schema, then one extractive report per community of the reference hierarchy.
    let schema = community_schema(&g, &h, &eg.sources);
    let by_id: HashMap<usize, &kgrag_community::Community> =
        schema.iter().map(|c| (c.id, c)).collect();
    for c in &schema {
        for s in &c.sub_communities {
            assert_eq!(by_id[s].level, c.level + 1);
            assert!(by_id[s]
                .nodes
                .iter()
                .all(|v| c.nodes.binary_search(v).is_ok()));
        }
        // Split clusters are exactly the union of their sub-communities.
        if !c.sub_communities.is_empty() {
            let mut union: Vec<usize> = c
                .sub_communities
                .iter()
                .flat_map(|s| by_id[s].nodes.iter().copied())
                .collect();
            union.sort_unstable();
            assert_eq!(union, c.nodes, "community {}", c.id);
        }
    }
    let degree: Vec<usize> = (0..eg.names.len()).map(|v| g.neighbours(v).len()).collect();
    let inputs: Vec<CommunityInput> = schema
        .iter()
        .map(|c| CommunityInput {
            id: c.id,
            level: c.level,
            entities: c
                .nodes
                .iter()
                .map(|&v| ReportEntity {
                    name: eg.names[v].as_str().into(),
                    entity_type: "ENTITY".into(),
                    description: eg.descriptions[v].as_str().into(),
                    degree: degree[v],
                })
                .collect(),
            relations: c
                .edges
                .iter()
                .map(|&(a, b)| ReportRelation {
                    source: eg.names[a].as_str().into(),
                    target: eg.names[b].as_str().into(),
                    description: eg
                        .pair_text
                        .get(&(a, b))
                        .map_or_else(Default::default, |t| t.as_str().into()),
                    rank: degree[a] + degree[b],
                })
                .collect(),
            sub_communities: c.sub_communities.clone(),
            occurrence: c.occurrence,
        })
        .collect();
    let text = ExtractiveSummarizer::new(Arc::new(HashingEmbedder::new(64)), Encoding::O200kBase);
    let t = std::time::Instant::now();
    let reports = generate_reports(
        &inputs,
        None,
        &text,
        &HashMap::new(),
        REPORT_CONTEXT_TOKENS,
        4,
    )
    .await
    .unwrap();
    eprintln!(
        "{} extractive reports in {:.2} s",
        reports.len(),
        t.elapsed().as_secs_f64()
    );
    assert_eq!(reports.len(), schema.len());
    for c in &inputs {
        let r = &reports[&c.id];
        assert_eq!(r.outcome, Outcome::Extractive);
        assert!(r.title.starts_with(&format!("Community {}: ", c.id)));
        assert!(!r.summary.is_empty() && !r.findings.is_empty() && r.findings.len() <= 5);
        assert_eq!(r.input_hash.len(), 64);
    }
    // A rebuild with unchanged inputs reuses every report.
    let previous: HashMap<String, Report> = reports
        .values()
        .map(|r| (r.input_hash.clone(), r.clone()))
        .collect();
    let again = generate_reports(&inputs, None, &text, &previous, REPORT_CONTEXT_TOKENS, 4)
        .await
        .unwrap();
    assert!(again.values().all(|r| r.reused));
    assert_eq!(
        again.values().map(|r| &r.input_hash).collect::<Vec<_>>(),
        reports.values().map(|r| &r.input_hash).collect::<Vec<_>>()
    );

    // One member of a deepest community changes: that community is written again; every community
    // that does not contain the member is reused.
    let leaf = schema
        .iter()
        .filter(|c| c.sub_communities.is_empty())
        .max_by_key(|c| (c.level, c.nodes.len()))
        .unwrap();
    let member = leaf.nodes[0];
    let mut changed = inputs.clone();
    for c in &mut changed {
        for e in &mut c.entities {
            if e.name == eg.names[member] {
                e.description.to_mut().push_str(" It was renamed in 2024.");
            }
        }
    }
    let third = generate_reports(&changed, None, &text, &previous, REPORT_CONTEXT_TOKENS, 4)
        .await
        .unwrap();
    assert!(!third[&leaf.id].reused);
    for c in &schema {
        if c.nodes.binary_search(&member).is_err() {
            assert!(third[&c.id].reused, "community {} was written again", c.id);
        }
    }

    // A small budget on the largest level-0 community: its sub-reports replace the raw tables.
    let big = schema
        .iter()
        .filter(|c| c.level == 0 && !c.sub_communities.is_empty())
        .max_by_key(|c| c.nodes.len())
        .unwrap();
    let inputs_by_id: HashMap<usize, &CommunityInput> = inputs.iter().map(|c| (c.id, c)).collect();
    let context = kgrag_community::report::pack_context(
        inputs_by_id[&big.id],
        &inputs_by_id,
        &reports.clone().into_iter().collect(),
        400,
    );
    assert!(context.starts_with("-----Reports-----"), "{context}");
}
