//! all-MiniLM-L6-v2 (or any BERT sentence-transformer with mean pooling), in-process.
//!
//! Matches sentence-transformers: word pieces truncated at `max_tokens` (256 for MiniLM), mean pooling over
//! the real tokens, L2 normalisation. The packaged tokenizer.json fixes padding and truncation at 128;
//! both are overridden here (no padding: the encoder packs sequences, see [`super::bert`]; truncation at
//! `max_tokens`).
//!
//! One process holds one encoder per model and setting: a second [`LocalEmbedder::load`] of the same folder
//! with the same `max_tokens`, `batch_size` and `precision` shares the first's weights and encoder thread
//! (a server with several indexes of one model loads it once, and their questions share forward passes);
//! the encoder is freed with its last embedder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use kgrag_types::EmbedKind;
use tokenizers::{Tokenizer, TruncationParams};

use super::batcher::{Batcher, Bounds};
use super::bert::{Bert, BertShape, BertSizes, Weights};
use super::gemm::Kernel;

use super::local_err;
use crate::config::{asset_path, LocalEmbedderConfig};
use crate::error::{LlmError, Result};
use crate::managed::EmbedBackend;

struct Inner {
    tokenizer: Tokenizer,
    batcher: Batcher,
    name: String,
}

/// The keys of a BERT `config.json` the encoder needs.
#[derive(serde::Deserialize)]
struct Config {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    vocab_size: usize,
    max_position_embeddings: usize,
    #[serde(default = "two")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default = "gelu")]
    hidden_act: String,
    #[serde(default = "absolute")]
    position_embedding_type: String,
}

fn two() -> usize {
    2
}

fn default_eps() -> f64 {
    1e-12
}

fn gelu() -> String {
    "gelu".to_owned()
}

fn absolute() -> String {
    "absolute".to_owned()
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
            "{model}: cannot read {}: {e} ({})",
            path.display(),
            crate::config::missing_assets_hint()
        ))
    })
}

/// What makes two loads the same encoder: the folder and the settings that change the vectors or the
/// forward passes.
type LoadKey = (PathBuf, usize, usize, crate::config::EncoderPrecision);

/// The encoders loaded in this process, by what made them (weak: freed with their last embedder).
static LOADED: Mutex<Vec<(LoadKey, Weak<Inner>, usize)>> = Mutex::new(Vec::new());

impl LocalEmbedder {
    /// Loads the model folder `config.model_dir` (default `$KGRAG_ASSETS/all-minilm-l6-v2`), or shares the
    /// encoder this process already holds for the same folder and settings.
    pub fn load(config: &LocalEmbedderConfig) -> Result<Self> {
        let dir = config
            .model_dir
            .clone()
            .unwrap_or_else(|| asset_path("all-minilm-l6-v2"));
        let key: LoadKey = (
            dir.clone(),
            config.max_tokens,
            config.batch_size,
            config.precision,
        );
        // Loads of one key are made one at a time, so that two never both load it.
        let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
        loaded.retain(|(_, inner, _)| inner.strong_count() > 0);
        let live = loaded
            .iter()
            .find(|(k, _, _)| *k == key)
            .and_then(|(_, inner, dim)| Some((inner.upgrade()?, *dim)));
        if let Some((inner, dim)) = live {
            return Ok(Self {
                inner,
                dim,
                batch_size: config.batch_size.max(1),
                truncated: Arc::new(AtomicU64::new(0)),
                dir,
            });
        }
        let made = Self::load_new(config, dir)?;
        loaded.push((key, Arc::downgrade(&made.inner), made.dim));
        Ok(made)
    }

