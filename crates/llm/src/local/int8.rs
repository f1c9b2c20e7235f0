//! The encoder's linear layers in 8-bit integers (`precision = "int8"`) on AVX512-VNNI.
//!
//! Weights are quantised once at load, per output channel and symmetric: `W[o][i] ≈ s_o · q[o][i]` with
//! `s_o = max_i |W[o][i]| / 127` and `q` in −127..=127. Inputs are quantised per row (token) on every
//! product, over the row's own range: `x[r][i] ≈ l_r + t_r · u[r][i]`, `l_r` its lowest value,
//! `t_r = (max − min) / 255`, `u` in 0..=255 — all 256 steps used also where the values are one-sided
//! (GELU's outputs, the down projection's inputs, hardly go below −0.17). A row whose values span a
//! wide range costs only that row precision — not the whole batch, as a per-tensor scale would (ONNX
//! Runtime's dynamic quantisation takes one scale and zero point per tensor).
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, four pairs per 32-bit lane, sixty-four per
//! instruction (four times an f32 FMA's sixteen). The sums `Σᵢ u·q` are exact integers (at most
//! 255 · 127 · k, below 2³¹ for k up to 66,000), so a row's outputs do not depend on its batch, its
//! tile or the thread; each output is then `s_o · (t_r · Σᵢ u·q + l_r · Σᵢ q[o][i]) + b_o` in f32, the
//! weights' sums precomputed per output.
//!
//! The tiles are the f32 kernel's ([`super::gemm`]): 6 rows × 4 panels of 16 outputs, 24 integer
//! accumulators, one broadcast of four input bytes per row and one `vpdpbusd` per accumulator for
//! every four inputs.

use std::arch::x86_64::__m512i;

use ndarray::ArrayView2;

use super::gemm::{by_shape, store_one, tiles, Tile, LANES, PANELS, ROWS};

/// Whether this CPU runs the kernel (AVX-512F, AVX512-BW and AVX512-VNNI).
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// `W` quantised per output, as panels of [`LANES`] outputs: vector `p·⌈k/4⌉ + j` holds, for each of
/// the panel's outputs `o`, the four bytes `q[o][4j..4j+4]` (zero past `n` and `k`).
pub(crate) struct PackedI8 {
    pub(crate) n: usize,
    pub(crate) k: usize,
    panels: Vec<__m512i>,
    /// Per output: `s_o` (zero past `n`).
    scale: Vec<pulp::f32x16>,
    /// Per output: `Σᵢ q[o][i]`, by which the inputs' lowest value multiplies.
    sums: Vec<pulp::f32x16>,
    bias: Vec<pulp::f32x16>,
    /// Per input, `1 / m_i` of the smoothing (see [`Self::new`]); empty without it.
    unsmooth: Vec<f32>,
}

/// Smoothing factors `m_i = √(a_i / max_o |W[o][i]|)` for inputs whose typical size is about `a_i`
/// (clamped to 1/64..=64; 1 where either side is zero or not finite).
fn smoothing(w: ArrayView2<'_, f32>, act: &[f32]) -> Vec<f32> {
    (0..w.ncols())
        .map(|i| {
            let wmax = w.column(i).iter().fold(0f32, |m, v| m.max(v.abs()));
            let a = act.get(i).copied().unwrap_or(0.0).abs();
            let m = (a / wmax).sqrt();
            if m.is_finite() && m > 0.0 {
                m.clamp(1.0 / 64.0, 64.0)
            } else {
                1.0
            }
        })
        .collect()
}

/// The lowest and highest value of `row` (AVX-512, sixteen at a time).
#[inline]
#[target_feature(enable = "avx,avx2,fma,avx512f,avx512bw,avx512vnni")]
fn range(row: &[f32]) -> (f32, f32) {
    use std::arch::x86_64::{
        _mm512_max_ps, _mm512_min_ps, _mm512_reduce_max_ps, _mm512_reduce_min_ps, _mm512_set1_ps,
    };
    let (whole, rest) = row.as_chunks::<16>();
    let (mut lo, mut hi) = (
        _mm512_set1_ps(f32::INFINITY),
        _mm512_set1_ps(f32::NEG_INFINITY),
    );
    for c in whole {
        let v = pulp::cast(*c);
        lo = _mm512_min_ps(lo, v);
        hi = _mm512_max_ps(hi, v);
    }
    rest.iter().fold(
        (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi)),
        |(lo, hi), &v| (lo.min(v), hi.max(v)),
    )
}

