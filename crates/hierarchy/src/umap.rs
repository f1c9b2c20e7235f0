//! UMAP (McInnes, Healy & Melville 2018) as umap-learn runs it for HiRAG and LeanRAG: cosine distances, 15
//! neighbours, two components, `min_dist` 0.1, `spread` 1.0.
//!
//! Our own implementation rather than the `umap-rs` crate: that crate's SGD is Hogwild-parallel (its result
//! depends on the thread count and the scheduling), it panics on bad input, and it leaves the neighbour
//! search and the initialisation to the caller — which are most of what has to match umap-learn. The steps,
//! with umap-learn's constants:
//!
//! 1. **Neighbours**: exact cosine k-NN (umap-learn is exact below 4,096 points and approximate above; exact
//!    is never worse), each point its own first neighbour at distance 0. Each pair's similarity is
//!    computed once: bands of rows on the thread pool, each through matrix products against the rows from
//!    its own on, offering every similarity to both rows' running lists; most are turned away sixteen at a
//!    time by one vector comparison with the lists' current worst. A list's final set does not depend on
//!    the order of the offers (distance, then index), so not on the thread count.
//! 2. **Fuzzy simplicial set**: per point, `ρ` = the distance to the nearest other point (local
//!    connectivity 1) and `σ` by 64 bisection steps so that `Σ exp(−(d − ρ)/σ) = log₂ k`, floored at
//!    `10⁻³ ×` the mean distance; memberships `exp(−(d − ρ)/σ)`, symmetrised as `P + Pᵀ − P∘Pᵀ`.
//! 3. **Initialisation**: spectral — the eigenvectors of the normalised Laplacian for the second to third
//!    smallest eigenvalues, by Lanczos with full reorthogonalisation (classical Gram–Schmidt, twice, its
//!    products on the thread pool in a fixed order) from the all-ones vector (umap-learn asks ARPACK for
//!    them from the same start), scaled so the largest coordinate is 10, plus Gaussian
//!    noise of scale 10⁻⁴, then each coordinate rescaled to [0, 10]. A graph in several pieces or a
//!    Lanczos run that does not settle falls back to the leading principal components (umap-learn lays
//!    the pieces out one by one; said in [`UmapLayout::init`] and in the hierarchy's layer logs).
//! 4. **Layout**: `a`, `b` fitted to `min_dist` and `spread` as umap-learn's `find_ab_params`; edges below
//!    `max weight / n_epochs` dropped; 500 epochs up to 10,000 points, else 200; per edge, attraction every
//!    `max / w` epochs and 5 negative samples per attraction, gradients clipped at 4, learning rate
//!    decaying linearly from 1; f32 coordinates, as umap-learn's. umap-learn seeded runs this on one
//!    thread in edge order; unseeded (as HiRAG and LeanRAG call it) on every core, Hogwild. Ours is
//!    parallel and deterministic: the points fall in fixed partitions of 2,048 (by index, whatever the
//!    thread count); within an epoch each partition takes its heads' edges in umap-learn's order, moves its
//!    own points in place and reads other partitions' points as the epoch found them, and the steps its
//!    attractions give to other partitions' points are added when the epoch ends, partition by partition.
//!    Inside a partition the heads come 256 at a time as eight runs of consecutive heads whose samples are
//!    interleaved (each run in umap-learn's order; the eight coefficients computed side by side, then
//!    each lane adds its steps, so no step is lost when two lanes move one point), and negative samples
//!    come from a generator per epoch and partition. The same input and seed give the same layout on any machine and any number of threads
//!    (the powers come from our own polynomials, not the platform's `powf`: `x^b` is `2^(b log₂ x)` to
//!    below 10⁻⁵ relative). The `umap_musique` case of `cargo xtask perf` checks the result against
//!    umap-learn on MuSiQue (trustworthiness, the clusters HiRAG makes of the layout over twelve seeds,
//!    time). Tried and dropped, because over twelve seeds the BIC k of HiRAG's first layer fell below
//!    umap-learn's (median 5 against 7.5): computing an edge's negative samples from one position and
//!    summing their steps, and the repulsion coefficient from an interpolated table.
//!
//! Tiny inputs as umap-learn handles them: one point gives the origin; `N ≤ k` lowers `k` to `N − 1`.

use nalgebra::{DMatrix, SymmetricEigen};
use ndarray::{s, Array2};
use serde::{Deserialize, Serialize};

use crate::rng::SplitMix64;
use crate::{HierarchyError, Result};

/// UMAP's settings (umap-learn's defaults, and the references' 15 neighbours).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UmapConfig {
    /// Neighbours per point, the point itself included (`n_neighbors`).
    pub n_neighbors: usize,
    /// Output dimensions (`n_components`).
    pub n_components: usize,
    /// Smallest distance between points of the layout (`min_dist`).
    pub min_dist: f64,
    /// Scale of the layout (`spread`).
    pub spread: f64,
    /// Epochs; `None`: 500 up to 10,000 points, else 200 (umap-learn's choice).
    pub n_epochs: Option<usize>,
    /// Negative samples per attraction.
    pub negative_sample_rate: usize,
    /// Seed of every random choice (initial noise, negative samples).
    pub seed: u64,
}

impl UmapConfig {
    /// The settings HiRAG and LeanRAG reduce a layer of `n` points with: umap-learn's defaults, 15
    /// neighbours, `min(2, n − 2)` components (at least one), as the references call it; seeded.
    pub fn for_layer(n: usize, seed: u64) -> Self {
        Self {
            n_components: n.saturating_sub(2).clamp(1, 2),
            seed,
            ..Self::default()
        }
    }
}

impl Default for UmapConfig {
    fn default() -> Self {
        Self {
            n_neighbors: 15,
            n_components: 2,
            min_dist: 0.1,
            spread: 1.0,
            n_epochs: None,
            negative_sample_rate: 5,
            seed: 42,
        }
    }
}

/// How the layout was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UmapInit {
    /// Spectral embedding of the neighbour graph (umap-learn's default).
    Spectral,
    /// The leading principal components (the graph is in several pieces, or the eigenvectors did not
    /// settle).
    Pca,
    /// Nothing to lay out (one point, or every point the same).
    Trivial,
}

/// A UMAP layout: `n × n_components` coordinates, row-major, and how it was started.
#[derive(Debug, Clone, PartialEq)]
pub struct UmapLayout {
    /// Rows of the layout.
    pub n: usize,
    /// Columns of the layout.
    pub dim: usize,
    /// The coordinates, row-major.
    pub coords: Vec<f64>,
    /// How the layout was started.
    pub init: UmapInit,
    /// Neighbours used per point (after lowering for tiny inputs).
    pub n_neighbors: usize,
    /// Epochs run.
    pub n_epochs: usize,
    /// Seconds each step took.
    pub secs: UmapSecs,
}

/// Seconds each step of [`umap`] took (wall time; not part of the result's identity).
#[derive(Debug, Clone, Copy, Default)]
pub struct UmapSecs {
    /// The k-nearest-neighbour search.
    pub neighbours: f64,
    /// The fuzzy simplicial set.
    pub graph: f64,
    /// The initialisation (spectral, or PCA).
    pub init: f64,
    /// The SGD layout.
    pub layout: f64,
}

