//! UMAP (McInnes, Healy & Melville 2018) as umap-learn runs it for HiRAG and LeanRAG: cosine distances, 15
//! neighbours, two components, `min_dist` 0.1, `spread` 1.0.
//!
//! Our own implementation rather than the `umap-rs` crate: that crate's SGD is Hogwild-parallel (its result
//! depends on the thread count and the scheduling), it panics on bad input, and it leaves the neighbour
//! search and the initialisation to the caller — which are most of what has to match umap-learn. The steps,
//! with umap-learn's constants:
//!
//! 1. **Neighbours**: exact cosine k-NN (umap-learn is exact below 4,096 points and approximate above; exact
//!    is never worse), each point its own first neighbour at distance 0; the distance matrix in blocks of
//!    rows through one matrix product each, the blocks on the thread pool (each row's result depends on
//!    that row alone).
//! 2. **Fuzzy simplicial set**: per point, `ρ` = the distance to the nearest other point (local
//!    connectivity 1) and `σ` by 64 bisection steps so that `Σ exp(−(d − ρ)/σ) = log₂ k`, floored at
//!    `10⁻³ ×` the mean distance; memberships `exp(−(d − ρ)/σ)`, symmetrised as `P + Pᵀ − P∘Pᵀ`.
//! 3. **Initialisation**: spectral — the eigenvectors of the normalised Laplacian for the second to third
//!    smallest eigenvalues (here by subspace iteration on `(I + D^−½ A D^−½)/2` with the trivial vector
//!    deflated), scaled so the largest coordinate is 10, plus Gaussian noise of scale 10⁻⁴, then each
//!    coordinate rescaled to [0, 10]. A graph in several pieces or an iteration that does not settle falls
//!    back to the leading principal components (umap-learn lays the pieces out one by one; said in
//!    [`UmapLayout::init`]).
//! 4. **Layout**: `a`, `b` fitted to `min_dist` and `spread` as umap-learn's `find_ab_params`; edges below
//!    `max weight / n_epochs` dropped; 500 epochs up to 10,000 points, else 200; per edge, attraction every
//!    `n_epochs · max / w` epochs and 5 negative samples per attraction, gradients clipped at 4, learning
//!    rate decaying linearly from 1. Sequential and seeded: the same input gives the same layout on any
//!    machine and any number of threads.
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
}

/// The k nearest neighbours by cosine distance of every row (the row itself first), as `(index,
/// distance)` rows of length `k`.
pub fn cosine_knn(rows: &[&[f32]], k: usize) -> Result<Vec<Vec<(u32, f32)>>> {
    let n = rows.len();
    let dim = rows.first().map_or(0, |r| r.len());
    let k = k.min(n);
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
    const BLOCK: usize = 512;
    use rayon::prelude::*;
    let all = unit.t();
    let blocks: Vec<Vec<Vec<(u32, f32)>>> = (0..n.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            let lo = b * BLOCK;
            let hi = (lo + BLOCK).min(n);
            let sims = unit.slice(s![lo..hi, ..]).dot(&all);
            (lo..hi)
                .map(|i| {
                    let row = sims.row(i - lo);
                    let mut cand: Vec<(u32, f32)> = row
                        .iter()
                        .enumerate()
                        .map(|(j, &s)| {
                            let d = if j == i { 0.0 } else { (1.0 - s).max(0.0) };
                            (j as u32, d)
                        })
                        .collect();
                    // The row itself first, then by distance, ties by index.
                    let cmp = |a: &(u32, f32), b: &(u32, f32)| {
                        ((a.0 as usize) != i)
                            .cmp(&((b.0 as usize) != i))
                            .then(a.1.total_cmp(&b.1))
                            .then(a.0.cmp(&b.0))
                    };
                    if k < cand.len() {
                        cand.select_nth_unstable_by(k - 1, cmp);
                        cand.truncate(k);
                    }
                    cand.sort_by(cmp);
                    cand
                })
                .collect()
        })
        .collect();
    Ok(blocks.into_iter().flatten().collect())
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

