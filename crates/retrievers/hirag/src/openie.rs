//! `base = "openie_cache"`: HippoRAG OpenIE triples as HiRAG entity and relation records, without an LLM.

use std::collections::HashMap;

use kgrag_graph_store::hippo::prepare_triples;
use kgrag_openie::graphrag::MERGE_SEPARATOR;
use kgrag_text::SentenceAliases;
use kgrag_types::{ChunkId, Entity, Extraction, Normalisation, Relation, Triple, VecSet};

/// The records of one chunk's raw OpenIE triples in HiRAG's form. Triples are prepared as HippoRAG 2
/// prepares them (exact duplicates within the chunk dropped, each element ASCII-normalised; nothing else
/// dropped), so the phrases are HippoRAG's phrase nodes one for one:
///
/// * one entity record per phrase of the chunk (subject or object, in order of first appearance), type
///   empty, described by the chunk's facts that mention it, written as sentences (`subject predicate
///   object.`, from the raw triple) and joined by `<SEP>`;
/// * one relation record per fact whose two phrases differ (self-loops are not edges, as in HippoRAG),
///   strength 1 — merged across chunks the weight is the number of occurrences — described by the fact's
///   sentence, sourced from the chunk.
///
/// The index's merge then gives one entity per phrase and one relation per fact pair; descriptions are
/// kept within `openie_description_tokens` there.
pub fn openie_extractions(chunks: &[(ChunkId, Vec<Triple>)]) -> Vec<Extraction> {
    openie_extractions_of(chunks.iter().map(|(c, t)| (c, t.as_slice())))
}

/// [`openie_extractions`] of chunks whose triples are borrowed (a corpus's extractions, say), so that no
/// copy of every triple is made to build the records.
pub fn openie_extractions_of<'a>(
    chunks: impl IntoIterator<Item = (&'a ChunkId, &'a [Triple])>,
) -> Vec<Extraction> {
    chunks
        .into_iter()
        .map(|(chunk, raw)| {
            let mut seen = std::collections::HashSet::new();
            let raw: Vec<&Triple> = raw.iter().filter(|t| seen.insert(*t)).collect();
            let owned: Vec<Triple> = raw.iter().map(|t| (*t).clone()).collect();
            let normalised = prepare_triples(&owned, Normalisation::Ascii, false);
            let sources: VecSet<ChunkId> = [chunk.clone()].into_iter().collect();
            let mut order: Vec<String> = Vec::new();
            let mut facts: HashMap<String, Vec<String>> = HashMap::new();
            let mut relations = Vec::new();
            for (t, n) in raw.iter().zip(&normalised) {
                let sentence = format!(
                    "{} {} {}.",
                    t.subject().trim(),
                    t.predicate().trim(),
                    t.object().trim()
                );
                for phrase in [n.subject(), n.object()] {
                    let list = facts.entry(phrase.to_owned()).or_insert_with(|| {
                        order.push(phrase.to_owned());
                        Vec::new()
                    });
                    if !list.contains(&sentence) {
                        list.push(sentence.clone());
                    }
                }
                if n.subject() != n.object() {
                    relations.push(Relation {
                        source: n.subject().to_owned(),
                        target: n.object().to_owned(),
                        keywords: n.predicate().to_owned(),
                        description: sentence,
                        weight: 1.0,
                        source_chunks: sources.clone(),
                    });
                }
            }
            let entities = order
                .into_iter()
                .map(|name| {
                    let description = facts
                        .get(&name)
                        .map(|f| f.join(MERGE_SEPARATOR))
                        .unwrap_or_default();
                    Entity {
                        name,
                        entity_type: String::new(),
                        description,
                        source_chunks: sources.clone(),
                    }
                })
                .collect();
            Extraction {
                chunk_id: chunk.clone(),
                entities,
                relations,
                triples: Vec::new(),
                diagnostics: Default::default(),
            }
        })
        .collect()
}

/// The fact sentences of [`openie_extractions`]' relation records, each aliased to the text HippoRAG 2
/// embeds for the fact: its prepared triple rendered as `('subject', 'predicate', 'object')` (what a
/// relation record keeps as endpoints and keywords). Composed description vectors embed a fact sentence as
/// that text, so that an embedding cache gives the three methods one vector per fact
/// ([`SentenceMean::with_aliases`](kgrag_text::SentenceMean::with_aliases)). Self-loop facts have no
/// relation record and keep their sentence.
pub fn fact_sentence_aliases(extractions: &[Extraction]) -> SentenceAliases {
    extractions
        .iter()
        .flat_map(|e| &e.relations)
        .map(|r| {
            let fact = Triple::new(&r.source, &r.keywords, &r.target);
            (r.description.as_str(), fact.render())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triple(s: &str, p: &str, o: &str) -> Triple {
        Triple::new(s, p, o)
    }

    /// Each relation's sentence is aliased to HippoRAG 2's text of the prepared fact; a self-loop fact
    /// (no relation record) keeps its sentence.
    #[test]
    fn fact_sentences_alias_to_the_fact_text_hipporag_embeds() {
        let raw = vec![
            triple(" Émile Zola ", "wrote", "Germinal"),
            triple("Paris", "is", "Paris"),
        ];
        let chunk = ChunkId::from_content("Émile Zola wrote Germinal in Paris.");
        let extractions = openie_extractions(&[(chunk, raw.clone())]);
        let aliases = fact_sentence_aliases(&extractions);
        let prepared = prepare_triples(&raw, Normalisation::Ascii, false);
        assert_eq!(aliases.len(), 1);
        assert_eq!(
            aliases.get("Émile Zola wrote Germinal."),
            Some(prepared[0].render().as_str())
        );
        assert!(!aliases.contains_key("Paris is Paris."));
        let described = &extractions[0].entities[0].description;
        assert!(
            described.contains("Émile Zola wrote Germinal."),
            "{described}"
        );
    }
}