/// Equal whatever the times: layouts compare by their content.
impl PartialEq for UmapSecs {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The k nearest neighbours by cosine distance of every row (the row itself first), as `(index,
/// distance)` rows of length `k`.
pub fn cosine_knn(rows: &[&[f32]], k: usize) -> Result<Vec<Vec<(u32, f32)>>> {
    let n = rows.len();
    let k = k.min(n);
    let unit = unit_rows(rows)?;
    if k > 65 {
        // Many neighbours (a full ranking): whole rows, sorted.
        return Ok(per_row_similarities(&unit, 512, |i, sims| {
            nearest_of_row(sims, i, k)
        }));
    }
    Ok(symmetric_knn(&unit, k))
}

/// Rows per band of [`symmetric_knn`].
const KNN_BAND: usize = 256;

/// Columns per matrix product of [`symmetric_knn`].
const KNN_COLUMNS: usize = 1024;

/// Similarities scanned per vector test in [`symmetric_knn`].
const KNN_LANES: usize = 16;

/// The `k` (≤ 65) nearest rows of every unit row by cosine, each pair's similarity computed once: bands of
/// rows on the thread pool, each against the rows from its own on through matrix products of
/// [`KNN_COLUMNS`] columns; a product offers each of its rows' similarities to that row's list, and each
/// later row's to a list of the product's own, barred by what that row's shared list (behind a lock)
/// already holds and merged into it once the product is done. A list keeps its `k − 1` best by distance
/// `max(1 − s, 0)` then index — a set that does not depend on the order of the offers, so on no thread
/// count. Most similarities are turned away [`KNN_LANES`] at a time by one vector comparison.
fn symmetric_knn(unit: &Array2<f32>, k: usize) -> Vec<Vec<(u32, f32)>> {
    use rayon::prelude::*;
    use std::sync::Mutex;

    let n = unit.nrows();
    let keep = k.saturating_sub(1);
    if keep == 0 {
        return (0..n).map(|i| vec![(i as u32, 0.0)]).collect();
    }
    // The products read their columns as a transposed view of the rows: the matrix product packs its
    // operands either way (the same values, the same sums), and a transposed copy held another matrix of
    // the rows' size (46 MB at 45,000 rows of 256) through the search.
    let incoming: Vec<Mutex<Nearest>> = (0..n).map(|_| Mutex::new(Nearest::new(keep))).collect();
    let misses = |ds: &[f32], bars: &[f32]| -> bool {
        ds.iter()
            .zip(bars)
            .map(|(&s, &b)| u32::from((1.0 - s).max(0.0) <= b))
            .sum::<u32>()
            == 0
    };
    let bands: Vec<Vec<Nearest>> = (0..n.div_ceil(KNN_BAND))
        .into_par_iter()
        // Bands shrink from the first to the last: one per task, so that both threads stay busy.
        .with_max_len(1)
        .map(|t| {
            let rows_of = t * KNN_BAND..((t + 1) * KNN_BAND).min(n);
            let band = unit.slice(s![rows_of.clone(), ..]);
            let mut lists: Vec<Nearest> = rows_of.clone().map(|_| Nearest::new(keep)).collect();
            let mut start = rows_of.start;
            while start < n {
                let cols = start..(start + KNN_COLUMNS).min(n);
                let width = cols.len();
                let sims = band.dot(&unit.slice(s![cols.clone(), ..]).t());
                // Columns of later bands (the band's own are its rows' lists already).
                let later = rows_of.end.saturating_sub(start).min(width);
                let mut columns: Vec<Nearest> =
                    (later..width).map(|_| Nearest::new(keep)).collect();
                // What a later row's list already holds bars most of the band's offers.
                let mut bar: Vec<f32> = incoming[cols.start + later..cols.end]
                    .iter()
                    .map(|m| {
                        m.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .worst()
                    })
                    .collect();
                for (r, list) in lists.iter_mut().enumerate() {
                    let i = rows_of.start + r;
                    let owned;
                    let row = match sims.row(r).to_slice() {
                        Some(row) => row,
                        None => {
                            owned = sims.row(r).to_vec();
                            &owned[..]
                        }
                    };
                    let mut worst = [list.worst(); KNN_LANES];
                    for (g, chunk) in row.chunks(KNN_LANES).enumerate() {
                        if misses(chunk, &worst[..chunk.len()]) {
                            continue;
                        }
                        for (c, &s) in chunk.iter().enumerate() {
                            let j = cols.start + g * KNN_LANES + c;
                            let d = (1.0 - s).max(0.0);
                            if j != i && d <= worst[0] {
                                list.offer(j as u32, d);
                                worst = [list.worst(); KNN_LANES];
                            }
                        }
                    }
                    for ((chunk, bars), lists) in row[later..]
                        .chunks(KNN_LANES)
                        .zip(bar.chunks_mut(KNN_LANES))
                        .zip(columns.chunks_mut(KNN_LANES))
                    {
                        if misses(chunk, bars) {
                            continue;
                        }
                        for ((&s, b), column) in chunk.iter().zip(bars).zip(lists) {
                            let d = (1.0 - s).max(0.0);
                            if d <= *b {
                                column.offer(i as u32, d);
                                // The list is local to this product: keep the bar the later row's
                                // own list set until this one is tighter.
                                *b = b.min(column.worst());
                            }
                        }
                    }
                }
                for (c, column) in columns.into_iter().enumerate() {
                    incoming[cols.start + later + c]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .merge(&column);
                }
                start = cols.end;
            }
            lists
        })
        .collect();
    bands
        .into_iter()
        .flatten()
        .zip(incoming)
        .enumerate()
        .map(|(i, (mut list, other))| {
            list.merge(
                &other
                    .into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            let mut row = Vec::with_capacity(k);
            row.push((i as u32, 0.0));
            row.extend(list.items);
            row
        })
        .collect()
}

/// A running list of the `keep` nearest candidates, sorted by distance then index.
#[derive(Debug, Clone)]
struct Nearest {
    keep: usize,
    items: Vec<(u32, f32)>,
}

impl Nearest {
    fn new(keep: usize) -> Self {
        Self {
            keep,
            items: Vec::with_capacity(keep + 1),
        }
    }

    /// The distance a candidate must not exceed to enter (∞ until the list is full).
    fn worst(&self) -> f32 {
        if self.items.len() < self.keep {
            f32::INFINITY
        } else {
            self.items.last().map_or(f32::INFINITY, |&(_, d)| d)
        }
    }

    fn offer(&mut self, j: u32, d: f32) {
        let before = |&(e, f): &(u32, f32)| f < d || (f == d && e < j);
        if self.items.len() == self.keep && self.items.last().is_some_and(before) {
            return;
        }
        let at = self.items.partition_point(before);
        self.items.insert(at, (j, d));
        self.items.truncate(self.keep);
    }

    fn merge(&mut self, other: &Nearest) {
        for &(j, d) in &other.items {
            self.offer(j, d);
        }
    }
}

/// `f(i, s)` for every row `i` of `unit`, `s` its cosine similarities to every row: the similarities in
/// blocks of `block` rows through one matrix product each, the blocks on the thread pool; results in row
/// order (each row's result depends on that row alone, so on no thread count).
fn per_row_similarities<T: Send>(
    unit: &Array2<f32>,
    block: usize,
    f: impl Fn(usize, &[f32]) -> T + Sync,
) -> Vec<T> {
    use rayon::prelude::*;
    let n = unit.nrows();
    let all = unit.t();
    let blocks: Vec<Vec<T>> = (0..n.div_ceil(block))
        .into_par_iter()
        .map(|b| {
            let lo = b * block;
            let hi = (lo + block).min(n);
            let sims = unit.slice(s![lo..hi, ..]).dot(&all);
            (lo..hi)
                .map(|i| {
                    let row = sims.row(i - lo);
                    match row.as_slice() {
                        Some(r) => f(i, r),
                        None => f(i, &row.to_vec()),
                    }
                })
                .collect()
        })
        .collect();
    blocks.into_iter().flatten().collect()
}

/// The `k` nearest of one row of cosine similarities: the row's own point first (distance 0), then by
/// distance `max(1 − s, 0)`, ties by index. One pass that keeps the `k − 1` best seen so far in a
/// [`Nearest`]; most candidates are rejected by one comparison with the worst of them.
fn nearest_of_row(sims: &[f32], i: usize, k: usize) -> Vec<(u32, f32)> {
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k);
    best.push((i as u32, 0.0));
    let keep = k.saturating_sub(1);
    if keep == 0 {
        return best;
    }
    if keep > 64 {
        // Many neighbours (a full ranking): sort them all.
        let mut all: Vec<(u32, f32)> = sims
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(j, &s)| (j as u32, (1.0 - s).max(0.0)))
            .collect();
        let cmp = |a: &(u32, f32), b: &(u32, f32)| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0));
        if keep < all.len() {
            all.select_nth_unstable_by(keep - 1, cmp);
            all.truncate(keep);
        }
        all.sort_by(cmp);
        best.extend(all);
        return best;
    }
    let mut others = Nearest::new(keep);
    let mut worst = f32::INFINITY;
    for (j, &s) in sims.iter().enumerate() {
        let d = (1.0 - s).max(0.0);
        if j != i && d <= worst {
            others.offer(j as u32, d);
            worst = others.worst();
        }
    }
    best.extend(others.items);
    best
}

/// The rows scaled to unit length (a zero row stays zero), as an `n × dim` matrix.
fn unit_rows(rows: &[&[f32]]) -> Result<Array2<f32>> {
    let n = rows.len();
    let dim = rows.first().map_or(0, |r| r.len());
    let mut unit = Array2::<f32>::zeros((n, dim));
    for (i, r) in rows.iter().enumerate() {
        if r.len() != dim {
            return Err(HierarchyError::Input(format!(
                "embedding {i} has dimension {}, embedding 0 has {dim}",
                r.len()
            )));
        }
        let norm = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !norm.is_finite() {
            return Err(HierarchyError::Input(format!(
                "embedding {i} holds a NaN or infinite value"
            )));
        }
        if norm > 0.0 {
            for (j, x) in r.iter().enumerate() {
                unit[[i, j]] = x / norm;
            }
        }
    }
    Ok(unit)
}

