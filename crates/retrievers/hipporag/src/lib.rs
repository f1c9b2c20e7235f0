//! # kgrag-hipporag
//!
//! HippoRAG 2 ("From RAG to Memory", Gutiérrez et al., ICML 2025) on kgrag's shared parts, as the project
//! spec `specs/hipporag2.md` gives it.
//!
//! * [`HippoIndex`] — indexing from extracted triples (§4): phrase nodes from normalised subjects and
//!   objects, passage nodes, fact edges, passage–phrase context edges and synonymy edges (cosine ≥ 0.8 over
//!   phrase embeddings), with three embedding stores (passages — shared with the other methods — phrases and
//!   facts). Inserts are incremental: only new texts are embedded, only new phrases are scanned for synonyms.
//! * [`HippoRetriever`] — retrieval (§5): facts scored by min-max normalised cosine to the query, the top
//!   `linking_top_k` candidates, the recognition-memory filter ([`FilterMode::Llm`] with a
//!   [`ChatModel`](kgrag_types::ChatModel), or [`FilterMode::None`]), phrase seeds ([`seed_weights`],
//!   `averaged` or `overwrite`), every passage seeded with `passage_node_weight` × its normalised dense score,
//!   Personalized PageRank with damping 0.5 on the `reference` or `clean` edge weights, passages ranked by
//!   their PPR mass; dense retrieval when no fact survives.
//! * [`qa`] — the reader (§6): the top `qa_top_k` passages in the "Wikipedia Title:" frame, one-shot, and the
//!   answer after `Answer:`.
//!
//! Every option of spec §2 is a field of [`HippoConfig`] with the spec's default. Prompts are our own
//! wording ([`prompts`]); the filter and reader keep the reference's message structure and output formats.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kgrag_graph_store::EmbeddingStore;
//! use kgrag_hipporag::{FilterMode, HippoConfig, HippoIndex, HippoRetriever, NoProgress};
//! use kgrag_types::testing::HashingEmbedder;
//! use kgrag_types::{ChunkId, Extraction, RetrievalRequest, Retriever, Triple};
//!
//! let embedder = Arc::new(HashingEmbedder::new(64));
//! let passages: Vec<(ChunkId, String)> = [
//!     "Marie Curie\nMarie Curie was born in Warsaw.",
//!     "Warsaw\nThe Vistula flows through Warsaw.",
//! ]
//! .iter()
//! .map(|t| (ChunkId::from_content(t), t.to_string()))
//! .collect();
//! // Triples as an OpenIE step (an LLM, or kgrag-openie's rules) would give them.
//! let mut first = Extraction::empty(passages[0].0.clone());
//! first.triples = vec![Triple::new("Marie Curie", "born in", "Warsaw")];
//! let mut second = Extraction::empty(passages[1].0.clone());
//! second.triples = vec![Triple::new("Vistula", "flows through", "Warsaw")];
//!
//! let config = HippoConfig { filter: FilterMode::None, ..HippoConfig::default() };
//! let mut index = HippoIndex::new(Arc::new(EmbeddingStore::new("passages")), config.clone());
//! let chunks = index.chunks_from_extractions(&passages, &[first, second]);
//! index.insert(&chunks, embedder.as_ref(), &mut NoProgress).await?;
//! assert_eq!(index.graph()?.node_count(), 5); // three phrases, two passages
//!
//! let retriever = HippoRetriever::new(Arc::new(index), embedder, None, config)?;
//! let ctx = retriever
//!     .retrieve(&RetrievalRequest { query: "Which river flows where Curie was born?".into(), top_k: 2 })
//!     .await?;
//! assert_eq!(ctx.passages.len(), 2);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod filter;
mod held;
mod index;
pub mod prompts;
pub mod qa;
mod retrieve;

use kgrag_graph_store::synonymy::SynonymyConfig;
use kgrag_graph_store::EdgeWeighting;
pub use kgrag_graph_store::Precision;
use kgrag_types::Normalisation;
use serde::{Deserialize, Serialize};

pub use index::{DeleteStats, HippoIndex, IndexProgress, InsertStats, NoProgress, INDEX_FILES};
pub use retrieve::{seed_weights, HippoRetriever, QueryTrace, SeedPhrase};

