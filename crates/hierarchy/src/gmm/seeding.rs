//! k-means++ seeding: the full scan, and the k-d tree and sum tree version for large k.

use super::*;

/// k-means++ seeding (scikit-learn's variant with `2 + ⌊ln k⌋` local trials); returns the centre indices.
pub(super) fn kmeans_plus_plus(points: &Points, k: usize, rng: &mut SplitMix64) -> Vec<usize> {
    let n = points.len();
    let trials = 2 + (k as f64).ln() as usize;
    if n.saturating_mul(k).saturating_mul(trials) > SEEDING_SCAN_LIMIT {
        return kmeans_plus_plus_tree(points, k, rng);
    }
    let first = rng.below(n);
    let mut indices = vec![first];
    let mut closest: Vec<f64> = (0..n)
        .map(|i| squared_distance(points.row(i), points.row(first)))
        .collect();
    let mut pot: f64 = closest.iter().sum();
    let mut cumsum = vec![0.0; n];
    let mut candidate_dist = vec![0.0; n];
    let mut best_dist = vec![0.0; n];
    while indices.len() < k {
        let mut acc = 0.0;
        for (c, d) in cumsum.iter_mut().zip(&closest) {
            acc += d;
            *c = acc;
        }
        let mut best: Option<(f64, usize)> = None;
        for _ in 0..trials {
            let r = rng.next_f64() * pot;
            let cand = cumsum.partition_point(|&c| c < r).min(n - 1);
            let mut cand_pot = 0.0;
            for (i, (o, c)) in candidate_dist.iter_mut().zip(&closest).enumerate() {
                let s = squared_distance(points.row(i), points.row(cand));
                // `c.min(s)` for finite values, without the NaN bookkeeping.
                *o = if s < *c { s } else { *c };
                cand_pot += *o;
            }
            if best.is_none_or(|(p, _)| cand_pot < p) {
                best = Some((cand_pot, cand));
                best_dist.copy_from_slice(&candidate_dist);
            }
        }
        let Some((p, cand)) = best else { break };
        pot = p;
        std::mem::swap(&mut closest, &mut best_dist);
        indices.push(cand);
    }
    indices
}

/// Above this many distance evaluations (`n · k · trials`), k-means++ seeding runs on a k-d tree
/// ([`kmeans_plus_plus_tree`]) instead of rescanning every point per candidate, which is quadratic when k
/// grows with n (LeanRAG: k = N / 20).
pub(super) const SEEDING_SCAN_LIMIT: usize = 1 << 27;

/// k-means++ seeding as [`kmeans_plus_plus`] describes it, in time about `n · trials · log n` instead of
/// `n · k · trials`: the points sit in a k-d tree whose nodes know the largest squared distance to the
/// nearest centre below them, so a candidate visits only the points it brings closer; the draws by squared
/// distance descend a sum tree. The same distribution and the same random stream; the potentials are
/// maintained (`pot − decrease`) rather than re-added from scratch, so a near-tie between trials can go the
/// other way than in the full scan.
pub(super) fn kmeans_plus_plus_tree(points: &Points, k: usize, rng: &mut SplitMix64) -> Vec<usize> {
    let (n, d) = (points.len(), points.dim());
    let trials = 2 + (k as f64).ln() as usize;
    let first = rng.below(n);
    let mut indices = vec![first];
    let mut tree = PointTree::new(points);
    let mut closest: Vec<f64> = (0..n)
        .map(|i| squared_distance(points.row(i), points.row(first)))
        .collect();
    tree.refresh(&closest);
    let mut sums = SumTree::new(&closest);
    let mut centre = vec![0.0; d];
    while indices.len() < k {
        let pot = sums.total();
        let mut best: Option<(f64, usize)> = None;
        for _ in 0..trials {
            let r = rng.next_f64() * pot;
            let cand = sums.find(r).min(n - 1);
            centre.copy_from_slice(points.row(cand));
            let decrease = tree.decrease(points, &centre, &closest, None);
            let cand_pot = pot - decrease;
            if best.is_none_or(|(p, _)| cand_pot < p) {
                best = Some((cand_pot, cand));
            }
        }
        let Some((_, cand)) = best else { break };
        centre.copy_from_slice(points.row(cand));
        let mut changed = Vec::new();
        tree.decrease(points, &centre, &closest, Some(&mut changed));
        for (i, v) in changed {
            closest[i] = v;
            sums.set(i, v);
        }
        tree.refresh_after(&closest);
        indices.push(cand);
    }
    indices
}

/// A k-d tree over points (leaves of up to 16), each node with its bounding box and the largest
/// `closest` value among its points.
pub(super) struct PointTree {
    pub(super) d: usize,
    /// Point indices; each node is a range of them.
    pub(super) order: Vec<usize>,
    /// Per node: start, end, children (0 for a leaf: the root is never a child).
    pub(super) ranges: Vec<(usize, usize, usize, usize)>,
    /// Per node, `lo` then `hi` (2·d values).
    pub(super) boxes: Vec<f64>,
    /// Per node, the largest `closest` below it.
    pub(super) max: Vec<f64>,
    /// Nodes whose `max` may have dropped since the last refresh.
    pub(super) dirty: Vec<usize>,
}

impl PointTree {
    const LEAF: usize = 16;

