//! The candidate pairs of an exact self-join, screened in 8-bit integer arithmetic.
//!
//! A self-join of `n` rows costs `n²/2 · dim` multiply-adds (5·10¹⁰ for MuSiQue's 16k phrases); as f32
//! products it runs at the machine's sgemm rate. Here every value is coded on one scale `S` for the whole
//! matrix (`S = max|x| / 63`): `c = round(x / S)` in −63..=63, error ≤ `S/2`. For a pair,
//! `x_u·x_v ≤ S² (c_u·c_v + ‖c_u‖₁/2 + ‖c_v‖₁/2 + dim/4)`, so the pair can reach `min_score` only when the
//! integer `2 c_u·c_v + ‖c_u‖₁ + ‖c_v‖₁` reaches a threshold computed once. The products run on
//! AVX-512BW's `vpmaddubsw` (64 byte products per instruction) where the CPU has it, else on AVX2's (32;
//! one side offset to 0..=126, the offset taken out with a per-row sum), both through pulp's run-time
//! dispatch and tested equal to exact integer sums; the screen is one vector compare per 4 × 2 tile, and
//! every pair kept is scored again exactly by the caller, so the lists are those of the f32 scan.
//!
//! One scale for all rows keeps the test separable (no per-pair multiplication); its looseness only adds
//! candidates: on MuSiQue's phrases the bound is ≈ 0.1, so the screen keeps the ~3·10⁴ pairs above ~0.7
//! of 1.3·10⁸, and rescoring them costs nothing next to the scan.

use rayon::prelude::*;

/// Rows per block: a block's two code copies at dim 384 are 384 KiB, so a block pair stays in L2.
const BLOCK: usize = 512;

/// The largest (padded) dimension screened; larger rows take the f32 path.
const MAX_DIM: usize = 4096;

/// The code range −CODE..=CODE; the unsigned side is `c + CODE` ≤ 126, so two `vpmaddubsw` pair sums
/// (≤ 2 · 126 · 63 each) add up below 2¹⁵ without saturating.
const CODE: i32 = 63;

/// Values per step of the AVX2 kernel (two 32-byte loads per row).
const STEP: usize = 64;

/// Values per step of the AVX-512 kernel (two 64-byte loads per row), and the padding of every row.
const STEP_512: usize = 128;

/// The two 8-bit copies of a matrix and the per-row terms of the screen.
pub(super) struct JoinCodes {
    n: usize,
    /// The padded dimension (a multiple of [`STEP_512`], zeros after `dim`).
    padded: usize,
    /// Row count rounded up to a multiple of 4; the rows past `n` are all zero.
    rows: usize,
    /// Per row, `c + CODE` as bytes (0 in the padding): the unsigned operand.
    unsigned: Vec<u8>,
    /// Per row, `c` as signed bytes (0 in the padding).
    signed: Vec<i8>,
    /// Per row `u`: `‖c_u‖₁`.
    l1: Vec<i32>,
    /// Per row `v`: `‖c_v‖₁ − 2·CODE·Σ c_v` (the offset correction of the unsigned side's products).
    l1_less_offset: Vec<i32>,
    /// `S` and the largest row norm.
    scale: f64,
    max_norm: f64,
    dim: usize,
}

