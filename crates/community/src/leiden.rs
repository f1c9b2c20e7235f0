//! The Leiden algorithm (Traag, Waltman & van Eck 2019, "From Louvain to Leiden: guaranteeing
//! well-connected communities") for modularity with a resolution parameter γ on a weighted undirected graph.
//!
//! One iteration: fast local moving (a queue of nodes in random order; a node moves to the neighbouring
//! community of largest positive gain `k_{v,C} − γ·k_v·K_C / 2m`; neighbours outside its new community are
//! queued again) → refinement (inside each community, well-connected singleton nodes join well-connected
//! sub-clusters chosen at random with probability ∝ exp(gain / θ) among those with non-negative gain) →
//! aggregation of the **refined** partition, whose nodes start in the community of the unrefined partition
//! → repeat on the aggregate until local moving leaves every aggregate node alone. Iterations repeat from
//! the previous partition until one improves the quality by at most `tolerance` (or `max_iterations`);
//! a worse partition is never kept.
//!
//! Own implementation, not `leiden-rs`: its refinement is greedy (no θ-randomised choice), so it can return
//! disconnected communities, and its parallel path is not reproducible; ours follows the paper, draws
//! from one seeded in-crate generator in a fixed order, and is sequential (bit-for-bit reproducible).
//! A final pass splits any community into its connected components (never lowers modularity), so every
//! returned community is connected whatever the input.

use crate::{CommunityError, Result};

/// A weighted undirected graph in adjacency form. Parallel edges are summed; self-loops are allowed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    adj: Vec<Vec<(u32, f64)>>,
    /// Weighted degree of each node (a self-loop counts twice).
    degree: Vec<f64>,
    /// Sum of degrees = 2m.
    total: f64,
}

impl Graph {
    /// A graph of `n` nodes from `(a, b, weight)` edges. Weights must be finite and non-negative; edges
    /// with weight 0 are dropped.
    pub fn from_edges(n: usize, edges: &[(usize, usize, f64)]) -> Result<Self> {
        let mut adj: Vec<Vec<(u32, f64)>> = vec![Vec::new(); n];
        for (i, &(a, b, w)) in edges.iter().enumerate() {
            if a >= n || b >= n {
                return Err(CommunityError::Input(format!(
                    "edge {i} joins nodes {a} and {b}, but the graph has {n} nodes"
                )));
            }
            if !(w.is_finite() && w >= 0.0) {
                return Err(CommunityError::Input(format!(
                    "edge {i} ({a}, {b}) has weight {w}; weights must be finite and non-negative"
                )));
            }
            if w == 0.0 {
                continue;
            }
            adj[a].push((b as u32, w));
            if a != b {
                adj[b].push((a as u32, w));
            }
        }
        for list in &mut adj {
            list.sort_by_key(|e| e.0);
            let mut merged: Vec<(u32, f64)> = Vec::with_capacity(list.len());
            for &(v, w) in list.iter() {
                match merged.last_mut() {
                    Some(last) if last.0 == v => last.1 += w,
                    _ => merged.push((v, w)),
                }
            }
            *list = merged;
        }
        let degree: Vec<f64> = adj
            .iter()
            .enumerate()
            .map(|(v, list)| {
                list.iter()
                    .map(|&(u, w)| if u as usize == v { 2.0 * w } else { w })
                    .sum()
            })
            .collect();
        let total = degree.iter().sum();
        Ok(Self { adj, degree, total })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.adj.len()
    }

    /// Neighbours of `v` with edge weights (sorted by neighbour; a self-loop appears once).
    pub fn neighbours(&self, v: usize) -> &[(u32, f64)] {
        &self.adj[v]
    }

    /// Weighted degree of `v`.
    pub fn degree(&self, v: usize) -> f64 {
        self.degree[v]
    }

