//! Self-attention of one packed sequence, head by head, on AVX-512: scores, softmax, context.
//!
//! The products of one sequence's heads are tiny (n × d by d × n with d = 32 for MiniLM): through a
//! general matrix product each call packs both operands and dispatches, which cost more than the
//! arithmetic (matrixmultiply was 7–10 % of the encoder's time, its packing alone 3.6–5 %). Here the
//! keys of a head are transposed once into a zero-padded `d × n'` block and the products run straight
//! from the query, key and value rows, with every value summed exactly as matrixmultiply's AVX-512
//! kernel sums it, so the vectors keep their bits:
//!
//! - a score is `scale · s` with `s` the fused multiply-adds of its `d` products in order, from zero
//!   (matrixmultiply splits the inner dimension in chunks of [`MM_KC`]; `d` never reaches one chunk);
//! - a context value is, over each chunk of [`MM_KC`] keys in turn, the fused multiply-adds of the
//!   chunk's products in key order from zero, the first chunk's sum taken as it is and each next one
//!   added to the total (what matrixmultiply's `C ← 1·AB + 1·C` pass per chunk computes).
//!
//! Tests compare the bits with `general_mat_mul` on random inputs of many lengths.

use std::arch::x86_64::{
    __m512, _mm512_add_ps, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_set1_ps, _mm512_setzero_ps,
};

use super::elementwise::softmax_strided;

/// matrixmultiply's chunk of the inner dimension for f32 (`S_KC`): each chunk's products are summed
/// on their own and the chunk sums added in turn.
pub(super) const MM_KC: usize = 256;

/// f32 lanes of one AVX-512 register.
const LANES: usize = 16;

/// Whether [`attend`] runs here for heads of `head_dim` values: AVX-512F on this CPU and a head of
/// 16, 32, 48 or 64 values (other shapes take the general product).
pub(super) fn available(head_dim: usize) -> bool {
    head_dim.is_multiple_of(LANES)
        && (LANES..=4 * LANES).contains(&head_dim)
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("fma")
}

/// The reusable buffers of [`attend`]: one head's transposed keys and its scores.
#[derive(Default)]
pub(super) struct AttendScratch {
    keys: Vec<f32>,
    scores: Vec<f32>,
}

/// The attention of one sequence: `qkv` holds its `n` rows of stacked queries, keys and values
/// (`3 · heads · head_dim` values each, row after row); writes the context rows (`heads · head_dim`
/// values each) into `ctx`. Callers check [`available`] first.
///
/// # Panics
/// If `qkv` or `ctx` is shorter than `n` rows, or [`available`] is false for `head_dim`.
pub(super) fn attend(
    qkv: &[f32],
    n: usize,
    heads: usize,
    head_dim: usize,
    scale: f32,
    scratch: &mut AttendScratch,
    ctx: &mut [f32],
) {
    let h = heads * head_dim;
    assert!(qkv.len() >= n * 3 * h, "qkv holds {n} rows");
    assert!(ctx.len() >= n * h, "ctx holds {n} rows");
    assert!(
        available(head_dim),
        "attend needs AVX-512F and a head of 16 to 64 values"
    );
    if n == 0 {
        return;
    }
    let width = n.next_multiple_of(LANES);
    scratch.keys.clear();
    scratch.keys.resize(head_dim * width, 0.0);
    scratch.scores.clear();
    scratch.scores.resize(n * width, 0.0);
    let shape = Shape {
        n,
        width,
        stride: 3 * h,
        head_dim,
    };
    for head in 0..heads {
        let (q0, k0, v0) = (
            head * head_dim,
            h + head * head_dim,
            2 * h + head * head_dim,
        );
        for (j, row) in qkv.chunks_exact(3 * h).take(n).enumerate() {
            for (d, &k) in row[k0..k0 + head_dim].iter().enumerate() {
                scratch.keys[d * width + j] = k;
            }
        }
        // SAFETY: `available` found AVX-512F and FMA on this CPU (asserted above): the features the
        // kernels are compiled for.
        #[allow(unsafe_code)]
        unsafe {
            scores(qkv, q0, &scratch.keys, scale, shape, &mut scratch.scores)
        };
        softmax_strided(&mut scratch.scores, n, width);
        // SAFETY: as above.
        #[allow(unsafe_code)]
        unsafe {
            context(&scratch.scores, qkv, v0, shape, ctx, h, q0)
        };
    }
}

/// The sizes one head's kernels share.
#[derive(Clone, Copy)]
struct Shape {
    /// Tokens of the sequence.
    n: usize,
    /// `n` rounded up to whole vectors: the row length of the scores and transposed keys.
    width: usize,
    /// Values per row of `qkv`.
    stride: usize,
    head_dim: usize,
}

