//! The encoder's linear layers, `y = x · Wᵀ + b`, against weights packed once at load time.
//!
//! A general matrix product packs both operands on every call; the encoder's weights never change, and at
//! its sizes (a few hundred rows per thread against 384 × 1,536 weights) packing the weights was a fifth
//! of the encoder's time. Here each weight matrix is stored at load as panels of 16 output columns, one
//! 16-lane vector per input index, and the product runs on AVX-512 (pulp's safe run-time dispatch): tiles
//! of 6 rows × 64 columns, 24 accumulators started at the bias, one broadcast of `x` per row and one
//! fused multiply-add per accumulator for every input index, summed in input order. Rows are taken in
//! blocks whose `x` stays in L2 while every panel passes over them.
//!
//! With `precision = "bf16"` and AVX512-BF16, the weights are packed as bfloat16 pairs and each row of `x`
//! is rounded to bfloat16 pairs once per product; `vdpbf16ps` adds two products per lane in f32, twice
//! the multiply-adds of an f32 FMA per instruction (the same tiles).
//!
//! With `precision = "auto"` (the default) or `"bf16x3"` on a CPU with AMX, the product runs on AMX
//! tiles with each operand split into two bfloat16 parts ([`super::amx`]): f32's sums to about 1e-5.
//!
//! Every output is `b + Σₖ x·w` in `k` order whatever its tile or the thread, so a vector does not depend
//! on its batch. Without AVX-512 the weights stay as they are and the product is matrixmultiply's (then
//! the bias is added after the sum). On a Zen 5 machine (one thread, 1,000 × 384 by 384 × 1,536):
//! matrixmultiply 73–80 GFLOP/s, the packed f32 kernel 99–104, bf16 161–175. On a Sapphire Rapids
//! machine (one thread, 256 × 384 by 384 × 1,536 and the encoder's other shapes): matrixmultiply 85–93,
//! packed f32 146–193, bf16 84–99 (`vdpbf16ps` issues on one port there, FMAs on two), AMX bf16x3
//! 394–481.

use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, ArrayViewMut2};

#[cfg(target_arch = "x86_64")]
/// Output columns per panel (one AVX-512 vector of f32).
pub(super) const LANES: usize = 16;
#[cfg(target_arch = "x86_64")]
/// Rows per tile.
pub(super) const ROWS: usize = 6;
#[cfg(target_arch = "x86_64")]
/// Panels per tile.
pub(super) const PANELS: usize = 4;
#[cfg(target_arch = "x86_64")]
/// Floats of `x` per block of rows (256 KiB), so a block stays in L2 while every panel passes over it.
const BLOCK_FLOATS: usize = 1 << 16;

/// A weight matrix `W` (`n` outputs × `k` inputs) with its bias, stored for [`Linear::apply`].
pub(crate) enum Linear {
    /// Packed for the AVX-512 kernel.
    #[cfg(target_arch = "x86_64")]
    Packed(Packed),
    /// Packed in bfloat16 pairs for AVX512-BF16.
    #[cfg(target_arch = "x86_64")]
    Bf16(PackedBf16),
    /// Split into two bfloat16 parts in AMX tiles.
    #[cfg(target_arch = "x86_64")]
    Amx(super::amx::PackedAmx),
    /// Quantised to 8-bit integers per output for AVX512-VNNI.
    #[cfg(target_arch = "x86_64")]
    Int8(super::int8::PackedI8),
    /// As loaded, for matrixmultiply.
    Plain {
        /// The weights, `n × k`.
        w: Array2<f32>,
        /// The bias, `n`.
        b: Vec<f32>,
    },
}

/// How the encoder's products are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// matrixmultiply on the weights as loaded.
    Plain,
    /// f32 on AVX-512 against packed weights.
    Avx512,
    /// Weights and inputs rounded to bfloat16, products summed in f32 (AVX512-BF16).
    Bf16,
    /// Weights and inputs split into two bfloat16 parts, three tile products per product (AMX).
    Amx,
    /// Weights per output and inputs per row quantised to 8-bit integers (AVX512-VNNI).
    Int8,
}