impl JoinCodes {
    /// The codes of `queries` (the unsigned side) and `rows` (the signed side), both `n × dim` row-major
    /// and meant to be (nearly) the same matrix, or `None` when the integer screen cannot serve: no AVX2
    /// on this CPU, a dimension above 4096, a non-finite value, or an all-zero matrix.
    pub(super) fn new(queries: &[f32], rows: &[f32], dim: usize) -> Option<Self> {
        if !avx2() || dim == 0 || queries.len() != rows.len() || !rows.len().is_multiple_of(dim) {
            return None;
        }
        let padded = dim.div_ceil(STEP_512) * STEP_512;
        if padded > MAX_DIM {
            return None;
        }
        // The largest magnitude, and whether every value is finite (one parallel pass per matrix).
        let max_abs = |m: &[f32]| -> (f32, bool) {
            m.par_chunks(1 << 16)
                .map(|c| {
                    c.iter().fold((0.0f32, true), |(m, finite), &v| {
                        let a = v.abs();
                        (if a > m { a } else { m }, finite && a <= f32::MAX)
                    })
                })
                .reduce(|| (0.0, true), |a, b| (a.0.max(b.0), a.1 && b.1))
        };
        let ((mq, fq), (mr, fr)) = (max_abs(queries), max_abs(rows));
        let max = mq.max(mr);
        if !(fq && fr) || max == 0.0 {
            return None;
        }
        let scale = f64::from(max) / f64::from(CODE);
        let n = rows.len() / dim;
        let rows_padded = n.div_ceil(4) * 4;
        let mut unsigned = vec![0u8; rows_padded * padded];
        let mut signed = vec![0i8; rows_padded * padded];
        let mut l1 = vec![0i32; rows_padded];
        let mut l1_less_offset = vec![0i32; rows_padded];
        let code = |v: f32| -> i32 {
            // Round half away from zero without a libm call (`as` truncates toward zero).
            let t = f64::from(v) / scale;
            ((t + 0.5f64.copysign(t)) as i32).clamp(-CODE, CODE)
        };
        unsigned
            .par_chunks_mut(padded)
            .zip(signed.par_chunks_mut(padded))
            .zip(queries.par_chunks(dim).zip(rows.par_chunks(dim)))
            .zip(l1.par_iter_mut().zip(l1_less_offset.par_iter_mut()))
            .for_each(|(((us, ss), (q, r)), (l1, l1o))| {
                let mut sum_abs = 0i32;
                for (o, &v) in us.iter_mut().zip(q) {
                    let c = code(v);
                    sum_abs += c.abs();
                    *o = (c + CODE) as u8;
                }
                *l1 = sum_abs;
                let (mut sum_abs, mut sum) = (0i32, 0i32);
                for (o, &v) in ss.iter_mut().zip(r) {
                    let c = code(v);
                    sum_abs += c.abs();
                    sum += c;
                    *o = c as i8;
                }
                *l1o = sum_abs - 2 * CODE * sum;
            });
        let norm = |m: &[f32]| {
            m.par_chunks(dim)
                .map(|r| r.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>())
                .reduce(|| 0.0, f64::max)
                .sqrt()
        };
        let max_norm = norm(queries).max(norm(rows));
        Some(Self {
            n,
            padded,
            rows: rows_padded,
            unsigned,
            signed,
            l1,
            l1_less_offset,
            scale,
            max_norm,
            dim,
        })
    }

    /// The integer threshold: a pair whose `2·raw + l1[u] + l1_less_offset[v]` is below it cannot score
    /// `min_score` (`raw` = the unsigned-by-signed byte product), clamped to the i32 range.
    fn threshold(&self, min_score: f32) -> i32 {
        // f32 scores of `dim` terms err by at most ~dim·ε relative to Σ|x_i y_i| ≤ ‖x‖‖y‖; the two
        // directions of a pair and the normalised copy differ by a few ε more.
        let rounding = ((self.dim as f64 + 8.0) * f64::from(f32::EPSILON) * 2.0 + 1e-6)
            * self.max_norm
            * self.max_norm
            + 1e-6;
        let t = 2.0 * ((f64::from(min_score) - rounding) / (self.scale * self.scale))
            - self.dim as f64 / 2.0;
        // One below the ceiling, for the rounding of this very computation.
        (t.ceil() - 1.0).clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
    }

    /// Every pair `(u, v)` and `(v, u)` with `u ≤ v` whose exact score can reach `min_score` (each pair
    /// `(u, u)` once), in no particular order.
    pub(super) fn candidates(&self, min_score: f32) -> Vec<(u32, u32)> {
        let threshold = self.threshold(min_score);
        upper_block_pairs(self.rows.div_ceil(BLOCK))
            .par_iter()
            .map(|&(i, j)| {
                let mut out = Vec::new();
                self.block_pair(i, j, threshold, &mut out);
                out
            })
            .flatten()
            .collect()
    }

    /// The screen value `2·raw + l1[u] + l1_less_offset[v]` of the 8 pairs of the tile at rows
    /// `a..a+4` × `b..b+2`, lanes `[a·b, a·(b+1), (a+1)·b, …]`.
    fn tile_values(&self, a: usize, b: usize) -> [i32; 8] {
        let raw = self.tile_raw(a, b);
        let mut out = [0i32; 8];
        for (k, o) in out.iter_mut().enumerate() {
            *o = 2 * raw[k] + self.l1[a + k / 2] + self.l1_less_offset[b + k % 2];
        }
        out
    }

