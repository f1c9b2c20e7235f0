//! HiRAG's settings: every key of spec hirag §2 with its default, plus the choices this crate adds (the
//! base-graph source, the OpenIE description budget, concurrency). In TOML they are the `[hirag]` section.

use kgrag_community::{HierarchicalConfig, LeidenConfig};
use kgrag_hierarchy::SparsityRule;
pub use kgrag_hierarchy::{ClusterConfig, GmmConfig, Reduction};
use kgrag_openie::Gleaning;
pub use kgrag_text::DescriptionVectors;
use serde::{Deserialize, Serialize};

use crate::{HiragError, Result};

/// Where the base entity–relation graph comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaseSource {
    /// Chunk 1200/100 (o200k) and run the two-stage entity–relation extraction (LLM, or the rule extractor
    /// offline), then HiRAG's name normalisation and merge (spec §4).
    #[default]
    Extract,
    /// The dataset's HippoRAG OpenIE triples, without an LLM: one entity per phrase (described by its facts
    /// written as sentences within `openie_description_tokens`), one relation per fact pair (described by
    /// the facts, weight = occurrences, sources = the chunks they occur in), one chunk per passage — so that
    /// HiRAG runs on the very triples HippoRAG 2 uses.
    OpenieCache,
}

/// Which extractor runs: the LLM extraction or the offline kit's rule extractor (spec §2 `extraction`).
pub use kgrag_openie::ExtractionMode;

/// The text embedded for clustering a base entity (spec §5.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterDescription {
    /// The reference: the description of the first record of the last chunk (in chunk order) that names
    /// the entity.
    #[default]
    LastChunkFirstRecord,
    /// The merged description of §4.4.
    Merged,
}

/// What HiRAG's entity vectors (the ones retrieval searches) embed for an entity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityText {
    /// `description` without a chat model (offline: the descriptions are the rule extractor's or the
    /// OpenIE facts' sentences, which the reference never reads), `name_description` with one.
    #[default]
    Auto,
    /// The reference's text: the name in double quotes, then the description, no separator.
    NameDescription,
    /// The description alone (the name when the description is blank): the text LeanRAG embeds for its
    /// seeds, so the two methods share one embedding of each entity (ours; a departure from the
    /// reference's text).
    Description,
}

impl EntityText {
    /// Whether the name is embedded with the description, given whether a chat model is configured.
    pub fn with_name(self, has_chat_model: bool) -> bool {
        match self {
            EntityText::Auto => has_chat_model,
            EntityText::NameDescription => true,
            EntityText::Description => false,
        }
    }
}

/// Which edges the bridge path contributes (spec §7.2 step 6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeEdges {
    /// The reference: every graph edge with both endpoints among the path's nodes.
    #[default]
    AllAmongPathNodes,
    /// Only edges between consecutive path nodes (never across a no-path jump).
    PathOnly,
}

/// A retrieval mode of spec §7.3.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// HiRetrieval: backgrounds (reports), the bridge's reasoning path, entities and source documents.
    #[default]
    Hi,
    /// Local knowledge only: entities, their relations and sources.
    HiLocal,
    /// Global knowledge only: community reports and sources.
    HiGlobal,
    /// The bridge only: reasoning path and sources.
    HiBridge,
    /// Local and global without the bridge (nano-graphrag's local search on this graph).
    HiNobridge,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 5] = [
        Mode::Hi,
        Mode::HiLocal,
        Mode::HiGlobal,
        Mode::HiBridge,
        Mode::HiNobridge,
    ];

    /// The bench's method name (`hirag`, `hirag-local`, …; design §6).
    pub fn method_name(self) -> &'static str {
        match self {
            Mode::Hi => "hirag",
            Mode::HiLocal => "hirag-local",
            Mode::HiGlobal => "hirag-global",
            Mode::HiBridge => "hirag-bridge",
            Mode::HiNobridge => "hirag-nobridge",
        }
    }

    /// The mode of a bench method name.
    pub fn from_method_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.method_name() == name)
    }
}