/// Errors of HippoRAG 2 indexing and retrieval.
#[derive(Debug, thiserror::Error)]
pub enum HippoError {
    /// The graph or a vector store failed.
    #[error(transparent)]
    Store(#[from] kgrag_graph_store::StoreError),
    /// Embedding a query failed.
    #[error("embedding the query failed: {0}")]
    Embed(#[source] kgrag_types::Error),
    /// The reader's chat model failed.
    #[error("the reader failed: {0}")]
    Reader(#[source] kgrag_types::Error),
    /// Input that cannot be indexed or a configuration that cannot be used.
    #[error("invalid input: {0}")]
    Invalid(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, HippoError>;

/// How phrase seed weights are computed (spec §5.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeedWeighting {
    /// The reference code: the mean over kept facts of `s_f / n(p)`; top phrases by that weight.
    #[default]
    Averaged,
    /// The paper-era code: `s_f / n(p)` of the last kept fact holding the phrase; top phrases by the mean raw
    /// fact score.
    Overwrite,
}

/// Which edge weights the PPR walk uses (spec §4.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphWeights {
    /// The reference's ordered-pair map: fact pairs 2 × occurrences, synonymy overwriting fact counts.
    #[default]
    Reference,
    /// Fact occurrences plus the synonymy cosine, nothing lost.
    Clean,
}

impl GraphWeights {
    /// The graph-store weighting of this choice.
    pub fn weighting(self) -> EdgeWeighting {
        match self {
            GraphWeights::Reference => EdgeWeighting::HippoReference,
            GraphWeights::Clean => EdgeWeighting::HippoClean,
        }
    }
}

/// The recognition-memory filter (spec §5.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterMode {
    /// One LLM call keeps the facts needed for the question (needs a chat model).
    #[default]
    Llm,
    /// Keep the candidates as they are (the paper's "w/o filter" ablation; the offline run).
    None,
}

/// Every HippoRAG 2 option of spec §2 that this crate uses, with the spec's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HippoConfig {
    /// Phrase normalisation (index time).
    pub normalisation: Normalisation,
    /// Drop triples whose subject or object normalises to `""` (index time; the reference keeps them).
    pub drop_empty_phrases: bool,
    /// Phrase seed weights.
    pub seed_weighting: SeedWeighting,
    /// Edge weights of the walk.
    pub graph_weights: GraphWeights,
    /// Recognition-memory filter.
    pub filter: FilterMode,
    /// Candidate facts, maximum kept facts and number of phrase seeds.
    pub linking_top_k: usize,
    /// Passages returned per query.
    pub retrieval_top_k: usize,
    /// Passages given to the reader (and rendered into the context).
    pub qa_top_k: usize,
    /// Weight of the normalised dense score of every passage in the reset vector.
    pub passage_node_weight: f64,
    /// PPR continue probability.
    pub damping: f64,
    /// PPR L1 tolerance.
    pub ppr_tol: f64,
    /// PPR iteration cap.
    pub ppr_max_iter: usize,
    /// Minimum cosine of a synonymy edge (index time).
    pub synonymy_threshold: f32,
    /// Length of each phrase's neighbour list, itself included (index time).
    pub synonymy_knn_k: usize,
    /// Accepted synonyms per phrase (index time).
    pub synonymy_max_per_node: usize,
    /// A phrase needs this many alphanumeric characters to get synonyms (index time).
    pub synonymy_min_alnum: usize,
    /// Sampling temperature of the filter and reader.
    pub llm_temperature: f32,
    /// Reader's maximum new tokens.
    pub max_new_tokens: u32,
    /// Filter's maximum new tokens.
    pub filter_max_tokens: u32,
    /// Instruction embedded with the query for fact scoring.
    pub query_instruction_fact: String,
    /// Instruction embedded with the query for passage scoring.
    pub query_instruction_passage: String,
    /// Texts per embedding call while indexing.
    pub embed_batch: usize,
    /// How the fact store holds its vectors (index time; `fact_vectors = "f32"` or `"f16"` in
    /// `[hipporag]`). `f16` (the default) halves the index's largest block: every score is the dot product
    /// of the normalised query with the fact's normalised vector rounded to f16, and on `musique-100`
    /// recall@1–20, context tokens and answers are identical to `f32`, with GPT-3.5's triples and with the
    /// rule extractor (`docs/perf.md`). Not in the reference (f32 throughout). A store keeps the precision
    /// it was created with.
    pub fact_vectors: Precision,
}

impl Default for HippoConfig {
    fn default() -> Self {
        Self {
            normalisation: Normalisation::Ascii,
            drop_empty_phrases: false,
            seed_weighting: SeedWeighting::Averaged,
            graph_weights: GraphWeights::Reference,
            filter: FilterMode::Llm,
            linking_top_k: 5,
            retrieval_top_k: 200,
            qa_top_k: 5,
            passage_node_weight: 0.05,
            damping: 0.5,
            ppr_tol: 1e-10,
            ppr_max_iter: 1000,
            synonymy_threshold: 0.8,
            synonymy_knn_k: 2047,
            synonymy_max_per_node: 101,
            synonymy_min_alnum: 3,
            llm_temperature: 0.0,
            max_new_tokens: 2048,
            filter_max_tokens: 512,
            query_instruction_fact: "retrieve triplet facts relevant to the question".to_owned(),
            query_instruction_passage: "retrieve documents that answer the question".to_owned(),
            embed_batch: 64,
            fact_vectors: Precision::F16,
        }
    }
}

impl HippoConfig {
    /// The synonymy scan settings.
    pub fn synonymy(&self) -> SynonymyConfig {
        SynonymyConfig {
            threshold: self.synonymy_threshold,
            knn_k: self.synonymy_knn_k,
            max_per_node: self.synonymy_max_per_node,
            min_alnum: self.synonymy_min_alnum,
            normalisation: self.normalisation,
        }
    }
}
