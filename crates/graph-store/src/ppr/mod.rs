//! Personalized PageRank on a [`CsrGraph`].
//!
//! With damping `d`, reset vector `r` (normalised to sum 1), arc weights `w_ij` and out-strengths
//! `s_i = Σ_j w_ij`, the scores are the fixed point of
//!
//! ```text
//! x_j ← (1 − d)·r_j + d·( Σ_i x_i·w_ij / s_i  +  (Σ_{i: s_i = 0} x_i)·r_j )
//! ```
//!
//! reached from `x = r` until the L1 change of one sweep is below `tolerance` or the iteration cap.
//! Dangling nodes (no out-weight, including nodes whose edges all weigh 0) restart by the reset vector,
//! which is what igraph's `personalized_pagerank(implementation = "prpack")` computes (PRPACK is called
//! with `u = v = reset`), so the fixed point is the same; HippoRAG 2 uses that call with `d = 0.5`,
//! `directed = False` and tolerance 1e-10 (spec hipporag2 §5.5). The result is renormalised to sum 1 as
//! igraph does.
//!
//! The arc weights are divided by their source's out-strength once, when the solver is built. Below
//! [`PprConfig::parallel_min_arcs`] arcs, on an undirected graph, the nodes with few neighbours are first
//! eliminated exactly (Gaussian elimination on `I − d·Pᵀ`, never adding arcs; their scores are recovered
//! after the sweeps), and a sweep over the rest is successive over-relaxation (SOR): nodes are updated in
//! place, each from the neighbour values already updated in the same sweep (Gauss–Seidel, the diagonal
//! solved), the step scaled by `ω` ([`PprConfig::relaxation`], [`default_relaxation`]: 1.1 at `d = 0.5`),
//! the dangling mass taken at the start of the sweep. It has the same fixed point as the power iteration.
//! The kept nodes are swept in order of in-degree (then id) on a renumbered copy of the arcs, which keeps
//! runs of equal-length rows together (the inner loop's branches stay predictable). The run stops when
//! the L1 change of the whole vector in one sweep (bounded from the kept nodes' change) is below the
//! tolerance. Above the threshold an undirected graph is solved by conjugate gradients on rayon: with
//! `D` the out-strengths, `y = D^{1/2} z` turns `(I − d·Pᵀ) y = r` into the symmetric positive definite
//! system `(I − d·D^{-1/2} W D^{-1/2}) z = D^{-1/2} r` (eigenvalues in `[1 − d, 1 + d]`; a node without
//! out-weight keeps scale 1 and its own row), whose solution normalised to sum 1 is the fixed point above
//! (the dangling restart only rescales it). CG stops when a bound on the L1 change that one
//! power-iteration step would make to the normalised iterate is at most `d` times the tolerance, so that
//! the result is at least as close to the fixed point as the power iteration's when its last change is
//! below the tolerance. A sparse reset starts CG on the support of its iterates on one thread; CG then
//! continues densely after removing the error along `S`'s known top eigenvector `√s` (see
//! `conjugate_gradients`): on the 1M-arc random graph of the bench, 13 operator products (three of them
//! sparse) against 18 Jacobi steps. A directed graph above the threshold takes Jacobi steps (every node
//! from the previous sweep's values) on rayon. Parallel work runs over fixed node blocks and every sum is
//! taken per block and then in block order, so results do not depend on thread scheduling. [`PprSolver`]
//! owns its copy of the graph and every buffer: it can be kept beside the graph, and repeated queries
//! allocate nothing.

use std::sync::Arc;

use rayon::prelude::*;

use crate::csr::CsrGraph;
use crate::error::invalid;
use crate::Result;

mod cg;
mod layout;

use layout::Layout;

