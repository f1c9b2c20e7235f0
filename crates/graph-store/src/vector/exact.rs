//! Exact (brute-force) search over a contiguous row-major f32 matrix.

use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::join::{push_both, upper_block_pairs, JoinCodes};
use super::{check_rows, dot, normalise_rows, Hit, Metric, TopK, VectorIndex};
use crate::error::invalid;
use crate::{persist, Result};

pub(super) const KIND: &str = "exact-index";
// 2: the matrix as one little-endian byte string (1 wrote one element at a time).
const FORMAT: u32 = 2;

/// Relative margin by which the blocked product may differ from [`dot`] (f32 rounding over ≤ 4096 terms).
const SCREEN_MARGIN: f32 = 1e-4;

/// Queries per block of a batch search.
const QUERY_BLOCK: usize = 64;
/// Stored rows per block (one block of scores is `QUERY_BLOCK × ROW_BLOCK` floats = 512 KiB).
const ROW_BLOCK: usize = 2048;

/// Exact search: every query is scored against every row. Batches use a blocked matrix product
/// (ndarray's sgemm) over query and row blocks, in parallel over query blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactIndex {
    dim: usize,
    metric: Metric,
    #[serde(with = "f32_bytes")]
    data: Vec<f32>,
}

/// A `Vec<f32>` as one little-endian byte string: read back with one copy instead of one call per element.
mod f32_bytes {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::with_capacity(v.len() * 4);
        for x in v {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        s.serialize_bytes(&bytes)
    }

    struct Floats;

    impl Visitor<'_> for Floats {
        type Value = Vec<f32>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte string of little-endian f32 values")
        }

        fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<Vec<f32>, E> {
            if !b.len().is_multiple_of(4) {
                return Err(E::custom(format!(
                    "{} bytes are not a whole number of f32 values",
                    b.len()
                )));
            }
            Ok(b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        }

        fn visit_byte_buf<E: Error>(self, b: Vec<u8>) -> Result<Vec<f32>, E> {
            self.visit_bytes(&b)
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        d.deserialize_bytes(Floats)
    }
}

impl ExactIndex {
    /// [`VectorIndex::add`] of rows given by value: an empty index takes the buffer instead of copying
    /// it (a large first batch is then held once, not twice). Returns the first new row's index.
    pub fn add_owned(&mut self, vectors: Vec<f32>) -> Result<usize> {
        if !self.data.is_empty() {
            return self.add(&vectors);
        }
        check_rows(&vectors, self.dim, "vectors")?;
        self.data = vectors;
        if self.metric == Metric::Cosine {
            normalise_rows(&mut self.data, self.dim);
        }
        Ok(0)
    }

    /// An empty index.
    pub fn new(dim: usize, metric: Metric) -> Result<Self> {
        if dim == 0 {
            return Err(invalid("vector dimension must be positive"));
        }
        Ok(Self {
            dim,
            metric,
            data: Vec::new(),
        })
    }

    /// An index holding `vectors` (row-major).
    pub fn from_rows(dim: usize, metric: Metric, vectors: &[f32]) -> Result<Self> {
        let mut out = Self::new(dim, metric)?;
        out.add(vectors)?;
        Ok(out)
    }

    /// An index holding rows exactly as [`as_slice`](Self::as_slice) gave them (already normalised for
    /// cosine: nothing is recomputed, so a store read back from a database equals the one written).
    pub fn from_stored(dim: usize, metric: Metric, data: Vec<f32>) -> Result<Self> {
        let mut out = Self::new(dim, metric)?;
        check_rows(&data, dim, "vectors")?;
        out.data = data;
        Ok(out)
    }

    /// The stored matrix, row-major (rows normalised for cosine).
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    pub(crate) fn prepare_queries(&self, queries: &[f32]) -> Result<Vec<f32>> {
        check_rows(queries, self.dim, "queries")?;
        let mut q = queries.to_vec();
        if self.metric == Metric::Cosine {
            normalise_rows(&mut q, self.dim);
        }
        Ok(q)
    }

    /// The similarity of `query` to every stored row, in id order.
    pub fn scores(&self, query: &[f32]) -> Result<Vec<f32>> {
        if query.len() != self.dim {
            return Err(invalid(format!(
                "query has dimension {}, the index {}",
                query.len(),
                self.dim
            )));
        }
        let q = self.prepare_queries(query)?;
        let mut out = vec![0.0f32; self.len()];
        out.par_chunks_mut(ROW_BLOCK)
            .zip(self.data.par_chunks(ROW_BLOCK * self.dim))
            .for_each(|(o, rows)| {
                for (s, row) in o.iter_mut().zip(rows.chunks_exact(self.dim)) {
                    *s = dot(&q, row);
                }
            });
        Ok(out)
    }