    /// Modularity of `membership` with resolution γ: `Σ_c [ 2·e_c / 2m − γ (K_c / 2m)² ]`, where `e_c` is the
    /// weight inside community c (each internal edge once, self-loops once).
    pub fn modularity(&self, membership: &[usize], resolution: f64) -> f64 {
        if self.total == 0.0 {
            return 0.0;
        }
        let k = membership.iter().copied().max().map_or(0, |m| m + 1);
        let mut inside = vec![0.0; k];
        let mut tot = vec![0.0; k];
        for v in 0..self.adj.len() {
            let c = membership[v];
            tot[c] += self.degree[v];
            for &(u, w) in &self.adj[v] {
                if membership[u as usize] == c {
                    // Each non-loop edge is seen from both ends; a loop once but counts twice in 2e.
                    inside[c] += if u as usize == v { 2.0 * w } else { w };
                }
            }
        }
        let m2 = self.total;
        (0..k)
            .map(|c| inside[c] / m2 - resolution * (tot[c] / m2).powi(2))
            .sum()
    }
}

/// Leiden settings (graspologic's defaults).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeidenConfig {
    /// Resolution γ (1.0).
    pub resolution: f64,
    /// Refinement randomness θ (0.001).
    pub randomness: f64,
    /// Seed (graspologic/HiRAG: 0xDEADBEEF).
    pub seed: u64,
    /// Cap on whole iterations (10).
    pub max_iterations: usize,
    /// Iterations stop once one improves the quality by no more than this (1e-4; graspologic runs exactly
    /// one iteration, which `max_iterations = 1` reproduces).
    pub tolerance: f64,
}

impl Default for LeidenConfig {
    fn default() -> Self {
        Self {
            resolution: 1.0,
            randomness: 0.001,
            seed: 0xDEAD_BEEF,
            max_iterations: 10,
            tolerance: 1e-4,
        }
    }
}

/// SplitMix64: the crate's one seeded generator.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed ^ 0x5851_F42D_4C95_7F2D)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// The result of a Leiden run.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// Community of each node, numbered 0.. in order of each community's smallest node.
    pub membership: Vec<usize>,
    /// Number of communities.
    pub communities: usize,
    /// Modularity (with the run's resolution).
    pub quality: f64,
    /// Whole iterations run.
    pub iterations: usize,
}

/// Runs Leiden on `graph`.
pub fn leiden(graph: &Graph, config: &LeidenConfig) -> Result<Partition> {
    if !(config.resolution.is_finite() && config.resolution > 0.0) {
        return Err(CommunityError::Config(format!(
            "resolution {} must be a positive number",
            config.resolution
        )));
    }
    if !(config.randomness.is_finite() && config.randomness > 0.0) {
        return Err(CommunityError::Config(format!(
            "randomness {} must be a positive number",
            config.randomness
        )));
    }
    let n = graph.node_count();
    let mut rng = Rng::new(config.seed);
    let mut membership: Vec<usize> = (0..n).collect();
    let mut quality = graph.modularity(&membership, config.resolution);
    let mut iterations = 0;
    for _ in 0..config.max_iterations.max(1) {
        iterations += 1;
        let next = one_iteration(graph, &membership, config, &mut rng);
        let next = split_disconnected(graph, &next);
        let q = graph.modularity(&next, config.resolution);
        let improved = q > quality + config.tolerance.max(0.0);
        if q >= quality {
            membership = next;
            quality = q;
        }
        if !improved {
            break;
        }
    }
    let membership = renumber(&membership);
    let communities = membership.iter().copied().max().map_or(0, |m| m + 1);
    Ok(Partition {
        quality: graph.modularity(&membership, config.resolution),
        membership,
        communities,
        iterations,
    })
}

/// Renumbers communities 0.. in order of first appearance.
fn renumber(membership: &[usize]) -> Vec<usize> {
    let mut map = std::collections::HashMap::new();
    membership
        .iter()
        .map(|&c| {
            let next = map.len();
            *map.entry(c).or_insert(next)
        })
        .collect()
}

