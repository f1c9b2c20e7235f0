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
//! side by side (vectorised, instead of one long chain of dependent additions per row); these
//! element-wise steps live in [`super::elementwise`].

use ndarray::linalg::general_mat_mul;
use std::ops::Range;

use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis, Slice};

use super::elementwise::{gelu, layer_norm, softmax};
use super::gemm::{Kernel, Linear};

/// Encoder settings (the model's `config.json`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BertShape {
    pub hidden: usize,
    pub heads: usize,
    pub eps: f32,
}

impl BertShape {
    /// Values per attention head.
    fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// The attention scores' scale, `1 / √head_dim`.
    fn scale(&self) -> f32 {
        1.0 / (self.head_dim() as f32).sqrt()
    }
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
        l.qkv.apply(b.x.view(), b.qkv.view_mut());
        if !self.attend_avx512(starts, b) {
            self.attend_general(starts, b);
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

    /// The attention of every sequence of the pass (`b.qkv` → `b.ctx`) in [`super::attention`]'s AVX-512
    /// kernels; false, having done nothing, where they do not run (another CPU or head size).
    fn attend_avx512(&self, starts: &[usize], b: &mut Buffers<'_>) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let (h, heads, hd) = (self.shape.hidden, self.shape.heads, self.shape.head_dim());
            if !super::attention::available(hd) {
                return false;
            }
            let (Some(qkv), Some(ctx)) = (b.qkv.as_slice(), b.ctx.as_slice_mut()) else {
                return false;
            };
            for w in starts.windows(2) {
                let (a, e) = (w[0], w[1]);
                super::attention::attend(
                    &qkv[a * 3 * h..e * 3 * h],
                    e - a,
                    heads,
                    hd,
                    self.shape.scale(),
                    b.attend,
                    &mut ctx[a * h..e * h],
                );
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (starts, b);
            false
        }
    }

    /// The attention of every sequence of the pass (`b.qkv` → `b.ctx`) through `general_mat_mul`, head
    /// by head.
    fn attend_general(&self, starts: &[usize], b: &mut Buffers<'_>) {
        let (h, heads, hd) = (self.shape.hidden, self.shape.heads, self.shape.head_dim());
        let scale = self.shape.scale();
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
    #[cfg(target_arch = "x86_64")]
    attend: super::attention::AttendScratch,
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
    #[cfg(target_arch = "x86_64")]
    attend: &'a mut super::attention::AttendScratch,
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
            #[cfg(target_arch = "x86_64")]
            attend: &mut self.attend,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