/// Solver settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PprConfig {
    /// Probability of following an arc (HippoRAG 2: 0.5; classic PageRank: 0.85). In `[0, 1)`.
    pub damping: f64,
    /// Stop when the L1 change of one step is below this (HippoRAG / PRPACK: 1e-10).
    pub tolerance: f64,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Use rayon from this many arcs up (below it, threads cost more than they save): conjugate gradients
    /// on an undirected graph, Jacobi steps on a directed one.
    pub parallel_min_arcs: usize,
    /// The over-relaxation factor `ω` of the sequential sweeps, in `(0, 2)` (1: plain Gauss–Seidel);
    /// `None`: [`default_relaxation`] of the damping.
    pub relaxation: Option<f64>,
}

impl Default for PprConfig {
    fn default() -> Self {
        Self {
            damping: 0.5,
            tolerance: 1e-10,
            max_iterations: 1000,
            parallel_min_arcs: 200_000,
            relaxation: None,
        }
    }
}

/// The over-relaxation factor used when [`PprConfig::relaxation`] is `None`: 1.1 (the best on the MuSiQue
/// graph at `d = 0.5`, measured before the elimination: 13 sweeps; 1.05: 15, 1.15: 15, 1.2: 16; after it,
/// still 13), kept at least 0.1 below `2/(1 + d)` and never below 1. For `0 < ω < 2/(1 + ρ(|J|))` SOR
/// converges on an H-matrix; `I − d·Pᵀ` is one with `ρ(|J|) ≤ d`, and the eliminated system is its Schur
/// complement, an M-matrix whose column diagonal dominance is no weaker (tested against the exact solution
/// on random, tree-like and MuSiQue graphs).
pub fn default_relaxation(damping: f64) -> f64 {
    let limit = 2.0 / (1.0 + damping);
    1.1f64.min(limit - 0.1).max(1.0)
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PprStats {
    /// Steps taken.
    pub iterations: usize,
    /// L1 change of the last step (sequential sweeps: a bound of the whole vector's change; conjugate
    /// gradients: the change one power-iteration step would make to the result, divided by the damping —
    /// the last change of a power iteration that ends no closer).
    pub residual: f64,
    /// Whether the residual fell below the tolerance.
    pub converged: bool,
}

const BLOCK: usize = 4096;

/// `Σ_k x[sources[k]] · weights[k]` with four accumulators (a fixed order, so the same bits every time):
/// the gathers of a long row overlap instead of waiting on one chain of adds.
#[inline(always)]
fn row_dot(sources: &[u32], weights: &[f64], x: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (s4, w4) = (sources.chunks_exact(4), weights.chunks_exact(4));
    let (sr, wr) = (s4.remainder(), w4.remainder());
    for (s, w) in s4.zip(w4) {
        for l in 0..4 {
            acc[l] += x[s[l] as usize] * w[l];
        }
    }
    for (s, w) in sr.iter().zip(wr) {
        acc[0] += x[*s as usize] * w;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// How the solver sweeps (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// Sequential over-relaxed Gauss–Seidel after the elimination.
    Sor,
    /// Parallel Jacobi steps (directed graphs).
    Jacobi,
    /// Parallel conjugate gradients on the symmetrised system (undirected graphs).
    Cg,
}

/// The constants of one SOR sweep.
struct SorStep<'a> {
    offsets: &'a [usize],
    sources: &'a [u32],
    /// `ω · M'_ji / (1 − M'_jj)` per arc.
    prob: &'a [f64],
    /// `reset_scale_j · r'_j` per position.
    reset: &'a [f64],
    /// The reset factor `t` of this sweep.
    reset_factor: f64,
    /// `1 − ω`.
    keep: f64,
}

impl SorStep<'_> {
    /// Updates position `j` in place; returns `|Δx_j|`. Two accumulators (even and odd arcs) break the
    /// dependency chain of the neighbour sum.
    #[inline(always)]
    fn update(&self, x: &mut [f64], j: usize) -> f64 {
        let (a, b) = (self.offsets[j], self.offsets[j + 1]);
        let (src, pr) = (&self.sources[a..b], &self.prob[a..b]);
        let (mut acc0, mut acc1) = (0.0f64, 0.0f64);
        for (s2, p2) in src.chunks_exact(2).zip(pr.chunks_exact(2)) {
            acc0 += x[s2[0] as usize] * p2[0];
            acc1 += x[s2[1] as usize] * p2[1];
        }
        if src.len() % 2 == 1 {
            if let (Some(&s), Some(&p)) = (src.last(), pr.last()) {
                acc0 += x[s as usize] * p;
            }
        }
        // x_j + ω·((t·r'_j + Σ_i M'_ji x_i) / (1 − M'_jj) − x_j), the constants folded into the arc
        // weights and the reset: the part that does not depend on the neighbours is off the critical path.
        let old = x[j];
        let new = (self.keep * old + self.reset_factor * self.reset[j]) + (acc0 + acc1);
        x[j] = new;
        (new - old).abs()
    }
}

