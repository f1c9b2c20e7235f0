//! One clustering round over a layer's embeddings (spec hirag §5.2, leanrag §5.2), the sparsity measure and
//! the two methods' stop rules.

use serde::{Deserialize, Serialize};

use crate::gmm::{bic_scan, BicScan, Gmm, GmmConfig};
use crate::reduce::{reduce_reporting, Points, Reduction};
use crate::umap::UmapInit;
use crate::{HierarchyError, Result};

/// How points are assigned to mixture components.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Assignment {
    /// HiRAG: every component whose posterior exceeds `threshold` (0.1; a zero posterior never counts, even
    /// under a negative threshold); a point with none gets its argmax
    /// (the reference drops it — ours keeps every entity).
    Soft {
        /// Posterior threshold.
        threshold: f64,
    },
    /// LeanRAG: the argmax component (ties: the lower component index).
    Hard,
}

/// Settings of a clustering round; in TOML a table with the keys `reduction`, `max_clusters`,
/// `bic_rel_tol` and a `gmm` table (`n_init`, `max_iter`, `tol`, `reg_covar`, `seed`), each optional:
///
/// ```toml
/// reduction = "umap"
/// max_clusters = 50
/// bic_rel_tol = 1e-3
/// [gmm]
/// n_init = 5
/// seed = 0
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Reduction before the mixture (`umap`, as the references; `pca:2` the faster alternative).
    pub reduction: Reduction,
    /// Mixture fit settings.
    pub gmm: GmmConfig,
    /// The BIC scan tries k = 1 .. min(N, `max_clusters`) − 1 (50).
    pub max_clusters: usize,
    /// Early stop of the scan on the relative BIC change (1e-3).
    pub bic_rel_tol: f64,
}

impl ClusterConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if self.max_clusters < 2 {
            return Err(HierarchyError::Config(format!(
                "max_clusters {} must be at least 2",
                self.max_clusters
            )));
        }
        if !(self.bic_rel_tol >= 0.0 && self.bic_rel_tol.is_finite()) {
            return Err(HierarchyError::Config(format!(
                "bic_rel_tol {} must be a finite non-negative number",
                self.bic_rel_tol
            )));
        }
        self.gmm.validate()
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            reduction: Reduction::Umap,
            gmm: GmmConfig::default(),
            max_clusters: 50,
            bic_rel_tol: 1e-3,
        }
    }
}

/// The result of one clustering round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerClustering {
    /// Number of points.
    pub n: usize,
    /// Dimension after reduction (0: all points identical, or fewer than two points).
    pub reduced_dim: usize,
    /// The BIC scan (empty when no mixture was needed).
    pub scan: BicScan,
    /// Components of the mixture that assigned the labels.
    pub k: usize,
    /// Labels of each point (ascending component indices; one for hard assignment).
    pub labels: Vec<Vec<u32>>,
    /// Non-empty clusters in ascending label order, members in index order.
    pub clusters: Vec<Vec<usize>>,
    /// Points whose posteriors were all under the soft threshold and that got their argmax instead.
    pub rescued: usize,
    /// How UMAP started its layout when the reduction was UMAP (spectral, or the PCA fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umap_init: Option<UmapInit>,
}

impl LayerClustering {
    /// Cluster sizes in cluster order (with soft assignment they may sum to more than `n`).
    pub fn sizes(&self) -> Vec<usize> {
        self.clusters.iter().map(Vec::len).collect()
    }

    /// [`sparsity`] of this round.
    pub fn sparsity(&self) -> f64 {
        sparsity(&self.sizes(), self.n)
    }

    fn single(n: usize, scan: BicScan) -> Self {
        Self {
            n,
            reduced_dim: 0,
            scan,
            k: usize::from(n > 0),
            labels: vec![vec![0]; n],
            clusters: if n == 0 {
                Vec::new()
            } else {
                vec![(0..n).collect()]
            },
            rescued: 0,
            umap_init: None,
        }
    }
}

