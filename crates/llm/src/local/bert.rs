//! The BERT encoder forward pass of a sentence embedder (all-MiniLM-L6-v2 and its kin), on packed
//! sequences.
//!
//! Every sequence of a batch keeps only its own tokens: the linear layers run on the rows of all sequences
//! stacked (no padding rows, no attention mask: a sequence attends to its own tokens only, which is what
//! the mask of a padded batch computes), attention runs per sequence and head. A batch is split into one
//! group of sequences per core (balanced by cost), each group computed on its own thread with
//! single-threaded matrix products (the linear layers against weights packed at load, see
//! [`super::gemm`]; attention with matrixmultiply's kernels), so no core waits on another inside a layer;
//! a group goes through the layers in passes of at most [`PASS_ROWS`] rows, so memory does not grow with
//! the batch. GELU uses a rational approximation of erf (error below 5e-7) and the softmax a polynomial
//! exp (about 1 ulp), both written to vectorise; softmax and layer norm take their sums in 16 lanes
//! side by side (vectorised, instead of one long chain of dependent additions per row).

use ndarray::linalg::general_mat_mul;
use std::ops::Range;

use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis, Slice};

use super::gemm::{Kernel, Linear};

/// Encoder settings (the model's `config.json`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BertShape {
    pub hidden: usize,
    pub heads: usize,
    pub eps: f32,
}

/// Table sizes of an encoder (the model's `config.json`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BertSizes {
    pub vocab: usize,
    pub positions: usize,
    pub token_types: usize,
    pub intermediate: usize,
    pub layers: usize,
}

struct Layer {
    /// Query, key and value weights stacked: (3·hidden, hidden), `y = x · Wᵀ + b`.
    qkv: Linear,
    out: Linear,
    ln1: (Vec<f32>, Vec<f32>),
    inter: Linear,
    down: Linear,
    ln2: (Vec<f32>, Vec<f32>),
}

/// A loaded encoder.
pub(crate) struct Bert {
    shape: BertShape,
    word: Array2<f32>,
    position: Array2<f32>,
    token_type: Vec<f32>,
    ln0: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

/// At most this many rows (tokens of whole sequences) go through the layers in one pass: a group is
/// computed in passes of whole sequences up to this size (one longer sequence alone), so its buffers
/// stay a bounded size (2,048 rows of MiniLM: 31 MB) whatever the batch size (one pass over a batch of
/// 64 texts of 256 tokens took 126 MB a thread; over 1,024 such texts it would take 2 GB). A row's values do
/// not depend on the other rows of its pass (the kernels' `a_row_gives_the_same_bits_at_any_position`),
/// so the passes give the same bits as one pass over the whole group.
const PASS_ROWS: usize = 2048;

/// Reads the f32 tensors of a BERT checkpoint in safetensors format.
pub(crate) struct Weights<'a> {
    tensors: safetensors::SafeTensors<'a>,
    prefix: String,
}

