//! # kgrag-openie
//!
//! Extraction turns chunks into the graph's raw material. Every extractor implements
//! [`Extractor`](kgrag_types::Extractor):
//!
//! * [`HippoOpenIe`] — HippoRAG's OpenIE: NER, then triples conditioned on the entities, JSON outputs, a
//!   tolerant parser ([`lenient`]) that never evaluates model output;
//! * [`GraphRagExtractor`] — HiRAG's and LeanRAG's entity–relation extraction in the reference delimiter
//!   format, with gleaning (`always` or YES/NO-`gated`), and the cross-chunk merge rules ([`merge_entities`],
//!   [`merge_relations`], [`add_missing_endpoints`], [`summarise_long_descriptions`]);
//! * [`RuleExtractor`] — the LLM-free extractor of offline runs.
//!
//! [`read_openie_file`] / [`write_openie_file`] read and write HippoRAG's OpenIE cache files, and
//! [`run_extraction`] extracts a corpus with bounded concurrency, persisting each chunk as it completes.
//!
//! ```
//! use kgrag_openie::RuleExtractor;
//! use kgrag_text::{Chunker, ChunkerConfig};
//! use kgrag_types::Document;
//!
//! let doc = Document::new("Ada Lovelace worked with Charles Babbage in London. She wrote the first program.");
//! let chunks = Chunker::new(ChunkerConfig::hipporag())?.chunk(&doc)?;
//! let extraction = RuleExtractor.extract_text(&chunks[0]);
//! let names: Vec<&str> = extraction.entities.iter().map(|e| e.name.as_str()).collect();
//! assert_eq!(names, ["Ada Lovelace", "Charles Babbage", "London"]);
//! assert_eq!(extraction.triples[0].predicate(), "worked with");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod graphrag;
pub mod hipporag;
pub mod interop;
pub mod lenient;
pub mod rules;
pub mod runner;

pub use graphrag::{
    add_missing_endpoints, merge_entities, merge_relations, normalise_name,
    summarise_long_descriptions, EntityMerger, Gleaning, GraphRagConfig, GraphRagExtractor,
    RelationMerger,
};
pub use hipporag::HippoOpenIe;
pub use interop::{read_openie_file, write_openie_file, OpenIeDoc};
pub use rules::RuleExtractor;
pub use runner::{
    run_extraction, run_extraction_kept, run_extraction_with, ExtractionStore, RunProgress,
    RunSummary, RunnerConfig,
};

/// Which extractor a method of the GraphRAG family runs (HiRAG's and LeanRAG's `extraction` key).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ExtractionMode {
    /// The two-stage LLM extraction ([`GraphRagExtractor`]) with the configured chat model.
    #[default]
    Llm,
    /// The offline kit's rule extractor ([`RuleExtractor`]).
    Rules,
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenIeError {
    /// An OpenIE file could not be read or written.
    #[error("OpenIE file {path}: {message}")]
    BadFile {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The extraction store failed.
    #[error("extraction store {path}: {message}")]
    Store {
        /// The store file.
        path: String,
        /// What failed.
        message: String,
    },
}

/// Result alias of this crate.
pub type Result<T, E = OpenIeError> = std::result::Result<T, E>;
