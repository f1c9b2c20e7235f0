//! HiRAG's base graph records: the extracted records merged (spec §4.3–§4.4) and their long descriptions
//! summarised or shortened (§4.5).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kgrag_openie::graphrag::MERGE_SEPARATOR;
use kgrag_openie::{
    add_missing_endpoints, merge_entities, merge_relations, normalise_name,
    summarise_long_descriptions,
};
use kgrag_text::{Encoding, ExtractiveSummarizer};
use kgrag_types::{
    ChatModel, Chunk, ChunkId, CountingChat, Entity, Extraction, Relation, StageUsage, Summarizer,
};

use super::Models;
use crate::config::{BaseSource, HiragConfig};
use crate::summarize::LlmDescriptionSummarizer;
use crate::{HiragError, Result};

/// The base graph's records after HiRAG's merge (spec §4.3–§4.4), before long descriptions are summarised.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergedRecords {
    /// One entity per name, in first-seen order, then the `UNKNOWN` endpoints.
    pub entities: Vec<Entity>,
    /// One relation per unordered pair (sorted), self-relations dropped.
    pub relations: Vec<Relation>,
    /// Names that some entity record gave (the rest of `entities` are `UNKNOWN` endpoints).
    pub record_names: Vec<String>,
    /// Per name, the description of the first record of the last chunk naming it (spec §5.1).
    pub last_first: HashMap<String, String>,
    /// Entity and relation records read.
    pub records: (usize, usize),
    /// Records skipped (empty names, self-relations).
    pub skipped_records: usize,
    /// `UNKNOWN` endpoints added.
    pub unknown_endpoints: usize,
    /// The extractions' own model usage.
    pub extraction_usage: StageUsage,
    /// Descriptions summarised or shortened ([`base_records`]).
    pub descriptions_summarised: usize,
    /// Description summaries that fell back to the extractive summary.
    pub description_fallbacks: u64,
    /// The description summaries' model usage.
    pub description_usage: Option<StageUsage>,
    /// Seconds per stage.
    pub secs: BTreeMap<String, f64>,
}

/// Merges the records of `extractions`, walked in the order of `chunks` (a chunk without an extraction
/// adds nothing; repeated chunks count once). `base = "extract"` names go through HiRAG's normalisation
/// and empty names are skipped; `openie_cache` phrases are kept as they are (HippoRAG's, the empty
/// phrase included, so the entities are HippoRAG's phrase nodes one for one).
pub fn merge_records(
    chunks: &[Chunk],
    extractions: &[Extraction],
    base: BaseSource,
) -> MergedRecords {
    let mut out = MergedRecords::default();
    let by_chunk: HashMap<&ChunkId, &Extraction> =
        extractions.iter().map(|e| (&e.chunk_id, e)).collect();
    let normalise = |s: &str| -> String {
        match base {
            BaseSource::Extract => normalise_name(s),
            BaseSource::OpenieCache => s.to_owned(),
        }
    };
    // The records as merged, in order: the extraction's own where normalising leaves them as they are
    // (always under `openie_cache`), else a normalised copy kept aside (a list of whole records would be
    // ~120 bytes a relation, and a relation is ~15 a passage).
    let mut entity_records: Vec<Record<'_, Entity>> = Vec::new();
    let mut relation_records: Vec<Record<'_, Relation>> = Vec::new();
    let mut changed_entities: Vec<Entity> = Vec::new();
    let mut changed_relations: Vec<Relation> = Vec::new();
    let mut done_chunks = HashSet::new();
    for c in chunks {
        if !done_chunks.insert(&c.id) {
            continue;
        }
        let Some(e) = by_chunk.get(&c.id) else {
            continue;
        };
        out.extraction_usage.calls += e.diagnostics.llm_calls;
        out.extraction_usage.prompt_tokens += e.diagnostics.prompt_tokens;
        out.extraction_usage.completion_tokens += e.diagnostics.completion_tokens;
        out.records.0 += e.entities.len();
        out.records.1 += e.relations.len();
        let mut first_here: HashMap<String, String> = HashMap::new();
        for r in &e.entities {
            let name = normalise(&r.name);
            if name.is_empty() && base == BaseSource::Extract {
                out.skipped_records += 1;
                continue;
            }
            first_here
                .entry(name.clone())
                .or_insert_with(|| r.description.clone());
            let entity_type = normalise(&r.entity_type);
            entity_records.push(if name == r.name && entity_type == r.entity_type {
                Record::Kept(r)
            } else {
                changed_entities.push(Entity {
                    name,
                    entity_type,
                    ..r.clone()
                });
                Record::Changed(changed_entities.len() - 1)
            });
        }
        out.last_first.extend(first_here);
        for r in &e.relations {
            let (s, t) = (normalise(&r.source), normalise(&r.target));
            if s == t || (base == BaseSource::Extract && (s.is_empty() || t.is_empty())) {
                out.skipped_records += 1;
                continue;
            }
            relation_records.push(if s == r.source && t == r.target {
                Record::Kept(r)
            } else {
                changed_relations.push(Relation {
                    source: s,
                    target: t,
                    ..r.clone()
                });
                Record::Changed(changed_relations.len() - 1)
            });
        }
    }
    out.entities = merge_entities(entity_records.iter().map(|r| r.get(&changed_entities)));
    drop((entity_records, changed_entities));
    out.relations = merge_relations(relation_records.iter().map(|r| r.get(&changed_relations)));
    drop((relation_records, changed_relations));
    out.record_names = out.entities.iter().map(|e| e.name.clone()).collect();
    out.unknown_endpoints = add_missing_endpoints(&mut out.entities, &out.relations);
    out
}