impl<'a> Weights<'a> {
    /// Parses `bytes`; tensor names may carry a `bert.` prefix (checkpoints saved from a task model).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        let tensors = safetensors::SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let prefix = if tensors
            .names()
            .iter()
            .any(|n| n.starts_with("bert.embeddings."))
        {
            "bert.".to_owned()
        } else {
            String::new()
        };
        Ok(Self { tensors, prefix })
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let t = self
            .tensors
            .tensor(&full)
            .map_err(|e| format!("tensor {full}: {e}"))?;
        if t.dtype() != safetensors::Dtype::F32 {
            return Err(format!("tensor {full}: {:?}, expected F32", t.dtype()));
        }
        if t.shape() != shape {
            return Err(format!(
                "tensor {full}: shape {:?}, expected {shape:?}",
                t.shape()
            ));
        }
        Ok(t.data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Array2<f32>, String> {
        Array2::from_shape_vec((rows, cols), self.get(name, &[rows, cols])?)
            .map_err(|e| format!("tensor {name}: {e}"))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>, String> {
        self.get(name, &[len])
    }

    fn norm(&self, name: &str, len: usize) -> Result<(Vec<f32>, Vec<f32>), String> {
        Ok((
            self.vector(&format!("{name}.weight"), len)?,
            self.vector(&format!("{name}.bias"), len)?,
        ))
    }
}

impl Bert {
    /// Loads the encoder; `vocab`, `positions`, `intermediate` and `layers` from the model's config.
    /// `kernel` (from [`Kernel::for_precision`]) computes the linear layers.
    pub fn load(
        w: &Weights<'_>,
        shape: BertShape,
        sizes: BertSizes,
        kernel: Kernel,
    ) -> Result<Self, String> {
        let BertSizes {
            vocab,
            positions,
            token_types,
            intermediate,
            layers,
        } = sizes;
        let h = shape.hidden;
        if shape.heads == 0 || !h.is_multiple_of(shape.heads) {
            return Err(format!(
                "hidden size {h} is not a multiple of {} heads",
                shape.heads
            ));
        }
        let word = w.matrix("embeddings.word_embeddings.weight", vocab, h)?;
        let position = w.matrix("embeddings.position_embeddings.weight", positions, h)?;
        // Every token has type 0 (single-segment inputs).
        let types = w.get("embeddings.token_type_embeddings.weight", &[token_types, h])?;
        let token_type = types
            .get(..h)
            .map(<[f32]>::to_vec)
            .ok_or_else(|| "embeddings.token_type_embeddings.weight has no rows".to_owned())?;
        let ln0 = w.norm("embeddings.LayerNorm", h)?;
        let mut out = Vec::with_capacity(layers);
        // How large a layer norm's outputs get, channel by channel: |γ| + |β| (the int8 kernel
        // smooths the products that take them; see `super::int8`).
        let reach = |(g, b): &(Vec<f32>, Vec<f32>)| -> Option<Vec<f32>> {
            Some(g.iter().zip(b).map(|(g, b)| g.abs() + b.abs()).collect())
        };
        let mut before = reach(&ln0);
        for i in 0..layers {
            let p = format!("encoder.layer.{i}.");
            let part = |n: &str| w.matrix(&format!("{p}attention.self.{n}.weight"), h, h);
            let (q, k, v) = (part("query")?, part("key")?, part("value")?);
            let qkv = ndarray::concatenate(Axis(0), &[q.view(), k.view(), v.view()])
                .map_err(|e| e.to_string())?;
            let mut qkv_b = Vec::with_capacity(3 * h);
            for n in ["query", "key", "value"] {
                qkv_b.extend(w.vector(&format!("{p}attention.self.{n}.bias"), h)?);
            }
            let dense = |name: &str, rows: usize, cols: usize| -> Result<Linear, String> {
                Ok(Linear::new(
                    w.matrix(&format!("{p}{name}.weight"), rows, cols)?,
                    w.vector(&format!("{p}{name}.bias"), rows)?,
                    kernel,
                ))
            };
            let ln1 = w.norm(&format!("{p}attention.output.LayerNorm"), h)?;
            let ln2 = w.norm(&format!("{p}output.LayerNorm"), h)?;
            let inter = Linear::for_inputs(
                w.matrix(&format!("{p}intermediate.dense.weight"), intermediate, h)?,
                w.vector(&format!("{p}intermediate.dense.bias"), intermediate)?,
                kernel,
                reach(&ln1).as_deref(),
            );
            out.push(Layer {
                qkv: Linear::for_inputs(qkv, qkv_b, kernel, before.as_deref()),
                out: dense("attention.output.dense", h, h)?,
                ln1,
                inter,
                down: dense("output.dense", h, intermediate)?,
                ln2,
            });
            before = out.last().and_then(|l: &Layer| reach(&l.ln2));
        }
        Ok(Self {
            shape,
            word,
            position,
            token_type,
            ln0,
            layers: out,
        })
    }

    /// Mean-pooled, L2-normalised embeddings of the token id sequences `seqs` (each non-empty and at most
    /// the model's positions long), computed on up to `threads` threads.
    pub fn embed(&self, seqs: &[Vec<u32>], threads: usize) -> Result<Vec<Vec<f32>>, String> {
        for (i, s) in seqs.iter().enumerate() {
            if s.is_empty() || s.len() > self.position.nrows() {
                return Err(format!(
                    "sequence {i} has {} tokens (1 to {} allowed)",
                    s.len(),
                    self.position.nrows()
                ));
            }
            if let Some(&bad) = s.iter().find(|&&t| t as usize >= self.word.nrows()) {
                return Err(format!(
                    "sequence {i}: token id {bad} is outside the vocabulary"
                ));
            }
        }
        let groups = split(seqs, threads.max(1));
        if groups.len() <= 1 {
            return self.embed_group(seqs);
        }
        let results: Vec<Vec<Vec<f32>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = groups
                .iter()
                .map(|g| scope.spawn(move || self.embed_group(&seqs[g.clone()])))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| "an encoder thread panicked".to_owned())?
                })
                .collect::<Result<_, _>>()
        })?;
        Ok(results.into_iter().flatten().collect())
    }

    /// The forward pass of one group on the calling thread, in passes of at most [`PASS_ROWS`] rows
    /// through one set of buffers.
    fn embed_group(&self, seqs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, String> {
        let mut scratch = Scratch::default();
        let mut out = Vec::with_capacity(seqs.len());
        let mut first = 0;
        while first < seqs.len() {
            let mut end = first + 1;
            let mut rows = seqs[first].len();
            while let Some(s) = seqs.get(end) {
                if rows + s.len() > PASS_ROWS {
                    break;
                }
                rows += s.len();
                end += 1;
            }
            self.pass(&seqs[first..end], &mut scratch, &mut out)?;
            first = end;
        }
        Ok(out)
    }

    /// One pass over `seqs`: their pooled vectors appended to `out`.
    fn pass(
        &self,
        seqs: &[Vec<u32>],
        sc: &mut Scratch,
        out: &mut Vec<Vec<f32>>,
    ) -> Result<(), String> {
        let h = self.shape.hidden;
        let total: usize = seqs.iter().map(Vec::len).sum();
        let mut starts = Vec::with_capacity(seqs.len() + 1);
        starts.push(0);
        for s in seqs {
            starts.push(starts.last().copied().unwrap_or(0) + s.len());
        }
        let longest = seqs.iter().map(Vec::len).max().unwrap_or(0);
        let inter = self.layers.first().map_or(0, |l| l.inter.outputs());
        let mut b = sc
            .buffers(total, h, inter, longest)
            .ok_or_else(|| format!("no buffers of {total} rows could be shaped"))?;
        for (s, &start) in seqs.iter().zip(&starts) {
            for (p, &t) in s.iter().enumerate() {
                let mut row = b.x.row_mut(start + p);
                let word = self.word.row(t as usize);
                let pos = self.position.row(p);
                for (((o, w), q), ty) in row.iter_mut().zip(word).zip(pos).zip(&self.token_type) {
                    *o = w + q + ty;
                }
            }
        }
        layer_norm(b.x.view_mut(), &self.ln0, self.shape.eps);
        for layer in &self.layers {
            self.layer(layer, &starts, &mut b);
        }
        out.extend(starts.windows(2).map(|w| {
            let rows = b.x.slice_axis(Axis(0), Slice::from(w[0]..w[1]));
            let n = (w[1] - w[0]).max(1) as f32;
            let mut v: Vec<f32> = rows.sum_axis(Axis(0)).iter().map(|s| s / n).collect();
            let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|a| *a /= norm);
            v
        }));
        Ok(())
    }

    fn layer(&self, l: &Layer, starts: &[usize], b: &mut Buffers<'_>) {
        let h = self.shape.hidden;
        let heads = self.shape.heads;
        let hd = h / heads;
        let scale = 1.0 / (hd as f32).sqrt();
        l.qkv.apply(b.x.view(), b.qkv.view_mut());
        for w in starts.windows(2) {
            let (a, e) = (w[0], w[1]);
            let n = e - a;
            for head in 0..heads {
                let q = block(b.qkv.view(), a..e, head * hd..(head + 1) * hd);
                let k = block(b.qkv.view(), a..e, h + head * hd..h + (head + 1) * hd);
                let v = block(
                    b.qkv.view(),
                    a..e,
                    2 * h + head * hd..2 * h + (head + 1) * hd,
                );
                // The first n² values of the buffer as one contiguous n × n matrix.
                let Ok(mut probs) = ArrayViewMut2::from_shape((n, n), &mut b.scores[..n * n])
                else {
                    continue;
                };
                general_mat_mul(scale, &q, &k.t(), 0.0, &mut probs);
                if let Some(p) = probs.as_slice_mut() {
                    softmax(p, n);
                }
                let mut ctx = b
                    .ctx
                    .slice_axis_mut(Axis(0), Slice::from(a..e))
                    .slice_axis_move(Axis(1), Slice::from(head * hd..(head + 1) * hd));
                general_mat_mul(1.0, &probs.view(), &v, 0.0, &mut ctx);
            }
        }
        // Attention output, residual, norm.
        l.out.apply(b.ctx.view(), b.tmp.view_mut());
        b.tmp += &b.x;
        layer_norm(b.tmp.view_mut(), &l.ln1, self.shape.eps);
        // Feed-forward, residual, norm.
        l.inter.apply(b.tmp.view(), b.inter.view_mut());
        if let Some(v) = b.inter.as_slice_mut() {
            gelu(v);
        }
        l.down.apply(b.inter.view(), b.x.view_mut());
        b.x += &b.tmp;
        layer_norm(b.x.view_mut(), &l.ln2, self.shape.eps);
    }
}