/// Writes `round((row − lo) · inv)` (0..=255) as bytes into lane `i` of `out`, four inputs per entry;
/// the last entry's missing inputs are 0 (they meet zero weights).
#[inline]
#[target_feature(enable = "avx,avx2,fma,avx512f,avx512bw,avx512vnni")]
fn quantize(row: &[f32], lo: f32, inv: f32, out: &mut [[u32; ROWS]], i: usize) {
    use std::arch::x86_64::{
        _mm512_cvtps_epu32, _mm512_cvtusepi32_epi8, _mm512_max_ps, _mm512_min_ps, _mm512_mul_ps,
        _mm512_roundscale_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_sub_ps, _MM_FROUND_NO_EXC,
        _MM_FROUND_TO_NEAREST_INT,
    };
    let (whole, rest) = row.as_chunks::<16>();
    let (vlo, vinv, top) = (
        _mm512_set1_ps(lo),
        _mm512_set1_ps(inv),
        _mm512_set1_ps(255.0),
    );
    for (c, o) in whole.iter().zip(out.chunks_exact_mut(4)) {
        let v = _mm512_mul_ps(_mm512_sub_ps(pulp::cast(*c), vlo), vinv);
        let v = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
        let v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), top);
        let bytes: [u32; 4] = pulp::cast(_mm512_cvtusepi32_epi8(_mm512_cvtps_epu32(v)));
        for (o, b) in o.iter_mut().zip(bytes) {
            o[i] = b;
        }
    }
    if !rest.is_empty() {
        let byte = |v: f32| -> u32 { ((v - lo) * inv).round_ties_even().clamp(0.0, 255.0) as u32 };
        let start = whole.len() * 4;
        for (j, o) in out[start..].iter_mut().enumerate() {
            let b = |e: usize| rest.get(4 * j + e).map_or(0, |&v| byte(v));
            o[i] = b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24;
        }
    }
}

impl PackedI8 {
    /// Quantises and packs `w` (`n × k`) and `b`; `None` where this CPU does not run the kernel.
    ///
    /// With `act` (per input, about how large that input gets — for an input that is a layer norm's
    /// output, `|γ_i| + |β_i|`), the product is smoothed as SmoothQuant does: input `i` is divided by
    /// `m_i` and column `i` of `W` multiplied by it, `m_i` the geometric mean of the two ranges' ratio,
    /// so that a few large input channels no longer take most of a row's 8-bit range (the product is
    /// the same; only what is rounded moves).
    pub(crate) fn new(w: ArrayView2<'_, f32>, b: &[f32], act: Option<&[f32]>) -> Option<Self> {
        if !available() {
            return None;
        }
        let smooth = act.map(|a| smoothing(w, a));
        let mut scaled = w.to_owned();
        if let Some(m) = &smooth {
            for (mut col, &m) in scaled.columns_mut().into_iter().zip(m) {
                col.mapv_inplace(|v| v * m);
            }
        }
        let w = scaled.view();
        let (n, k) = w.dim();
        let quads = k.div_ceil(4);
        let count = n.div_ceil(LANES);
        let mut scales = vec![0f32; count * LANES];
        let mut sums = vec![0i32; count * LANES];
        let mut q = vec![0i8; count * LANES * quads * 4];
        for o in 0..n {
            let row = w.row(o);
            let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if amax > 0.0 && amax.is_finite() {
                amax / 127.0
            } else {
                1.0
            };
            scales[o] = s;
            for (i, v) in row.iter().enumerate() {
                let c = (v / s).round().clamp(-127.0, 127.0) as i8;
                q[o * quads * 4 + i] = c;
                sums[o] += i32::from(c);
            }
        }
        let mut panels = Vec::with_capacity(count * quads);
        for p in 0..count {
            for j in 0..quads {
                let bytes: [i8; 64] = std::array::from_fn(|e| {
                    let o = p * LANES + e / 4;
                    q[o * quads * 4 + 4 * j + e % 4]
                });
                panels.push(pulp::cast(bytes));
            }
        }
        let lanes_f = |v: &[f32], p: usize| -> pulp::f32x16 {
            pulp::cast::<[f32; LANES], _>(std::array::from_fn(|l| {
                v.get(p * LANES + l).copied().unwrap_or(0.0)
            }))
        };
        Some(Self {
            n,
            k,
            panels,
            scale: (0..count).map(|p| lanes_f(&scales, p)).collect(),
            sums: (0..count)
                .map(|p| {
                    pulp::cast::<[f32; LANES], _>(std::array::from_fn(|l| {
                        sums[p * LANES + l] as f32
                    }))
                })
                .collect(),
            bias: (0..count).map(|p| lanes_f(b, p)).collect(),
            unsmooth: smooth.map_or_else(Vec::new, |m| m.iter().map(|m| 1.0 / m).collect()),
        })
    }

