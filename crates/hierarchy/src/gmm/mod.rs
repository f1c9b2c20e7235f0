//! Gaussian mixtures with full covariances, fitted by EM, and the BIC scan that chooses the number of
//! components (spec hirag §5.2; LeanRAG uses the same scan).
//!
//! The fit follows scikit-learn's `GaussianMixture(covariance_type="full", init_params="k-means++")`, which is
//! what the reference implementations call:
//! * **initialisation** — k-means++ seeding (first centre uniform, then `2 + ⌊ln k⌋` candidates per centre
//!   drawn by squared distance, the one lowering the potential most kept); each component starts from its
//!   centre alone (responsibility 1 at that point), i.e. mean = centre and covariance = `reg_covar · I`, so the
//!   first E-step assigns every point to its nearest centre;
//! * **EM** — E-step in log space (log-sum-exp), M-step with `10·ε` added to the component masses and
//!   `reg_covar` to every covariance diagonal; stop when the mean log-likelihood changes by less than `tol`, or
//!   after `max_iter` iterations;
//! * **restarts** — `n_init` fits, the one with the highest final mean log-likelihood bound kept (ties: the
//!   earliest).
//!
//! **Why not linfa-clustering** (which the design notes considered): its GMM has no log-likelihood or BIC,
//! initialises from a full k-means run instead of the k-means++ seeding above, and its E-step overflows on
//! wide inputs. This implementation is small, exposes what the BIC scan needs, and is deterministic: each
//! restart draws from its own stream of a [`SplitMix64`](crate::rng) seeded by `(seed, k, restart)`, restarts
//! run in parallel, and every sum runs over fixed blocks in a fixed order, so the thread count never changes
//! a bit of the result. The E-step computes its exponentials with a polynomial of its own (plain multiplies
//! and adds within 2 ulp of libm's `exp`: the same bits on every CPU, with or without AVX2) and the
//! log-likelihood with one logarithm per 16 points (of their product); in two dimensions it works on
//! chunks of points so that both vectorise, and it is compiled for AVX2 as well, chosen at run time.
//! Random streams differ from numpy's, so fits match scikit-learn in quality, not digit for digit (the
//! bench compares both on the same matrix).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::reduce::Points;
use crate::rng::SplitMix64;
use crate::{HierarchyError, Result};

mod em;
mod math;
mod seeding;
mod sparse;

pub use self::sparse::Posteriors;
use self::sparse::*;
use self::{em::*, math::*, seeding::*};

const LN_2PI: f64 = 1.837_877_066_409_345_5;
/// Log-ratios below this are treated as zero probability: `e^−50 ≈ 2·10⁻²²` is far below the rounding
/// of a posterior or of a log-sum-exp whose largest term is 1, and skipping the `exp` makes E-steps with
/// hundreds of components (LeanRAG's k = N / 20) several times faster.
const NEGLIGIBLE: f64 = -50.0;
/// Points per block of the parallel E- and M-steps.
const BLOCK: usize = 2048;

/// Settings of one Gaussian-mixture fit (spec hirag §2 defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GmmConfig {
    /// Restarts; the best by log-likelihood is kept (5).
    pub n_init: usize,
    /// EM iteration cap (100).
    pub max_iter: usize,
    /// Convergence threshold on the change of the mean log-likelihood (1e-3).
    pub tol: f64,
    /// Added to every covariance diagonal (1e-6).
    pub reg_covar: f64,
    /// Seed of the k-means++ draws (0).
    pub seed: u64,
}

impl Default for GmmConfig {
    fn default() -> Self {
        Self {
            n_init: 5,
            max_iter: 100,
            tol: 1e-3,
            reg_covar: 1e-6,
            seed: 0,
        }
    }
}

impl GmmConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if self.n_init == 0 {
            return Err(HierarchyError::Config(
                "gmm.n_init must be at least 1".into(),
            ));
        }
        if self.max_iter == 0 {
            return Err(HierarchyError::Config(
                "gmm.max_iter must be at least 1".into(),
            ));
        }
        if !(self.tol >= 0.0 && self.tol.is_finite()) {
            return Err(HierarchyError::Config(format!(
                "gmm.tol {} must be a finite non-negative number",
                self.tol
            )));
        }
        if !(self.reg_covar >= 0.0 && self.reg_covar.is_finite()) {
            return Err(HierarchyError::Config(format!(
                "gmm.reg_covar {} must be a finite non-negative number",
                self.reg_covar
            )));
        }
        Ok(())
    }
}