/// A symmetric sparse graph: per node, `(neighbour, weight)` sorted by neighbour.
type Graph = Vec<Vec<(u32, f64)>>;

/// umap-learn's `smooth_knn_dist` and `compute_membership_strengths`, then the fuzzy union.
fn fuzzy_graph(knn: &[Vec<(u32, f32)>]) -> Graph {
    let n = knn.len();
    let k = knn.first().map_or(0, Vec::len);
    let target = (k as f64).log2();
    let mean_all = {
        let (sum, count) = knn
            .iter()
            .flatten()
            .fold((0.0f64, 0usize), |(s, c), &(_, d)| {
                (s + f64::from(d), c + 1)
            });
        if count == 0 {
            0.0
        } else {
            sum / count as f64
        }
    };
    let mut directed: Vec<Vec<(u32, f64)>> = Vec::with_capacity(n);
    for (i, row) in knn.iter().enumerate() {
        let dists: Vec<f64> = row.iter().map(|&(_, d)| f64::from(d)).collect();
        let rho = dists.iter().copied().find(|&d| d > 0.0).unwrap_or(0.0);
        let (mut lo, mut hi, mut mid) = (0.0f64, f64::INFINITY, 1.0f64);
        for _ in 0..64 {
            let psum: f64 = dists[1..]
                .iter()
                .map(|&d| {
                    let x = d - rho;
                    if x > 0.0 {
                        (-x / mid).exp()
                    } else {
                        1.0
                    }
                })
                .sum();
            if (psum - target).abs() < 1e-5 {
                break;
            }
            if psum > target {
                hi = mid;
                mid = (lo + hi) / 2.0;
            } else {
                lo = mid;
                if hi == f64::INFINITY {
                    mid *= 2.0;
                } else {
                    mid = (lo + hi) / 2.0;
                }
            }
        }
        let mean_i = dists.iter().sum::<f64>() / dists.len().max(1) as f64;
        let floor = if rho > 0.0 { mean_i } else { mean_all } * 1e-3;
        let sigma = mid.max(floor);
        let mut out = Vec::with_capacity(row.len());
        for &(j, d) in row {
            if j as usize == i {
                continue;
            }
            let x = f64::from(d) - rho;
            let w = if x <= 0.0 || sigma == 0.0 {
                1.0
            } else {
                (-x / sigma).exp()
            };
            out.push((j, w));
        }
        directed.push(out);
    }
    // P + Pᵀ − P∘Pᵀ.
    let mut sym: Vec<std::collections::BTreeMap<u32, (f64, f64)>> = vec![Default::default(); n];
    for (i, row) in directed.iter().enumerate() {
        for &(j, w) in row {
            sym[i].entry(j).or_default().0 = w;
            sym[j as usize].entry(i as u32).or_default().1 = w;
        }
    }
    sym.into_iter()
        .map(|m| {
            m.into_iter()
                .map(|(j, (p, q))| (j, p + q - p * q))
                .filter(|&(_, w)| w > 0.0)
                .collect()
        })
        .collect()
}

/// Connected pieces of the graph (their count).
fn components(g: &Graph) -> usize {
    let n = g.len();
    let mut seen = vec![false; n];
    let mut count = 0;
    for s in 0..n {
        if seen[s] {
            continue;
        }
        count += 1;
        seen[s] = true;
        let mut stack = vec![s];
        while let Some(u) = stack.pop() {
            for &(v, _) in &g[u] {
                if !seen[v as usize] {
                    seen[v as usize] = true;
                    stack.push(v as usize);
                }
            }
        }
    }
    count
}

/// The spectral layout: eigenvectors 2..=dim+1 of the normalised Laplacian `I − D^−½ A D^−½`, found as the
/// leading eigenvectors of `M = (I + D^−½ A D^−½) / 2` (same eigenvectors, eigenvalues shifted into [0, 1]
/// with the wanted ones on top) with the trivial eigenvector `D^½ 1` projected out. Lanczos with full
/// reorthogonalisation from the all-ones vector (umap-learn's `v0` for ARPACK; perturbed), restarted from the sum of
/// the wanted Ritz vectors when the Krylov space is full; done when every wanted Ritz pair's residual is
/// at most [`SPECTRAL_TOL`]. `None` when it does not settle.
fn spectral(g: &Graph, dim: usize) -> Option<Vec<f64>> {
    use rayon::prelude::*;

    let n = g.len();
    let deg: Vec<f64> = g.iter().map(|r| r.iter().map(|&(_, w)| w).sum()).collect();
    if deg.iter().any(|&d| d <= 0.0) || n < dim + 2 {
        return None;
    }
    let inv_sqrt: Vec<f64> = deg.iter().map(|d| 1.0 / d.sqrt()).collect();
    let mut trivial: Vec<f64> = deg.iter().map(|d| d.sqrt()).collect();
    let norm = dot_f64(&trivial, &trivial).sqrt();
    trivial.iter_mut().for_each(|x| *x /= norm);
    // `M`'s off-diagonal part, `½ D^−½ A D^−½`, row by row.
    let offsets: Vec<usize> = std::iter::once(0)
        .chain(g.iter().scan(0, |acc, r| {
            *acc += r.len();
            Some(*acc)
        }))
        .collect();
    let cols: Vec<u32> = g.iter().flatten().map(|&(j, _)| j).collect();
    let vals: Vec<f64> = g
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            let inv_sqrt = &inv_sqrt;
            r.iter()
                .map(move |&(j, w)| 0.5 * w * inv_sqrt[i] * inv_sqrt[j as usize])
        })
        .collect();
    // Rows per task of the vector kernels: each row's result is computed alone, in a fixed order.
    const ROWS: usize = 2048;
    let apply = |v: &[f64], out: &mut [f64]| {
        out.par_chunks_mut(ROWS).enumerate().for_each(|(c, chunk)| {
            for (r, o) in chunk.iter_mut().enumerate() {
                let i = c * ROWS + r;
                let span = offsets[i]..offsets[i + 1];
                let s: f64 = cols[span.clone()]
                    .iter()
                    .zip(&vals[span])
                    .map(|(&j, &w)| w * v[j as usize])
                    .sum();
                *o = 0.5 * v[i] + s;
            }
        });
    };
    let deflate = |v: &mut [f64]| {
        let c = dot_f64(v, &trivial);
        v.iter_mut().zip(&trivial).for_each(|(a, b)| *a -= c * b);
    };
    // `w ← w − Q Qᵀ w` against the basis `q` (rows of length n): the coefficients in parallel, then the
    // update in parallel over stretches of `w`, each element in basis order.
    let orthogonalise = |w: &mut [f64], q: &[f64]| {
        let coefs: Vec<f64> = q.par_chunks(n).map(|row| dot_f64(w, row)).collect();
        w.par_chunks_mut(ROWS).enumerate().for_each(|(c, part)| {
            let span = c * ROWS..c * ROWS + part.len();
            for (row, &coef) in q.chunks_exact(n).zip(&coefs) {
                part.iter_mut()
                    .zip(&row[span.clone()])
                    .for_each(|(x, y)| *x -= coef * y);
            }
        });
    };
    // The Krylov space: at most n − 1 vectors (the trivial direction is excluded), and a size that keeps
    // memory linear in n.
    let m_max = (n - 1).min(((n as f64).sqrt() as usize).clamp(4 * dim + 20, 400));
    // The all-ones start, slightly perturbed (fixed seed): a start with no component along a wanted
    // eigenvector (a symmetric graph and a symmetric start) would never find it.
    let mut wobble = SplitMix64::new(0x5350_4543);
    let mut start: Vec<f64> = (0..n)
        .map(|_| 1.0 + 0.1 * (wobble.next_f64() - 0.5))
        .collect();
    let mut basis: Vec<f64> = Vec::with_capacity(n * m_max);
    for _restart in 0..SPECTRAL_RESTARTS {
        deflate(&mut start);
        let norm = dot_f64(&start, &start).sqrt();
        if norm.is_nan() || norm <= 1e-12 {
            return None;
        }
        basis.clear();
        basis.extend(start.iter().map(|x| x / norm));
        let (mut alpha, mut beta): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
        let mut w = vec![0.0f64; n];
        loop {
            let size = basis.len() / n;
            let last = &basis[(size - 1) * n..];
            apply(last, &mut w);
            deflate(&mut w);
            alpha.push(dot_f64(&w, last));
            // Full reorthogonalisation against the whole basis, twice.
            orthogonalise(&mut w, &basis);
            orthogonalise(&mut w, &basis);
            let b = dot_f64(&w, &w).sqrt();
            let exhausted = b <= 1e-10 || size == m_max;
            if exhausted && size < dim {
                // An invariant subspace smaller than the layout: no spectral start.
                return None;
            }
            if size >= dim && (exhausted || size.is_multiple_of(10)) {
                let (values, vectors) = tridiagonal_eigen(&alpha, &beta);
                let mut order: Vec<usize> = (0..size).collect();
                order.sort_by(|&x, &y| values[y].total_cmp(&values[x]).then(x.cmp(&y)));
                let wanted = &order[..dim];
                let converged = b <= 1e-10
                    || wanted
                        .iter()
                        .all(|&c| (b * vectors[(size - 1, c)]).abs() <= SPECTRAL_TOL);
                if converged || exhausted {
                    let ritz: Vec<Vec<f64>> = wanted
                        .iter()
                        .map(|&c| {
                            let mut v = vec![0.0; n];
                            for (r, q) in basis.chunks_exact(n).enumerate() {
                                let s = vectors[(r, c)];
                                v.iter_mut().zip(q).for_each(|(x, y)| *x += s * y);
                            }
                            v
                        })
                        .collect();
                    if converged {
                        let mut out = vec![0.0; n * dim];
                        for (c, v) in ritz.iter().enumerate() {
                            // Fixed signs: the largest-magnitude coordinate positive.
                            let pivot = v
                                .iter()
                                .enumerate()
                                .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()).then(b.0.cmp(&a.0)))
                                .map_or(1.0, |(_, x)| x.signum());
                            for i in 0..n {
                                out[i * dim + c] = pivot * v[i];
                            }
                        }
                        return Some(out);
                    }
                    // Restart from the sum of the wanted Ritz vectors.
                    start = vec![0.0; n];
                    for v in &ritz {
                        start.iter_mut().zip(v).for_each(|(x, y)| *x += y);
                    }
                    break;
                }
            }
            beta.push(b);
            basis.extend(w.iter().map(|x| x / b));
        }
    }
    None
}