impl Kernel {
    /// The fastest f32 kernel this CPU runs, or (`bf16`) the bfloat16 one where the CPU has it.
    pub(crate) fn best(bf16: bool) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if pulp::x86::V4::try_new().is_some() {
                if bf16 && std::arch::is_x86_feature_detected!("avx512bf16") {
                    return Self::Bf16;
                }
                return Self::Avx512;
            }
        }
        let _ = bf16;
        Self::Plain
    }

    /// The kernel of `[embedder] precision`: AMX tiles for `auto` and `bf16x3` where this CPU and OS
    /// run them, else the fastest f32 kernel; bfloat16 for `bf16` where the CPU has it.
    pub(crate) fn for_precision(precision: crate::config::EncoderPrecision) -> Self {
        use crate::config::EncoderPrecision;
        match precision {
            #[cfg(target_arch = "x86_64")]
            EncoderPrecision::Auto | EncoderPrecision::Bf16x3 if super::amx::available() => {
                Self::Amx
            }
            EncoderPrecision::Bf16 => Self::best(true),
            #[cfg(target_arch = "x86_64")]
            EncoderPrecision::Int8 if super::int8::available() => Self::Int8,
            _ => Self::best(false),
        }
    }
}

/// `W` as panels of [`LANES`] outputs: vector `p·k + i` holds `W[p·16 + lane][i]` (zero past `n`).
#[cfg(target_arch = "x86_64")]
pub(crate) struct Packed {
    n: usize,
    k: usize,
    panels: Vec<pulp::f32x16>,
    bias: Vec<pulp::f32x16>,
}

impl Linear {
    /// Stores `w` (`n × k`) and `b` (`n`) for `kernel` (from [`Kernel::for_precision`]); a kernel this
    /// CPU cannot run falls back to the next one it can (bf16 or AMX → packed f32 → matrixmultiply).
    pub(crate) fn new(w: Array2<f32>, b: Vec<f32>, kernel: Kernel) -> Self {
        Self::for_inputs(w, b, kernel, None)
    }

    /// [`Self::new`], telling the int8 kernel how large each input typically gets (`act`, see
    /// [`super::int8::PackedI8::new`]); the other kernels do not use it.
    pub(crate) fn for_inputs(
        w: Array2<f32>,
        b: Vec<f32>,
        kernel: Kernel,
        act: Option<&[f32]>,
    ) -> Self {
        let _ = act;
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Bf16 if Kernel::best(true) == Kernel::Bf16 => {
                // SAFETY: `Kernel::best` found AVX-512F and AVX512-BF16 on this CPU: every feature
                // `PackedBf16::new` is compiled for.
                #[allow(unsafe_code)]
                Self::Bf16(unsafe { PackedBf16::new(w.view(), &b) })
            }
            // `PackedAmx::new` declines where AMX does not run or the shape does not fit its tiles.
            #[cfg(target_arch = "x86_64")]
            Kernel::Amx => match super::amx::PackedAmx::new(w.view(), &b) {
                Some(p) => Self::Amx(p),
                None => Self::new(w, b, Kernel::best(false)),
            },
            // `PackedI8::new` declines where the CPU has no AVX512-VNNI.
            #[cfg(target_arch = "x86_64")]
            Kernel::Int8 => match super::int8::PackedI8::new(w.view(), &b, act) {
                Some(p) => Self::Int8(p),
                None => Self::new(w, b, Kernel::best(false)),
            },
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 | Kernel::Bf16 if pulp::x86::V4::try_new().is_some() => {
                Self::Packed(Packed::new(w.view(), &b))
            }
            _ => Self::Plain { w, b },
        }
    }

    /// Number of outputs.
    pub(crate) fn outputs(&self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Packed(p) => p.n,
            #[cfg(target_arch = "x86_64")]
            Self::Bf16(p) => p.n,
            #[cfg(target_arch = "x86_64")]
            Self::Amx(p) => p.n,
            #[cfg(target_arch = "x86_64")]
            Self::Int8(p) => p.n,
            Self::Plain { w, .. } => w.nrows(),
        }
    }

    /// `y = x · Wᵀ + b`; `x` is `rows × k`, `y` is `rows × n` (any layout; the encoder's buffers are
    /// contiguous, others are copied).
    ///
    /// # Panics
    /// When the shapes disagree (a caller's bug, as with matrixmultiply).
    pub(crate) fn apply(&self, x: ArrayView2<'_, f32>, mut y: ArrayViewMut2<'_, f32>) {
        let (rows, k) = x.dim();
        assert_eq!(y.nrows(), rows, "rows of x and y");
        assert_eq!(y.ncols(), self.outputs(), "outputs of W and columns of y");
        let packed = match self {
            Self::Plain { w, b } => {
                assert_eq!(w.ncols(), k, "inputs of W and columns of x");
                return plain(x, w, b, y);
            }
            #[cfg(target_arch = "x86_64")]
            other => other,
        };
        #[cfg(target_arch = "x86_64")]
        {
            let owned: Vec<f32>;
            let xs = match x.as_slice() {
                Some(s) => s,
                None => {
                    owned = x.iter().copied().collect();
                    &owned
                }
            };
            match y.as_slice_mut() {
                Some(ys) => packed.packed(xs, rows, k, ys),
                None => {
                    let mut out = Array2::<f32>::zeros(y.raw_dim());
                    if let Some(ys) = out.as_slice_mut() {
                        packed.packed(xs, rows, k, ys);
                    }
                    y.assign(&out);
                }
            }
        }
    }

    /// The packed kernels on contiguous row-major `x` (`rows × k`) and `y`.
    #[cfg(target_arch = "x86_64")]
    fn packed(&self, x: &[f32], rows: usize, k: usize, y: &mut [f32]) {
        match self {
            Self::Packed(p) => {
                assert_eq!(p.k, k, "inputs of W and columns of x");
                if let Some(simd) = pulp::x86::V4::try_new() {
                    // SAFETY: `simd` exists only where pulp found AVX-512F (with AVX, AVX2 and FMA) on
                    // this CPU: every feature `apply_avx512` is compiled for.
                    #[allow(unsafe_code)]
                    unsafe {
                        p.apply_avx512(simd, x, rows, y)
                    };
                }
            }
            Self::Bf16(p) => {
                assert_eq!(p.k, k, "inputs of W and columns of x");
                // SAFETY: a `PackedBf16` is built only where `Kernel::best` found AVX-512F and
                // AVX512-BF16 on this CPU: every feature `apply` is compiled for.
                #[allow(unsafe_code)]
                unsafe {
                    p.apply(x, rows, y)
                };
            }
            Self::Amx(p) => {
                assert_eq!(p.k, k, "inputs of W and columns of x");
                p.apply(x, rows, y);
            }
            Self::Int8(p) => {
                assert_eq!(p.k, k, "inputs of W and columns of x");
                p.apply(x, rows, y);
            }
            Self::Plain { .. } => {}
        }
    }
}