/// One Leiden iteration from `start` (a partition of `graph`'s nodes); returns the new membership.
fn one_iteration(
    graph: &Graph,
    start: &[usize],
    config: &LeidenConfig,
    rng: &mut Rng,
) -> Vec<usize> {
    let gamma = config.resolution;
    let mut level = graph.clone();
    // Which level node each original node belongs to.
    let mut node_of: Vec<usize> = (0..graph.node_count()).collect();
    let mut part = renumber(start);
    loop {
        let changed = move_nodes_fast(&level, &mut part, gamma, rng);
        let communities = part.iter().copied().max().map_or(0, |m| m + 1);
        if !changed && communities == level.node_count() {
            break;
        }
        let refined = refine(&level, &part, gamma, config.randomness, rng);
        let groups = refined.iter().copied().max().map_or(0, |m| m + 1);
        if groups == level.node_count() {
            // Refinement merged nothing: the aggregate would be the same graph.
            break;
        }
        // Aggregate on the refined partition; each aggregate node starts in its unrefined community.
        let mut edges: Vec<(usize, usize, f64)> = Vec::new();
        for v in 0..level.node_count() {
            for &(u, w) in level.neighbours(v) {
                let (a, b) = (refined[v], refined[u as usize]);
                if (u as usize) > v {
                    edges.push((a, b, w));
                } else if u as usize == v {
                    edges.push((a, a, w));
                }
            }
        }
        let mut next = match Graph::from_edges(groups, &edges) {
            Ok(g) => g,
            Err(_) => break,
        };
        // Keep degrees exact (isolated members contribute nothing to edges but their degree is 0 anyway).
        let mut degree = vec![0.0; groups];
        for v in 0..level.node_count() {
            degree[refined[v]] += level.degree(v);
        }
        next.degree = degree;
        next.total = next.degree.iter().sum();
        let mut next_part = vec![0usize; groups];
        for v in 0..level.node_count() {
            next_part[refined[v]] = part[v];
        }
        for x in &mut node_of {
            *x = refined[*x];
        }
        level = next;
        part = renumber(&next_part);
    }
    node_of.iter().map(|&x| part[x]).collect()
}

/// Fast local moving; returns whether any node moved.
fn move_nodes_fast(g: &Graph, part: &mut [usize], gamma: f64, rng: &mut Rng) -> bool {
    let n = g.node_count();
    let m2 = g.total;
    if m2 == 0.0 {
        return false;
    }
    let k = part.iter().copied().max().map_or(0, |m| m + 1).max(n);
    let mut tot = vec![0.0; k + 1];
    let mut size = vec![0usize; k + 1];
    for v in 0..n {
        tot[part[v]] += g.degree(v);
        size[part[v]] += 1;
    }
    let mut empty: Vec<usize> = (0..k).filter(|&c| size[c] == 0).collect();
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut queue: std::collections::VecDeque<usize> = order.into_iter().collect();
    let mut queued = vec![true; n];
    let mut weight_to = vec![0.0; k + 1];
    let mut touched: Vec<usize> = Vec::new();
    let mut moved = false;
    while let Some(v) = queue.pop_front() {
        queued[v] = false;
        let current = part[v];
        let kv = g.degree(v);
        touched.clear();
        for &(u, w) in g.neighbours(v) {
            if u as usize == v {
                continue;
            }
            let c = part[u as usize];
            if weight_to[c] == 0.0 {
                touched.push(c);
            }
            weight_to[c] += w;
        }
        // Remove v from its community, then pick the best (ties: stay, then first seen).
        tot[current] -= kv;
        let gain = |c: usize, wt: f64, tot: &[f64]| wt - gamma * kv * tot[c] / m2;
        let mut best = current;
        let mut best_gain = gain(current, weight_to[current], &tot);
        for &c in &touched {
            let gc = gain(c, weight_to[c], &tot);
            if gc > best_gain {
                best = c;
                best_gain = gc;
            }
        }
        // An empty community (gain 0) when v is not alone.
        if best_gain < 0.0 && size[current] > 1 {
            if let Some(e) = empty.pop() {
                best = e;
                best_gain = 0.0;
            }
        }
        let _ = best_gain;
        tot[best] += kv;
        if best != current {
            size[current] -= 1;
            if size[current] == 0 {
                empty.push(current);
            }

            size[best] += 1;
            part[v] = best;
            moved = true;
            for &(u, _) in g.neighbours(v) {
                let u = u as usize;
                if u != v && !queued[u] && part[u] != best {
                    queued[u] = true;
                    queue.push_back(u);
                }
            }
        }
        for &c in &touched {
            weight_to[c] = 0.0;
        }
    }
    let renum = renumber(part);
    part.copy_from_slice(&renum);
    moved
}