    /// The raw byte products of a tile, portably (the tests' reference for the kernel).
    fn tile_raw(&self, a: usize, b: usize) -> [i32; 8] {
        let p = self.padded;
        let mut out = [0i32; 8];
        for (k, o) in out.iter_mut().enumerate() {
            let (u, v) = (a + k / 2, b + k % 2);
            *o = self.unsigned[u * p..(u + 1) * p]
                .iter()
                .zip(&self.signed[v * p..(v + 1) * p])
                .map(|(&x, &y)| i32::from(x) * i32::from(y))
                .sum();
        }
        out
    }

    /// Screens rows `i·BLOCK..` against rows `j·BLOCK..` (only `v ≥ u` when `i == j`).
    fn block_pair(&self, i: usize, j: usize, threshold: i32, out: &mut Vec<(u32, u32)>) {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V4::try_new() {
            simd.vectorize(
                #[inline(always)]
                || {
                    self.each_tile(i, j, out, |a, b| {
                        let raw = self.tile_raw_avx512(simd, a, b);
                        self.tile_mask(simd.avx, simd.avx2, raw, a, b, threshold)
                    })
                },
            );
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            simd.vectorize(
                #[inline(always)]
                || self.each_tile(i, j, out, |a, b| self.tile_mask_avx2(simd, a, b, threshold)),
            );
            return;
        }
        // `new` refuses CPUs without AVX2; this serves only if that ever changes.
        self.each_tile(i, j, out, |a, b| {
            self.tile_values(a, b)
                .iter()
                .enumerate()
                .filter(|&(_, &v)| v >= threshold)
                .fold(0u32, |m, (k, _)| m | (1 << k))
        });
    }

    /// Visits the 4 × 2 tiles of block pair `(i, j)` (on the diagonal block, not those wholly below the
    /// diagonal) and keeps the pairs `u ≤ v < n` whose bit is set in `mask_of(a, b)`.
    #[inline(always)]
    fn each_tile(
        &self,
        i: usize,
        j: usize,
        out: &mut Vec<(u32, u32)>,
        mut mask_of: impl FnMut(usize, usize) -> u32,
    ) {
        let (a0, a1) = (i * BLOCK, ((i + 1) * BLOCK).min(self.rows));
        let (b0, b1) = (j * BLOCK, ((j + 1) * BLOCK).min(self.rows));
        for a in (a0..a1).step_by(4) {
            let start = if i == j { a } else { b0 };
            for b in (start..b1).step_by(2) {
                let mut m = mask_of(a, b);
                while m != 0 {
                    let k = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let (u, v) = (a + k / 2, b + k % 2);
                    if u <= v && v < self.n {
                        push_both(out, u, v);
                    }
                }
            }
        }
    }

