//! Cluster summaries: HiRAG's attribute entities, LeanRAG's aggregate entities and inter-aggregate relation
//! sentences, written by an LLM ([`LlmClusterSummarizer`]) or extractively ([`ExtractiveClusterSummarizer`],
//! the offline kit of the specs, built on the [`Summarizer`](kgrag_types::Summarizer) seam's extractive
//! implementation [`ExtractiveSummarizer`]).
//!
//! The LLM summariser never fails a build over a reply: a reply that does not parse (or a call that fails)
//! is retried once — with a corrective turn, so a response cache cannot hand back the same broken reply —
//! and then replaced by the extractive summary; every such event is counted in [`SummaryStats`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use kgrag_openie::graphrag::{
    parse_records, Record, COMPLETION_DELIMITER, RECORD_DELIMITER, TUPLE_DELIMITER,
};
use kgrag_openie::lenient::{find_object_with_key, parse_value, strip_fences};
use kgrag_text::table::{csv_table, Cell};
use kgrag_text::{Budget, Encoding, ExtractiveSummarizer};
use kgrag_types::{ChatModel, ChatRequest, GenerationSettings, Message, ResponseFormat};
use serde::{Deserialize, Serialize};

use crate::Result;

mod llm;

pub use self::llm::*;

/// Separator of merged descriptions (HiRAG's `<SEP>`).
const SEP: &str = "<SEP>";

/// A member of a cluster as a summariser sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// Name.
    pub name: String,
    /// Entity type (may be empty).
    pub entity_type: String,
    /// Description (parts may be joined by `<SEP>`).
    pub description: String,
    /// Degree in the graph (HiRAG: base graph degree; LeanRAG: relations incident to its origin).
    pub degree: usize,
}

/// HiRAG: a request for the attribute entities of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttributeRequest {
    /// The layer being summarised (0 = base entities).
    pub layer: u32,
    /// The cluster's members, in index order.
    pub members: Vec<Member>,
    /// The meta attribute types the new entities may take (`entity_types`).
    pub entity_types: Vec<String>,
}

/// An entity written by a summariser.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryEntity {
    /// Name.
    pub name: String,
    /// Type.
    pub entity_type: String,
    /// Description.
    pub description: String,
}

/// A relation written by a summariser (HiRAG: member → attribute entity).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryRelation {
    /// Source name.
    pub source: String,
    /// Target name.
    pub target: String,
    /// Description.
    pub description: String,
    /// Strength (1.0 when the model gave no number).
    pub strength: f64,
}

/// How a summary was produced (shared with community reports).
pub use kgrag_types::Outcome;

/// HiRAG: the attribute entities of one cluster and the member relations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttributeSummary {
    /// New entities (first record per name).
    pub entities: Vec<SummaryEntity>,
    /// Relations (first record per unordered pair).
    pub relations: Vec<SummaryRelation>,
    /// How it was produced.
    pub outcome: Outcome,
    /// Records of the reply that were skipped as malformed.
    pub skipped_records: usize,
}

/// LeanRAG: one row of the relationship table of an aggregation request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelationRow {
    /// Source name.
    pub source: String,
    /// Target name.
    pub target: String,
    /// Description.
    pub description: String,
    /// degree(source) + degree(target).
    pub rank: usize,
}

/// LeanRAG: a request for the aggregate entity of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AggregateRequest {
    /// The layer being summarised (0 = base entities).
    pub layer: u32,
    /// The cluster's members, in index order.
    pub members: Vec<Member>,
    /// Stored relations whose two endpoints are both members.
    pub relations: Vec<RelationRow>,
    /// The input budget in cl100k description tokens, half for each table (`None`: LeanRAG's 12,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
}

/// One finding of an aggregate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Short statement.
    pub summary: String,
    /// Its explanation.
    pub explanation: String,
}

/// LeanRAG: an aggregate entity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AggregateSummary {
    /// Name (differs from every member name).
    pub name: String,
    /// Description.
    pub description: String,
    /// Findings.
    pub findings: Vec<Finding>,
    /// How it was produced.
    pub outcome: Outcome,
}

/// LeanRAG: a request for the sentence relating two aggregates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelateRequest {
    /// The layer whose clusters the aggregates summarise.
    pub layer: u32,
    /// First aggregate: name and findings.
    pub a: (String, Vec<Finding>),
    /// Second aggregate: name and findings.
    pub b: (String, Vec<Finding>),
    /// The crossing relations rendered as `relationship<|>A<|>B<|>description` lines.
    pub lines: String,
    /// The crossing relations' descriptions (for the extractive summary).
    pub descriptions: Vec<String>,
    /// Word limit of the sentence (`40 · (layer + 1)`).
    pub word_limit: usize,
}

/// LeanRAG: the sentence relating two aggregates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelateSummary {
    /// The sentence.
    pub text: String,
    /// How it was produced.
    pub outcome: Outcome,
}

