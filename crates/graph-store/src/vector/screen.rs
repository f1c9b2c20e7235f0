//! Exact top-k and score range of one query over a large [`ExactIndex`], reading a quarter of its bytes
//! (half of an f16 index's).
//!
//! A full scan of a 17,000 × 384 f32 matrix moves 26 MB per query, more than the caches hold, so it runs at
//! memory speed. [`ScreenedIndex`] keeps an int8 copy of the rows (one scale `s_r` per row); the query is
//! quantised to int16 (scale `s_q`) and scored against it in exact integer arithmetic. The screened score
//! is within `s_r/2 · ‖q‖₁ + s_q/2 · s_r‖c_r‖₁` (plus f32 rounding of the exact score) of the exact one.
//! Only the rows whose bounds can reach the top `k` or the minimum are then scored exactly, with the same
//! dot product as [`ExactIndex::scores`], so the top `k` (ties by row ascending), the minimum and the maximum
//! are exactly what a full scan gives.

use rayon::prelude::*;

use super::{ExactIndex, Hit, VectorIndex};
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
    /// The int8 copy of `index` (fails only when its rows are on disk and cannot be read).
    pub fn new(index: &ExactIndex) -> Result<Self> {
        let dim = index.dim();
        let n = index.len();
        let mut codes = vec![0i8; n * dim];
        let mut scales = vec![0.0f32; n];
        let mut code_l1 = vec![0.0f32; n];
        // In blocks of rows, so that an f16 index is widened a block at a time.
        let finite = codes
            .par_chunks_mut(dim * SCREEN_ROWS)
            .zip(
                scales
                    .par_chunks_mut(SCREEN_ROWS)
                    .zip(code_l1.par_chunks_mut(SCREEN_ROWS)),
            )
            .enumerate()
            .map(|(b, (codes, (scales, l1s)))| {
                let start = b * SCREEN_ROWS;
                let data = index.rows(start, start + scales.len())?;
                let finite = data.iter().all(|v| v.is_finite());
                for ((c, (s, l1)), row) in codes
                    .chunks_exact_mut(dim)
                    .zip(scales.iter_mut().zip(l1s.iter_mut()))
                    .zip(data.chunks_exact(dim))
                {
                    let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
                    *s = scale;
                    let mut sum = 0i64;
                    for (c, v) in c.iter_mut().zip(row) {
                        *c = (v / scale).round().clamp(-127.0, 127.0) as i8;
                        sum += i64::from(c.unsigned_abs());
                    }
                    *l1 = scale * sum as f32;
                }
                Ok(finite)
            })
            .try_reduce(|| true, |a, b| Ok(a && b))?;
        Ok(Self {
            dim,
            codes,
            scales,
            code_l1,
            finite,
        })
    }

    /// Per row of `index`: the screened score of the prepared query `q` and its error bound; `None` when
    /// screening cannot decide (non-finite values, too many dimensions, a copy of another index, or
    /// `kk` rows or fewer).
    fn screen(&self, index: &ExactIndex, q: &[f32], kk: usize) -> Option<Vec<(f32, f32)>> {
        let n = index.len();
        let dim = self.dim;
        let usable = self.finite
            && dim <= MAX_DIM
            && self.scales.len() == n
            && q.iter().all(|v| v.is_finite())
            && kk < n;
        if !usable {
            return None;
        }
        let q1: f32 = q.iter().map(|v| v.abs()).sum();
        let qmax = q.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let sq = if qmax > 0.0 { qmax / 32767.0 } else { 1.0 };
        let qi: Vec<i16> = q
            .iter()
            .map(|v| (v / sq).round().clamp(-32767.0, 32767.0) as i16)
            .collect();
        let mut approx = vec![(0.0f32, 0.0f32); n];
        let task = |((out, codes), (scales, l1s)): ScreenBlock<'_>| {
            let mut dots = [0i64; SCREEN_ROWS];
            screen_dots(&qi, codes, dim, &mut dots);
            for (o, (&d, (&s, &l1))) in out.iter_mut().zip(dots.iter().zip(scales.iter().zip(l1s)))
            {
                let a = d as f32 * (s * sq);
                let bound = (0.5 * s * q1 + 0.5 * sq * l1) * (1.0 + ROUNDING) + ROUNDING;
                *o = (a, bound);
            }
        };
        if self.codes.len() < PARALLEL_MIN_CODES {
            approx
                .chunks_mut(SCREEN_ROWS)
                .zip(self.codes.chunks(dim * SCREEN_ROWS))
                .zip(
                    self.scales
                        .chunks(SCREEN_ROWS)
                        .zip(self.code_l1.chunks(SCREEN_ROWS)),
                )
                .for_each(task);
        } else {
            approx
                .par_chunks_mut(SCREEN_ROWS)
                .zip(self.codes.par_chunks(dim * SCREEN_ROWS))
                .zip(
                    self.scales
                        .par_chunks(SCREEN_ROWS)
                        .zip(self.code_l1.par_chunks(SCREEN_ROWS)),
                )
                .for_each(task);
        }
        Some(approx)
    }

    /// The `kk`-th largest lower bound of `approx`: every row whose upper bound is below it has `kk`
    /// rows above it.
    fn threshold(approx: &[(f32, f32)], kk: usize) -> f32 {
        let mut lbs: Vec<f32> = approx.iter().map(|(a, m)| a - m).collect();
        let (_, kth, _) = lbs.select_nth_unstable_by(kk - 1, |a, b| b.total_cmp(a));
        *kth
    }

    /// Every row of `index` that may be among the `k` best for `query` under any order of equal scores,
    /// with its exact score (as [`ExactIndex::scores`] computes it), rows ascending: a superset of the top
    /// `k` that holds every row scoring as high as the `k`-th, for callers that order ties their own way.
    /// `index` must be the index this copy was made from.
    pub fn candidates(&self, index: &ExactIndex, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        let q = index.prepare_queries(query)?;
        let mut scratch = Vec::new();
        let rows: Vec<usize> = match self.screen(index, &q, k.max(1)) {
            Some(approx) => {
                let tau = Self::threshold(&approx, k.max(1));
                (0..approx.len())
                    .filter(|&r| approx[r].0 + approx[r].1 >= tau)
                    .collect()
            }
            None => (0..index.len()).collect(),
        };
        rows.into_iter()
            .map(|r| {
                Ok(Hit {
                    id: r,
                    score: index.row_dot(&q, r, &mut scratch)?,
                })
            })
            .collect()
    }

    /// [`candidates`](Self::candidates) through `screen` when there is one (made from `index`), else every
    /// row of `index` with its score: for an index whose screen exists only while its rows are on disk.
    pub fn candidates_of(
        screen: Option<&Self>,
        index: &ExactIndex,
        query: &[f32],
        k: usize,
    ) -> Result<Vec<Hit>> {
        match screen {
            Some(screen) => screen.candidates(index, query, k),
            None => Ok(index
                .scores(query)?
                .into_iter()
                .enumerate()
                .map(|(id, score)| Hit { id, score })
                .collect()),
        }
    }

    /// The `k` best rows of `index` for `query` with their exact scores, and the exact minimum and maximum
    /// score over all rows. `index` must be the index this copy was made from.
    pub fn top_k_range(&self, index: &ExactIndex, query: &[f32], k: usize) -> Result<TopKRange> {
        let q = index.prepare_queries(query)?;
        let n = index.len();
        let mut scratch = Vec::new();
        let mut exact = |r: usize| index.row_dot(&q, r, &mut scratch);
        if n == 0 {
            return Ok(TopKRange {
                top: Vec::new(),
                min: f32::INFINITY,
                max: f32::NEG_INFINITY,
            });
        }
        let candidates: Vec<usize>;
        let lows: Vec<usize>;
        if let Some(approx) = self.screen(index, &q, k.max(1)) {
            let tau = Self::threshold(&approx, k.max(1));
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
            .map(|&r| {
                Ok(Hit {
                    id: r,
                    score: exact(r)?,
                })
            })
            .collect::<Result<_>>()?;
        let mut min = top.iter().map(|h| h.score).fold(f32::INFINITY, f32::min);
        for &r in &lows {
            min = min.min(exact(r)?);
        }
        top.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        let max = top.first().map_or(f32::NEG_INFINITY, |h| h.score);
        top.truncate(k);
        Ok(TopKRange { top, min, max })
    }
}

