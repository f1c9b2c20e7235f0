//! Both layer loops on hand-made inputs: LeanRAG's aggregated relations (λ counting, both rules) on a
//! two-layer example, HiRAG's layers and graph insertion, tiny and duplicate inputs, determinism.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kgrag_graph_store::{EdgeKind, KnowledgeGraph, NodeKind};
use kgrag_hierarchy::{
    build_hirag, build_leanrag, BaseEntity, BaseRelation, ExtractiveClusterSummarizer, HNodeKind,
    HiragConfig, LeanragConfig, LlmClusterSummarizer, NodeId, Reduction, RelationKind,
    RelationRule, StopReason,
};
use kgrag_text::{Encoding, ExtractiveSummarizer};
use kgrag_types::testing::{HashingEmbedder, ScriptedChatModel};
use kgrag_types::ChatRequest;

/// Asserts two hierarchies are equal, naming the first difference (their Debug output is huge).
fn same(a: &kgrag_hierarchy::Hierarchy, b: &kgrag_hierarchy::Hierarchy) {
    let (x, y) = (
        serde_json::to_string(a).unwrap(),
        serde_json::to_string(b).unwrap(),
    );
    if x != y {
        let at = x
            .bytes()
            .zip(y.bytes())
            .position(|(p, q)| p != q)
            .unwrap_or(x.len().min(y.len()));
        let lo = at.saturating_sub(300);
        panic!(
            "hierarchies differ at byte {at}:\n{}\n---\n{}",
            &x[lo..(at + 200).min(x.len())],
            &y[lo..(at + 200).min(y.len())]
        );
    }
}

/// The extractive text summariser over a hashing embedder of `dim` dimensions.
fn hashed_text(dim: usize, encoding: Encoding) -> Arc<ExtractiveSummarizer> {
    Arc::new(ExtractiveSummarizer::new(
        Arc::new(HashingEmbedder::new(dim)),
        encoding,
    ))
}

/// HiRAG's settings with PCA to two dimensions: the layer-loop tests below check the loop on groups that
/// PCA recovers exactly (the default UMAP splits each group of twenty into sub-clumps, which is what it
/// does, but not what these tests are about; `umap_keeps_the_groups_apart` covers it).
fn hirag_pca() -> HiragConfig {
    let mut c = HiragConfig::default();
    c.cluster.reduction = Reduction::Pca(2);
    c
}

/// LeanRAG's settings with PCA to two dimensions (see [`hirag_pca`]).
fn leanrag_pca() -> LeanragConfig {
    let mut c = LeanragConfig::default();
    c.cluster.reduction = Reduction::Pca(2);
    c
}

/// Entities per group.
const PER: usize = 20;

/// Index of item `j` of group `g` (0 = A).
fn idx(g: usize, j: usize) -> usize {
    g * PER + j
}

/// Five groups A–E of twenty entities each, on well-separated 2-D centres with a deterministic wobble
/// (embedded in 32 dimensions, the rest zero), so that BIC finds the five groups.
fn five_groups() -> Vec<BaseEntity> {
    let centres = [
        (0.0, 0.0),
        (30.0, 0.0),
        (0.0, 30.0),
        (30.0, 30.0),
        (15.0, 60.0),
    ];
    let mut state = 12345u64;
    let mut wobble = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) as f32 * 2.0
    };
    let mut out = Vec::new();
    for (g, (cx, cy)) in centres.iter().enumerate() {
        let letter = (b'A' + g as u8) as char;
        for j in 0..PER {
            let name = format!("{letter}{j}");
            let mut embedding = vec![0.0f32; 32];
            embedding[0] = cx + wobble();
            embedding[1] = cy + wobble();
            out.push(BaseEntity {
                key: format!("entity-{name}"),
                name: name.clone(),
                entity_type: "THING".into(),
                description: format!("{name} belongs to group {letter}. It is item {j}."),
                sources: vec![],
                embedding,
            });
        }
    }
    out
}

fn rel(a: usize, b: usize, text: &str) -> BaseRelation {
    BaseRelation {
        source: a,
        target: b,
        description: text.into(),
    }
}

