//! Leiden on Zachary's karate club, planted partitions and random graphs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kgrag_community::{
    community_schema, hierarchical_leiden, leiden, Graph, HierarchicalConfig, LeidenConfig,
};

const KARATE: [(usize, usize); 78] = [
    (0, 1),
    (0, 2),
    (0, 3),
    (0, 4),
    (0, 5),
    (0, 6),
    (0, 7),
    (0, 8),
    (0, 10),
    (0, 11),
    (0, 12),
    (0, 13),
    (0, 17),
    (0, 19),
    (0, 21),
    (0, 31),
    (1, 2),
    (1, 3),
    (1, 7),
    (1, 13),
    (1, 17),
    (1, 19),
    (1, 21),
    (1, 30),
    (2, 3),
    (2, 7),
    (2, 8),
    (2, 9),
    (2, 13),
    (2, 27),
    (2, 28),
    (2, 32),
    (3, 7),
    (3, 12),
    (3, 13),
    (4, 6),
    (4, 10),
    (5, 6),
    (5, 10),
    (5, 16),
    (6, 16),
    (8, 30),
    (8, 32),
    (8, 33),
    (9, 33),
    (13, 33),
    (14, 32),
    (14, 33),
    (15, 32),
    (15, 33),
    (18, 32),
    (18, 33),
    (19, 33),
    (20, 32),
    (20, 33),
    (22, 32),
    (22, 33),
    (23, 25),
    (23, 27),
    (23, 29),
    (23, 32),
    (23, 33),
    (24, 25),
    (24, 27),
    (24, 31),
    (25, 31),
    (26, 29),
    (26, 33),
    (27, 33),
    (28, 31),
    (28, 33),
    (29, 32),
    (29, 33),
    (30, 32),
    (30, 33),
    (31, 32),
    (31, 33),
    (32, 33),
];

/// Whether every community induces a connected subgraph (an independent BFS, not the crate's splitter).
fn connected(g: &Graph, membership: &[usize]) -> bool {
    let n = membership.len();
    let k = membership.iter().copied().max().map_or(0, |m| m + 1);
    let mut seen = vec![false; n];
    let mut started = vec![false; k];
    for s in 0..n {
        if seen[s] {
            continue;
        }
        if started[membership[s]] {
            return false; // a second component of the same community
        }
        started[membership[s]] = true;
        seen[s] = true;
        let mut stack = vec![s];
        while let Some(v) = stack.pop() {
            for &(u, _) in g.neighbours(v) {
                let u = u as usize;
                if !seen[u] && membership[u] == membership[s] {
                    seen[u] = true;
                    stack.push(u);
                }
            }
        }
    }
    true
}

#[test]
fn karate_club_modularity_and_connectivity() {
    let edges: Vec<(usize, usize, f64)> = KARATE.iter().map(|&(a, b)| (a, b, 1.0)).collect();
    let g = Graph::from_edges(34, &edges).unwrap();
    let mut best = f64::MIN;
    for seed in 0..10u64 {
        let p = leiden(
            &g,
            &LeidenConfig {
                seed,
                ..LeidenConfig::default()
            },
        )
        .unwrap();
        assert!(
            connected(&g, &p.membership),
            "seed {seed}: a community is disconnected"
        );
        eprintln!(
            "seed {seed}: {} communities, Q = {:.4}",
            p.communities, p.quality
        );
        best = best.max(p.quality);
        let again = leiden(
            &g,
            &LeidenConfig {
                seed,
                ..LeidenConfig::default()
            },
        )
        .unwrap();
        assert_eq!(p, again, "same seed, same partition");
    }
    assert!(best >= 0.41, "best modularity {best}");
    assert!(best <= 0.4198 + 1e-4);
}