/// `Σ aᵢ bᵢ` in eight interleaved partial sums (a fixed order, so the same bits everywhere, and one the
/// compiler turns into vector instructions).
fn dot_f64(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Largest residual `‖M v − θ v‖` a wanted Ritz pair of [`spectral`] may keep.
const SPECTRAL_TOL: f64 = 1e-6;

/// Lanczos restarts before [`spectral`] gives up (and the layout starts from PCA).
const SPECTRAL_RESTARTS: usize = 30;

/// Eigenvalues and eigenvectors (columns) of the symmetric tridiagonal matrix with diagonal `alpha` and
/// off-diagonal `beta` (`beta.len() + 1 == alpha.len()`).
fn tridiagonal_eigen(alpha: &[f64], beta: &[f64]) -> (Vec<f64>, DMatrix<f64>) {
    let m = alpha.len();
    let t = DMatrix::from_fn(m, m, |a, b| {
        if a == b {
            alpha[a]
        } else if a + 1 == b {
            beta[a]
        } else if b + 1 == a {
            beta[b]
        } else {
            0.0
        }
    });
    let eig = SymmetricEigen::new(t);
    (eig.eigenvalues.iter().copied().collect(), eig.eigenvectors)
}

/// umap-learn's `find_ab_params`: least squares of `1 / (1 + a x^{2b})` against the target curve (1 below
/// `min_dist`, then `exp(−(x − min_dist)/spread)`) on 300 points of [0, 3·spread], by Gauss–Newton with
/// step halving from (1.6, 0.9).
pub fn find_ab_params(spread: f64, min_dist: f64) -> (f64, f64) {
    let xs: Vec<f64> = (0..300).map(|i| 3.0 * spread * i as f64 / 299.0).collect();
    let ys: Vec<f64> = xs
        .iter()
        .map(|&x| {
            if x < min_dist {
                1.0
            } else {
                (-(x - min_dist) / spread).exp()
            }
        })
        .collect();
    let loss = |a: f64, b: f64| -> f64 {
        xs.iter()
            .zip(&ys)
            .map(|(&x, &y)| {
                let f = 1.0 / (1.0 + a * x.powf(2.0 * b));
                (f - y) * (f - y)
            })
            .sum()
    };
    let (mut a, mut b) = (1.6f64, 0.9f64);
    for _ in 0..200 {
        let (mut jtj, mut jtr) = ([[0.0f64; 2]; 2], [0.0f64; 2]);
        for (&x, &y) in xs.iter().zip(&ys) {
            if x <= 0.0 {
                continue;
            }
            let p = x.powf(2.0 * b);
            let den = 1.0 + a * p;
            let f = 1.0 / den;
            let r = f - y;
            let da = -p / (den * den);
            let db = -a * p * 2.0 * x.ln() / (den * den);
            let jrow = [da, db];
            for u in 0..2 {
                jtr[u] += jrow[u] * r;
                for v in 0..2 {
                    jtj[u][v] += jrow[u] * jrow[v];
                }
            }
        }
        let det = jtj[0][0] * jtj[1][1] - jtj[0][1] * jtj[1][0];
        if det.abs() < 1e-300 {
            break;
        }
        let step_a = (jtj[1][1] * jtr[0] - jtj[0][1] * jtr[1]) / det;
        let step_b = (jtj[0][0] * jtr[1] - jtj[1][0] * jtr[0]) / det;
        let current = loss(a, b);
        let mut t = 1.0;
        let mut moved = false;
        while t > 1e-6 {
            let (na, nb) = (a - t * step_a, b - t * step_b);
            if na > 0.0 && nb > 0.0 && loss(na, nb) <= current {
                a = na;
                b = nb;
                moved = true;
                break;
            }
            t *= 0.5;
        }
        if !moved || (t * step_a).abs() < 1e-12 && (t * step_b).abs() < 1e-12 {
            break;
        }
    }
    (a, b)
}

/// Standard normal draw (Box–Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    let u1 = rng.next_f64().max(f64::MIN_POSITIVE);
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The leading principal components of the rows (the fallback initialisation).
fn pca_init(rows: &[&[f32]], dim: usize) -> Result<Vec<f64>> {
    let points = crate::reduce::reduce(rows, crate::Reduction::Pca(dim))?;
    let n = rows.len();
    let mut out = vec![0.0; n * dim];
    for i in 0..n {
        for (c, x) in points.row(i).iter().enumerate().take(dim) {
            out[i * dim + c] = *x;
        }
    }
    Ok(out)
}

/// UMAP of `rows` (all of one dimension) to `config.n_components` dimensions.
pub fn umap(rows: &[&[f32]], config: &UmapConfig) -> Result<UmapLayout> {
    umap_in_parts(rows, config, PARTITION_ROWS)
}

/// [`umap`] with the layout's partitions of `part_rows` points.
fn umap_in_parts(rows: &[&[f32]], config: &UmapConfig, part_rows: usize) -> Result<UmapLayout> {
    if config.n_neighbors < 2 || !(1..=MAX_COMPONENTS).contains(&config.n_components) {
        return Err(HierarchyError::Config(format!(
            "umap needs n_neighbors ≥ 2 and 1 ≤ n_components ≤ {MAX_COMPONENTS} (got {} and {})",
            config.n_neighbors, config.n_components
        )));
    }
    if !(config.min_dist >= 0.0 && config.spread > 0.0 && config.min_dist <= config.spread) {
        return Err(HierarchyError::Config(format!(
            "umap needs 0 ≤ min_dist ≤ spread, spread > 0 (got {} and {})",
            config.min_dist, config.spread
        )));
    }
    if config.negative_sample_rate > MAX_NEGATIVE_RATE {
        return Err(HierarchyError::Config(format!(
            "umap's negative_sample_rate is at most {MAX_NEGATIVE_RATE} (got {})",
            config.negative_sample_rate
        )));
    }
    if rows.len() >= ATTRACT as usize {
        return Err(HierarchyError::Input(format!(
            "umap takes fewer than 2^31 points (got {})",
            rows.len()
        )));
    }
    let n = rows.len();
    let dim = config.n_components;
    if n <= 1 || crate::reduce::all_identical(rows) {
        return Ok(UmapLayout {
            n,
            dim,
            coords: vec![0.0; n * dim],
            init: UmapInit::Trivial,
            n_neighbors: 0,
            n_epochs: 0,
            secs: UmapSecs::default(),
        });
    }
    // umap-learn: with N ≤ n_neighbors it uses N − 1 neighbours (the point itself included).
    let k_used = if n <= config.n_neighbors {
        (n - 1).max(2).min(n)
    } else {
        config.n_neighbors
    };
    let mut secs = UmapSecs::default();
    let clock = std::time::Instant::now();
    let knn = cosine_knn(rows, k_used)?;
    secs.neighbours = clock.elapsed().as_secs_f64();
    let clock = std::time::Instant::now();
    let graph = fuzzy_graph(&knn);
    drop(knn);
    secs.graph = clock.elapsed().as_secs_f64();
    let clock = std::time::Instant::now();
    let mut rng = SplitMix64::stream(config.seed, 0x554d_4150, 0);
    let (mut coords, init) = match (components(&graph) == 1)
        .then(|| spectral(&graph, dim))
        .flatten()
    {
        Some(c) => (c, UmapInit::Spectral),
        None => (pca_init(rows, dim)?, UmapInit::Pca),
    };
    // Scale so the largest |coordinate| is 10, add noise, then each column to [0, 10].
    let max = coords.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let expansion = if max > 0.0 { 10.0 / max } else { 1.0 };
    for x in &mut coords {
        *x = *x * expansion + 1e-4 * normal(&mut rng);
    }
    for c in 0..dim {
        let (lo, hi) = (0..n).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), i| {
            (lo.min(coords[i * dim + c]), hi.max(coords[i * dim + c]))
        });
        let span = if hi > lo { hi - lo } else { 1.0 };
        for i in 0..n {
            coords[i * dim + c] = 10.0 * (coords[i * dim + c] - lo) / span;
        }
    }
    secs.init = clock.elapsed().as_secs_f64();
    let clock = std::time::Instant::now();
    let n_epochs = config
        .n_epochs
        .unwrap_or(if n <= 10_000 { 500 } else { 200 })
        .max(1);
    let mut layout: Vec<f32> = coords.iter().map(|&x| x as f32).collect();
    optimize(
        &graph,
        &mut layout,
        dim,
        n_epochs,
        config,
        &mut rng,
        part_rows,
    );
    secs.layout = clock.elapsed().as_secs_f64();
    Ok(UmapLayout {
        n,
        dim,
        coords: layout.into_iter().map(f64::from).collect(),
        init,
        n_neighbors: k_used,
        n_epochs,
        secs,
    })
}

