//! The encoder's linear layers on Intel AMX tiles (`precision = "bf16x3"`).
//!
//! AMX multiplies bfloat16 tiles and sums in f32 at many times the rate of AVX-512 FMAs (one
//! `tdpbf16ps` is 16 × 16 × 32 multiply-adds), but one bfloat16 keeps 8 bits of an f32's 24. Here every
//! operand is split into two bfloat16 parts, `v = hi + lo` with `hi = bf16(v)` and `lo = bf16(v − hi)`
//! (16 bits of the significand), and a product is taken as `hi·hi + hi·lo + lo·hi`; the `lo·lo` term
//! is below what the split itself drops (about 2⁻¹⁷ of `|v|`). So each output is the f32 sum to about
//! 1e-5 of the size of its terms, a hundred times closer than one bfloat16 rounding, at three tile
//! products per product.
//!
//! Weights are packed once at load: for every 16 outputs and 32 inputs, one 1 KiB tile of 16 rows of
//! input pairs (`W[o][2j], W[o][2j+1]` for the 16 outputs `o`), high parts and low parts apart, on
//! 64-byte aligned storage (a tile row is one cache line). A call takes the rows of `x` in strips that
//! stay in L2 (`STRIP_VALUES`): it splits a strip once, then for every two panels of 16 outputs sweeps
//! the strip 32 rows at a time: four accumulator tiles started at the bias (a 64-byte row loaded with
//! stride 0), per 32 inputs `hi·hi`, `hi·lo` and `lo·hi` into each, in that order. A row's outputs do
//! not depend on its batch or its strip.
//!
//! Linux gives a process the tiles' register state only when asked (`arch_prctl(ARCH_REQ_XCOMP_PERM)`);
//! [`available`] asks once. The instructions are written as inline assembly (Rust's AMX intrinsics are
//! not stable), each call configures the tiles of its own thread and releases them when done.

#![allow(unsafe_code)]

use std::arch::asm;
use std::sync::OnceLock;

use super::gemm::bf16_bits;

/// Rows of an accumulator or input tile.
const TILE_ROWS: usize = 16;
/// Inputs per tile row (32 bfloat16 = 64 bytes).
const TILE_K: usize = 32;
/// Outputs per tile (16 f32 = 64 bytes).
const TILE_N: usize = 16;
/// bfloat16 values per packed weight tile (16 rows of 16 pairs).
const TILE_VALUES: usize = TILE_ROWS * TILE_K;

/// Whether this CPU has AMX-TILE and AMX-BF16 and the OS lets this process use the tiles (asked once).
pub(crate) fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(detect)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn detect() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 7 is read only when leaf 0 says it exists.
    #[allow(unused_unsafe)]
    let edx = unsafe {
        if __cpuid(0).eax < 7 {
            return false;
        }
        __cpuid_count(7, 0).edx
    };
    const AMX_BF16: u32 = 1 << 22;
    const AMX_TILE: u32 = 1 << 24;
    if edx & AMX_BF16 == 0 || edx & AMX_TILE == 0 {
        return false;
    }
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) only changes which register state the
    // kernel saves for this process; it reads and writes no memory of ours. The syscall instruction
    // clobbers rcx and r11, declared.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret == 0
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn detect() -> bool {
    false
}

/// `v` as two bfloat16 parts whose sum is `v` to about 2⁻¹⁷ of `|v|`.
#[inline(always)]
fn split(v: f32) -> (u16, u16) {
    let hi = bf16_bits(v);
    let rest = v - f32::from_bits(hi << 16);
    (
        hi as u16,
        if rest.is_finite() {
            bf16_bits(rest) as u16
        } else {
            0
        },
    )
}

/// Whether [`split_rows`] runs here (AVX-512F, AVX512-BW and AVX512-BF16).
fn vector_split() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512bf16")
}