fn plain(x: ArrayView2<'_, f32>, w: &Array2<f32>, b: &[f32], mut y: ArrayViewMut2<'_, f32>) {
    general_mat_mul(1.0, &x, &w.t(), 0.0, &mut y);
    for mut row in y.rows_mut() {
        for (o, bias) in row.iter_mut().zip(b) {
            *o += bias;
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Packed {
    fn new(w: ArrayView2<'_, f32>, b: &[f32]) -> Self {
        let (n, k) = w.dim();
        let count = n.div_ceil(LANES);
        let mut panels = Vec::with_capacity(count * k);
        for p in 0..count {
            for i in 0..k {
                let lanes: [f32; LANES] = std::array::from_fn(|l| {
                    let o = p * LANES + l;
                    if o < n {
                        w[[o, i]]
                    } else {
                        0.0
                    }
                });
                panels.push(pulp::cast(lanes));
            }
        }
        Self {
            n,
            k,
            panels,
            bias: bias_panels(b, count),
        }
    }

    /// The product on contiguous row-major `x` (`rows × k`) into `y` (`rows × n`), compiled for
    /// AVX-512 (pulp's closures were not inlined into its dispatch at this size, leaving the vector
    /// operations outside the features they need). Callers must have found AVX, AVX2, FMA and AVX-512F
    /// on this CPU (`simd` is that proof).
    #[target_feature(enable = "avx,avx2,fma,avx512f")]
    fn apply_avx512(&self, simd: pulp::x86::V4, x: &[f32], rows: usize, y: &mut [f32]) {
        for t in tiles(rows, self.bias.len(), self.k) {
            by_shape!(t, self.tile(simd, x, t, y));
        }
    }

    /// Rows `t.r..t.r + R` of `x` against panels `t.p0..t.p0 + P`.
    #[inline(always)]
    fn tile<const R: usize, const P: usize>(
        &self,
        simd: pulp::x86::V4,
        x: &[f32],
        t: Tile,
        y: &mut [f32],
    ) {
        let k = self.k;
        let xs: [&[f32]; R] = std::array::from_fn(|i| &x[(t.r + i) * k..(t.r + i + 1) * k]);
        let ws: [&[pulp::f32x16]; P] =
            std::array::from_fn(|p| &self.panels[(t.p0 + p) * k..(t.p0 + p + 1) * k]);
        let mut acc: [[pulp::f32x16; P]; R] = [std::array::from_fn(|p| self.bias[t.p0 + p]); R];
        for i in 0..k {
            let w: [pulp::f32x16; P] = std::array::from_fn(|p| ws[p][i]);
            for (row, x) in acc.iter_mut().zip(&xs) {
                let a = simd.splat_f32x16(x[i]);
                for (c, w) in row.iter_mut().zip(&w) {
                    *c = simd.mul_add_f32x16(a, *w, *c);
                }
            }
        }
        store(&acc, self.n, t, y);
    }
}

/// `W` in bfloat16 for AVX512-BF16's `vdpbf16ps` (two products per f32 lane): vector `p·⌈k/2⌉ + j` holds,
/// for each of the panel's 16 outputs `o`, the pair `(W[o][2j], W[o][2j+1])` (zero past `n` and `k`;
/// rounded by `vcvtne2ps2bf16`, to nearest even, denormals to zero). The inputs are rounded to
/// bfloat16 pairs once per product (to nearest even, in software; `vdpbf16ps` takes denormals as zero
/// anyway) and broadcast; the sums stay in f32, started at the bias, pair by pair in input order.
#[cfg(target_arch = "x86_64")]
pub(crate) struct PackedBf16 {
    n: usize,
    k: usize,
    panels: Vec<std::arch::x86_64::__m512bh>,
    bias: Vec<pulp::f32x16>,
}

/// `x` rounded to bfloat16 (round to nearest, ties to even; a NaN stays a quiet NaN).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn bf16_bits(x: f32) -> u32 {
    let b = x.to_bits();
    if x.is_nan() {
        return (b >> 16) | 0x40;
    }
    (b.wrapping_add(0x7FFF + ((b >> 16) & 1))) >> 16
}

#[cfg(target_arch = "x86_64")]
impl PackedBf16 {
    /// Packs `w` and `b`. Callers must have found AVX-512F and AVX512-BF16 on this CPU
    /// ([`Kernel::best`]).
    #[target_feature(enable = "avx,avx2,fma,avx512f,avx512bf16")]
    fn new(w: ArrayView2<'_, f32>, b: &[f32]) -> Self {
        use std::arch::x86_64::_mm512_cvtne2ps_pbh;
        let (n, k) = w.dim();
        let pairs = k.div_ceil(2);
        let count = n.div_ceil(LANES);
        let at = |o: usize, i: usize| if o < n && i < k { w[[o, i]] } else { 0.0 };
        let mut panels = Vec::with_capacity(count * pairs);
        for p in 0..count {
            for j in 0..pairs {
                // Outputs 0–7 of the panel come from the low source, 8–15 from the high one, each as
                // its (2j, 2j+1) pair.
                let half = |h: usize| -> pulp::f32x16 {
                    pulp::cast::<[f32; LANES], _>(std::array::from_fn(|e| {
                        at(p * LANES + h * 8 + e / 2, 2 * j + e % 2)
                    }))
                };
                let lo: std::arch::x86_64::__m512 = pulp::cast(half(0));
                let hi: std::arch::x86_64::__m512 = pulp::cast(half(1));
                panels.push(_mm512_cvtne2ps_pbh(hi, lo));
            }
        }
        Self {
            n,
            k,
            panels,
            bias: bias_panels(b, count),
        }
    }

    /// The product on contiguous row-major `x` (`rows × k`) into `y` (`rows × n`). Callers must have
    /// found AVX-512F and AVX512-BF16 on this CPU (a `PackedBf16` exists only there).
    #[target_feature(enable = "avx,avx2,fma,avx512f,avx512bf16")]
    fn apply(&self, x: &[f32], rows: usize, y: &mut [f32]) {
        let (k, pairs) = (self.k, self.k.div_ceil(2));
        let mut xs = vec![0u32; rows * pairs];
        for r in 0..rows {
            let row = &x[r * k..(r + 1) * k];
            for (j, o) in xs[r * pairs..(r + 1) * pairs].iter_mut().enumerate() {
                let a = bf16_bits(row[2 * j]);
                let b = row.get(2 * j + 1).map_or(0, |&v| bf16_bits(v));
                *o = a | (b << 16);
            }
        }
        for t in tiles(rows, self.bias.len(), pairs) {
            by_shape!(t, self.tile(&xs, t, y));
        }
    }

    /// Rows `t.r..t.r + R` of the paired inputs `xs` against panels `t.p0..t.p0 + P` (callers: as for
    /// [`Self::apply`]).
    #[inline]
    #[target_feature(enable = "avx,avx2,fma,avx512f,avx512bf16")]
    fn tile<const R: usize, const P: usize>(&self, xs: &[u32], t: Tile, y: &mut [f32]) {
        use std::arch::x86_64::{__m512, __m512bh, _mm512_dpbf16_ps, _mm512_set1_epi32};
        let pairs = self.k.div_ceil(2);
        let rows: [&[u32]; R] =
            std::array::from_fn(|i| &xs[(t.r + i) * pairs..(t.r + i + 1) * pairs]);
        let ws: [&[__m512bh]; P] =
            std::array::from_fn(|p| &self.panels[(t.p0 + p) * pairs..(t.p0 + p + 1) * pairs]);
        let mut acc: [[__m512; P]; R] =
            [std::array::from_fn(|p| pulp::cast(self.bias[t.p0 + p])); R];
        for j in 0..pairs {
            let w: [__m512bh; P] = std::array::from_fn(|p| ws[p][j]);
            for (row, x) in acc.iter_mut().zip(&rows) {
                // SAFETY: `__m512i` and `__m512bh` are both 64 plain bytes; every bit pattern is valid.
                #[allow(unsafe_code)]
                let a: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi32(x[j] as i32)) };
                for (c, w) in row.iter_mut().zip(&w) {
                    *c = _mm512_dpbf16_ps(*c, a, *w);
                }
            }
        }
        store(&acc, self.n, t, y);
    }
}

