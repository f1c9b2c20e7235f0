//! Exact top-k and score range of one query over a large [`ExactIndex`], reading a quarter of its bytes.
//!
//! A full scan of a 17,000 × 384 f32 matrix moves 26 MB per query, more than the caches hold, so it runs at
//! memory speed. [`ScreenedIndex`] keeps an int8 copy of the rows (one scale `s_r` per row); the query is
//! quantised to int16 (scale `s_q`) and scored against it in exact integer arithmetic. The screened score
//! is within `s_r/2 · ‖q‖₁ + s_q/2 · s_r‖c_r‖₁` (plus f32 rounding of the exact score) of the exact one.
//! Only the rows whose bounds can reach the top `k` or the minimum are then scored exactly, with the same
//! [`dot`] as [`ExactIndex::scores`], so the top `k` (ties by row ascending), the minimum and the maximum
//! are exactly what a full scan gives.

use rayon::prelude::*;

use super::{dot, ExactIndex, Hit, VectorIndex};
use crate::Result;

/// f32 rounding of a 4096-term dot product of unit-norm-bounded vectors, with room to spare.
const ROUNDING: f32 = 1e-4;

/// The largest dimension screened (the integer sums must not overflow); larger indexes are scanned.
const MAX_DIM: usize = 4096;

/// What [`ScreenedIndex::top_k_range`] returns: exact scores, as [`ExactIndex::scores`] computes them.
#[derive(Debug, Clone, PartialEq)]
pub struct TopKRange {
    /// The `k` best rows, score descending, ties by row ascending.
    pub top: Vec<Hit>,
    /// The lowest score over all rows (`+∞` for an empty index).
    pub min: f32,
    /// The highest score over all rows (`-∞` for an empty index).
    pub max: f32,
}

/// An int8 copy of an [`ExactIndex`] for exact top-k / range queries. Build it again after the index
/// changes.
#[derive(Debug, Clone)]
pub struct ScreenedIndex {
    dim: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Per row: `s_r · Σ|c_i|`.
    code_l1: Vec<f32>,
    /// Whether every stored value is finite (screening is skipped otherwise).
    finite: bool,
}

impl ScreenedIndex {
    /// The int8 copy of `index`.
    pub fn new(index: &ExactIndex) -> Self {
        let dim = index.dim();
        let data = index.as_slice();
        let finite = data.iter().all(|v| v.is_finite());
        let mut codes = vec![0i8; data.len()];
        let mut scales = vec![0.0f32; index.len()];
        let mut code_l1 = vec![0.0f32; index.len()];
        codes
            .par_chunks_mut(dim)
            .zip(scales.par_iter_mut().zip(code_l1.par_iter_mut()))
            .zip(data.par_chunks(dim))
            .for_each(|((c, (s, l1)), row)| {
                let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
                *s = scale;
                let mut sum = 0i64;
                for (c, v) in c.iter_mut().zip(row) {
                    *c = (v / scale).round().clamp(-127.0, 127.0) as i8;
                    sum += i64::from(c.unsigned_abs());
                }
                *l1 = scale * sum as f32;
            });
        Self {
            dim,
            codes,
            scales,
            code_l1,
            finite,
        }
    }

    /// The `k` best rows of `index` for `query` with their exact scores, and the exact minimum and maximum
    /// score over all rows. `index` must be the index this copy was made from.
    pub fn top_k_range(&self, index: &ExactIndex, query: &[f32], k: usize) -> Result<TopKRange> {
        let q = index.prepare_queries(query)?;
        let n = index.len();
        let data = index.as_slice();
        let dim = self.dim;
        let exact = |r: usize| dot(&q, &data[r * dim..(r + 1) * dim]);
        if n == 0 {
            return Ok(TopKRange {
                top: Vec::new(),
                min: f32::INFINITY,
                max: f32::NEG_INFINITY,
            });
        }
        let usable = self.finite
            && dim <= MAX_DIM
            && self.scales.len() == n
            && q.iter().all(|v| v.is_finite())
            && k.max(1) < n;
        let candidates: Vec<usize>;
        let lows: Vec<usize>;
        if usable {
            let q1: f32 = q.iter().map(|v| v.abs()).sum();
            let qmax = q.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let sq = if qmax > 0.0 { qmax / 32767.0 } else { 1.0 };
            let qi: Vec<i16> = q
                .iter()
                .map(|v| (v / sq).round().clamp(-32767.0, 32767.0) as i16)
                .collect();
            // Per row: the screened score and its error bound.
            let approx: Vec<(f32, f32)> = self
                .codes
                .par_chunks(dim * 256)
                .zip(
                    self.scales
                        .par_chunks(256)
                        .zip(self.code_l1.par_chunks(256)),
                )
                .flat_map_iter(|(codes, (scales, l1s))| {
                    codes
                        .chunks_exact(dim)
                        .zip(scales.iter().zip(l1s))
                        .map(|(c, (&s, &l1))| {
                            let a = dot_i16_i8(&qi, c) as f32 * (s * sq);
                            let bound =
                                (0.5 * s * q1 + 0.5 * sq * l1) * (1.0 + ROUNDING) + ROUNDING;
                            (a, bound)
                        })
                })
                .collect();
            let kk = k.max(1);
            // The kk-th largest lower bound: every row whose upper bound is below it has kk rows above it.
            let mut lbs: Vec<f32> = approx.iter().map(|(a, m)| a - m).collect();
            let (_, kth, _) = lbs.select_nth_unstable_by(kk - 1, |a, b| b.total_cmp(a));
            let tau = *kth;
            candidates = (0..n)
                .filter(|&r| approx[r].0 + approx[r].1 >= tau)
                .collect();
            let min_ub = approx
                .iter()
                .map(|(a, m)| a + m)
                .fold(f32::INFINITY, f32::min);
            // Rows that may hold the minimum, less those already scored as top candidates.
            lows = (0..n)
                .filter(|&r| approx[r].0 - approx[r].1 <= min_ub && approx[r].0 + approx[r].1 < tau)
                .collect();
        } else {
            candidates = (0..n).collect();
            lows = Vec::new();
        }
        let mut top: Vec<Hit> = candidates
            .iter()
            .map(|&r| Hit {
                id: r,
                score: exact(r),
            })
            .collect();
        let mut min = top.iter().map(|h| h.score).fold(f32::INFINITY, f32::min);
        for &r in &lows {
            min = min.min(exact(r));
        }
        top.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        let max = top.first().map_or(f32::NEG_INFINITY, |h| h.score);
        top.truncate(k);
        Ok(TopKRange { top, min, max })
    }
}