    /// Bit `k` set when lane `k` of [`tile_values`](Self::tile_values) reaches `threshold`, in AVX2: per
    /// 64 values, two signed loads per coarse row shared by four unsigned rows, sixteen `vpmaddubsw`
    /// whose pairs are added in i16 (no saturation: see [`CODE`]) and widened by one `vpmaddwd` into
    /// eight i32 accumulators; one horizontal reduction; one compare.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn tile_mask_avx2(&self, simd: pulp::x86::V3, a: usize, b: usize, threshold: i32) -> u32 {
        let raw = self.tile_raw_avx2(simd, a, b);
        self.tile_mask(simd.avx, simd.avx2, raw, a, b, threshold)
    }

    /// The mask of [`tile_mask_avx2`](Self::tile_mask_avx2) from a tile's raw products.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn tile_mask(
        &self,
        avx: pulp::core_arch::x86::Avx,
        avx2: pulp::core_arch::x86::Avx2,
        raw: std::arch::x86_64::__m256i,
        a: usize,
        b: usize,
        threshold: i32,
    ) -> u32 {
        let la = [
            self.l1[a],
            self.l1[a],
            self.l1[a + 1],
            self.l1[a + 1],
            self.l1[a + 2],
            self.l1[a + 2],
            self.l1[a + 3],
            self.l1[a + 3],
        ];
        let (lb0, lb1) = (self.l1_less_offset[b], self.l1_less_offset[b + 1]);
        let lb = [lb0, lb1, lb0, lb1, lb0, lb1, lb0, lb1];
        let value = avx2._mm256_add_epi32(
            avx2._mm256_add_epi32(raw, raw),
            avx2._mm256_add_epi32(pulp::cast(la), pulp::cast(lb)),
        );
        let below = avx2._mm256_cmpgt_epi32(avx._mm256_set1_epi32(threshold), value);
        // Lanes not below the threshold.
        (!avx._mm256_movemask_ps(avx._mm256_castsi256_ps(below)) & 0xff) as u32
    }

    /// The raw byte products of a tile in AVX-512 (BW): per 128 values, two 64-byte loads per row,
    /// sixteen `vpmaddubsw` whose pairs are added in i16 (no saturation: see [`CODE`]) and widened by one
    /// `vpmaddwd` into eight i32 accumulators; then each accumulator halved to 256 bits and reduced as in
    /// AVX2.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn tile_raw_avx512(
        &self,
        simd: pulp::x86::V4,
        a: usize,
        b: usize,
    ) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::{__m256i, __m512i};
        let p = self.padded;
        let urow = |u: usize| pulp::as_arrays::<STEP_512, u8>(&self.unsigned[u * p..(u + 1) * p]).0;
        let srow = |v: usize| pulp::as_arrays::<STEP_512, i8>(&self.signed[v * p..(v + 1) * p]).0;
        let halves_u = |x: &[u8; STEP_512]| -> (__m512i, __m512i) {
            let (lo, hi) = pulp::as_arrays::<64, u8>(x).0.split_at(1);
            (pulp::cast(lo[0]), pulp::cast(hi[0]))
        };
        let halves_s = |x: &[i8; STEP_512]| -> (__m512i, __m512i) {
            let (lo, hi) = pulp::as_arrays::<64, i8>(x).0.split_at(1);
            (pulp::cast(lo[0]), pulp::cast(hi[0]))
        };
        let (f, bw) = (simd.avx512f, simd.avx512bw);
        let ones = f._mm512_set1_epi16(1);
        let mut acc = [f._mm512_setzero_si512(); 8];
        let (u0, u1, u2, u3) = (urow(a), urow(a + 1), urow(a + 2), urow(a + 3));
        let (s0, s1) = (srow(b), srow(b + 1));
        for ((((x0, x1), x2), x3), (y0, y1)) in
            u0.iter().zip(u1).zip(u2).zip(u3).zip(s0.iter().zip(s1))
        {
            let (y0l, y0h) = halves_s(y0);
            let (y1l, y1h) = halves_s(y1);
            let mut one = |k: usize, x: &[u8; STEP_512]| {
                let (xl, xh) = halves_u(x);
                let p0 = bw._mm512_add_epi16(
                    bw._mm512_maddubs_epi16(xl, y0l),
                    bw._mm512_maddubs_epi16(xh, y0h),
                );
                let p1 = bw._mm512_add_epi16(
                    bw._mm512_maddubs_epi16(xl, y1l),
                    bw._mm512_maddubs_epi16(xh, y1h),
                );
                acc[2 * k] = f._mm512_add_epi32(acc[2 * k], bw._mm512_madd_epi16(p0, ones));
                acc[2 * k + 1] = f._mm512_add_epi32(acc[2 * k + 1], bw._mm512_madd_epi16(p1, ones));
            };
            one(0, x0);
            one(1, x1);
            one(2, x2);
            one(3, x3);
        }
        let avx2 = simd.avx2;
        let half = |z: __m512i| -> __m256i {
            avx2._mm256_add_epi32(
                f._mm512_castsi512_si256(z),
                f._mm512_extracti64x4_epi64::<1>(z),
            )
        };
        // An explicit array, not `acc.map(half)`: `map` may stay a call compiled without AVX-512.
        reduce_tile(
            avx2,
            [
                half(acc[0]),
                half(acc[1]),
                half(acc[2]),
                half(acc[3]),
                half(acc[4]),
                half(acc[5]),
                half(acc[6]),
                half(acc[7]),
            ],
        )
    }

    /// The raw byte products of a tile in AVX2 (see [`tile_mask_avx2`](Self::tile_mask_avx2)).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn tile_raw_avx2(&self, simd: pulp::x86::V3, a: usize, b: usize) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::__m256i;
        let p = self.padded;
        let urow = |u: usize| pulp::as_arrays::<STEP, u8>(&self.unsigned[u * p..(u + 1) * p]).0;
        let srow = |v: usize| pulp::as_arrays::<STEP, i8>(&self.signed[v * p..(v + 1) * p]).0;
        let halves_u = |x: &[u8; STEP]| -> (__m256i, __m256i) {
            let (lo, hi) = pulp::as_arrays::<32, u8>(x).0.split_at(1);
            (pulp::cast(lo[0]), pulp::cast(hi[0]))
        };
        let halves_s = |x: &[i8; STEP]| -> (__m256i, __m256i) {
            let (lo, hi) = pulp::as_arrays::<32, i8>(x).0.split_at(1);
            (pulp::cast(lo[0]), pulp::cast(hi[0]))
        };
        let (avx, avx2) = (simd.avx, simd.avx2);
        let ones = avx._mm256_set1_epi16(1);
        let mut acc = [avx._mm256_setzero_si256(); 8];
        let (u0, u1, u2, u3) = (urow(a), urow(a + 1), urow(a + 2), urow(a + 3));
        let (s0, s1) = (srow(b), srow(b + 1));
        for ((((x0, x1), x2), x3), (y0, y1)) in
            u0.iter().zip(u1).zip(u2).zip(u3).zip(s0.iter().zip(s1))
        {
            let (y0l, y0h) = halves_s(y0);
            let (y1l, y1h) = halves_s(y1);
            let mut one = |k: usize, x: &[u8; STEP]| {
                let (xl, xh) = halves_u(x);
                let p0 = avx2._mm256_add_epi16(
                    avx2._mm256_maddubs_epi16(xl, y0l),
                    avx2._mm256_maddubs_epi16(xh, y0h),
                );
                let p1 = avx2._mm256_add_epi16(
                    avx2._mm256_maddubs_epi16(xl, y1l),
                    avx2._mm256_maddubs_epi16(xh, y1h),
                );
                acc[2 * k] = avx2._mm256_add_epi32(acc[2 * k], avx2._mm256_madd_epi16(p0, ones));
                acc[2 * k + 1] =
                    avx2._mm256_add_epi32(acc[2 * k + 1], avx2._mm256_madd_epi16(p1, ones));
            };
            one(0, x0);
            one(1, x1);
            one(2, x2);
            one(3, x3);
        }
        reduce_tile(avx2, acc)
    }
}

