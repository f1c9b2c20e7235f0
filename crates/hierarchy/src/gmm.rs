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

const LN_2PI: f64 = 1.837_877_066_409_345_5;
/// Log-ratios below this are treated as zero probability: `e^−50 ≈ 2·10⁻²²` is far below the rounding
/// of a posterior or of a log-sum-exp whose largest term is 1, and skipping the `exp` makes E-steps with
/// hundreds of components (LeanRAG's k = N / 20) several times faster.
const NEGLIGIBLE: f64 = -50.0;
/// Points per block of the parallel E- and M-steps.
const BLOCK: usize = 2048;

/// `e^x` for `x ∈ [NEGLIGIBLE − 10, 0]` (accurate to ~1 ulp down to x ≈ −700; the E-step passes
/// `[NEGLIGIBLE, 0]`): Cody–Waite reduction `x = k·ln 2 + r`, `|r| ≤ ln 2 / 2`, the degree-13 Taylor
/// polynomial of `e^r` (truncation < 0.05 ulp), scaled by `2^k` through the exponent bits. Plain
/// multiplies and adds, no branch and no call, so a loop of it vectorises, and every CPU computes the same
/// bits (no FMA contraction: Rust does not contract).
#[inline(always)]
fn exp_neg(x: f64) -> f64 {
    // 1.5 · 2^52: adding it rounds to an integer held in the low mantissa bits.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    // ln 2 split so that k · LN2_HI is exact for |k| < 2^11.
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    const C: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5_040.0,
        1.0 / 40_320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    let x = if x > NEGLIGIBLE - 10.0 {
        x
    } else {
        NEGLIGIBLE - 10.0
    };
    let y = x * LOG2_E + SHIFT;
    let k = y - SHIFT;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = C[13];
    for &c in C[..13].iter().rev() {
        p = p * r + c;
    }
    // k (as a two's-complement integer in y's low bits) + 1023 is the biased exponent of 2^k.
    let scale = f64::from_bits(y.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(1023) << 52);
    p * scale
}

/// Runs `f` compiled for AVX2 and FMA when the CPU has them (pulp's run-time dispatch; pass an
/// `#[inline(always)]` closure so that its body is compiled inside), else as it is. The arithmetic is the
/// same either way (no contraction into FMA), only wider.
#[inline(always)]
fn with_simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        return simd.vectorize(f);
    }
    f()
}

/// A term of the log-sum-exp: `e^t`, or 0 when `t` is below [`NEGLIGIBLE`] (no branch: both are
/// computed and one is kept, so that loops of it vectorise).
#[inline(always)]
fn negligible_or_exp(t: f64) -> f64 {
    let e = exp_neg(t);
    if t >= NEGLIGIBLE {
        e
    } else {
        0.0
    }
}

/// Sums `ln` of many values ≥ 1 with one `ln` per group: the logarithm of the group's product (the
/// product's relative rounding, a few ulp per group, is far below any tolerance of the fit).
#[derive(Debug, Clone, Copy)]
struct LogSum {
    sum: f64,
    product: f64,
    count: u32,
}

impl LogSum {
    fn new() -> Self {
        Self {
            sum: 0.0,
            product: 1.0,
            count: 0,
        }
    }

    /// Adds `ln v` for `v ≥ 1`.
    #[inline(always)]
    fn add(&mut self, v: f64) {
        self.product *= v;
        self.count += 1;
        if self.count == 16 || self.product > 1e250 {
            self.sum += self.product.ln();
            self.product = 1.0;
            self.count = 0;
        }
    }

    fn total(self) -> f64 {
        self.sum + self.product.ln()
    }
}

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