/// Most output dimensions the layout takes (its inner loops are compiled for each count).
pub const MAX_COMPONENTS: usize = 8;

/// umap-learn's `optimize_layout_euclidean` (`move_other`: both ends of an edge move) on f32 coordinates as
/// umap-learn's, in fixed partitions (see [`sgd`]), with `x^b` by [`pow_pos`]; `coords` row-major with `dim`
/// columns (1 ..= [`MAX_COMPONENTS`]).
fn optimize(
    graph: &Graph,
    coords: &mut [f32],
    dim: usize,
    n_epochs: usize,
    config: &UmapConfig,
    rng: &mut SplitMix64,
    part_rows: usize,
) {
    macro_rules! run {
        ($($d:literal)*) => {
            match dim {
                $($d => {
                    let mut points: Vec<[f32; $d]> = coords
                        .chunks_exact($d)
                        .map(|c| std::array::from_fn(|i| c[i]))
                        .collect();
                    sgd::<$d>(graph, &mut points, n_epochs, config, rng, part_rows);
                    for (c, p) in coords.chunks_exact_mut($d).zip(&points) {
                        c.copy_from_slice(p);
                    }
                })*
                _ => {}
            }
        };
    }
    run!(1 2 3 4 5 6 7 8);
}

/// Most negative samples per attraction a layout takes (they are buffered per batch of heads).
pub const MAX_NEGATIVE_RATE: usize = 1000;

/// Rows per partition of the layout's epochs: the partitions are fixed by the input alone (never by the
/// thread count), so the layout is the same on any number of threads.
const PARTITION_ROWS: usize = 2048;

/// Heads whose samples one partition interleaves, so that their dependency chains overlap in the CPU.
const LANES: usize = 8;

/// Heads whose samples are drawn, then applied, at a time (bounds the sample buffers).
const CHUNK_HEADS: usize = 256;

/// Set on a sample's `other` index when it is the edge's attraction (else it is a negative sample).
const ATTRACT: u32 = 1 << 31;

/// The edges the layout samples, by head: `tails[row[h]..row[h + 1]]` (and their schedules) are `h`'s.
struct Edges {
    row: Vec<usize>,
    tails: Vec<u32>,
    eps: Vec<f64>,
    eps_neg: Vec<f64>,
}

/// One partition of the points: the heads it moves, its edges' schedules, its sample buffers and the steps
/// its attractions give to other partitions' points.
struct Part<const D: usize> {
    heads: std::ops::Range<usize>,
    next_sample: Vec<f64>,
    next_negative: Vec<f64>,
    lanes: Vec<Vec<(u32, u32)>>,
    deltas: Vec<(u32, [f32; D])>,
}

/// The layout's constants in one epoch.
#[derive(Clone, Copy)]
struct Step {
    a: f32,
    b: f32,
    alpha: f32,
}

/// [`optimize`] for `D` output dimensions, in partitions of `part_rows` points.
///
/// Each epoch, every partition goes through its heads' edges in umap-learn's order (the attraction of an
/// edge that is due, then its negative samples one after another), moving its own points in place and
/// reading other partitions' points as they stood when the epoch began; the steps its attractions give to
/// other partitions' points are added when the epoch ends, partition by partition. Inside a partition,
/// [`CHUNK_HEADS`] heads at a time make [`LANES`] runs of consecutive heads whose samples are interleaved
/// (each run's samples stay in order). Negative samples draw
/// from a generator per epoch and partition. All of it depends on the input and the seed only.
fn sgd<const D: usize>(
    graph: &Graph,
    coords: &mut [[f32; D]],
    n_epochs: usize,
    config: &UmapConfig,
    rng: &mut SplitMix64,
    part_rows: usize,
) {
    use rayon::prelude::*;

    let n = graph.len();
    let (a, b) = find_ab_params(config.spread, config.min_dist);
    let (a, b) = (a as f32, b as f32);
    let max_w = graph.iter().flatten().fold(0.0f64, |m, &(_, w)| m.max(w));
    if max_w <= 0.0 || n < 2 || coords.len() != n || n >= ATTRACT as usize {
        return;
    }
    let cut = max_w / n_epochs as f64;
    let rate = config.negative_sample_rate.max(1) as f64;
    let mut edges = Edges {
        row: Vec::with_capacity(n + 1),
        tails: Vec::new(),
        eps: Vec::new(),
        eps_neg: Vec::new(),
    };
    edges.row.push(0);
    for row in graph {
        for &(j, w) in row {
            if w >= cut {
                edges.tails.push(j);
                // Epochs per sample: the heaviest edge is sampled every epoch.
                edges.eps.push(max_w / w);
                edges.eps_neg.push(max_w / w / rate);
            }
        }
        edges.row.push(edges.tails.len());
    }
    let part_rows = part_rows.max(1);
    let mut parts: Vec<Part<D>> = (0..n.div_ceil(part_rows))
        .map(|p| {
            let heads = p * part_rows..((p + 1) * part_rows).min(n);
            let span = edges.row[heads.start]..edges.row[heads.end];
            Part {
                next_sample: edges.eps[span.clone()].to_vec(),
                next_negative: edges.eps_neg[span].to_vec(),
                heads,
                lanes: vec![Vec::new(); LANES],
                deltas: Vec::new(),
            }
        })
        .collect();
    let draw_seed = rng.next_u64();
    let mut snapshot = coords.to_vec();
    for epoch in 0..n_epochs {
        let step = Step {
            a,
            b,
            alpha: 1.0 - epoch as f32 / n_epochs as f32,
        };
        if parts.len() > 1 {
            snapshot.copy_from_slice(coords);
        }
        let mut slices: Vec<&mut [[f32; D]]> = Vec::with_capacity(parts.len());
        let mut rest = &mut coords[..];
        for part in &parts {
            let (own, tail) = rest.split_at_mut(part.heads.len());
            slices.push(own);
            rest = tail;
        }
        parts
            .par_iter_mut()
            .zip(slices)
            .enumerate()
            .for_each(|(p, (part, own))| {
                let mut draw = SplitMix64::stream(draw_seed, epoch as u64, p as u64);
                part.epoch(own, &snapshot, &edges, epoch as f64, step, &mut draw);
            });
        for part in &mut parts {
            for (o, d) in part.deltas.drain(..) {
                let p = &mut coords[o as usize];
                for c in 0..D {
                    p[c] += d[c];
                }
            }
        }
    }
}