/// `Σ q_i · c_i`, exactly: |q_i| ≤ 32767 and |c_i| ≤ 127, so each of the 16 lanes sums at most
/// `dim / 16` products of magnitude below 2^22, which fits an i32 for `dim` ≤ [`MAX_DIM`].
fn dot_i16_i8(q: &[i16], c: &[i8]) -> i64 {
    let mut acc = [0i32; 16];
    let qc = q.chunks_exact(16);
    let cc = c.chunks_exact(16);
    let (rq, rc) = (qc.remainder(), cc.remainder());
    for (x, y) in qc.zip(cc) {
        for k in 0..16 {
            acc[k] += i32::from(x[k]) * i32::from(y[k]);
        }
    }
    let mut total: i64 = acc.iter().map(|&v| i64::from(v)).sum();
    for (x, y) in rq.iter().zip(rc) {
        total += i64::from(*x) * i64::from(*y);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::Metric;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }

    #[test]
    fn matches_a_full_scan() {
        let (n, dim) = (3000, 48);
        let mut seed = 7;
        let mut data: Vec<f32> = (0..n * dim).map(|_| lcg(&mut seed)).collect();
        // Near-duplicates and exact ties, so the bounds are tested where they matter.
        for r in 0..20 {
            let (a, b) = (r * dim, (r + 100) * dim);
            let copy: Vec<f32> = data[a..a + dim].to_vec();
            data[b..b + dim].copy_from_slice(&copy);
        }
        let index = ExactIndex::from_rows(dim, Metric::Cosine, &data).unwrap();
        let screened = ScreenedIndex::new(&index);
        for t in 0..30 {
            let query: Vec<f32> = if t < 10 {
                index.as_slice()[t * dim..(t + 1) * dim].to_vec()
            } else {
                (0..dim).map(|_| lcg(&mut seed)).collect()
            };
            let full = index.scores(&query).unwrap();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| full[b].total_cmp(&full[a]).then(a.cmp(&b)));
            for k in [1, 5, 40] {
                let got = screened.top_k_range(&index, &query, k).unwrap();
                let want: Vec<(usize, f32)> = order[..k].iter().map(|&r| (r, full[r])).collect();
                let have: Vec<(usize, f32)> = got.top.iter().map(|h| (h.id, h.score)).collect();
                assert_eq!(have, want, "query {t}, k {k}");
                assert_eq!(got.min, full.iter().copied().fold(f32::INFINITY, f32::min));
                assert_eq!(got.max, full[order[0]]);
            }
        }
    }

    #[test]
    fn small_and_empty_indexes_fall_back() {
        let index = ExactIndex::from_rows(2, Metric::Cosine, &[1.0, 0.0, 0.0, 1.0]).unwrap();
        let s = ScreenedIndex::new(&index);
        let got = s.top_k_range(&index, &[1.0, 0.2], 5).unwrap();
        assert_eq!(got.top.len(), 2);
        assert_eq!(got.top[0].id, 0);
        let empty = ExactIndex::new(2, Metric::Cosine).unwrap();
        let got = ScreenedIndex::new(&empty)
            .top_k_range(&empty, &[1.0, 0.0], 3)
            .unwrap();
        assert!(got.top.is_empty());
    }
}