/// One tile of a product: its first row and panel, and how many of each (at most [`ROWS`] and
/// [`PANELS`]).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Tile {
    pub(super) r: usize,
    pub(super) p0: usize,
    pub(super) rows: usize,
    pub(super) panels: usize,
}

/// The tiles of a product of `rows` rows against `count` panels, in the order both packed kernels take
/// them: blocks of rows whose inputs (`row_len` values each) fit [`BLOCK_FLOATS`], each block against
/// every panel (four at a time, then one), the rows of a block six at a time.
#[cfg(target_arch = "x86_64")]
pub(super) fn tiles(rows: usize, count: usize, row_len: usize) -> impl Iterator<Item = Tile> {
    let block = (BLOCK_FLOATS / row_len.max(1)).max(ROWS) / ROWS * ROWS;
    (0..rows).step_by(block).flat_map(move |r0| {
        let r1 = (r0 + block).min(rows);
        let whole = count / PANELS * PANELS;
        let starts = (0..whole).step_by(PANELS).chain(whole..count);
        starts.flat_map(move |p0| {
            let panels = if p0 < whole { PANELS } else { 1 };
            (r0..r1).step_by(ROWS).map(move |r| Tile {
                r,
                p0,
                rows: (r1 - r).min(ROWS),
                panels,
            })
        })
    })
}

