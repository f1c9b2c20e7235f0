//! Lowest-common-ancestor paths and context assembly on a hand-built three-level tree:
//!
//! ```text
//! layer 3:                 R (root)
//! layer 2:         X                 Y
//! layer 1:      A     B          C'     D        C' = promoted copy of c0
//! layer 0:    a0 a1  b0 b1       c0    d0 d1
//! ```

use kgrag_hierarchy::{HNode, HNodeKind, HRelation, Hierarchy, Method, NodeId, RelationKind};
use kgrag_leanrag::{lca_path, LeanragConfig, LeanragIndex, LeanragRetriever, SeedLayers};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::ChunkId;
use std::sync::Arc;

fn id(layer: u32, idx: u32) -> NodeId {
    NodeId::new(layer, idx)
}

fn chunk(n: u32) -> ChunkId {
    ChunkId::from_content(&format!("chunk {n}"))
}

/// Names by id, for readable assertions.
fn names(h: &Hierarchy, path: &[NodeId]) -> Vec<String> {
    path.iter()
        .map(|&n| h.node(n).unwrap().name.clone())
        .collect()
}

fn node(id: NodeId, kind: HNodeKind, name: &str, embedding: [f32; 2]) -> HNode {
    let mut n = HNode::new(
        id,
        kind,
        name.into(),
        "thing".into(),
        format!("{name} desc"),
    );
    n.embedding = embedding.to_vec();
    n
}

fn relation(a: NodeId, b: NodeId, level: u32, description: &str, kind: RelationKind) -> HRelation {
    HRelation {
        a,
        b,
        level,
        description: description.into(),
        weight: 1.0,
        kind,
        crossing: 0,
    }
}

pub fn tree() -> Hierarchy {
    let l0 = vec![
        node(id(0, 0), HNodeKind::Base, "a0", [1.0, 0.0]),
        node(id(0, 1), HNodeKind::Base, "a1", [0.9, 0.1]),
        node(id(0, 2), HNodeKind::Base, "b0", [0.8, 0.2]),
        node(id(0, 3), HNodeKind::Base, "b1", [0.0, 1.0]),
        node(id(0, 4), HNodeKind::Base, "c0", [0.5, 0.5]),
        node(id(0, 5), HNodeKind::Base, "d0", [0.1, 0.9]),
        node(id(0, 6), HNodeKind::Base, "d1", [0.2, 0.8]),
    ];
    let mut copy = node(id(1, 2), HNodeKind::Promoted, "c0", [0.5, 0.5]);
    copy.origin = id(0, 4);
    let l1 = vec![
        node(id(1, 0), HNodeKind::Aggregate, "A", [0.95, 0.05]),
        node(id(1, 1), HNodeKind::Aggregate, "B", [0.4, 0.6]),
        copy,
        node(id(1, 3), HNodeKind::Aggregate, "D", [0.15, 0.85]),
    ];
    let l2 = vec![
        node(id(2, 0), HNodeKind::Aggregate, "X", [0.7, 0.3]),
        node(id(2, 1), HNodeKind::Aggregate, "Y", [0.3, 0.7]),
    ];
    let l3 = vec![node(id(3, 0), HNodeKind::Top, "R", [0.5, 0.5])];
    let mut layers = vec![l0, l1, l2, l3];
    let links = [
        (id(0, 0), id(1, 0)),
        (id(0, 1), id(1, 0)),
        (id(0, 2), id(1, 1)),
        (id(0, 3), id(1, 1)),
        (id(0, 4), id(1, 2)),
        (id(0, 5), id(1, 3)),
        (id(0, 6), id(1, 3)),
        (id(1, 0), id(2, 0)),
        (id(1, 1), id(2, 0)),
        (id(1, 2), id(2, 1)),
        (id(1, 3), id(2, 1)),
        (id(2, 0), id(3, 0)),
        (id(2, 1), id(3, 0)),
    ];
    for (child, parent) in links {
        layers[child.layer as usize][child.idx as usize]
            .parents
            .push(parent);
        layers[parent.layer as usize][parent.idx as usize]
            .children
            .push(child);
    }
    // Sources: a0 [1, 2], b0 [2, 3], a1 [3, 4, 1, 2].
    layers[0][0].sources = vec![chunk(1), chunk(2)];
    layers[0][2].sources = vec![chunk(2), chunk(3)];
    layers[0][1].sources = vec![chunk(3), chunk(4), chunk(1), chunk(2)];
    Hierarchy {
        method: Method::Leanrag,
        layers,
        relations: vec![
            relation(id(0, 0), id(0, 1), 0, "a0 knows a1", RelationKind::Base),
            relation(
                id(0, 1),
                id(0, 2),
                0,
                "a1 trades with b0",
                RelationKind::Base,
            ),
            relation(
                id(1, 0),
                id(1, 1),
                2,
                "A and B cooperate",
                RelationKind::Concat,
            ),
            relation(id(2, 0), id(2, 1), 3, "X opposes Y", RelationKind::Llm),
        ],
        log: vec![],
        stop: None,
        root: Some(id(3, 0)),
    }
}