/// A reusable solver for one graph snapshot (it keeps its own copy of the arcs). See the module docs.
#[derive(Debug, Clone)]
pub struct PprSolver {
    config: PprConfig,
    method: Method,
    /// `ω` (1 on the parallel paths).
    omega: f64,
    /// The arcs as the sweeps read them, shared with the solvers [`fork`](PprSolver::fork)ed from this one.
    layout: Arc<Layout>,
    /// The reset vector and the iterate, by sweep position (conjugate gradients: `b` and `z`).
    reset: Vec<f64>,
    x: Vec<f64>,
    /// The next iterate of a Jacobi step; the operator applied to the direction in conjugate gradients.
    next: Vec<f64>,
    /// Conjugate gradients: the residual and the search direction.
    residual: Vec<f64>,
    direction: Vec<f64>,
    /// Per-block sums, added in block order.
    partial: Vec<[f64; 4]>,
    /// Conjugate gradients' sparse start: the support of the iterates, and membership by node.
    support: Vec<u32>,
    member: Vec<bool>,
    /// Conjugate gradients: `S`'s eigenvector `√s` (0 where there is no out-weight); shared as `layout`.
    eigen: Arc<[f64]>,
    /// The scores by node id.
    scores: Vec<f64>,
    /// The graph's node count (the length of `scores` once the buffers are made).
    nodes: usize,
}