/// A–B: 4 crossing relations (λ = 4), A–C: 3 (λ = 3, the τ boundary), B–C: 1, D–E: none; plus relations
/// inside groups (never crossing) and one duplicate pair in the other direction (merged, so λ(A–B) stays 4).
fn relations() -> Vec<BaseRelation> {
    let (a, b, c, d, e) = (0, 1, 2, 3, 4);
    vec![
        rel(idx(a, 0), idx(b, 0), "a0 meets b0"),
        rel(idx(a, 1), idx(b, 1), "a1 meets b1"),
        rel(idx(a, 2), idx(b, 2), "a2 meets b2"),
        rel(idx(a, 3), idx(b, 3), "a3 meets b3"),
        rel(idx(b, 0), idx(a, 0), "b0 also meets a0"),
        rel(idx(a, 0), idx(c, 0), "a0 sees c0"),
        rel(idx(a, 1), idx(c, 1), "a1 sees c1"),
        rel(idx(a, 2), idx(c, 2), "a2 sees c2"),
        rel(idx(b, 1), idx(c, 3), "b1 knows c3"),
        rel(idx(d, 0), idx(d, 1), "d0 inside d1"),
        rel(idx(e, 0), idx(e, 1), "e0 inside e1"),
    ]
}

/// A chat model answering aggregation requests with a name from the first table row and relation
/// requests with a fixed sentence.
fn scripted_leanrag_model() -> ScriptedChatModel {
    ScriptedChatModel::with_responder(|req: &ChatRequest| {
        let system = &req.messages[0].content;
        let user = &req.messages[1].content;
        if system.contains("entity aggregation analyst") {
            let first = user
                .lines()
                .nth(3)
                .and_then(|l| l.split(",\t").nth(1))
                .unwrap_or("\"?\"")
                .trim_matches('"')
                .to_owned();
            Ok(format!(
                "{{\"entity_name\": \"Group around {first}\", \"entity_description\": \"Everything near {first}.\", \
                 \"findings\": [{{\"summary\": \"{first} leads\", \"explanation\": \"It has the highest degree.\"}}]}}"
            ))
        } else {
            Ok("The two groups meet often.".into())
        }
    })
}