/// Sixteen values from `s[at..]` as a vector (callers keep `at + 16 <= s.len()`).
#[inline(always)]
fn load(s: &[f32], at: usize) -> __m512 {
    match <&[f32; LANES]>::try_from(&s[at..at + LANES]) {
        Ok(a) => pulp::cast(*a),
        Err(_) => pulp::cast([0.0f32; LANES]),
    }
}

/// Stores `v` into `s[at..at + 16]`.
#[inline(always)]
fn put(s: &mut [f32], at: usize, v: __m512) {
    let a: [f32; LANES] = pulp::cast(v);
    if let Ok(dst) = <&mut [f32; LANES]>::try_from(&mut s[at..at + LANES]) {
        *dst = a;
    }
}

/// Runs `$tile::<R, C>(args)` with `R` = `$rows` and `C` = `$cols` as constants (the score and the
/// context tiles alike; callers keep both from 1 to 4).
macro_rules! by_tile {
    ($rows:expr, $cols:expr, $tile:ident ( $($arg:expr),* )) => {
        match ($rows, $cols) {
            (4, 4) => $tile::<4, 4>($($arg),*),
            (4, 3) => $tile::<4, 3>($($arg),*),
            (4, 2) => $tile::<4, 2>($($arg),*),
            (4, _) => $tile::<4, 1>($($arg),*),
            (3, 4) => $tile::<3, 4>($($arg),*),
            (3, 3) => $tile::<3, 3>($($arg),*),
            (3, 2) => $tile::<3, 2>($($arg),*),
            (3, _) => $tile::<3, 1>($($arg),*),
            (2, 4) => $tile::<2, 4>($($arg),*),
            (2, 3) => $tile::<2, 3>($($arg),*),
            (2, 2) => $tile::<2, 2>($($arg),*),
            (2, _) => $tile::<2, 1>($($arg),*),
            (_, 4) => $tile::<1, 4>($($arg),*),
            (_, 3) => $tile::<1, 3>($($arg),*),
            (_, 2) => $tile::<1, 2>($($arg),*),
            _ => $tile::<1, 1>($($arg),*),
        }
    };
}

/// `scores[i][j] = scale · Σ_d q_i[d] · k_j[d]` for one head (rows of `width` values; the lanes past
/// `n` come out 0 times the scale and are never read).
#[target_feature(enable = "avx,avx2,fma,avx512f")]
fn scores(qkv: &[f32], q0: usize, keys: &[f32], scale: f32, s: Shape, out: &mut [f32]) {
    let chunks = s.width / LANES;
    let mut i = 0;
    while i < s.n {
        let rows = (s.n - i).min(4);
        let mut c = 0;
        while c < chunks {
            let cols = (chunks - c).min(4);
            by_tile!(rows, cols, score_tile(qkv, q0, keys, scale, s, out, i, c));
            c += cols;
        }
        i += rows;
    }
}

/// Rows `i..i + R` of the scores against key vectors `c..c + C` (16 keys each).
#[inline]
#[target_feature(enable = "avx,avx2,fma,avx512f")]
#[allow(clippy::too_many_arguments)]
fn score_tile<const R: usize, const C: usize>(
    qkv: &[f32],
    q0: usize,
    keys: &[f32],
    scale: f32,
    s: Shape,
    out: &mut [f32],
    i: usize,
    c: usize,
) {
    let qs: [&[f32]; R] = std::array::from_fn(|r| {
        &qkv[(i + r) * s.stride + q0..(i + r) * s.stride + q0 + s.head_dim]
    });
    let mut acc = [[_mm512_setzero_ps(); C]; R];
    for d in 0..s.head_dim {
        let base = d * s.width + c * LANES;
        let k: [__m512; C] = std::array::from_fn(|v| load(keys, base + v * LANES));
        for (row, q) in acc.iter_mut().zip(&qs) {
            let a = _mm512_set1_ps(q[d]);
            for (sum, k) in row.iter_mut().zip(&k) {
                *sum = _mm512_fmadd_ps(a, *k, *sum);
            }
        }
    }
    let sv = _mm512_set1_ps(scale);
    for (r, row) in acc.iter().enumerate() {
        for (v, sum) in row.iter().enumerate() {
            put(
                out,
                (i + r) * s.width + (c + v) * LANES,
                _mm512_mul_ps(sv, *sum),
            );
        }
    }
}

