//! The numeric kernels of the fit: the polynomial `exp`, the SIMD dispatch, grouped logarithms, Cholesky factors and small reductions.

use super::*;

/// `e^x` for `x ∈ [NEGLIGIBLE − 10, 0]` (accurate to ~1 ulp down to x ≈ −700; the E-step passes
/// `[NEGLIGIBLE, 0]`): Cody–Waite reduction `x = k·ln 2 + r`, `|r| ≤ ln 2 / 2`, the degree-13 Taylor
/// polynomial of `e^r` (truncation < 0.05 ulp), scaled by `2^k` through the exponent bits. Plain
/// multiplies and adds, no branch and no call, so a loop of it vectorises, and every CPU computes the same
/// bits (no FMA contraction: Rust does not contract).
#[inline(always)]
pub(super) fn exp_neg(x: f64) -> f64 {
    // 1.5 · 2^52: adding it rounds to an integer held in the low mantissa bits.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    // ln 2 split so that k · LN2_HI is exact for |k| < 2^11.
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    const C: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5_040.0,
        1.0 / 40_320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    let x = if x > NEGLIGIBLE - 10.0 {
        x
    } else {
        NEGLIGIBLE - 10.0
    };
    let y = x * LOG2_E + SHIFT;
    let k = y - SHIFT;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = C[13];
    for &c in C[..13].iter().rev() {
        p = p * r + c;
    }
    // k (as a two's-complement integer in y's low bits) + 1023 is the biased exponent of 2^k.
    let scale = f64::from_bits(y.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(1023) << 52);
    p * scale
}

/// Runs `f` compiled for AVX2 and FMA when the CPU has them (pulp's run-time dispatch; pass an
/// `#[inline(always)]` closure so that its body is compiled inside), else as it is. The arithmetic is the
/// same either way (no contraction into FMA), only wider.
#[inline(always)]
pub(super) fn with_simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        return simd.vectorize(f);
    }
    f()
}

/// A term of the log-sum-exp: `e^t`, or 0 when `t` is below [`NEGLIGIBLE`] (no branch: both are
/// computed and one is kept, so that loops of it vectorise).
#[inline(always)]
pub(super) fn negligible_or_exp(t: f64) -> f64 {
    let e = exp_neg(t);
    if t >= NEGLIGIBLE {
        e
    } else {
        0.0
    }
}

/// Sums `ln` of many values ≥ 1 with one `ln` per group: the logarithm of the group's product (the
/// product's relative rounding, a few ulp per group, is far below any tolerance of the fit).
#[derive(Debug, Clone, Copy)]
pub(super) struct LogSum {
    pub(super) sum: f64,
    pub(super) product: f64,
    pub(super) count: u32,
}

impl LogSum {
    pub(super) fn new() -> Self {
        Self {
            sum: 0.0,
            product: 1.0,
            count: 0,
        }
    }

    /// Adds `ln v` for `v ≥ 1`.
    #[inline(always)]
    pub(super) fn add(&mut self, v: f64) {
        self.product *= v;
        self.count += 1;
        if self.count == 16 || self.product > 1e250 {
            self.sum += self.product.ln();
            self.product = 1.0;
            self.count = 0;
        }
    }

    pub(super) fn total(self) -> f64 {
        self.sum + self.product.ln()
    }
}

/// `‖a − b‖²`, summed in coordinate order (both seedings use it, so they see the same bits).
#[inline(always)]
pub(super) fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Lower Cholesky factor of a symmetric `d × d` matrix, or `None` if it is not positive definite.
pub(super) fn cholesky(a: &[f64], d: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..=i {
            let s: f64 = (0..j).map(|p| l[i * d + p] * l[j * d + p]).sum();
            if i == j {
                let v = a[i * d + i] - s;
                if v <= 0.0 || !v.is_finite() {
                    return None;
                }
                l[i * d + i] = v.sqrt();
            } else {
                l[i * d + j] = (a[i * d + j] - s) / l[j * d + j];
            }
        }
    }
    Some(l)
}

/// Inverse of a lower-triangular matrix (forward substitution on the identity).
pub(super) fn invert_lower(l: &[f64], d: usize) -> Vec<f64> {
    let mut inv = vec![0.0; d * d];
    for col in 0..d {
        for i in col..d {
            let mut s = if i == col { 1.0 } else { 0.0 };
            for p in col..i {
                s -= l[i * d + p] * inv[p * d + col];
            }
            inv[i * d + col] = s / l[i * d + i];
        }
    }
    inv
}

/// The largest of `values` (NaNs ignored, `−∞` for none): a compare-and-select, as `f64::max` without its
/// NaN bookkeeping on the dependency chain.
#[inline(always)]
pub(super) fn max_of(values: &[f64]) -> f64 {
    values
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}
