//! Sparse posteriors for large k, and the k-d tree over two-dimensional components that finds each point's candidates.

use super::*;

/// From this many components on, fits and predictions keep posteriors sparse (only the non-zero ones; a
/// posterior is exactly zero when its log-ratio to the point's best component is below [`NEGLIGIBLE`]),
/// and in two dimensions look each point's components up in a [`ComponentTree`] instead of scanning all
/// k: LeanRAG's first layer has k = N / 20, where a dense `n × k` matrix is quadratic in memory (a
/// 150,000-entity layer would need 9 GB per restart) and a full scan quadratic in time. Below it the dense
/// path is faster. Both give the same bits: a zero posterior adds ±0 to every sum, which leaves it as it is.
pub(super) const SPARSE_MIN_K: usize = 64;

/// Components per leaf of a [`ComponentTree`].
pub(super) const TREE_LEAF: usize = 8;

/// One block's posteriors, sparse: per point in order, its components of non-zero posterior in ascending
/// order with their posteriors.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct SparseRows {
    /// End of each point's entries in `comps` / `values`.
    pub(super) ends: Vec<usize>,
    pub(super) comps: Vec<u32>,
    pub(super) values: Vec<f64>,
}

impl SparseRows {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn row(&self, r: usize) -> (&[u32], &[f64]) {
        let start = if r == 0 { 0 } else { self.ends[r - 1] };
        let end = self.ends[r];
        (&self.comps[start..end], &self.values[start..end])
    }

    /// Every entry as `(point within the block, component, posterior)`, in order.
    pub(super) fn entries(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        (0..self.len()).flat_map(move |r| {
            let (comps, values) = self.row(r);
            comps
                .iter()
                .zip(values)
                .map(move |(&c, &v)| (r, c as usize, v))
        })
    }

    pub(super) fn push(&mut self, c: u32, v: f64) {
        self.comps.push(c);
        self.values.push(v);
    }

    pub(super) fn end_row(&mut self) {
        self.ends.push(self.comps.len());
    }

    /// The non-zero entries of a dense posterior row.
    pub(super) fn push_dense_row(&mut self, row: &[f64]) {
        for (c, &v) in row.iter().enumerate() {
            if v != 0.0 {
                self.push(c as u32, v);
            }
        }
        self.end_row();
    }
}

/// Posterior probabilities of every point, sparse: for each point, the components whose posterior is not
/// zero, in ascending order (a row sums to 1; it is empty only when the point's likelihood is not finite
/// under any component).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Posteriors {
    /// Blocks of [`BLOCK`] points (the last may be shorter).
    pub(super) blocks: Vec<SparseRows>,
    pub(super) n: usize,
}

impl Posteriors {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Point `i`'s components (ascending) and their posteriors. Panics when `i ≥ len()`.
    pub fn row(&self, i: usize) -> (&[u32], &[f64]) {
        self.blocks[i / BLOCK].row(i % BLOCK)
    }

    /// Every point's row, in point order.
    pub fn rows(&self) -> impl Iterator<Item = (&[u32], &[f64])> + '_ {
        self.blocks
            .iter()
            .flat_map(|b| (0..b.len()).map(move |r| b.row(r)))
    }

    /// Non-zero entries in all.
    pub fn nnz(&self) -> usize {
        self.blocks.iter().map(|b| b.comps.len()).sum()
    }
}

/// The two-dimensional components in a k-d tree over their means. Each node keeps the bounding box of its
/// means, the largest constant `ln w + ½ ln det Σ⁻¹ − ln 2π` and the smallest `s`, a lower bound of the
/// precision's smallest eigenvalue, so that every component `c` below it has, at a point `x`,
/// `term_c(x) ≤ constant_c − ½ s_c ‖x − μ_c‖² ≤ kmax − ½ smin · dist²(x, box)`. A point's candidates are
/// the components whose bound reaches `m + NEGLIGIBLE − margin`, `m` being the best term among the
/// components of the leaf nearest to it: every other component's posterior is exactly zero.
pub(super) struct ComponentTree {
    pub(super) nodes: Vec<TreeNode>,
    /// Component indices; each leaf is a range of them.
    pub(super) order: Vec<u32>,
    /// Per component, `s` (see above).
    pub(super) s: Vec<f64>,
}

pub(super) struct TreeNode {
    pub(super) lo: [f64; 2],
    pub(super) hi: [f64; 2],
    pub(super) kmax: f64,
    pub(super) smin: f64,
    pub(super) start: usize,
    pub(super) end: usize,
    /// Child nodes (`None` for a leaf).
    pub(super) children: Option<(usize, usize)>,
}