/// `ctx[i][q0..q0 + d] = Σ_j p[i][j] · v_j` for one head (`v0` the head's first value column).
#[target_feature(enable = "avx,avx2,fma,avx512f")]
fn context(p: &[f32], qkv: &[f32], v0: usize, s: Shape, ctx: &mut [f32], h: usize, q0: usize) {
    let mut i = 0;
    while i < s.n {
        let rows = (s.n - i).min(4);
        by_tile!(
            rows,
            s.head_dim / LANES,
            context_tile(p, qkv, v0, s, ctx, h, q0, i)
        );
        i += rows;
    }
}

/// Context rows `i..i + R` (all `V` vectors of the head), the keys in chunks of [`MM_KC`].
#[inline]
#[target_feature(enable = "avx,avx2,fma,avx512f")]
#[allow(clippy::too_many_arguments)]
fn context_tile<const R: usize, const V: usize>(
    p: &[f32],
    qkv: &[f32],
    v0: usize,
    s: Shape,
    ctx: &mut [f32],
    h: usize,
    q0: usize,
    i: usize,
) {
    let probs: [&[f32]; R] =
        std::array::from_fn(|r| &p[(i + r) * s.width..(i + r) * s.width + s.n]);
    let mut total = [[_mm512_setzero_ps(); V]; R];
    let mut start = 0;
    while start < s.n {
        let end = (start + MM_KC).min(s.n);
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        for j in start..end {
            let at = j * s.stride + v0;
            let v: [__m512; V] = std::array::from_fn(|x| load(qkv, at + x * LANES));
            for (row, pr) in acc.iter_mut().zip(&probs) {
                let a = _mm512_set1_ps(pr[j]);
                for (sum, v) in row.iter_mut().zip(&v) {
                    *sum = _mm512_fmadd_ps(a, *v, *sum);
                }
            }
        }
        if start == 0 {
            total = acc;
        } else {
            for (t, a) in total.iter_mut().zip(&acc) {
                for (t, a) in t.iter_mut().zip(a) {
                    *t = _mm512_add_ps(*a, *t);
                }
            }
        }
        start = end;
    }
    for (r, row) in total.iter().enumerate() {
        for (x, v) in row.iter().enumerate() {
            put(ctx, (i + r) * h + q0 + x * LANES, *v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::elementwise::softmax;
    use crate::local::gemm::tests::matrix;
    use ndarray::linalg::general_mat_mul;
    use ndarray::{ArrayViewMut2, Axis, Slice};

    /// The attention of one sequence through `general_mat_mul` and the row softmax, as the encoder
    /// computed it before [`attend`].
    fn reference(qkv: &ndarray::Array2<f32>, heads: usize, hd: usize, scale: f32) -> Vec<f32> {
        let (n, h) = (qkv.nrows(), heads * hd);
        let mut ctx = ndarray::Array2::<f32>::zeros((n, h));
        let mut buf = vec![0.0f32; n * n];
        for head in 0..heads {
            let cols = |c0: usize| {
                qkv.view()
                    .slice_axis_move(Axis(1), Slice::from(c0 + head * hd..c0 + (head + 1) * hd))
            };
            let (q, k, v) = (cols(0), cols(h), cols(2 * h));
            let Ok(mut probs) = ArrayViewMut2::from_shape((n, n), &mut buf[..]) else {
                panic!("shape");
            };
            general_mat_mul(scale, &q, &k.t(), 0.0, &mut probs);
            if let Some(p) = probs.as_slice_mut() {
                softmax(p, n);
            }
            let mut out = ctx
                .view_mut()
                .slice_axis_move(Axis(1), Slice::from(head * hd..(head + 1) * hd));
            general_mat_mul(1.0, &probs.view(), &v, 0.0, &mut out);
        }
        ctx.into_raw_vec_and_offset().0
    }

    #[test]
    fn attend_gives_the_bits_of_the_general_product() {
        for hd in [16usize, 32, 64] {
            if !available(hd) {
                return;
            }
            let heads = 384 / hd.max(1) / 2;
            let mut scratch = AttendScratch::default();
            for (t, n) in [
                1usize, 2, 3, 5, 15, 16, 17, 31, 64, 100, 255, 256, 257, 300, 512,
            ]
            .into_iter()
            .enumerate()
            {
                // Scores of a realistic spread: inputs of magnitude ~3 as the encoder's are.
                let qkv = matrix(n, 3 * heads * hd, 7 + t as u64) * 6.0;
                let scale = 1.0 / (hd as f32).sqrt();
                let want = reference(&qkv, heads, hd, scale);
                let mut got = vec![f32::NAN; n * heads * hd];
                let Some(q) = qkv.as_slice() else {
                    panic!("contiguous");
                };
                attend(q, n, heads, hd, scale, &mut scratch, &mut got);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "head {hd}, {n} tokens: bits differ from general_mat_mul"
                );
            }
        }
    }
}
