//! Approximate search with an HNSW graph (hnsw_rs).
//!
//! - Cosine: rows are L2-normalised and the graph uses hnsw_rs's dot distance `max(0, 1 − a·b)` with its
//!   runtime-dispatched SIMD kernel (feature `simdeez_f`). The kernel asserts `a·b ≤ 1.000002`; every
//!   vector given to the graph — rows and queries — is normalised in f64 and then shrunk by 1e-5, so the
//!   assertion cannot fire whatever the input. (Returned scores are recomputed from the stored rows.)
//! - Inner product: maximum-inner-product search is reduced to cosine search by the usual augmentation
//!   `x ↦ [x/M, √(1 − ‖x‖²/M²)]`, `q ↦ [q/‖q‖, 0]` with `M` the largest row norm, which preserves the order
//!   of `q·x`. Adding a row longer than `M` rebuilds the graph with the new `M`.
//! - Returned scores are recomputed exactly from the stored rows, so they equal [`ExactIndex`]'s scores for
//!   the same hits; results are sorted by score, ties by id.
//! - Inserts are sequential by default: hnsw_rs draws layers from a fixed-seed generator, so the same rows
//!   give the same graph and the same answers. `parallel_build` is faster and not reproducible.
//! - Saving stores the rows and parameters (checksummed); loading rebuilds the graph, which is deterministic
//!   for sequential builds. hnsw_rs's own dump format borrows its loader for the index's lifetime, which does
//!   not fit an owned index; rebuild time is reported by the `vectors` bench.
//!
//! [`ExactIndex`]: super::ExactIndex

use std::path::Path;

use hnsw_rs::anndists::dist::DistDot;
use hnsw_rs::hnsw::Hnsw;
use serde::{Deserialize, Serialize};

use super::{check_rows, dot, normalise, Hit, Metric, VectorIndex};
use crate::error::invalid;
use crate::{persist, Result};

pub(super) const KIND: &str = "hnsw-index";
const FORMAT: u32 = 1;

/// HNSW parameters. The defaults reach recall@10 ≥ 0.95 against exact search on 20,000 random 384-d unit
/// vectors — the hardest case, with no cluster structure — (tested in `tests/it/vectors.rs`; 0.993 measured
/// with `cargo run --release -p kgrag-graph-store --example hnsw_tune`, where M = 16 or `ef_search` = 400
/// fell below 0.95). Real embeddings are clustered and need less.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Links per node and layer (`M`; hnsw_rs caps it at 256).
    pub max_connections: usize,
    /// Candidate list size while inserting.
    pub ef_construction: usize,
    /// Candidate list size while searching (at least `k` is used).
    pub ef_search: usize,
    /// Maximum number of layers (hnsw_rs caps it at 16).
    pub max_layer: usize,
    /// Insert in parallel (faster, not reproducible).
    pub parallel_build: bool,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self {
            max_connections: 24,
            ef_construction: 100,
            ef_search: 800,
            max_layer: 16,
            parallel_build: false,
        }
    }
}

/// Keeps every dot product of two graph vectors strictly below 1 (see the module docs).
fn shrink(v: &mut [f32]) {
    for x in v {
        *x *= 1.0 - 1e-5;
    }
}

#[derive(Serialize, Deserialize)]
struct Saved {
    dim: usize,
    metric: Metric,
    params: HnswParams,
    /// The inner-product augmentation scale in force (0 for cosine).
    scale: f32,
    rows: Vec<f32>,
}

/// An HNSW index. See the module docs.
pub struct HnswIndex {
    dim: usize,
    metric: Metric,
    params: HnswParams,
    /// Rows as searched (normalised for cosine, raw for inner product).
    rows: Vec<f32>,
    /// Largest row norm (inner product only).
    scale: f32,
    graph: Hnsw<'static, f32, DistDot>,
}

