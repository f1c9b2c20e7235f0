//! The solver's copy of the graph: arcs in sweep order with their probabilities, and the exact
//! elimination of low-degree nodes before the sweeps.

use crate::csr::CsrGraph;

/// The solver's copy of the graph: nodes in sweep order, arcs renumbered to sweep positions, each arc's
/// probability `w_ij / s_i` (the Jacobi layout) or its reduced and scaled form (the SOR layout, with the
/// low-degree nodes of an undirected graph eliminated: see [`Reduction`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Layout {
    /// Sweep position -> dense node id (the kept nodes).
    pub(super) node: Vec<u32>,
    pub(super) offsets: Vec<usize>,
    pub(super) sources: Vec<u32>,
    pub(super) prob: Vec<f64>,
    /// Per position, the factor of its reset value in a sweep (`ω / (1 − M'_jj)`; 1 for Jacobi steps;
    /// `√s_j` for conjugate gradients).
    pub(super) reset_scale: Vec<f64>,
    /// Positions of the nodes without out-weight.
    pub(super) dangling: Vec<u32>,
    /// The eliminated nodes.
    pub(super) reduction: Reduction,
}

/// Nodes taken out of the sweeps by exact Gaussian elimination (static condensation). With `M = d·Pᵀ`
/// (`M_ji = d·w_ij/s_i`), the fixed point solves `x = t·r + M·x` with the scalar `t` of the dangling
/// restart. Eliminating a node `u` (with `c_u = 1/(1 − M_uu)`, `M_uu` its self-loop so far) uses
/// `x_u = c_u·(t·r'_u + Σ_i M_ui·x_i)`: every neighbour `j` gets `r'_j += M_ju·c_u·r'_u` and
/// `M_ji += M_ju·c_u·M_ui` (its diagonal for `i = j`) — a Schur complement of the M-matrix `I − M`, again
/// an M-matrix — and `x_u` follows from its neighbours' scores after the sweeps, in reverse elimination
/// order. Eliminated are nodes of an undirected graph with out-weight and at most [`ELIM_MAX_DEGREE`]
/// neighbours whose elimination adds no more arcs than it removes, in passes over the ids until none is
/// left.
#[derive(Debug, Clone, Default)]
pub(super) struct Reduction {
    /// Eliminated node ids, in elimination order.
    pub(super) node: Vec<u32>,
    /// Per eliminated node, `c_u`.
    pub(super) scale: Vec<f64>,
    /// Per eliminated node (CSR-style offsets into `nb` / `back` / `fwd`): its neighbours' ids when it
    /// was eliminated, `c_u·M_ui` (back-substitution) and `M_ju·c_u` (the reduced reset).
    pub(super) offsets: Vec<usize>,
    pub(super) nb: Vec<u32>,
    pub(super) back: Vec<f64>,
    pub(super) fwd: Vec<f64>,
}

/// The most neighbours a node may have to be eliminated (its fill-in is checked pairwise).
const ELIM_MAX_DEGREE: usize = 6;

/// The position of source `i` in a row sorted by source.
fn entry(row: &[(u32, f64)], i: u32) -> Option<usize> {
    row.binary_search_by_key(&i, |e| e.0).ok()
}

impl Layout {
    /// `csr` in id order with its arc probabilities (no elimination): the Jacobi step's layout.
    pub(super) fn identity(csr: &CsrGraph) -> Self {
        let n = csr.node_count();
        let (sources, weights) = (csr.sources(), csr.weights());
        let inv_out = inverse_out_strength(csr);
        Self {
            node: (0..n as u32).collect(),
            offsets: csr.offsets().to_vec(),
            sources: sources.to_vec(),
            prob: sources
                .iter()
                .zip(weights)
                .map(|(&s, &w)| w * inv_out[s as usize])
                .collect(),
            reset_scale: vec![1.0; n],
            dangling: (0..n as u32)
                .filter(|&j| csr.out_strength()[j as usize] <= 0.0)
                .collect(),
            reduction: Reduction::default(),
        }
    }

    /// `csr` in id order with `d·w_ij / (√s_i·√s_j)` per arc (the symmetric operator of conjugate
    /// gradients; a node without out-weight counts `√s = 1`) and `√s` per node in `reset_scale`.
    pub(super) fn symmetric(csr: &CsrGraph, damping: f64) -> Self {
        let n = csr.node_count();
        let root: Vec<f64> = csr
            .out_strength()
            .iter()
            .map(|&s| if s > 0.0 { s.sqrt() } else { 1.0 })
            .collect();
        let (offsets, sources, weights) = (csr.offsets(), csr.sources(), csr.weights());
        let mut prob = Vec::with_capacity(sources.len());
        for j in 0..n {
            for k in offsets[j]..offsets[j + 1] {
                let i = sources[k] as usize;
                prob.push(damping * weights[k] / (root[i] * root[j]));
            }
        }
        Self {
            node: (0..n as u32).collect(),
            offsets: offsets.to_vec(),
            sources: sources.to_vec(),
            prob,
            reset_scale: root,
            // The dangling restart only rescales the solution here (see the module docs).
            dangling: Vec::new(),
            reduction: Reduction::default(),
        }
    }