    fn load_new(config: &LocalEmbedderConfig, dir: PathBuf) -> Result<Self> {
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
        tokenizer.with_padding(None);
        if cfg.hidden_act != "gelu" || cfg.position_embedding_type != "absolute" {
            return Err(LlmError::Config(format!(
                "{name}: hidden_act {:?} / position_embedding_type {:?}: only BERT with erf GELU and \
                 absolute positions is supported",
                cfg.hidden_act, cfg.position_embedding_type
            )));
        }
        let weights = read(&dir.join("model.safetensors"), &name)?;
        let parsed = Weights::parse(&weights).map_err(|e| local_err(&name, e))?;
        let kernel = Kernel::for_precision(config.precision);
        let model = Bert::load(
            &parsed,
            BertShape {
                hidden: cfg.hidden_size,
                heads: cfg.num_attention_heads,
                eps: cfg.layer_norm_eps as f32,
            },
            BertSizes {
                vocab: cfg.vocab_size,
                positions: cfg.max_position_embeddings,
                token_types: cfg.type_vocab_size,
                intermediate: cfg.intermediate_size,
                layers: cfg.num_hidden_layers,
            },
            kernel,
        )
        .map_err(|e| local_err(&name, format!("model.safetensors: {e}")))?;
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        // A truncation length other than the model's default changes the vectors, so it becomes part
        // of the name (and so of the response-cache key). So does bfloat16 arithmetic (where it ran);
        // bf16x3's vectors are f32's to about 1e-5 (closer than two f32 machines' recall can tell
        // apart): the same name, so indexes and caches stay portable.
        let mut name = name;
        if max_tokens != crate::config::default_max_len() {
            name = format!("{name}@{max_tokens}");
        }
        if kernel == Kernel::Bf16 {
            name.push_str("@bf16");
        }
        if kernel == Kernel::Int8 {
            name.push_str("@int8");
        }
        let batch_size = config.batch_size.max(1);
        // Merged calls fill a forward pass up to what one configured batch of the longest texts may
        // hold; queries are short, so that is hundreds of them.
        let bounds = Bounds {
            max_tokens: batch_size.saturating_mul(max_tokens),
            max_texts: batch_size.saturating_mul(8),
        };
        let batcher = Batcher::start(model, threads, bounds, &name)
            .map_err(|e| local_err(&name, format!("cannot start the encoder thread: {e}")))?;
        Ok(Self {
            dim: cfg.hidden_size,
            inner: Arc::new(Inner {
                tokenizer,
                batcher,
                name,
            }),
            batch_size,
            truncated: Arc::new(AtomicU64::new(0)),
            dir,
        })
    }

    /// Whether `other` runs on the same encoder (weights and encoder thread) as this embedder: loads of
    /// one folder with the same settings do, while any of them lives.
    pub fn shares_encoder_with(&self, other: &LocalEmbedder) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// How many texts were longer than `max_tokens` word pieces and got truncated.
    pub fn truncated(&self) -> u64 {
        self.truncated.load(Ordering::Relaxed)
    }
}

impl Inner {
    /// Word pieces of `texts`, truncated at the model's limit (and counted when they were).
    fn tokenize(&self, texts: Vec<String>, truncated: &AtomicU64) -> Result<Vec<Vec<u32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| local_err(&self.name, e))?;
        let over = encodings
            .iter()
            .filter(|e| !e.get_overflowing().is_empty())
            .count();
        truncated.fetch_add(over as u64, Ordering::Relaxed);
        Ok(encodings.iter().map(|e| e.get_ids().to_vec()).collect())
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

    fn reads_instructions(&self) -> bool {
        false
    }

    fn batches_in_flight(&self) -> usize {
        1
    }

    fn queues_calls(&self) -> bool {
        true
    }

    async fn embed_batch(&self, texts: &[String], _kind: &EmbedKind) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // Tokenising runs on the caller's own blocking thread; the forward pass is the batcher's, shared
        // with whatever other calls are waiting (see `super::batcher`).
        let inner = Arc::clone(&self.inner);
        let truncated = Arc::clone(&self.truncated);
        let texts = texts.to_vec();
        let seqs = tokio::task::spawn_blocking(move || inner.tokenize(texts, &truncated))
            .await
            .map_err(|e| local_err(&self.inner.name, e))??;
        self.inner
            .batcher
            .embed(seqs)
            .await
            .map_err(|e| local_err(&self.inner.name, e))
    }
}
