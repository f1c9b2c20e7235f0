//! G0, the base graph LeanRAG aggregates (spec §4).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kgrag_openie::normalise_name;
use kgrag_text::SentenceAliases;
use kgrag_types::{ChunkId, Entity, Extraction, Relation, Summarizer, SummaryRequest};

use crate::{LeanragError, Result};

/// A base entity of G0.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BaseNode {
    /// Name.
    pub name: String,
    /// Entity type (kept; the reference drops it at load).
    pub entity_type: String,
    /// Description.
    pub description: String,
    /// Source chunks.
    pub sources: Vec<ChunkId>,
}

/// G0: base entities, relations between them (indices into `entities`, one per unordered pair, weight 1 as
/// the reference forces) and the chunk store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BaseGraph {
    /// Entities.
    pub entities: Vec<BaseNode>,
    /// Relations `(a, b, description)`.
    pub relations: Vec<(usize, usize, String)>,
    /// Chunk id and text.
    pub chunks: Vec<(ChunkId, String)>,
    /// Sentences of the descriptions that composed description vectors embed as another text (HiRAG's
    /// base under `openie_cache`: each fact sentence as the rendering HippoRAG 2 embeds for the fact; see
    /// `kgrag_text::SentenceMean::with_aliases`). Empty by default.
    pub sentence_aliases: Arc<SentenceAliases>,
}

impl BaseGraph {
    /// G0 from merged entity and relation records (`g0 = "hirag"`: HiRAG's base records, or the base layer
    /// of its graph and the edges among it). Every relation endpoint must be an entity; a self-relation or a
    /// repeated pair is dropped (the first description wins).
    pub fn from_records(
        entities: &[Entity],
        relations: &[Relation],
        chunks: Vec<(ChunkId, String)>,
    ) -> Result<Self> {
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(entities.len());
        let mut nodes = Vec::with_capacity(entities.len());
        for e in entities {
            if index.contains_key(e.name.as_str()) {
                return Err(LeanragError::Input(format!(
                    "entity {:?} appears twice in G0",
                    e.name
                )));
            }
            index.insert(&e.name, nodes.len());
            nodes.push(BaseNode {
                name: e.name.clone(),
                entity_type: e.entity_type.clone(),
                description: e.description.clone(),
                sources: e.source_chunks.iter().cloned().collect(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(relations.len());
        for r in relations {
            let (Some(&a), Some(&b)) = (index.get(r.source.as_str()), index.get(r.target.as_str()))
            else {
                return Err(LeanragError::Input(format!(
                    "relation {:?} – {:?} names an entity G0 does not have",
                    r.source, r.target
                )));
            };
            if a != b && seen.insert((a.min(b), a.max(b))) {
                out.push((a, b, r.description.clone()));
            }
        }
        Ok(Self {
            entities: nodes,
            relations: out,
            chunks,
            sentence_aliases: Arc::default(),
        })
    }
}

/// Descriptions of more than this many cl100k tokens are rewritten (spec §4.2).
const NATIVE_SUMMARY_TRIGGER: usize = 50;
/// The rewrite's length cap.
const NATIVE_SUMMARY_TOKENS: usize = 100;

fn strip_quotes(s: &str) -> String {
    s.replace('"', "").trim().to_owned()
}

/// G0 with LeanRAG's own merge rules (`g0 = "native"`, spec §4.2) over the extractions of `chunks` (walked in
/// chunk order): names normalised as HiRAG parses them, `"` stripped from names, types and descriptions;
/// records of one name merged (first type, descriptions joined by ` | `, sources de-duplicated); a merged
/// description of more than 50 cl100k tokens rewritten by `summarizer` (≤ 100 tokens; an LLM or the
/// extractive summary); relations undirected, weight 1, descriptions of one pair joined by ` | `; relation
/// endpoints no record names become `UNKNOWN` entities. Returns G0 and how many descriptions were rewritten.
pub async fn native_base_graph(
    chunks: Vec<(ChunkId, String)>,
    extractions: &[Extraction],
    summarizer: &dyn Summarizer,
) -> Result<(BaseGraph, usize)> {
    let by_chunk: HashMap<&ChunkId, &Extraction> =
        extractions.iter().map(|e| (&e.chunk_id, e)).collect();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut nodes: Vec<(BaseNode, Vec<String>, BTreeSet<ChunkId>)> = Vec::new();
    let mut pairs: HashMap<(usize, usize), usize> = HashMap::new();
    let mut relations: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut node_of = |name: &str,
                       entity_type: &str,
                       nodes: &mut Vec<(BaseNode, Vec<String>, BTreeSet<ChunkId>)>|
     -> usize {
        *index.entry(name.to_owned()).or_insert_with(|| {
            nodes.push((
                BaseNode {
                    name: name.to_owned(),
                    entity_type: entity_type.to_owned(),
                    ..BaseNode::default()
                },
                Vec::new(),
                BTreeSet::new(),
            ));
            nodes.len() - 1
        })
    };
    for (chunk, _) in &chunks {
        let Some(e) = by_chunk.get(chunk) else {
            continue;
        };
        for r in &e.entities {
            let name = strip_quotes(&normalise_name(&r.name));
            if name.is_empty() {
                continue;
            }
            let i = node_of(
                &name,
                &strip_quotes(&normalise_name(&r.entity_type)),
                &mut nodes,
            );
            let d = strip_quotes(&r.description);
            if !d.is_empty() {
                nodes[i].1.push(d);
            }
            nodes[i].2.extend(r.source_chunks.iter().cloned());
        }
        for r in &e.relations {
            let (s, t) = (
                strip_quotes(&normalise_name(&r.source)),
                strip_quotes(&normalise_name(&r.target)),
            );
            if s.is_empty() || t.is_empty() || s == t {
                continue;
            }
            let a = node_of(&s, "UNKNOWN", &mut nodes);
            let b = node_of(&t, "UNKNOWN", &mut nodes);
            let key = (a.min(b), a.max(b));
            let slot = *pairs.entry(key).or_insert_with(|| {
                relations.push((key.0, key.1, Vec::new()));
                relations.len() - 1
            });
            let d = strip_quotes(&r.description);
            if !d.is_empty() {
                relations[slot].2.push(d);
            }
        }
    }
    let mut rewritten = 0;
    let mut entities = Vec::with_capacity(nodes.len());
    for (mut node, descriptions, sources) in nodes {
        let joined = descriptions.join(" | ");
        node.description = if crate::cl100k(&joined) > NATIVE_SUMMARY_TRIGGER {
            rewritten += 1;
            summarizer
                .summarize(&SummaryRequest {
                    subject: node.name.clone(),
                    descriptions,
                    max_tokens: NATIVE_SUMMARY_TOKENS,
                    query: None,
                })
                .await
                .map_err(|e| LeanragError::Model(format!("rewriting {:?}: {e}", node.name)))?
        } else {
            joined
        };
        node.sources = sources.into_iter().collect();
        entities.push(node);
    }
    let relations = relations
        .into_iter()
        .map(|(a, b, d)| (a, b, d.join(" | ")))
        .collect();
    Ok((
        BaseGraph {
            entities,
            relations,
            chunks,
            sentence_aliases: Arc::default(),
        },
        rewritten,
    ))
}