/// Where value `i` of row-major `x` (`k` columns, a multiple of 32) lies in the tiled layout: tiles of
/// 16 rows × 32 inputs, 1 KiB each and contiguous, the tiles of a block of 16 rows in input order.
#[inline(always)]
fn tiled(i: usize, k: usize) -> usize {
    let (r, j) = (i / k, i % k);
    ((r / TILE_ROWS) * (k / TILE_K) + j / TILE_K) * TILE_VALUES
        + (r % TILE_ROWS) * TILE_K
        + j % TILE_K
}

/// [`split`] of every value of `x` (`k` columns) into `hi` and `lo` in the [`tiled`] layout, 16 at a
/// time: rounded to nearest even by `vcvtneps2bf16` (which also takes denormals as zero). Callers must
/// have found AVX-512F and AVX512-BF16 on this CPU.
#[target_feature(enable = "avx,avx2,fma,avx512f,avx512bw,avx512bf16")]
unsafe fn split_rows(x: &[f32], k: usize, hi: &mut [u16], lo: &mut [u16]) {
    use std::arch::x86_64::{
        __m256i, _mm256_storeu_si256, _mm512_castsi512_ps, _mm512_cmp_ps_mask,
        _mm512_cvtepu16_epi32, _mm512_cvtneps_pbh, _mm512_loadu_ps, _mm512_maskz_mov_ps,
        _mm512_setzero_ps, _mm512_slli_epi32, _mm512_sub_ps, _CMP_EQ_OQ,
    };
    let whole = x.len() / 16 * 16;
    for i in (0..whole).step_by(16) {
        // SAFETY: i + 16 ≤ x.len() ≤ hi.len(), lo.len(); unaligned loads and stores.
        unsafe {
            let v = _mm512_loadu_ps(x.as_ptr().add(i));
            let h: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(v));
            let hf = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)));
            let rest = _mm512_sub_ps(v, hf);
            // As `split`: no low part where the rest is not finite (an infinite or overflowing value).
            let finite =
                _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_sub_ps(rest, rest), _mm512_setzero_ps());
            let l: __m256i =
                std::mem::transmute(_mm512_cvtneps_pbh(_mm512_maskz_mov_ps(finite, rest)));
            let at = tiled(i, k);
            assert!(at + 16 <= hi.len() && at + 16 <= lo.len());
            _mm256_storeu_si256(hi.as_mut_ptr().add(at).cast(), h);
            _mm256_storeu_si256(lo.as_mut_ptr().add(at).cast(), l);
        }
    }
    for (i, v) in x.iter().enumerate().skip(whole) {
        let at = tiled(i, k);
        (hi[at], lo[at]) = split(*v);
    }
}

/// `W` (`n` outputs × `k` inputs) split and packed in AMX weight tiles, with its bias.
pub(crate) struct PackedAmx {
    pub(crate) n: usize,
    pub(crate) k: usize,
    hi: Lines,
    lo: Lines,
    bias: Vec<f32>,
}

/// One cache line of bfloat16 values: the unit of [`Lines`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u16; 32]);

/// Inputs split at a time by [`PackedAmx::apply`]: a strip of `STRIP_VALUES / k` rows (128 at `k` =
/// 1,536, 512 at 384), whose two split parts (768 KiB) stay in the core's L2 cache while every panel of
/// weights passes over them. Splitting all rows at once made every panel read them from memory: 140–
/// 284 GFLOP/s at 4,096–16,384 rows against 420–490 in strips.
const STRIP_VALUES: usize = 128 * 1536;

/// Zeroed `u16`s on storage aligned to the 64-byte cache line, so that every 64-byte tile row loaded
/// is one line, not two: with the system allocator's 16-byte alignment the kernel ran ~12 % slower.
struct Lines {
    lines: Vec<Line>,
    len: usize,
}

impl Lines {
    fn zeroed(len: usize) -> Self {
        Self {
            lines: vec![Line([0; 32]); len.div_ceil(32)],
            len,
        }
    }
}

