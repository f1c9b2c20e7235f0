//! The model-free embedder: [`kgrag_text::hashed_vector`] behind the [`EmbedBackend`] seam, so that it
//! gets the same accounting (and, when configured, the same cache) as the model-backed ones.

use async_trait::async_trait;
use kgrag_types::EmbedKind;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::managed::{EmbedBackend, Limits};

/// Settings of the hashing embedder (`[embedder] provider = "hashing"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashingEmbedderConfig {
    /// Dimensions (default 256).
    #[serde(default = "default_dim")]
    pub dim: usize,
    /// Seed of the feature hash (default 0): another seed is another, equally good, vector space.
    #[serde(default)]
    pub seed: u64,
    /// Concurrency, retries and timeouts (nothing here fails; kept for the common wrapper).
    #[serde(default)]
    pub limits: Limits,
}

fn default_dim() -> usize {
    256
}

impl Default for HashingEmbedderConfig {
    fn default() -> Self {
        Self {
            dim: default_dim(),
            seed: 0,
            limits: Limits::default(),
        }
    }
}

/// The backend: one vector per text, computed on the calling thread.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    config: HashingEmbedderConfig,
    model: String,
}

impl HashingEmbedder {
    /// The embedder of `config` (a dimension of 0 counts as 1).
    pub fn new(config: HashingEmbedderConfig) -> Self {
        let config = HashingEmbedderConfig {
            dim: config.dim.max(1),
            ..config
        };
        let model = format!("hashing-{}-seed{}", config.dim, config.seed);
        Self { config, model }
    }
}

#[async_trait]
impl EmbedBackend for HashingEmbedder {
    fn provider(&self) -> &str {
        "hashing"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn dimension(&self) -> Option<usize> {
        Some(self.config.dim)
    }

    fn max_batch(&self) -> usize {
        4096
    }

    fn reads_instructions(&self) -> bool {
        false
    }

    fn batches_in_flight(&self) -> usize {
        1
    }

    async fn embed_batch(&self, texts: &[String], _kind: &EmbedKind) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| kgrag_text::hashed_vector(t, self.config.dim, self.config.seed))
            .collect())
    }
}
