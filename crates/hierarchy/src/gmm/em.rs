//! One EM restart: the M-step's moments, the planar components, the M-step and the fit loop.

use super::*;

/// Per-block sums of the M-step's first pass: component masses and posterior-weighted point sums.
pub(super) struct Moments {
    pub(super) nk: Vec<f64>,
    pub(super) sx: Vec<f64>,
}

impl Moments {
    pub(super) fn new(k: usize, d: usize) -> Self {
        Self {
            nk: vec![0.0; k],
            sx: vec![0.0; k * d],
        }
    }

    /// Adds point `x` with its posteriors `row`. In two dimensions every component is added (a posterior
    /// of 0 adds ±0, which leaves a sum as it is, since a sum of finite terms from +0 is never −0: no
    /// branch to mispredict); above, components of posterior 0 are skipped.
    #[inline(always)]
    pub(super) fn add(&mut self, x: &[f64], row: &[f64]) {
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
    pub(super) fn add_one(&mut self, c: usize, x: &[f64], r: f64) {
        let d = x.len();
        self.nk[c] += r;
        for (s, v) in self.sx[c * d..(c + 1) * d].iter_mut().zip(x) {
            *s += r * v;
        }
    }
}

/// The two-dimensional components as columns: mean, the three entries of `L⁻¹` and the constant
/// `ln w + ½ ln det Σ⁻¹ − ln 2π`.
pub(super) struct Planar {
    pub(super) mx: Vec<f64>,
    pub(super) my: Vec<f64>,
    pub(super) l0: Vec<f64>,
    pub(super) l2: Vec<f64>,
    pub(super) l3: Vec<f64>,
    pub(super) constant: Vec<f64>,
}

impl Planar {
    pub(super) fn new(g: &Gmm, log_w: &[f64]) -> Self {
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
    pub(super) fn term(&self, c: usize, x0: f64, x1: f64) -> f64 {
        let (dx, dy) = (x0 - self.mx[c], x1 - self.my[c]);
        let y0 = self.l0[c] * dx;
        let y1 = self.l2[c] * dx + self.l3[c] * dy;
        self.constant[c] - 0.5 * (y0 * y0 + y1 * y1)
    }
}

/// Responsibilities for the M-step: dense row-major `n × k`, or sparse blocks of [`BLOCK`] points.
#[derive(Clone, Copy)]
pub(super) enum Resp<'a> {
    Dense(&'a [f64]),
    Sparse(&'a [SparseRows]),
}

/// M-step: parameters from responsibilities. Weights are left unnormalised
/// (masses / n) as scikit-learn's initialisation does; callers normalise after EM steps. `moments` are
/// the first pass's per-block sums when the E-step already made them.
pub(super) fn m_step(
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
pub(super) fn fit_once(
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