    /// For each row of `queries`: the `k` most similar stored rows whose score is at least `min_score`.
    pub fn search_batch_min_score(
        &self,
        queries: &[f32],
        k: usize,
        min_score: f32,
    ) -> Result<Vec<Vec<Hit>>> {
        let q = self.prepare_queries(queries)?;
        let dim = self.dim;
        let n = self.len();
        let nq = q.len() / dim;
        let mut out: Vec<Vec<Hit>> = vec![Vec::new(); nq];
        out.par_chunks_mut(QUERY_BLOCK)
            .zip(q.par_chunks(QUERY_BLOCK * dim))
            .for_each(|(res, qb)| {
                let m = qb.len() / dim;
                let mut tops: Vec<TopK> = (0..m).map(|_| TopK::new(k)).collect();
                let mut scores = vec![0.0f32; m * ROW_BLOCK];
                for start in (0..n).step_by(ROW_BLOCK) {
                    let nb = ROW_BLOCK.min(n - start);
                    let rows = &self.data[start * dim..(start + nb) * dim];
                    gemm_abt(qb, rows, dim, m, nb, &mut scores[..m * nb]);
                    for (qi, top) in tops.iter_mut().enumerate() {
                        let row = &scores[qi * nb..(qi + 1) * nb];
                        let query = &qb[qi * dim..(qi + 1) * dim];
                        for (j, &s) in row.iter().enumerate() {
                            // The blocked product may differ from `dot` in the last bits (its kernel is
                            // chosen at run time): screen with a margin, then score with `dot` so that
                            // every path (single, batch, HNSW re-scoring) gives the same scores.
                            let margin = SCREEN_MARGIN * s.abs().max(1.0);
                            if s + margin < min_score
                                || top.full_and_worst().is_some_and(|w| s + margin < w)
                            {
                                continue;
                            }
                            let id = start + j;
                            let exact = dot(query, &rows[j * dim..(j + 1) * dim]);
                            if exact >= min_score {
                                top.push(Hit { id, score: exact });
                            }
                        }
                    }
                }
                for (r, t) in res.iter_mut().zip(tops) {
                    *r = t.into_sorted();
                }
            });
        Ok(out)
    }

    /// Every row against every row: for each row, the `k` most similar rows (itself included) whose score is
    /// at least `min_score`, best first (score desc, id asc) — the same lists as
    /// [`search_batch_min_score`](Self::search_batch_min_score) with every row as a query, in half the
    /// multiply-adds: each pair of row blocks is multiplied once and screened for both directions, then
    /// every candidate is scored with [`dot`] per direction, as the batch search scores it.
    pub fn self_join_min_score(&self, k: usize, min_score: f32) -> Result<Vec<Vec<Hit>>> {
        let dim = self.dim;
        let n = self.len();
        let q = self.prepare_queries(&self.data)?;
        // An 8-bit screen where the CPU has AVX2 (32 byte products per instruction against 8 f32
        // multiply-adds), else the blocked f32 product; both keep every pair whose exact score can reach
        // `min_score`, and every kept pair is scored with `dot`.
        let cands = match JoinCodes::new(&q, &self.data, dim) {
            Some(codes) => codes.candidates(min_score),
            None => gemm_join_candidates(&q, n, dim, min_score),
        };
        Ok(self.join_lists(&q, cands, k, min_score))
    }

    /// Each row's list from the candidate pairs `(row, other)`: scored with [`dot`], filtered, sorted,
    /// cut to `k`.
    fn join_lists(
        &self,
        q: &[f32],
        mut cands: Vec<(u32, u32)>,
        k: usize,
        min_score: f32,
    ) -> Vec<Vec<Hit>> {
        let (dim, n) = (self.dim, self.len());
        cands.par_sort_unstable();
        let mut starts = Vec::with_capacity(n + 1);
        let mut at = 0;
        for row in 0..=n {
            while at < cands.len() && (cands[at].0 as usize) < row {
                at += 1;
            }
            starts.push(at);
        }
        (0..n)
            .into_par_iter()
            .map(|u| {
                let query = &q[u * dim..(u + 1) * dim];
                let mut hits: Vec<Hit> = cands[starts[u]..starts[u + 1]]
                    .iter()
                    .filter_map(|&(_, v)| {
                        let v = v as usize;
                        let score = dot(query, &self.data[v * dim..(v + 1) * dim]);
                        (score >= min_score).then_some(Hit { id: v, score })
                    })
                    .collect();
                hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
                hits.truncate(k);
                hits
            })
            .collect()
    }

