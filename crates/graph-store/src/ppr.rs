//! Personalized PageRank by power iteration on a [`CsrGraph`].
//!
//! With damping `d`, reset vector `r` (normalised to sum 1), arc weights `w_ij` and out-strengths
//! `s_i = Σ_j w_ij`, one step is
//!
//! ```text
//! x_j ← (1 − d)·r_j + d·( Σ_i x_i·w_ij / s_i  +  (Σ_{i: s_i = 0} x_i)·r_j )
//! ```
//!
//! starting from `x = r`, until the L1 change of one sweep is below `tolerance` or the iteration cap.
//! Dangling nodes (no out-weight, including nodes whose edges all weigh 0) restart by the reset vector,
//! which is what igraph's `personalized_pagerank(implementation = "prpack")` computes (PRPACK is called
//! with `u = v = reset`), so the fixed point is the same; HippoRAG 2 uses that call with `d = 0.5`,
//! `directed = False` and tolerance 1e-10 (spec hipporag2 §5.5). The result is renormalised to sum 1 as
//! igraph does.
//!
//! The arc weights are divided by their source's out-strength once, when the solver is built. Below
//! [`PprConfig::parallel_min_arcs`] arcs a sweep is Gauss–Seidel: nodes are updated in place in id order,
//! each from the neighbour values already updated in the same sweep, the dangling mass taken at the start
//! of the sweep; it has the same fixed point as the power iteration and reaches the tolerance in about
//! half the sweeps. Above it, a sweep is a Jacobi step (every node from the previous sweep's values) on
//! rayon over fixed node blocks; the residual is summed per block and then in block order, so results do
//! not depend on thread scheduling. [`PprSolver`] owns every buffer, so repeated queries on one snapshot
//! allocate nothing in the iteration loop.

use rayon::prelude::*;

use crate::csr::CsrGraph;
use crate::error::invalid;
use crate::Result;

/// Solver settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PprConfig {
    /// Probability of following an arc (HippoRAG 2: 0.5; classic PageRank: 0.85). In `[0, 1)`.
    pub damping: f64,
    /// Stop when the L1 change of one step is below this (HippoRAG / PRPACK: 1e-10).
    pub tolerance: f64,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Use rayon from this many arcs up (below it, threads cost more than they save).
    pub parallel_min_arcs: usize,
}