    pub(super) fn new(points: &Points) -> Self {
        let mut t = Self {
            d: points.dim(),
            order: (0..points.len()).collect(),
            ranges: Vec::new(),
            boxes: Vec::new(),
            max: Vec::new(),
            dirty: Vec::new(),
        };
        t.build(points, 0, points.len());
        t.max = vec![0.0; t.ranges.len()];
        t
    }

    pub(super) fn build(&mut self, points: &Points, start: usize, end: usize) -> usize {
        let d = self.d;
        let index = self.ranges.len();
        let (mut lo, mut hi) = (vec![f64::INFINITY; d], vec![f64::NEG_INFINITY; d]);
        for &i in &self.order[start..end] {
            for (a, &v) in points.row(i).iter().enumerate() {
                lo[a] = lo[a].min(v);
                hi[a] = hi[a].max(v);
            }
        }
        self.ranges.push((start, end, 0, 0));
        self.boxes.extend(&lo);
        self.boxes.extend(&hi);
        if end - start > Self::LEAF {
            let axis = (0..d)
                .max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b])))
                .unwrap_or(0);
            let mid = start + (end - start) / 2;
            self.order[start..end].select_nth_unstable_by(mid - start, |&a, &b| {
                points.row(a)[axis].total_cmp(&points.row(b)[axis])
            });
            let left = self.build(points, start, mid);
            let right = self.build(points, mid, end);
            self.ranges[index].2 = left;
            self.ranges[index].3 = right;
        }
        index
    }

    pub(super) fn dist2(&self, node: usize, x: &[f64]) -> f64 {
        let d = self.d;
        let (lo, hi) = (
            &self.boxes[2 * d * node..2 * d * node + d],
            &self.boxes[2 * d * node + d..2 * d * (node + 1)],
        );
        x.iter()
            .zip(lo.iter().zip(hi))
            .map(|(&v, (&l, &h))| {
                let e = (l - v).max(v - h).max(0.0);
                e * e
            })
            .sum()
    }

    /// Recomputes every node's `max`.
    pub(super) fn refresh(&mut self, closest: &[f64]) {
        self.dirty = (0..self.ranges.len()).collect();
        self.refresh_after(closest);
    }

    /// Recomputes the `max` of the nodes marked dirty, deepest first (children are numbered after their
    /// parents).
    pub(super) fn refresh_after(&mut self, closest: &[f64]) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable_by(|a, b| b.cmp(a));
        dirty.dedup();
        for &node in &dirty {
            let (start, end, l, r) = self.ranges[node];
            self.max[node] = if l == 0 {
                self.order[start..end]
                    .iter()
                    .map(|&i| closest[i])
                    .fold(0.0, f64::max)
            } else {
                self.max[l].max(self.max[r])
            };
        }
        dirty.clear();
        self.dirty = dirty;
    }

    /// The potential's decrease if `centre` were added: `Σ max(0, closest − ‖x − centre‖²)`; with `changed`,
    /// also the new values of the points it brings closer (their nodes marked for a refresh).
    pub(super) fn decrease(
        &mut self,
        points: &Points,
        centre: &[f64],
        closest: &[f64],
        mut changed: Option<&mut Vec<(usize, f64)>>,
    ) -> f64 {
        let mut total = 0.0;
        let mut stack = vec![0usize];
        while let Some(node) = stack.pop() {
            if self.dist2(node, centre) >= self.max[node] {
                continue;
            }
            if changed.is_some() {
                self.dirty.push(node);
            }
            let (start, end, l, r) = self.ranges[node];
            if l != 0 {
                stack.push(r);
                stack.push(l);
                continue;
            }
            for &i in &self.order[start..end] {
                let s = squared_distance(points.row(i), centre);
                if s < closest[i] {
                    total += closest[i] - s;
                    if let Some(c) = changed.as_deref_mut() {
                        c.push((i, s));
                    }
                }
            }
        }
        total
    }
}

/// Sums of non-negative weights in a complete binary tree: the total, a weight's update and the draw of
/// the first index whose prefix sum reaches `r`, each in `log n`. Parents are recomputed from their
/// children, so sums never drift.
pub(super) struct SumTree {
    pub(super) size: usize,
    pub(super) sums: Vec<f64>,
}

impl SumTree {
    pub(super) fn new(weights: &[f64]) -> Self {
        let size = weights.len().next_power_of_two().max(1);
        let mut sums = vec![0.0; 2 * size];
        sums[size..size + weights.len()].copy_from_slice(weights);
        for i in (1..size).rev() {
            sums[i] = sums[2 * i] + sums[2 * i + 1];
        }
        Self { size, sums }
    }

    pub(super) fn total(&self) -> f64 {
        self.sums[1]
    }

    pub(super) fn set(&mut self, i: usize, v: f64) {
        let mut at = self.size + i;
        self.sums[at] = v;
        while at > 1 {
            at /= 2;
            self.sums[at] = self.sums[2 * at] + self.sums[2 * at + 1];
        }
    }

    /// The first index whose prefix sum reaches `r` (the last index when none does).
    pub(super) fn find(&self, mut r: f64) -> usize {
        let mut at = 1;
        while at < self.size {
            let left = self.sums[2 * at];
            if r <= left && left > 0.0 {
                at *= 2;
            } else {
                r -= left;
                at = 2 * at + 1;
            }
        }
        at - self.size
    }
}