    /// An index of the rows `rows` (indices into this one), in that order, values copied unchanged.
    pub fn select_rows(&self, rows: &[usize]) -> Result<Self> {
        let dim = self.dim;
        let n = self.data.len() / dim;
        let mut data = Vec::with_capacity(rows.len() * dim);
        for &r in rows {
            if r >= n {
                return Err(invalid(format!("row {r} of an index of {n} rows")));
            }
            data.extend_from_slice(&self.data[r * dim..(r + 1) * dim]);
        }
        Ok(Self {
            dim,
            metric: self.metric,
            data,
        })
    }

    /// Keeps only the rows whose `keep(row)` is true, in their order; the stored values are copied
    /// unchanged (no re-normalisation), so the result equals an index built from the kept rows alone.
    pub fn retain_rows(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let dim = self.dim;
        let mut out = Vec::with_capacity(self.data.len());
        for (row, values) in self.data.chunks_exact(dim).enumerate() {
            if keep(row) {
                out.extend_from_slice(values);
            }
        }
        self.data = out;
    }

    /// Loads an index saved by [`VectorIndex::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let out: Self = persist::load(path, KIND, FORMAT)?;
        if out.dim == 0 || !out.data.len().is_multiple_of(out.dim) {
            return Err(crate::StoreError::Corrupt {
                path: path.to_path_buf(),
                reason: format!(
                    "{} floats do not form rows of dimension {}",
                    out.data.len(),
                    out.dim
                ),
            });
        }
        Ok(out)
    }
}

/// The candidate pairs of [`ExactIndex::self_join_min_score`] from blocked f32 products: `(u, v)` and
/// `(v, u)` for every `u ≤ v` whose product, less its rounding margin, reaches `min_score`.
fn gemm_join_candidates(q: &[f32], n: usize, dim: usize, min_score: f32) -> Vec<(u32, u32)> {
    const B: usize = 512;
    upper_block_pairs(n.div_ceil(B))
        .par_iter()
        .map(|&(i, j)| {
            let (a0, a1) = (i * B, ((i + 1) * B).min(n));
            let (b0, b1) = (j * B, ((j + 1) * B).min(n));
            let (ma, mb) = (a1 - a0, b1 - b0);
            let mut scores = vec![0.0f32; ma * mb];
            gemm_abt(
                &q[a0 * dim..a1 * dim],
                &q[b0 * dim..b1 * dim],
                dim,
                ma,
                mb,
                &mut scores,
            );
            let mut out = Vec::new();
            for (r, row) in scores.chunks_exact(mb).enumerate() {
                let c_start = if i == j { r } else { 0 };
                for (c, &s) in row.iter().enumerate().skip(c_start) {
                    if s + SCREEN_MARGIN * s.abs().max(1.0) < min_score {
                        continue;
                    }
                    push_both(&mut out, a0 + r, b0 + c);
                }
            }
            out
        })
        .flatten()
        .collect()
}

/// `c (m × n) = a (m × k) · bᵀ` where `b` is `n × k`, all row-major.
fn gemm_abt(a: &[f32], b: &[f32], k: usize, m: usize, n: usize, c: &mut [f32]) {
    if m == 0 || n == 0 {
        return;
    }
    use ndarray::{linalg::general_mat_mul, ArrayView2, ArrayViewMut2};
    match (
        ArrayView2::from_shape((m, k), a),
        ArrayView2::from_shape((n, k), b),
        ArrayViewMut2::from_shape((m, n), c),
    ) {
        (Ok(a), Ok(b), Ok(mut c)) => general_mat_mul(1.0, &a, &b.t(), 0.0, &mut c),
        // Shapes are computed by the caller from the same lengths; fall back to plain dot products.
        _ => {
            for (i, crow) in c.chunks_exact_mut(n).enumerate() {
                let arow = &a[i * k..(i + 1) * k];
                for (j, cv) in crow.iter_mut().enumerate() {
                    *cv = dot(arow, &b[j * k..(j + 1) * k]);
                }
            }
        }
    }
}

