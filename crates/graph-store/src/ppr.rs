//! Personalized PageRank by power iteration on a [`CsrGraph`].
//!
//! With damping `d`, reset vector `r` (normalised to sum 1), arc weights `w_ij` and out-strengths
//! `s_i = Σ_j w_ij`, one step is
//!
//! ```text
//! x_j ← (1 − d)·r_j + d·( Σ_i x_i·w_ij / s_i  +  (Σ_{i: s_i = 0} x_i)·r_j )
//! ```
//!
//! starting from `x = r`, until `‖x_new − x‖₁ < tolerance` or the iteration cap. Dangling nodes (no
//! out-weight, including nodes whose edges all weigh 0) restart by the reset vector, which is what igraph's
//! `personalized_pagerank(implementation = "prpack")` computes (PRPACK is called with `u = v = reset`), so
//! the fixed point is the same; HippoRAG 2 uses that call with `d = 0.5`, `directed = False` and
//! tolerance 1e-10 (spec hipporag2 §5.5). The result is renormalised to sum 1 as igraph does.
//!
//! [`PprSolver`] owns every buffer, so repeated queries on one snapshot allocate nothing in the iteration
//! loop. Above [`PprConfig::parallel_min_arcs`] arcs the pull step runs on rayon over fixed node blocks; the
//! residual is summed per block and then in block order, so results do not depend on thread scheduling.

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
    inv_out: Vec<f64>,
    dangling: Vec<u32>,
    reset: Vec<f64>,
    x: Vec<f64>,
    y: Vec<f64>,
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
            inv_out,
            dangling,
            reset: vec![0.0; n],
            x: vec![0.0; n],
            y: vec![0.0; n],
            next: vec![0.0; n],
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
            let residual = self.step(parallel);
            stats.iterations += 1;
            stats.residual = residual;
            std::mem::swap(&mut self.x, &mut self.next);
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

    /// One step from `x` into `next`; returns the L1 change.
    fn step(&mut self, parallel: bool) -> f64 {
        let d = self.config.damping;
        let dangling_mass: f64 = self.dangling.iter().map(|&i| self.x[i as usize]).sum();
        let offsets = self.csr.offsets();
        let sources = self.csr.sources();
        let weights = self.csr.weights();
        let reset = &self.reset;
        let x = &self.x;
        let restart = d * dangling_mass;
        if parallel {
            self.y
                .par_chunks_mut(BLOCK)
                .zip(x.par_chunks(BLOCK))
                .zip(self.inv_out.par_chunks(BLOCK))
                .for_each(|((y, x), inv)| {
                    for ((y, x), inv) in y.iter_mut().zip(x).zip(inv) {
                        *y = x * inv;
                    }
                });
        } else {
            for ((y, x), inv) in self.y.iter_mut().zip(x).zip(&self.inv_out) {
                *y = x * inv;
            }
        }
        let y = &self.y;
        // One block of the pull step; returns the block's L1 change. Both paths sum the residual per
        // block and then in block order, so they stop after the same step with identical scores.
        let fill = |blk: usize, out: &mut [f64]| -> f64 {
            let base = blk * BLOCK;
            let mut r = 0.0;
            for (k, o) in out.iter_mut().enumerate() {
                let j = base + k;
                let (a, b) = (offsets[j], offsets[j + 1]);
                let mut acc = 0.0;
                for (s, w) in sources[a..b].iter().zip(&weights[a..b]) {
                    acc += y[*s as usize] * w;
                }
                *o = (1.0 - d) * reset[j] + d * acc + restart * reset[j];
                r += (*o - x[j]).abs();
            }
            r
        };
        if parallel {
            self.next
                .par_chunks_mut(BLOCK)
                .zip(self.partial.par_iter_mut())
                .enumerate()
                .for_each(|(blk, (out, part))| *part = fill(blk, out));
        } else {
            for (blk, (out, part)) in self
                .next
                .chunks_mut(BLOCK)
                .zip(self.partial.iter_mut())
                .enumerate()
            {
                *part = fill(blk, out);
            }
        }
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