impl<const D: usize> Part<D> {
    /// One epoch of this partition's heads: see [`sgd`].
    fn epoch(
        &mut self,
        own: &mut [[f32; D]],
        snapshot: &[[f32; D]],
        edges: &Edges,
        e_f: f64,
        step: Step,
        draw: &mut SplitMix64,
    ) {
        let n = snapshot.len();
        let h0 = self.heads.start;
        let e0 = edges.row[h0];
        let mut start = self.heads.start;
        while start < self.heads.end {
            let end = (start + CHUNK_HEADS).min(self.heads.end);
            for lane in &mut self.lanes {
                lane.clear();
            }
            for h in start..end {
                // Each lane a run of consecutive heads (neighbouring heads are often each other's
                // neighbours; apart, they rarely meet in one batch).
                let lane = &mut self.lanes[(h - start) * LANES / (end - start)];
                for idx in edges.row[h]..edges.row[h + 1] {
                    let local = idx - e0;
                    if self.next_sample[local] > e_f {
                        continue;
                    }
                    lane.push((h as u32, edges.tails[idx] | ATTRACT));
                    self.next_sample[local] += edges.eps[idx];
                    let n_neg =
                        ((e_f - self.next_negative[local]) / edges.eps_neg[idx]).max(0.0) as usize;
                    for _ in 0..n_neg {
                        let k = draw.below_fast(n);
                        if k != h {
                            lane.push((h as u32, k as u32));
                        }
                    }
                    self.next_negative[local] += n_neg as f64 * edges.eps_neg[idx];
                }
            }
            // Lanes padded to one length with a head against itself (no step).
            let longest = self.lanes.iter().map(Vec::len).max().unwrap_or(0);
            for lane in &mut self.lanes {
                lane.resize(longest, (start as u32, start as u32));
            }
            for t in 0..longest {
                let batch: [(u32, u32); LANES] = std::array::from_fn(|l| self.lanes[l][t]);
                samples(own, snapshot, h0, &batch, step, &mut self.deltas);
            }
            start = end;
        }
    }
}

/// One sample from each lane of [`sgd`]: head `h` (in `own`, which starts at point `h0`) against `o` (an
/// attraction when it carries [`ATTRACT`]; then `o` moves too, in place when it is in `own`, else by a step
/// in `deltas`). Every lane reads its two points first, the coefficients are computed side by side, then
/// the lanes add their steps in order (steps, so that a point two lanes move keeps both).
#[inline(always)]
fn samples<const D: usize>(
    own: &mut [[f32; D]],
    snapshot: &[[f32; D]],
    h0: usize,
    batch: &[(u32, u32); LANES],
    step: Step,
    deltas: &mut Vec<(u32, [f32; D])>,
) {
    let Step { a, b, alpha } = step;
    let mut current = [[0.0f32; D]; LANES];
    let mut other = [[0.0f32; D]; LANES];
    let mut attract = [false; LANES];
    let mut mine = [false; LANES];
    let mut d2 = [0.0f32; LANES];
    let last = own.len() - 1;
    for l in 0..LANES {
        let (h, o) = batch[l];
        attract[l] = o & ATTRACT != 0;
        let o = (o & !ATTRACT) as usize;
        let ol = o.wrapping_sub(h0);
        mine[l] = ol <= last;
        current[l] = own[h as usize - h0];
        // Both reads, then a choice (no branch to mispredict).
        let (live, start) = (own[ol.min(last)], snapshot[o]);
        other[l] = if mine[l] { live } else { start };
        for c in 0..D {
            d2[l] += (current[l][c] - other[l][c]) * (current[l][c] - other[l][c]);
        }
    }
    // Attraction −2ab d^(2(b−1)) / (1 + a d^(2b)), repulsion 2b / ((0.001 + d²)(1 + a d^(2b))): d^(2b) from
    // one power, one division.
    let mut coeff = [0.0f32; LANES];
    for l in 0..LANES {
        let x = d2[l].max(f32::MIN_POSITIVE);
        let pb = pow_pos(x, b);
        let (num, den) = if attract[l] {
            (-2.0 * a * b * pb, x)
        } else {
            (2.0 * b, 0.001 + x)
        };
        let c = num / (den * (a * pb + 1.0));
        coeff[l] = if d2[l] > 0.0 { c } else { 0.0 };
    }
    for l in 0..LANES {
        if d2[l] <= 0.0 {
            continue;
        }
        let (h, o) = batch[l];
        let o = (o & !ATTRACT) as usize;
        let mut g = [0.0f32; D];
        for c in 0..D {
            g[c] = (coeff[l] * (current[l][c] - other[l][c])).clamp(-4.0, 4.0) * alpha;
        }
        // Steps, not positions, are written: a point two lanes of the batch move keeps both steps.
        let p = &mut own[h as usize - h0];
        for c in 0..D {
            p[c] += g[c];
        }
        if attract[l] {
            if mine[l] {
                let p = &mut own[o.wrapping_sub(h0)];
                for c in 0..D {
                    p[c] -= g[c];
                }
            } else {
                deltas.push((o as u32, g.map(|x| -x)));
            }
        }
    }
}

/// `x^y` for `x > 0` as `2^(y · log₂ x)` with short polynomials: relative error below 10⁻⁵, from
/// additions, multiplications and one division only — the same bits on every machine (a platform `powf`
/// may differ in the last place between libms), and several times faster than `powf`.
#[inline(always)]
fn pow_pos(x: f32, y: f32) -> f32 {
    exp2_approx(y * log2_approx(x.max(f32::MIN_POSITIVE)))
}

/// `log₂ x` for normal `x > 0`: exponent from the bits, the mantissa brought into [√½, √2) and
/// `ln m = 2 atanh t`, `t = (m − 1)/(m + 1)`, `|t| ≤ 0.172`, by its series to `t⁹`.
#[inline(always)]
fn log2_approx(x: f32) -> f32 {
    let bits = x.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 127;
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    if m > std::f32::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let series =
        t * (2.0 + t2 * (2.0 / 3.0 + t2 * (2.0 / 5.0 + t2 * (2.0 / 7.0 + t2 * (2.0 / 9.0)))));
    e as f32 + series * std::f32::consts::LOG2_E
}

/// `2^y`, clamped to the normal range: `2^round(y)` from the bits times `e^(f ln 2)`, `|f| ≤ ½`, by its
/// Taylor series to the seventh power.
#[inline(always)]
fn exp2_approx(y: f32) -> f32 {
    let y = y.clamp(-126.0, 126.0);
    // round(y) without a libm call: y + 127.5 > 0, so the cast's truncation is a floor.
    let i = (y + 127.5) as i32 - 127;
    let x = (y - i as f32) * std::f32::consts::LN_2;
    let p = 1.0
        + x * (1.0
            + x * (0.5
                + x * (1.0 / 6.0
                    + x * (1.0 / 24.0
                        + x * (1.0 / 120.0 + x * (1.0 / 720.0 + x * (1.0 / 5040.0)))))));
    p * f32::from_bits(((i + 127) as u32) << 23)
}

