//! The configuration file (TOML): models, per-method settings and the pipeline's choices.
//!
//! ```toml
//! # Every section is optional; this is the offline default.
//! # cache_dir = "cache"              # LLM replies, embeddings, extractions (redb); default <index>/cache
//! openie = "auto"                    # chunks missing from a dataset's OpenIE cache: "auto" (llm with a
//!                                    # chat model, else rules) | "llm" | "rules" | "cache_only"
//! reader = "auto"                    # "auto" (llm with a chat model, else extractive) | "llm" | "extractive" | "none"
//! cite = true                        # answers cite their passages as [n] (the bench keeps the reference readers)
//!
//! [embedder]                         # kgrag-llm EmbedderConfig; default: local all-MiniLM-L6-v2
//! provider = "local"
//! # precision = "auto"               # local encoder arithmetic: "auto" (bf16x3 where AMX runs, else f32) |
//! #                                  # "f32" | "bf16x3" (AMX, f32's vectors to ~1e-5) | "bf16" (AVX512-BF16,
//! #                                  # cosine ≥ 0.9999 to f32, a few rankings differ at near-ties)
//!
//! # [chat]                           # kgrag-llm ChatConfig; none by default (no LLM)
//! # provider = "openai"
//! # base_url = "http://127.0.0.1:8000/v1"
//! # model = "meta-llama/Llama-3.3-70B-Instruct"
//! # price_per_million_input = 0.15   # optional: the cost line of `kgrag index --estimate`
//! # price_per_million_output = 0.60
//!
//! [hipporag]                         # kgrag-hipporag HippoConfig, the spec's keys and defaults
//! filter = "llm"                     # forced to "none" when no chat model is configured
//!
//! [dense]
//! qa_top_k = 5
//!
//! [cluster]                          # the clustering of HiRAG's and LeanRAG's layers, one section for both
//! reduction = "umap"                 # as the references; "pca:N" | "none"
//! max_clusters = 50                  # the BIC scan tries k = 1 .. min(N, max_clusters) - 1
//! bic_rel_tol = 1e-3                 # early stop of the scan
//! # [cluster.gmm]                    # the mixtures: n_init = 5, max_iter = 100, tol = 1e-3,
//! # seed = 0                         # reg_covar = 1e-6, seed = 0 (PCA signs and k-means++ draws)
//!
//! [hirag]                            # kgrag-hirag HiragConfig: every other key of the HiRAG spec §2
//! base = "openie_cache"              # the facade's default: HippoRAG 2's triples; "extract" chunks and extracts
//! extraction = "llm"                 # with base = "extract": "llm" (needs [chat]; offline: rules) | "rules"
//!
//! [leanrag]                          # kgrag-leanrag LeanragConfig: every other key of the LeanRAG spec §2
//! g0 = "hirag"                       # HiRAG's base layer, shared with the HiRAG modes | "native"
//!
//! # [judge]                          # the bench's LLM judge (a ChatConfig like [chat]); default: [chat]
//! # provider = "openai"
//! # model = "gpt-4o"
//!
//! [storage]                        # where the index lives
//! backend = "local"                  # files in the index directory | "postgres" (feature `postgres`)
//! url_env = "KGRAG_DATABASE_URL"     # with postgres: the variable holding the URL (never logged)
//! schema = "kgrag"                   # with postgres: the schema of the index's tables
//! hnsw_min_rows = 1000               # passages from which pgvector searches an HNSW index (else exact)
//!
//! [eval]                             # what `kgrag bench` measures with a judge
//! baseline = "dense"                 # every method's pairwise win rate is against this one
//! pairwise = true                    # HiRAG's pairwise judge, both answer orders
//! score_repeats = 5                  # LeanRAG's 1-10 scores, repeats per answer (0: no scores)
//! score_retries = 5                  # corrective retries per repeat
//! concurrency = 4                    # judge requests in flight
//! # judge_max_tokens = 1024          # cap on the judge's completion tokens (default: the protocols')
//! ```

use std::path::{Path, PathBuf};

use kgrag_dense::DenseConfig;
use kgrag_hipporag::HippoConfig;
use kgrag_hirag::config::ClusterConfig;
use kgrag_hirag::{BaseSource, HiragConfig};
use kgrag_leanrag::LeanragConfig;
use kgrag_llm::{ChatConfig, EmbedderConfig, LocalEmbedderConfig};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{KgragError, Result};