impl PprSolver {
    /// Prepares a solver for `csr` (copies its arcs and allocates its buffers once).
    pub fn new(csr: &CsrGraph, config: PprConfig) -> Result<Self> {
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
        let method = if csr.arc_count() < config.parallel_min_arcs {
            Method::Sor
        } else if csr.is_directed() {
            Method::Jacobi
        } else {
            Method::Cg
        };
        let omega = match config.relaxation {
            Some(w) if !(w > 0.0 && w < 2.0) => {
                return Err(invalid(format!("relaxation {w} must be in (0, 2)")))
            }
            // The parallel paths are not relaxed.
            _ if method != Method::Sor => 1.0,
            Some(w) => w,
            None => default_relaxation(config.damping),
        };
        let n = csr.node_count();
        // Id order on the parallel paths: their blocks stay as balanced as the graph's numbering.
        let layout = match method {
            Method::Sor => Layout::sor(csr, config.damping, omega),
            Method::Jacobi => Layout::identity(csr),
            Method::Cg => Layout::symmetric(csr, config.damping),
        };
        let kept = layout.node.len();
        let eigen = if method == Method::Cg {
            (0..kept)
                .map(|j| {
                    if csr.out_strength()[j] > 0.0 {
                        layout.reset_scale[j]
                    } else {
                        0.0
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut solver =
            Self::with_layout(config, method, omega, Arc::new(layout), eigen.into(), n);
        solver.make_buffers();
        Ok(solver)
    }

    /// A solver over a prepared layout, its buffers not made yet.
    fn with_layout(
        config: PprConfig,
        method: Method,
        omega: f64,
        layout: Arc<Layout>,
        eigen: Arc<[f64]>,
        n: usize,
    ) -> Self {
        Self {
            config,
            method,
            omega,
            layout,
            reset: Vec::new(),
            x: Vec::new(),
            next: Vec::new(),
            residual: Vec::new(),
            direction: Vec::new(),
            partial: Vec::new(),
            support: Vec::new(),
            member: Vec::new(),
            eigen,
            scores: Vec::new(),
            nodes: n,
        }
    }

    /// Makes the buffers a run needs, once.
    fn make_buffers(&mut self) {
        if self.scores.len() == self.nodes && self.x.len() == self.layout.node.len() {
            return;
        }
        let (kept, method) = (self.layout.node.len(), self.method);
        let buffer = |used: bool| if used { vec![0.0; kept] } else { Vec::new() };
        self.reset = vec![0.0; kept];
        self.x = vec![0.0; kept];
        self.next = buffer(method != Method::Sor);
        self.residual = buffer(method == Method::Cg);
        self.direction = buffer(method == Method::Cg);
        self.partial = vec![[0.0; 4]; kept.div_ceil(BLOCK)];
        self.member = if method == Method::Cg {
            vec![false; kept]
        } else {
            Vec::new()
        };
        self.scores = vec![0.0; self.nodes];
    }

    /// This solver holding the arcs only, to [`fork`](Self::fork) from: its buffers (several vectors of
    /// the graph's length) go, and are made again at its next run.
    pub fn without_buffers(self) -> Self {
        Self::with_layout(
            self.config,
            self.method,
            self.omega,
            self.layout,
            self.eigen,
            self.nodes,
        )
    }

    /// Another solver for the same graph and settings that shares this one's arcs (which no run
    /// changes) and has buffers of its own: a solver per concurrent query without a copy of the graph
    /// each, and the graph's snapshot need not be kept to make more. Runs give the same scores as this
    /// solver's.
    pub fn fork(&self) -> Self {
        let mut solver = Self::with_layout(
            self.config,
            self.method,
            self.omega,
            Arc::clone(&self.layout),
            Arc::clone(&self.eigen),
            self.nodes,
        );
        solver.make_buffers();
        solver
    }

    /// The settings.
    pub fn config(&self) -> &PprConfig {
        &self.config
    }

    /// The graph's node count.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// How many nodes the sweeps skip (eliminated exactly, their scores computed after the sweeps).
    pub fn eliminated_nodes(&self) -> usize {
        self.layout.reduction.node.len()
    }

    /// How many arcs one sweep visits (after the elimination).
    pub fn swept_arcs(&self) -> usize {
        self.layout.sources.len()
    }

    /// Runs from `reset` (one non-negative finite value per node, not all zero; normalised here).
    /// The scores are then in [`scores`](Self::scores).
    pub fn run(&mut self, reset: &[f64]) -> Result<PprStats> {
        let n = self.node_count();
        self.make_buffers();
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
        // Until the back-substitution, `scores` holds the normalised reset by node id, then the reduced
        // reset r' (contributions in elimination order); `x` starts at r' and `reset` holds it scaled for
        // the sweeps.
        for (s, &v) in self.scores.iter_mut().zip(reset) {
            *s = v / total;
        }
        let red = &self.layout.reduction;
        for (e, &u) in red.node.iter().enumerate() {
            let ru = self.scores[u as usize];
            for k in red.offsets[e]..red.offsets[e + 1] {
                self.scores[red.nb[k] as usize] += red.fwd[k] * ru;
            }
        }
        for (x, &j) in self.x.iter_mut().zip(&self.layout.node) {
            *x = self.scores[j as usize];
        }
        // Conjugate gradients solve for z = D^{-1/2} y: their right-hand side is D^{-1/2} r.
        let cg = self.method == Method::Cg;
        for ((r, &x), &scale) in self
            .reset
            .iter_mut()
            .zip(&self.x)
            .zip(&self.layout.reset_scale)
        {
            *r = if cg { x / scale } else { scale * x };
        }
        // The eliminated scores are x_E = (I − M_EE)⁻¹·M_EK·x_K + const; column sums of M are at most d,
        // so their L1 change is at most d/(1 − d) times the kept nodes', and the kept change times
        // 1/(1 − d) bounds the whole vector's.
        let bound = if red.node.is_empty() {
            1.0
        } else {
            1.0 / (1.0 - self.config.damping)
        };
        let mut stats = PprStats {
            iterations: 0,
            residual: f64::INFINITY,
            converged: false,
        };
        if self.method == Method::Cg {
            stats = self.conjugate_gradients();
        }
        while self.method != Method::Cg && stats.iterations < self.config.max_iterations {
            let residual = if self.method == Method::Jacobi {
                let r = self.jacobi_step();
                std::mem::swap(&mut self.x, &mut self.next);
                r
            } else {
                self.sor_sweep()
            };
            stats.iterations += 1;
            stats.residual = residual * bound;
            if stats.residual < self.config.tolerance {
                stats.converged = true;
                break;
            }
        }
        let t = self.reset_factor();
        for ((&j, &x), &scale) in self
            .layout
            .node
            .iter()
            .zip(&self.x)
            .zip(&self.layout.reset_scale)
        {
            self.scores[j as usize] = if cg { scale * x } else { x };
        }
        // Back-substitution in reverse elimination order: a node's neighbours were kept or eliminated
        // after it, so their scores are final; its own entry still holds r'_u.
        let red = &self.layout.reduction;
        for (e, &u) in red.node.iter().enumerate().rev() {
            let mut xu = red.scale[e] * t * self.scores[u as usize];
            for k in red.offsets[e]..red.offsets[e + 1] {
                xu += red.back[k] * self.scores[red.nb[k] as usize];
            }
            self.scores[u as usize] = xu;
        }
        let sum: f64 = self.scores.iter().sum();
        if sum > 0.0 {
            let scale = 1.0 / sum;
            for s in &mut self.scores {
                *s *= scale;
            }
        }
        Ok(stats)
    }

    /// Scores of the last run, by dense node id (sum 1); empty before the first run of a solver made
    /// [`without_buffers`](Self::without_buffers).
    pub fn scores(&self) -> &[f64] {
        &self.scores
    }

    /// The factor of the reset vector in a sweep from the current `x`: teleport plus the restart of the
    /// dangling nodes' mass, `(1 − d) + d · Σ_{dangling} x_i`.
    fn reset_factor(&self) -> f64 {
        let d = self.config.damping;
        let dangling_mass: f64 = self
            .layout
            .dangling
            .iter()
            .map(|&i| self.x[i as usize])
            .sum();
        (1.0 - d) + d * dangling_mass
    }

    /// One over-relaxed Gauss–Seidel sweep over `x` in place; returns the L1 change.
    fn sor_sweep(&mut self) -> f64 {
        let l = &self.layout;
        let c = SorStep {
            offsets: &l.offsets,
            sources: &l.sources,
            prob: &l.prob,
            reset: &self.reset,
            reset_factor: self.reset_factor(),
            keep: 1.0 - self.omega,
        };
        let x = &mut self.x[..];
        let n = x
            .len()
            .min(c.reset.len())
            .min(c.offsets.len().saturating_sub(1));
        // Two residual sums (even and odd positions, in registers) break the dependency chain of the
        // sum; the order of every sum is fixed, so results are too.
        let (mut r0, mut r1) = (0.0f64, 0.0f64);
        let mut j = 0;
        while j + 1 < n {
            r0 += c.update(x, j);
            r1 += c.update(x, j + 1);
            j += 2;
        }
        if j < n {
            r0 += c.update(x, j);
        }
        r0 + r1
    }

    /// One Jacobi step from `x` into `next` on rayon; returns the L1 change.
    fn jacobi_step(&mut self) -> f64 {
        let d = self.config.damping;
        let keep = self.reset_factor();
        let (offsets, sources, prob) = (
            &self.layout.offsets,
            &self.layout.sources,
            &self.layout.prob,
        );
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
                    let acc = row_dot(&sources[a..b], &prob[a..b], x);
                    *o = keep * reset[j] + d * acc;
                    r += (*o - x[j]).abs();
                }
                part[0] = r;
            });
        self.partial.iter().map(|p| p[0]).sum()
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
    Ok((solver.scores, stats))
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