/// One screening task: its output slots, codes, row scales and row code norms.
type ScreenBlock<'a> = ((&'a mut [(f32, f32)], &'a [i8]), (&'a [f32], &'a [f32]));

/// Rows per screening task.
const SCREEN_ROWS: usize = 256;

/// Screens of fewer codes run on the calling thread: on the MuSiQue facts (17,036 × 384) with AVX2, a
/// HippoRAG 2 query took 1.75–1.90 ms p50 so against 1.98–2.14 ms with the screen on rayon (2 cores; waking
/// the pool costs more than the second core saves).
const PARALLEL_MIN_CODES: usize = 1 << 23;

/// `out[r] = Σ_i q_i · codes[r·dim + i]` for each row of `codes` (at most `out.len()` rows), exactly: with
/// AVX2 when the CPU has it (detected at run time), else portably. Both give the same integers.
fn screen_dots(q: &[i16], codes: &[i8], dim: usize, out: &mut [i64]) {
    let rows = codes.chunks_exact(dim).zip(out.iter_mut());
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        if dim.is_multiple_of(16) {
            simd.vectorize(
                #[inline(always)]
                || {
                    for (c, o) in rows {
                        *o = dot_i16_i8_avx2(simd, q, c);
                    }
                },
            );
            return;
        }
    }
    for (c, o) in rows {
        *o = dot_i16_i8(q, c);
    }
}