/// HiRAG's settings (spec §2; first value = default). Budgets are o200k tokens unless named otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HiragConfig {
    /// Where the base graph comes from (ours).
    pub base: BaseSource,
    /// Chunk window in o200k tokens (1200).
    pub chunk_token_size: usize,
    /// Chunk overlap (100).
    pub chunk_overlap: usize,
    /// `llm` or `rules` (the offline kit).
    pub extraction: ExtractionMode,
    /// Gleaning: `always` (Ref) or `gated` (Ref-later).
    pub gleaning: Gleaning,
    /// Gleaning rounds per stage (1).
    pub max_gleaning: usize,
    /// Entity types offered to the extractor and meta attributes of the summary entities.
    pub entity_types: Vec<String>,
    /// A merged description of at least this many o200k tokens is summarised (500).
    pub summary_trigger_tokens: usize,
    /// What is embedded for clustering.
    pub cluster_description: ClusterDescription,
    /// How the descriptions the hierarchy clusters and summarises are embedded: `auto` (the default)
    /// composes them from their sentences' vectors when no chat model writes them, `text` embeds them
    /// whole as the reference does, `sentences` always composes, `all_sentences` composes the entity
    /// vectors retrieval searches too (see [`kgrag_text::composed`]; ours). Under `base = "openie_cache"`
    /// a composed fact sentence takes the vector of HippoRAG 2's text of the fact
    /// ([`fact_sentence_aliases`](crate::fact_sentence_aliases)), so each fact is embedded once.
    pub description_vectors: DescriptionVectors,
    /// What the entity vectors retrieval searches embed: `auto` (the default) embeds the description
    /// alone — LeanRAG's seed text, one embedding for both methods — without a chat model, and the
    /// reference's `"NAME"` + description with one; `name_description` and
    /// `description` force one (see [`EntityText`]).
    pub entity_text: EntityText,
    /// The clustering round of every layer: the reduction (`umap`), the mixtures' fit and the BIC scan
    /// (spec §2's `reduction`, `gmm_*` and `bic_rel_tol`), in TOML the `[hirag.cluster]` table. LeanRAG's
    /// settings hold the same [`ClusterConfig`]; kgrag's configuration file has one `[cluster]` section
    /// that both share.
    pub cluster: ClusterConfig,
    /// Soft membership threshold p(c|x) > 0.1.
    pub cluster_threshold: f64,
    /// Stop when a layer's sparsity reaches this (0.98).
    pub sparsity_stop: f64,
    /// Stop when sparsity changes by at most this fraction (0.05).
    pub sparsity_change_stop: f64,
    /// The sparsity the first layer is compared with (0.01).
    pub initial_sparsity: f64,
    /// Layer cap (50).
    pub max_layers: usize,
    /// Cluster prompt cap in cl100k tokens of member names and descriptions (60000).
    pub max_cluster_prompt_tokens: usize,
    /// Share kept per subsampling step of an oversized cluster (0.8).
    pub subsample_ratio: f64,
    /// Seed of the subsampling (224).
    pub seed: u64,
    /// Communities of at least this many nodes are split again (10).
    pub leiden_max_cluster_size: usize,
    /// Leiden's seed (0xDEADBEEF).
    pub leiden_seed: u64,
    /// Leiden iterations per run: 1 is graspologic's (the reference's) single pass; the default iterates
    /// until the partition is stable (kgrag-community's default).
    pub leiden_max_iterations: usize,
    /// Community-report input budget (32768).
    pub report_context_tokens: usize,
    /// Entities retrieved (20; UltraDomain runs used 10).
    pub top_k: usize,
    /// Key entities per community for the bridge (10).
    pub top_m: usize,
    /// Communities of level ≤ this are used (2).
    pub level: u32,
    /// Backgrounds / reports budget (12500).
    pub reports_budget: usize,
    /// Reasoning-path budget (12500).
    pub bridge_budget: usize,
    /// Local relations budget (20000).
    pub local_relations_budget: usize,
    /// Source documents budget (20000).
    pub text_units_budget: usize,
    /// Entity hits below this cosine are dropped (0.2).
    pub cosine_floor: f32,
    /// Answer length and format asked of the model ("Multiple Paragraphs").
    pub response_type: String,
    /// Keep only the top community.
    pub community_single_one: bool,
    /// Which edges the bridge contributes.
    pub bridge_edges: BridgeEdges,
    /// `base = "openie_cache"`: an entity's description keeps its fact sentences while they fit this many
    /// o200k tokens (at least one) (ours, 200).
    pub openie_description_tokens: usize,
    /// Model calls in flight at once (results never depend on it) (4); the facade raises it to the chat
    /// model's own limit.
    pub concurrency: usize,
    /// Texts per embedding call (64).
    pub embed_batch: usize,
    /// Print each HiIndex round to stderr.
    pub log_layers: bool,
}

