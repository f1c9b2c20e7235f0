//! HiRAG's base graph records: the extracted records merged (spec §4.3–§4.4) and their long descriptions
//! summarised or shortened (§4.5).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kgrag_openie::graphrag::MERGE_SEPARATOR;
use kgrag_openie::{
    add_missing_endpoints, normalise_name, summarise_long_descriptions, EntityMerger,
    RelationMerger,
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
///
/// Extractions given by value (a `Vec`) are merged without a copy: each chunk's records move into the
/// merge and their lists are freed as it goes, so the records and the merged entities and relations are
/// never held side by side. Borrowed ones are copied a chunk at a time.
pub fn merge_records<'a>(
    chunks: &[Chunk],
    extractions: impl Into<Cow<'a, [Extraction]>>,
    base: BaseSource,
) -> MergedRecords {
    let mut extractions: Cow<'a, [Extraction]> = extractions.into();
    let mut out = MergedRecords::default();
    let by_chunk: HashMap<ChunkId, usize> = extractions
        .iter()
        .enumerate()
        .map(|(i, e)| (e.chunk_id.clone(), i))
        .collect();
    let normalise = |s: &mut String| {
        if base == BaseSource::Extract {
            let n = normalise_name(s);
            if n != *s {
                *s = n;
            }
        }
    };
    let mut entities = EntityMerger::new();
    let mut relations = RelationMerger::new();
    let mut done_chunks = HashSet::new();
    for c in chunks {
        if !done_chunks.insert(&c.id) {
            continue;
        }
        let Some(&i) = by_chunk.get(&c.id) else {
            continue;
        };
        let d = &extractions[i].diagnostics;
        out.extraction_usage.calls += d.llm_calls;
        out.extraction_usage.prompt_tokens += d.prompt_tokens;
        out.extraction_usage.completion_tokens += d.completion_tokens;
        let (chunk_entities, chunk_relations) = match &mut extractions {
            Cow::Owned(all) => (
                std::mem::take(&mut all[i].entities),
                std::mem::take(&mut all[i].relations),
            ),
            Cow::Borrowed(all) => (all[i].entities.clone(), all[i].relations.clone()),
        };
        out.records.0 += chunk_entities.len();
        out.records.1 += chunk_relations.len();
        let mut first_here: HashMap<String, String> = HashMap::new();
        for mut r in chunk_entities {
            normalise(&mut r.name);
            if r.name.is_empty() && base == BaseSource::Extract {
                out.skipped_records += 1;
                continue;
            }
            first_here
                .entry(r.name.clone())
                .or_insert_with(|| r.description.clone());
            normalise(&mut r.entity_type);
            entities.add(r);
        }
        out.last_first.extend(first_here);
        for mut r in chunk_relations {
            normalise(&mut r.source);
            normalise(&mut r.target);
            if r.source == r.target
                || (base == BaseSource::Extract && (r.source.is_empty() || r.target.is_empty()))
            {
                out.skipped_records += 1;
                continue;
            }
            relations.add(r);
        }
    }
    drop(extractions);
    out.entities = entities.finish();
    out.relations = relations.finish();
    out.record_names = out.entities.iter().map(|e| e.name.clone()).collect();
    out.unknown_endpoints = add_missing_endpoints(&mut out.entities, &out.relations);
    out
}