// Defaults that differ from the HippoRAG 2 spec's first values (`openie = "llm"`, a reader LLM): the facade
// defaults to what runs offline — the dataset's OpenIE cache and the extractive reader when no chat model
// is configured. With a `[chat]` model, `reader = "auto"` uses it; `openie = "llm"` must be asked for.
// HiRAG's `base` defaults to `openie_cache` here (the library's default is `extract`): on a dataset with
// an OpenIE cache, HiRAG then runs on the very triples and one-chunk-per-passage index HippoRAG 2 uses, so
// the methods are compared on one graph; `base = "extract"` runs HiRAG's own chunking and extraction.

/// The methods an index can hold, in build order (the method registry, `crate::methods::registry`, has one
/// entry for each; a test checks that they agree).
pub const METHOD_NAMES: &[&str] = &["dense", "hipporag2", "hirag", "leanrag"];

/// Every query strategy, in report order: each method's strategies in [`METHOD_NAMES`] order.
pub const STRATEGIES: &[&str] = &[
    "dense",
    "hipporag2",
    "hirag",
    "hirag-local",
    "hirag-global",
    "hirag-bridge",
    "hirag-nobridge",
    "leanrag",
];

/// How chunks that the dataset's OpenIE cache does not cover are extracted (HippoRAG 2 spec §2 `openie`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenIeMode {
    /// HippoRAG's OpenIE with the chat model when one is configured, else the rule extractor (said once).
    #[default]
    Auto,
    /// Error when a chunk is missing from the cache.
    CacheOnly,
    /// HippoRAG's two-call OpenIE with the configured chat model.
    Llm,
    /// The LLM-free rule extractor.
    Rules,
}

/// How answers are produced for EM/F1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReaderMode {
    /// `llm` when a chat model is configured, else `extractive`.
    #[default]
    Auto,
    /// HippoRAG's QA reader with the chat model.
    Llm,
    /// The offline kit: the sentence of the top passages closest to the query.
    Extractive,
    /// No answers (EM/F1 reported as null).
    None,
}

/// `[retriever]`: the strategy `kgrag query` uses when none is given on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrieverSection {
    /// A strategy name of [`STRATEGIES`], e.g. `hipporag2` or `hirag-local`.
    pub strategy: String,
    /// Passages returned per query.
    pub top_k: usize,
}

impl Default for RetrieverSection {
    fn default() -> Self {
        Self {
            strategy: "hipporag2".to_owned(),
            top_k: 10,
        }
    }
}

/// `[index]`: what `kgrag index` builds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexSection {
    /// Methods indexed (names of [`METHOD_NAMES`]); `kgrag index --methods` overrides.
    pub methods: Vec<String>,
    /// How documents are cut into the chunks every method shares (`strategy = "token_window"` with
    /// `encoding`, `size`, `overlap`; or `strategy = "passage"`: one chunk per document). The bench always
    /// uses `passage`: its datasets are passages already.
    pub chunking: kgrag_text::ChunkerConfig,
    /// Keep HippoRAG 2's fact vectors (f16, the largest part of its index) in files instead of memory:
    /// unnamed scratch files under `<cache_dir>/vectors` while the index is built or changed, the
    /// index's own file once it is saved. Each query screens the facts in memory and reads only the
    /// rows it cannot decide, so rankings are unchanged. Default `true`; `false` holds them in memory.
    pub fact_vectors_on_disk: bool,
    /// Keep every method's entity vectors (f32, one row per entity: HippoRAG 2's phrases, HiRAG's
    /// entities, LeanRAG's base seeds) in unnamed scratch files under `<cache_dir>/vectors` once a build
    /// or load is done, instead of memory. HiRAG and LeanRAG screen each query against an int8 copy in
    /// memory and read only the rows it cannot decide; no HippoRAG 2 query reads its phrases. Rankings and
    /// contexts are unchanged; the saved index holds the vectors as before. Default `true`; `false`
    /// holds them in memory.
    pub entity_vectors_on_disk: bool,
    /// Keep the sentence vectors HiRAG's and LeanRAG's builds compose descriptions from (one per distinct
    /// fact or source sentence, the largest thing their offline builds hold) in an unnamed scratch file
    /// under `<cache_dir>/vectors` instead of memory, for the build's duration. The index is the same
    /// either way. Default `true`; `false` holds them in memory.
    pub sentence_vectors_on_disk: bool,
    /// Keep a copy of every original file read (content-addressed, `<index>/originals/<sha256>.<ext>`), so
    /// that a citation can open the file at its page (`GET /v1/documents/{id}/file`). Default `true`.
    pub keep_originals: bool,
}