    /// The product on contiguous row-major `x` (`rows × k`) into `y` (`rows × n`).
    pub(crate) fn apply(&self, x: &[f32], rows: usize, y: &mut [f32]) {
        // SAFETY: a `PackedI8` is built only where `available()` found AVX-512F, AVX512-BW and
        // AVX512-VNNI on this CPU: every feature `apply_vnni` is compiled for.
        #[allow(unsafe_code)]
        unsafe {
            self.apply_vnni(x, rows, y)
        }
    }

    /// Quantises the rows of `x`, then runs the tiles. Callers must have found AVX-512F, AVX512-BW and
    /// AVX512-VNNI on this CPU.
    ///
    /// The quantised rows are stored by groups of [`ROWS`] rows, input quad by input quad: entry
    /// `[g·q + j][i]` holds the four bytes `u[6g + i][4j..4j+4]` (a tile's rows always start a group),
    /// so a tile reads one contiguous run and its broadcasts need no bounds checks.
    #[target_feature(enable = "avx,avx2,fma,avx512f,avx512bw,avx512vnni")]
    fn apply_vnni(&self, x: &[f32], rows: usize, y: &mut [f32]) {
        let (k, quads) = (self.k, self.k.div_ceil(4));
        let groups = rows.div_ceil(ROWS);
        let mut xs = vec![[0u32; ROWS]; groups * quads];
        let mut row_scale = vec![0f32; groups * ROWS];
        let mut row_min = vec![0f32; groups * ROWS];
        let mut smoothed = vec![0f32; if self.unsmooth.is_empty() { 0 } else { k }];
        for r in 0..rows {
            let mut row = &x[r * k..(r + 1) * k];
            if !self.unsmooth.is_empty() {
                for ((o, v), m) in smoothed.iter_mut().zip(row).zip(&self.unsmooth) {
                    *o = v * m;
                }
                row = &smoothed;
            }
            let (lo, hi) = range(row);
            let (t, lo) = if hi > lo && (hi - lo).is_finite() {
                ((hi - lo) / 255.0, lo)
            } else if lo.is_finite() {
                (1.0, lo)
            } else {
                (1.0, 0.0)
            };
            row_scale[r] = t;
            row_min[r] = lo;
            let (g, i) = (r / ROWS, r % ROWS);
            quantize(row, lo, 1.0 / t, &mut xs[g * quads..(g + 1) * quads], i);
        }
        for t in tiles(rows, self.bias.len(), quads) {
            let g = &xs[t.r / ROWS * quads..(t.r / ROWS + 1) * quads];
            let rows = t.r..t.r + t.rows;
            by_shape!(
                t,
                self.tile(g, &row_scale[rows.clone()], &row_min[rows], t, y)
            );
        }
    }