/// The storage of a group's pass buffers, reused by its passes (grown to the largest).
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    qkv: Vec<f32>,
    scores: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    inter: Vec<f32>,
}

/// One pass's buffers: the layer input and output `x` (rows × hidden), the stacked query, key and value
/// rows, room for one sequence's n × n attention probabilities, the attention output, the residual sum
/// and the feed-forward's intermediate rows.
struct Buffers<'a> {
    x: ArrayViewMut2<'a, f32>,
    qkv: ArrayViewMut2<'a, f32>,
    scores: &'a mut [f32],
    ctx: ArrayViewMut2<'a, f32>,
    tmp: ArrayViewMut2<'a, f32>,
    inter: ArrayViewMut2<'a, f32>,
}

impl Scratch {
    /// The buffers of a pass of `rows` rows whose longest sequence has `longest` rows (`None` only if a
    /// shape could not be made, which the sizes rule out).
    fn buffers(
        &mut self,
        rows: usize,
        h: usize,
        inter: usize,
        longest: usize,
    ) -> Option<Buffers<'_>> {
        fn part(v: &mut Vec<f32>, rows: usize, cols: usize) -> Option<ArrayViewMut2<'_, f32>> {
            let len = rows * cols;
            if v.len() < len {
                v.resize(len, 0.0);
            }
            ArrayViewMut2::from_shape((rows, cols), &mut v[..len]).ok()
        }
        if self.scores.len() < longest * longest {
            self.scores.resize(longest * longest, 0.0);
        }
        Some(Buffers {
            x: part(&mut self.x, rows, h)?,
            qkv: part(&mut self.qkv, rows, 3 * h)?,
            scores: &mut self.scores[..],
            ctx: part(&mut self.ctx, rows, h)?,
            tmp: part(&mut self.tmp, rows, h)?,
            inter: part(&mut self.inter, rows, inter)?,
        })
    }
}