/// HiRAG's sparsity: `1 − Σ sᵢ(sᵢ − 1) / (N(N − 1))`, the fraction of ordered pairs of distinct points that
/// share no cluster (with soft clusters a pair sharing two clusters counts twice). 1 when N < 2.
pub fn sparsity(sizes: &[usize], n: usize) -> f64 {
    if n < 2 {
        return 1.0;
    }
    let shared: f64 = sizes
        .iter()
        .map(|&s| s as f64 * (s.saturating_sub(1)) as f64)
        .sum();
    1.0 - shared / (n as f64 * (n - 1) as f64)
}

/// Clusters `rows`: reduction, BIC scan, a mixture with `max(min_k, k_BIC)` components (capped at N), and
/// assignment. Fewer than two points, or identical points, form a single cluster (no mixture is fitted).
pub fn cluster_layer<V: AsRef<[f32]>>(
    rows: &[V],
    config: &ClusterConfig,
    assignment: Assignment,
    min_k: usize,
) -> Result<LayerClustering> {
    config.validate()?;
    if rows.len() < 2 {
        return Ok(LayerClustering::single(rows.len(), BicScan::untried()));
    }
    let (points, init) = reduce_reporting(rows, config.reduction, config.gmm.seed)?;
    let mut clustering = cluster_points(&points, config, assignment, min_k)?;
    clustering.umap_init = init;
    Ok(clustering)
}

/// [`cluster_layer`] on points that are already reduced (`config.reduction` is not applied again).
pub fn cluster_points(
    points: &Points,
    config: &ClusterConfig,
    assignment: Assignment,
    min_k: usize,
) -> Result<LayerClustering> {
    config.validate()?;
    let n = points.len();
    if n < 2 || points.dim() == 0 {
        return Ok(LayerClustering::single(n, BicScan::untried()));
    }
    // When the floor is at least every k the scan could try (LeanRAG on N ≥ ~1,000: ⌊N/20⌋ ≥ 49), BIC
    // cannot change k: skip the scan.
    let (scan, model) = if min_k > 1 && min_k >= n.min(config.max_clusters).saturating_sub(1) {
        (BicScan::untried(), None)
    } else {
        bic_scan(points, config.max_clusters, config.bic_rel_tol, &config.gmm)?
    };
    let k = scan.best_k.max(min_k).min(n);
    let model = match model {
        Some(m) if m.k() == k => m,
        _ => Gmm::fit(points, k, &config.gmm)?,
    };
    // Sparse posteriors: LeanRAG's k = N / 20 would make a dense n × k matrix quadratic in memory.
    let posteriors = model.posteriors(points);
    let mut labels = Vec::with_capacity(n);
    let mut rescued = 0;
    for (i, (comps, values)) in posteriors.rows().enumerate() {
        // A posterior row sums to 1; the E-step leaves a row empty when the point's log-likelihood is
        // not finite under any component (a degenerate fit): an error, not a point put in cluster 0.
        let total: f64 = values.iter().sum();
        if !(total > 0.5 && total.is_finite()) {
            return Err(HierarchyError::Numerical(format!(
                "point {i} has no finite posterior under the fitted {k}-component mixture (its \
                 log-likelihood is not finite under any component)"
            )));
        }
        // The first largest posterior (ties: the lower component; the components are ascending).
        let mut arg = 0;
        for (j, p) in values.iter().enumerate() {
            if *p > values[arg] {
                arg = j;
            }
        }
        let arg = comps[arg];
        let l: Vec<u32> = match assignment {
            Assignment::Hard => vec![arg],
            Assignment::Soft { threshold } => {
                let l: Vec<u32> = comps
                    .iter()
                    .zip(values)
                    .filter(|(_, &p)| p > threshold)
                    .map(|(&c, _)| c)
                    .collect();
                if l.is_empty() {
                    rescued += 1;
                    vec![arg]
                } else {
                    l
                }
            }
        };
        labels.push(l);
    }
    let mut by_label: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (i, l) in labels.iter().enumerate() {
        for &c in l {
            by_label[c as usize].push(i);
        }
    }
    let clusters = by_label.into_iter().filter(|m| !m.is_empty()).collect();
    Ok(LayerClustering {
        n,
        reduced_dim: points.dim(),
        scan,
        k,
        labels,
        clusters,
        rescued,
        umap_init: None,
    })
}