impl std::ops::Deref for Lines {
    type Target = [u16];
    fn deref(&self) -> &[u16] {
        // SAFETY: `Line` is 32 `u16`s without padding (size 64 = 32 × 2), so the lines are
        // `32 × lines.len() ≥ len` contiguous initialised `u16`s.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u16>(), self.len) }
    }
}

impl std::ops::DerefMut for Lines {
    fn deref_mut(&mut self) -> &mut [u16] {
        // SAFETY: as in `deref`, through the unique borrow of the lines.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u16>(), self.len) }
    }
}

/// The tile configuration: palette 1, tiles 0–7 each 16 rows of 64 bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

impl PackedAmx {
    /// Whether the tiles fit `n × k` exactly (both multiples of 32; the encoder's are).
    fn fits(n: usize, k: usize) -> bool {
        n > 0 && k > 0 && n.is_multiple_of(2 * TILE_N) && k.is_multiple_of(TILE_K)
    }

    /// Packs `w` (`n × k`, rows = outputs) and `b`; `None` when [`Self::fits`] does not hold or this
    /// machine has no AMX ([`available`]), so that a `PackedAmx` exists only where it runs.
    pub(crate) fn new(w: ndarray::ArrayView2<'_, f32>, b: &[f32]) -> Option<Self> {
        let (n, k) = w.dim();
        if !available() || !Self::fits(n, k) || b.len() != n {
            return None;
        }
        let chunks = k / TILE_K;
        let mut hi = Lines::zeroed(n * k);
        let mut lo = Lines::zeroed(n * k);
        for panel in 0..n / TILE_N {
            for chunk in 0..chunks {
                let base = (panel * chunks + chunk) * TILE_VALUES;
                for pair in 0..TILE_ROWS {
                    for col in 0..TILE_N {
                        for e in 0..2 {
                            let (h, l) =
                                split(w[[panel * TILE_N + col, chunk * TILE_K + 2 * pair + e]]);
                            let at = base + pair * 2 * TILE_N + col * 2 + e;
                            hi[at] = h;
                            lo[at] = l;
                        }
                    }
                }
            }
        }
        Some(Self {
            n,
            k,
            hi,
            lo,
            bias: b.to_vec(),
        })
    }

    /// `y = x · Wᵀ + b` on contiguous row-major `x` (`rows × k`) and `y` (`rows × n`) (a `PackedAmx`
    /// exists only where [`available`] holds).
    pub(crate) fn apply(&self, x: &[f32], rows: usize, y: &mut [f32]) {
        let (n, k) = (self.n, self.k);
        assert!(
            x.len() >= rows * k && y.len() >= rows * n,
            "shapes of x and y"
        );
        if rows == 0 {
            return;
        }
        let block = 2 * TILE_ROWS;
        let strip_rows = (STRIP_VALUES / k / block).max(1) * block;
        let strip_rows = strip_rows.min(rows.div_ceil(block) * block);
        let mut xh = Lines::zeroed(strip_rows * k);
        let mut xl = Lines::zeroed(strip_rows * k);
        let mut spill = vec![0f32; block * 2 * TILE_N];
        let config = TileConfig {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: std::array::from_fn(|t| if t < 8 { 64 } else { 0 }),
            rows: std::array::from_fn(|t| if t < 8 { TILE_ROWS as u8 } else { 0 }),
        };
        // SAFETY: `available()` held when this `PackedAmx` was made, so the CPU has AMX-TILE and AMX-BF16 and the OS
        // saves the tile state of this process; the configuration is a valid palette-1 layout.
        unsafe { asm!("ldtilecfg [{}]", in(reg) &config, options(nostack, readonly)) };
        for s0 in (0..rows).step_by(strip_rows) {
            let s1 = (s0 + strip_rows).min(rows);
            let x = &x[s0 * k..s1 * k];
            if s1 - s0 < strip_rows {
                // The last strip's padding rows: zeros, not the previous strip's values.
                xh.fill(0);
                xl.fill(0);
            }
            if vector_split() {
                // SAFETY: the features `split_rows` is compiled for were just detected (AVX, AVX2 and
                // FMA come with AVX-512F).
                unsafe { split_rows(x, k, &mut xh, &mut xl) };
            } else {
                for (i, v) in x.iter().enumerate() {
                    let at = tiled(i, k);
                    (xh[at], xl[at]) = split(*v);
                }
            }
            self.strip(&xh, &xl, s0..s1, &mut spill, y);
        }
        // SAFETY: returns the tiles to their initial state (configured above on this thread).
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }

    /// The products of one strip of split inputs (`xh`, `xl`: rows `s0..s1` of `x` in the tiled
    /// layout, padded to a multiple of 32 rows) into rows `s0..s1` of `y`; the tiles are configured.
    #[inline(always)]
    fn strip(
        &self,
        xh: &[u16],
        xl: &[u16],
        std::ops::Range { start: s0, end: s1 }: std::ops::Range<usize>,
        spill: &mut [f32],
        y: &mut [f32],
    ) {
        let (n, block, rows) = (self.n, 2 * TILE_ROWS, s1 - s0);
        let (padded, chunks) = (rows.div_ceil(block) * block, self.k / TILE_K);
        for pair in (0..n / TILE_N).step_by(2) {
            let bias0 = self.bias[pair * TILE_N..].as_ptr();
            let bias1 = self.bias[(pair + 1) * TILE_N..].as_ptr();
            for r0 in (0..padded).step_by(block) {
                // SAFETY: the four accumulators are loaded from 64 bytes of the bias at stride 0 (both
                // panels lie inside `bias`, n being a multiple of 32).
                unsafe {
                    asm!(
                        "tileloadd tmm0, [{b0} + {z}*1]",
                        "tileloadd tmm1, [{b1} + {z}*1]",
                        "tileloadd tmm2, [{b0} + {z}*1]",
                        "tileloadd tmm3, [{b1} + {z}*1]",
                        b0 = in(reg) bias0,
                        b1 = in(reg) bias1,
                        z = in(reg) 0usize,
                        options(nostack, readonly),
                    )
                };
                for chunk in 0..chunks {
                    let a = ((r0 / TILE_ROWS) * chunks + chunk) * TILE_VALUES;
                    let a1 = a + chunks * TILE_VALUES;
                    let w0 = (pair * chunks + chunk) * TILE_VALUES;
                    let w1 = ((pair + 1) * chunks + chunk) * TILE_VALUES;
                    // SAFETY: every load reads one contiguous 1 KiB tile (16 rows, stride 64 bytes):
                    // the input tiles of rows r0..r0+16 and r0+16..r0+32, inputs chunk·32..+32, in the
                    // tiled split inputs of the strip (`padded × k` values); the weight tiles of panels `pair` and
                    // `pair + 1` for the same inputs (n·k values).
                    unsafe {
                        asm!(
                            "tileloadd tmm4, [{ah0} + {sw}*1]",
                            "tileloadd tmm6, [{wh0} + {sw}*1]",
                            "tdpbf16ps tmm0, tmm4, tmm6",
                            "tileloadd tmm5, [{ah1} + {sw}*1]",
                            "tdpbf16ps tmm2, tmm5, tmm6",
                            "tileloadd tmm7, [{wh1} + {sw}*1]",
                            "tdpbf16ps tmm1, tmm4, tmm7",
                            "tileloadd tmm6, [{wl0} + {sw}*1]",
                            "tdpbf16ps tmm3, tmm5, tmm7",
                            "tdpbf16ps tmm0, tmm4, tmm6",
                            "tileloadd tmm7, [{wl1} + {sw}*1]",
                            "tdpbf16ps tmm2, tmm5, tmm6",
                            "tdpbf16ps tmm1, tmm4, tmm7",
                            "tileloadd tmm6, [{wh0} + {sw}*1]",
                            "tdpbf16ps tmm3, tmm5, tmm7",
                            "tileloadd tmm4, [{al0} + {sw}*1]",
                            "tdpbf16ps tmm0, tmm4, tmm6",
                            "tileloadd tmm5, [{al1} + {sw}*1]",
                            "tdpbf16ps tmm2, tmm5, tmm6",
                            "tileloadd tmm7, [{wh1} + {sw}*1]",
                            "tdpbf16ps tmm1, tmm4, tmm7",
                            "tdpbf16ps tmm3, tmm5, tmm7",
                            ah0 = in(reg) xh[a..].as_ptr(),
                            ah1 = in(reg) xh[a1..].as_ptr(),
                            al0 = in(reg) xl[a..].as_ptr(),
                            al1 = in(reg) xl[a1..].as_ptr(),
                            wh0 = in(reg) self.hi[w0..].as_ptr(),
                            wh1 = in(reg) self.hi[w1..].as_ptr(),
                            wl0 = in(reg) self.lo[w0..].as_ptr(),
                            wl1 = in(reg) self.lo[w1..].as_ptr(),
                            sw = in(reg) 64usize,
                            options(nostack, readonly),
                        )
                    };
                }
                let c0 = pair * TILE_N;
                if r0 + block <= rows {
                    let out = y[(s0 + r0) * n + c0..].as_mut_ptr();
                    // SAFETY: rows s0+r0..s0+r0+32 of `y` exist (checked above) and the two panels' 32
                    // columns start at c0 ≤ n − 32; each store writes 16 rows of 64 bytes at stride n.
                    unsafe { store4(out, n) };
                } else {
                    // SAFETY: `spill` holds 32 rows of 32 f32.
                    unsafe { store4(spill.as_mut_ptr(), 2 * TILE_N) };
                    for r in r0..rows {
                        let from = &spill[(r - r0) * 2 * TILE_N..(r - r0 + 1) * 2 * TILE_N];
                        let at = (s0 + r) * n + c0;
                        y[at..at + 2 * TILE_N].copy_from_slice(from);
                    }
                }
            }
        }
    }
}