impl TreeNode {
    pub(super) fn dist2(&self, x0: f64, x1: f64) -> f64 {
        let d0 = (self.lo[0] - x0).max(x0 - self.hi[0]).max(0.0);
        let d1 = (self.lo[1] - x1).max(x1 - self.hi[1]).max(0.0);
        d0 * d0 + d1 * d1
    }
}

impl ComponentTree {
    pub(super) fn new(g: &Gmm, p: &Planar) -> Self {
        let k = g.k;
        let s = (0..k)
            .map(|c| {
                // L⁻¹ = [[a, 0], [b, c]]: the smallest eigenvalue of L⁻ᵀL⁻¹ is det² / λ_max ≥ det² / trace,
                // shrunk a little against rounding.
                let (a, b, d) = (
                    g.inv_chol[c * 4],
                    g.inv_chol[c * 4 + 2],
                    g.inv_chol[c * 4 + 3],
                );
                let bound = (a * d) * (a * d) / (a * a + b * b + d * d) * (1.0 - 1e-9);
                if bound.is_finite() && bound > 0.0 {
                    bound
                } else {
                    0.0
                }
            })
            .collect();
        let mut tree = Self {
            nodes: Vec::with_capacity(2 * k / TREE_LEAF + 2),
            order: (0..k as u32).collect(),
            s,
        };
        tree.build(p, 0, k);
        tree
    }

    /// Adds the node over `order[start..end]` and its subtree; returns its index.
    pub(super) fn build(&mut self, p: &Planar, start: usize, end: usize) -> usize {
        let (mut lo, mut hi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
        let (mut kmax, mut smin) = (f64::NEG_INFINITY, f64::INFINITY);
        for &c in &self.order[start..end] {
            let c = c as usize;
            for (axis, m) in [p.mx[c], p.my[c]].into_iter().enumerate() {
                lo[axis] = lo[axis].min(m);
                hi[axis] = hi[axis].max(m);
            }
            kmax = kmax.max(p.constant[c]);
            smin = smin.min(self.s[c]);
        }
        let index = self.nodes.len();
        self.nodes.push(TreeNode {
            lo,
            hi,
            kmax,
            smin,
            start,
            end,
            children: None,
        });
        if end - start > TREE_LEAF {
            let axis = usize::from(hi[1] - lo[1] > hi[0] - lo[0]);
            let coord = |c: &u32| {
                if axis == 0 {
                    p.mx[*c as usize]
                } else {
                    p.my[*c as usize]
                }
            };
            let mid = start + (end - start) / 2;
            self.order[start..end]
                .select_nth_unstable_by(mid - start, |a, b| coord(a).total_cmp(&coord(b)));
            let left = self.build(p, start, mid);
            let right = self.build(p, mid, end);
            self.nodes[index].children = Some((left, right));
        }
        index
    }

    /// The candidate components of point `(x0, x1)` into `out`, ascending (every component whose posterior
    /// may be non-zero; all of them when no finite term bounds the search).
    pub(super) fn candidates(
        &self,
        p: &Planar,
        x0: f64,
        x1: f64,
        out: &mut Vec<u32>,
        stack: &mut Vec<usize>,
    ) {
        out.clear();
        // A lower bound of the point's best term: the best among the nearest leaf's components.
        let mut node = 0;
        while let Some((l, r)) = self.nodes[node].children {
            node = if self.nodes[l].dist2(x0, x1) <= self.nodes[r].dist2(x0, x1) {
                l
            } else {
                r
            };
        }
        let leaf = &self.nodes[node];
        let best = self.order[leaf.start..leaf.end]
            .iter()
            .map(|&c| p.term(c as usize, x0, x1))
            .fold(f64::NEG_INFINITY, f64::max);
        if !best.is_finite() {
            out.extend(0..self.order.len() as u32);
            return;
        }
        // Rounding of the terms and of the bounds is far below this margin.
        let floor = best + NEGLIGIBLE - 1.0 - 1e-9 * best.abs();
        stack.clear();
        stack.push(0);
        while let Some(i) = stack.pop() {
            let n = &self.nodes[i];
            let reach = n.kmax - 0.5 * n.smin * n.dist2(x0, x1);
            if reach < floor && reach.is_finite() {
                continue;
            }
            match n.children {
                Some((l, r)) => {
                    stack.push(r);
                    stack.push(l);
                }
                None => {
                    for &c in &self.order[n.start..n.end] {
                        let ci = c as usize;
                        let (dx, dy) = (x0 - p.mx[ci], x1 - p.my[ci]);
                        let bound = p.constant[ci] - 0.5 * self.s[ci] * (dx * dx + dy * dy);
                        if bound >= floor || !bound.is_finite() {
                            out.push(c);
                        }
                    }
                }
            }
        }
        out.sort_unstable();
    }
}