impl std::fmt::Debug for HnswIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HnswIndex")
            .field("dim", &self.dim)
            .field("metric", &self.metric)
            .field("params", &self.params)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl HnswIndex {
    /// An empty index.
    pub fn new(dim: usize, metric: Metric, params: HnswParams) -> Result<Self> {
        if dim == 0 {
            return Err(invalid("vector dimension must be positive"));
        }
        if !(2..=256).contains(&params.max_connections) {
            return Err(invalid(format!(
                "max_connections {} must be in 2..=256",
                params.max_connections
            )));
        }
        if params.ef_construction == 0 || params.ef_search == 0 || params.max_layer == 0 {
            return Err(invalid(
                "ef_construction, ef_search and max_layer must be positive",
            ));
        }
        Ok(Self {
            dim,
            metric,
            params,
            rows: Vec::new(),
            scale: 0.0,
            graph: Self::empty_graph(&params, 0),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &HnswParams {
        &self.params
    }

    /// Changes the search-time candidate list size (no rebuild needed).
    pub fn set_ef_search(&mut self, ef_search: usize) {
        self.params.ef_search = ef_search.max(1);
    }

    fn empty_graph(params: &HnswParams, capacity: usize) -> Hnsw<'static, f32, DistDot> {
        Hnsw::new(
            params.max_connections,
            capacity.max(1024),
            params.max_layer.min(16),
            params.ef_construction,
            DistDot {},
        )
    }

    fn graph_row(&self, row: &[f32]) -> Vec<f32> {
        let mut out = match self.metric {
            Metric::Cosine => row.to_vec(),
            Metric::InnerProduct => {
                let mut out = Vec::with_capacity(self.dim + 1);
                let m = self.scale;
                if m > 0.0 {
                    out.extend(row.iter().map(|v| v / m));
                    let rest = (1.0 - dot(&out, &out)).max(0.0);
                    out.push(rest.sqrt());
                } else {
                    out.extend(std::iter::repeat_n(0.0, self.dim));
                    out.push(1.0);
                }
                normalise(&mut out);
                out
            }
        };
        shrink(&mut out);
        out
    }

    fn insert_range(&self, from: usize) {
        let rows: Vec<(usize, Vec<f32>)> = self.rows[from * self.dim..]
            .chunks_exact(self.dim)
            .enumerate()
            .map(|(i, r)| (from + i, self.graph_row(r)))
            .collect();
        if self.params.parallel_build {
            let refs: Vec<(&[f32], usize)> = rows.iter().map(|(i, r)| (r.as_slice(), *i)).collect();
            self.graph.parallel_insert_slice(&refs);
        } else {
            for (i, r) in &rows {
                self.graph.insert_slice((r, *i));
            }
        }
    }

    fn exact_score(&self, id: usize, q: &[f32]) -> f32 {
        super::row_of(&self.rows, self.dim, id).map_or(f32::NEG_INFINITY, |r| dot(r, q))
    }

    fn add_rows(&mut self, vectors: &[f32], normalise_rows: bool) -> Result<usize> {
        check_rows(vectors, self.dim, "vectors")?;
        let first = self.len();
        let start = self.rows.len();
        self.rows.extend_from_slice(vectors);
        match self.metric {
            Metric::Cosine => {
                if normalise_rows {
                    super::normalise_rows(&mut self.rows[start..], self.dim);
                }
                self.insert_range(first);
            }
            Metric::InnerProduct => {
                let longest = self.rows[start..]
                    .chunks_exact(self.dim)
                    .map(|r| dot(r, r).sqrt())
                    .fold(0.0f32, f32::max);
                if longest > self.scale {
                    // The augmentation depends on the largest norm: rebuild everything with a new one,
                    // with 25% headroom so that slowly growing norms do not rebuild on every insert.
                    self.scale = longest * 1.25;
                    self.graph = Self::empty_graph(&self.params, self.len());
                    self.insert_range(0);
                } else {
                    self.insert_range(first);
                }
            }
        }
        Ok(first)
    }

    /// Loads an index saved by [`VectorIndex::save`], rebuilding its graph.
    pub fn load(path: &Path) -> Result<Self> {
        let saved: Saved = persist::load(path, KIND, FORMAT)?;
        let corrupt = |reason: String| crate::StoreError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let mut out =
            Self::new(saved.dim, saved.metric, saved.params).map_err(|e| corrupt(e.to_string()))?;
        if !(saved.scale.is_finite() && saved.scale >= 0.0) {
            return Err(corrupt(format!(
                "inner-product scale {} is invalid",
                saved.scale
            )));
        }
        // The same scale as when saved, so that the rebuilt graph is the one that was saved.
        out.scale = saved.scale;
        // Rows were stored as searched (already normalised for cosine): insert them unchanged.
        out.add_rows(&saved.rows, false)
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(out)
    }
}

impl VectorIndex for HnswIndex {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.rows.len() / self.dim
    }

    fn metric(&self) -> Metric {
        self.metric
    }

    fn add(&mut self, vectors: &[f32]) -> Result<usize> {
        self.add_rows(vectors, true)
    }

    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        if query.len() != self.dim {
            return Err(invalid(format!(
                "query has dimension {}, the index {}",
                query.len(),
                self.dim
            )));
        }
        check_rows(query, self.dim, "query")?;
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = query.to_vec();
        normalise(&mut q);
        if dot(&q, &q) == 0.0 {
            // A zero query is equally similar to everything: the first k ids.
            return Ok((0..k.min(self.len()))
                .map(|id| Hit { id, score: 0.0 })
                .collect());
        }
        let mut graph_q = match self.metric {
            Metric::Cosine => q.clone(),
            Metric::InnerProduct => {
                let mut g = q.clone();
                g.push(0.0);
                g
            }
        };
        shrink(&mut graph_q);
        let score_q: &[f32] = match self.metric {
            Metric::Cosine => &q,
            Metric::InnerProduct => query,
        };
        let found = self.graph.search(&graph_q, k, self.params.ef_search.max(k));
        let mut hits: Vec<Hit> = found
            .iter()
            .map(|n| Hit {
                id: n.d_id,
                score: self.exact_score(n.d_id, score_q),
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits.dedup_by_key(|h| h.id);
        hits.truncate(k);
        Ok(hits)
    }

    fn search_batch(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        use rayon::prelude::*;
        check_rows(queries, self.dim, "queries")?;
        queries
            .par_chunks(self.dim)
            .map(|q| self.search(q, k))
            .collect()
    }

    fn vector(&self, id: usize) -> Option<std::borrow::Cow<'_, [f32]>> {
        super::row_of(&self.rows, self.dim, id).map(std::borrow::Cow::Borrowed)
    }

    fn save(&self, path: &Path) -> Result<()> {
        persist::save(
            path,
            KIND,
            FORMAT,
            &Saved {
                dim: self.dim,
                metric: self.metric,
                params: self.params,
                scale: self.scale,
                rows: self.rows.clone(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_product_augmentation_ranks_by_dot() {
        let rows = [1.0, 0.0, 0.0, 2.0, 3.0, 3.0, 0.0, 0.0, 0.5, 0.5];
        let mut h = HnswIndex::new(2, Metric::InnerProduct, HnswParams::default()).unwrap();
        h.add(&rows[..4]).unwrap();
        h.add(&rows[4..]).unwrap();
        let hits = h.search(&[1.0, 1.0], 5).unwrap();
        let ids: Vec<_> = hits.iter().map(|h| h.id).collect();
        assert_eq!(ids, vec![2, 1, 0, 4, 3]);
        assert_eq!(hits[0].score, 6.0);
        // A query equal to an indexed vector does not abort.
        let c = HnswIndex::new(2, Metric::Cosine, HnswParams::default()).unwrap();
        let mut c = c;
        c.add(&rows).unwrap();
        let hits = c.search(&[3.0, 3.0], 1).unwrap();
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        assert!(HnswIndex::new(
            2,
            Metric::Cosine,
            HnswParams {
                max_connections: 300,
                ..HnswParams::default()
            }
        )
        .is_err());
    }
}