    /// Rows `t.r..t.r + R` (the quantised group `xs`, `scales` and `mins` their steps and lowest
    /// values) against panels `t.p0..t.p0 + P` (callers: as for [`Self::apply_vnni`]).
    #[inline]
    #[target_feature(enable = "avx,avx2,fma,avx512f,avx512bw,avx512vnni")]
    fn tile<const R: usize, const P: usize>(
        &self,
        xs: &[[u32; ROWS]],
        scales: &[f32],
        mins: &[f32],
        t: Tile,
        y: &mut [f32],
    ) {
        use std::arch::x86_64::{
            _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps, _mm512_mul_ps,
            _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_si512,
        };
        let quads = xs.len();
        let ws: [&[__m512i]; P] =
            std::array::from_fn(|p| &self.panels[(t.p0 + p) * quads..(t.p0 + p + 1) * quads]);
        let mut acc: [[__m512i; P]; R] = [[_mm512_setzero_si512(); P]; R];
        for (j, x) in xs.iter().enumerate() {
            // SAFETY: `j < quads`, the length of every `ws[p]` (sliced so above). Unchecked: with a
            // bounds check per panel in the loop the compiler kept ten of the accumulators in memory
            // as well (a store each per step) and the kernel ran at 45 % of `vpdpbusd`'s rate.
            #[allow(unsafe_code)]
            let w: [__m512i; P] = std::array::from_fn(|p| unsafe { *ws[p].get_unchecked(j) });
            for (row, &xv) in acc.iter_mut().zip(x) {
                let a = _mm512_set1_epi32(xv as i32);
                for (c, w) in row.iter_mut().zip(&w) {
                    *c = _mm512_dpbusd_epi32(*c, a, *w);
                }
            }
        }
        // Iterators rather than indices, so that the accumulators stay in registers; each panel
        // stored as it is scaled (an array of them set to zero first was a call to memset per tile).
        for (r, ((a, &s), &m)) in acc.iter().zip(scales).zip(mins).enumerate() {
            let (ts, lo) = (_mm512_set1_ps(s), _mm512_set1_ps(m));
            let panels = self.sums[t.p0..]
                .iter()
                .zip(&self.scale[t.p0..])
                .zip(&self.bias[t.p0..]);
            for (p, (a, ((&sum, &scale), &bias))) in a.iter().zip(panels).enumerate() {
                // s_o · (t · Σ u·q + lo · Σ q) + b_o
                let inner = _mm512_fmadd_ps(
                    ts,
                    _mm512_cvtepi32_ps(*a),
                    _mm512_mul_ps(lo, pulp::cast(sum)),
                );
                let v = _mm512_fmadd_ps(inner, pulp::cast(scale), pulp::cast(bias));
                store_one(&pulp::cast(v), self.n, t.r + r, t.p0 + p, y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::gemm::tests::matrix;
    use ndarray::Array2;

    /// The kernel against what it computes, in f64: every output `s_o · t_r · Σ q·u + b` from the same
    /// quantised values, over the shape classes of the f32 kernel's test; and against the f32 product
    /// within the quantisation's error.
    #[test]
    fn matches_its_quantised_sum_and_the_f32_product_within_the_rounding() {
        if !available() {
            return;
        }
        for (seed, &(rows, n, k)) in [
            (1, 16, 1),
            (3, 20, 3),
            (7, 64, 5),
            (13, 83, 37),
            (20, 80, 384),
            (700, 48, 384),
        ]
        .iter()
        .enumerate()
        {
            let seed = 3 * seed as u64;
            let w = matrix(n, k, seed);
            let x = matrix(rows, k, seed + 1) * 4.0;
            let b = matrix(1, n, seed + 2).into_raw_vec_and_offset().0;
            let p = PackedI8::new(w.view(), &b, None).unwrap();
            let mut y = vec![0f32; rows * n];
            p.apply(x.as_slice().unwrap(), rows, &mut y);
            let quant = |v: &[f32]| -> (f64, Vec<f64>) {
                let amax = v.iter().fold(0f32, |m, x| m.max(x.abs()));
                let s = if amax > 0.0 { amax / 127.0 } else { 1.0 };
                let q = v
                    .iter()
                    .map(|x| f64::from((x / s).round().clamp(-127.0, 127.0)))
                    .collect();
                (f64::from(s), q)
            };
            // The inputs over their range: (step, lowest value, steps above it).
            let quant_in = |v: &[f32]| -> (f64, f64, Vec<f64>) {
                let lo = v.iter().fold(f32::INFINITY, |m, &x| m.min(x));
                let hi = v.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                let t = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
                let u = v
                    .iter()
                    .map(|x| f64::from(((x - lo) * (1.0 / t)).round_ties_even().clamp(0.0, 255.0)))
                    .collect();
                (f64::from(t), f64::from(lo), u)
            };
            for r in 0..rows {
                let (t, lo, u) = quant_in(x.row(r).as_slice().unwrap());
                for o in 0..n {
                    let (s, q) = quant(w.row(o).as_slice().unwrap());
                    let sum: f64 = u.iter().zip(&q).map(|(a, b)| a * b).sum();
                    let qsum: f64 = q.iter().sum();
                    let want = s * (t * sum + lo * qsum) + f64::from(b[o]);
                    let got = f64::from(y[r * n + o]);
                    let size = s * (t * sum.abs() + lo.abs() * qsum.abs()) + f64::from(b[o]).abs();
                    assert!(
                        (got - want).abs() <= 1e-5 * (1.0 + size),
                        "{rows}x{n}x{k} ({r},{o}): {got} vs {want}"
                    );
                    let exact: f64 = (0..k)
                        .map(|i| f64::from(x[[r, i]]) * f64::from(w[[o, i]]))
                        .sum::<f64>()
                        + f64::from(b[o]);
                    // Each product off by at most half a step of either side.
                    let xmax = x.row(r).iter().fold(0f32, |m, v| m.max(v.abs()));
                    let bound = (k as f64)
                        * (0.5 * s * f64::from(xmax) + 0.5 * t * 127.0 * s + 0.25 * s * t);
                    assert!((got - exact).abs() <= bound, "{got} vs {exact}");
                }
            }
        }
    }

    #[test]
    fn a_row_does_not_depend_on_its_batch() {
        if !available() {
            return;
        }
        let (n, k) = (100, 70);
        let w = Array2::from_shape_fn((n, k), |(o, i)| ((o * 31 + i * 17) % 23) as f32 - 11.0);
        let x = Array2::from_shape_fn((9, k), |(r, i)| ((r * 7 + i * 3) % 19) as f32 * 0.1 - 0.9);
        let p = PackedI8::new(w.view(), &vec![0.5; n], None).unwrap();
        let mut all = vec![0f32; 9 * n];
        p.apply(x.as_slice().unwrap(), 9, &mut all);
        for r in 0..9 {
            let mut one = vec![0f32; n];
            p.apply(x.row(r).as_slice().unwrap(), 1, &mut one);
            assert_eq!(one, all[r * n..(r + 1) * n]);
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::local::gemm::{Kernel, Linear};
    use ndarray::Array2;

    /// Multiply-adds per second of the f32 and int8 kernels on the encoder's shapes (one thread,
    /// release): `cargo test --release -p kgrag-llm --lib -- --ignored --nocapture kernel_rates`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn kernel_rates() {
        if !available() {
            return;
        }
        for (rows, n, k) in [
            (512, 1152, 384),
            (512, 384, 384),
            (512, 1536, 384),
            (512, 384, 1536),
            (30, 1152, 384),
        ] {
            let w = Array2::from_shape_fn((n, k), |(o, i)| {
                ((o * 7 + i * 13) % 17) as f32 * 0.01 - 0.08
            });
            let x = Array2::from_shape_fn((rows, k), |(r, i)| {
                ((r * 3 + i * 5) % 11) as f32 * 0.1 - 0.5
            });
            for kernel in [Kernel::best(false), Kernel::Int8] {
                let l = Linear::new(w.clone(), vec![0.0; n], kernel);
                let mut y = Array2::<f32>::zeros((rows, n));
                let reps = 20;
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    l.apply(x.view(), y.view_mut());
                }
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "{rows}x{n}x{k} {kernel:?}: {:.1} G multiply-adds/s",
                    (rows * n * k * reps) as f64 / secs / 1e9
                );
            }
        }
    }
}