impl Default for IndexSection {
    fn default() -> Self {
        Self {
            methods: METHOD_NAMES.iter().map(|m| (*m).to_owned()).collect(),
            chunking: kgrag_text::ChunkerConfig::hirag(),
            fact_vectors_on_disk: true,
            entity_vectors_on_disk: true,
            sentence_vectors_on_disk: true,
            keep_originals: true,
        }
    }
}

/// `[documents]`: bounds on reading one file (a zip bomb, a sheet of a million cells, a 2 GB file end in an
/// error naming the file, and the folder's other files are read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DocumentsSection {
    /// The largest file read, in MiB.
    pub max_file_mib: u64,
    /// The most entries a zip container (DOCX, PPTX, XLSX, ODS, EPUB) may have.
    pub max_entries: usize,
    /// The most a container's entries or a PDF's streams may unpack to, in MiB.
    pub max_unpacked_mib: u64,
    /// The most non-empty cells read from one spreadsheet.
    pub max_cells: u64,
    /// The most pages (slides, sheets, chapters) read from one file.
    pub max_pages: u32,
    /// How long reading one file may take, in seconds.
    pub deadline_secs: u64,
}

impl Default for DocumentsSection {
    fn default() -> Self {
        let l = kgrag_documents::Limits::default();
        Self {
            max_file_mib: l.max_file_bytes >> 20,
            max_entries: l.max_entries,
            max_unpacked_mib: l.max_unpacked_bytes >> 20,
            max_cells: l.max_cells,
            max_pages: l.max_pages,
            deadline_secs: l.deadline.as_secs(),
        }
    }
}

impl DocumentsSection {
    /// The readers' limits.
    pub fn limits(&self) -> kgrag_documents::Limits {
        kgrag_documents::Limits {
            max_file_bytes: self.max_file_mib.saturating_mul(1 << 20),
            max_entries: self.max_entries,
            max_unpacked_bytes: self.max_unpacked_mib.saturating_mul(1 << 20),
            max_cells: self.max_cells,
            max_pages: self.max_pages,
            deadline: std::time::Duration::from_secs(self.deadline_secs),
        }
    }
}

/// `[eval]`: the bench's answer-quality measurements (they need a judge model: `[judge]`, else `[chat]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalSection {
    /// The method every other one is judged against (`kgrag bench --baseline-method` overrides).
    pub baseline: String,
    /// Run HiRAG's pairwise judge (spec hirag §8): both answer orders per question.
    pub pairwise: bool,
    /// LeanRAG's 1–10 scorer (spec leanrag §7): repeats per answer; 0 turns scoring off.
    pub score_repeats: u64,
    /// Corrective retries per scoring repeat when the reply does not parse.
    pub score_retries: usize,
    /// Judge requests in flight at once.
    pub concurrency: usize,
    /// A cap on the judge's completion tokens (`None`: the protocols' own, 6,400 for the pairwise judge).
    pub judge_max_tokens: Option<u32>,
}

impl Default for EvalSection {
    fn default() -> Self {
        Self {
            baseline: "dense".to_owned(),
            pairwise: true,
            score_repeats: 5,
            score_retries: 5,
            concurrency: 4,
            judge_max_tokens: None,
        }
    }
}