/// Stores accumulators 0–3 as a 32 × 32 block at `out` (row stride `stride` f32): tile 0 rows 0–15,
/// columns 0–15; tile 1 the next 16 columns; tiles 2 and 3 rows 16–31. Callers: the block must lie in
/// writable memory and the tiles be configured.
#[inline(always)]
unsafe fn store4(out: *mut f32, stride: usize) {
    let bytes = stride * 4;
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "tilestored [{c0} + {s}*1], tmm0",
            "tilestored [{c1} + {s}*1], tmm1",
            "tilestored [{c2} + {s}*1], tmm2",
            "tilestored [{c3} + {s}*1], tmm3",
            c0 = in(reg) out,
            c1 = in(reg) out.add(TILE_N),
            c2 = in(reg) out.add(TILE_ROWS * stride),
            c3 = in(reg) out.add(TILE_ROWS * stride + TILE_N),
            s = in(reg) bytes,
            options(nostack),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector split gives the scalar split's parts, in the tiled layout, also for infinite and
    /// overflowing values (denormals aside: `vcvtneps2bf16` takes them as zero).
    #[test]
    fn the_vector_split_is_the_scalar_split() {
        let (rows, k) = (16, 32);
        let mut x: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0)
            .collect();
        x[3] = f32::INFINITY;
        x[40] = f32::NEG_INFINITY;
        x[77] = f32::MAX;
        x[100] = -0.0;
        x[200] = 1.0e-30;
        let mut want = (vec![0u16; rows * k], vec![0u16; rows * k]);
        for (i, v) in x.iter().enumerate() {
            let at = tiled(i, k);
            (want.0[at], want.1[at]) = split(*v);
        }
        if !vector_split() {
            eprintln!("no AVX512-BF16 here: only the scalar split runs");
            return;
        }
        let mut got = (vec![0u16; rows * k], vec![0u16; rows * k]);
        // SAFETY: the features `split_rows` is compiled for were just detected.
        unsafe { split_rows(&x, k, &mut got.0, &mut got.1) };
        assert_eq!(got, want);
    }
}
