//! LeanRAG's settings: every key of spec leanrag §2 with its default. In TOML: the `[leanrag]` section.

use kgrag_hierarchy::RelationRule;
pub use kgrag_hierarchy::{ClusterConfig, GmmConfig, Reduction};
pub use kgrag_text::DescriptionVectors;
use serde::{Deserialize, Serialize};

use crate::{LeanragError, Result};

/// Where the base graph G0 comes from (spec §4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum G0Source {
    /// The base layer of HiRAG's graph (its extraction, merge and description summaries; no HiIndex,
    /// communities or reports): what the paper's runs used. Shared with `kgrag-hirag` when both run.
    #[default]
    Hirag,
    /// LeanRAG's own chunking (1024/128 cl100k) and extraction with its merge rules (spec §4.2).
    Native,
}

/// Which extractor runs: the LLM extraction or the offline kit's rule extractor (spec §2 `extraction`).
pub use kgrag_openie::ExtractionMode;

/// Which layers seeds are drawn from (spec §6.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeedLayers {
    /// Base entities (the paper's Eq. 6).
    #[default]
    Base,
    /// Layers ≥ 1, promoted copies and the root included (the reference's shipped script); the best node
    /// per origin is kept.
    Aggregate,
}

/// LeanRAG's settings (spec §2; first value = default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeanragConfig {
    /// Base graph source.
    pub g0: G0Source,
    /// `g0 = "native"`: `llm` or `rules`.
    pub extraction: ExtractionMode,
    /// Descriptions are cut to this many cl100k tokens before embedding (4096).
    pub embed_max_tokens: usize,
    /// How the aggregates' descriptions are embedded: `auto` (the default) composes them from their
    /// sentences' vectors when no chat model writes them, `text` embeds them whole as the reference does,
    /// `sentences` always composes, `all_sentences` composes G0's seed vectors too (see
    /// [`kgrag_text::composed`]; ours).
    pub description_vectors: DescriptionVectors,
    /// k floor = ⌊N / cluster_size⌋ (20).
    pub cluster_size: usize,
    /// The clustering round of every layer: the reduction (`umap`), the mixtures' fit and the BIC scan
    /// (spec §2's `reduction`, `gmm_*` and `bic_rel_tol`), in TOML the `[leanrag.cluster]` table. HiRAG's
    /// settings hold the same [`ClusterConfig`]; kgrag's configuration file has one `[cluster]` section
    /// that both share.
    pub cluster: ClusterConfig,
    /// Stop when a layer has at most this many nodes (2).
    pub min_layer_nodes: usize,
    /// Stop when a layer splits into at most this many clusters (4).
    pub min_clusters: usize,
    /// Layer cap; unset = round(log₂₀ N₀) + 1.
    pub max_depth: Option<usize>,
    /// Aggregation input budget, cl100k description tokens (12000: 6000 entities + 6000 relations).
    pub aggregate_prompt_tokens: usize,
    /// `count_threshold` (paper) or `length_threshold` (reference).
    pub relation_rule: RelationRule,
    /// τ of the count rule (3).
    pub tau: usize,
    /// Token budget per remaining level of the length rule (80).
    pub length_per_level: usize,
    /// An LLM relation sentence may have 40 · (layer + 1) words.
    pub relation_words_per_level: usize,
    /// Seeds from the base layer or the aggregate layers.
    pub seed_layers: SeedLayers,
    /// Seed entities (10).
    pub top_n: usize,
    /// Source chunks in the context (5).
    pub top_c: usize,
    /// Show the aggregates' findings in the context.
    pub include_findings: bool,
    /// Answer length and format ("Multiple Paragraphs").
    pub response_type: String,
    /// The answer's system message is cut to this many cl100k tokens (31000).
    pub system_prompt_max_tokens: usize,
    /// Answer temperature (0; the reference leaves the server default).
    pub temperature: f32,
    /// Model calls in flight at once (never changes the result) (4); the facade raises it to the chat
    /// model's own limit.
    pub concurrency: usize,
    /// Texts per embedding call (64).
    pub embed_batch: usize,
    /// Print each aggregation round to stderr.
    pub log_layers: bool,
}

impl Default for LeanragConfig {
    fn default() -> Self {
        let h = kgrag_hierarchy::LeanragConfig::default();
        Self {
            g0: G0Source::Hirag,
            extraction: ExtractionMode::Llm,
            embed_max_tokens: 4096,
            description_vectors: DescriptionVectors::Auto,
            cluster_size: h.cluster_size,
            cluster: ClusterConfig::default(),
            min_layer_nodes: h.min_layer_nodes,
            min_clusters: h.min_clusters,
            max_depth: None,
            aggregate_prompt_tokens: h.aggregate_prompt_tokens,
            relation_rule: RelationRule::CountThreshold,
            tau: h.tau,
            length_per_level: h.length_per_level,
            relation_words_per_level: h.relation_words_per_level,
            seed_layers: SeedLayers::Base,
            top_n: 10,
            top_c: 5,
            include_findings: false,
            response_type: "Multiple Paragraphs".to_owned(),
            system_prompt_max_tokens: 31_000,
            temperature: 0.0,
            concurrency: 4,
            embed_batch: 64,
            log_layers: true,
        }
    }
}

impl LeanragConfig {
    /// The UltraDomain profiles of the paper (Table 6): `(top_n, top_c)` per dataset.
    pub fn benchmark_profile(dataset: &str) -> Self {
        let (top_n, top_c) = match dataset {
            "cs" => (10, 10),
            "legal" => (15, 10),
            _ => (10, 5),
        };
        Self {
            top_n,
            top_c,
            ..Self::default()
        }
    }

    /// Whether the build composes the aggregates' vectors from sentence vectors (see
    /// [`DescriptionVectors`]), given whether a chat model writes the descriptions: never for vectors
    /// retrieval searches unless `all_sentences` asks — with `seed_layers = "aggregate"` the aggregates are
    /// seeds, so `auto` and `sentences` embed them whole.
    pub fn composes_descriptions(&self, model_writes_descriptions: bool) -> bool {
        self.description_vectors.composes(model_writes_descriptions)
            && (self.seed_layers == SeedLayers::Base
                || self.description_vectors.composes_entities())
    }

    /// Checks the ranges the pipeline relies on.
    pub fn validate(&self) -> Result<()> {
        if self.top_n == 0 {
            return Err(LeanragError::Config("top_n must be at least 1".into()));
        }
        if self.embed_max_tokens == 0 {
            return Err(LeanragError::Config(
                "embed_max_tokens must be at least 1".into(),
            ));
        }
        self.hierarchy().cluster.validate()?;
        Ok(())
    }

    /// The aggregation settings of `kgrag-hierarchy`.
    pub fn hierarchy(&self) -> kgrag_hierarchy::LeanragConfig {
        kgrag_hierarchy::LeanragConfig {
            cluster: self.cluster,
            cluster_size: self.cluster_size,
            min_layer_nodes: self.min_layer_nodes,
            min_clusters: self.min_clusters,
            max_depth: self.max_depth,
            relation_rule: self.relation_rule,
            tau: self.tau,
            length_per_level: self.length_per_level,
            relation_words_per_level: self.relation_words_per_level,
            aggregate_prompt_tokens: self.aggregate_prompt_tokens,
            concurrency: self.concurrency,
            embed_batch: self.embed_batch,
            log_layers: self.log_layers,
        }
    }
}