#[test]
fn lockstep_lca_paths() {
    let h = tree();
    let p = |a, b| names(&h, &lca_path(&h, a, b));
    // One cluster: up to A and down.
    assert_eq!(p(id(0, 0), id(0, 1)), ["a0", "A", "a1"]);
    // Sibling clusters: the LCA is X.
    assert_eq!(p(id(0, 0), id(0, 2)), ["a0", "A", "X", "B", "b0"]);
    // Different top-level branches: the LCA is the root.
    assert_eq!(p(id(0, 0), id(0, 5)), ["a0", "A", "X", "R", "Y", "D", "d0"]);
    // A promoted copy is its own node on the chain (c0 → C' → Y).
    assert_eq!(p(id(0, 4), id(0, 5)), ["c0", "c0", "Y", "D", "d0"]);
    // A seed that is an ancestor of the other: A and a0 cross at once.
    assert_eq!(p(id(1, 0), id(0, 0)), ["A", "a0"]);
    // Chains crossing at different depths (aggregate seed A, base seed b0): stop where X reappears.
    assert_eq!(p(id(1, 0), id(0, 2)), ["A", "X", "B", "b0"]);
    // The same node twice.
    assert_eq!(p(id(0, 3), id(0, 3)), ["b1"]);
}

fn retriever(config: &LeanragConfig) -> LeanragRetriever {
    let chunks = (1..=4)
        .map(|n| (chunk(n), format!("chunk text {n}")))
        .collect();
    let index = LeanragIndex::from_hierarchy(tree(), chunks, config).unwrap();
    LeanragRetriever::new(Arc::new(index), Arc::new(HashingEmbedder::new(2)))
}