impl Default for PprConfig {
    fn default() -> Self {
        Self {
            damping: 0.5,
            tolerance: 1e-10,
            max_iterations: 1000,
            parallel_min_arcs: 200_000,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PprStats {
    /// Steps taken.
    pub iterations: usize,
    /// L1 change of the last step.
    pub residual: f64,
    /// Whether the residual fell below the tolerance.
    pub converged: bool,
}

const BLOCK: usize = 4096;

/// A reusable solver bound to one snapshot. See the module docs.
#[derive(Debug)]
pub struct PprSolver<'g> {
    csr: &'g CsrGraph,
    config: PprConfig,
    /// Per arc (CSR order): its weight over its source's out-strength.
    prob: Vec<f64>,
    dangling: Vec<u32>,
    reset: Vec<f64>,
    x: Vec<f64>,
    next: Vec<f64>,
    partial: Vec<f64>,
}

impl<'g> PprSolver<'g> {
    /// Prepares a solver (allocates its buffers once).
    pub fn new(csr: &'g CsrGraph, config: PprConfig) -> Result<Self> {
        if !(0.0..1.0).contains(&config.damping) {
            return Err(invalid(format!(
                "damping {} must be in [0, 1)",
                config.damping
            )));
        }
        if config.tolerance.is_nan() || config.tolerance <= 0.0 {
            return Err(invalid(format!(
                "tolerance {} must be positive",
                config.tolerance
            )));
        }
        let n = csr.node_count();
        let inv_out: Vec<f64> = csr
            .out_strength()
            .iter()
            .map(|&s| if s > 0.0 { 1.0 / s } else { 0.0 })
            .collect();
        let parallel = csr.arc_count() >= config.parallel_min_arcs;
        let prob: Vec<f64> = csr
            .sources()
            .iter()
            .zip(csr.weights())
            .map(|(&s, &w)| w * inv_out[s as usize])
            .collect();
        let dangling = csr
            .out_strength()
            .iter()
            .enumerate()
            .filter(|(_, &s)| s <= 0.0)
            .map(|(i, _)| i as u32)
            .collect();
        Ok(Self {
            csr,
            config,
            prob,
            dangling,
            reset: vec![0.0; n],
            x: vec![0.0; n],
            next: if parallel { vec![0.0; n] } else { Vec::new() },
            partial: vec![0.0; n.div_ceil(BLOCK)],
        })
    }

    /// The settings.
    pub fn config(&self) -> &PprConfig {
        &self.config
    }

    /// Runs from `reset` (one non-negative finite value per node, not all zero; normalised here).
    /// The scores are then in [`scores`](Self::scores).
    pub fn run(&mut self, reset: &[f64]) -> Result<PprStats> {
        let n = self.csr.node_count();
        if reset.len() != n {
            return Err(invalid(format!(
                "reset vector has {} entries, the graph {n} nodes",
                reset.len()
            )));
        }
        if let Some((i, v)) = reset
            .iter()
            .enumerate()
            .find(|(_, v)| !v.is_finite() || **v < 0.0)
        {
            return Err(invalid(format!(
                "reset[{i}] = {v}; entries must be finite and non-negative"
            )));
        }
        let total: f64 = reset.iter().sum();
        if total <= 0.0 {
            return Err(invalid("reset vector sums to 0"));
        }
        for (r, &v) in self.reset.iter_mut().zip(reset) {
            *r = v / total;
        }
        self.x.copy_from_slice(&self.reset);
        let parallel = self.csr.arc_count() >= self.config.parallel_min_arcs;
        let mut stats = PprStats {
            iterations: 0,
            residual: f64::INFINITY,
            converged: false,
        };
        while stats.iterations < self.config.max_iterations {
            let residual = if parallel {
                let r = self.jacobi_step();
                std::mem::swap(&mut self.x, &mut self.next);
                r
            } else {
                self.gauss_seidel_sweep()
            };
            stats.iterations += 1;
            stats.residual = residual;
            if residual < self.config.tolerance {
                stats.converged = true;
                break;
            }
        }
        let sum: f64 = self.x.iter().sum();
        if sum > 0.0 {
            for v in &mut self.x {
                *v /= sum;
            }
        }
        Ok(stats)
    }

    /// Scores of the last run, by dense node id (sum 1).
    pub fn scores(&self) -> &[f64] {
        &self.x
    }

    /// The factor of the reset vector in a sweep from the current `x`: teleport plus the restart of the
    /// dangling nodes' mass, `(1 − d) + d · Σ_{dangling} x_i`.
    fn reset_factor(&self) -> f64 {
        let d = self.config.damping;
        let dangling_mass: f64 = self.dangling.iter().map(|&i| self.x[i as usize]).sum();
        (1.0 - d) + d * dangling_mass
    }

    /// One Gauss–Seidel sweep over `x` in place; returns the L1 change.
    fn gauss_seidel_sweep(&mut self) -> f64 {
        let d = self.config.damping;
        let keep = self.reset_factor();
        let offsets = self.csr.offsets();
        let sources = self.csr.sources();
        let prob = &self.prob;
        let x = &mut self.x;
        // Two residual sums (even and odd nodes) and two accumulators per node (even and odd arcs) break
        // the floating-point dependency chains; the order of every sum is fixed, so results are too.
        let mut residual = [0.0f64; 2];
        for (j, (&r, w)) in self.reset.iter().zip(offsets.windows(2)).enumerate() {
            let (a, b) = (w[0], w[1]);
            let (src, pr) = (&sources[a..b], &prob[a..b]);
            let mut acc = [0.0f64; 2];
            let pairs = src.chunks_exact(2).zip(pr.chunks_exact(2));
            for (s2, p2) in pairs {
                acc[0] += x[s2[0] as usize] * p2[0];
                acc[1] += x[s2[1] as usize] * p2[1];
            }
            if src.len() % 2 == 1 {
                if let (Some(&s), Some(&p)) = (src.last(), pr.last()) {
                    acc[0] += x[s as usize] * p;
                }
            }
            let new = keep * r + d * (acc[0] + acc[1]);
            residual[j & 1] += (new - x[j]).abs();
            x[j] = new;
        }
        residual[0] + residual[1]
    }

    /// One Jacobi step from `x` into `next` on rayon; returns the L1 change.
    fn jacobi_step(&mut self) -> f64 {
        let d = self.config.damping;
        let keep = self.reset_factor();
        let offsets = self.csr.offsets();
        let sources = self.csr.sources();
        let prob = &self.prob;
        let reset = &self.reset;
        let x = &self.x;
        self.next
            .par_chunks_mut(BLOCK)
            .zip(self.partial.par_iter_mut())
            .enumerate()
            .for_each(|(blk, (out, part))| {
                let base = blk * BLOCK;
                let mut r = 0.0;
                for (k, o) in out.iter_mut().enumerate() {
                    let j = base + k;
                    let (a, b) = (offsets[j], offsets[j + 1]);
                    let mut acc = 0.0;
                    for (s, p) in sources[a..b].iter().zip(&prob[a..b]) {
                        acc += x[*s as usize] * p;
                    }
                    *o = keep * reset[j] + d * acc;
                    r += (*o - x[j]).abs();
                }
                *part = r;
            });
        self.partial.iter().sum()
    }
}

/// One-shot Personalized PageRank: scores by dense node id, and how the run ended.
pub fn personalized_pagerank(
    csr: &CsrGraph,
    reset: &[f64],
    config: PprConfig,
) -> Result<(Vec<f64>, PprStats)> {
    let mut solver = PprSolver::new(csr, config)?;
    let stats = solver.run(reset)?;
    Ok((solver.x, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_input() {
        let g = CsrGraph::from_edges(2, &[(0, 1, 1.0)], false).unwrap();
        let c = PprConfig::default();
        assert!(personalized_pagerank(&g, &[1.0], c).is_err());
        assert!(personalized_pagerank(&g, &[0.0, 0.0], c).is_err());
        assert!(personalized_pagerank(&g, &[-1.0, 2.0], c).is_err());
        assert!(personalized_pagerank(&g, &[f64::NAN, 2.0], c).is_err());
        let bad = PprConfig { damping: 1.0, ..c };
        assert!(PprSolver::new(&g, bad).is_err());
    }

    #[test]
    fn two_nodes_closed_form() {
        // Undirected single edge, reset on node 0: x0 = (1-d) + d x1, x1 = d x0 -> x0 = 1/(1+d).
        let g = CsrGraph::from_edges(2, &[(0, 1, 3.0)], false).unwrap();
        let (x, stats) = personalized_pagerank(&g, &[1.0, 0.0], PprConfig::default()).unwrap();
        assert!(stats.converged);
        assert!((x[0] - 1.0 / 1.5).abs() < 1e-9);
        assert!((x[1] - 0.5 / 1.5).abs() < 1e-9);
    }
}
