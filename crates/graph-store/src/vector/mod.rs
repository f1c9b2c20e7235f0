//! Vector indexes behind one trait: [`ExactIndex`] (contiguous matrix, blocked products, rayon) and
//! [`HnswIndex`] (approximate, hnsw_rs).
//!
//! Scores are similarities, higher is better: the cosine for [`Metric::Cosine`], the dot product for
//! [`Metric::InnerProduct`]. Results are sorted by score descending, ties by id ascending, so rankings are
//! deterministic. Ids are row numbers in insertion order.
//!
//! **Which one.** [`IndexKind::Auto`] picks exact search below [`AUTO_EXACT_MAX_ROWS`] rows. On this
//! project's 2-core reference machine, exact search over 20,000 × 384 answers a batch of queries in well
//! under a millisecond each and is exact and deterministic; HNSW needs seconds to build (sequential inserts,
//! for a reproducible graph) and only pays off for single queries on much larger stores. The figures are in
//! the benches (`cargo bench -p kgrag-benches --bench vectors`).

mod exact;
mod hnsw;
mod join;
mod keys;
mod rows;
mod screen;
mod store;

use std::borrow::Cow;
use std::path::Path;

use rayon::prelude::*;

pub use exact::{ExactIndex, Precision};
pub use hnsw::{HnswIndex, HnswParams};
pub use screen::{ScreenedIndex, TopKRange};
use serde::{Deserialize, Serialize};
pub use store::EmbeddingStore;

use crate::error::invalid;
use crate::{persist, Result};

/// Similarity measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Metric {
    /// Cosine similarity: vectors are L2-normalised when added and queries when searched (a zero vector
    /// scores 0 against everything).
    Cosine,
    /// Raw dot product.
    InnerProduct,
}

/// One search result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Row id (insertion order).
    pub id: usize,
    /// Similarity (higher is closer).
    pub score: f32,
}

/// Which index to build.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum IndexKind {
    /// Exact below [`AUTO_EXACT_MAX_ROWS`] rows, else HNSW with default parameters.
    Auto,
    /// Always exact.
    Exact,
    /// Always HNSW.
    Hnsw(HnswParams),
}

/// Row count below which [`IndexKind::Auto`] uses exact search (see the module docs).
pub const AUTO_EXACT_MAX_ROWS: usize = 200_000;