/// Why a layer loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// HiRAG: sparsity reached `sparsity_stop`.
    Sparse,
    /// HiRAG: sparsity changed by at most `sparsity_change_stop` (relative).
    Stable,
    /// Too few nodes left to cluster (HiRAG ≤ 2, LeanRAG ≤ `min_layer_nodes`).
    TooFewNodes,
    /// LeanRAG: at most `min_clusters` distinct clusters.
    TooFewClusters,
    /// The layer cap (`max_layers`, LeanRAG's `max_depth`) was reached.
    LayerCap,
}

/// HiRAG's sparsity stop rule (spec hirag §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SparsityRule {
    /// Stop when sparsity ≥ this (0.98).
    pub sparsity_stop: f64,
    /// Stop when the relative change from the previous layer is ≤ this (0.05).
    pub sparsity_change_stop: f64,
    /// The "previous sparsity" the first layer is compared against (0.01).
    pub initial_sparsity: f64,
}

impl Default for SparsityRule {
    fn default() -> Self {
        Self {
            sparsity_stop: 0.98,
            sparsity_change_stop: 0.05,
            initial_sparsity: 0.01,
        }
    }
}

/// The running state of [`SparsityRule`] over a sequence of layers.
#[derive(Debug, Clone, PartialEq)]
pub struct SparsityTracker {
    rule: SparsityRule,
    previous: f64,
}

impl SparsityTracker {
    /// Starts with the rule's initial sparsity as the previous value.
    pub fn new(rule: SparsityRule) -> Self {
        Self {
            previous: rule.initial_sparsity,
            rule,
        }
    }

    /// Records a layer's sparsity; returns the relative change `|s − prev| / (prev + 1e-8)` and whether to
    /// stop before summarising this layer.
    pub fn observe(&mut self, sparsity: f64) -> (f64, Option<StopReason>) {
        let change = (sparsity - self.previous).abs() / (self.previous + 1e-8);
        self.previous = sparsity;
        let stop = if sparsity >= self.rule.sparsity_stop {
            Some(StopReason::Sparse)
        } else if change <= self.rule.sparsity_change_stop {
            Some(StopReason::Stable)
        } else {
            None
        };
        (change, stop)
    }
}

/// LeanRAG's layer cap: `round(log₂₀ N₀) + 1` (at least 1).
pub fn leanrag_max_depth(n0: usize) -> usize {
    if n0 <= 1 {
        return 1;
    }
    ((n0 as f64).ln() / 20f64.ln()).round() as usize + 1
}