/// Contiguous groups of `seqs`, one per thread, with about equal cost (linear layers ∝ tokens,
/// attention ∝ tokens²); fewer groups when the batch is small.
fn split(seqs: &[Vec<u32>], threads: usize) -> Vec<std::ops::Range<usize>> {
    let cost = |s: &Vec<u32>| {
        let n = s.len() as f64;
        n * 1000.0 + n * n * 2.0
    };
    let total: f64 = seqs.iter().map(cost).sum();
    let total_tokens: usize = seqs.iter().map(Vec::len).sum();
    // Below a few hundred tokens a second thread costs more than it saves.
    let threads = threads.min(seqs.len()).min(total_tokens / 64).max(1);
    let mut out = Vec::with_capacity(threads);
    let mut start = 0;
    let mut acc = 0.0;
    for (i, s) in seqs.iter().enumerate() {
        acc += cost(s);
        let done = out.len() + 1;
        if done < threads && acc >= total * done as f64 / threads as f64 {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < seqs.len() {
        out.push(start..seqs.len());
    }
    out
}

/// The view of rows `r` and columns `c` of `m`.
fn block(m: ArrayView2<'_, f32>, r: Range<usize>, c: Range<usize>) -> ArrayView2<'_, f32> {
    m.slice_axis_move(Axis(0), Slice::from(r))
        .slice_axis_move(Axis(1), Slice::from(c))
}

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
        fn $name($($arg: $ty),*) {
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

    #[test]
    fn split_balances_and_keeps_order() {
        let seqs: Vec<Vec<u32>> = (0..10).map(|i| vec![1; 50 + i * 10]).collect();
        let g = split(&seqs, 2);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].start, 0);
        assert_eq!(g[1].end, 10);
        assert_eq!(g[0].end, g[1].start);
        let tiny: Vec<Vec<u32>> = vec![vec![1; 5]; 3];
        assert_eq!(split(&tiny, 2).len(), 1, "small batches stay on one thread");
        assert!(split(&[], 2).iter().all(|r| r.is_empty()));
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