/// HiRAG's base graph records (spec §4.3–§4.5): [`merge_records`], then every merged description of at least
/// `summary_trigger_tokens` summarised (`base = "extract"`: the cheap chat model, else the best one, else the
/// extractive summary) or, for `openie_cache`, kept within `openie_description_tokens`. This is what LeanRAG's
/// `g0 = "hirag"` reads when no full HiRAG index is built.
pub async fn base_records<'a>(
    chunks: &[Chunk],
    extractions: impl Into<Cow<'a, [Extraction]>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_text::{Chunker, ChunkerConfig};
    use kgrag_types::{Document, VecSet};

    fn entity(name: &str, entity_type: &str, description: &str, chunk: &ChunkId) -> Entity {
        Entity {
            name: name.into(),
            entity_type: entity_type.into(),
            description: description.into(),
            source_chunks: VecSet::from([chunk.clone()]),
        }
    }

    fn relation(
        s: &str,
        t: &str,
        keywords: &str,
        description: &str,
        w: f64,
        chunk: &ChunkId,
    ) -> Relation {
        Relation {
            source: s.into(),
            target: t.into(),
            keywords: keywords.into(),
            description: description.into(),
            weight: w,
            source_chunks: VecSet::from([chunk.clone()]),
        }
    }

    /// Extractions given by value merge to what the same borrowed give, under both bases; the merge walks
    /// the chunks' order (a repeated chunk once, an extraction of no listed chunk not at all), votes the
    /// type, sorts the description parts, sums the weights, keeps the first keywords, and counts what it
    /// skips.
    #[test]
    fn records_given_by_value_merge_as_borrowed_ones() {
        let chunker = Chunker::new(ChunkerConfig::hipporag()).unwrap();
        let chunks: Vec<Chunk> = ["First passage.", "Second passage.", "Third passage."]
            .iter()
            .flat_map(|t| chunker.chunk(&Document::new(*t)).unwrap())
            .collect();
        let (a, b, c) = (&chunks[0].id, &chunks[1].id, &chunks[2].id);
        let mut ea = Extraction::empty(a.clone());
        ea.entities = vec![
            entity("alice", "person", "Alice is here.", a),
            entity("\"Bob\"", "PERSON", "Bob.<SEP>Bob again.", a),
            entity("  ", "x", "blank", a),
        ];
        ea.relations = vec![
            relation("alice", "bob", "knows", "Alice knows Bob.", 1.0, a),
            relation("ALICE", "alice", "self", "Self.", 1.0, a),
            relation("", "bob", "k", "No source.", 1.0, a),
        ];
        ea.diagnostics.llm_calls = 2;
        let mut eb = Extraction::empty(b.clone());
        eb.entities = vec![
            entity("ALICE", "org", "Alice the org.", b),
            entity("alice", "org", "Alice again.", b),
        ];
        eb.relations = vec![
            relation("Bob", "Alice", "likes", "Bob likes Alice.", 2.0, b),
            relation("bob", "carol", "knows", "Bob knows Carol.", 1.0, b),
        ];
        let mut ec = Extraction::empty(c.clone());
        ec.entities = vec![entity("dave", "person", "Not walked.", c)];
        let extractions = vec![ea, eb, ec];
        let walk = vec![chunks[1].clone(), chunks[0].clone(), chunks[1].clone()];
        for base in [BaseSource::Extract, BaseSource::OpenieCache] {
            assert_eq!(
                merge_records(&walk, extractions.clone(), base),
                merge_records(&walk, &extractions, base),
                "{base:?}"
            );
        }
        let m = merge_records(&walk, extractions, BaseSource::Extract);
        let names: Vec<&str> = m.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["ALICE", "BOB", "CAROL"]);
        assert_eq!(m.record_names, ["ALICE", "BOB"]);
        assert_eq!(m.entities[0].entity_type, "ORG");
        assert_eq!(
            m.entities[0].description,
            "Alice again.<SEP>Alice is here.<SEP>Alice the org."
        );
        assert_eq!(m.entities[0].source_chunks.len(), 2);
        assert_eq!(m.entities[2].entity_type, "UNKNOWN");
        assert_eq!(m.relations.len(), 2);
        let ab = &m.relations[0];
        assert_eq!((ab.source.as_str(), ab.target.as_str()), ("ALICE", "BOB"));
        assert_eq!((ab.weight, ab.keywords.as_str()), (3.0, "likes"));
        assert_eq!(ab.description, "Alice knows Bob.<SEP>Bob likes Alice.");
        assert_eq!(m.records, (5, 5));
        assert_eq!(m.skipped_records, 3);
        assert_eq!(m.unknown_endpoints, 1);
        assert_eq!(m.extraction_usage.calls, 2);
        assert_eq!(
            m.last_first.get("ALICE").map(String::as_str),
            Some("Alice is here.")
        );
    }
}