/// A vector index.
pub trait VectorIndex: Send + Sync + std::fmt::Debug {
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// Number of vectors.
    fn len(&self) -> usize;
    /// Whether there are no vectors.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The similarity measure.
    fn metric(&self) -> Metric;
    /// Appends `vectors` (row-major, a multiple of `dim` long, finite); returns the first new id.
    fn add(&mut self, vectors: &[f32]) -> Result<usize>;
    /// The `k` most similar vectors to `query`.
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>>;
    /// [`search`](Self::search) for each row of `queries` (row-major).
    fn search_batch(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>>;
    /// The stored vector `id` (normalised for cosine): borrowed, or widened to f32 from a lower
    /// [`Precision`].
    fn vector(&self, id: usize) -> Option<Cow<'_, [f32]>>;
    /// Saves atomically to `path`.
    fn save(&self, path: &Path) -> Result<()>;
}

/// Builds an empty index of `kind` for vectors of `dim`; `expected_rows` decides [`IndexKind::Auto`].
pub fn new_index(
    kind: IndexKind,
    dim: usize,
    metric: Metric,
    expected_rows: usize,
) -> Result<Box<dyn VectorIndex>> {
    Ok(match kind {
        IndexKind::Exact => Box::new(ExactIndex::new(dim, metric)?),
        IndexKind::Auto if expected_rows < AUTO_EXACT_MAX_ROWS => {
            Box::new(ExactIndex::new(dim, metric)?)
        }
        IndexKind::Auto => Box::new(HnswIndex::new(dim, metric, HnswParams::default())?),
        IndexKind::Hnsw(p) => Box::new(HnswIndex::new(dim, metric, p)?),
    })
}

/// Loads whichever index was saved at `path`.
pub fn load_index(path: &Path) -> Result<Box<dyn VectorIndex>> {
    match persist::kind_of(path)?.as_str() {
        exact::KIND | exact::KIND_F16 => Ok(Box::new(ExactIndex::load(path)?)),
        hnsw::KIND => Ok(Box::new(HnswIndex::load(path)?)),
        other => Err(crate::StoreError::Incompatible {
            path: path.to_path_buf(),
            reason: format!("holds a {other:?}, not a vector index"),
        }),
    }
}

pub(crate) fn check_rows(vectors: &[f32], dim: usize, what: &str) -> Result<usize> {
    if dim == 0 {
        return Err(invalid("vector dimension must be positive"));
    }
    if !vectors.len().is_multiple_of(dim) {
        return Err(invalid(format!(
            "{what}: {} floats are not a whole number of rows of dimension {dim}",
            vectors.len()
        )));
    }
    if let Some(i) = vectors.iter().position(|v| !v.is_finite()) {
        return Err(invalid(format!(
            "{what}: row {} holds a non-finite value",
            i / dim
        )));
    }
    Ok(vectors.len() / dim)
}

/// L2-normalises in f64; a row whose norm is below 1e-30 (or not finite) becomes all zeros.
pub(crate) fn normalise(row: &mut [f32]) {
    let norm = row
        .iter()
        .map(|&v| f64::from(v) * f64::from(v))
        .sum::<f64>()
        .sqrt();
    scale_to_unit(row, norm);
}

/// Divides `row` by `norm` (in f64), or zeroes it when the norm is below 1e-30 or not finite.
#[inline]
fn scale_to_unit(row: &mut [f32], norm: f64) {
    if norm.is_finite() && norm > 1e-30 {
        for v in row {
            *v = (f64::from(*v) / norm) as f32;
        }
    } else {
        row.fill(0.0);
    }
}

/// [`normalise`] on every row of `data` (`dim` values each), with the same bits: rows in parallel
/// blocks, and four rows' sums of squares at a time, each still added in its own order (four
/// independent chains instead of one waiting on the last add).
pub(crate) fn normalise_rows(data: &mut [f32], dim: usize) {
    if dim == 0 {
        return;
    }
    data.par_chunks_mut(dim * 256).for_each(|block| {
        let mut quads = block.chunks_exact_mut(dim * 4);
        for quad in &mut quads {
            let (r01, r23) = quad.split_at_mut(2 * dim);
            let (r0, r1) = r01.split_at_mut(dim);
            let (r2, r3) = r23.split_at_mut(dim);
            let mut sum = [0.0f64; 4];
            for (((&a, &b), &c), &d) in r0.iter().zip(r1.iter()).zip(r2.iter()).zip(r3.iter()) {
                sum[0] += f64::from(a) * f64::from(a);
                sum[1] += f64::from(b) * f64::from(b);
                sum[2] += f64::from(c) * f64::from(c);
                sum[3] += f64::from(d) * f64::from(d);
            }
            for (row, s) in [r0, r1, r2, r3].into_iter().zip(sum) {
                scale_to_unit(row, s.sqrt());
            }
        }
        quads
            .into_remainder()
            .chunks_exact_mut(dim)
            .for_each(normalise);
    });
}

/// Dot product written so that the compiler vectorises it (eight independent accumulators).
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = (acc[0] + acc[4]) + (acc[1] + acc[5]) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// A small deterministic generator of values in [−0.5, 0.5) for the vector tests.
#[cfg(test)]
pub(crate) fn test_lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
}

/// The row `id` of a row-major matrix, if it exists.
pub(crate) fn row_of(data: &[f32], dim: usize, id: usize) -> Option<&[f32]> {
    let start = id.checked_mul(dim)?;
    data.get(start..start.checked_add(dim)?)
}

/// Keeps the `k` best (score desc, id asc) of a stream of hits.
#[derive(Debug)]
pub(crate) struct TopK {
    k: usize,
    items: Vec<Hit>,
}

fn better(a: &Hit, b: &Hit) -> bool {
    a.score > b.score || (a.score == b.score && a.id < b.id)
}

impl TopK {
    pub(crate) fn new(k: usize) -> Self {
        Self {
            k,
            items: Vec::with_capacity(k.min(4096) + 1),
        }
    }

