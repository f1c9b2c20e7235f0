//! Conjugate gradients on the symmetrised system, the solver of undirected graphs above
//! [`PprConfig::parallel_min_arcs`](super::PprConfig::parallel_min_arcs) arcs: a sparse start on one
//! thread, then dense steps on rayon.

use rayon::prelude::*;

use super::layout::Layout;
use super::{row_dot, PprSolver, PprStats, BLOCK};

impl PprSolver {
    /// Solves the symmetrised system by conjugate gradients (see the module docs) from `reset` = `b`
    /// (already `D^{-1/2} r`), leaving `z` in `x`, so that `√s_j · x_j` are the unnormalised scores. Stops
    /// when the L1 change `δ` that one power-iteration step would make to the normalised iterate is at most
    /// `d · tolerance`: the iterate is then within `δ/(1 − d)` of the fixed point, no farther than the power
    /// iteration's result when its last change is below the tolerance. Reports the operator products as
    /// the iterations and `δ / d` as the residual (`δ` when `d = 0`).
    ///
    /// While the iterates are sparse (a reset on a few nodes: the k-th one lives within k arcs of them) the
    /// operator is applied by pushing along the arcs of their support only, on this thread; once the
    /// support's arcs reach an eighth of the graph's, CG restarts densely on rayon from where it is, after
    /// removing the error along the known eigenvector `v = √s` of `S` (eigenvalue 1; 0 where there is no
    /// out-weight), so that the dense iterations see only the rest of the spectrum, `[1 − d·λ₂, 1 + d]`.
    pub(super) fn conjugate_gradients(&mut self) -> PprStats {
        let mut stats = PprStats {
            iterations: 0,
            residual: f64::INFINITY,
            converged: false,
        };
        // z = 0, res = p = b, q = 0.
        self.x.iter_mut().for_each(|v| *v = 0.0);
        self.next.iter_mut().for_each(|v| *v = 0.0);
        self.residual.copy_from_slice(&self.reset);
        self.direction.copy_from_slice(&self.reset);
        if self.cg_sparse(&mut stats) {
            return stats;
        }
        let l = &self.layout;
        let root = &l.reset_scale;
        let d = self.config.damping;
        let threshold = self.config.tolerance * d;
        let (b, v) = (&self.reset, &self.eigen[..]);
        // The exact solution's component along v is v·b / (1 − d) (A is symmetric, A·v = (1 − d)·v):
        // move z there, and its residual with it.
        let (mut vb, mut vz, mut vv) = (0.0, 0.0, 0.0);
        for ((&bj, &zj), &vj) in b.iter().zip(&self.x).zip(v) {
            vb += vj * bj;
            vz += vj * zj;
            vv += vj * vj;
        }
        let c = if vv > 0.0 {
            (vb / (1.0 - d) - vz) / vv
        } else {
            0.0
        };
        let mut sums = CgSums::default();
        for (j, (z, res)) in self.x.iter_mut().zip(self.residual.iter_mut()).enumerate() {
            // The step of `CgSums` with α = 1 along `c·v` and `(1 − d)·c·v`.
            sums.step(z, res, 1.0, c * v[j], (1.0 - d) * c * v[j], root[j]);
        }
        // The deflation alone solves it when b lies along v (a one-node graph, say).
        stats.residual = sums.change(d);
        if sums.converged(threshold) {
            stats.converged = true;
            return stats;
        }
        let mut rr = sums.rr;
        // p = res and q = A·p in one pass: the first β is 0.
        let mut pq = cg_direction(
            l,
            &self.residual,
            &mut self.direction,
            &mut self.next,
            &mut self.partial,
            0.0,
        );
        stats.iterations += 1;
        while stats.iterations < self.config.max_iterations {
            if pq.is_nan() || pq <= 0.0 {
                // Breakdown: only rounding can make p·A·p vanish on this positive definite system.
                break;
            }
            let alpha = rr / pq;
            // z += α·p, res −= α·q; with res·res, σ = Σ √s·res, ‖√s·res‖₁ and the mass Σ √s·z.
            let (p, q) = (&self.direction, &self.next);
            self.x
                .par_chunks_mut(BLOCK)
                .zip(self.residual.par_chunks_mut(BLOCK))
                .zip(self.partial.par_iter_mut())
                .enumerate()
                .for_each(|(blk, ((z, res), part))| {
                    let base = blk * BLOCK;
                    let mut sums = CgSums::default();
                    for (k, (z, res)) in z.iter_mut().zip(res.iter_mut()).enumerate() {
                        let j = base + k;
                        sums.step(z, res, alpha, p[j], q[j], root[j]);
                    }
                    *part = sums.into();
                });
            let sums = CgSums::total(&self.partial);
            stats.residual = sums.change(d);
            if sums.converged(threshold) {
                stats.converged = true;
                break;
            }
            let beta = sums.rr / rr;
            rr = sums.rr;
            pq = cg_direction(
                l,
                &self.residual,
                &mut self.direction,
                &mut self.next,
                &mut self.partial,
                beta,
            );
            stats.iterations += 1;
        }
        stats
    }