/// LeanRAG's stop checks for a layer of `nodes` nodes split into `clusters` clusters (`None`: cluster
/// count not known yet).
pub fn leanrag_stop(
    nodes: usize,
    clusters: Option<usize>,
    min_layer_nodes: usize,
    min_clusters: usize,
) -> Option<StopReason> {
    if nodes <= min_layer_nodes {
        return Some(StopReason::TooFewNodes);
    }
    match clusters {
        Some(c) if c <= min_clusters => Some(StopReason::TooFewClusters),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn sparsity_values_of_the_issue() {
        assert!((sparsity(&[4, 2], 6) - 0.533_333).abs() < 1e-6);
        assert!((sparsity(&[2, 2, 2], 6) - 0.8).abs() < 1e-12);
        assert_eq!(sparsity(&[6], 6), 0.0);
        assert_eq!(sparsity(&[1; 6], 6), 1.0);
        assert_eq!(sparsity(&[1], 1), 1.0);
    }

    #[test]
    fn hirag_stop_rule_on_hand_made_layer_sequences() {
        // First layer 0.60: change from 0.01 is 59 → go on; 0.90: change 0.5 → go on; 0.93: change 0.033 →
        // stable, stop.
        let mut t = SparsityTracker::new(SparsityRule::default());
        let (c, s) = t.observe(0.60);
        assert!((c - 59.0).abs() < 1e-4 && s.is_none());
        assert_eq!(t.observe(0.90).1, None);
        let (c, s) = t.observe(0.93);
        assert!((c - 0.0333).abs() < 1e-3);
        assert_eq!(s, Some(StopReason::Stable));
        // The reference's layer-1 sparsity 0.995 stops at once on the threshold.
        let mut t = SparsityTracker::new(SparsityRule::default());
        assert_eq!(t.observe(0.70).1, None);
        assert_eq!(t.observe(0.995).1, Some(StopReason::Sparse));
        // Exactly 0.98 stops; a first layer of sparsity 0.0105 (change 0.05 from 0.01) counts as stable.
        assert_eq!(
            SparsityTracker::new(SparsityRule::default())
                .observe(0.98)
                .1,
            Some(StopReason::Sparse)
        );
        let (_, s) = SparsityTracker::new(SparsityRule::default()).observe(0.0105);
        assert_eq!(s, Some(StopReason::Stable));
    }

    #[test]
    fn leanrag_depth_and_stop_rule() {
        assert_eq!(leanrag_max_depth(50), 2);
        assert_eq!(leanrag_max_depth(100), 3);
        assert_eq!(leanrag_max_depth(1000), 3);
        assert_eq!(leanrag_max_depth(10_000), 4);
        assert_eq!(leanrag_max_depth(0), 1);
        assert_eq!(leanrag_stop(2, None, 2, 4), Some(StopReason::TooFewNodes));
        assert_eq!(
            leanrag_stop(100, Some(4), 2, 4),
            Some(StopReason::TooFewClusters)
        );
        assert_eq!(leanrag_stop(100, Some(5), 2, 4), None);
        assert_eq!(leanrag_stop(3, None, 2, 4), None);
    }

    #[test]
    fn tiny_identical_and_soft_inputs() {
        let cfg = ClusterConfig::default();
        let soft = Assignment::Soft { threshold: 0.1 };
        let none: Vec<Vec<f32>> = Vec::new();
        let r = cluster_layer(&none, &cfg, soft, 0)
            .map(|c| (c.n, c.clusters.len()))
            .ok();
        assert_eq!(r, Some((0, 0)));
        let one = vec![vec![0.3f32, 0.1]];
        let r = cluster_layer(&one, &cfg, soft, 0).map(|c| c.clusters).ok();
        assert_eq!(r, Some(vec![vec![0]]));
        let two = vec![vec![0.3f32, 0.1], vec![-0.3, 0.2]];
        let r = cluster_layer(&two, &cfg, Assignment::Hard, 0)
            .map(|c| (c.scan.ks, c.clusters))
            .ok();
        assert_eq!(r, Some((vec![1], vec![vec![0, 1]])));
        // Identical embeddings: one cluster, nobody dropped.
        let same = vec![vec![0.5f32; 8]; 7];
        let r = cluster_layer(&same, &cfg, soft, 0)
            .map(|c| (c.reduced_dim, c.clusters))
            .ok();
        assert_eq!(r, Some((0, vec![(0..7).collect()])));
        // Duplicates among distinct points are kept, each in exactly one hard cluster.
        let mut dup = vec![vec![1.0f32, 0.0, 0.0]; 5];
        dup.extend(vec![vec![0.0f32, 1.0, 0.0]; 5]);
        dup.extend(vec![vec![0.0f32, 0.0, 1.0]; 5]);
        let r = cluster_layer(&dup, &cfg, Assignment::Hard, 0).ok();
        let Some(r) = r else {
            panic!("clustering failed");
        };
        assert_eq!(r.labels.iter().map(Vec::len).sum::<usize>(), 15);
        assert_eq!(r.sizes().iter().sum::<usize>(), 15);
        // A floor on k (LeanRAG's N / cluster_size) is honoured and capped at N.
        let r = cluster_layer(&dup, &cfg, Assignment::Hard, 40)
            .map(|c| c.k)
            .ok();
        assert_eq!(r, Some(15));
    }
}
