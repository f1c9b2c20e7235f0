//! all-MiniLM-L6-v2 (or any BERT sentence-transformer with mean pooling) on candle.
//!
//! Matches sentence-transformers: word pieces truncated at `max_tokens` (256 for MiniLM), mean pooling over
//! the attention mask, L2 normalisation. The packaged tokenizer.json fixes padding and truncation at 128;
//! both are overridden here (longest-in-batch padding, truncation at `max_tokens`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use kgrag_types::EmbedKind;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::local_err;
use crate::config::{assets_dir, LocalEmbedderConfig};
use crate::error::{LlmError, Result};
use crate::managed::EmbedBackend;

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    name: String,
}

/// A BERT sentence embedder running in-process. Query instructions are ignored (MiniLM has none), so query
/// and document vectors of the same text are equal.
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    dim: usize,
    batch_size: usize,
    truncated: Arc<AtomicU64>,
    dir: PathBuf,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dir", &self.dir)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path, model: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        LlmError::Config(format!(
            "{model}: cannot read {}: {e} (run `cargo xtask fetch-assets`, or set KGRAG_ASSETS)",
            path.display()
        ))
    })
}

impl LocalEmbedder {
    /// Loads the model folder `config.model_dir` (default `$KGRAG_ASSETS/all-minilm-l6-v2`).
    pub fn load(config: &LocalEmbedderConfig) -> Result<Self> {
        let dir = config
            .model_dir
            .clone()
            .unwrap_or_else(|| assets_dir().join("all-minilm-l6-v2"));
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bert".to_owned());
        let cfg: Config = serde_json::from_slice(&read(&dir.join("config.json"), &name)?)
            .map_err(|e| LlmError::Config(format!("{name}: config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read(&dir.join("tokenizer.json"), &name)?)
            .map_err(|e| LlmError::Config(format!("{name}: tokenizer.json: {e}")))?;
        let max_tokens = config.max_tokens.clamp(2, cfg.max_position_embeddings);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| local_err(&name, e))?;
        let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(0);
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id,
            pad_token: "[PAD]".to_owned(),
            ..PaddingParams::default()
        }));
        let device = Device::Cpu;
        let weights = read(&dir.join("model.safetensors"), &name)?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| local_err(&name, e))?;
        let model = BertModel::load(vb, &cfg).map_err(|e| local_err(&name, e))?;
        Ok(Self {
            dim: cfg.hidden_size,
            inner: Arc::new(Inner {
                model,
                tokenizer,
                device,
                // A truncation length other than the model's default changes the vectors, so it becomes
                // part of the name (and so of the response-cache key).
                name: if max_tokens == crate::config::default_max_len() {
                    name
                } else {
                    format!("{name}@{max_tokens}")
                },
            }),
            batch_size: config.batch_size.max(1),
            truncated: Arc::new(AtomicU64::new(0)),
            dir,
        })
    }

    /// How many texts were longer than `max_tokens` word pieces and got truncated.
    pub fn truncated(&self) -> u64 {
        self.truncated.load(Ordering::Relaxed)
    }
}

impl Inner {
    fn embed(&self, texts: &[String], truncated: &AtomicU64) -> Result<Vec<Vec<f32>>> {
        let err = |e: &dyn std::fmt::Display| local_err(&self.name, e);
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| err(&e))?;
        let over = encodings
            .iter()
            .filter(|e| !e.get_overflowing().is_empty())
            .count();
        truncated.fetch_add(over as u64, Ordering::Relaxed);
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.len());
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device).map_err(|e| err(&e))?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device).map_err(|e| err(&e))?;
        let type_ids = ids.zeros_like().map_err(|e| err(&e))?;
        let hidden = self
            .model
            .forward(&ids, &type_ids, Some(&mask))
            .map_err(|e| err(&e))?;
        // Mean over real tokens: sum(hidden * mask) / sum(mask), then L2-normalise.
        let pooled = (|| -> candle_core::Result<Tensor> {
            let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&m)?.sum(1)?;
            let counts = m.sum(1)?.clamp(1e-9f32, f32::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norm = mean
                .sqr()?
                .sum_keepdim(1)?
                .sqrt()?
                .clamp(1e-12f32, f32::MAX)?;
            mean.broadcast_div(&norm)
        })()
        .map_err(|e| err(&e))?;
        pooled.to_vec2::<f32>().map_err(|e| err(&e))
    }
}

#[async_trait]
impl EmbedBackend for LocalEmbedder {
    fn provider(&self) -> &str {
        "local"
    }

    fn model(&self) -> &str {
        &self.inner.name
    }

    fn dimension(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn max_batch(&self) -> usize {
        self.batch_size
    }

    async fn embed_batch(&self, texts: &[String], _kind: &EmbedKind) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inner = Arc::clone(&self.inner);
        let truncated = Arc::clone(&self.truncated);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || inner.embed(&texts, &truncated))
            .await
            .map_err(|e| local_err(&self.inner.name, e))?
    }
}
