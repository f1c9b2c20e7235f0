//! The candidate pairs of an exact self-join, screened in 8-bit integer arithmetic.
//!
//! A self-join of `n` rows costs `n²/2 · dim` multiply-adds (5·10¹⁰ for MuSiQue's 16k phrases); as f32
//! products it runs at the machine's sgemm rate. Here every value is coded on one scale `S` for the whole
//! matrix (`S = max|x| / 63`): `c = round(x / S)` in −63..=63, error ≤ `S/2`. For a pair,
//! `x_u·x_v ≤ S² (c_u·c_v + ‖c_u‖₁/2 + ‖c_v‖₁/2 + dim/4)`, so the pair can reach `min_score` only when the
//! integer `2 c_u·c_v + ‖c_u‖₁ + ‖c_v‖₁` reaches a threshold computed once. The products run on the
//! best kernel the CPU has, chosen at run time: AVX512-VNNI's `vpdpbusd` as a tiled integer matrix
//! product (8 rows by 32, each row's four bytes broadcast against two 16-row panels packed by group of
//! four values; 64 byte products per instruction, no horizontal sums); else AVX-512BW's `vpmaddubsw`
//! (64 per instruction) or AVX2's (32; one side offset to 0..=126, the offset taken out with a per-row
//! sum), both on 4 × 2 tiles through pulp's safe run-time dispatch. All are tested equal to exact
//! integer sums and to each other's candidate lists; the screen is one vector compare per tile row (VNNI)
//! or per tile, and every pair kept is scored again exactly by the caller, so the lists are those of the
//! f32 scan.
//!
//! The VNNI kernel is one of the workspace's few `unsafe` calls (the others: the local encoder's products,
//! `kgrag-llm`'s `local::gemm`): pulp has no safe `vpdpbusd`, so the kernel is a
//! `#[target_feature]` function (whose intrinsics are safe inside it) entered once per block pair after
//! the CPU was found to have every feature it is compiled for ([`Kernel::available`]).
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

/// Unsigned rows per tile of the AVX512-VNNI kernel.
const TILE_ROWS: usize = 8;

/// Signed rows per panel of the AVX512-VNNI kernel (one 512-bit accumulator of i32 sums); a tile has two.
const PANEL: usize = 16;

/// Rows are padded with zero rows to a multiple of this (whole VNNI tiles and panels).
const ROW_ALIGN: usize = 2 * PANEL;