/// Runs `$self.$tile::<R, P>(args)` with the tile's row and panel counts as constants.
#[cfg(target_arch = "x86_64")]
macro_rules! by_shape {
    ($t:expr, $s:ident . $tile:ident ( $($arg:expr),* )) => {
        match ($t.rows, $t.panels == PANELS) {
            (6, true) => $s.$tile::<6, PANELS>($($arg),*),
            (5, true) => $s.$tile::<5, PANELS>($($arg),*),
            (4, true) => $s.$tile::<4, PANELS>($($arg),*),
            (3, true) => $s.$tile::<3, PANELS>($($arg),*),
            (2, true) => $s.$tile::<2, PANELS>($($arg),*),
            (1, true) => $s.$tile::<1, PANELS>($($arg),*),
            (6, false) => $s.$tile::<6, 1>($($arg),*),
            (5, false) => $s.$tile::<5, 1>($($arg),*),
            (4, false) => $s.$tile::<4, 1>($($arg),*),
            (3, false) => $s.$tile::<3, 1>($($arg),*),
            (2, false) => $s.$tile::<2, 1>($($arg),*),
            _ => $s.$tile::<1, 1>($($arg),*),
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(super) use by_shape;

/// A tile's sums (16-lane f32 vectors: pulp's or `__m512`) into its rows of `y` (`n` columns; the lanes
/// past `n` of a last, partial panel dropped).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn store<V: pulp::bytemuck::Pod, const R: usize, const P: usize>(
    acc: &[[V; P]; R],
    n: usize,
    t: Tile,
    y: &mut [f32],
) {
    // The sums as plain arrays first: a copy whose address the stores take, so that the
    // accumulators' own array is never referenced and stays in registers through the tile's loop.
    let done: [[[f32; LANES]; P]; R] =
        std::array::from_fn(|i| std::array::from_fn(|p| pulp::cast(acc[i][p])));
    for (i, row) in done.iter().enumerate() {
        for (p, lanes) in row.iter().enumerate() {
            store_one(lanes, n, t.r + i, t.p0 + p, y);
        }
    }
}

/// Panel `panel` of row `row` of `y` (`n` columns) set to `lanes` (the lanes past `n` of a last,
/// partial panel dropped).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn store_one(lanes: &[f32; LANES], n: usize, row: usize, panel: usize, y: &mut [f32]) {
    let out = &mut y[row * n..(row + 1) * n];
    let c0 = panel * LANES;
    if let Some(whole) = out.get_mut(c0..c0 + LANES) {
        // A whole panel in one store, not a call to memmove (4 % of the encoder's time when every
        // panel was copied by its run length; a copy of fixed length was merged with the partial
        // one below into one call of either length).
        // SAFETY: `whole` holds 16 f32s, the size of the array written; the write is unaligned.
        #[allow(unsafe_code)]
        unsafe {
            std::ptr::write_unaligned(whole.as_mut_ptr().cast::<[f32; LANES]>(), *lanes)
        };
    } else {
        let len = LANES.min(n - c0);
        out[c0..c0 + len].copy_from_slice(&lanes[..len]);
    }
}

/// The bias as panels of [`LANES`] (zero past its end).
#[cfg(target_arch = "x86_64")]
fn bias_panels(b: &[f32], count: usize) -> Vec<pulp::f32x16> {
    (0..count)
        .map(|p| {
            let lanes: [f32; LANES] =
                std::array::from_fn(|l| b.get(p * LANES + l).copied().unwrap_or(0.0));
            pulp::cast(lanes)
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A `rows × cols` matrix of values in [-0.5, 0.5) from an LCG seeded with `seed`.
    pub(in crate::local) fn matrix(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
        let mut s = seed;
        Array2::from_shape_fn((rows, cols), |_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
    }

    /// `x` as the bf16 kernel sees it.
    fn round_bf16(x: f32) -> f32 {
        let b = x.to_bits();
        f32::from_bits(((b.wrapping_add(0x7FFF + ((b >> 16) & 1))) >> 16) << 16)
    }

    /// The kernels this CPU runs.
    fn kernels() -> Vec<Kernel> {
        let mut out = vec![Kernel::Plain];
        for k in [
            Kernel::best(false),
            Kernel::best(true),
            Kernel::for_precision(crate::config::EncoderPrecision::Bf16x3),
        ] {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    /// Every shape class (full tiles, leftover rows, leftover panels, a partial last panel, an odd
    /// input length, blocks of rows) on every kernel against an f64 sum of what the kernel multiplies
    /// (the bf16 kernel: both sides rounded to bfloat16).
    #[test]
    fn every_kernel_matches_an_exact_sum() {
        for &(rows, n, k) in &[
            (1, 16, 1),
            (3, 20, 0),
            (7, 64, 5),
            (13, 83, 37),
            (20, 80, 384),
            (400, 144, 1000),
            (5, 1536, 384),
            (33, 64, 96),
            (64, 96, 1536),
            (70, 1152, 384),
            (400, 64, 1536),
        ] {
            let x = matrix(rows, k, 1 + rows as u64);
            let w = matrix(n, k, 2 + n as u64);
            let b: Vec<f32> = (0..n).map(|o| o as f32 * 0.01 - 0.3).collect();
            for kernel in kernels() {
                let lin = Linear::new(w.clone(), b.clone(), kernel);
                assert_eq!(lin.outputs(), n);
                let mut y = Array2::<f32>::from_elem((rows, n), f32::NAN);
                lin.apply(x.view(), y.view_mut());
                let round = |v: f32| {
                    if kernel == Kernel::Bf16 {
                        round_bf16(v)
                    } else {
                        v
                    }
                };
                for r in 0..rows {
                    for o in 0..n {
                        let exact: f64 = b[o] as f64
                            + (0..k)
                                .map(|i| round(x[[r, i]]) as f64 * round(w[[o, i]]) as f64)
                                .sum::<f64>();
                        let tol = 1e-5 * (1.0 + (k as f64).sqrt());
                        let got = y[[r, o]] as f64;
                        assert!(
                            (got - exact).abs() <= tol,
                            "{kernel:?} ({rows}×{k}·{k}×{n}) [{r},{o}]: {got} vs {exact}"
                        );
                    }
                }
            }
        }
    }

    /// Where AMX runs, `bf16x3` gives every output within 2e-5 of the magnitude of its terms (f32's own
    /// error is about 1e-7; one bfloat16 rounding of both sides about 4e-3), rows past a multiple of 32
    /// included.
    #[test]
    fn amx_split_products_are_near_f32() {
        let kernel = Kernel::for_precision(crate::config::EncoderPrecision::Bf16x3);
        if kernel != Kernel::Amx {
            eprintln!("no AMX on this machine: the f32 kernel stands in");
            return;
        }
        let (rows, n, k) = (45, 96, 1536);
        let x = matrix(rows, k, 11);
        let w = matrix(n, k, 12);
        let b: Vec<f32> = (0..n).map(|o| o as f32 * 0.01).collect();
        let lin = Linear::new(w.clone(), b.clone(), kernel);
        assert!(matches!(lin, Linear::Amx(_)));
        let mut y = Array2::<f32>::zeros((rows, n));
        lin.apply(x.view(), y.view_mut());
        let mut worst = 0f64;
        for r in 0..rows {
            for o in 0..n {
                let terms = (0..k).map(|i| x[[r, i]] as f64 * w[[o, i]] as f64);
                let magnitude: f64 = b[o].abs() as f64 + terms.clone().map(f64::abs).sum::<f64>();
                let exact = b[o] as f64 + terms.sum::<f64>();
                worst = worst.max((y[[r, o]] as f64 - exact).abs() / magnitude);
            }
        }
        assert!(
            worst < 2e-5,
            "largest error {worst:e} of the terms' magnitude"
        );
        assert!(
            worst > 0.0,
            "AMX's sums equal f64's exactly: not the kernel under test"
        );
    }

    /// A row's output does not depend on where it sits in the batch (its tile, its block, its AMX strip:
    /// 500 rows of 1,536 inputs are four strips, the last one partial).
    #[test]
    fn a_row_gives_the_same_bits_at_any_position() {
        for (n, k) in [(80, 300), (96, 384), (64, 1536)] {
            a_row_at_any_position(n, k);
        }
    }

    fn a_row_at_any_position(n: usize, k: usize) {
        let w = matrix(n, k, 9);
        let b = vec![0.1; n];
        let x = matrix(500, k, 3);
        for kernel in kernels() {
            let lin = Linear::new(w.clone(), b.clone(), kernel);
            let mut all = Array2::<f32>::zeros((500, n));
            lin.apply(x.view(), all.view_mut());
            for r in [0usize, 5, 6, 217, 499] {
                let one = x.slice(ndarray::s![r..r + 1, ..]).to_owned();
                let mut y = Array2::<f32>::zeros((1, n));
                lin.apply(one.view(), y.view_mut());
                assert_eq!(y.row(0), all.row(r), "{kernel:?} row {r}");
            }
        }
    }

    /// Views that are not contiguous (a block of a wider matrix) give the same bits as contiguous ones.
    #[test]
    fn strided_views_give_the_same_bits() {
        let (rows, n, k) = (9, 48, 40);
        let wide = matrix(rows, k + 7, 5);
        let x = wide.slice(ndarray::s![.., 3..3 + k]);
        let w = matrix(n, k, 6);
        let b = vec![0.25; n];
        for kernel in kernels() {
            let lin = Linear::new(w.clone(), b.clone(), kernel);
            let mut dense = Array2::<f32>::zeros((rows, n));
            lin.apply(x.to_owned().view(), dense.view_mut());
            let mut big = Array2::<f32>::zeros((rows, n + 5));
            lin.apply(x, big.slice_mut(ndarray::s![.., 2..2 + n]));
            assert_eq!(big.slice(ndarray::s![.., 2..2 + n]), dense, "{kernel:?}");
        }
    }
}