#[tokio::test]
async fn leanrag_aggregated_relations_lambda_and_both_rules() {
    let embedder = HashingEmbedder::new(32);
    let chat = Arc::new(scripted_leanrag_model());
    let text = hashed_text(32, Encoding::Cl100kBase);
    let summarizer =
        LlmClusterSummarizer::new(chat.clone(), ExtractiveClusterSummarizer::new(text));
    let config = leanrag_pca();
    let h = build_leanrag(five_groups(), relations(), &embedder, &summarizer, &config)
        .await
        .unwrap();

    // N0 = 100 → max_depth = round(log20 100) + 1 = 3. Layer 0: BIC picks 5 = ⌊100/20⌋ → five clusters of
    // twenty; layer 1 has five aggregates, which BIC cannot split into more than 4 clusters → stop; root.
    assert_eq!(h.log[0].k, 5);
    assert_eq!(h.log[0].clusters, 5);
    assert_eq!(h.layer_sizes(), vec![100, 5, 1]);
    assert_eq!(h.stop, Some(StopReason::TooFewClusters));
    let root = h.root.unwrap();
    assert_eq!(h.node(root).unwrap().kind, HNodeKind::Top);
    assert_eq!(h.node(root).unwrap().entity_type, "community");
    assert_eq!(h.node(root).unwrap().children.len(), 5);

    // Every base node has exactly one ancestor per level, ending at the root.
    for i in 0..100 {
        let chain = h.ancestors(NodeId::new(0, i));
        assert_eq!(chain.len(), 2);
        assert_eq!(chain[1], root);
    }
    // Aggregate of group A = the one whose children are A0..A3.
    let agg_of = |base: u32| h.ancestors(NodeId::new(0, base))[0];
    let (a, b, c, d, e) = (agg_of(0), agg_of(20), agg_of(40), agg_of(60), agg_of(80));
    let a_node = h.node(a).unwrap();
    assert_eq!(a_node.kind, HNodeKind::Aggregate);
    assert_eq!(a_node.entity_type, "aggregate entity");
    assert!(a_node.name.starts_with("Group around "));
    let between = |x: NodeId, y: NodeId| {
        h.relations
            .iter()
            .find(|r| (r.a == x && r.b == y) || (r.a == y && r.b == x))
    };
    let ab = between(a, b).unwrap();
    assert_eq!((ab.crossing, ab.kind, ab.level), (4, RelationKind::Llm, 1));
    assert_eq!(ab.description, "The two groups meet often.");
    let ac = between(a, c).unwrap();
    assert_eq!((ac.crossing, ac.kind), (3, RelationKind::Concat));
    assert_eq!(
        ac.description,
        "relationship<|>A0<|>C0<|>a0 sees c0\nrelationship<|>A1<|>C1<|>a1 sees c1\nrelationship<|>A2<|>C2<|>a2 sees c2"
    );
    let bc = between(b, c).unwrap();
    assert_eq!((bc.crossing, bc.kind), (1, RelationKind::Concat));
    assert!(between(d, e).is_none(), "no crossing relation, no edge");
    // The merged base pair: one relation with both descriptions.
    let base_ab = h
        .relations
        .iter()
        .find(|r| r.kind == RelationKind::Base && r.a.idx == 0 && r.b.idx == 20)
        .unwrap();
    assert_eq!(base_ab.description, "a0 meets b0 | b0 also meets a0");
    // One relate call (A–B), five aggregate calls (one per cluster) and one for the root.
    let relate_calls = chat
        .requests()
        .iter()
        .filter(|r| r.messages[0].content.contains("relationship analyst"))
        .count();
    assert_eq!(relate_calls, 1);
    assert_eq!(chat.calls(), 7);
    // The aggregation input of group A lists the relations inside it: none; of the root, the level-1
    // relations among the five aggregates.
    let root_request = chat.requests().into_iter().last().unwrap();
    assert!(root_request.messages[1]
        .content
        .contains("The two groups meet often."));

    // The length rule (shipped code): LLM when the concatenation exceeds 80 · (max_depth − layer) tokens.
    // Every crossing list here is far below 160 tokens → all concatenated; at 2 tokens per level → all LLM.
    let chat = Arc::new(scripted_leanrag_model());
    let text = hashed_text(32, Encoding::Cl100kBase);
    let summarizer = LlmClusterSummarizer::new(chat, ExtractiveClusterSummarizer::new(text));
    let mut length = LeanragConfig {
        relation_rule: RelationRule::LengthThreshold,
        ..leanrag_pca()
    };
    let h = build_leanrag(five_groups(), relations(), &embedder, &summarizer, &length)
        .await
        .unwrap();
    let kinds: Vec<RelationKind> = h
        .relations
        .iter()
        .filter(|r| r.level == 1)
        .map(|r| r.kind)
        .collect();
    assert_eq!(kinds, vec![RelationKind::Concat; 3]);
    length.length_per_level = 2;
    let h = build_leanrag(five_groups(), relations(), &embedder, &summarizer, &length)
        .await
        .unwrap();
    let mut kinds: Vec<(usize, RelationKind)> = h
        .relations
        .iter()
        .filter(|r| r.level == 1)
        .map(|r| (r.crossing, r.kind))
        .collect();
    kinds.sort_by_key(|k| k.0);
    assert_eq!(
        kinds,
        vec![
            (1, RelationKind::Llm),
            (3, RelationKind::Llm),
            (4, RelationKind::Llm)
        ]
    );
}

#[tokio::test]
async fn leanrag_graph_insertion_and_determinism() {
    let embedder = HashingEmbedder::new(32);
    let text = hashed_text(32, Encoding::Cl100kBase);
    let summarizer = ExtractiveClusterSummarizer::new(text);
    let h1 = build_leanrag(
        five_groups(),
        relations(),
        &embedder,
        &summarizer,
        &leanrag_pca(),
    )
    .await
    .unwrap();
    let h2 = build_leanrag(
        five_groups(),
        relations(),
        &embedder,
        &summarizer,
        &leanrag_pca(),
    )
    .await
    .unwrap();
    same(&h1, &h2);
    // Offline: the λ = 4 pair gets an extractive sentence.
    assert!(h1
        .relations
        .iter()
        .any(|r| r.kind == RelationKind::Extractive && r.crossing == 4));
    let mut g = KnowledgeGraph::new();
    for b in five_groups() {
        g.add_entity(&b.key, &b.name);
    }
    let links = h1.insert_into(&mut g).unwrap();
    assert_eq!(links.added, 6, "five aggregates and the root");
    assert_eq!(links.memberships, 100 + 5);
    assert_eq!(links.aggregates, 3);
    let counts = g.counts();
    assert_eq!(counts.nodes_of(NodeKind::Summary), 6);
    assert_eq!(counts.edges_of(EdgeKind::Membership), 105);
    assert_eq!(counts.edges_of(EdgeKind::Aggregate), 3);
    let root = links.get(h1.root.unwrap()).unwrap();
    assert_eq!(g.node(root).unwrap().layer, 2);
    // Base keys missing from the graph are an error naming the key.
    let err = h1
        .insert_into(&mut KnowledgeGraph::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("entity-A0"), "{err}");
}