/// The two 8-bit copies of a matrix and the per-row terms of the screen.
pub(super) struct JoinCodes {
    n: usize,
    /// The padded dimension (a multiple of [`STEP_512`], zeros after `dim`).
    padded: usize,
    /// Row count rounded up to a multiple of [`ROW_ALIGN`]; the rows past `n` are all zero.
    rows: usize,
    /// Per row, `c + CODE` as bytes (0 in the padding): the unsigned operand.
    unsigned: Vec<u8>,
    /// Per row, `c` as signed bytes (0 in the padding).
    signed: Vec<i8>,
    /// Where the CPU has AVX512-VNNI (else empty): the signed rows in panels of [`PANEL`] rows, per
    /// group of four values 64 bytes (the group's four bytes of each row in turn), panel by panel.
    panels: Vec<[i8; 64]>,
    /// The kernel [`block_pair`](Self::block_pair) runs: the best this CPU has.
    kernel: Kernel,
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
    /// on this CPU, a dimension above 4096, a non-finite value, or an all-zero matrix. Kernel: the best
    /// this CPU has ([`Kernel::best`]).
    pub(super) fn new(queries: &[f32], rows: &[f32], dim: usize) -> Option<Self> {
        let kernel = Kernel::best()?;
        if dim == 0 || queries.len() != rows.len() || !rows.len().is_multiple_of(dim) {
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
        let rows_padded = n.div_ceil(ROW_ALIGN) * ROW_ALIGN;
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
        let panels = if kernel == Kernel::Vnni {
            panels_of(&signed, padded)
        } else {
            Vec::new()
        };
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
            panels,
            kernel,
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

    /// These codes screened by `kernel` instead of the best one, where this CPU has it.
    #[cfg(test)]
    fn with_kernel(mut self, kernel: Kernel) -> Option<Self> {
        if !kernel.available() {
            return None;
        }
        self.panels = if kernel == Kernel::Vnni {
            panels_of(&self.signed, self.padded)
        } else {
            Vec::new()
        };
        self.kernel = kernel;
        Some(self)
    }

    /// The VNNI kernel's tile at `(a, b)` as `[row][panel · 16 + lane]` sums, where this CPU has it.
    #[cfg(all(test, target_arch = "x86_64"))]
    fn tile_vnni_sums(&self, a: usize, b: usize) -> Option<[[i32; 2 * PANEL]; TILE_ROWS]> {
        if self.kernel != Kernel::Vnni {
            return None;
        }
        // SAFETY: as in `block_pair`: the kernel is `Vnni` only where the CPU has its features.
        #[allow(unsafe_code)]
        let acc = unsafe { self.tile_vnni(a, b) };
        let mut out = [[0i32; 2 * PANEL]; TILE_ROWS];
        for (k, z) in acc.iter().enumerate() {
            let lanes: [i32; PANEL] = pulp::cast(*z);
            out[k / 2][(k % 2) * PANEL..(k % 2 + 1) * PANEL].copy_from_slice(&lanes);
        }
        Some(out)
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
        match self.kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => {
                // SAFETY: `kernel` is `Vnni` only where `Kernel::available` found AVX/AVX2/AVX-512F/
                // BW/VL and AVX512-VNNI on this CPU: every feature `block_pair_vnni` is compiled for.
                #[allow(unsafe_code)]
                unsafe {
                    self.block_pair_vnni(i, j, threshold, out)
                };
                return;
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
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
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                if let Some(simd) = pulp::x86::V3::try_new() {
                    simd.vectorize(
                        #[inline(always)]
                        || {
                            self.each_tile(i, j, out, |a, b| {
                                self.tile_mask_avx2(simd, a, b, threshold)
                            })
                        },
                    );
                    return;
                }
            }
            // Without x86-64 the SIMD kernels do not exist (and `Kernel::best` never picks one).
            #[allow(unreachable_patterns)]
            _ => {}
        }
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

    /// [`block_pair`](Self::block_pair) on AVX512-VNNI, as an integer matrix product: tiles of
    /// [`TILE_ROWS`] unsigned rows by two [`PANEL`]s of signed rows, one accumulator per row and panel
    /// holding 16 pairs, so a tile's 256 sums need no horizontal reduction; the screen is one masked
    /// compare per accumulator.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
    fn block_pair_vnni(&self, i: usize, j: usize, threshold: i32, out: &mut Vec<(u32, u32)>) {
        use std::arch::x86_64::{
            __m512i, _mm512_add_epi32, _mm512_cmpge_epi32_mask, _mm512_set1_epi32,
        };
        let (a0, a1) = (i * BLOCK, ((i + 1) * BLOCK).min(self.rows));
        let (b0, b1) = (j * BLOCK, ((j + 1) * BLOCK).min(self.rows));
        let limit = _mm512_set1_epi32(threshold);
        for a in (a0..a1).step_by(TILE_ROWS) {
            // On the diagonal block, the tiles wholly below the diagonal are skipped.
            let start = if i == j {
                a / (2 * PANEL) * (2 * PANEL)
            } else {
                b0
            };
            for b in (start..b1).step_by(2 * PANEL) {
                let acc = self.tile_vnni(a, b);
                for (r, pair) in acc.chunks_exact(2).enumerate() {
                    let u = a + r;
                    let row = _mm512_set1_epi32(self.l1[u]);
                    for (h, &sum) in pair.iter().enumerate() {
                        let v0 = b + h * PANEL;
                        let Some(cols) = self
                            .l1_less_offset
                            .get(v0..v0 + PANEL)
                            .and_then(|c| <[i32; PANEL]>::try_from(c).ok())
                        else {
                            continue;
                        };
                        let cols: __m512i = pulp::cast(cols);
                        let value = _mm512_add_epi32(
                            _mm512_add_epi32(sum, sum),
                            _mm512_add_epi32(row, cols),
                        );
                        let mut m = u32::from(_mm512_cmpge_epi32_mask(value, limit));
                        while m != 0 {
                            let k = m.trailing_zeros() as usize;
                            m &= m - 1;
                            let v = v0 + k;
                            if u <= v && v < self.n {
                                push_both(out, u, v);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The raw byte products of rows `a..a+TILE_ROWS` (unsigned) by `b..b+2·PANEL` (signed):
    /// accumulator `2r + h` holds the pairs `(a+r, b+h·PANEL+l)` in lane `l`. Per four values: the two
    /// panels' 64 bytes loaded once, each row's four bytes broadcast, sixteen `vpdpbusd` (64 byte
    /// products each, added four at a time into i32 lanes: no intermediate sums to saturate).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
    #[inline]
    fn tile_vnni(&self, a: usize, b: usize) -> [std::arch::x86_64::__m512i; 2 * TILE_ROWS] {
        use std::arch::x86_64::{
            __m512i, _mm512_dpbusd_epi32, _mm512_set1_epi32, _mm512_setzero_si512,
        };
        let groups = self.padded / 4;
        let panel = |q: usize| &self.panels[q * groups..(q + 1) * groups];
        let (p0, p1) = (panel(b / PANEL), panel(b / PANEL + 1));
        let row = |u: usize| {
            pulp::as_arrays::<4, u8>(&self.unsigned[u * self.padded..(u + 1) * self.padded]).0
        };
        let (r0, r1, r2, r3) = (row(a), row(a + 1), row(a + 2), row(a + 3));
        let (r4, r5, r6, r7) = (row(a + 4), row(a + 5), row(a + 6), row(a + 7));
        let mut acc = [_mm512_setzero_si512(); 2 * TILE_ROWS];
        // One zipped pass (a single length check) over both panels and the eight rows.
        for (((((((((y0, y1), x0), x1), x2), x3), x4), x5), x6), x7) in p0
            .iter()
            .zip(p1)
            .zip(r0)
            .zip(r1)
            .zip(r2)
            .zip(r3)
            .zip(r4)
            .zip(r5)
            .zip(r6)
            .zip(r7)
        {
            let (y0, y1): (__m512i, __m512i) = (pulp::cast(*y0), pulp::cast(*y1));
            for (r, &four) in [x0, x1, x2, x3, x4, x5, x6, x7].into_iter().enumerate() {
                let x = _mm512_set1_epi32(i32::from_le_bytes(four));
                acc[2 * r] = _mm512_dpbusd_epi32(acc[2 * r], x, y0);
                acc[2 * r + 1] = _mm512_dpbusd_epi32(acc[2 * r + 1], x, y1);
            }
        }
        acc
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

/// The signed rows (`padded` bytes each, a whole number of [`PANEL`]s) in the VNNI kernel's panels:
/// per panel of 16 rows and group of four values, 64 bytes (the group's four bytes of each row in turn).
fn panels_of(signed: &[i8], padded: usize) -> Vec<[i8; 64]> {
    let groups = padded / 4;
    let mut panels = vec![[0i8; 64]; signed.len() / padded / PANEL * groups];
    panels
        .par_chunks_mut(groups)
        .zip(signed.par_chunks(PANEL * padded))
        .for_each(|(panel, rows)| {
            for (l, row) in rows.chunks_exact(padded).enumerate() {
                for (group, four) in panel.iter_mut().zip(row.chunks_exact(4)) {
                    group[4 * l..4 * l + 4].copy_from_slice(four);
                }
            }
        });
    panels
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

/// The integer kernels of the screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    /// AVX512-VNNI `vpdpbusd`, as a tiled matrix product ([`JoinCodes::block_pair_vnni`]).
    Vnni,
    /// AVX-512BW `vpmaddubsw` ([`JoinCodes::tile_raw_avx512`]).
    Avx512,
    /// AVX2 `vpmaddubsw` ([`JoinCodes::tile_raw_avx2`]).
    Avx2,
    /// Scalar sums: the tests' reference only (the screen declines CPUs without AVX2, whose f32 scan is
    /// faster than this).
    #[cfg_attr(not(test), allow(dead_code))]
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU runs, or `None` without AVX2.
    fn best() -> Option<Self> {
        [Self::Vnni, Self::Avx512, Self::Avx2]
            .into_iter()
            .find(|k| k.available())
    }

    /// Whether this CPU has every feature the kernel is compiled for.
    fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Self::Vnni => {
                    pulp::x86::V4::try_new().is_some()
                        && std::arch::is_x86_feature_detected!("avx512vnni")
                }
                Self::Avx512 => pulp::x86::V4::try_new().is_some(),
                Self::Avx2 => pulp::x86::V3::try_new().is_some(),
                Self::Portable => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Self::Portable
        }
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
                let n = 40;
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
                #[cfg(target_arch = "x86_64")]
                for (a, b) in [(0, 0), (8, 0), (32, 32), (0, 32)] {
                    let Some(sums) = codes.tile_vnni_sums(a, b) else {
                        break;
                    };
                    for (r, row) in sums.iter().enumerate() {
                        for (v, &got) in row.iter().enumerate() {
                            let (u, v) = (a + r, b + v);
                            let want = codes.tile_raw(u / 4 * 4, v / 2 * 2)[(u % 4) * 2 + v % 2];
                            assert_eq!(got, want, "dim {dim}, extreme {extreme}, {u} {v}");
                        }
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
            // Every kernel this CPU has keeps the same pairs as the best one.
            let mut best = cands.clone();
            best.sort_unstable();
            for kernel in [Kernel::Vnni, Kernel::Avx512, Kernel::Avx2, Kernel::Portable] {
                let Some(other) =
                    JoinCodes::new(&rows, &rows, dim).and_then(|c| c.with_kernel(kernel))
                else {
                    continue;
                };
                let mut got = other.candidates(min);
                got.sort_unstable();
                assert!(
                    got == best,
                    "{kernel:?} at {min}: {} vs {} pairs",
                    got.len(),
                    best.len()
                );
            }
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