/// Writes cluster summaries for both methods. Object safe; implemented by the LLM and extractive
/// summarisers and by callers' own strategies.
#[async_trait]
pub trait ClusterSummarizer: Send + Sync {
    /// A string that changes whenever the summaries could change.
    fn fingerprint(&self) -> String;

    /// HiRAG: attribute entities for one cluster plus a relation from each related member.
    async fn attribute_entities(&self, request: &AttributeRequest) -> Result<AttributeSummary>;

    /// LeanRAG: one aggregate entity for one cluster.
    async fn aggregate(&self, request: &AggregateRequest) -> Result<AggregateSummary>;

    /// LeanRAG: one sentence relating two aggregates.
    async fn relate(&self, request: &RelateRequest) -> Result<RelateSummary>;
}

/// The first sentence of a description's first part.
pub fn first_sentence(description: &str) -> String {
    let first_part = description.split(SEP).next().unwrap_or("");
    kgrag_text::sentences(first_part)
        .first()
        .map_or_else(String::new, |s| (*s).to_owned())
}

/// Members by degree (descending), ties by name.
fn by_degree(members: &[Member]) -> Vec<&Member> {
    let mut v: Vec<&Member> = members.iter().collect();
    v.sort_by(|a, b| b.degree.cmp(&a.degree).then_with(|| a.name.cmp(&b.name)));
    v
}

/// The offline kit's group name: `GROUP: ` and up to three member names by degree joined by ` / `.
pub fn group_name(members: &[Member]) -> String {
    let names: Vec<&str> = by_degree(members)
        .into_iter()
        .take(3)
        .map(|m| m.name.as_str())
        .collect();
    format!("GROUP: {}", names.join(" / "))
}

fn description_parts(members: &[Member]) -> Vec<String> {
    members
        .iter()
        .flat_map(|m| m.description.split(SEP))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The offline kit's cluster summaries (specs hirag §10, leanrag §10): group names from the members of
/// highest degree, descriptions as extractive summaries (≤ 100 tokens) of the member descriptions,
/// findings from the top-5 members, relation sentences as extractive summaries within the word limit.
#[derive(Debug, Clone)]
pub struct ExtractiveClusterSummarizer {
    text: Arc<ExtractiveSummarizer>,
    description_tokens: usize,
}

impl ExtractiveClusterSummarizer {
    /// A summariser on top of an extractive text summariser (its memo is shared).
    pub fn new(text: Arc<ExtractiveSummarizer>) -> Self {
        Self {
            text,
            description_tokens: 100,
        }
    }

    /// The underlying text summariser.
    pub fn text(&self) -> &Arc<ExtractiveSummarizer> {
        &self.text
    }

    async fn describe(&self, members: &[Member], encoding: Encoding) -> Result<String> {
        let parts = description_parts(members);
        let summary = self
            .text
            .summarize_texts(
                &parts,
                None,
                Budget::Tokens {
                    max: self.description_tokens,
                    encoding,
                },
            )
            .await?;
        if summary.is_empty() {
            let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
            return Ok(format!("A group of {}.", names.join(", ")));
        }
        Ok(summary)
    }

    fn findings(members: &[Member]) -> Vec<Finding> {
        by_degree(members)
            .into_iter()
            .take(5)
            .map(|m| Finding {
                summary: m.name.clone(),
                explanation: first_sentence(&m.description),
            })
            .collect()
    }
}

#[async_trait]
impl ClusterSummarizer for ExtractiveClusterSummarizer {
    fn fingerprint(&self) -> String {
        format!(
            "extractive-clusters/v1/{}",
            kgrag_types::Summarizer::fingerprint(self.text.as_ref())
        )
    }

    async fn attribute_entities(&self, request: &AttributeRequest) -> Result<AttributeSummary> {
        let name = group_name(&request.members);
        let description = self.describe(&request.members, Encoding::O200kBase).await?;
        let relations = request
            .members
            .iter()
            .map(|m| SummaryRelation {
                source: m.name.clone(),
                target: name.clone(),
                description: first_sentence(&m.description),
                strength: 1.0,
            })
            .collect();
        Ok(AttributeSummary {
            entities: vec![SummaryEntity {
                name,
                entity_type: "CLUSTER".into(),
                description,
            }],
            relations,
            outcome: Outcome::Extractive,
            skipped_records: 0,
        })
    }

    async fn aggregate(&self, request: &AggregateRequest) -> Result<AggregateSummary> {
        Ok(AggregateSummary {
            name: group_name(&request.members),
            description: self
                .describe(&request.members, Encoding::Cl100kBase)
                .await?,
            findings: Self::findings(&request.members),
            outcome: Outcome::Extractive,
        })
    }

    async fn relate(&self, request: &RelateRequest) -> Result<RelateSummary> {
        let text = self
            .text
            .summarize_texts(
                &request.descriptions,
                None,
                Budget::Words(request.word_limit),
            )
            .await?;
        Ok(RelateSummary {
            text,
            outcome: Outcome::Extractive,
        })
    }
}