/// The eight i32 sums of a tile's accumulators (one per pair, lanes in the tile's order): horizontal
/// adds give `[s0_lo.., s3_lo.., s0_hi.., s3_hi..]` for accumulators 0–3 and 4–7, then low + high halves.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn reduce_tile(
    avx2: pulp::core_arch::x86::Avx2,
    acc: [std::arch::x86_64::__m256i; 8],
) -> std::arch::x86_64::__m256i {
    let h = |p, q| avx2._mm256_hadd_epi32(p, q);
    let s0 = h(h(acc[0], acc[1]), h(acc[2], acc[3]));
    let s1 = h(h(acc[4], acc[5]), h(acc[6], acc[7]));
    avx2._mm256_add_epi32(
        avx2._mm256_permute2x128_si256::<0x20>(s0, s1),
        avx2._mm256_permute2x128_si256::<0x31>(s0, s1),
    )
}

/// The block pairs `(i, j)`, `i ≤ j < blocks`, of a self-join.
pub(super) fn upper_block_pairs(blocks: usize) -> Vec<(usize, usize)> {
    (0..blocks)
        .flat_map(|i| (i..blocks).map(move |j| (i, j)))
        .collect()
}

/// Records the candidate pair `u ≤ v` in both directions (`(u, u)` once).
#[inline]
pub(super) fn push_both(out: &mut Vec<(u32, u32)>, u: usize, v: usize) {
    out.push((u as u32, v as u32));
    if u != v {
        out.push((v as u32, u as u32));
    }
}

