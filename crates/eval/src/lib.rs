//! # kgrag-eval
//!
//! How kgrag measures its retrievers:
//!
//! - [`dataset`]: datasets described by manifests compiled into the crate ([`available`], [`manifest`]) and
//!   loaded with [`load`] — `musique-100` (HippoRAG's MuSiQue sample, read from `$KGRAG_DATA_DIR` and
//!   checked against sha256 sums) and `kgrag-fixture` (a hand-written multi-hop fixture with triples,
//!   bundled); [`load_hipporag`] reads any data in HippoRAG's format.
//! - [`metrics`]: HippoRAG's fractional passage recall@k ([`recall_at_k`] at [`RECALL_KS`]), SQuAD answer
//!   normalisation with exact match and token F1, numpy-style percentiles, and a [`MethodAccumulator`]
//!   that averages per-question results into a [`MethodReport`].
//! - [`report`]: the bench report that `cargo xtask bench` writes ([`Report`]; field names are a contract),
//!   rendered as Markdown, validated, and written atomically; [`render`] adds `report.md`, a
//!   self-contained `report.html` and (feature `plots`) SVG and PNG charts from [`plots`]; [`compare`]
//!   the deltas against an earlier report.
//! - [`judge`] and [`score`]: HiRAG's pairwise LLM judge with win-rate aggregation, and LeanRAG's 1–10
//!   scorer with repeats.
//!
//! ```
//! use kgrag_eval::{exact_match, f1, recall_at_k, MethodAccumulator, QuestionResult};
//!
//! let answers = vec!["G. Stanley Hall".to_owned(), "Stanley Hall".to_owned()];
//! assert_eq!(exact_match("Stanley Hall.", &answers), 1.0);
//! assert!((f1("Hall", &answers) - 2.0 / 3.0).abs() < 1e-12);
//!
//! let gold = vec!["A\nfirst".to_owned(), "B\nsecond".to_owned()];
//! let retrieved = vec!["A\nfirst".to_owned(), "C\nother".to_owned(), "B\nsecond".to_owned()];
//! assert_eq!(recall_at_k(&retrieved, &gold, 2), 0.5);
//!
//! let mut acc = MethodAccumulator::new();
//! acc.add(&QuestionResult::retrieval(retrieved, gold, 120, 15.0).with_answer("Hall", answers));
//! let report = acc.finish();
//! assert_eq!(report.recall["2"], 0.5);
//! assert_eq!(report.em, Some(0.0));
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod compare;
pub mod dataset;
mod error;
pub mod judge;
pub mod metrics;
#[cfg(feature = "plots")]
pub mod plots;
pub mod render;
pub mod report;
pub mod score;

pub use compare::{compare, Comparison, Delta};
pub use dataset::{
    available, data_dir, load, load_dir, load_hipporag, manifest, Dataset, ExtractionSource,
    Manifest, ManifestFile, Passage, Question, DATA_DIR_VAR,
};
pub use error::{EvalError, Result};
pub use metrics::{
    exact_match, f1, normalize_answer, percentile, recall_at_k, MethodAccumulator, QuestionResult,
    RECALL_KS,
};
pub use render::write_report_files;
pub use report::{
    DatasetInfo, FileInfo, IndexReport, JudgeReport, Latency, LlmReport, MethodReport,
    PairwiseReport, Report, ScoreSummary, StageReport, REPORT_FILE,
};