#[tokio::test]
async fn umap_keeps_the_groups_apart() {
    // The default reduction, by cosine: no first-layer cluster of HiRAG mixes two of the groups B–E (at
    // distinct angles from the origin), and every entity is in a cluster. Group A sits at the origin, where
    // its wobble gives it every direction: cosine puts its members anywhere.
    let embedder = HashingEmbedder::new(32);
    let summarizer = ExtractiveClusterSummarizer::new(hashed_text(32, Encoding::O200kBase));
    let config = HiragConfig::default();
    assert_eq!(config.cluster.reduction, Reduction::Umap);
    let h = build_hirag(five_groups(), &relations(), &embedder, &summarizer, &config)
        .await
        .unwrap();
    assert!(h.log[0].umap_init.is_some());
    assert!(h.log[0].clusters >= 5, "{:?}", h.log[0]);
    for parent in &h.layers[1] {
        let groups: std::collections::BTreeSet<usize> = parent
            .children
            .iter()
            .filter(|c| c.layer == 0 && c.idx as usize >= PER)
            .map(|c| c.idx as usize / PER)
            .collect();
        assert!(groups.len() <= 1, "{} mixes groups {groups:?}", parent.name);
    }
    assert!(h.layers[0].iter().all(|n| !n.parents.is_empty()));
}

#[tokio::test]
async fn hirag_layers_stop_rule_and_graph_insertion() {
    let embedder = HashingEmbedder::new(32);
    let text = hashed_text(32, Encoding::O200kBase);
    let summarizer = ExtractiveClusterSummarizer::new(text);
    let config = hirag_pca();
    let h = build_hirag(five_groups(), &relations(), &embedder, &summarizer, &config)
        .await
        .unwrap();
    // Layer 0: five clusters of twenty (no posterior of another group passes 0.1 at this separation) →
    // sparsity 1 − 5·20·19/(100·99) = 0.8081, change from 0.01 large → summarise.
    let l0 = &h.log[0];
    assert_eq!((l0.n, l0.k, l0.clusters), (100, 5, 5));
    assert!((l0.sparsity - (1.0 - 1900.0 / 9900.0)).abs() < 1e-12);
    assert_eq!(h.layers[1].len(), 5);
    assert!(h.layers[1]
        .iter()
        .all(|n| n.kind == HNodeKind::Attribute && n.entity_type == "CLUSTER"));
    // Every base entity has one attribute parent and a member relation to it (weight 1).
    for n in &h.layers[0] {
        assert_eq!(n.parents.len(), 1, "{}", n.name);
        let p = n.parents[0];
        assert!(h
            .relations
            .iter()
            .any(|r| r.a == n.id && r.b == p && r.kind == RelationKind::Member));
    }
    // Group names by degree: A0, A1 and A2 have two relations each (A0's pair with B0 is merged), A3 one.
    let a = h.node(h.layers[0][0].parents[0]).unwrap();
    assert_eq!(a.name, "GROUP: A0 / A1 / A2");
    assert_eq!(a.children.len(), 20);
    assert!(!a.embedding.is_empty());
    // The loop logged every round and stopped for a reason.
    assert!(h.log.len() >= 2);
    assert!(matches!(
        h.stop,
        Some(StopReason::Sparse | StopReason::Stable | StopReason::TooFewNodes)
    ));
    // Same inputs, same hierarchy.
    let again = build_hirag(five_groups(), &relations(), &embedder, &summarizer, &config)
        .await
        .unwrap();
    same(&h, &again);
    // Into the graph: summary nodes with their layer, membership and relation facets.
    let mut g = KnowledgeGraph::new();
    for b in five_groups() {
        g.add_entity(&b.key, &b.name);
    }
    let links = h.insert_into(&mut g).unwrap();
    let node = g.node(links.get(a.id).unwrap()).unwrap();
    assert_eq!((node.kind, node.layer), (NodeKind::Summary, 1));
    assert_eq!(links.relations, h.relations.len());
    // HiRAG's graph holds the member relations only (spec hirag §3, §5.5): no membership edges.
    assert_eq!(g.counts().edges_of(EdgeKind::Membership), 0);
    assert_eq!(links.memberships, 0);
    assert_eq!(
        g.counts().edge_pairs,
        g.counts().edges_of(EdgeKind::Relation)
    );
}

