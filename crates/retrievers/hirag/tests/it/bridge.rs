//! The bridge path (spec §7.2 steps 5–6) on a hand-built graph: a community A–B–C–D, a second component
//! E–F–G and an isolated H, so that the walk meets ties, a direct step and two gaps with no path.

use kgrag_hirag::{BridgeEdges, BridgePath, HiEdge, HiGraph, HiNode};

fn node(name: &str) -> HiNode {
    HiNode {
        name: name.into(),
        entity_type: String::new(),
        description: String::new(),
        sources: vec![],
        layer: 0,
        clusters: vec![],
        embedded: true,
        row_tokens: 0,
    }
}

fn edge(weight: f64) -> HiEdge {
    HiEdge {
        a: 0,
        b: 0,
        weight,
        description: String::new(),
        description_tokens: 0,
        sources: vec![],
        order: 1,
        row_tokens: 0,
    }
}

/// Nodes A..H get indices 0..7 (name order). Edges: A–B 1, A–C 2, B–C 1, B–D 1, C–D 5, E–F 1, F–G 1,
/// E–G 2. Degrees: A 2, B 3, C 3, D 2, E 2, F 2, G 2, H 0.
fn graph() -> HiGraph {
    let names = ["A", "B", "C", "D", "E", "F", "G", "H"];
    let e = [
        (0, 1, 1.0),
        (0, 2, 2.0),
        (1, 2, 1.0),
        (1, 3, 1.0),
        (2, 3, 5.0),
        (4, 5, 1.0),
        (5, 6, 1.0),
        (4, 6, 2.0),
    ];
    HiGraph::new(
        names.iter().map(|n| node(n)).collect(),
        e.iter().map(|&(a, b, w)| (a, b, edge(w))).collect(),
    )
    .unwrap()
}

fn names(g: &HiGraph, nodes: &[u32]) -> Vec<String> {
    nodes
        .iter()
        .map(|&n| g.node(n).unwrap().name.clone())
        .collect()
}

fn pairs(g: &HiGraph, edges: &[u32]) -> Vec<String> {
    edges
        .iter()
        .map(|&e| {
            let e = g.edge(e).unwrap();
            format!(
                "{}-{}",
                g.node(e.a).unwrap().name,
                g.node(e.b).unwrap().name
            )
        })
        .collect()
}

#[test]
fn path_through_ties_steps_and_gaps() {
    let g = graph();
    let id = |n: &str| g.find(n).unwrap();
    // Keys in retrieval order A, D, C, G, H.
    // A → D: two shortest paths of length 2, A–B–D and A–C–D; B is expanded first (name order), so A–B–D.
    // D → C: the direct edge. C → G: different components, a jump. G → H: H is isolated, a jump.
    let p = g.bridge_path(&[id("A"), id("D"), id("C"), id("G"), id("H")]);
    assert_eq!(names(&g, &p.nodes), ["A", "B", "D", "C", "G", "H"]);
    assert_eq!(p.jumps, vec![3, 4]);

    // All edges among {A, B, C, D, G, H}: A–B, A–C, B–C, B–D, C–D. Rank = degree sum: B–C 6, the others 5;
    // among rank 5 by weight: C–D 5, A–C 2, then A–B and B–D (weight 1) by name.
    let all = g.bridge_edges(&p, BridgeEdges::AllAmongPathNodes);
    assert_eq!(pairs(&g, &all), ["B-C", "C-D", "A-C", "A-B", "B-D"]);
    // Only consecutive steps, never across a jump: A–B, B–D, D–C; ranked C–D (5), A–B, B–D.
    let only = g.bridge_edges(&p, BridgeEdges::PathOnly);
    assert_eq!(pairs(&g, &only), ["C-D", "A-B", "B-D"]);

    // As the reference's walk: with no intermediate key entity the first one is dropped (A → D gives
    // B, D); when the first step finds no path, the walk starts at the next key entity.
    let two = g.bridge_path(&[id("A"), id("D")]);
    assert_eq!(names(&g, &two.nodes), ["B", "D"]);
    assert_eq!(
        pairs(&g, &g.bridge_edges(&two, BridgeEdges::AllAmongPathNodes)),
        ["B-D"]
    );
    let adjacent = g.bridge_path(&[id("D"), id("C")]);
    assert_eq!(names(&g, &adjacent.nodes), ["C"]);
    assert!(g
        .bridge_edges(&adjacent, BridgeEdges::AllAmongPathNodes)
        .is_empty());
    let gap_first = g.bridge_path(&[id("C"), id("G"), id("H")]);
    assert_eq!(names(&g, &gap_first.nodes), ["G", "H"]);
    assert_eq!(gap_first.jumps, vec![0]);
}