    /// The score a new hit must beat to enter (only meaningful when full).
    #[inline]
    pub(crate) fn full_and_worst(&self) -> Option<f32> {
        if self.items.len() == self.k {
            self.items.last().map(|h| h.score)
        } else {
            None
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, hit: Hit) {
        if self.k == 0 {
            return;
        }
        if self.items.len() == self.k {
            match self.items.last() {
                Some(w) if better(&hit, w) => {
                    self.items.pop();
                }
                _ => return,
            }
        }
        let pos = self.items.partition_point(|h| better(h, &hit));
        self.items.insert(pos, hit);
    }

    pub(crate) fn merge(&mut self, other: TopK) {
        for h in other.items {
            self.push(h);
        }
    }

    pub(crate) fn into_sorted(self) -> Vec<Hit> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_normalise_to_the_same_bits_as_one_at_a_time() {
        let mut seed = 3;
        for (n, dim) in [(0, 8), (1, 3), (3, 384), (4, 384), (257, 17), (1030, 384)] {
            let mut data: Vec<f32> = (0..n * dim).map(|_| 3.0 * test_lcg(&mut seed)).collect();
            if n > 2 {
                // A zero row and a tiny one stay all zeros; a huge one is scaled like the others.
                data[dim..2 * dim].fill(0.0);
                data[2 * dim..3 * dim].fill(1e-35);
                data[0] = 1e30;
            }
            let mut one = data.clone();
            one.chunks_exact_mut(dim).for_each(normalise);
            normalise_rows(&mut data, dim);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&data), bits(&one), "{n} x {dim}");
        }
    }

    #[test]
    fn topk_orders_by_score_then_id() {
        let mut t = TopK::new(3);
        for (id, s) in [(5, 0.5), (1, 0.9), (2, 0.5), (3, 0.1), (0, 0.5)] {
            t.push(Hit { id, score: s });
        }
        let ids: Vec<_> = t.into_sorted().iter().map(|h| h.id).collect();
        assert_eq!(ids, vec![1, 0, 2]);
    }

    #[test]
    fn dot_matches_naive() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }
}

/// Min-max normalisation `(x − min) / (max − min)` in f64, all ones when `max == min` (HippoRAG's
/// `min_max_normalize`); non-finite inputs become 0 before scaling.
pub fn min_max(scores: &[f32]) -> Vec<f64> {
    let vals: Vec<f64> = scores
        .iter()
        .map(|&s| if s.is_finite() { f64::from(s) } else { 0.0 })
        .collect();
    let (lo, hi) = vals
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    vals.iter().map(|&v| min_max_scale(v, lo, hi)).collect()
}

/// One value of [`min_max`] given the range `[lo, hi]` of all of them: `(v − lo) / (hi − lo)`, or 1 when
/// `hi == lo` (for callers that know the range without the whole score vector).
pub fn min_max_scale(v: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range > 0.0 {
        (v - lo) / range
    } else {
        1.0
    }
}

/// The positions of the `k` largest `scores`, best first; ties by position ascending (a stable sort,
/// like numpy's `argsort` of the negated scores with a stable kind). NaN ranks last.
pub fn top_k_desc(scores: &[f64], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    let key = |i: usize| {
        let s = scores[i];
        if s.is_nan() {
            f64::NEG_INFINITY
        } else {
            s
        }
    };
    let k = k.min(order.len());
    if k == 0 {
        return Vec::new();
    }
    let cmp = |a: &usize, b: &usize| key(*b).total_cmp(&key(*a)).then(a.cmp(b));
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, cmp);
        order.truncate(k);
    }
    order.sort_by(cmp);
    order
}

#[cfg(test)]
mod ranking_tests {
    use super::*;

    #[test]
    fn min_max_and_top_k() {
        assert_eq!(min_max(&[1.0, 3.0, 2.0]), vec![0.0, 1.0, 0.5]);
        assert_eq!(min_max(&[2.0, 2.0]), vec![1.0, 1.0]);
        assert!(min_max(&[]).is_empty());
        let s = [0.5, 0.9, 0.5, f64::NAN, 0.9, 0.1];
        assert_eq!(top_k_desc(&s, 3), vec![1, 4, 0]);
        assert_eq!(top_k_desc(&s, 10), vec![1, 4, 0, 2, 5, 3]);
        assert!(top_k_desc(&s, 0).is_empty());
    }
}
