//! The Leiden algorithm (Traag, Waltman & van Eck 2019, "From Louvain to Leiden: guaranteeing
//! well-connected communities") for modularity with a resolution parameter γ on a weighted undirected graph.
//!
//! One iteration: fast local moving (a queue of nodes in random order; a node moves to the neighbouring
//! community of largest positive gain `k_{v,C} − γ·k_v·K_C / 2m`; neighbours outside its new community are
//! queued again) → refinement (inside each community, well-connected singleton nodes join well-connected
//! sub-clusters chosen at random with probability ∝ exp(gain / θ) among those with non-negative gain) →
//! aggregation of the **refined** partition, whose nodes start in the community of the unrefined partition
//! → repeat on the aggregate until local moving leaves every aggregate node alone. Iterations repeat from
//! the previous partition until one leaves it unchanged or improves the quality by at most `tolerance`
//! (default 0: until stable; capped by `max_iterations`);
//! a worse partition is never kept.
//!
//! Own implementation, not `leiden-rs`: its refinement is greedy (no θ-randomised choice), so it can return
//! disconnected communities, and its parallel path is not reproducible; ours follows the paper, draws
//! from one seeded in-crate generator in a fixed order, and is sequential (bit-for-bit reproducible).
//! A final pass splits any community into its connected components (never lowers modularity), so every
//! returned community is connected whatever the input.

use crate::{CommunityError, Result};

/// A weighted undirected graph in compressed adjacency form. Parallel edges are summed; self-loops are
/// allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// `targets[offsets[v]..offsets[v + 1]]` are v's neighbours, sorted.
    offsets: Vec<usize>,
    targets: Vec<(u32, f64)>,
    /// Weighted degree of each node (a self-loop counts twice).
    degree: Vec<f64>,
    /// Sum of degrees = 2m.
    total: f64,
}

impl Default for Graph {
    fn default() -> Self {
        Self {
            offsets: vec![0],
            targets: Vec::new(),
            degree: Vec::new(),
            total: 0.0,
        }
    }
}