#[test]
fn context_assembly_is_exact() {
    let config = LeanragConfig {
        top_c: 2,
        ..LeanragConfig::default()
    };
    let r = retriever(&config);
    let seeds = [(id(0, 0), 0.9), (id(0, 2), 0.8), (id(0, 1), 0.7)];
    let ctx = r.context_for_seeds(&seeds, 20);
    // Pairs (a0, b0): path a0 A X B b0 → A–B. (a0, a1): a0 A a1 → a0–a1. (b0, a1): b0 B X A a1 → a1–b0
    // (A–B already taken). Aggregates in first appearance: A, X, B.
    // Chunks: a0 [1, 2] + b0 [2, 3] + a1 [3, 4, 1, 2] → counts 1:2, 2:3, 3:2, 4:1 → 2, then 1 and 3 (first
    // seen), then 4; the context keeps the first two.
    // Laid out as the reference's `describe` f-string: a newline, four-space indents on the headers and the
    // line after each, every text unit followed by a newline, four spaces at the end.
    let expected = "\n    entity_information:\n    \
        entity_name\t\tparent\t\tdescription\n\
        a0\t\tA\t\ta0 desc\n\
        b0\t\tB\t\tb0 desc\n\
        a1\t\tA\t\ta1 desc\n    \
        aggregation_entity_information:\n    \
        entity_name\t\tentity_description\n\
        A\t\tA desc\n\
        X\t\tX desc\n\
        B\t\tB desc\n    \
        reasoning_path_information:\n    \
        A and B cooperate\n\
        a0 knows a1\n\
        a1 trades with b0\n    \
        text_units:\n    \
        chunk text 2\n\
        chunk text 1\n\n    ";
    assert_eq!(ctx.rendered, expected);
    assert_eq!(
        ctx.context_tokens,
        kgrag_text::Encoding::Cl100kBase.count(expected).unwrap()
    );
    let order: Vec<ChunkId> = ctx.passages.iter().map(|p| p.chunk_id.clone()).collect();
    assert_eq!(order, vec![chunk(2), chunk(1), chunk(3), chunk(4)]);
    assert_eq!(ctx.paths.len(), 3);
    let rels: Vec<&str> = ctx
        .relations
        .iter()
        .map(|r| r.description.as_str())
        .collect();
    assert_eq!(
        rels,
        ["A and B cooperate", "a0 knows a1", "a1 trades with b0"]
    );

    // One seed: no path, no relation, no aggregate; its parent and chunks still shown.
    let one = r.context_for_seeds(&[(id(0, 5), 0.5)], 20);
    assert!(one.paths.is_empty() && one.relations.is_empty());
    assert!(one.rendered.contains(
        "d0\t\tD\t\td0 desc\n    aggregation_entity_information:\n    entity_name\t\tentity_description\n\
         \n    reasoning_path_information:\n    \n    text_units:\n    "
    ));
    // The root's parent is shown as `root`; findings appear when asked for.
    let with = retriever(&LeanragConfig {
        include_findings: true,
        ..LeanragConfig::default()
    });
    let top = with.context_for_seeds(&[(id(3, 0), 0.5), (id(0, 0), 0.4)], 20);
    // The summed token counts equal full counts (one seed; findings; no chunk at all).
    let cl = |t: &str| kgrag_text::Encoding::Cl100kBase.count(t).unwrap();
    assert_eq!(one.context_tokens, cl(&one.rendered));
    assert_eq!(top.context_tokens, cl(&top.rendered));
    let bare = r.context_for_seeds(&[(id(0, 3), 0.5), (id(0, 6), 0.4)], 20);
    assert!(bare.rendered.ends_with("text_units:\n    \n    "));
    assert_eq!(bare.context_tokens, cl(&bare.rendered));
    assert!(
        top.rendered.contains("R\t\troot\t\tR desc"),
        "{}",
        top.rendered
    );
    assert!(top
        .rendered
        .contains("entity_name\t\tentity_description\t\tfindings"));
}

#[test]
fn aggregate_seeds_keep_the_best_node_per_origin() {
    let config = LeanragConfig {
        seed_layers: SeedLayers::Aggregate,
        top_n: 3,
        ..LeanragConfig::default()
    };
    let r = retriever(&config);
    // Query (0.5, 0.5): the copy of c0 and R both score 1.0 (ties: the later node first, as the
    // reference's vector store returns the row inserted later: R, the root, then the copy on layer 1),
    // then B (0.981), X and Y (0.928). Base nodes are not seeds.
    let seeds = r.seeds(&[0.5, 0.5]).unwrap();
    let h = r.index().hierarchy();
    let got: Vec<String> = seeds
        .iter()
        .map(|s| h.node(s.0).unwrap().name.clone())
        .collect();
    assert_eq!(got, ["R", "c0", "B"]);
    assert_eq!(seeds[1].0, id(1, 2));
    // A second copy of c0 one level up (same origin) is not a second seed.
    let mut t = tree();
    let mut again = t.layers[1][2].clone();
    again.id = id(2, 2);
    again.kind = HNodeKind::Promoted;
    again.embedding = vec![0.5, 0.49];
    t.layers[2].push(again);
    let index = LeanragIndex::from_hierarchy(t, vec![], &config).unwrap();
    let r2 = LeanragRetriever::new(Arc::new(index), Arc::new(HashingEmbedder::new(2)));
    let seeds = r2.seeds(&[0.5, 0.5]).unwrap();
    let h = r2.index().hierarchy();
    let origins: Vec<NodeId> = seeds.iter().map(|s| h.node(s.0).unwrap().origin).collect();
    assert_eq!(origins.len(), 3);
    assert_eq!(origins.iter().filter(|&&o| o == id(0, 4)).count(), 1);
    // Base seeds: only layer 0.
    let base = retriever(&LeanragConfig::default());
    assert!(base
        .seeds(&[1.0, 0.0])
        .unwrap()
        .iter()
        .all(|s| s.0.layer == 0));
}