/// Trustworthiness (Venna & Kaski) of a layout with `k` neighbours, as scikit-learn computes it: how far
/// the layout's nearest neighbours of each point fall in the original space's neighbour ranking (1 = every
/// layout neighbour is an original one), original distances by cosine, ties by index. Rows in blocks
/// through one matrix product each (memory linear in n); a layout neighbour outside the original `k`
/// nearest is ranked by one pass over its row.
pub fn trustworthiness(rows: &[&[f32]], layout: &UmapLayout, k: usize) -> Result<f64> {
    let n = rows.len();
    if n != layout.n || k == 0 || 2 * k >= n {
        return Err(HierarchyError::Input(format!(
            "trustworthiness needs n > 2k and one layout row per point (n {n}, k {k}, layout {})",
            layout.n
        )));
    }
    let unit = unit_rows(rows)?;
    let dim = layout.dim;
    let penalties = per_row_similarities(&unit, 256, |i, row| {
        let original = nearest_of_row(row, i, k + 1);
        // The layout's k nearest of i, by squared distance, ties by index.
        let p = &layout.coords[i * dim..(i + 1) * dim];
        let mut near: Vec<(f64, usize)> = (0..n)
            .filter(|&j| j != i)
            .map(|j| {
                let q = &layout.coords[j * dim..(j + 1) * dim];
                (
                    p.iter().zip(q).map(|(x, y)| (x - y).powi(2)).sum::<f64>(),
                    j,
                )
            })
            .collect();
        let cmp = |x: &(f64, usize), y: &(f64, usize)| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1));
        near.select_nth_unstable_by(k - 1, cmp);
        let mut penalty = 0.0f64;
        for &(_, j) in &near[..k] {
            if original.iter().any(|&(o, _)| o as usize == j) {
                continue;
            }
            let dj = (1.0 - row[j]).max(0.0);
            let rank = row
                .iter()
                .enumerate()
                .filter(|&(l, &s)| {
                    let d = (1.0 - s).max(0.0);
                    l != i && (d < dj || (d == dj && l < j))
                })
                .count()
                + 1;
            penalty += rank.saturating_sub(k) as f64;
        }
        penalty
    });
    // Whole numbers: the sum is exact in any order.
    let penalty: f64 = penalties.iter().sum();
    let (n, k) = (n as f64, k as f64);
    Ok(1.0 - penalty * 2.0 / (n * k * (2.0 * n - 3.0 * k - 1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three well-separated groups of unit-ish vectors in 16 dimensions.
    fn blobs(per: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = SplitMix64::new(seed);
        let mut rows = Vec::new();
        for c in 0..3 {
            for _ in 0..per {
                let mut v = vec![0.0f32; 16];
                v[c * 5] = 1.0;
                v[c * 5 + 1] = 0.5;
                for x in &mut v {
                    *x += 0.15 * (rng.next_f64() as f32 - 0.5);
                }
                rows.push(v);
            }
        }
        rows
    }

    /// `f` on a pool of `threads` threads.
    fn on_threads<T: Send>(
        threads: usize,
        f: impl FnOnce() -> std::result::Result<T, String> + Send,
    ) -> std::result::Result<T, String> {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| e.to_string())
            .and_then(|pool| pool.install(f))
    }

    #[test]
    fn ab_params_match_umap_learn() {
        // umap-learn's find_ab_params(1.0, 0.1) gives a ≈ 1.5769, b ≈ 0.8951.
        let (a, b) = find_ab_params(1.0, 0.1);
        assert!(
            (a - 1.577).abs() < 0.01 && (b - 0.895).abs() < 0.01,
            "{a} {b}"
        );
    }

    #[test]
    fn knn_puts_the_point_first_then_by_cosine() {
        let rows: Vec<Vec<f32>> = vec![
            vec![1.0, 0.0],
            vec![0.9, 0.1],
            vec![0.0, 1.0],
            vec![-1.0, 0.0],
        ];
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let knn = cosine_knn(&refs, 3).map_err(|e| e.to_string());
        let ids: Vec<Vec<u32>> = knn
            .iter()
            .flatten()
            .map(|r| r.iter().map(|x| x.0).collect())
            .collect();
        assert_eq!(
            ids,
            vec![vec![0, 1, 2], vec![1, 0, 2], vec![2, 1, 0], vec![3, 2, 1]]
        );
    }

    #[test]
    fn separated_groups_stay_apart_deterministically() {
        let rows = blobs(40, 7);
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let config = UmapConfig::default();
        let a = umap(&refs, &config).map_err(|e| e.to_string());
        let b = umap(&refs, &config).map_err(|e| e.to_string());
        assert_eq!(a, b, "same input and seed, same layout");
        let Ok(layout) = a else { return };
        assert_eq!(
            layout.init,
            UmapInit::Pca,
            "three pieces: no spectral layout"
        );
        let t = trustworthiness(&refs, &layout, 15).map_err(|e| e.to_string());
        assert!(t.as_ref().is_ok_and(|t| *t > 0.9), "{t:?}");
        groups_apart(&layout, 3, 40);
    }

    /// Every point of `layout` nearer its own group's centre (groups of `per` consecutive rows) than
    /// any other group's.
    fn groups_apart(layout: &UmapLayout, groups: usize, per: usize) {
        let centre = |g: usize| -> [f64; 2] {
            let mut c = [0.0; 2];
            for i in g * per..(g + 1) * per {
                c[0] += layout.coords[2 * i] / per as f64;
                c[1] += layout.coords[2 * i + 1] / per as f64;
            }
            c
        };
        let centres: Vec<[f64; 2]> = (0..groups).map(centre).collect();
        for i in 0..groups * per {
            let p = [layout.coords[2 * i], layout.coords[2 * i + 1]];
            let d: Vec<f64> = centres
                .iter()
                .map(|c| (p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2))
                .collect();
            let best = (0..groups).min_by(|&x, &y| d[x].total_cmp(&d[y]));
            assert_eq!(best, Some(i / per), "point {i}");
        }
    }

    #[test]
    fn partitioned_layout_keeps_the_groups_and_ignores_the_thread_count() {
        // 120 points in partitions of 16: most attractions and negative samples cross partitions.
        let rows = blobs(40, 7);
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let run = |threads: usize| {
            on_threads(threads, || {
                umap_in_parts(&refs, &UmapConfig::default(), 16).map_err(|e| e.to_string())
            })
        };
        let one = run(1);
        assert!(one.is_ok(), "{one:?}");
        assert_eq!(one, run(2));
        assert_eq!(one, run(3));
        let Ok(layout) = one else { return };
        let whole = umap_in_parts(&refs, &UmapConfig::default(), 1 << 20);
        assert!(
            whole.as_ref().is_ok_and(|w| w.coords != layout.coords),
            "partitions change the steps' order"
        );
        let t = trustworthiness(&refs, &layout, 15).map_err(|e| e.to_string());
        assert!(t.as_ref().is_ok_and(|t| *t > 0.9), "{t:?}");
        groups_apart(&layout, 3, 40);
    }

    #[test]
    fn knn_across_bands_is_exact_and_ignores_the_thread_count() {
        // 1,300 rows: six bands, so most pairs meet in a product of two different bands, and two column
        // blocks per band; every fifth row repeats an earlier one (ties, broken by index).
        let mut rng = SplitMix64::new(21);
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for i in 0..1300 {
            if i % 5 == 4 {
                let j = rng.below(i);
                rows.push(rows[j].clone());
            } else {
                rows.push((0..12).map(|_| rng.next_f64() as f32 - 0.5).collect());
            }
        }
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let k = 15;
        let run = |threads: usize| {
            on_threads(threads, || cosine_knn(&refs, k).map_err(|e| e.to_string()))
        };
        let one = run(1);
        assert_eq!(one, run(2));
        assert_eq!(one, run(3));
        let Ok(knn) = one else { return };
        // Against a direct ranking in f64 (distances to 1e-5; where two are that close, either order).
        let unit: Vec<Vec<f64>> = rows
            .iter()
            .map(|r| {
                let norm = r.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
                r.iter().map(|&x| f64::from(x) / norm).collect()
            })
            .collect();
        for (i, got) in knn.iter().enumerate() {
            assert_eq!(got.len(), k);
            assert_eq!(got[0], (i as u32, 0.0), "row {i} first");
            let mut truth: Vec<(usize, f64)> = (0..rows.len())
                .filter(|&j| j != i)
                .map(|j| {
                    let s: f64 = unit[i].iter().zip(&unit[j]).map(|(a, b)| a * b).sum();
                    (j, (1.0 - s).max(0.0))
                })
                .collect();
            truth.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            for (r, &(j, d)) in got[1..].iter().enumerate() {
                assert!((f64::from(d) - truth[r].1).abs() < 1e-5, "row {i} rank {r}");
                let exact = truth.iter().find(|t| t.0 == j as usize).map(|t| t.1);
                assert!(
                    exact.is_some_and(|e| (e - f64::from(d)).abs() < 1e-5),
                    "row {i} → {j}"
                );
            }
            // Ties by index: a repeated row's twins come in index order.
            for w in got[1..].windows(2) {
                assert!(
                    w[0].1 < w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0),
                    "row {i}: {w:?}"
                );
            }
        }
    }

    #[test]
    fn a_connected_graph_gets_the_spectral_start() {
        // Points along a noisy arc: one piece.
        let mut rng = SplitMix64::new(3);
        let rows: Vec<Vec<f32>> = (0..150)
            .map(|i| {
                let t = i as f64 / 150.0 * 3.0;
                vec![
                    t.cos() as f32,
                    t.sin() as f32,
                    0.05 * (rng.next_f64() as f32 - 0.5),
                    0.3,
                ]
            })
            .collect();
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let layout = umap(&refs, &UmapConfig::default()).map_err(|e| e.to_string());
        assert!(
            layout.as_ref().is_ok_and(|l| l.init == UmapInit::Spectral),
            "{layout:?}"
        );
        let Ok(layout) = layout else { return };
        let t = trustworthiness(&refs, &layout, 10).map_err(|e| e.to_string());
        assert!(t.as_ref().is_ok_and(|t| *t > 0.9), "{t:?}");
    }

    /// Scale check by hand (`cargo test --release -p kgrag-hierarchy --lib umap_scale -- --ignored
    /// --nocapture`): 16,000 × 384 vectors in 40 noisy groups, the size of MuSiQue's entity layer.
    #[test]
    #[ignore = "timing by hand, release build"]
    fn umap_scale() {
        let mut rng = SplitMix64::new(11);
        let centres: Vec<Vec<f32>> = (0..40)
            .map(|_| (0..384).map(|_| rng.next_f64() as f32 - 0.5).collect())
            .collect();
        let rows: Vec<Vec<f32>> = (0..16_000)
            .map(|i| {
                centres[i % 40]
                    .iter()
                    .map(|c| c + 0.6 * (rng.next_f64() as f32 - 0.5))
                    .collect()
            })
            .collect();
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let t = std::time::Instant::now();
        let knn = cosine_knn(&refs, 15).map_err(|e| e.to_string());
        let t_knn = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let layout = umap(&refs, &UmapConfig::default()).map_err(|e| e.to_string());
        let total = t.elapsed().as_secs_f64();
        println!(
            "umap 16000 x 384: knn {t_knn:.2} s, whole {total:.2} s, init {:?}, epochs {:?}, steps {:?}",
            layout.as_ref().map(|l| l.init),
            layout.as_ref().map(|l| l.n_epochs),
            layout.as_ref().map(|l| l.secs)
        );
        assert!(knn.is_ok() && layout.is_ok());
    }

    #[test]
    fn fast_power_is_close_to_powf() {
        let mut worst = 0.0f64;
        for e in -60..60 {
            for m in 0..50 {
                let x = 2f32.powi(e) * (1.0 + m as f32 / 50.0);
                for y in [0.895f32, -0.105, 0.5, 1.0, 1.9] {
                    let want = f64::from(x).powf(f64::from(y));
                    if !want.is_normal() || !(1e-30..=1e30).contains(&want) {
                        continue;
                    }
                    let got = f64::from(pow_pos(x, y));
                    worst = worst.max(((got - want) / want).abs());
                }
            }
        }
        assert!(worst < 1e-5, "worst relative error {worst:e}");
    }

    #[test]
    fn lanczos_finds_the_laplacians_eigenvectors() {
        // A ring of 60 nodes with a few chords: connected, eigenvalues distinct enough.
        let n = 60;
        let mut rows: Vec<std::collections::BTreeMap<u32, f64>> = vec![Default::default(); n];
        let mut link = |a: usize, b: usize, w: f64| {
            rows[a].insert(b as u32, w);
            rows[b].insert(a as u32, w);
        };
        for i in 0..n {
            link(i, (i + 1) % n, 1.0);
            if i % 7 == 0 {
                link(i, (i + 17) % n, 0.3);
            }
        }
        let g: Graph = rows.into_iter().map(|r| r.into_iter().collect()).collect();
        let got = spectral(&g, 2).map(|v| v.len());
        assert_eq!(got, Some(2 * n));
        let Some(v) = spectral(&g, 2) else { return };
        // Dense check: N = D^-1/2 A D^-1/2; each returned column c satisfies N c = λ c for one of the
        // two largest eigenvalues below the trivial 1.
        let deg: Vec<f64> = g.iter().map(|r| r.iter().map(|x| x.1).sum()).collect();
        let dense = DMatrix::from_fn(n, n, |a, b| {
            g[a].iter()
                .find(|x| x.0 as usize == b)
                .map_or(0.0, |x| x.1 / (deg[a] * deg[b]).sqrt())
        });
        let eig = SymmetricEigen::new(dense.clone());
        let mut values: Vec<f64> = eig.eigenvalues.iter().copied().collect();
        values.sort_by(|a, b| b.total_cmp(a));
        for c in 0..2 {
            let col = nalgebra::DVector::from_fn(n, |i, _| v[i * 2 + c]);
            let norm = col.norm();
            let image = &dense * &col;
            let lambda = col.dot(&image) / (norm * norm);
            let residual = (&image - &col * lambda).norm() / norm;
            assert!(residual < 1e-4, "column {c}: residual {residual:e}");
            assert!(
                (lambda - values[c + 1]).abs() < 1e-6,
                "column {c}: eigenvalue {lambda} is not {}",
                values[c + 1]
            );
        }
    }

    #[test]
    fn the_layout_does_not_depend_on_the_thread_count() {
        let rows = blobs(60, 5);
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let run = |threads: usize| {
            on_threads(threads, || {
                let l = umap(&refs, &UmapConfig::default()).map_err(|e| e.to_string())?;
                let t = trustworthiness(&refs, &l, 10).map_err(|e| e.to_string())?;
                Ok((l.coords, t.to_bits()))
            })
        };
        let one = run(1);
        assert!(one.is_ok(), "{one:?}");
        assert_eq!(one, run(2));
        assert_eq!(one, run(3));
    }

    #[test]
    fn trustworthiness_matches_the_direct_formula() {
        // A layout that keeps some neighbourhoods and breaks others, against sklearn's formula computed
        // with a full ranking.
        let rows = blobs(20, 9);
        let refs: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let n = refs.len();
        let mut rng = SplitMix64::new(4);
        let coords: Vec<f64> = (0..2 * n).map(|_| rng.next_f64()).collect();
        let layout = UmapLayout {
            n,
            dim: 2,
            coords: coords.clone(),
            init: UmapInit::Pca,
            n_neighbors: 15,
            n_epochs: 0,
            secs: UmapSecs::default(),
        };
        let k = 5;
        let full = cosine_knn(&refs, n).map_err(|e| e.to_string());
        let Ok(full) = full else { panic!("{full:?}") };
        let mut penalty = 0.0;
        for i in 0..n {
            let mut d: Vec<(f64, usize)> = (0..n)
                .filter(|&j| j != i)
                .map(|j| {
                    let dx = coords[2 * i] - coords[2 * j];
                    let dy = coords[2 * i + 1] - coords[2 * j + 1];
                    (dx * dx + dy * dy, j)
                })
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for &(_, j) in &d[..k] {
                let rank = full[i]
                    .iter()
                    .position(|&(x, _)| x as usize == j)
                    .unwrap_or(0);
                if rank > k {
                    penalty += (rank - k) as f64;
                }
            }
        }
        let (nf, kf) = (n as f64, k as f64);
        let want = 1.0 - penalty * 2.0 / (nf * kf * (2.0 * nf - 3.0 * kf - 1.0));
        let got = trustworthiness(&refs, &layout, k).map_err(|e| e.to_string());
        assert!(
            got.as_ref().is_ok_and(|g| (g - want).abs() < 1e-12),
            "{got:?} vs {want}"
        );
    }

    #[test]
    fn tiny_inputs() {
        let one = [[1.0f32, 2.0]];
        let refs: Vec<&[f32]> = one.iter().map(|r| r.as_slice()).collect();
        let l = umap(&refs, &UmapConfig::default()).map_err(|e| e.to_string());
        assert_eq!(
            l.map(|l| (l.coords, l.init)),
            Ok((vec![0.0, 0.0], UmapInit::Trivial))
        );
        let few: Vec<Vec<f32>> = (0..5)
            .map(|i| vec![i as f32, 1.0, (i * i) as f32])
            .collect();
        let refs: Vec<&[f32]> = few.iter().map(Vec::as_slice).collect();
        let l = umap(&refs, &UmapConfig::default()).map_err(|e| e.to_string());
        assert!(
            l.as_ref().is_ok_and(|l| l.n_neighbors == 4
                && l.coords.len() == 10
                && l.coords.iter().all(|x| x.is_finite())),
            "{l:?}"
        );
        let bad = UmapConfig {
            n_neighbors: 1,
            ..UmapConfig::default()
        };
        assert!(umap(&refs, &bad).is_err());
    }
}