/// The spectral layout: eigenvectors 2..=dim+1 of the normalised Laplacian, by subspace iteration on
/// `(I + D^−½ A D^−½) / 2` (same eigenvectors, eigenvalues shifted into [0, 1] with the wanted ones on
/// top) with the trivial eigenvector `D^½ 1` projected out. `None` when it does not settle.
fn spectral(g: &Graph, dim: usize, rng: &mut SplitMix64) -> Option<Vec<f64>> {
    let n = g.len();
    let deg: Vec<f64> = g.iter().map(|r| r.iter().map(|&(_, w)| w).sum()).collect();
    if deg.iter().any(|&d| d <= 0.0) {
        return None;
    }
    let inv_sqrt: Vec<f64> = deg.iter().map(|d| 1.0 / d.sqrt()).collect();
    let mut trivial: Vec<f64> = deg.iter().map(|d| d.sqrt()).collect();
    let norm = trivial.iter().map(|x| x * x).sum::<f64>().sqrt();
    trivial.iter_mut().for_each(|x| *x /= norm);
    let block = (dim + 4).min(n.saturating_sub(1)).max(dim);
    if block < dim || n < dim + 2 {
        return None;
    }
    let apply = |v: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|i| {
                let s: f64 = g[i]
                    .iter()
                    .map(|&(j, w)| w * inv_sqrt[j as usize] * v[j as usize])
                    .sum();
                0.5 * (v[i] + inv_sqrt[i] * s)
            })
            .collect()
    };
    let deflate = |v: &mut [f64]| {
        let c: f64 = v.iter().zip(&trivial).map(|(a, b)| a * b).sum();
        v.iter_mut().zip(&trivial).for_each(|(a, b)| *a -= c * b);
    };
    // Orthonormalises the columns in place (modified Gram–Schmidt, twice).
    let orthonormalise = |basis: &mut Vec<Vec<f64>>| -> bool {
        for _ in 0..2 {
            for c in 0..basis.len() {
                for p in 0..c {
                    let dot: f64 = basis[c].iter().zip(&basis[p]).map(|(a, b)| a * b).sum();
                    let prev = basis[p].clone();
                    basis[c]
                        .iter_mut()
                        .zip(&prev)
                        .for_each(|(a, b)| *a -= dot * b);
                }
                let norm = basis[c].iter().map(|x| x * x).sum::<f64>().sqrt();
                if norm < 1e-300 {
                    return false;
                }
                basis[c].iter_mut().for_each(|x| *x /= norm);
            }
        }
        true
    };
    let mut basis: Vec<Vec<f64>> = (0..block)
        .map(|_| (0..n).map(|_| rng.next_f64() - 0.5).collect())
        .collect();
    for v in &mut basis {
        deflate(v);
    }
    if !orthonormalise(&mut basis) {
        return None;
    }
    let mut previous: Option<Vec<f64>> = None;
    for _ in 0..(5 * n).clamp(300, 3000) {
        let mut next: Vec<Vec<f64>> = basis.iter().map(|v| apply(v)).collect();
        for v in &mut next {
            deflate(v);
        }
        if !orthonormalise(&mut next) {
            return None;
        }
        basis = next;
        // Rayleigh–Ritz every step: the block's eigenvalues settle to 1e-9 → done.
        let applied: Vec<Vec<f64>> = basis.iter().map(|v| apply(v)).collect();
        let h = DMatrix::from_fn(block, block, |a, b| {
            basis[a]
                .iter()
                .zip(&applied[b])
                .map(|(x, y)| x * y)
                .sum::<f64>()
        });
        let h = (&h + h.transpose()) * 0.5;
        let eig = SymmetricEigen::new(h);
        let mut order: Vec<usize> = (0..block).collect();
        order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
        let values: Vec<f64> = order
            .iter()
            .take(dim)
            .map(|&c| eig.eigenvalues[c])
            .collect();
        let rotated: Vec<Vec<f64>> = order
            .iter()
            .map(|&c| {
                let mut v = vec![0.0; n];
                for (a, b) in basis.iter().enumerate() {
                    let w = eig.eigenvectors[(a, c)];
                    v.iter_mut().zip(b).for_each(|(x, y)| *x += w * y);
                }
                v
            })
            .collect();
        basis = rotated;
        if let Some(prev) = &previous {
            if prev
                .iter()
                .zip(&values)
                .all(|(a, b)| (a - b).abs() <= 1e-9 * b.abs().max(1e-12))
            {
                let mut out = vec![0.0; n * dim];
                for (c, v) in basis.iter().take(dim).enumerate() {
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
        }
        previous = Some(values);
    }
    None
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
    if config.n_neighbors < 2 || config.n_components == 0 {
        return Err(HierarchyError::Config(format!(
            "umap needs n_neighbors ≥ 2 and n_components ≥ 1 (got {} and {})",
            config.n_neighbors, config.n_components
        )));
    }
    if !(config.min_dist >= 0.0 && config.spread > 0.0 && config.min_dist <= config.spread) {
        return Err(HierarchyError::Config(format!(
            "umap needs 0 ≤ min_dist ≤ spread, spread > 0 (got {} and {})",
            config.min_dist, config.spread
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
        });
    }
    // umap-learn: with N ≤ n_neighbors it uses N − 1 neighbours (the point itself included).
    let k_used = if n <= config.n_neighbors {
        (n - 1).max(2).min(n)
    } else {
        config.n_neighbors
    };
    let knn = cosine_knn(rows, k_used)?;
    let graph = fuzzy_graph(&knn);
    let mut rng = SplitMix64::stream(config.seed, 0x554d_4150, 0);
    let (mut coords, init) = match (components(&graph) == 1)
        .then(|| spectral(&graph, dim, &mut rng))
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
    let n_epochs = config
        .n_epochs
        .unwrap_or(if n <= 10_000 { 500 } else { 200 })
        .max(1);
    optimize(&graph, &mut coords, dim, n_epochs, config, &mut rng);
    Ok(UmapLayout {
        n,
        dim,
        coords,
        init,
        n_neighbors: k_used,
        n_epochs,
    })
}

/// umap-learn's `optimize_layout_euclidean`, sequential (`move_other`: both ends of an edge move).
fn optimize(
    graph: &Graph,
    coords: &mut [f64],
    dim: usize,
    n_epochs: usize,
    config: &UmapConfig,
    rng: &mut SplitMix64,
) {
    let n = graph.len();
    let (a, b) = find_ab_params(config.spread, config.min_dist);
    let max_w = graph.iter().flatten().fold(0.0f64, |m, &(_, w)| m.max(w));
    if max_w <= 0.0 {
        return;
    }
    let cut = max_w / n_epochs as f64;
    let mut edges: Vec<(usize, usize, f64)> = Vec::new();
    for (i, row) in graph.iter().enumerate() {
        for &(j, w) in row {
            if w >= cut {
                edges.push((i, j as usize, w));
            }
        }
    }
    let eps: Vec<f64> = edges
        .iter()
        .map(|&(_, _, w)| {
            let samples = n_epochs as f64 * w / max_w;
            if samples > 0.0 {
                n_epochs as f64 / samples
            } else {
                -1.0
            }
        })
        .collect();
    let rate = config.negative_sample_rate.max(1) as f64;
    let eps_neg: Vec<f64> = eps.iter().map(|e| e / rate).collect();
    let mut next_sample = eps.clone();
    let mut next_negative = eps_neg.clone();
    let clip = |x: f64| x.clamp(-4.0, 4.0);
    let mut current = vec![0.0f64; dim];
    for epoch in 0..n_epochs {
        let alpha = 1.0 * (1.0 - epoch as f64 / n_epochs as f64);
        let e_f = epoch as f64;
        for (idx, &(j, k, _)) in edges.iter().enumerate() {
            if eps[idx] <= 0.0 || next_sample[idx] > e_f {
                continue;
            }
            current.copy_from_slice(&coords[j * dim..(j + 1) * dim]);
            let d2: f64 = (0..dim)
                .map(|d| (current[d] - coords[k * dim + d]).powi(2))
                .sum();
            let coeff = if d2 > 0.0 {
                -2.0 * a * b * d2.powf(b - 1.0) / (a * d2.powf(b) + 1.0)
            } else {
                0.0
            };
            for d in 0..dim {
                let g = clip(coeff * (current[d] - coords[k * dim + d]));
                current[d] += g * alpha;
                coords[k * dim + d] -= g * alpha;
            }
            coords[j * dim..(j + 1) * dim].copy_from_slice(&current);
            next_sample[idx] += eps[idx];
            let n_neg = ((e_f - next_negative[idx]) / eps_neg[idx]).max(0.0) as usize;
            for _ in 0..n_neg {
                let k = rng.below(n);
                if k == j {
                    continue;
                }
                let d2: f64 = (0..dim)
                    .map(|d| (current[d] - coords[k * dim + d]).powi(2))
                    .sum();
                let coeff = if d2 > 0.0 {
                    2.0 * b / ((0.001 + d2) * (a * d2.powf(b) + 1.0))
                } else {
                    0.0
                };
                if coeff <= 0.0 {
                    continue;
                }
                for d in 0..dim {
                    current[d] += clip(coeff * (current[d] - coords[k * dim + d])) * alpha;
                }
            }
            coords[j * dim..(j + 1) * dim].copy_from_slice(&current);
            next_negative[idx] += n_neg as f64 * eps_neg[idx];
        }
    }
}

/// Trustworthiness (Venna & Kaski) of a layout with `k` neighbours, as scikit-learn computes it: how far
/// the layout's nearest neighbours of each point fall in the original space's neighbour ranking (1 = every
/// layout neighbour is an original one), original distances by cosine.
pub fn trustworthiness(rows: &[&[f32]], layout: &UmapLayout, k: usize) -> Result<f64> {
    let n = rows.len();
    if n != layout.n || k == 0 || 2 * k >= n {
        return Err(HierarchyError::Input(format!(
            "trustworthiness needs n > 2k and one layout row per point (n {n}, k {k}, layout {})",
            layout.n
        )));
    }
    // Rank of every point in each point's original neighbour order (1 = nearest other point).
    let full = cosine_knn(rows, n)?;
    let mut rank = vec![0u32; n * n];
    for (i, row) in full.iter().enumerate() {
        for (r, &(j, _)) in row.iter().enumerate().skip(1) {
            rank[i * n + j as usize] = r as u32;
        }
    }
    let dim = layout.dim;
    let mut penalty = 0.0f64;
    for i in 0..n {
        let p = &layout.coords[i * dim..(i + 1) * dim];
        let mut d: Vec<(f64, usize)> = (0..n)
            .filter(|&j| j != i)
            .map(|j| {
                let q = &layout.coords[j * dim..(j + 1) * dim];
                (
                    p.iter().zip(q).map(|(x, y)| (x - y).powi(2)).sum::<f64>(),
                    j,
                )
            })
            .collect();
        d.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        for &(_, j) in d.iter().take(k) {
            let r = rank[i * n + j] as f64;
            if r > k as f64 {
                penalty += r - k as f64;
            }
        }
    }
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
        // Every point nearer its own group's centre than any other group's.
        let centre = |g: usize| -> [f64; 2] {
            let mut c = [0.0; 2];
            for i in g * 40..(g + 1) * 40 {
                c[0] += layout.coords[2 * i] / 40.0;
                c[1] += layout.coords[2 * i + 1] / 40.0;
            }
            c
        };
        let centres = [centre(0), centre(1), centre(2)];
        for i in 0..120 {
            let p = [layout.coords[2 * i], layout.coords[2 * i + 1]];
            let d: Vec<f64> = centres
                .iter()
                .map(|c| (p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2))
                .collect();
            let best = (0..3).min_by(|&x, &y| d[x].total_cmp(&d[y]));
            assert_eq!(best, Some(i / 40), "point {i}");
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
            "umap 16000 x 384: knn {t_knn:.2} s, whole {total:.2} s, init {:?}, epochs {:?}",
            layout.as_ref().map(|l| l.init),
            layout.as_ref().map(|l| l.n_epochs)
        );
        assert!(knn.is_ok() && layout.is_ok());
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