/// [`dot_i16_i8`] for a multiple of 16 values, in AVX2: each step widens 16 codes to i16
/// (`vpmovsxbw`) and multiplies them with 16 query values into 8 pair sums (`vpmaddwd`). Each pair sum
/// is below 2^23 in magnitude and each of the 8 lanes adds `dim / 16` of them, which fits an i32 for
/// `dim` ≤ [`MAX_DIM`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot_i16_i8_avx2(simd: pulp::x86::V3, q: &[i16], c: &[i8]) -> i64 {
    use std::arch::x86_64::{__m128i, __m256i};
    let (qs, _) = pulp::as_arrays::<16, i16>(q);
    let (cs, _) = pulp::as_arrays::<16, i8>(c);
    // 8 pair sums of 16 query values times 16 codes widened to i16.
    let product = |qv: [i16; 16], cv: [i8; 16]| {
        let cv: __m128i = pulp::cast(cv);
        simd.avx2._mm256_madd_epi16(
            pulp::cast::<_, __m256i>(qv),
            simd.avx2._mm256_cvtepi8_epi16(cv),
        )
    };
    let (mut acc0, mut acc1) = (
        simd.avx._mm256_setzero_si256(),
        simd.avx._mm256_setzero_si256(),
    );
    for (q2, c2) in qs.chunks_exact(2).zip(cs.chunks_exact(2)) {
        acc0 = simd.avx2._mm256_add_epi32(acc0, product(q2[0], c2[0]));
        acc1 = simd.avx2._mm256_add_epi32(acc1, product(q2[1], c2[1]));
    }
    if qs.len() % 2 == 1 {
        if let (Some(&qv), Some(&cv)) = (qs.last(), cs.last()) {
            acc0 = simd.avx2._mm256_add_epi32(acc0, product(qv, cv));
        }
    }
    let lanes0: [i32; 8] = pulp::cast(acc0);
    let lanes1: [i32; 8] = pulp::cast(acc1);
    lanes0.iter().chain(&lanes1).map(|&v| i64::from(v)).sum()
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
    use crate::vector::test_lcg as lcg;
    use crate::vector::Metric;

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
        let screened = ScreenedIndex::new(&index).unwrap();
        for t in 0..30 {
            let query: Vec<f32> = if t < 10 {
                index.values().unwrap()[t * dim..(t + 1) * dim].to_vec()
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
    fn candidates_hold_every_row_as_good_as_the_kth_with_its_exact_score_on_disk_too() {
        let (n, dim) = (2000, 32);
        let mut seed = 11;
        let mut data: Vec<f32> = (0..n * dim).map(|_| lcg(&mut seed)).collect();
        // Rows with exactly equal vectors: ties at the k-th place must all come back.
        for r in 0..30 {
            let copy: Vec<f32> = data[r * dim..(r + 1) * dim].to_vec();
            for j in [r + 500, r + 1000] {
                data[j * dim..(j + 1) * dim].copy_from_slice(&copy);
            }
        }
        let memory = ExactIndex::from_rows(dim, Metric::Cosine, &data).unwrap();
        let scratch = std::env::temp_dir().join(format!("kgrag-screen-{}", std::process::id()));
        let mut disk = memory.clone();
        disk.rows_on_disk(&scratch).unwrap();
        assert!(disk.is_on_disk() && disk == memory);
        let screened = ScreenedIndex::new(&disk).unwrap();
        for t in 0..20 {
            let query: Vec<f32> = if t < 8 {
                data[t * dim..(t + 1) * dim].to_vec()
            } else {
                (0..dim).map(|_| lcg(&mut seed)).collect()
            };
            let full = memory.scores(&query).unwrap();
            let mut sorted = full.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            for k in [1, 3, 10] {
                let got = screened.candidates(&disk, &query, k).unwrap();
                assert!(got.windows(2).all(|w| w[0].id < w[1].id), "rows ascending");
                for h in &got {
                    assert_eq!(h.score.to_bits(), full[h.id].to_bits(), "exact score");
                }
                let kth = sorted[k - 1];
                let must: Vec<usize> = (0..n).filter(|&r| full[r] >= kth).collect();
                let have: Vec<usize> = got.iter().map(|h| h.id).collect();
                assert!(must.iter().all(|r| have.contains(r)), "query {t}, k {k}");
                assert!(
                    got.len() < n / 4,
                    "the screen decided most rows ({})",
                    got.len()
                );
            }
        }
        std::fs::remove_dir_all(&scratch).ok();
    }

    #[test]
    fn screened_dots_are_exact_on_both_paths() {
        let mut seed = 3;
        // Extreme codes and query values (the overflow bound is tight at MAX_DIM), and random ones; dims
        // that take the AVX2 path (multiples of 16) and dims that do not.
        for dim in [16, 48, 50, 384, 385, MAX_DIM] {
            for extreme in [false, true] {
                let rows = 5;
                let q: Vec<i16> = (0..dim)
                    .map(|i| match (extreme, i % 2) {
                        (true, 0) => 32767,
                        (true, _) => -32767,
                        _ => (lcg(&mut seed) * 65000.0) as i16,
                    })
                    .collect();
                let codes: Vec<i8> = (0..rows * dim)
                    .map(|i| match (extreme, i % 2) {
                        (true, 0) => 127,
                        (true, _) => -127,
                        _ => (lcg(&mut seed) * 250.0) as i8,
                    })
                    .collect();
                let mut got = [0i64; 5];
                screen_dots(&q, &codes, dim, &mut got);
                for (r, g) in got.iter().enumerate() {
                    let want: i64 = q
                        .iter()
                        .zip(&codes[r * dim..(r + 1) * dim])
                        .map(|(&a, &b)| i64::from(a) * i64::from(b))
                        .sum();
                    assert_eq!(*g, want, "dim {dim}, extreme {extreme}, row {r}");
                    assert_eq!(dot_i16_i8(&q, &codes[r * dim..(r + 1) * dim]), want);
                }
            }
        }
    }

    #[test]
    fn small_and_empty_indexes_fall_back() {
        let index = ExactIndex::from_rows(2, Metric::Cosine, &[1.0, 0.0, 0.0, 1.0]).unwrap();
        let s = ScreenedIndex::new(&index).unwrap();
        let got = s.top_k_range(&index, &[1.0, 0.2], 5).unwrap();
        assert_eq!(got.top.len(), 2);
        assert_eq!(got.top[0].id, 0);
        let empty = ExactIndex::new(2, Metric::Cosine).unwrap();
        let got = ScreenedIndex::new(&empty)
            .unwrap()
            .top_k_range(&empty, &[1.0, 0.0], 3)
            .unwrap();
        assert!(got.top.is_empty());
    }
}