/// A record to merge: an extraction's own, or the normalised copy at this position of the changed ones.
enum Record<'a, T> {
    Kept(&'a T),
    Changed(usize),
}

impl<'a, T> Record<'a, T> {
    /// The record, `changed` being the normalised copies.
    fn get<'b>(&self, changed: &'b [T]) -> &'b T
    where
        'a: 'b,
    {
        match *self {
            Record::Kept(r) => r,
            Record::Changed(i) => &changed[i],
        }
    }
}

/// HiRAG's base graph records (spec §4.3–§4.5): [`merge_records`], then every merged description of at least
/// `summary_trigger_tokens` summarised (`base = "extract"`: the cheap chat model, else the best one, else the
/// extractive summary) or, for `openie_cache`, kept within `openie_description_tokens`. This is what LeanRAG's
/// `g0 = "hirag"` reads when no full HiRAG index is built.
pub async fn base_records(
    chunks: &[Chunk],
    extractions: &[Extraction],
    models: &Models,
    config: &HiragConfig,
) -> Result<MergedRecords> {
    let started = Instant::now();
    let mut merged = merge_records(chunks, extractions, config.base);
    merged
        .secs
        .insert("hirag_merge".into(), started.elapsed().as_secs_f64());
    let started = Instant::now();
    match config.base {
        BaseSource::Extract => {
            let text = Arc::new(ExtractiveSummarizer::new(
                models.embedder.clone(),
                Encoding::O200kBase,
            ));
            let cheap = models.cheap_chat.clone().or_else(|| models.chat.clone());
            let counted = cheap.map(|c| Arc::new(CountingChat::new(c)));
            let llm = counted.as_ref().map(|c| {
                LlmDescriptionSummarizer::new(c.clone() as Arc<dyn ChatModel>, text.clone())
            });
            let summarizer: &dyn Summarizer = match &llm {
                Some(l) => l,
                None => text.as_ref(),
            };
            merged.descriptions_summarised = summarise_long_descriptions(
                &mut merged.entities,
                &mut merged.relations,
                summarizer,
                config.summary_trigger_tokens,
            )
            .await
            .map_err(|e| HiragError::Model(format!("summarising long descriptions: {e}")))?;
            merged.description_fallbacks = llm.as_ref().map_or(0, |l| l.fallbacks());
            merged.description_usage = counted.as_ref().map(|c| c.usage());
        }
        BaseSource::OpenieCache => {
            for e in &mut merged.entities {
                let (kept, cut) = keep_parts(&e.description, config.openie_description_tokens);
                if cut {
                    e.description = kept;
                    merged.descriptions_summarised += 1;
                }
            }
        }
    }
    merged
        .secs
        .insert("hirag_descriptions".into(), started.elapsed().as_secs_f64());
    Ok(merged)
}

/// Whole `<SEP>` parts of `description` while they fit `budget` o200k tokens (the first part always).
fn keep_parts(description: &str, budget: usize) -> (String, bool) {
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0;
    let parts: Vec<&str> = description.split(MERGE_SEPARATOR).collect();
    for p in &parts {
        used += crate::tokens(p);
        if used > budget && !kept.is_empty() {
            break;
        }
        kept.push(p);
    }
    let cut = kept.len() < parts.len();
    (kept.join(MERGE_SEPARATOR), cut)
}