/// A fitted mixture.
#[derive(Debug, Clone, PartialEq)]
pub struct Gmm {
    k: usize,
    d: usize,
    weights: Vec<f64>,
    means: Vec<f64>,
    covariances: Vec<f64>,
    /// Per component, the lower-triangular inverse Cholesky factor `L⁻¹` (row-major `d × d`): the
    /// Mahalanobis distance is `‖L⁻¹ (x − μ)‖`.
    inv_chol: Vec<f64>,
    /// Per component, `−Σ ln Lⱼⱼ` = half the log-determinant of the precision.
    log_det: Vec<f64>,
    converged: bool,
    n_iter: usize,
    lower_bound: f64,
}

impl Gmm {
    /// Number of components.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.d
    }

    /// Mixture weights (sum 1).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Component means, row-major `k × d`.
    pub fn means(&self) -> &[f64] {
        &self.means
    }

    /// Component covariances, `k` row-major `d × d` blocks (regularisation included).
    pub fn covariances(&self) -> &[f64] {
        &self.covariances
    }

    /// Whether the best restart converged within `max_iter`.
    pub fn converged(&self) -> bool {
        self.converged
    }

    /// EM iterations of the best restart.
    pub fn n_iter(&self) -> usize {
        self.n_iter
    }

    /// Free parameters: `k·d + k·d(d+1)/2 + (k − 1)`.
    pub fn n_parameters(&self) -> usize {
        let (k, d) = (self.k, self.d);
        k * d + k * d * (d + 1) / 2 + k - 1
    }

    fn log_gauss(&self, c: usize, x: &[f64], diff: &mut [f64]) -> f64 {
        let d = self.d;
        let mean = &self.means[c * d..(c + 1) * d];
        for ((o, a), m) in diff.iter_mut().zip(x).zip(mean) {
            *o = a - m;
        }
        let l = &self.inv_chol[c * d * d..(c + 1) * d * d];
        let mut sq = 0.0;
        for j in 0..d {
            let row = &l[j * d..j * d + j + 1];
            let y: f64 = row.iter().zip(&diff[..=j]).map(|(a, b)| a * b).sum();
            sq += y * y;
        }
        -0.5 * (d as f64 * LN_2PI + sq) + self.log_det[c]
    }

    /// Fills `out` (length k) with `ln wₖ + ln N(x | μₖ, Σₖ)` and returns their maximum.
    fn weighted_log_probs(
        &self,
        log_w: &[f64],
        x: &[f64],
        diff: &mut [f64],
        out: &mut [f64],
    ) -> f64 {
        for (c, o) in out.iter_mut().enumerate() {
            *o = log_w[c] + self.log_gauss(c, x, diff);
        }
        max_of(out)
    }

    /// E-step over `count` points from `start`; writes posteriors into `out` when given, and adds each
    /// point with its posteriors to `moments` when given (the M-step's first pass, in the same order).
    /// Compiled for AVX2 as well, chosen at run time (the same arithmetic, so the same bits).
    fn e_block(
        &self,
        log_w: &[f64],
        points: &Points,
        start: usize,
        count: usize,
        out: Option<&mut [f64]>,
        moments: Option<&mut Moments>,
    ) -> f64 {
        with_simd(
            #[inline(always)]
            || self.e_block_impl(log_w, points, start, count, out, moments),
        )
    }

    #[inline(always)]
    fn e_block_impl(
        &self,
        log_w: &[f64],
        points: &Points,
        start: usize,
        count: usize,
        mut out: Option<&mut [f64]>,
        mut moments: Option<&mut Moments>,
    ) -> f64 {
        if self.d == 2 {
            return self.e_block_planar(log_w, points, start, count, out, moments);
        }
        let k = self.k;
        let mut diff = vec![0.0; self.d];
        let mut scratch = vec![0.0; k];
        let mut sum = 0.0;
        let mut logs = LogSum::new();
        for r in 0..count {
            let x = points.row(start + r);
            let max = self.weighted_log_probs(log_w, x, &mut diff, &mut scratch);
            sum += max;
            if !max.is_finite() {
                continue;
            }
            // One exp per component: the terms of the log-sum-exp are also the unnormalised posteriors.
            for v in scratch.iter_mut() {
                *v = negligible_or_exp(*v - max);
            }
            // The largest term is e^0 = 1, so the total is at least 1.
            let total: f64 = scratch.iter().sum();
            logs.add(total);
            if let Some(out) = out.as_deref_mut() {
                let row = &mut out[r * k..(r + 1) * k];
                for (o, e) in row.iter_mut().zip(&scratch) {
                    *o = e / total;
                }
                if let Some(m) = moments.as_deref_mut() {
                    m.add(x, row);
                }
            }
        }
        sum + logs.total()
    }

    /// [`Gmm::e_block`] in two dimensions (the default PCA-2): chunks of points, each component's terms
    /// for a whole chunk in one contiguous run, so that the log-densities and the exps vectorise over
    /// points whatever k is. Per point, every sum runs over the components in order, as in the general
    /// path.
    #[inline(always)]
    fn e_block_planar(
        &self,
        log_w: &[f64],
        points: &Points,
        start: usize,
        count: usize,
        mut out: Option<&mut [f64]>,
        mut moments: Option<&mut Moments>,
    ) -> f64 {
        const CHUNK: usize = 64;
        let k = self.k;
        let p = Planar::new(self, log_w);
        // Component-major: terms[c · CHUNK + j] for point j of the chunk.
        let mut terms = vec![0.0; k * CHUNK];
        let (mut xs, mut ys) = ([0.0; CHUNK], [0.0; CHUNK]);
        let (mut max, mut total) = ([0.0; CHUNK], [0.0; CHUNK]);
        let mut sum = 0.0;
        let mut logs = LogSum::new();
        let mut first = 0;
        while first < count {
            let m = CHUNK.min(count - first);
            for j in 0..m {
                let x = points.row(start + first + j);
                (xs[j], ys[j]) = (x[0], x[1]);
            }
            let (xs, ys) = (&xs[..m], &ys[..m]);
            let (max, total) = (&mut max[..m], &mut total[..m]);
            max.fill(f64::NEG_INFINITY);
            for (c, run) in terms.chunks_exact_mut(CHUNK).enumerate() {
                let (mx, my, l0, l2, l3, constant) =
                    (p.mx[c], p.my[c], p.l0[c], p.l2[c], p.l3[c], p.constant[c]);
                for (((v, mj), &x0), &x1) in run[..m].iter_mut().zip(max.iter_mut()).zip(xs).zip(ys)
                {
                    let (dx, dy) = (x0 - mx, x1 - my);
                    let y0 = l0 * dx;
                    let y1 = l2 * dx + l3 * dy;
                    *v = constant - 0.5 * (y0 * y0 + y1 * y1);
                    // `f64::max` without its NaN bookkeeping (a NaN never wins either way).
                    *mj = if *v > *mj { *v } else { *mj };
                }
            }
            total.fill(0.0);
            for run in terms.chunks_exact_mut(CHUNK) {
                for ((v, &mj), t) in run[..m].iter_mut().zip(max.iter()).zip(total.iter_mut()) {
                    *v = negligible_or_exp(*v - mj);
                    *t += *v;
                }
            }
            for j in 0..m {
                sum += max[j];
                if !max[j].is_finite() {
                    continue;
                }
                logs.add(total[j]);
                if let Some(out) = out.as_deref_mut() {
                    let r = first + j;
                    let row = &mut out[r * k..(r + 1) * k];
                    for (c, o) in row.iter_mut().enumerate() {
                        *o = terms[c * CHUNK + j] / total[j];
                    }
                    if let Some(m) = moments.as_deref_mut() {
                        m.add(&[xs[j], ys[j]], row);
                    }
                }
            }
            first += m;
        }
        sum + logs.total()
    }

    /// E-step over all points: fills `resp` (row-major `n × k`) with posteriors when given, returns the mean
    /// log-likelihood. Blocks run in parallel; their sums are added in block order.
    fn e_step(&self, points: &Points, resp: Option<&mut [f64]>) -> f64 {
        if let Some(resp) = resp {
            return self.e_step_into(points, resp, false).0;
        }
        let n = points.len();
        let log_w: Vec<f64> = self.weights.iter().map(|w| w.ln()).collect();
        let sums: Vec<f64> = (0..n.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                let start = b * BLOCK;
                self.e_block(&log_w, points, start, BLOCK.min(n - start), None, None)
            })
            .collect();
        sums.iter().sum::<f64>() / n.max(1) as f64
    }

    /// [`Gmm::e_step`] into `resp`; with `moments`, also each block's [`Moments`], in block order (else
    /// none).
    fn e_step_into(&self, points: &Points, resp: &mut [f64], moments: bool) -> (f64, Vec<Moments>) {
        let (n, k, d) = (points.len(), self.k, self.d);
        let log_w: Vec<f64> = self.weights.iter().map(|w| w.ln()).collect();
        let blocks: Vec<(f64, Option<Moments>)> = resp
            .par_chunks_mut(BLOCK * k)
            .enumerate()
            .map(|(b, out)| {
                let count = out.len() / k;
                let mut m = moments.then(|| Moments::new(k, d));
                let s = self.e_block(&log_w, points, b * BLOCK, count, Some(out), m.as_mut());
                (s, m)
            })
            .collect();
        let sum: f64 = blocks.iter().map(|b| b.0).sum();
        (
            sum / n.max(1) as f64,
            blocks.into_iter().filter_map(|b| b.1).collect(),
        )
    }

    /// Mean log-likelihood of `points` under the mixture (scikit-learn's `score`).
    pub fn score(&self, points: &Points) -> f64 {
        self.e_step(points, None)
    }

    /// Bayesian information criterion on `points`: `−2·n·score + p·ln n`.
    pub fn bic(&self, points: &Points) -> f64 {
        let n = points.len() as f64;
        -2.0 * self.score(points) * n + self.n_parameters() as f64 * n.ln()
    }

    /// Posterior probabilities, row-major `n × k`.
    pub fn predict_proba(&self, points: &Points) -> Vec<f64> {
        let mut resp = vec![0.0; points.len() * self.k];
        self.e_step(points, Some(&mut resp));
        resp
    }

    /// Posterior probabilities, sparse (memory proportional to the non-zero posteriors, not to `n × k`).
    /// The same values as [`Gmm::predict_proba`].
    pub fn posteriors(&self, points: &Points) -> Posteriors {
        let n = points.len();
        let blocks = if self.k >= SPARSE_MIN_K {
            self.e_step_sparse(points, false).1
        } else {
            let log_w: Vec<f64> = self.weights.iter().map(|w| w.ln()).collect();
            (0..n.div_ceil(BLOCK))
                .into_par_iter()
                .map(|b| {
                    let count = BLOCK.min(n - b * BLOCK);
                    let mut dense = vec![0.0; count * self.k];
                    self.e_block(&log_w, points, b * BLOCK, count, Some(&mut dense), None);
                    let mut rows = SparseRows::default();
                    for row in dense.chunks(self.k) {
                        rows.push_dense_row(row);
                    }
                    rows
                })
                .collect()
        };
        Posteriors { blocks, n }
    }

    /// The sparse E-step over `count` points from `start` into `out` (see [`SPARSE_MIN_K`]); adds each
    /// point with its posteriors to `moments` when given. Per point, the same arithmetic as
    /// [`Gmm::e_block`] on the components that can have a non-zero posterior.
    #[allow(clippy::too_many_arguments)]
    fn e_block_sparse(
        &self,
        log_w: &[f64],
        lookup: Option<(&Planar, &ComponentTree)>,
        points: &Points,
        start: usize,
        count: usize,
        out: &mut SparseRows,
        mut moments: Option<&mut Moments>,
    ) -> f64 {
        let k = self.k;
        let mut comps: Vec<u32> = Vec::new();
        let mut terms: Vec<f64> = Vec::new();
        let mut stack = Vec::new();
        let mut diff = vec![0.0; self.d];
        let mut sum = 0.0;
        let mut logs = LogSum::new();
        for r in 0..count {
            let x = points.row(start + r);
            match lookup {
                Some((p, tree)) => {
                    tree.candidates(p, x[0], x[1], &mut comps, &mut stack);
                    terms.clear();
                    terms.extend(comps.iter().map(|&c| p.term(c as usize, x[0], x[1])));
                }
                None => {
                    if comps.len() != k {
                        comps.clear();
                        comps.extend(0..k as u32);
                        terms.resize(k, 0.0);
                    }
                    self.weighted_log_probs(log_w, x, &mut diff, &mut terms);
                }
            }
            let max = max_of(&terms);
            sum += max;
            if !max.is_finite() {
                out.end_row();
                continue;
            }
            for v in terms.iter_mut() {
                *v = negligible_or_exp(*v - max);
            }
            let total: f64 = terms.iter().sum();
            logs.add(total);
            for (&c, &e) in comps.iter().zip(&terms) {
                if e != 0.0 {
                    let v = e / total;
                    out.push(c, v);
                    if let Some(m) = moments.as_deref_mut() {
                        m.add_one(c as usize, x, v);
                    }
                }
            }
            out.end_row();
        }
        sum + logs.total()
    }

    /// The sparse E-step over all points: the mean log-likelihood, each block's posteriors and, with
    /// `moments`, each block's [`Moments`] (else none), in block order.
    fn e_step_sparse(
        &self,
        points: &Points,
        moments: bool,
    ) -> (f64, Vec<SparseRows>, Vec<Moments>) {
        let (n, k, d) = (points.len(), self.k, self.d);
        let log_w: Vec<f64> = self.weights.iter().map(|w| w.ln()).collect();
        let planar = (d == 2).then(|| Planar::new(self, &log_w));
        let tree = planar.as_ref().map(|p| ComponentTree::new(self, p));
        let lookup = planar.as_ref().zip(tree.as_ref());
        let blocks: Vec<(f64, SparseRows, Option<Moments>)> = (0..n.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                let count = BLOCK.min(n - b * BLOCK);
                let mut rows = SparseRows::default();
                let mut m = moments.then(|| Moments::new(k, d));
                let s = with_simd(
                    #[inline(always)]
                    || {
                        self.e_block_sparse(
                            &log_w,
                            lookup,
                            points,
                            b * BLOCK,
                            count,
                            &mut rows,
                            m.as_mut(),
                        )
                    },
                );
                (s, rows, m)
            })
            .collect();
        let sum: f64 = blocks.iter().map(|b| b.0).sum();
        let mut all_rows = Vec::with_capacity(blocks.len());
        let mut all_moments = Vec::new();
        for (_, rows, m) in blocks {
            all_rows.push(rows);
            all_moments.extend(m);
        }
        (sum / n.max(1) as f64, all_rows, all_moments)
    }

    /// Fits a `k`-component mixture to `points` (needs `1 ≤ k ≤ n` and `d ≥ 1`).
    pub fn fit(points: &Points, k: usize, config: &GmmConfig) -> Result<Gmm> {
        Self::fit_with(points, k, config, k >= SPARSE_MIN_K)
    }

    /// [`Gmm::fit`] with the posteriors' storage chosen (dense `n × k` or sparse).
    fn fit_with(points: &Points, k: usize, config: &GmmConfig, sparse: bool) -> Result<Gmm> {
        config.validate()?;
        if u32::try_from(k).is_err() {
            return Err(HierarchyError::Input(format!(
                "a mixture of {k} components is beyond this implementation's 2^32"
            )));
        }
        let n = points.len();
        if k == 0 || k > n {
            return Err(HierarchyError::Input(format!(
                "a mixture needs between 1 and n = {n} components, got k = {k}"
            )));
        }
        if points.dim() == 0 {
            return Err(HierarchyError::Input(
                "cannot fit a mixture to zero-dimensional points".into(),
            ));
        }
        let fits: Vec<Result<Gmm>> = (0..config.n_init)
            .into_par_iter()
            .map(|restart| fit_once(points, k, config, restart, sparse))
            .collect();
        let mut best: Option<Gmm> = None;
        for f in fits {
            let f = f?;
            if best.as_ref().is_none_or(|b| f.lower_bound > b.lower_bound) {
                best = Some(f);
            }
        }
        best.ok_or_else(|| HierarchyError::Numerical("no restart produced a fit".into()))
    }
}