#[tokio::test]
async fn hirag_llm_summaries_resolve_endpoints_and_merge_names() {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    // The model names the same attribute entity for every cluster (merged, first wins), relates each given
    // member, and once an entity that exists nowhere (an UNKNOWN node).
    let chat = Arc::new(ScriptedChatModel::with_responder(|req: &ChatRequest| {
        let prompt = &req.messages[0].content;
        let tail = prompt.rsplit("Entities: ").next().unwrap_or("");
        let names: Vec<String> = tail
            .split("), (")
            .map(|s| {
                s.trim_start_matches('(')
                    .split(',')
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        // The first reply relates EVERYTHING to LATER without defining it; the second defines LATER, which
        // must turn the UNKNOWN endpoint into an attribute entity.
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut out = String::from("(\"entity\"<|>EVERYTHING<|>organization<|>All items.)##\n");
        if call == 0 {
            out.push_str("(\"relationship\"<|>EVERYTHING<|>LATER<|>Defined later.<|>3)##\n");
        } else if call == 1 {
            out.push_str("(\"entity\"<|>LATER<|>event<|>What comes later.)##\n");
        }
        for n in &names {
            out.push_str(&format!(
                "(\"relationship\"<|>{n}<|>EVERYTHING<|>{n} is an item.<|>7)##\n"
            ));
        }
        out.push_str(
            "(\"relationship\"<|>EVERYTHING<|>MYSTERY<|>Nobody knows.<|>2)##\n<|COMPLETE|>",
        );
        Ok(out)
    }));
    let text = hashed_text(32, Encoding::O200kBase);
    let summarizer =
        LlmClusterSummarizer::new(chat.clone(), ExtractiveClusterSummarizer::new(text));
    let embedder = HashingEmbedder::new(32);
    let h = build_hirag(
        five_groups(),
        &relations(),
        &embedder,
        &summarizer,
        &hirag_pca(),
    )
    .await
    .unwrap();
    assert_eq!(chat.calls(), 5);
    let l1 = &h.layers[1];
    let kinds: Vec<(&str, HNodeKind)> = l1.iter().map(|n| (n.name.as_str(), n.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("EVERYTHING", HNodeKind::Attribute),
            ("LATER", HNodeKind::Attribute),
            ("MYSTERY", HNodeKind::Unknown)
        ]
    );
    assert_eq!(l1[0].children.len(), 100);
    assert_eq!(
        (l1[1].entity_type.as_str(), l1[1].description.as_str()),
        ("EVENT", "What comes later.")
    );
    assert!(
        !l1[1].embedding.is_empty(),
        "the upgraded entity is embedded and clustered"
    );
    assert_eq!(l1[2].entity_type, "UNKNOWN");
    // 100 member relations (strength 7); EVERYTHING–MYSTERY comes once per cluster reply (records are
    // de-duplicated per reply, as in the reference) and merges into one edge in the graph.
    let members = h.relations.iter().filter(|r| r.weight == 7.0).count();
    assert_eq!(members, 100);
    // Two attribute entities on layer 1 (the UNKNOWN endpoint is not clustered) → ≤ 2 entities → stop.
    assert_eq!(h.stop, Some(StopReason::TooFewNodes));
    assert_eq!(h.layers.len(), 2);
    assert!(chat.requests().iter().all(|r| r.messages[0]
        .content
        .contains("Meta attributes: [organization, person")));
    // The graph Leiden and the bridge path see: exactly the relations the summariser wrote — every member
    // to EVERYTHING (weight 7), EVERYTHING to LATER (3) and to MYSTERY (2 from each of the five replies,
    // merged by summing) — and no membership edge.
    let mut g = KnowledgeGraph::new();
    for b in five_groups() {
        g.add_entity(&b.key, &b.name);
    }
    let links = h.insert_into(&mut g).unwrap();
    assert_eq!(links.memberships, 0);
    let mut edges: Vec<(String, String, f64)> = g
        .edges()
        .map(|(_, a, b, e)| {
            assert!(!e.has(EdgeKind::Membership));
            let (a, b) = (&g.node(a).unwrap().name, &g.node(b).unwrap().name);
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            (a.clone(), b.clone(), e.relation.as_ref().unwrap().weight)
        })
        .collect();
    edges.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    let mut expected: Vec<(String, String, f64)> = five_groups()
        .iter()
        .map(|b| {
            let (a, c) = if b.name.as_str() <= "EVERYTHING" {
                (b.name.clone(), "EVERYTHING".to_owned())
            } else {
                ("EVERYTHING".to_owned(), b.name.clone())
            };
            (a, c, 7.0)
        })
        .chain([
            ("EVERYTHING".to_owned(), "LATER".to_owned(), 3.0),
            ("EVERYTHING".to_owned(), "MYSTERY".to_owned(), 10.0),
        ])
        .collect();
    expected.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    assert_eq!(edges, expected);
}

#[tokio::test]
async fn tiny_and_duplicate_inputs() {
    let embedder = HashingEmbedder::new(16);
    let text = hashed_text(16, Encoding::O200kBase);
    let summarizer = ExtractiveClusterSummarizer::new(text);
    let entity = |i: usize, v: Vec<f32>| BaseEntity {
        key: format!("k{i}"),
        name: format!("N{i}"),
        entity_type: String::new(),
        description: format!("Entity number {i}."),
        sources: vec![],
        embedding: v,
    };
    let vector = |x: f32, y: f32| {
        let mut v = vec![0.0f32; 16];
        v[0] = x;
        v[1] = y;
        v
    };
    for n in 0..=3usize {
        let base: Vec<BaseEntity> = (0..n).map(|i| entity(i, vector(i as f32, 1.0))).collect();
        let h = build_hirag(
            base.clone(),
            &[],
            &embedder,
            &summarizer,
            &HiragConfig::default(),
        )
        .await
        .unwrap();
        assert_eq!(h.layers[0].len(), n);
        if n <= 2 {
            assert_eq!((h.layers.len(), h.stop), (1, Some(StopReason::TooFewNodes)));
        }
        let l = build_leanrag(
            base,
            Vec::new(),
            &embedder,
            &summarizer,
            &LeanragConfig::default(),
        )
        .await
        .unwrap();
        assert_eq!(l.layers[0].len(), n);
        match n {
            0 => assert_eq!(l.root, None),
            1 => assert_eq!(l.root, Some(NodeId::new(0, 0))),
            _ => {
                let root = l.node(l.root.unwrap()).unwrap();
                assert_eq!((root.kind, root.children.len()), (HNodeKind::Top, n));
            }
        }
    }
    // Identical embeddings: nobody is dropped; HiRAG puts all in one cluster (sparsity 0), summarises it and
    // stops at one entity; LeanRAG stops (one cluster ≤ 4) and roots all of them.
    let base: Vec<BaseEntity> = (0..6).map(|i| entity(i, vector(0.25, 0.5))).collect();
    let h = build_hirag(
        base.clone(),
        &[],
        &embedder,
        &summarizer,
        &HiragConfig::default(),
    )
    .await
    .unwrap();
    assert_eq!(h.log[0].clusters, 1);
    assert_eq!(h.log[0].sparsity, 0.0);
    assert_eq!(h.layers[1].len(), 1);
    assert_eq!(h.layers[1][0].children.len(), 6);
    let l = build_leanrag(
        base,
        Vec::new(),
        &embedder,
        &summarizer,
        &LeanragConfig::default(),
    )
    .await
    .unwrap();
    assert_eq!(l.stop, Some(StopReason::TooFewClusters));
    assert_eq!(l.node(l.root.unwrap()).unwrap().children.len(), 6);
    // Bad input is an error naming what is wrong.
    let bad = vec![entity(0, vector(1.0, 0.0)), entity(1, vec![1.0])];
    let err = build_hirag(bad, &[], &embedder, &summarizer, &HiragConfig::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("base entity 1"), "{err}");
    let err = build_leanrag(
        vec![entity(0, vector(1.0, 0.0))],
        vec![rel(0, 3, "x")],
        &embedder,
        &summarizer,
        &LeanragConfig::default(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("base relation 0"), "{err}");
}