/// The clustering keys `[hirag]` and `[leanrag]` had before `[cluster]`, and where each is now.
pub(crate) const MOVED_CLUSTER_KEYS: [(&str, &str); 8] = [
    ("reduction", "reduction"),
    ("gmm_max_clusters", "max_clusters"),
    ("bic_rel_tol", "bic_rel_tol"),
    ("gmm_n_init", "gmm.n_init"),
    ("gmm_max_iter", "gmm.max_iter"),
    ("gmm_tol", "gmm.tol"),
    ("gmm_reg_covar", "gmm.reg_covar"),
    ("gmm_seed", "gmm.seed"),
];

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the LLM response, embedding and extraction caches live; `None`: `target/kgrag-cache` for the
    /// bench, `<index dir>/cache` for `kgrag index`.
    pub cache_dir: Option<PathBuf>,
    /// Extraction of chunks the OpenIE cache lacks.
    pub openie: OpenIeMode,
    /// The reader.
    pub reader: ReaderMode,
    /// Answers cite their sources: the reader sees numbered passages (HiRAG: its Sources table's ids) and
    /// cites them as `[n]`; the extractive reader cites the passage each sentence comes from. Default
    /// `true`; `kgrag bench` always runs each method's reference reader.
    pub cite: bool,
    /// The embedder (all methods share it).
    pub embedder: EmbedderConfig,
    /// The chat model, if any.
    pub chat: Option<ChatConfig>,
    /// The bench's judge model; `None`: the chat model.
    pub judge: Option<ChatConfig>,
    /// What the bench measures with the judge.
    pub eval: EvalSection,
    /// HippoRAG 2.
    pub hipporag: HippoConfig,
    /// Dense retrieval.
    pub dense: DenseConfig,
    /// `[cluster]`: how HiRAG's and LeanRAG's layers are clustered (the reduction, the mixtures, the BIC
    /// scan), one section for both. [`Config::share_cluster`] copies it into `hirag.cluster` and
    /// `leanrag.cluster`, which a configuration file leaves out (or sets to the same values).
    pub cluster: ClusterConfig,
    /// HiRAG (all five modes share it).
    pub hirag: HiragConfig,
    /// LeanRAG.
    pub leanrag: LeanragConfig,
    /// The default query strategy.
    pub retriever: RetrieverSection,
    /// What `kgrag index` builds.
    pub index: IndexSection,
    /// Bounds on reading one file.
    pub documents: DocumentsSection,
    /// Where the index lives: files in the index directory, or PostgreSQL.
    pub storage: StorageConfig,
}

/// Where an index's generations are stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageBackend {
    /// Files in the index directory, committed by `manifest.json`.
    #[default]
    Local,
    /// PostgreSQL with pgvector (the `postgres` feature); the index directory keeps only the caches.
    Postgres,
}

/// `[storage]`: the index backend. The database URL is read only from the environment variable
/// `url_env`, never from a file, and is never printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `local` (default) or `postgres`.
    pub backend: StorageBackend,
    /// The environment variable holding the database URL (`postgres://user:password@host:port/db`).
    pub url_env: String,
    /// The PostgreSQL schema holding the index's tables (created and migrated on first use).
    pub schema: String,
    /// Passage counts from which pgvector searches an HNSW index; below it, an exact scan.
    pub hnsw_min_rows: usize,
    /// HNSW `m` (pgvector's default 16).
    pub hnsw_m: u32,
    /// HNSW `ef_construction` (pgvector's default 64).
    pub hnsw_ef_construction: u32,
    /// HNSW `ef_search` at query time (at least the number of passages asked for).
    pub hnsw_ef_search: u32,
    /// Seconds a replaced generation stays readable (the one before the committed one always stays): a
    /// reader that opened it loads its methods' indexes from it meanwhile. Older ones are deleted at the
    /// next commit.
    pub replaced_grace_secs: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            backend: StorageBackend::Local,
            url_env: "KGRAG_DATABASE_URL".to_owned(),
            schema: "kgrag".to_owned(),
            hnsw_min_rows: 1_000,
            hnsw_m: 16,
            hnsw_ef_construction: 64,
            hnsw_ef_search: 100,
            replaced_grace_secs: 300,
        }
    }
}

impl StorageConfig {
    /// Checks the schema name (it is written into SQL: lower-case letters, digits and `_`, at most 63
    /// bytes, not starting with a digit or `pg_`) and the variable name.
    pub fn validate(&self) -> Result<()> {
        let s = &self.schema;
        let ok = !s.is_empty()
            && s.len() <= 63
            && !s.starts_with("pg_")
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !s.as_bytes()[0].is_ascii_digit();
        if !ok {
            return Err(KgragError::Config(format!(
                "storage.schema = {s:?}: use lower-case letters, digits and _ (at most 63, not starting \
                 with a digit or pg_)"
            )));
        }
        if self.url_env.is_empty() || self.url_env.contains('=') || self.url_env.contains('\0') {
            return Err(KgragError::Config(format!(
                "storage.url_env = {:?} is not an environment variable name",
                self.url_env
            )));
        }
        // pgvector's bounds, checked here rather than after a whole generation is written.
        let (m, efc, efs) = (self.hnsw_m, self.hnsw_ef_construction, self.hnsw_ef_search);
        if !(2..=100).contains(&m)
            || !(4..=1000).contains(&efc)
            || efc < 2 * m
            || !(1..=1000).contains(&efs)
        {
            return Err(KgragError::Config(format!(
                "storage: hnsw_m = {m}, hnsw_ef_construction = {efc}, hnsw_ef_search = {efs}: pgvector takes \
                 m in 2..=100, ef_construction in 4..=1000 and at least 2·m, ef_search in 1..=1000"
            )));
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            cache_dir: None,
            openie: OpenIeMode::Auto,
            reader: ReaderMode::Auto,
            cite: true,
            embedder: EmbedderConfig::Local(LocalEmbedderConfig::default()),
            chat: None,
            judge: None,
            eval: EvalSection::default(),
            hipporag: HippoConfig::default(),
            dense: DenseConfig::default(),
            cluster: ClusterConfig::default(),
            hirag: HiragConfig {
                base: BaseSource::OpenieCache,
                ..HiragConfig::default()
            },
            leanrag: LeanragConfig::default(),
            retriever: RetrieverSection::default(),
            index: IndexSection::default(),
            documents: DocumentsSection::default(),
            storage: StorageConfig::default(),
        }
    }
}

