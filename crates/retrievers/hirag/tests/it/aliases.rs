//! Composed description vectors under `openie_cache` embed each fact sentence as HippoRAG 2's text of the
//! fact, so that an embedding cache gives the methods one vector per fact.

use std::collections::HashSet;
use std::sync::Arc;

use kgrag_hirag::{
    fact_sentence_aliases, openie_extractions, BaseSource, DescriptionVectors, HiragConfig,
};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::Triple;

use crate::common::{build, chunk};

fn triple(s: &str, p: &str, o: &str) -> Triple {
    Triple::new(s, p, o)
}

#[tokio::test]
async fn the_hierarchy_embeds_fact_sentences_as_hipporag_s_fact_texts() {
    let chunks = [
        chunk("Alice founded Acme in Paris. Acme sells tea."),
        chunk("Carol met Alice in Rome. Acme hired Dave."),
    ];
    let triples = [
        vec![
            triple("Alice", "founded", "Acme"),
            triple("Acme", "is based in", "Paris"),
            triple("Acme", "sells", "tea"),
        ],
        vec![
            triple("Carol", "met", "Alice"),
            triple("Acme", "hired", "Dave"),
            triple("Alice", "visited", "Rome"),
        ],
    ];
    let raw: Vec<_> = chunks
        .iter()
        .zip(triples)
        .map(|(c, t)| (c.id.clone(), t))
        .collect();
    let extractions = openie_extractions(&raw);
    let aliases = fact_sentence_aliases(&extractions);
    assert_eq!(aliases.len(), 6);
    for composed in [DescriptionVectors::Sentences, DescriptionVectors::Text] {
        let embedder = Arc::new(HashingEmbedder::new(32));
        let config = HiragConfig {
            base: BaseSource::OpenieCache,
            description_vectors: composed,
            log_layers: false,
            ..HiragConfig::default()
        };
        build(&chunks, &extractions, embedder.clone(), &config).await;
        let seen: HashSet<String> = embedder.texts().into_iter().collect();
        // Whole descriptions (the entity vectors retrieval searches) are embedded as they are: an entity
        // described by one fact embeds that sentence.
        let whole: HashSet<&str> = extractions
            .iter()
            .flat_map(|e| &e.entities)
            .map(|e| e.description.as_str())
            .collect();
        if composed == DescriptionVectors::Sentences {
            assert!(aliases.values().all(|fact| seen.contains(fact)), "{seen:?}");
            assert!(aliases
                .keys()
                .all(|s| !seen.contains(s) || whole.contains(s)));
        } else {
            // Not composed: descriptions are embedded whole, no fact text among them.
            assert!(aliases.values().all(|fact| !seen.contains(fact)));
        }
    }
}