    /// The SOR layout: low-degree nodes eliminated (undirected graphs; see [`Reduction`]), the kept nodes
    /// by reduced in-degree then id, the rows scaled for a Gauss–Seidel step with the diagonal solved: a
    /// kept node's update is `(1 − ω)·x_j + t·reset_scale_j·r'_j + Σ_i prob_ji·x_i` with
    /// `prob_ji = ω·M'_ji / (1 − M'_jj)`.
    pub(super) fn sor(csr: &CsrGraph, damping: f64, omega: f64) -> Self {
        let n = csr.node_count();
        let (offsets, sources, weights) = (csr.offsets(), csr.sources(), csr.weights());
        let inv_out = inverse_out_strength(csr);
        // Row j: (i, M_ji) for i ≠ j, sorted by i (as CSR rows are); the diagonal apart.
        let mut rows: Vec<Vec<(u32, f64)>> = Vec::with_capacity(n);
        let mut diag = vec![0.0f64; n];
        for j in 0..n {
            let mut row = Vec::with_capacity(offsets[j + 1] - offsets[j]);
            for k in offsets[j]..offsets[j + 1] {
                let i = sources[k];
                let m = damping * weights[k] * inv_out[i as usize];
                if i as usize == j {
                    diag[j] += m;
                } else {
                    row.push((i, m));
                }
            }
            rows.push(row);
        }

        let mut eliminated = vec![false; n];
        let mut red = Reduction::default();
        red.offsets.push(0);
        let mut changed = !csr.is_directed();
        while changed {
            changed = false;
            for u in 0..n {
                let deg = rows[u].len();
                if eliminated[u] || csr.out_strength()[u] <= 0.0 || deg > ELIM_MAX_DEGREE {
                    continue;
                }
                // Arcs added between u's neighbours, against the 2·deg removed with u.
                let row_u = &rows[u];
                let mut added = 0;
                for (x, &(a, _)) in row_u.iter().enumerate() {
                    for &(b, _) in &row_u[x + 1..] {
                        if entry(&rows[a as usize], b).is_none() {
                            added += 2;
                        }
                    }
                }
                if added > 2 * deg {
                    continue;
                }
                let c = 1.0 / (1.0 - diag[u]);
                let row_u = std::mem::take(&mut rows[u]);
                red.node.push(u as u32);
                red.scale.push(c);
                for &(j, m_uj) in &row_u {
                    let rj = &mut rows[j as usize];
                    // Undirected: u is in row j (M_ju > 0) exactly when j is in row u.
                    let m_ju = entry(rj, u as u32).map_or(0.0, |at| rj.remove(at).1);
                    let f = m_ju * c;
                    for &(i, m_ui) in &row_u {
                        if i == j {
                            diag[j as usize] += f * m_ui;
                        } else {
                            match rj.binary_search_by_key(&i, |e| e.0) {
                                Ok(at) => rj[at].1 += f * m_ui,
                                Err(at) => rj.insert(at, (i, f * m_ui)),
                            }
                        }
                    }
                    red.nb.push(j);
                    red.back.push(c * m_uj);
                    red.fwd.push(f);
                }
                red.offsets.push(red.nb.len());
                eliminated[u] = true;
                changed = true;
            }
        }

        let mut node: Vec<u32> = (0..n as u32).filter(|&j| !eliminated[j as usize]).collect();
        node.sort_by_key(|&j| (rows[j as usize].len(), j));
        let mut position = vec![u32::MAX; n];
        for (p, &j) in node.iter().enumerate() {
            position[j as usize] = p as u32;
        }
        let arcs: usize = node.iter().map(|&j| rows[j as usize].len()).sum();
        let mut out = Self {
            offsets: Vec::with_capacity(node.len() + 1),
            sources: Vec::with_capacity(arcs),
            prob: Vec::with_capacity(arcs),
            reset_scale: Vec::with_capacity(node.len()),
            dangling: Vec::new(),
            reduction: red,
            node,
        };
        out.offsets.push(0);
        for (p, &j) in out.node.iter().enumerate() {
            let j = j as usize;
            // 1 − M'_jj > 0: `I − M'` is a nonsingular M-matrix.
            let scale = omega / (1.0 - diag[j]);
            out.sources
                .extend(rows[j].iter().map(|&(i, _)| position[i as usize]));
            out.prob.extend(rows[j].iter().map(|&(_, v)| v * scale));
            out.offsets.push(out.sources.len());
            out.reset_scale.push(scale);
            if csr.out_strength()[j] <= 0.0 {
                out.dangling.push(p as u32);
            }
        }
        out
    }
}

fn inverse_out_strength(csr: &CsrGraph) -> Vec<f64> {
    csr.out_strength()
        .iter()
        .map(|&s| if s > 0.0 { 1.0 / s } else { 0.0 })
        .collect()
}