impl Config {
    /// Reads a TOML file; unknown keys are errors naming the key.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| KgragError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            KgragError::Config(message) => {
                KgragError::Config(format!("{}: {message}", path.display()))
            }
            other => other,
        })
    }

    /// Parses TOML text and checks the values: an unknown key or a bad value is an error naming the key,
    /// the value and what is allowed.
    pub fn parse(text: &str) -> Result<Self> {
        let raw: toml::Table =
            toml::from_str(text).map_err(|e| KgragError::Config(e.to_string()))?;
        for section in ["hirag", "leanrag"] {
            let Some(toml::Value::Table(table)) = raw.get(section) else {
                continue;
            };
            if let Some((old, new)) = MOVED_CLUSTER_KEYS
                .iter()
                .find(|(old, _)| table.contains_key(*old))
            {
                return Err(KgragError::Config(format!(
                    "{section}.{old} has moved: HiRAG and LeanRAG share one [cluster] section; write \
                     `{new} = …` under [cluster]"
                )));
            }
        }
        let mut config: Self =
            toml::from_str(text).map_err(|e| KgragError::Config(e.to_string()))?;
        // A `[hirag]` section is filled from the library's defaults, whose `base` is `extract`: one key
        // written there (say `top_k`) would switch HiRAG to its own extraction — LLM calls, with a chat
        // model. The facade's default base holds unless the section names one.
        if let Some(toml::Value::Table(table)) = raw.get("hirag") {
            if !table.contains_key("base") {
                config.hirag.base = Self::default().hirag.base;
            }
        }
        for (section, own) in [
            ("hirag", &config.hirag.cluster),
            ("leanrag", &config.leanrag.cluster),
        ] {
            let Some(toml::Value::Table(table)) = raw.get(section) else {
                continue;
            };
            if table.contains_key("cluster") && *own != config.cluster {
                return Err(KgragError::Config(format!(
                    "[{section}.cluster] differs from [cluster]: HiRAG and LeanRAG share one clustering; \
                     set it in [cluster] only"
                )));
            }
        }
        config.share_cluster();
        config.validate()?;
        Ok(config)
    }

    /// Copies [`Config::cluster`] into HiRAG's and LeanRAG's settings (call it after changing the section
    /// in code; [`Config::validate`] refuses copies that differ).
    pub fn share_cluster(&mut self) {
        self.hirag.cluster = self.cluster;
        self.leanrag.cluster = self.cluster;
    }

    /// Checks the values serde cannot: the strategy and method names, and the numbers every method needs.
    pub fn validate(&self) -> Result<()> {
        self.storage.validate()?;
        if self.hirag.cluster != self.cluster || self.leanrag.cluster != self.cluster {
            return Err(KgragError::Config(
                "hirag.cluster or leanrag.cluster differs from cluster: HiRAG and LeanRAG share one \
                 clustering; set Config::cluster and call Config::share_cluster"
                    .into(),
            ));
        }
        self.cluster
            .validate()
            .map_err(|e| KgragError::Config(format!("cluster: {e}")))?;
        let strategies = STRATEGIES;
        if !strategies.contains(&self.retriever.strategy.as_str()) {
            return Err(KgragError::Config(format!(
                "retriever.strategy = {:?} is not a strategy; allowed: {}",
                self.retriever.strategy,
                strategies.join(", ")
            )));
        }
        if self.retriever.top_k == 0 {
            return Err(KgragError::Config(
                "retriever.top_k = 0: at least 1 passage must be returned".into(),
            ));
        }
        for m in &self.index.methods {
            if !METHOD_NAMES.contains(&m.as_str()) {
                return Err(KgragError::Config(format!(
                    "index.methods: {m:?} is not a method; allowed: {}",
                    METHOD_NAMES.join(", ")
                )));
            }
        }
        if self.hipporag.ppr_max_iter == 0 {
            return Err(KgragError::Config(
                "hipporag.ppr_max_iter = 0: PPR needs at least 1 iteration (default 1000)".into(),
            ));
        }
        if !(0.0..1.0).contains(&self.hipporag.damping) {
            return Err(KgragError::Config(format!(
                "hipporag.damping = {}: must be in [0, 1) (default 0.5)",
                self.hipporag.damping
            )));
        }
        if self.eval.concurrency == 0 {
            return Err(KgragError::Config(
                "eval.concurrency = 0: at least 1 judge request must be in flight (default 4)"
                    .into(),
            ));
        }
        if let kgrag_text::ChunkerConfig::TokenWindow { size, overlap, .. } = self.index.chunking {
            if size == 0 || overlap >= size {
                return Err(KgragError::Config(format!(
                    "index.chunking: size = {size}, overlap = {overlap}: size must be positive and overlap below it"
                )));
            }
        }
        Ok(())
    }

    /// The cache folder: [`Config::cache_dir`], else `fallback`.
    pub fn cache_dir_or(&self, fallback: &Path) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(|| fallback.to_path_buf())
    }

    /// SHA-256 (hex) of the configuration as canonical JSON (sorted keys): changes whenever a setting does.
    pub fn hash(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        hex::encode(Sha256::digest(value.to_string().as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_parse_and_hash_changes_with_settings() {
        let empty = Config::parse("").unwrap();
        assert_eq!(empty, Config::default());
        let c = Config::parse(
            "reader = \"none\"\n[hipporag]\nfilter = \"none\"\ngraph_weights = \"clean\"\n",
        )
        .unwrap();
        assert_eq!(c.hipporag.filter, kgrag_hipporag::FilterMode::None);
        assert_eq!(
            c.hipporag.graph_weights,
            kgrag_hipporag::GraphWeights::Clean
        );
        assert_ne!(c.hash(), empty.hash());
        assert_eq!(empty.hash(), Config::default().hash());
        let err = Config::parse("[hipporag]\ndampng = 0.5\n")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("dampng"), "{err}");
    }

    #[test]
    fn a_hirag_section_without_base_keeps_the_facades_base() {
        let c = Config::parse("[hirag]\ntop_k = 10\n").unwrap();
        assert_eq!(c.hirag.base, kgrag_hirag::BaseSource::OpenieCache);
        assert_eq!(c.hirag.top_k, 10);
        let c = Config::parse("[hirag]\nbase = \"extract\"\n").unwrap();
        assert_eq!(c.hirag.base, kgrag_hirag::BaseSource::Extract);
    }

    #[test]
    fn one_cluster_section_for_hirag_and_leanrag() {
        let c = Config::parse("[cluster]\nmax_clusters = 12\ngmm.seed = 7\n").unwrap();
        assert_eq!(c.cluster.max_clusters, 12);
        assert_eq!(c.cluster.gmm.seed, 7);
        assert_eq!(c.hirag.cluster, c.cluster);
        assert_eq!(c.leanrag.cluster, c.cluster);
        assert_ne!(c.hash(), Config::default().hash());

        // The flat keys of before are refused with their new place.
        let err = Config::parse("[leanrag]\ngmm_n_init = 3\n")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("leanrag.gmm_n_init has moved")
                && err.contains("`gmm.n_init = …` under [cluster]"),
            "{err}"
        );
        // A method's own table may only repeat the shared one (a written-out configuration parses again).
        let err = Config::parse("[hirag.cluster]\nmax_clusters = 9\n")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("[hirag.cluster] differs from [cluster]"),
            "{err}"
        );
        let written = toml::to_string(&c).unwrap();
        assert_eq!(Config::parse(&written).unwrap(), c);
        // Bad values name the section.
        let err = Config::parse("[cluster]\nmax_clusters = 1\n")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("cluster: ") && err.contains("max_clusters 1"),
            "{err}"
        );
        // In code: changing the section without sharing it is refused, sharing fixes it.
        let mut c = Config::default();
        c.cluster.bic_rel_tol = 0.01;
        assert!(c.validate().is_err());
        c.share_cluster();
        c.validate().unwrap();
    }
}
