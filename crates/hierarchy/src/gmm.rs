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
//! a bit of the result. Random streams differ from numpy's, so fits match scikit-learn in quality, not
//! digit for digit (the bench compares both on the same matrix).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::reduce::Points;
use crate::rng::SplitMix64;
use crate::{HierarchyError, Result};

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
                "gmm_n_init must be at least 1".into(),
            ));
        }
        if self.max_iter == 0 {
            return Err(HierarchyError::Config(
                "gmm_max_iter must be at least 1".into(),
            ));
        }
        if !(self.tol >= 0.0 && self.tol.is_finite()) {
            return Err(HierarchyError::Config(format!(
                "gmm_tol {} must be a finite non-negative number",
                self.tol
            )));
        }
        if !(self.reg_covar >= 0.0 && self.reg_covar.is_finite()) {
            return Err(HierarchyError::Config(format!(
                "gmm_reg_covar {} must be a finite non-negative number",
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
        let mut max = f64::NEG_INFINITY;
        for (c, o) in out.iter_mut().enumerate() {
            *o = log_w[c] + self.log_gauss(c, x, diff);
            max = max.max(*o);
        }
        max
    }

    /// E-step over `count` points from `start`; writes posteriors into `out` when given.
    fn e_block(
        &self,
        log_w: &[f64],
        points: &Points,
        start: usize,
        count: usize,
        mut out: Option<&mut [f64]>,
    ) -> f64 {
        let k = self.k;
        let mut diff = vec![0.0; self.d];
        let mut scratch = vec![0.0; k];
        let mut sum = 0.0;
        // Two dimensions (the default PCA-2) get a flat per-component table: the inner loop is a few
        // multiply-adds per component with no indexing arithmetic.
        let planar: Vec<[f64; 6]> = if self.d == 2 {
            (0..k)
                .map(|c| {
                    let l = &self.inv_chol[c * 4..c * 4 + 4];
                    [
                        self.means[2 * c],
                        self.means[2 * c + 1],
                        l[0],
                        l[2],
                        l[3],
                        log_w[c] + self.log_det[c] - LN_2PI,
                    ]
                })
                .collect()
        } else {
            Vec::new()
        };
        for r in 0..count {
            let x = points.row(start + r);
            let max = if planar.is_empty() {
                self.weighted_log_probs(log_w, x, &mut diff, &mut scratch)
            } else {
                let (x0, x1) = (x[0], x[1]);
                let mut max = f64::NEG_INFINITY;
                for (o, p) in scratch.iter_mut().zip(&planar) {
                    let (dx, dy) = (x0 - p[0], x1 - p[1]);
                    let y0 = p[2] * dx;
                    let y1 = p[3] * dx + p[4] * dy;
                    *o = p[5] - 0.5 * (y0 * y0 + y1 * y1);
                    max = max.max(*o);
                }
                max
            };
            if !max.is_finite() {
                sum += max;
                continue;
            }
            // One exp per component: the terms of the log-sum-exp are also the unnormalised posteriors.
            let mut total = 0.0;
            for v in scratch.iter_mut() {
                let t = *v - max;
                *v = if t >= NEGLIGIBLE { t.exp() } else { 0.0 };
                total += *v;
            }
            sum += max + total.ln();
            if let Some(out) = out.as_deref_mut() {
                for (o, e) in out[r * k..(r + 1) * k].iter_mut().zip(&scratch) {
                    *o = e / total;
                }
            }
        }
        sum
    }

    /// E-step over all points: fills `resp` (row-major `n × k`) with posteriors when given, returns the mean
    /// log-likelihood. Blocks run in parallel; their sums are added in block order.
    fn e_step(&self, points: &Points, resp: Option<&mut [f64]>) -> f64 {
        let (n, k) = (points.len(), self.k);
        let log_w: Vec<f64> = self.weights.iter().map(|w| w.ln()).collect();
        let sums: Vec<f64> = match resp {
            Some(resp) => resp
                .par_chunks_mut(BLOCK * k)
                .enumerate()
                .map(|(b, out)| {
                    let count = out.len() / k;
                    self.e_block(&log_w, points, b * BLOCK, count, Some(out))
                })
                .collect(),
            None => (0..n.div_ceil(BLOCK))
                .into_par_iter()
                .map(|b| {
                    let start = b * BLOCK;
                    self.e_block(&log_w, points, start, BLOCK.min(n - start), None)
                })
                .collect(),
        };
        sums.iter().sum::<f64>() / n.max(1) as f64
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

    /// Fits a `k`-component mixture to `points` (needs `1 ≤ k ≤ n` and `d ≥ 1`).
    pub fn fit(points: &Points, k: usize, config: &GmmConfig) -> Result<Gmm> {
        config.validate()?;
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
            .map(|restart| fit_once(points, k, config, restart))
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

/// k-means++ seeding (scikit-learn's variant with `2 + ⌊ln k⌋` local trials); returns the centre indices.
fn kmeans_plus_plus(points: &Points, k: usize, rng: &mut SplitMix64) -> Vec<usize> {
    let n = points.len();
    let sq =
        |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum() };
    let trials = 2 + (k as f64).ln() as usize;
    let first = rng.below(n);
    let mut indices = vec![first];
    let mut closest: Vec<f64> = (0..n)
        .map(|i| sq(points.row(i), points.row(first)))
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
                *o = c.min(sq(points.row(i), points.row(cand)));
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

/// Lower Cholesky factor of a symmetric `d × d` matrix, or `None` if it is not positive definite.
fn cholesky(a: &[f64], d: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..=i {
            let s: f64 = (0..j).map(|p| l[i * d + p] * l[j * d + p]).sum();
            if i == j {
                let v = a[i * d + i] - s;
                if v <= 0.0 || !v.is_finite() {
                    return None;
                }
                l[i * d + i] = v.sqrt();
            } else {
                l[i * d + j] = (a[i * d + j] - s) / l[j * d + j];
            }
        }
    }
    Some(l)
}

/// Inverse of a lower-triangular matrix (forward substitution on the identity).
fn invert_lower(l: &[f64], d: usize) -> Vec<f64> {
    let mut inv = vec![0.0; d * d];
    for col in 0..d {
        for i in col..d {
            let mut s = if i == col { 1.0 } else { 0.0 };
            for p in col..i {
                s -= l[i * d + p] * inv[p * d + col];
            }
            inv[i * d + col] = s / l[i * d + i];
        }
    }
    inv
}

/// M-step: parameters from responsibilities (`resp` row-major `n × k`). Weights are left unnormalised
/// (masses / n) as scikit-learn's initialisation does; callers normalise after EM steps.
fn m_step(points: &Points, resp: &[f64], k: usize, reg: f64) -> Result<Gmm> {
    let (n, d) = (points.len(), points.dim());
    let blocks = n.div_ceil(BLOCK);
    // Pass 1: masses and weighted sums, per block, added in block order.
    let partial: Vec<(Vec<f64>, Vec<f64>)> = (0..blocks)
        .into_par_iter()
        .map(|b| {
            let mut nk = vec![0.0; k];
            let mut sx = vec![0.0; k * d];
            for i in b * BLOCK..((b + 1) * BLOCK).min(n) {
                let x = points.row(i);
                for c in 0..k {
                    let r = resp[i * k + c];
                    if r == 0.0 {
                        continue;
                    }
                    nk[c] += r;
                    for (s, v) in sx[c * d..(c + 1) * d].iter_mut().zip(x) {
                        *s += r * v;
                    }
                }
            }
            (nk, sx)
        })
        .collect();
    let mut nk = vec![10.0 * f64::EPSILON; k];
    let mut means = vec![0.0; k * d];
    for (pn, ps) in &partial {
        for (a, b) in nk.iter_mut().zip(pn) {
            *a += b;
        }
        for (a, b) in means.iter_mut().zip(ps) {
            *a += b;
        }
    }
    for c in 0..k {
        for v in &mut means[c * d..(c + 1) * d] {
            *v /= nk[c];
        }
    }
    // Pass 2: covariances around the new means.
    let partial: Vec<Vec<f64>> = (0..blocks)
        .into_par_iter()
        .map(|b| {
            let mut cov = vec![0.0; k * d * d];
            let mut diff = vec![0.0; d];
            for i in b * BLOCK..((b + 1) * BLOCK).min(n) {
                let x = points.row(i);
                let row = &resp[i * k..(i + 1) * k];
                if d == 2 {
                    // The default PCA-2 case: three accumulations per component, no index arithmetic.
                    for ((c, &r), m) in row.iter().enumerate().zip(means.chunks_exact(2)) {
                        if r == 0.0 {
                            continue;
                        }
                        let (dx, dy) = (x[0] - m[0], x[1] - m[1]);
                        let (rx, ry) = (r * dx, r * dy);
                        let block = &mut cov[c * 4..c * 4 + 4];
                        block[0] += rx * dx;
                        block[2] += ry * dx;
                        block[3] += ry * dy;
                    }
                    continue;
                }
                for c in 0..k {
                    let r = row[c];
                    if r == 0.0 {
                        continue;
                    }
                    for ((o, a), m) in diff.iter_mut().zip(x).zip(&means[c * d..(c + 1) * d]) {
                        *o = a - m;
                    }
                    let block = &mut cov[c * d * d..(c + 1) * d * d];
                    for p in 0..d {
                        let rp = r * diff[p];
                        for q in 0..=p {
                            block[p * d + q] += rp * diff[q];
                        }
                    }
                }
            }
            cov
        })
        .collect();
    let mut covariances = vec![0.0; k * d * d];
    for p in &partial {
        for (a, b) in covariances.iter_mut().zip(p) {
            *a += b;
        }
    }
    let mut inv_chol = vec![0.0; k * d * d];
    let mut log_det = vec![0.0; k];
    for c in 0..k {
        let block = &mut covariances[c * d * d..(c + 1) * d * d];
        for p in 0..d {
            for q in 0..=p {
                let v = block[p * d + q] / nk[c];
                block[p * d + q] = v;
                block[q * d + p] = v;
            }
            block[p * d + p] += reg;
        }
        // A covariance that is singular even with `reg_covar` (collapsed component, tiny reg): add a
        // growing ridge until it factors, so the fit degrades instead of failing.
        let mut ridge = 0.0;
        let mut factor = cholesky(block, d);
        let scale = (0..d)
            .map(|p| block[p * d + p].abs())
            .fold(0.0, f64::max)
            .max(1e-12);
        let mut tries = 0;
        while factor.is_none() && tries < 12 {
            ridge = if ridge == 0.0 {
                scale * 1e-10
            } else {
                ridge * 100.0
            };
            for p in 0..d {
                block[p * d + p] += ridge;
            }
            factor = cholesky(block, d);
            tries += 1;
        }
        let l = factor.ok_or_else(|| {
            HierarchyError::Numerical(format!(
                "the covariance of component {c} is not positive definite even with a ridge"
            ))
        })?;
        log_det[c] = -(0..d).map(|p| l[p * d + p].ln()).sum::<f64>();
        inv_chol[c * d * d..(c + 1) * d * d].copy_from_slice(&invert_lower(&l, d));
    }
    let weights = nk.iter().map(|m| m / n as f64).collect();
    Ok(Gmm {
        k,
        d,
        weights,
        means,
        covariances,
        inv_chol,
        log_det,
        converged: false,
        n_iter: 0,
        lower_bound: f64::NEG_INFINITY,
    })
}

fn fit_once(points: &Points, k: usize, config: &GmmConfig, restart: usize) -> Result<Gmm> {
    let n = points.len();
    let mut rng = SplitMix64::stream(config.seed, k as u64, restart as u64);
    let centres = kmeans_plus_plus(points, k, &mut rng);
    let mut resp = vec![0.0; n * k];
    for (c, &i) in centres.iter().enumerate() {
        resp[i * k + c] = 1.0;
    }
    let mut model = m_step(points, &resp, k, config.reg_covar)?;
    let mut lower_bound = f64::NEG_INFINITY;
    let mut converged = false;
    let mut n_iter = 0;
    for it in 1..=config.max_iter {
        n_iter = it;
        let previous = lower_bound;
        lower_bound = model.e_step(points, Some(&mut resp));
        model = m_step(points, &resp, k, config.reg_covar)?;
        let total: f64 = model.weights.iter().sum();
        for w in &mut model.weights {
            *w /= total;
        }
        if (lower_bound - previous).abs() < config.tol {
            converged = true;
            break;
        }
    }
    model.converged = converged;
    model.n_iter = n_iter;
    model.lower_bound = lower_bound;
    Ok(model)
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