    /// The sparse start of [`conjugate_gradients`](Self::conjugate_gradients) (see there), on this thread
    /// over the support of the iterates; returns whether it converged. Leaves `x`, `residual` and
    /// `direction` zero outside the support, and `next` (q) too.
    fn cg_sparse(&mut self, stats: &mut PprStats) -> bool {
        let l = &self.layout;
        let (offsets, sources, op, root) = (&l.offsets, &l.sources, &l.prob, &l.reset_scale);
        let d = self.config.damping;
        let threshold = self.config.tolerance * d;
        let degree = |j: usize| offsets[j + 1] - offsets[j];
        let limit = sources.len() / 8;
        let (support, member) = (&mut self.support, &mut self.member);
        support.clear();
        let mut arcs = 0;
        let mut rr = 0.0;
        for (j, &bj) in self.reset.iter().enumerate() {
            if bj != 0.0 {
                support.push(j as u32);
                member[j] = true;
                arcs += degree(j);
                rr += bj * bj;
            }
        }
        let (z, res, p, q) = (
            &mut self.x,
            &mut self.residual,
            &mut self.direction,
            &mut self.next,
        );
        let mut converged = false;
        while arcs <= limit && stats.iterations < self.config.max_iterations {
            // q = A·p by pushing p_i along the arcs of every support node i (S is symmetric); nodes
            // reached for the first time join the support (their q, like their p, starts at 0).
            let old = support.len();
            for &i in &support[..old] {
                q[i as usize] = p[i as usize];
            }
            for at in 0..old {
                let i = support[at] as usize;
                let pi = p[i];
                for k in offsets[i]..offsets[i + 1] {
                    let j = sources[k] as usize;
                    if !member[j] {
                        member[j] = true;
                        support.push(j as u32);
                        arcs += degree(j);
                    }
                    q[j] -= op[k] * pi;
                }
            }
            let pq: f64 = support[..old]
                .iter()
                .map(|&j| p[j as usize] * q[j as usize])
                .sum();
            stats.iterations += 1;
            if pq.is_nan() || pq <= 0.0 {
                break;
            }
            let alpha = rr / pq;
            let mut sums = CgSums::default();
            for &j in support.iter() {
                let j = j as usize;
                sums.step(&mut z[j], &mut res[j], alpha, p[j], q[j], root[j]);
            }
            stats.residual = sums.change(d);
            if sums.converged(threshold) {
                converged = true;
                break;
            }
            let beta = sums.rr / rr;
            rr = sums.rr;
            for &j in support.iter() {
                let j = j as usize;
                p[j] = res[j] + beta * p[j];
            }
        }
        for &j in support.iter() {
            member[j as usize] = false;
        }
        stats.converged = converged;
        converged
    }
}

/// The next direction of conjugate gradients in one pass over the arcs: `p ← res + β·p` and
/// `q ← A·res + β·q` (= A·p, without a second pass over p), returning `p·q`.
fn cg_direction(
    l: &Layout,
    res: &[f64],
    direction: &mut [f64],
    next: &mut [f64],
    partial: &mut [[f64; 4]],
    beta: f64,
) -> f64 {
    let (offsets, sources, op) = (&l.offsets, &l.sources, &l.prob);
    direction
        .par_chunks_mut(BLOCK)
        .zip(next.par_chunks_mut(BLOCK))
        .zip(partial.par_iter_mut())
        .enumerate()
        .for_each(|(blk, ((p, q), part))| {
            let base = blk * BLOCK;
            let mut pq = 0.0;
            for (k, (p, q)) in p.iter_mut().zip(q.iter_mut()).enumerate() {
                let j = base + k;
                let (a, e) = (offsets[j], offsets[j + 1]);
                let ar = res[j] - row_dot(&sources[a..e], &op[a..e], res);
                *p = res[j] + beta * *p;
                *q = ar + beta * *q;
                pq += *p * *q;
            }
            part[0] = pq;
        });
    partial.iter().map(|p| p[0]).sum()
}

/// The sums of one conjugate-gradient update: `res·res`, `σ = Σ √s·res`, `‖√s·res‖₁` and the mass
/// `Σ √s·z`.
#[derive(Debug, Clone, Copy, Default)]
struct CgSums {
    rr: f64,
    sigma: f64,
    l1: f64,
    mass: f64,
}

impl CgSums {
    /// `z += α·p`, `res −= α·q` at one node of scale `root`, added to the sums.
    #[inline(always)]
    fn step(&mut self, z: &mut f64, res: &mut f64, alpha: f64, p: f64, q: f64, root: f64) {
        *z += alpha * p;
        *res -= alpha * q;
        self.rr += *res * *res;
        self.sigma += root * *res;
        self.l1 += root * res.abs();
        self.mass += root * *z;
    }

    /// Per-block sums added in block order.
    fn total(blocks: &[[f64; 4]]) -> Self {
        let mut t = Self::default();
        for b in blocks {
            t.rr += b[0];
            t.sigma += b[1];
            t.l1 += b[2];
            t.mass += b[3];
        }
        t
    }

    /// With y = D^{1/2} z and its residual ρ = D^{1/2} res, a power-iteration step from y/Σy changes it
    /// by (ρ − (Σρ)·r) / Σy (r = D^{1/2} b, the normalised reset, ‖r‖₁ = 1): at most
    /// (‖ρ‖₁ + |Σρ|) / Σy. (The deflation keeps Σρ near 0.)
    fn bound(&self) -> f64 {
        (self.l1 + self.sigma.abs()) / self.mass
    }

    /// Whether the bound is within `threshold` (`d · tolerance`).
    fn converged(&self, threshold: f64) -> bool {
        self.bound() <= threshold
    }

    /// The residual reported: the bound divided by the damping (itself when `d = 0`).
    fn change(&self, d: f64) -> f64 {
        if d > 0.0 {
            self.bound() / d
        } else {
            self.bound()
        }
    }
}

impl From<CgSums> for [f64; 4] {
    fn from(s: CgSums) -> Self {
        [s.rr, s.sigma, s.l1, s.mass]
    }
}