impl Graph {
    /// A graph of `n` nodes from `(a, b, weight)` edges. Weights must be finite and non-negative; edges
    /// with weight 0 are dropped.
    ///
    /// # Errors
    /// [`CommunityError::Input`] naming the first edge with an endpoint ≥ `n` or an unusable weight, or
    /// when `n` does not fit the 32-bit node ids.
    pub fn from_edges(n: usize, edges: &[(usize, usize, f64)]) -> Result<Self> {
        if u32::try_from(n).is_err() {
            return Err(CommunityError::Input(format!(
                "{n} nodes exceed the 2^32 node ids of a graph"
            )));
        }
        let mut count = vec![0usize; n + 1];
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
            count[a + 1] += 1;
            if a != b {
                count[b + 1] += 1;
            }
        }
        for v in 0..n {
            count[v + 1] += count[v];
        }
        let mut cursor = count.clone();
        let mut raw = vec![(0u32, 0.0f64); count[n]];
        for &(a, b, w) in edges {
            if w == 0.0 {
                continue;
            }
            raw[cursor[a]] = (b as u32, w);
            cursor[a] += 1;
            if a != b {
                raw[cursor[b]] = (a as u32, w);
                cursor[b] += 1;
            }
        }
        // Sort each node's list (stable: repeated pairs are summed in input order) and merge repeats.
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        let mut targets: Vec<(u32, f64)> = Vec::with_capacity(raw.len());
        let mut degree = Vec::with_capacity(n);
        for v in 0..n {
            let list = &mut raw[count[v]..count[v + 1]];
            list.sort_by_key(|e| e.0);
            let start = targets.len();
            for &(u, w) in list.iter() {
                match targets[start..].last_mut() {
                    Some(last) if last.0 == u => last.1 += w,
                    _ => targets.push((u, w)),
                }
            }
            degree.push(row_degree(v, &targets[start..]));
            offsets.push(targets.len());
        }
        let total: f64 = degree.iter().sum();
        if !total.is_finite() {
            return Err(CommunityError::Input(
                "the edge weights sum to more than a 64-bit float holds".into(),
            ));
        }
        Ok(Self {
            offsets,
            targets,
            degree,
            total,
        })
    }

    /// The subgraph induced by `nodes` (sorted, distinct), numbered by position in `nodes`: each row keeps
    /// the neighbours inside, in order, so the result is what [`Graph::from_edges`] builds from the inside
    /// edges. `position` is scratch space of one entry per node, all `usize::MAX` on entry and on return.
    pub(crate) fn induced(&self, nodes: &[usize], position: &mut [usize]) -> Graph {
        for (i, &v) in nodes.iter().enumerate() {
            position[v] = i;
        }
        let mut offsets = Vec::with_capacity(nodes.len() + 1);
        offsets.push(0);
        let mut targets = Vec::new();
        let mut degree = Vec::with_capacity(nodes.len());
        for (i, &v) in nodes.iter().enumerate() {
            let start = targets.len();
            targets.extend(self.neighbours(v).iter().filter_map(|&(u, w)| {
                let j = position[u as usize];
                (j != usize::MAX).then_some((j as u32, w))
            }));
            degree.push(row_degree(i, &targets[start..]));
            offsets.push(targets.len());
        }
        for &v in nodes {
            position[v] = usize::MAX;
        }
        let total = degree.iter().sum();
        Graph {
            offsets,
            targets,
            degree,
            total,
        }
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.degree.len()
    }

    /// Neighbours of `v` with edge weights (sorted by neighbour; a self-loop appears once).
    ///
    /// # Panics
    /// When `v` is not a node (`v >= node_count()`), as slice indexing does.
    pub fn neighbours(&self, v: usize) -> &[(u32, f64)] {
        &self.targets[self.offsets[v]..self.offsets[v + 1]]
    }

    /// Weighted degree of `v` (a self-loop counts twice).
    ///
    /// # Panics
    /// When `v` is not a node (`v >= node_count()`), as slice indexing does.
    pub fn degree(&self, v: usize) -> f64 {
        self.degree[v]
    }

    /// Modularity of `membership` (one community label per node, any `usize`) with resolution γ:
    /// `Σ_c [ 2·e_c / 2m − γ (K_c / 2m)² ]`, where `e_c` is the weight inside community c (each internal
    /// edge once, self-loops once). A graph without edges has modularity 0.
    ///
    /// # Errors
    /// [`CommunityError::Input`] when `membership` does not have one entry per node.
    pub fn modularity(&self, membership: &[usize], resolution: f64) -> Result<f64> {
        self.check_membership(membership)?;
        if membership.iter().all(|&c| c < self.node_count()) {
            return Ok(self.quality(membership, resolution));
        }
        // Arbitrary labels: number them 0.. first (the bookkeeping is indexed by label).
        let mut ids = std::collections::HashMap::new();
        let dense: Vec<usize> = membership
            .iter()
            .map(|&c| {
                let next = ids.len();
                *ids.entry(c).or_insert(next)
            })
            .collect();
        Ok(self.quality(&dense, resolution))
    }

    fn check_membership(&self, membership: &[usize]) -> Result<()> {
        if membership.len() == self.node_count() {
            Ok(())
        } else {
            Err(CommunityError::Input(format!(
                "the membership lists {} nodes, but the graph has {}",
                membership.len(),
                self.node_count()
            )))
        }
    }

    /// [`Graph::quality`] of the partition into singletons (the same sums in the same order: a node's
    /// inside weight is twice its self-loop).
    fn singleton_quality(&self, resolution: f64) -> f64 {
        if self.total == 0.0 {
            return 0.0;
        }
        let m2 = self.total;
        (0..self.node_count())
            .map(|v| {
                let row = self.neighbours(v);
                let inside = row
                    .binary_search_by_key(&(v as u32), |e| e.0)
                    .map_or(0.0, |at| 0.0 + 2.0 * row[at].1);
                inside / m2 - resolution * (self.degree[v] / m2).powi(2)
            })
            .sum()
    }

    /// Modularity of a membership known to cover every node.
    pub(crate) fn quality(&self, membership: &[usize], resolution: f64) -> f64 {
        if self.total == 0.0 {
            return 0.0;
        }
        let k = membership.iter().copied().max().map_or(0, |m| m + 1);
        let mut inside = vec![0.0; k];
        let mut tot = vec![0.0; k];
        for v in 0..self.node_count() {
            let c = membership[v];
            tot[c] += self.degree[v];
            for &(u, w) in self.neighbours(v) {
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

/// Weighted degree of node `v` from its row (a self-loop counts twice).
fn row_degree(v: usize, row: &[(u32, f64)]) -> f64 {
    row.iter()
        .map(|&(u, w)| if u as usize == v { 2.0 * w } else { w })
        .sum()
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
    /// Cap on whole iterations (100). graspologic-native (and so HiRAG's reference) runs exactly one
    /// iteration, which `max_iterations = 1` reproduces.
    pub max_iterations: usize,
    /// Iterations stop once one leaves the partition unchanged or improves the quality by no more than
    /// this (0: until stable, as `leidenalg` runs with `n_iterations < 0`).
    pub tolerance: f64,
}

impl Default for LeidenConfig {
    fn default() -> Self {
        Self {
            resolution: 1.0,
            randomness: 0.001,
            seed: 0xDEAD_BEEF,
            max_iterations: 100,
            tolerance: 0.0,
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
    leiden_with(graph, config, &mut Scratch::default())
}

/// Buffers of Leiden runs: sized anew for each use, so one set serves every level of a run and, in the
/// hierarchy, every run of one worker; memory is allocated only when a buffer grows.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    tot: Vec<f64>,
    size: Vec<usize>,
    empty: Vec<usize>,
    queue: std::collections::VecDeque<usize>,
    queued: Vec<bool>,
    weight_to: Vec<f64>,
    touched: Vec<usize>,
    start: Vec<usize>,
    fill: Vec<usize>,
    members: Vec<usize>,
    tot_c: Vec<f64>,
    tot_r: Vec<f64>,
    ext_r: Vec<f64>,
    singleton: Vec<bool>,
    candidates: Vec<(usize, f64)>,
    weights: Vec<f64>,
    order: Vec<usize>,
    map: Vec<usize>,
    edges: Vec<(usize, usize, f64)>,
}

/// Empties `v` and fills it with `n` copies of `value`.
fn reset<T: Clone>(v: &mut Vec<T>, n: usize, value: T) {
    v.clear();
    v.resize(n, value);
}

/// [`leiden`] with the caller's buffers.
pub(crate) fn leiden_with(
    graph: &Graph,
    config: &LeidenConfig,
    scratch: &mut Scratch,
) -> Result<Partition> {
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
    let mut quality = graph.singleton_quality(config.resolution);
    let mut iterations = 0;
    for _ in 0..config.max_iterations.max(1) {
        iterations += 1;
        let next = one_iteration(graph, &membership, config, &mut rng, scratch);
        let next = components_of(graph, &next);
        let q = graph.quality(&next, config.resolution);
        let improved = q > quality + config.tolerance.max(0.0);
        if q >= quality {
            membership = next;
            quality = q;
        }
        if !improved {
            break;
        }
    }
    // Already numbered in order of first appearance: the singletons are, and so is every result of
    // `components_of` (pieces by smallest node); `quality` is therefore the returned membership's.
    let communities = membership.iter().copied().max().map_or(0, |m| m + 1);
    Ok(Partition {
        quality,
        membership,
        communities,
        iterations,
    })
}

/// Renumbers communities 0.. in order of first appearance, in place (ids are below the node count;
/// `map` is scratch space).
fn renumber(membership: &mut [usize], map: &mut Vec<usize>) {
    let k = membership.iter().copied().max().map_or(0, |m| m + 1);
    reset(map, k, usize::MAX);
    let mut next = 0;
    for c in membership {
        if map[*c] == usize::MAX {
            map[*c] = next;
            next += 1;
        }
        *c = map[*c];
    }
}

/// One Leiden iteration from `start` (a partition of `graph`'s nodes); returns the new membership.
fn one_iteration(
    graph: &Graph,
    start: &[usize],
    config: &LeidenConfig,
    rng: &mut Rng,
    scratch: &mut Scratch,
) -> Vec<usize> {
    let gamma = config.resolution;
    // The graph of the current level: `graph` itself, then the aggregates.
    let mut aggregate: Option<Graph> = None;
    // Which level node each original node belongs to.
    let mut node_of: Vec<usize> = (0..graph.node_count()).collect();
    let mut part = start.to_vec();
    renumber(&mut part, &mut scratch.map);
    loop {
        let level = aggregate.as_ref().unwrap_or(graph);
        let changed = move_nodes_fast(level, &mut part, gamma, rng, scratch);
        let communities = part.iter().copied().max().map_or(0, |m| m + 1);
        if !changed && communities == level.node_count() {
            break;
        }
        let refined = refine(level, &part, gamma, config.randomness, rng, scratch);
        let groups = refined.iter().copied().max().map_or(0, |m| m + 1);
        if groups == level.node_count() {
            // Refinement merged nothing: the aggregate would be the same graph.
            break;
        }
        // Aggregate on the refined partition; each aggregate node starts in its unrefined community.
        let edges = &mut scratch.edges;
        edges.clear();
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
        let mut next = match Graph::from_edges(groups, edges) {
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
        aggregate = Some(next);
        part = next_part;
        renumber(&mut part, &mut scratch.map);
    }
    node_of.iter().map(|&x| part[x]).collect()
}

/// Fast local moving; returns whether any node moved.
fn move_nodes_fast(
    g: &Graph,
    part: &mut [usize],
    gamma: f64,
    rng: &mut Rng,
    scratch: &mut Scratch,
) -> bool {
    let n = g.node_count();
    let m2 = g.total;
    if m2 == 0.0 {
        return false;
    }
    let k = part.iter().copied().max().map_or(0, |m| m + 1).max(n);
    let Scratch {
        tot,
        size,
        empty,
        queue,
        queued,
        weight_to,
        touched,
        order,
        map,
        ..
    } = scratch;
    reset(tot, k + 1, 0.0);
    reset(size, k + 1, 0);
    for v in 0..n {
        tot[part[v]] += g.degree(v);
        size[part[v]] += 1;
    }
    empty.clear();
    empty.extend((0..k).filter(|&c| size[c] == 0));
    order.clear();
    order.extend(0..n);
    rng.shuffle(order);
    queue.clear();
    queue.extend(order.iter().copied());
    reset(queued, n, true);
    reset(weight_to, k + 1, 0.0);
    touched.clear();
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
        let mut best_gain = gain(current, weight_to[current], tot);
        for &c in touched.iter() {
            let gc = gain(c, weight_to[c], tot);
            if gc > best_gain {
                best = c;
                best_gain = gc;
            }
        }
        // An empty community (gain 0) when v is not alone.
        if best_gain < 0.0 && size[current] > 1 {
            if let Some(e) = empty.pop() {
                best = e;
            }
        }
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
        for &c in touched.iter() {
            weight_to[c] = 0.0;
        }
    }
    renumber(part, map);
    moved
}

/// Refinement of `part` (spec of the paper, Algorithm A.2 `RefinePartition` / `MergeNodesSubset`).
fn refine(
    g: &Graph,
    part: &[usize],
    gamma: f64,
    theta: f64,
    rng: &mut Rng,
    scratch: &mut Scratch,
) -> Vec<usize> {
    let n = g.node_count();
    let m2 = g.total;
    let mut refined: Vec<usize> = (0..n).collect();
    if m2 == 0.0 {
        return refined;
    }
    let k = part.iter().copied().max().map_or(0, |m| m + 1);
    let Scratch {
        start,
        fill,
        members,
        tot_c,
        tot_r,
        ext_r,
        singleton,
        weight_to,
        touched,
        candidates,
        weights,
        order,
        map,
        ..
    } = scratch;
    // Members of each community in node order (a counting sort: no list per community).
    reset(start, k + 1, 0);
    for &c in part {
        start[c + 1] += 1;
    }
    for c in 0..k {
        start[c + 1] += start[c];
    }
    fill.clear();
    fill.extend_from_slice(start);
    reset(members, n, 0);
    for v in 0..n {
        members[fill[part[v]]] = v;
        fill[part[v]] += 1;
    }
    reset(tot_c, k, 0.0);
    for v in 0..n {
        tot_c[part[v]] += g.degree(v);
    }
    // Refined-cluster bookkeeping: degree sum, weight to the rest of its community, singleton flag.
    tot_r.clear();
    tot_r.extend((0..n).map(|v| g.degree(v)));
    ext_r.clear();
    ext_r.extend((0..n).map(|v| {
        g.neighbours(v)
            .iter()
            .filter(|&&(u, _)| u as usize != v && part[u as usize] == part[v])
            .map(|&(_, w)| w)
            .sum::<f64>()
    }));
    reset(singleton, n, true);
    reset(weight_to, n, 0.0);
    touched.clear();
    for c in 0..k {
        let nodes = &members[start[c]..start[c + 1]];
        if nodes.len() < 2 {
            continue;
        }
        order.clear();
        order.extend_from_slice(nodes);
        rng.shuffle(order);
        for &v in order.iter() {
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
            candidates.clear();
            candidates.push((own, 0.0));
            for &t in touched.iter() {
                if t == own {
                    continue;
                }
                let well = ext_r[t] >= gamma * tot_r[t] * (tot_c[c] - tot_r[t]) / m2;
                let gain = weight_to[t] - gamma * kv * tot_r[t] / m2;
                if well && gain >= 0.0 {
                    candidates.push((t, gain));
                }
            }
            for &t in touched.iter() {
                weight_to[t] = 0.0;
            }
            let max = candidates
                .iter()
                .map(|c| c.1)
                .fold(f64::NEG_INFINITY, f64::max);
            weights.clear();
            weights.extend(candidates.iter().map(|&(_, gain)| {
                // exp underflows to exactly 0 below ln(2^−1075) ≈ −745.13: skip the call.
                let t = (gain - max) / theta;
                if t < -746.0 {
                    0.0
                } else {
                    t.exp()
                }
            }));
            let total: f64 = weights.iter().sum();
            let mut r = rng.next_f64() * total;
            let mut chosen = candidates[candidates.len() - 1].0;
            for (&(t, _), &w) in candidates.iter().zip(weights.iter()) {
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
    renumber(&mut refined, map);
    refined
}

/// Splits every community of `membership` into its connected components (within the community);
/// the result numbers the pieces 0.. in order of their smallest node. Never lowers modularity.
///
/// # Errors
/// [`CommunityError::Input`] when `membership` does not have one entry per node.
pub fn split_disconnected(g: &Graph, membership: &[usize]) -> Result<Vec<usize>> {
    g.check_membership(membership)?;
    Ok(components_of(g, membership))
}

/// [`split_disconnected`] without the length check (pieces numbered by smallest node).
pub(crate) fn components_of(g: &Graph, membership: &[usize]) -> Vec<usize> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn err_text(r: Result<impl std::fmt::Debug>) -> String {
        match r {
            Err(e) => e.to_string(),
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    #[test]
    fn bad_edges_are_rejected_naming_the_edge() {
        let e = err_text(Graph::from_edges(3, &[(0, 1, 1.0), (1, 3, 1.0)]));
        assert!(e.contains("edge 1") && e.contains("3 nodes"), "{e}");
        let e = err_text(Graph::from_edges(2, &[(0, 1, f64::MAX), (0, 1, f64::MAX)]));
        assert!(e.contains("sum to more"), "{e}");
        for w in [-1.0, f64::NAN, f64::INFINITY] {
            let e = err_text(Graph::from_edges(3, &[(0, 1, w)]));
            assert!(e.contains("edge 0 (0, 1)"), "{e}");
        }
    }

    #[test]
    fn parallel_edges_sum_zero_weights_drop_and_loops_count_twice() {
        let g =
            Graph::from_edges(3, &[(0, 1, 1.0), (1, 0, 2.0), (1, 2, 0.0), (2, 2, 1.5)]).unwrap();
        assert_eq!(g.neighbours(0), &[(1, 3.0)]);
        assert_eq!(g.neighbours(1), &[(0, 3.0)]);
        assert_eq!(g.neighbours(2), &[(2, 1.5)]);
        assert_eq!((g.degree(0), g.degree(1), g.degree(2)), (3.0, 3.0, 3.0));
        assert_eq!(g.total, 9.0);
    }

    #[test]
    fn modularity_matches_the_hand_computation() {
        // Path 0-1-2-3 (m = 3) split {0,1} {2,3}: e = 1 each, K = 3 each → 2·(1/3 − (3/6)²) = 1/6.
        let g = Graph::from_edges(4, &[(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0)]).unwrap();
        let q = g.modularity(&[0, 0, 1, 1], 1.0).unwrap();
        assert!((q - 1.0 / 6.0).abs() < 1e-12, "{q}");
        // γ = 2: 2·(1/3 − 2·(1/2)²) = −1/3.
        let q = g.modularity(&[0, 0, 1, 1], 2.0).unwrap();
        assert!((q + 1.0 / 3.0).abs() < 1e-12, "{q}");
        // One community holds everything: 1 − γ.
        assert!(g.modularity(&[0; 4], 1.0).unwrap().abs() < 1e-12);
        // A self-loop of weight 1 on node 0: 2m = 8; {0,1} has 2·e = 2 + 2 (the loop twice), K = 5; {2,3}
        // has 2·e = 2, K = 3.
        let g =
            Graph::from_edges(4, &[(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (0, 0, 1.0)]).unwrap();
        let q = g.modularity(&[0, 0, 1, 1], 1.0).unwrap();
        let expected = (4.0 / 8.0 - (5.0f64 / 8.0).powi(2)) + (2.0 / 8.0 - (3.0f64 / 8.0).powi(2));
        assert!((q - expected).abs() < 1e-12, "{q} vs {expected}");
        // No edges → 0; a membership of the wrong length is an error.
        assert_eq!(
            Graph::from_edges(2, &[])
                .unwrap()
                .modularity(&[0, 1], 1.0)
                .unwrap(),
            0.0
        );
        // Labels need not be small: the same partition under huge labels.
        let big = g
            .modularity(&[usize::MAX, usize::MAX, 1 << 40, 1 << 40], 1.0)
            .unwrap();
        assert_eq!(big, q);
        let e = err_text(g.modularity(&[0, 0], 1.0));
        assert!(e.contains("lists 2 nodes") && e.contains("has 4"), "{e}");
    }

    #[test]
    fn disconnected_communities_are_split_by_smallest_node() {
        // Community 7 = {0, 1, 3, 4} is two pieces (0-1 and 3-4); community 2 = {2}.
        let g =
            Graph::from_edges(5, &[(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (3, 4, 1.0)]).unwrap();
        let split = split_disconnected(&g, &[7, 7, 2, 7, 7]).unwrap();
        assert_eq!(split, vec![0, 0, 1, 2, 2]);
        let before = g.quality(&[7, 7, 2, 7, 7], 1.0);
        assert!(g.quality(&split, 1.0) >= before);
        assert!(split_disconnected(&g, &[0]).is_err());
    }

    #[test]
    fn unusable_settings_and_edge_cases() {
        let g = Graph::from_edges(3, &[(0, 1, 1.0)]).unwrap();
        for (resolution, randomness) in [(0.0, 0.001), (f64::NAN, 0.001), (1.0, 0.0), (1.0, -1.0)] {
            let cfg = LeidenConfig {
                resolution,
                randomness,
                ..LeidenConfig::default()
            };
            assert!(matches!(leiden(&g, &cfg), Err(CommunityError::Config(_))));
        }
        // No edges: singletons, quality 0. No nodes: nothing.
        let p = leiden(
            &Graph::from_edges(3, &[]).unwrap(),
            &LeidenConfig::default(),
        )
        .unwrap();
        assert_eq!(
            (p.membership, p.communities, p.quality),
            (vec![0, 1, 2], 3, 0.0)
        );
        let p = leiden(&Graph::default(), &LeidenConfig::default()).unwrap();
        assert_eq!(p.communities, 0);
        // The isolated node 2 stays alone; 0-1 join.
        let p = leiden(&g, &LeidenConfig::default()).unwrap();
        assert_eq!(p.membership, vec![0, 0, 1]);
    }

    #[test]
    fn resolution_trades_community_count() {
        // A ring of 6 cliques of 5, neighbouring cliques joined by one edge.
        let mut edges = Vec::new();
        for c in 0..6 {
            for a in 0..5 {
                for b in a + 1..5 {
                    edges.push((c * 5 + a, c * 5 + b, 1.0));
                }
            }
            edges.push((c * 5, ((c + 1) % 6) * 5 + 1, 1.0));
        }
        let g = Graph::from_edges(30, &edges).unwrap();
        let count = |resolution: f64| {
            let cfg = LeidenConfig {
                resolution,
                ..LeidenConfig::default()
            };
            leiden(&g, &cfg).unwrap().communities
        };
        assert_eq!(count(1.0), 6, "one community per clique");
        assert!(count(0.05) < 6, "a low resolution merges cliques");
        assert_eq!(count(50.0), 30, "a huge resolution leaves singletons");
    }

    #[test]
    fn same_seed_same_partition_and_quality_never_drops() {
        let mut rng = Rng::new(3);
        let edges: Vec<(usize, usize, f64)> = (0..400)
            .map(|_| {
                let a = (rng.next_u64() % 120) as usize;
                let b = (rng.next_u64() % 120) as usize;
                (a, b, 1.0 + (rng.next_u64() % 3) as f64)
            })
            .collect();
        let g = Graph::from_edges(120, &edges).unwrap();
        let cfg = LeidenConfig::default();
        let a = leiden(&g, &cfg).unwrap();
        assert_eq!(a, leiden(&g, &cfg).unwrap());
        assert!((a.quality - g.quality(&a.membership, 1.0)).abs() < 1e-12);
        let one = leiden(
            &g,
            &LeidenConfig {
                max_iterations: 1,
                ..cfg
            },
        )
        .unwrap();
        assert!(a.quality >= one.quality - 1e-12);
        assert!(a.iterations >= one.iterations);
    }
}