/// Whether this CPU has AVX2 (the integer kernel's instruction set).
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        pulp::x86::V3::try_new().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::test_lcg as lcg;

    #[test]
    fn the_kernel_is_exact_at_the_code_range_limits() {
        // Rows at ±max (every code ±63, the unsigned side 0 or 126) and random rows, at dims that pad
        // and the largest screened: the AVX2 and AVX-512 products (where the CPU has them) equal the
        // portable ones, and these equal i64 sums.
        let mut seed = 5;
        for dim in [24, 64, 384, MAX_DIM] {
            for extreme in [false, true] {
                let n = 8;
                let data: Vec<f32> = (0..n * dim)
                    .map(|i| match (extreme, (i / 3 + i / dim) % 2) {
                        (true, 0) => 1.0,
                        (true, _) => -1.0,
                        _ => lcg(&mut seed),
                    })
                    .collect();
                let Some(codes) = JoinCodes::new(&data, &data, dim) else {
                    return;
                };
                #[cfg(target_arch = "x86_64")]
                if let Some(simd) = pulp::x86::V3::try_new() {
                    for (a, b) in [(0, 0), (0, 6), (4, 2)] {
                        let got: [i32; 8] =
                            pulp::cast(simd.vectorize(|| codes.tile_raw_avx2(simd, a, b)));
                        assert_eq!(got, codes.tile_raw(a, b), "dim {dim}, extreme {extreme}");
                    }
                }
                #[cfg(target_arch = "x86_64")]
                if let Some(simd) = pulp::x86::V4::try_new() {
                    for (a, b) in [(0, 0), (0, 6), (4, 2)] {
                        let got: [i32; 8] =
                            pulp::cast(simd.vectorize(|| codes.tile_raw_avx512(simd, a, b)));
                        assert_eq!(got, codes.tile_raw(a, b), "dim {dim}, extreme {extreme}");
                    }
                }
                let p = codes.padded;
                let raw = codes.tile_raw(0, 2);
                for (k, &r) in raw.iter().enumerate() {
                    let (u, v) = (k / 2, 2 + k % 2);
                    let want: i64 = (0..p)
                        .map(|i| {
                            i64::from(codes.unsigned[u * p + i])
                                * i64::from(codes.signed[v * p + i])
                        })
                        .sum();
                    assert_eq!(i64::from(r), want);
                }
            }
        }
    }

    #[test]
    fn the_screen_keeps_every_pair_that_reaches_the_threshold_and_prunes_the_rest() {
        // Unit rows in clusters: every pair whose f64 product reaches the threshold is a candidate, each
        // pair once per direction, and at 0.8 most pairs are pruned.
        let (n, dim) = (700, 384);
        let mut seed = 9;
        let centres: Vec<f32> = (0..30 * dim).map(|_| lcg(&mut seed)).collect();
        let mut rows = Vec::with_capacity(n * dim);
        for r in 0..n {
            let c = (r * 11) % 30;
            let row: Vec<f32> = (0..dim)
                .map(|d| centres[c * dim + d] + 0.3 * lcg(&mut seed))
                .collect();
            let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
            rows.extend(row.iter().map(|v| v / norm));
        }
        let Some(codes) = JoinCodes::new(&rows, &rows, dim) else {
            // No AVX2 here: the caller scans in f32 and there is nothing to screen.
            return;
        };
        let real = |u: usize, v: usize| -> f64 {
            rows[u * dim..(u + 1) * dim]
                .iter()
                .zip(&rows[v * dim..(v + 1) * dim])
                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                .sum()
        };
        for min in [0.5f32, 0.8, 0.9] {
            let cands = codes.candidates(min);
            let mut sorted = cands.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), cands.len(), "a pair screened twice");
            let mut wanted = 0;
            for u in 0..n {
                for v in 0..n {
                    if real(u, v) >= f64::from(min) {
                        wanted += 1;
                        assert!(
                            sorted.binary_search(&(u as u32, v as u32)).is_ok(),
                            "{u} {v}"
                        );
                    }
                }
            }
            assert!(cands.len() >= wanted);
            if min >= 0.8 {
                assert!(
                    cands.len() < n * n / 10,
                    "{} of {} pairs",
                    cands.len(),
                    n * n
                );
            }
        }
        // Every pair's screen value bounds its real product (the inequality the threshold rests on).
        for u in (0..n).step_by(4) {
            for v in (0..n).step_by(2) {
                let values = codes.tile_values(u, v);
                for (k, &val) in values.iter().enumerate() {
                    let (uu, vv) = (u + k / 2, v + k % 2);
                    let bound =
                        codes.scale * codes.scale * (f64::from(val) + dim as f64 / 2.0) / 2.0;
                    assert!(bound + 1e-9 >= real(uu, vv), "{uu} {vv}");
                }
            }
        }
    }
}