/// The outcome of a BIC scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BicScan {
    /// Component counts tried, in order.
    pub ks: Vec<usize>,
    /// BIC of each count tried.
    pub bics: Vec<f64>,
    /// The count with the lowest BIC (ties: the smaller); 1 when nothing was tried.
    pub best_k: usize,
}

impl BicScan {
    /// The scan of an input too small to try any k: nothing tried, best k = 1.
    pub fn untried() -> Self {
        Self {
            ks: Vec::new(),
            bics: Vec::new(),
            best_k: 1,
        }
    }
}

/// Scans `k = 1 .. min(n, max_clusters) − 1`, stopping once `|BIC(k−1) − BIC(k)| / |BIC(k−1)| < rel_tol`
/// (never at k = 1), and returns the scan with the mixture fitted at its best k (`None` when no k was
/// tried, i.e. n ≤ 1). The fit is deterministic, so the returned mixture is the "refit with k" of the spec.
pub fn bic_scan(
    points: &Points,
    max_clusters: usize,
    rel_tol: f64,
    config: &GmmConfig,
) -> Result<(BicScan, Option<Gmm>)> {
    let upper = points.len().min(max_clusters);
    let mut scan = BicScan::untried();
    let mut best: Option<(f64, Gmm)> = None;
    for k in 1..upper {
        let model = Gmm::fit(points, k, config)?;
        let bic = model.bic(points);
        if let Some(&prev) = scan.bics.last() {
            let change = (prev - bic).abs();
            let stop = if prev == 0.0 {
                change == 0.0
            } else {
                change / prev.abs() < rel_tol
            };
            scan.ks.push(k);
            scan.bics.push(bic);
            if best.as_ref().is_none_or(|(b, _)| bic < *b) {
                best = Some((bic, model));
            }
            if stop {
                break;
            }
        } else {
            scan.ks.push(k);
            scan.bics.push(bic);
            best = Some((bic, model));
        }
    }
    Ok(match best {
        Some((_, model)) => {
            scan.best_k = model.k();
            (scan, Some(model))
        }
        None => (scan, None),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn blobs(centres: &[(f64, f64)], per: usize, spread: f64, seed: u64) -> Points {
        let mut rng = SplitMix64::new(seed);
        let mut data = Vec::new();
        for &(cx, cy) in centres {
            for _ in 0..per {
                // Box–Muller
                let (u1, u2) = (rng.next_f64().max(1e-300), rng.next_f64());
                let r = (-2.0 * u1.ln()).sqrt() * spread;
                let t = std::f64::consts::TAU * u2;
                data.push(cx + r * t.cos());
                data.push(cy + r * t.sin());
            }
        }
        Points::new(centres.len() * per, 2, data).unwrap_or_default()
    }

    /// Points around `centres` in `d` dimensions (the first two coordinates from the centres, the rest
    /// noise), with a few exact duplicates.
    fn cloud(centres: usize, per: usize, d: usize, seed: u64) -> Points {
        let mut rng = SplitMix64::new(seed);
        let mut data = Vec::new();
        for c in 0..centres {
            let (cx, cy) = ((c % 17) as f64 * 3.0, (c / 17) as f64 * 2.5);
            for j in 0..per {
                let spread = 0.2 + (c % 5) as f64 * 0.3;
                let mut row = vec![0.0; d];
                for (a, v) in row.iter_mut().enumerate() {
                    let base = match a {
                        0 => cx,
                        1 => cy,
                        _ => 0.0,
                    };
                    *v = base + spread * (rng.next_f64() - 0.5) * 2.0;
                }
                if j % 7 == 3 {
                    // a duplicate of the previous point
                    let prev = data.len() - d;
                    row.copy_from_slice(&data[prev..prev + d]);
                }
                data.extend(row);
            }
        }
        Points::new(centres * per, d, data).unwrap_or_default()
    }

    #[test]
    fn sparse_posteriors_give_the_dense_fit_bit_for_bit() {
        let config = GmmConfig {
            n_init: 2,
            max_iter: 40,
            ..GmmConfig::default()
        };
        for (d, k, n_centres) in [(2, 70, 60), (2, 5, 8), (2, 200, 150), (3, 70, 60)] {
            let points = cloud(n_centres, 23, d, d as u64 * 1000 + k as u64);
            let dense = Gmm::fit_with(&points, k, &config, false).unwrap();
            let sparse = Gmm::fit_with(&points, k, &config, true).unwrap();
            assert_eq!(dense, sparse, "d = {d}, k = {k}");
            assert_eq!(
                Gmm::fit(&points, k, &config).unwrap(),
                dense,
                "d = {d}, k = {k}"
            );
            // Posteriors: the sparse rows are the dense rows' non-zero entries.
            let proba = dense.predict_proba(&points);
            let post = dense.posteriors(&points);
            assert_eq!(post.len(), points.len());
            let mut nnz = 0;
            for (i, (comps, values)) in post.rows().enumerate() {
                let row = &proba[i * k..(i + 1) * k];
                let expected: Vec<(u32, f64)> = row
                    .iter()
                    .enumerate()
                    .filter(|(_, &v)| v != 0.0)
                    .map(|(c, &v)| (c as u32, v))
                    .collect();
                let got: Vec<(u32, f64)> =
                    comps.iter().copied().zip(values.iter().copied()).collect();
                assert_eq!(got, expected, "d = {d}, k = {k}, point {i}");
                assert_eq!(post.row(i), (comps, values));
                nnz += comps.len();
            }
            assert_eq!(post.nnz(), nnz);
            if k >= SPARSE_MIN_K && d == 2 {
                // The lookup pays off: far fewer than k components per point.
                assert!(
                    nnz < points.len() * k / 4,
                    "d = {d}, k = {k}: {nnz} non-zeros"
                );
            }
        }
    }

    #[test]
    fn tree_seeding_draws_the_same_centres_as_the_scan() {
        for (d, k, seed) in [(2, 150, 1), (2, 400, 2), (3, 120, 3)] {
            let points = cloud(150, 20, d, seed);
            let mut a = SplitMix64::stream(9, k as u64, 0);
            let mut b = SplitMix64::stream(9, k as u64, 0);
            // The scan, whatever the size (the dispatch would pick the tree above its limit).
            let scan = {
                let n = points.len();
                assert!(n * k * (2 + (k as f64).ln() as usize) <= SEEDING_SCAN_LIMIT);
                kmeans_plus_plus(&points, k, &mut a)
            };
            let tree = kmeans_plus_plus_tree(&points, k, &mut b);
            assert_eq!(tree.len(), k);
            // Potentials are maintained rather than re-added, so a near-tie could differ; on these inputs
            // there is none.
            assert_eq!(scan, tree, "d = {d}, k = {k}");
        }
        // Coinciding points: the draws skip points already at distance 0.
        let same = Points::new(
            50,
            2,
            [1.0, 2.0].repeat(25).into_iter().chain([5.0; 50]).collect(),
        )
        .unwrap();
        let centres = kmeans_plus_plus_tree(&same, 2, &mut SplitMix64::new(4));
        assert_eq!(centres.len(), 2);
        assert_ne!(same.row(centres[0]), same.row(centres[1]));
    }

    #[test]
    fn sum_tree_finds_the_first_index_whose_prefix_reaches_r() {
        let w = [0.0, 2.0, 0.0, 1.0, 3.0];
        let mut t = SumTree::new(&w);
        assert_eq!(t.total(), 6.0);
        for (r, i) in [(0.5, 1), (2.0, 1), (2.5, 3), (3.0, 3), (3.1, 4), (6.0, 4)] {
            assert_eq!(t.find(r), i, "r = {r}");
        }
        t.set(1, 0.0);
        assert_eq!(t.total(), 4.0);
        assert_eq!(t.find(0.5), 3);
    }

    #[test]
    fn component_tree_candidates_cover_every_component_that_is_not_negligible() {
        let points = cloud(120, 15, 2, 77);
        let config = GmmConfig {
            n_init: 1,
            max_iter: 10,
            ..GmmConfig::default()
        };
        let model = Gmm::fit_with(&points, 150, &config, true).unwrap();
        let log_w: Vec<f64> = model.weights.iter().map(|w| w.ln()).collect();
        let planar = Planar::new(&model, &log_w);
        let tree = ComponentTree::new(&model, &planar);
        let (mut out, mut stack) = (Vec::new(), Vec::new());
        let mut total = 0;
        // The data and points far outside it.
        let probes: Vec<[f64; 2]> = (0..points.len())
            .map(|i| [points.row(i)[0], points.row(i)[1]])
            .chain([[-100.0, -100.0], [1e6, 3.0], [25.0, 1e-9]])
            .collect();
        for x in probes {
            tree.candidates(&planar, x[0], x[1], &mut out, &mut stack);
            assert!(out.windows(2).all(|w| w[0] < w[1]), "ascending, distinct");
            let terms: Vec<f64> = (0..model.k).map(|c| planar.term(c, x[0], x[1])).collect();
            let best = max_of(&terms);
            for (c, t) in terms.iter().enumerate() {
                if t - best >= NEGLIGIBLE {
                    assert!(
                        out.binary_search(&(c as u32)).is_ok(),
                        "{x:?}: component {c} missed"
                    );
                }
            }
            total += out.len();
        }
        assert!(total < points.len() * 150 / 4, "{total} candidates");
    }

    #[test]
    fn exp_neg_is_within_two_ulp_of_exp_where_the_e_step_uses_it() {
        assert_eq!(exp_neg(0.0), 1.0);
        let mut worst = 0.0f64;
        let mut rng = SplitMix64::new(5);
        for i in 0..200_000 {
            // The whole range, its ends and the points where the reduction changes k.
            let x = match i % 4 {
                0 => NEGLIGIBLE * rng.next_f64(),
                1 => -(i as f64) * std::f64::consts::LN_2 / 2.0 / 1000.0,
                2 => -1e-3 * rng.next_f64(),
                _ => NEGLIGIBLE - 1e-9 * rng.next_f64(),
            };
            if x < NEGLIGIBLE - 1.0 {
                continue;
            }
            let (ours, libm) = (exp_neg(x), x.exp());
            worst = worst.max((ours - libm).abs() / libm);
        }
        assert!(worst <= 2.0 * f64::EPSILON, "relative error {worst:e}");
        // Below the range the argument is clamped: a tiny positive number, never NaN or a negative one.
        for x in [-100.0, -1e6, f64::NEG_INFINITY] {
            let v = exp_neg(x);
            assert!(v >= 0.0 && v <= (NEGLIGIBLE - 9.0).exp(), "{x}: {v}");
        }
        assert_eq!(negligible_or_exp(NEGLIGIBLE - 1.0), 0.0);
    }

    #[test]
    fn grouped_logs_add_up_to_the_sum_of_logs() {
        let mut rng = SplitMix64::new(8);
        for scale in [1.0, 49.0, 1e6] {
            let values: Vec<f64> = (0..1000).map(|_| 1.0 + scale * rng.next_f64()).collect();
            let mut logs = LogSum::new();
            for &v in &values {
                logs.add(v);
            }
            let exact: f64 = values.iter().map(|v| v.ln()).sum();
            assert!(
                (logs.total() - exact).abs() <= 1e-12 * exact.abs(),
                "{scale}"
            );
        }
        assert_eq!(LogSum::new().total(), 0.0);
    }

    #[test]
    fn bic_parameter_count_for_two_dimensions_is_6k_minus_1() {
        let p = blobs(&[(0.0, 0.0), (10.0, 0.0), (0.0, 10.0)], 30, 1.0, 1);
        for k in 1..=3 {
            let g = Gmm::fit(&p, k, &GmmConfig::default());
            assert_eq!(g.map(|g| g.n_parameters()).ok(), Some(6 * k - 1));
        }
    }

    #[test]
    fn fit_recovers_separated_components_and_is_deterministic() {
        let centres = [(0.0, 0.0), (20.0, 0.0), (0.0, 20.0)];
        let p = blobs(&centres, 200, 1.0, 3);
        let a = Gmm::fit(&p, 3, &GmmConfig::default()).map_err(|e| e.to_string());
        let b = Gmm::fit(&p, 3, &GmmConfig::default()).map_err(|e| e.to_string());
        assert_eq!(a, b);
        let Ok(g) = a else { return };
        assert!(g.converged());
        let mut found: Vec<(f64, f64)> = g.means().chunks(2).map(|m| (m[0], m[1])).collect();
        found.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
        let mut want = centres.to_vec();
        want.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
        for (f, w) in found.iter().zip(&want) {
            assert!(
                (f.0 - w.0).abs() < 0.3 && (f.1 - w.1).abs() < 0.3,
                "{f:?} vs {w:?}"
            );
        }
        for w in g.weights() {
            assert!((w - 1.0 / 3.0).abs() < 1e-3);
        }
        let proba = g.predict_proba(&p);
        for row in proba.chunks(3) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn log_likelihood_of_one_gaussian_matches_the_closed_form() {
        // k = 1: the fit is the sample mean and (biased) covariance; score = mean log density.
        let p = blobs(&[(1.0, -2.0)], 500, 2.0, 9);
        let Ok(g) = Gmm::fit(&p, 1, &GmmConfig::default()) else {
            panic!("fit failed");
        };
        let n = p.len() as f64;
        let (mut mx, mut my) = (0.0, 0.0);
        for i in 0..p.len() {
            mx += p.row(i)[0] / n;
            my += p.row(i)[1] / n;
        }
        let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
        for i in 0..p.len() {
            let (dx, dy) = (p.row(i)[0] - mx, p.row(i)[1] - my);
            sxx += dx * dx / n;
            sxy += dx * dy / n;
            syy += dy * dy / n;
        }
        let (sxx, syy) = (sxx + 1e-6, syy + 1e-6);
        let det = sxx * syy - sxy * sxy;
        let mut ll = 0.0;
        for i in 0..p.len() {
            let (dx, dy) = (p.row(i)[0] - mx, p.row(i)[1] - my);
            let m = (syy * dx * dx - 2.0 * sxy * dx * dy + sxx * dy * dy) / det;
            ll += -0.5 * (2.0 * LN_2PI + det.ln() + m);
        }
        assert!(
            (g.score(&p) - ll / n).abs() < 1e-9,
            "{} vs {}",
            g.score(&p),
            ll / n
        );
        let bic = -2.0 * ll + 5.0 * n.ln();
        assert!((g.bic(&p) - bic).abs() < 1e-6);
    }

    #[test]
    fn bic_picks_five_on_five_separated_blobs() {
        let centres = [
            (0.0, 0.0),
            (25.0, 0.0),
            (0.0, 25.0),
            (25.0, 25.0),
            (12.5, 50.0),
        ];
        let p = blobs(&centres, 120, 1.0, 11);
        let scan = bic_scan(&p, 50, 1e-3, &GmmConfig::default()).map(|(s, _)| s);
        let Ok(scan) = scan else {
            return assert!(scan.is_ok());
        };
        assert_eq!(scan.best_k, 5, "{scan:?}");
        assert_eq!(scan.ks[0], 1);
        // The early stop ended the scan well before k = 49.
        assert!(scan.ks.len() < 49);
        let again = bic_scan(&p, 50, 1e-3, &GmmConfig::default())
            .map(|(s, _)| s)
            .ok();
        assert_eq!(again.as_ref(), Some(&scan));
    }

    #[test]
    fn tiny_and_degenerate_inputs() {
        let one = Points::new(1, 2, vec![0.0, 0.0]).unwrap_or_default();
        let (scan, model) = bic_scan(&one, 50, 1e-3, &GmmConfig::default()).unwrap_or_else(|_| {
            (
                BicScan {
                    ks: vec![9],
                    bics: vec![],
                    best_k: 9,
                },
                None,
            )
        });
        assert_eq!((scan.ks.len(), scan.best_k, model.is_none()), (0, 1, true));
        let two = Points::new(2, 1, vec![0.0, 1.0]).unwrap_or_default();
        let scan = bic_scan(&two, 50, 1e-3, &GmmConfig::default())
            .map(|(s, _)| s.ks)
            .ok();
        assert_eq!(scan, Some(vec![1]));
        // Many identical points and k > distinct values: fits without failing.
        let mut data = vec![0.0; 40];
        data.extend([1.0; 4]);
        let dup = Points::new(22, 2, data).unwrap_or_default();
        assert!(Gmm::fit(&dup, 5, &GmmConfig::default()).is_ok());
        assert!(Gmm::fit(&dup, 0, &GmmConfig::default()).is_err());
        assert!(Gmm::fit(&dup, 23, &GmmConfig::default()).is_err());
    }
}