impl Default for HiragConfig {
    fn default() -> Self {
        Self {
            base: BaseSource::Extract,
            chunk_token_size: 1200,
            chunk_overlap: 100,
            extraction: ExtractionMode::Llm,
            gleaning: Gleaning::Always,
            max_gleaning: 1,
            entity_types: kgrag_hierarchy::HiragConfig::default().entity_types,
            summary_trigger_tokens: 500,
            cluster_description: ClusterDescription::LastChunkFirstRecord,
            description_vectors: DescriptionVectors::Auto,
            entity_text: EntityText::Auto,
            cluster: ClusterConfig::default(),
            cluster_threshold: 0.1,
            sparsity_stop: 0.98,
            sparsity_change_stop: 0.05,
            initial_sparsity: 0.01,
            max_layers: 50,
            max_cluster_prompt_tokens: 60_000,
            subsample_ratio: 0.8,
            seed: 224,
            leiden_max_cluster_size: 10,
            leiden_seed: 0xDEAD_BEEF,
            leiden_max_iterations: LeidenConfig::default().max_iterations,
            report_context_tokens: 32_768,
            top_k: 20,
            top_m: 10,
            level: 2,
            reports_budget: 12_500,
            bridge_budget: 12_500,
            local_relations_budget: 20_000,
            text_units_budget: 20_000,
            cosine_floor: 0.2,
            response_type: "Multiple Paragraphs".to_owned(),
            community_single_one: false,
            bridge_edges: BridgeEdges::AllAmongPathNodes,
            openie_description_tokens: 200,
            concurrency: 4,
            embed_batch: 64,
            log_layers: true,
        }
    }
}

impl HiragConfig {
    /// The UltraDomain benchmark profile of the paper's runs (`top_k = 10`).
    pub fn benchmark_profile() -> Self {
        Self {
            top_k: 10,
            ..Self::default()
        }
    }

    /// Checks the ranges the pipeline relies on.
    pub fn validate(&self) -> Result<()> {
        if self.chunk_token_size == 0 || self.chunk_overlap >= self.chunk_token_size {
            return Err(HiragError::Config(format!(
                "chunk_overlap {} must be smaller than chunk_token_size {} (> 0)",
                self.chunk_overlap, self.chunk_token_size
            )));
        }
        if self.top_k == 0 {
            return Err(HiragError::Config("top_k must be at least 1".into()));
        }
        if !self.cosine_floor.is_finite() {
            return Err(HiragError::Config(format!(
                "cosine_floor {} is not a number",
                self.cosine_floor
            )));
        }
        if self.leiden_max_cluster_size < 2 {
            return Err(HiragError::Config(format!(
                "leiden_max_cluster_size {} must be at least 2",
                self.leiden_max_cluster_size
            )));
        }
        self.hierarchy().cluster.validate()?;
        Ok(())
    }

    /// The HiIndex settings of `kgrag-hierarchy`.
    pub fn hierarchy(&self) -> kgrag_hierarchy::HiragConfig {
        kgrag_hierarchy::HiragConfig {
            cluster: self.cluster,
            cluster_threshold: self.cluster_threshold,
            stop: SparsityRule {
                sparsity_stop: self.sparsity_stop,
                sparsity_change_stop: self.sparsity_change_stop,
                initial_sparsity: self.initial_sparsity,
            },
            max_layers: self.max_layers,
            entity_types: self.entity_types.clone(),
            max_cluster_prompt_tokens: self.max_cluster_prompt_tokens,
            subsample_ratio: self.subsample_ratio,
            sample_seed: self.seed,
            concurrency: self.concurrency,
            embed_batch: self.embed_batch,
            log_layers: self.log_layers,
        }
    }

    /// The hierarchical Leiden settings (resolution 1.0, randomness 0.001, largest component only).
    pub fn leiden(&self) -> HierarchicalConfig {
        HierarchicalConfig {
            leiden: LeidenConfig {
                seed: self.leiden_seed,
                max_iterations: self.leiden_max_iterations,
                ..LeidenConfig::default()
            },
            max_cluster_size: self.leiden_max_cluster_size,
            largest_component_only: true,
        }
    }
}
