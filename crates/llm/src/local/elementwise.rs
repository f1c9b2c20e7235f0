//! The encoder's element-wise steps — layer norm, softmax, GELU — each compiled three times (AVX-512,
//! AVX2, baseline) and chosen at run time, every copy giving the same bits.

#[cfg(test)]
use ndarray::Array2;
use ndarray::ArrayViewMut2;

/// `$name($args)`: runs `$scalar` compiled for AVX-512 (the copy `$wide`) where the CPU has it, else
/// compiled for AVX2 (the copy `$avx2`) where it has that — LLVM then vectorises its
/// element-wise loops 16 or 8 lanes wide, every value the same IEEE operations in the same order (Rust
/// never fuses a multiply and an add on its own), so the same bits — else as compiled for the baseline.
macro_rules! wide {
    ($(#[$doc:meta])* fn $name:ident = $wide:ident, $avx2:ident / $scalar:ident ( $($arg:ident : $ty:ty),* )) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx,avx2,fma,avx512f")]
        fn $wide($($arg: $ty),*) {
            $scalar($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx,avx2,fma")]
        fn $avx2($($arg: $ty),*) {
            $scalar($($arg),*)
        }

        $(#[$doc])*
        pub(super) fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                match wide_level() {
                    Wide::Avx512 => {
                        // SAFETY: AVX-512F (with AVX, AVX2 and FMA) was detected on this CPU: every
                        // feature the copy is compiled for.
                        #[allow(unsafe_code)]
                        unsafe {
                            $wide($($arg),*)
                        };
                        return;
                    }
                    Wide::Avx2 => {
                        // SAFETY: AVX, AVX2 and FMA were detected on this CPU.
                        #[allow(unsafe_code)]
                        unsafe {
                            $avx2($($arg),*)
                        };
                        return;
                    }
                    Wide::Baseline => {}
                }
            }
            $scalar($($arg),*)
        }
    };
}

/// Which of [`wide!`]'s copies run here.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wide {
    Avx512,
    Avx2,
    Baseline,
}

/// Which of [`wide!`]'s copies run here (asked once).
fn wide_level() -> Wide {
    #[cfg(target_arch = "x86_64")]
    {
        static LEVEL: std::sync::OnceLock<Wide> = std::sync::OnceLock::new();
        *LEVEL.get_or_init(|| {
            if std::arch::is_x86_feature_detected!("avx512f") {
                Wide::Avx512
            } else if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                Wide::Avx2
            } else {
                Wide::Baseline
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    Wide::Baseline
}

wide!(
    /// Row-wise layer normalisation in place.
    fn layer_norm = layer_norm_avx512, layer_norm_avx2 / layer_norm_rows(
        x: ArrayViewMut2<'_, f32>,
        norm: &(Vec<f32>, Vec<f32>),
        eps: f32
    )
);
wide!(
    /// Softmax of every row of the rows of length `n` stored one after another in `m`, in place.
    fn softmax = softmax_avx512, softmax_avx2 / softmax_rows(m: &mut [f32], n: usize)
);
wide!(
    /// Softmax of the first `n` values of every row of `stride` values stored one after another in
    /// `m`, in place (each row as [`softmax`] computes it; the values past `n` are left as they are).
    fn softmax_strided = softmax_strided_avx512, softmax_strided_avx2 / softmax_rows_strided(
        m: &mut [f32],
        n: usize,
        stride: usize
    )
);
wide!(
    /// GELU with erf, in place: `0.5·x·(1 + erf(x/√2))`.
    fn gelu = gelu_avx512, gelu_avx2 / gelu_all(v: &mut [f32])
);

/// Lanes of the element-wise sums and maxima: one AVX-512 register of f32.
const LANES: usize = 16;

/// The sum of `term(v)` over `r`, taken in [`LANES`] partial sums side by side and folded at the end:
/// a vector's worth of independent additions per step instead of one chain of dependent ones (a row of
/// 384 values as a left fold waits four cycles per addition).
#[inline(always)]
fn lane_sum(r: &[f32], term: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = r.chunks_exact(LANES);
    for c in &mut chunks {
        for (s, &v) in lanes.iter_mut().zip(c) {
            *s += term(v);
        }
    }
    let rest: f32 = chunks.remainder().iter().map(|&v| term(v)).sum();
    lanes.iter().sum::<f32>() + rest
}

#[inline(always)]
fn layer_norm_rows(mut x: ArrayViewMut2<'_, f32>, norm: &(Vec<f32>, Vec<f32>), eps: f32) {
    let n = x.ncols();
    match x.as_slice_mut() {
        Some(data) if n > 0 => {
            for row in data.chunks_exact_mut(n) {
                layer_norm_row(row, norm, eps);
            }
        }
        _ => {
            for mut row in x.rows_mut() {
                match row.as_slice_mut() {
                    Some(r) => layer_norm_row(r, norm, eps),
                    None => {
                        let mut r = row.to_vec();
                        layer_norm_row(&mut r, norm, eps);
                        row.iter_mut().zip(r).for_each(|(v, n)| *v = n);
                    }
                }
            }
        }
    }
}

/// Layer normalisation of one row in place.
#[inline(always)]
fn layer_norm_row(r: &mut [f32], norm: &(Vec<f32>, Vec<f32>), eps: f32) {
    let n = r.len() as f32;
    let mean = lane_sum(r, |v| v) / n;
    let var = lane_sum(r, |v| (v - mean) * (v - mean)) / n;
    normalise(r, mean, 1.0 / (var + eps).sqrt(), norm);
}

#[inline(always)]
fn normalise(r: &mut [f32], mean: f32, inv: f32, (gamma, beta): &(Vec<f32>, Vec<f32>)) {
    for ((v, g), b) in r.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

#[inline(always)]
fn softmax_rows(m: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    for r in m.chunks_exact_mut(n) {
        softmax_row(r);
    }
}

#[inline(always)]
fn softmax_rows_strided(m: &mut [f32], n: usize, stride: usize) {
    if n == 0 || stride < n {
        return;
    }
    for r in m.chunks_exact_mut(stride) {
        softmax_row(&mut r[..n]);
    }
}

/// Softmax of one row in place: the maximum, then each value's exponential and their sum in one pass
/// (the sum over [`LANES`] lanes, folded at the end), then the scaling. A row's last values that do not
/// fill a vector are worked on in a copy padded with `-∞` (whose exponentials are 0), so they take the
/// vector path too.
#[inline(always)]
fn softmax_row(r: &mut [f32]) {
    let max = max_of(r);
    let mut lanes = [0.0f32; LANES];
    let mut chunks = r.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (s, v) in lanes.iter_mut().zip(c.iter_mut()) {
            *v = exp(*v - max);
            *s += *v;
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let mut tail = padded(rest, f32::NEG_INFINITY);
        for (s, v) in lanes.iter_mut().zip(tail.iter_mut()) {
            *v = exp(*v - max);
            *s += *v;
        }
        rest.copy_from_slice(&tail[..rest.len()]);
    }
    let inv = 1.0 / lanes.iter().sum::<f32>();
    r.iter_mut().for_each(|v| *v *= inv);
}

/// The values of `rest` (fewer than [`LANES`]) followed by `fill` up to a vector's length.
#[inline(always)]
fn padded(rest: &[f32], fill: f32) -> [f32; LANES] {
    let mut out = [fill; LANES];
    let k = rest.len().min(LANES);
    out[..k].copy_from_slice(&rest[..k]);
    out
}

/// The largest value of `r` (`-∞` when empty; NaNs skipped, as `f32::max` does), over [`LANES`]
/// lanes: the same value as a fold from the left (a maximum does not depend on the order), without its
/// chain of dependent steps.
#[inline(always)]
fn max_of(r: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = r.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, v) in lanes.iter_mut().zip(c) {
            *m = m.max(*v);
        }
    }
    let tail = padded(chunks.remainder(), f32::NEG_INFINITY);
    for (m, v) in lanes.iter_mut().zip(tail) {
        *m = m.max(v);
    }
    lanes.into_iter().fold(f32::NEG_INFINITY, f32::max)
}

/// `e^x` for `x ≤ 0` (softmax arguments) to about 1 ulp; 0 below -87 (and for `-∞`).
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23: adding and subtracting it rounds to an integer
    let tiny = x < -87.0;
    let x = x.max(-87.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    // e^r on [-ln2/2, ln2/2]: Taylor terms to r^6 (relative error below 2e-7).
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // 2^n: `t`'s low significand bits hold n + 2^22, so adding the exponent bias and shifting by the
    // significand's width leaves exactly (n + 127) << 23 (the bits above wrap out); n ∈ [-126, 0].
    let bits = t.to_bits().wrapping_add(127) << 23;
    if tiny {
        0.0
    } else {
        p * f32::from_bits(bits)
    }
}

#[inline(always)]
fn gelu_all(v: &mut [f32]) {
    const INV_SQRT2: f32 = std::f32::consts::FRAC_1_SQRT_2;
    for x in v.iter_mut() {
        *x = 0.5 * *x * (1.0 + erf(*x * INV_SQRT2));
    }
}

/// erf in single precision: a rational approximation on [-4, 4] (±1 outside), absolute error below 5e-7.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = -2.726_142e-10f32;
    let p = p * x2 + 2.770_681_5e-8;
    let p = p * x2 - 2.101_024e-6;
    let p = p * x2 - 5.692_506_2e-5;
    let p = p * x2 - 7.349_906_4e-4;
    let p = p * x2 - 2.954_600_1e-3;
    let p = p * x2 - 1.609_603_3e-2;
    let q = -1.456_607_2e-5f32;
    let q = q * x2 - 2.133_740_6e-4;
    let q = q * x2 - 1.682_827e-3;
    let q = q * x2 - 7.373_329_3e-3;
    let q = q * x2 - 1.426_474e-2;
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every vector copy this CPU can run (AVX-512, AVX2) gives the baseline's bits.
    #[test]
    fn wide_copies_give_the_same_bits() {
        let values: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919) % 2001) as f32 / 250.0 - 4.0)
            .collect();
        let norm = (
            (0..100).map(|i| 1.0 + i as f32 / 100.0).collect(),
            vec![0.1; 100],
        );
        // Every function through `copy` (0 the baseline, 1 AVX2, 2 AVX-512): all the outputs.
        let run = |copy: usize| {
            let mut g = values.clone();
            let mut sm = values[..770].to_vec();
            let mut ln = Array2::from_shape_vec((10, 100), values.clone()).unwrap_or_default();
            // SAFETY: each copy runs only where `wide_level` found its features (checked below).
            #[allow(unsafe_code)]
            unsafe {
                match copy {
                    0 => {
                        gelu_all(&mut g);
                        softmax_rows(&mut sm, 77);
                        layer_norm_rows(ln.view_mut(), &norm, 1e-12);
                    }
                    #[cfg(target_arch = "x86_64")]
                    1 => {
                        gelu_avx2(&mut g);
                        softmax_avx2(&mut sm, 77);
                        layer_norm_avx2(ln.view_mut(), &norm, 1e-12);
                    }
                    #[cfg(target_arch = "x86_64")]
                    _ => {
                        gelu_avx512(&mut g);
                        softmax_avx512(&mut sm, 77);
                        layer_norm_avx512(ln.view_mut(), &norm, 1e-12);
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    _ => unreachable!(),
                }
            }
            (g, sm, ln)
        };
        let baseline = run(0);
        let level = wide_level();
        if matches!(level, Wide::Avx2 | Wide::Avx512) {
            assert!(run(1) == baseline, "the AVX2 copies");
        }
        if level == Wide::Avx512 {
            assert!(run(2) == baseline, "the AVX-512 copies");
        }
    }

    /// The lane-wise maximum is the left fold's, at every length (remainders included) and with
    /// NaNs, infinities and signed zeros about; softmax keeps its bits (`wide_copies_give_the_same_bits`
    /// compares the copies, `softmax_sums_to_one` the result).
    #[test]
    fn the_lane_maximum_is_the_fold() {
        let mut values: Vec<f32> = (0..300)
            .map(|i| ((i * 7919) % 2001) as f32 / 250.0 - 4.0)
            .collect();
        values[17] = f32::NAN;
        values[40] = -0.0;
        values[41] = 0.0;
        values[90] = f32::NEG_INFINITY;
        values[250] = 9.5;
        for len in 0..values.len() {
            for start in [0, 3, 40] {
                let r = &values[start.min(len)..len];
                let fold = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                // Equal as numbers (a zero's sign may differ, which `v - max` does not see).
                assert_eq!(max_of(r), fold, "{start}..{len}");
            }
        }
        assert_eq!(max_of(&[f32::NAN; 20]), f32::NEG_INFINITY);
    }

    #[test]
    fn erf_and_exp_are_accurate() {
        let mut worst: f64 = 0.0;
        for i in -60_000..=60_000 {
            let x = i as f32 / 10_000.0;
            worst = worst.max((f64::from(erf(x)) - libm_erf(x)).abs());
        }
        assert!(worst < 5e-7, "erf error {worst}");
        let mut worst: f64 = 0.0;
        for i in 0..=100_000 {
            let x = -(i as f32) / 1_000.0;
            let e = f64::from(x).exp();
            let rel = (f64::from(exp(x)) - e).abs() / e.max(f64::MIN_POSITIVE);
            if x > -80.0 {
                worst = worst.max(rel);
            }
        }
        assert!(worst < 4e-7, "exp relative error {worst}");
        assert!(exp(-200.0) < 1e-37);
        assert!((exp(0.0) - 1.0).abs() < 1e-7);
    }

    fn libm_erf(x: f32) -> f64 {
        // erf by its Maclaurin series (|x| ≤ 3) or the continued fraction of erfc, in f64.
        let x = f64::from(x);
        if x.abs() < 3.0 {
            let mut term = x;
            let mut sum = x;
            for n in 1..200 {
                term *= -x * x / n as f64;
                let add = term / (2 * n + 1) as f64;
                sum += add;
                if add.abs() < 1e-17 {
                    break;
                }
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let t = x.abs();
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (t + f);
            }
            let erfc = (-t * t).exp() / std::f64::consts::PI.sqrt() / (t + f);
            x.signum() * (1.0 - erfc)
        }
    }

    /// Softmax and layer norm against their definitions in f64, at every length around the lane
    /// count (remainders included), as whole blocks of rows and as views whose rows are not one block.
    #[test]
    fn lane_sums_give_softmax_and_layer_norm() {
        let values: Vec<f32> = (0..20 * 300)
            .map(|i| ((i * 7919) % 4001) as f32 / 300.0 - 6.0)
            .collect();
        for n in [1, 5, 15, 16, 17, 33, 77, 256, 300] {
            let rows = 3;
            let m = &values[..rows * n];
            let mut got = m.to_vec();
            softmax(&mut got, n);
            for (r, g) in m.chunks_exact(n).zip(got.chunks_exact(n)) {
                let max = r
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, |a, v| a.max(f64::from(v)));
                let e: Vec<f64> = r.iter().map(|&v| (f64::from(v) - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for (want, &g) in e.iter().zip(g) {
                    assert!(
                        (want / sum - f64::from(g)).abs() < 1e-6,
                        "softmax, rows of {n}"
                    );
                }
            }
            let norm: (Vec<f32>, Vec<f32>) = (
                (0..n).map(|i| 1.0 + i as f32 / 100.0).collect(),
                (0..n).map(|i| 0.1 - i as f32 / 1000.0).collect(),
            );
            let mut got = Array2::from_shape_vec((rows, n), m.to_vec()).unwrap_or_default();
            layer_norm(got.view_mut(), &norm, 1e-5);
            for (r, g) in m.chunks_exact(n).zip(got.rows()) {
                let mean = r.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
                let var = r
                    .iter()
                    .map(|&v| (f64::from(v) - mean).powi(2))
                    .sum::<f64>()
                    / n as f64;
                for (j, (&v, &g)) in r.iter().zip(g).enumerate() {
                    let want = (f64::from(v) - mean) / (var + 1e-5).sqrt() * f64::from(norm.0[j])
                        + f64::from(norm.1[j]);
                    assert!((want - f64::from(g)).abs() < 1e-5, "norm, rows of {n}");
                }
            }
        }
        // A view whose rows are not one block (every other column) takes the row-wise path.
        let mut wide = Array2::from_shape_vec((6, 20), values[..120].to_vec()).unwrap_or_default();
        let mut narrow = wide.slice(ndarray::s![.., ..;2]).to_owned();
        let norm = (vec![1.5; 10], vec![0.25; 10]);
        layer_norm(wide.slice_mut(ndarray::s![.., ..;2]), &norm, 1e-5);
        layer_norm(narrow.view_mut(), &norm, 1e-5);
        assert_eq!(wide.slice(ndarray::s![.., ..;2]), narrow);
    }

    #[test]
    fn softmax_sums_to_one() {
        let mut r = vec![1.0, 2.0, 3.0, -1e9];
        softmax(&mut r, 4);
        assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(r[3], 0.0);
    }
}