#[test]
fn zero_and_one_key_entity() {
    let g = graph();
    assert_eq!(g.bridge_path(&[]), BridgePath::default());
    // One key entity: the reference's walk from it to itself appends nothing.
    let one = g.bridge_path(&[g.find("E").unwrap()]);
    assert!(one.nodes.is_empty());
    assert!(one.jumps.is_empty());
    assert!(g.bridge_edges(&one, BridgeEdges::PathOnly).is_empty());
    assert!(g
        .bridge_edges(&one, BridgeEdges::AllAmongPathNodes)
        .is_empty());
    // A repeated pair of nodes is rejected, and so is a self-loop.
    assert!(HiGraph::new(
        vec![node("X"), node("Y")],
        vec![(0, 1, edge(1.0)), (1, 0, edge(1.0))]
    )
    .is_err());
    assert!(HiGraph::new(vec![node("X")], vec![(0, 0, edge(1.0))]).is_err());
}

/// The breadth-first search the bridge path is defined by: from `from`, neighbours in index order, a
/// node's parent fixed at its first discovery.
fn plain_bfs(g: &HiGraph, from: u32, to: u32) -> Option<Vec<u32>> {
    if from == to {
        return Some(vec![from]);
    }
    let n = g.node_count();
    let mut parent = vec![u32::MAX; n];
    parent[from as usize] = from;
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(u) = queue.pop_front() {
        for &(v, _) in g.neighbours(u) {
            if parent[v as usize] != u32::MAX {
                continue;
            }
            parent[v as usize] = u;
            if v == to {
                let mut path = vec![to];
                while *path.last().unwrap() != from {
                    path.push(parent[*path.last().unwrap() as usize]);
                }
                path.reverse();
                return Some(path);
            }
            queue.push_back(v);
        }
    }
    None
}

#[test]
fn bidirectional_search_returns_the_plain_searchs_path() {
    // Random graphs from sparse (many components, long paths) to dense (many tied shortest paths).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    let mut compared = 0;
    for (n, edges) in [(60, 50), (200, 260), (300, 900), (120, 1500), (500, 520)] {
        let names: Vec<String> = (0..n).map(|i| format!("N{i:04}")).collect();
        let mut e = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while e.len() < edges {
            let (a, b) = (next(n as u64) as u32, next(n as u64) as u32);
            if a != b && seen.insert((a.min(b), a.max(b))) {
                e.push((a.min(b) as usize, a.max(b) as usize, edge(1.0)));
            }
        }
        let g = HiGraph::new(names.iter().map(|s| node(s)).collect(), e).unwrap();
        let keys: Vec<u32> = (0..400).map(|_| next(n as u64) as u32).collect();
        let bridge = g.bridge_path(&keys);
        // Rebuild the expected walk from the plain search (the first step brings its start along).
        let mut expected = BridgePath::default();
        for (i, w) in keys.windows(2).enumerate() {
            match plain_bfs(&g, w[0], w[1]) {
                Some(p) if i == 0 => expected.nodes.extend_from_slice(&p),
                Some(p) => expected.nodes.extend_from_slice(&p[1..]),
                None => {
                    if !expected.nodes.is_empty() {
                        expected.jumps.push(expected.nodes.len() - 1);
                    }
                    expected.nodes.push(w[1]);
                }
            }
            compared += 1;
        }
        assert_eq!(bridge, expected, "n = {n}, edges = {edges}");
    }
    assert_eq!(compared, 5 * 399);
}