/// Refinement of `part` (spec of the paper, Algorithm A.2 `RefinePartition` / `MergeNodesSubset`).
fn refine(g: &Graph, part: &[usize], gamma: f64, theta: f64, rng: &mut Rng) -> Vec<usize> {
    let n = g.node_count();
    let m2 = g.total;
    let mut refined: Vec<usize> = (0..n).collect();
    if m2 == 0.0 {
        return refined;
    }
    let k = part.iter().copied().max().map_or(0, |m| m + 1);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
    for v in 0..n {
        members[part[v]].push(v);
    }
    let mut tot_c = vec![0.0; k];
    for v in 0..n {
        tot_c[part[v]] += g.degree(v);
    }
    // Refined-cluster bookkeeping: degree sum, weight to the rest of its community, singleton flag.
    let mut tot_r: Vec<f64> = (0..n).map(|v| g.degree(v)).collect();
    let mut ext_r: Vec<f64> = (0..n)
        .map(|v| {
            g.neighbours(v)
                .iter()
                .filter(|&&(u, _)| u as usize != v && part[u as usize] == part[v])
                .map(|&(_, w)| w)
                .sum()
        })
        .collect();
    let mut singleton = vec![true; n];
    let mut weight_to = vec![0.0; n];
    let mut touched: Vec<usize> = Vec::new();
    for (c, nodes) in members.iter().enumerate() {
        if nodes.len() < 2 {
            continue;
        }
        let mut order = nodes.clone();
        rng.shuffle(&mut order);
        for &v in &order {
            let kv = g.degree(v);
            // v must be well connected to its community and still alone.
            if !singleton[v] || ext_r[v] < gamma * kv * (tot_c[c] - kv) / m2 {
                continue;
            }
            touched.clear();
            for &(u, w) in g.neighbours(v) {
                let u = u as usize;
                if u == v || part[u] != c {
                    continue;
                }
                let r = refined[u];
                if weight_to[r] == 0.0 {
                    touched.push(r);
                }
                weight_to[r] += w;
            }
            // Candidates: well-connected refined clusters T with gain ≥ 0 (v's own singleton: gain 0).
            let own = refined[v];
            let mut candidates: Vec<(usize, f64)> = vec![(own, 0.0)];
            for &t in &touched {
                if t == own {
                    continue;
                }
                let well = ext_r[t] >= gamma * tot_r[t] * (tot_c[c] - tot_r[t]) / m2;
                let gain = weight_to[t] - gamma * kv * tot_r[t] / m2;
                if well && gain >= 0.0 {
                    candidates.push((t, gain));
                }
            }
            for &t in &touched {
                weight_to[t] = 0.0;
            }
            let max = candidates
                .iter()
                .map(|c| c.1)
                .fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = candidates
                .iter()
                .map(|&(_, gain)| ((gain - max) / theta).exp())
                .collect();
            let total: f64 = weights.iter().sum();
            let mut r = rng.next_f64() * total;
            let mut chosen = candidates[candidates.len() - 1].0;
            for (&(t, _), &w) in candidates.iter().zip(&weights) {
                if r < w {
                    chosen = t;
                    break;
                }
                r -= w;
            }
            if chosen == own {
                continue;
            }
            // Move v into `chosen`: update its total and its weight to the rest of the community.
            let mut w_v_t = 0.0;
            for &(u, w) in g.neighbours(v) {
                if u as usize != v && refined[u as usize] == chosen {
                    w_v_t += w;
                }
            }
            tot_r[chosen] += kv;
            ext_r[chosen] = ext_r[chosen] + ext_r[v] - 2.0 * w_v_t;
            refined[v] = chosen;
            singleton[v] = false;
            singleton[chosen] = false;
        }
    }
    renumber(&refined)
}

/// Splits every community into its connected components (within the community).
pub fn split_disconnected(g: &Graph, membership: &[usize]) -> Vec<usize> {
    let n = g.node_count();
    let mut out = vec![usize::MAX; n];
    let mut next = 0;
    let mut stack = Vec::new();
    for s in 0..n {
        if out[s] != usize::MAX {
            continue;
        }
        out[s] = next;
        stack.push(s);
        while let Some(v) = stack.pop() {
            for &(u, _) in g.neighbours(v) {
                let u = u as usize;
                if out[u] == usize::MAX && membership[u] == membership[s] {
                    out[u] = next;
                    stack.push(u);
                }
            }
        }
        next += 1;
    }
    out
}