fn nmi(a: &[usize], b: &[usize]) -> f64 {
    let n = a.len() as f64;
    let ka = a.iter().max().map_or(0, |m| m + 1);
    let kb = b.iter().max().map_or(0, |m| m + 1);
    let mut joint = vec![vec![0.0; kb]; ka];
    let (mut pa, mut pb) = (vec![0.0; ka], vec![0.0; kb]);
    for (&x, &y) in a.iter().zip(b) {
        joint[x][y] += 1.0 / n;
        pa[x] += 1.0 / n;
        pb[y] += 1.0 / n;
    }
    let h = |p: &[f64]| {
        -p.iter()
            .filter(|&&x| x > 0.0)
            .map(|x| x * x.ln())
            .sum::<f64>()
    };
    let mut mi = 0.0;
    for x in 0..ka {
        for y in 0..kb {
            if joint[x][y] > 0.0 {
                mi += joint[x][y] * (joint[x][y] / (pa[x] * pb[y])).ln();
            }
        }
    }
    2.0 * mi / (h(&pa) + h(&pb))
}

#[test]
fn planted_partition_is_recovered() {
    // 10 groups of 50, p_in 0.3, p_out 0.01, from a fixed LCG.
    let (groups, per) = (10usize, 50usize);
    let n = groups * per;
    let mut state = 42u64;
    let mut uniform = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut edges = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let p = if a / per == b / per { 0.3 } else { 0.01 };
            if uniform() < p {
                edges.push((a, b, 1.0));
            }
        }
    }
    let g = Graph::from_edges(n, &edges).unwrap();
    let p = leiden(&g, &LeidenConfig::default()).unwrap();
    let truth: Vec<usize> = (0..n).map(|v| v / per).collect();
    let score = nmi(&p.membership, &truth);
    eprintln!(
        "planted: {} communities, Q = {:.4}, NMI = {score:.4}",
        p.communities, p.quality
    );
    assert!(score >= 0.95, "NMI {score}");
    assert!(connected(&g, &p.membership));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn random_graphs_give_connected_covering_partitions(
        n in 1usize..60,
        raw in proptest::collection::vec((0usize..60, 0usize..60, 0.1f64..3.0), 0..200),
        seed in 0u64..1000,
    ) {
        let edges: Vec<(usize, usize, f64)> = raw.into_iter().map(|(a, b, w)| (a % n, b % n, w)).collect();
        let g = Graph::from_edges(n, &edges).unwrap();
        let p = leiden(&g, &LeidenConfig { seed, ..LeidenConfig::default() }).unwrap();
        proptest::prop_assert_eq!(p.membership.len(), n);
        proptest::prop_assert!(connected(&g, &p.membership));
        let singletons: Vec<usize> = (0..n).collect();
        proptest::prop_assert!(p.quality >= g.modularity(&singletons, 1.0).unwrap() - 1e-9);
    }
}