impl VectorIndex for ExactIndex {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.data.len() / self.dim
    }

    fn metric(&self) -> Metric {
        self.metric
    }

    fn add(&mut self, vectors: &[f32]) -> Result<usize> {
        check_rows(vectors, self.dim, "vectors")?;
        let first = self.len();
        let start = self.data.len();
        self.data.extend_from_slice(vectors);
        if self.metric == Metric::Cosine {
            normalise_rows(&mut self.data[start..], self.dim);
        }
        Ok(first)
    }

    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        let scores = self.scores(query)?;
        let tops: Vec<TopK> = scores
            .par_chunks(ROW_BLOCK)
            .enumerate()
            .map(|(b, s)| {
                let mut t = TopK::new(k);
                for (j, &v) in s.iter().enumerate() {
                    if t.full_and_worst().is_some_and(|w| v < w) {
                        continue;
                    }
                    t.push(Hit {
                        id: b * ROW_BLOCK + j,
                        score: v,
                    });
                }
                t
            })
            .collect();
        let mut all = TopK::new(k);
        for t in tops {
            all.merge(t);
        }
        Ok(all.into_sorted())
    }

    fn search_batch(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        self.search_batch_min_score(queries, k, f32::NEG_INFINITY)
    }

    fn vector(&self, id: usize) -> Option<&[f32]> {
        super::row_of(&self.data, self.dim, id)
    }

    fn save(&self, path: &Path) -> Result<()> {
        persist::save(path, KIND, FORMAT, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_and_inner_product() {
        let rows = [1.0, 0.0, 0.0, 2.0, 3.0, 3.0, 0.0, 0.0];
        let ip = ExactIndex::from_rows(2, Metric::InnerProduct, &rows).unwrap();
        let hits = ip.search(&[1.0, 1.0], 4).unwrap();
        let ids: Vec<_> = hits.iter().map(|h| h.id).collect();
        assert_eq!(ids, vec![2, 1, 0, 3]);
        assert_eq!(hits[0].score, 6.0);
        let cos = ExactIndex::from_rows(2, Metric::Cosine, &rows).unwrap();
        let hits = cos.search(&[1.0, 1.0], 2).unwrap();
        assert_eq!(hits[0].id, 2);
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        let batch = cos.search_batch(&[1.0, 1.0, 0.0, 1.0], 2).unwrap();
        assert_eq!(batch[0], hits);
        assert_eq!(batch[1][0].id, 1);
        let min = cos.search_batch_min_score(&[1.0, 0.0], 10, 0.5).unwrap();
        assert_eq!(min[0].iter().map(|h| h.id).collect::<Vec<_>>(), vec![0, 2]);
        assert!(cos.search(&[1.0], 1).is_err());
        let mut e = ExactIndex::new(2, Metric::Cosine).unwrap();
        assert!(e.add(&[1.0, f32::NAN]).is_err());
        assert!(e.add(&[1.0, 2.0, 3.0]).is_err());
    }

    #[test]
    fn self_join_equals_the_batch_search_of_every_row() {
        // 1,300 rows (three blocks, a ragged last one) in clusters of near-duplicates, so that many pairs
        // sit above the threshold, some exactly tied, and the k cap bites; at a dimension the integer
        // screen pads (24) and one it does not (96). Both candidate paths (integer screen where the CPU
        // has AVX2, f32 products) give the batch search's lists.
        for dim in [24, 96] {
            let n = 1300;
            let mut seed = 11u64;
            let mut next = || crate::vector::test_lcg(&mut seed);
            let centres: Vec<f32> = (0..40 * dim).map(|_| next()).collect();
            let mut rows = Vec::with_capacity(n * dim);
            for r in 0..n {
                let c = (r * 7) % 40;
                for d in 0..dim {
                    rows.push(centres[c * dim + d] + 0.08 * next());
                }
            }
            let dup: Vec<f32> = rows[..dim].to_vec();
            rows[5 * dim..6 * dim].copy_from_slice(&dup);
            let index = ExactIndex::from_rows(dim, Metric::Cosine, &rows).unwrap();
            let q = index.prepare_queries(index.as_slice()).unwrap();
            for (k, min) in [(2047, 0.8), (7, 0.8), (50, 0.95), (3, -1.0)] {
                let want = index
                    .search_batch_min_score(index.as_slice(), k, min)
                    .unwrap();
                let got = index.self_join_min_score(k, min).unwrap();
                assert_eq!(got, want, "dim {dim}, k {k}, min {min}");
                let by_gemm = index.join_lists(&q, gemm_join_candidates(&q, n, dim, min), k, min);
                assert_eq!(by_gemm, want, "f32 path: dim {dim}, k {k}, min {min}");
            }
        }
    }
}