/// `‖a − b‖²`, summed in coordinate order (both seedings use it, so they see the same bits).
#[inline(always)]
fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// k-means++ seeding (scikit-learn's variant with `2 + ⌊ln k⌋` local trials); returns the centre indices.
fn kmeans_plus_plus(points: &Points, k: usize, rng: &mut SplitMix64) -> Vec<usize> {
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
const SEEDING_SCAN_LIMIT: usize = 1 << 27;

/// k-means++ seeding as [`kmeans_plus_plus`] describes it, in time about `n · trials · log n` instead of
/// `n · k · trials`: the points sit in a k-d tree whose nodes know the largest squared distance to the
/// nearest centre below them, so a candidate visits only the points it brings closer; the draws by squared
/// distance descend a sum tree. The same distribution and the same random stream; the potentials are
/// maintained (`pot − decrease`) rather than re-added from scratch, so a near-tie between trials can go the
/// other way than in the full scan.
fn kmeans_plus_plus_tree(points: &Points, k: usize, rng: &mut SplitMix64) -> Vec<usize> {
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
struct PointTree {
    d: usize,
    /// Point indices; each node is a range of them.
    order: Vec<usize>,
    /// Per node: start, end, children (0 for a leaf: the root is never a child).
    ranges: Vec<(usize, usize, usize, usize)>,
    /// Per node, `lo` then `hi` (2·d values).
    boxes: Vec<f64>,
    /// Per node, the largest `closest` below it.
    max: Vec<f64>,
    /// Nodes whose `max` may have dropped since the last refresh.
    dirty: Vec<usize>,
}

impl PointTree {
    const LEAF: usize = 16;

    fn new(points: &Points) -> Self {
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

    fn build(&mut self, points: &Points, start: usize, end: usize) -> usize {
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

    fn dist2(&self, node: usize, x: &[f64]) -> f64 {
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
    fn refresh(&mut self, closest: &[f64]) {
        self.dirty = (0..self.ranges.len()).collect();
        self.refresh_after(closest);
    }

    /// Recomputes the `max` of the nodes marked dirty, deepest first (children are numbered after their
    /// parents).
    fn refresh_after(&mut self, closest: &[f64]) {
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
    fn decrease(
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
struct SumTree {
    size: usize,
    sums: Vec<f64>,
}

impl SumTree {
    fn new(weights: &[f64]) -> Self {
        let size = weights.len().next_power_of_two().max(1);
        let mut sums = vec![0.0; 2 * size];
        sums[size..size + weights.len()].copy_from_slice(weights);
        for i in (1..size).rev() {
            sums[i] = sums[2 * i] + sums[2 * i + 1];
        }
        Self { size, sums }
    }

    fn total(&self) -> f64 {
        self.sums[1]
    }

    fn set(&mut self, i: usize, v: f64) {
        let mut at = self.size + i;
        self.sums[at] = v;
        while at > 1 {
            at /= 2;
            self.sums[at] = self.sums[2 * at] + self.sums[2 * at + 1];
        }
    }

    /// The first index whose prefix sum reaches `r` (the last index when none does).
    fn find(&self, mut r: f64) -> usize {
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

/// Per-block sums of the M-step's first pass: component masses and posterior-weighted point sums.
struct Moments {
    nk: Vec<f64>,
    sx: Vec<f64>,
}

impl Moments {
    fn new(k: usize, d: usize) -> Self {
        Self {
            nk: vec![0.0; k],
            sx: vec![0.0; k * d],
        }
    }

    /// Adds point `x` with its posteriors `row`. In two dimensions every component is added (a posterior
    /// of 0 adds ±0, which leaves a sum as it is, since a sum of finite terms from +0 is never −0: no
    /// branch to mispredict); above, components of posterior 0 are skipped.
    #[inline(always)]
    fn add(&mut self, x: &[f64], row: &[f64]) {
        let d = x.len();
        if d == 2 {
            let (x0, x1) = (x[0], x[1]);
            let k = row.len();
            let (nk, sx) = (&mut self.nk[..k], &mut self.sx[..2 * k]);
            for (c, &r) in row.iter().enumerate() {
                nk[c] += r;
                sx[2 * c] += r * x0;
                sx[2 * c + 1] += r * x1;
            }
            return;
        }
        for (c, &r) in row.iter().enumerate() {
            if r == 0.0 {
                continue;
            }
            self.add_one(c, x, r);
        }
    }

    /// Adds point `x` with posterior `r` of component `c` (what [`Moments::add`] does per component).
    #[inline(always)]
    fn add_one(&mut self, c: usize, x: &[f64], r: f64) {
        let d = x.len();
        self.nk[c] += r;
        for (s, v) in self.sx[c * d..(c + 1) * d].iter_mut().zip(x) {
            *s += r * v;
        }
    }
}

/// The largest of `values` (NaNs ignored, `−∞` for none): a compare-and-select, as `f64::max` without its
/// NaN bookkeeping on the dependency chain.
#[inline(always)]
fn max_of(values: &[f64]) -> f64 {
    values
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}

/// The two-dimensional components as columns: mean, the three entries of `L⁻¹` and the constant
/// `ln w + ½ ln det Σ⁻¹ − ln 2π`.
struct Planar {
    mx: Vec<f64>,
    my: Vec<f64>,
    l0: Vec<f64>,
    l2: Vec<f64>,
    l3: Vec<f64>,
    constant: Vec<f64>,
}

impl Planar {
    fn new(g: &Gmm, log_w: &[f64]) -> Self {
        let k = g.k;
        let col = |f: &dyn Fn(usize) -> f64| (0..k).map(f).collect::<Vec<f64>>();
        Self {
            mx: col(&|c| g.means[2 * c]),
            my: col(&|c| g.means[2 * c + 1]),
            l0: col(&|c| g.inv_chol[c * 4]),
            l2: col(&|c| g.inv_chol[c * 4 + 2]),
            l3: col(&|c| g.inv_chol[c * 4 + 3]),
            constant: col(&|c| log_w[c] + g.log_det[c] - LN_2PI),
        }
    }

    /// Component `c`'s term at `(x0, x1)`, with the E-step's arithmetic.
    #[inline(always)]
    fn term(&self, c: usize, x0: f64, x1: f64) -> f64 {
        let (dx, dy) = (x0 - self.mx[c], x1 - self.my[c]);
        let y0 = self.l0[c] * dx;
        let y1 = self.l2[c] * dx + self.l3[c] * dy;
        self.constant[c] - 0.5 * (y0 * y0 + y1 * y1)
    }
}

/// From this many components on, fits and predictions keep posteriors sparse (only the non-zero ones; a
/// posterior is exactly zero when its log-ratio to the point's best component is below [`NEGLIGIBLE`]),
/// and in two dimensions look each point's components up in a [`ComponentTree`] instead of scanning all
/// k: LeanRAG's first layer has k = N / 20, where a dense `n × k` matrix is quadratic in memory (a
/// 150,000-entity layer would need 9 GB per restart) and a full scan quadratic in time. Below it the dense
/// path is faster. Both give the same bits: a zero posterior adds ±0 to every sum, which leaves it as it is.
const SPARSE_MIN_K: usize = 64;

/// Components per leaf of a [`ComponentTree`].
const TREE_LEAF: usize = 8;

/// One block's posteriors, sparse: per point in order, its components of non-zero posterior in ascending
/// order with their posteriors.
#[derive(Debug, Clone, Default, PartialEq)]
struct SparseRows {
    /// End of each point's entries in `comps` / `values`.
    ends: Vec<usize>,
    comps: Vec<u32>,
    values: Vec<f64>,
}

impl SparseRows {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn row(&self, r: usize) -> (&[u32], &[f64]) {
        let start = if r == 0 { 0 } else { self.ends[r - 1] };
        let end = self.ends[r];
        (&self.comps[start..end], &self.values[start..end])
    }

    /// Every entry as `(point within the block, component, posterior)`, in order.
    fn entries(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        (0..self.len()).flat_map(move |r| {
            let (comps, values) = self.row(r);
            comps
                .iter()
                .zip(values)
                .map(move |(&c, &v)| (r, c as usize, v))
        })
    }

    fn push(&mut self, c: u32, v: f64) {
        self.comps.push(c);
        self.values.push(v);
    }

    fn end_row(&mut self) {
        self.ends.push(self.comps.len());
    }

    /// The non-zero entries of a dense posterior row.
    fn push_dense_row(&mut self, row: &[f64]) {
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
    blocks: Vec<SparseRows>,
    n: usize,
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
struct ComponentTree {
    nodes: Vec<TreeNode>,
    /// Component indices; each leaf is a range of them.
    order: Vec<u32>,
    /// Per component, `s` (see above).
    s: Vec<f64>,
}

struct TreeNode {
    lo: [f64; 2],
    hi: [f64; 2],
    kmax: f64,
    smin: f64,
    start: usize,
    end: usize,
    /// Child nodes (`None` for a leaf).
    children: Option<(usize, usize)>,
}

impl TreeNode {
    fn dist2(&self, x0: f64, x1: f64) -> f64 {
        let d0 = (self.lo[0] - x0).max(x0 - self.hi[0]).max(0.0);
        let d1 = (self.lo[1] - x1).max(x1 - self.hi[1]).max(0.0);
        d0 * d0 + d1 * d1
    }
}

impl ComponentTree {
    fn new(g: &Gmm, p: &Planar) -> Self {
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
    fn build(&mut self, p: &Planar, start: usize, end: usize) -> usize {
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
    fn candidates(&self, p: &Planar, x0: f64, x1: f64, out: &mut Vec<u32>, stack: &mut Vec<usize>) {
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

/// Responsibilities for the M-step: dense row-major `n × k`, or sparse blocks of [`BLOCK`] points.
#[derive(Clone, Copy)]
enum Resp<'a> {
    Dense(&'a [f64]),
    Sparse(&'a [SparseRows]),
}

/// M-step: parameters from responsibilities. Weights are left unnormalised
/// (masses / n) as scikit-learn's initialisation does; callers normalise after EM steps. `moments` are
/// the first pass's per-block sums when the E-step already made them.
fn m_step(
    points: &Points,
    resp: Resp<'_>,
    k: usize,
    reg: f64,
    moments: Option<Vec<Moments>>,
) -> Result<Gmm> {
    let (n, d) = (points.len(), points.dim());
    let blocks = n.div_ceil(BLOCK);
    // Pass 1: masses and weighted sums, per block, added in block order.
    let partial: Vec<Moments> = match moments {
        Some(m) => m,
        None => (0..blocks)
            .into_par_iter()
            .map(|b| {
                let mut m = Moments::new(k, d);
                match resp {
                    Resp::Dense(resp) => {
                        for i in b * BLOCK..((b + 1) * BLOCK).min(n) {
                            m.add(points.row(i), &resp[i * k..(i + 1) * k]);
                        }
                    }
                    Resp::Sparse(blocks) => {
                        for (r, c, v) in blocks[b].entries() {
                            m.add_one(c, points.row(b * BLOCK + r), v);
                        }
                    }
                }
                m
            })
            .collect(),
    };
    let mut nk = vec![10.0 * f64::EPSILON; k];
    let mut means = vec![0.0; k * d];
    for p in &partial {
        for (a, b) in nk.iter_mut().zip(&p.nk) {
            *a += b;
        }
        for (a, b) in means.iter_mut().zip(&p.sx) {
            *a += b;
        }
    }
    for c in 0..k {
        for v in &mut means[c * d..(c + 1) * d] {
            *v /= nk[c];
        }
    }
    // Pass 2: covariances around the new means.
    let (mx, my): (Vec<f64>, Vec<f64>) = if d == 2 {
        means.chunks_exact(2).map(|m| (m[0], m[1])).unzip()
    } else {
        (Vec::new(), Vec::new())
    };
    let partial: Vec<Vec<f64>> = (0..blocks)
        .into_par_iter()
        .map(|b| {
            let mut cov = vec![0.0; k * d * d];
            let mut diff = vec![0.0; d];
            if d == 2 {
                // The default PCA-2 case: three accumulations per component in columns, no branch. A
                // component of posterior 0 adds ±0 to its sums, which leaves them as they are (a sum of
                // finite terms starting at +0 is never −0), so the result is that of skipping it.
                let (mut sxx, mut sxy, mut syy) = (vec![0.0; k], vec![0.0; k], vec![0.0; k]);
                with_simd(
                    #[inline(always)]
                    || {
                        let (mx, my) = (&mx[..k], &my[..k]);
                        let (sxx, sxy, syy) = (&mut sxx[..k], &mut sxy[..k], &mut syy[..k]);
                        match resp {
                            Resp::Dense(resp) => {
                                for i in b * BLOCK..((b + 1) * BLOCK).min(n) {
                                    let (x0, x1) = (points.row(i)[0], points.row(i)[1]);
                                    let row = &resp[i * k..(i + 1) * k];
                                    for c in 0..k {
                                        let (dx, dy) = (x0 - mx[c], x1 - my[c]);
                                        let (rx, ry) = (row[c] * dx, row[c] * dy);
                                        sxx[c] += rx * dx;
                                        sxy[c] += ry * dx;
                                        syy[c] += ry * dy;
                                    }
                                }
                            }
                            Resp::Sparse(blocks) => {
                                for (r, c, v) in blocks[b].entries() {
                                    let x = points.row(b * BLOCK + r);
                                    let (dx, dy) = (x[0] - mx[c], x[1] - my[c]);
                                    let (rx, ry) = (v * dx, v * dy);
                                    sxx[c] += rx * dx;
                                    sxy[c] += ry * dx;
                                    syy[c] += ry * dy;
                                }
                            }
                        }
                    },
                );
                for c in 0..k {
                    cov[c * 4] = sxx[c];
                    cov[c * 4 + 2] = sxy[c];
                    cov[c * 4 + 3] = syy[c];
                }
                return cov;
            }
            let mut add = |x: &[f64], c: usize, r: f64| {
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
            };
            match resp {
                Resp::Dense(resp) => {
                    for i in b * BLOCK..((b + 1) * BLOCK).min(n) {
                        let x = points.row(i);
                        for (c, &r) in resp[i * k..(i + 1) * k].iter().enumerate() {
                            if r != 0.0 {
                                add(x, c, r);
                            }
                        }
                    }
                }
                Resp::Sparse(blocks) => {
                    for (r, c, v) in blocks[b].entries() {
                        add(points.row(b * BLOCK + r), c, v);
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

/// One restart. `sparse` chooses the posteriors' storage (see [`SPARSE_MIN_K`]); both give the same bits.
fn fit_once(
    points: &Points,
    k: usize,
    config: &GmmConfig,
    restart: usize,
    sparse: bool,
) -> Result<Gmm> {
    let n = points.len();
    let mut rng = SplitMix64::stream(config.seed, k as u64, restart as u64);
    let centres = kmeans_plus_plus(points, k, &mut rng);
    // Each component starts from its centre alone: one posterior of 1 per centre (a point drawn twice,
    // possible when points coincide, starts both components).
    let mut pairs: Vec<(usize, u32)> = centres
        .iter()
        .enumerate()
        .map(|(c, &i)| (i, c as u32))
        .collect();
    pairs.sort_unstable();
    let mut next = pairs.iter().peekable();
    let start: Vec<SparseRows> = (0..n.div_ceil(BLOCK))
        .map(|b| {
            let mut rows = SparseRows::default();
            for i in b * BLOCK..(b * BLOCK + BLOCK).min(n) {
                while let Some(&&(_, c)) = next.peek().filter(|p| p.0 == i) {
                    rows.push(c, 1.0);
                    next.next();
                }
                rows.end_row();
            }
            rows
        })
        .collect();
    let mut model = m_step(points, Resp::Sparse(&start), k, config.reg_covar, None)?;
    drop(start);
    let mut dense = if sparse { Vec::new() } else { vec![0.0; n * k] };
    let mut lower_bound = f64::NEG_INFINITY;
    let mut converged = false;
    let mut n_iter = 0;
    for it in 1..=config.max_iter {
        n_iter = it;
        let previous = lower_bound;
        let (bound, rows, moments) = if sparse {
            model.e_step_sparse(points, true)
        } else {
            let (bound, moments) = model.e_step_into(points, &mut dense, true);
            (bound, Vec::new(), moments)
        };
        lower_bound = bound;
        let resp = if sparse {
            Resp::Sparse(&rows)
        } else {
            Resp::Dense(&dense)
        };
        model = m_step(points, resp, k, config.reg_covar, Some(moments))?;
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