#[test]
fn hierarchy_splits_until_clusters_are_small_or_unsplittable() {
    let edges: Vec<(usize, usize, f64)> = KARATE.iter().map(|&(a, b)| (a, b, 1.0)).collect();
    // A second, separate component (a triangle): the reference clusters only the largest component.
    let mut edges2 = edges.clone();
    edges2.extend([(34, 35, 1.0), (35, 36, 1.0), (34, 36, 1.0)]);
    let g = Graph::from_edges(37, &edges2).unwrap();
    for largest in [true, false] {
        let cfg = HierarchicalConfig {
            max_cluster_size: 5,
            largest_component_only: largest,
            ..HierarchicalConfig::default()
        };
        let h = hierarchical_leiden(&g, &cfg).unwrap();
        let covered: std::collections::BTreeSet<usize> = h.records.iter().map(|r| r.node).collect();
        assert_eq!(covered.len(), if largest { 34 } else { 37 });
        // Level 0 covers every considered node exactly once.
        let level0: Vec<usize> = h
            .records
            .iter()
            .filter(|r| r.level == 0)
            .map(|r| r.node)
            .collect();
        assert_eq!(level0.len(), covered.len());
        // Each node has exactly one final record; final clusters are small or unsplittable.
        let mut sizes = std::collections::BTreeMap::new();
        for r in h.records.iter().filter(|r| r.is_final) {
            *sizes.entry(r.cluster).or_insert(0usize) += 1;
        }
        assert_eq!(sizes.values().sum::<usize>(), covered.len());
        for (c, s) in &sizes {
            assert!(
                *s < 5 || h.unsplittable.contains(c),
                "cluster {c} of size {s}"
            );
        }
        // Children are subsets of their parents.
        for r in h.records.iter().filter(|r| r.parent.is_some()) {
            let parent = r.parent.unwrap();
            assert!(h
                .records
                .iter()
                .any(|p| p.cluster == parent && p.node == r.node && p.level + 1 == r.level));
        }
        assert!(h.levels >= 2);
        assert_eq!(h, hierarchical_leiden(&g, &cfg).unwrap(), "deterministic");
        let mut last_id = None;
        for level in 0..h.levels {
            // Every cluster of every level is connected (nodes absent from the level are singletons).
            let mut membership: Vec<usize> = (0..37).map(|v| 1000 + v).collect();
            let mut smallest: std::collections::BTreeMap<usize, usize> = Default::default();
            for r in h.records.iter().filter(|r| r.level == level) {
                membership[r.node] = r.cluster;
                let m = smallest.entry(r.cluster).or_insert(r.node);
                *m = (*m).min(r.node);
            }
            assert!(connected(&g, &membership), "level {level} connected");
            // Ids run on across levels and, within a level, follow the smallest member.
            let ids: Vec<usize> = smallest.keys().copied().collect();
            assert_eq!(
                ids.first().copied(),
                Some(last_id.map_or(0, |l: usize| l + 1))
            );
            assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
            let firsts: Vec<usize> = smallest.values().copied().collect();
            assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
            last_id = ids.last().copied();
        }
        // The schema: sub-communities are subsets, occurrence is relative to the largest chunk set.
        let sources: Vec<Vec<String>> = (0..37).map(|v| vec![format!("chunk-{}", v % 7)]).collect();
        let schema = community_schema(&g, &h, &sources);
        let by_id: std::collections::HashMap<usize, &kgrag_community::Community> =
            schema.iter().map(|c| (c.id, c)).collect();
        for c in &schema {
            assert_eq!(c.title, format!("Cluster {}", c.id));
            for s in &c.sub_communities {
                assert!(by_id[s].nodes.iter().all(|v| c.nodes.contains(v)));
                assert_eq!(by_id[s].level, c.level + 1);
            }
            assert!(c.edges.iter().all(|&(a, b)| a <= b));
            assert!(c.occurrence > 0.0 && c.occurrence <= 1.0);
        }
        assert!(schema.iter().any(|c| (c.occurrence - 1.0).abs() < 1e-12));
    }
}

#[test]
fn clusters_of_exactly_max_cluster_size_are_split_as_graspologic_does() {
    // 40 groups of two 5-cliques joined by 3 edges, the groups in a ring: level 0 finds the 40 groups of
    // 10. graspologic-native 1.2.5 re-splits them with max_cluster_size 10 (its filter is `>=`: 80
    // level-1 clusters) and not with 11 — checked with `gn.hierarchical_leiden` on this graph.
    let mut edges = Vec::new();
    for g in 0..40usize {
        let base = g * 10;
        for half in [base, base + 5] {
            for a in 0..5 {
                for b in a + 1..5 {
                    edges.push((half + a, half + b, 1.0));
                }
            }
        }
        for k in 0..3 {
            edges.push((base + k, base + 5 + k, 1.0));
        }
        edges.push((base + 9, (g + 1) % 40 * 10, 1.0));
    }
    let g = Graph::from_edges(400, &edges).unwrap();
    let count = |level: usize, h: &kgrag_community::CommunityHierarchy| {
        h.records
            .iter()
            .filter(|r| r.level == level)
            .map(|r| r.cluster)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    for (max, levels, deeper) in [(10, 2, 80), (11, 1, 0)] {
        let h = hierarchical_leiden(
            &g,
            &HierarchicalConfig {
                max_cluster_size: max,
                ..HierarchicalConfig::default()
            },
        )
        .unwrap();
        assert_eq!(count(0, &h), 40, "max {max}");
        assert_eq!((h.levels, count(1, &h)), (levels, deeper), "max {max}");
    }
}
