//! Reference data (`KGRAG_DATA_DIR`): the `openie_cache` adapter on MuSiQue's GPT-3.5 triples, and three
//! UltraDomain Mix documents indexed offline with the rule extractor.

use std::collections::HashSet;
use std::sync::Arc;

use kgrag_eval::ExtractionSource;
use kgrag_graph_store::hippo::prepare_triples;
use kgrag_hirag::{
    fact_sentence_aliases, merge_records, openie_extractions, BaseSource, ExtractionMode,
    HiragConfig, HiragRetriever, Mode,
};
use kgrag_openie::read_openie_file;
use kgrag_text::{Chunker, ChunkerConfig};
use kgrag_types::testing::{data_file, HashingEmbedder};
use kgrag_types::{Document, Extraction, Normalisation, RetrievalRequest, Retriever};

use crate::common::build;

fn data_dir() -> Option<std::path::PathBuf> {
    let openie = data_file(
        "musique-hipporag/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json",
    )?;
    Some(openie.parent()?.parent()?.to_path_buf())
}

#[test]
fn openie_cache_adapter_on_musique() {
    let Some(dir) = data_dir() else {
        return;
    };
    let ds = kgrag_eval::load("musique-100", &dir).unwrap();
    let ExtractionSource::OpenIeFile(path) = &ds.extraction else {
        panic!("musique-100 has an OpenIE file");
    };
    let docs = read_openie_file(path).unwrap();
    let chunker = Chunker::new(ChunkerConfig::hipporag()).unwrap();
    let mut chunks = Vec::new();
    let mut seen = HashSet::new();
    for p in &ds.passages {
        if seen.insert(p.chunk_id()) {
            chunks.extend(chunker.chunk(&Document::new(p.content())).unwrap());
        }
    }
    assert_eq!(chunks.len(), 1_890);
    let corpus: HashSet<_> = chunks.iter().map(|c| c.id.clone()).collect();
    assert!(chunks
        .iter()
        .zip(&ds.passages)
        .all(|(c, p)| c.id == p.chunk_id()));
    let triples: Vec<_> = docs
        .iter()
        .map(|d| (d.extraction.chunk_id.clone(), d.extraction.triples.clone()))
        .collect();
    let extractions = openie_extractions(&triples);
    let merged = merge_records(&chunks, &extractions, BaseSource::OpenieCache);
    // Given by value (moved into the merge a chunk at a time): the same records.
    assert_eq!(
        merge_records(&chunks, extractions.clone(), BaseSource::OpenieCache),
        merged
    );
    // The OpenIE import's phrase nodes (the empty phrase included) and the graph store's fact pairs
    // without self-loops (hipporag2.md §11).
    assert_eq!(merged.record_names.len(), 16_235);
    assert_eq!(
        merged.entities.len(),
        16_235,
        "no UNKNOWN endpoint: every phrase is an entity"
    );
    assert_eq!(merged.relations.len(), 16_509);
    assert_eq!(merged.unknown_endpoints, 0);
    // Weights are occurrence counts: 17,184 fact occurrences between distinct phrases.
    let occurrences: f64 = merged.relations.iter().map(|r| r.weight).sum();
    assert_eq!(occurrences, 17_184.0);
    for r in &merged.relations {
        assert!(!r.source_chunks.is_empty());
        assert!(r.source_chunks.iter().all(|c| corpus.contains(c)), "{r:?}");
    }
    for e in &merged.entities {
        assert!(!e.source_chunks.is_empty() && e.source_chunks.iter().all(|c| corpus.contains(c)));
    }
    // Described by their facts as sentences.
    assert!(merged
        .entities
        .iter()
        .all(|e| e.description.split("<SEP>").all(|s| s.ends_with('.'))));
    // Each relation's fact sentence is aliased to a fact text HippoRAG 2 embeds (its prepared triples
    // rendered), so that the hierarchy's composed vectors reuse HippoRAG 2's fact vectors.
    let aliases = fact_sentence_aliases(&extractions);
    let hippo_facts: HashSet<String> = triples
        .iter()
        .flat_map(|(_, raw)| prepare_triples(raw, Normalisation::Ascii, false))
        .map(|t| t.render())
        .collect();
    assert_eq!(
        hippo_facts.len(),
        17_036,
        "HippoRAG 2's fact count (hipporag2.md §11)"
    );
    assert!(aliases.values().all(|fact| hippo_facts.contains(fact)));
    assert!(extractions
        .iter()
        .flat_map(|e| &e.relations)
        .all(|r| aliases.contains_key(&r.description)));
    assert!(
        aliases.len() > 16_000,
        "{} aliased sentences",
        aliases.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ultradomain_mix_offline() {
    let (Some(contexts), Some(answers)) = (
        data_file("ultradomain-mix/mix_unique_contexts.json"),
        data_file("ultradomain-mix/mix_hi_result_deepseek.jsonl"),
    ) else {
        return;
    };
    let text = std::fs::read_to_string(contexts).unwrap();
    let docs: Vec<String> = serde_json::from_str(&text).unwrap();
    assert_eq!(docs.len(), 61);
    // Doc 0 (Shelley's The Witch of Atlas, the first query's subject) and the two shortest others.
    let mut by_len: Vec<usize> = (1..docs.len()).collect();
    by_len.sort_by_key(|&i| (docs[i].len(), i));
    let picked = [0, by_len[0], by_len[1]];
    let chunker = Chunker::new(ChunkerConfig::hirag()).unwrap();
    let mut chunks = Vec::new();
    for &i in &picked {
        chunks.extend(chunker.chunk(&Document::new(docs[i].clone())).unwrap());
    }
    let extractions: Vec<Extraction> = chunks
        .iter()
        .map(|c| kgrag_openie::RuleExtractor.extract_text(c))
        .collect();
    let config = HiragConfig {
        base: BaseSource::Extract,
        extraction: ExtractionMode::Rules,
        log_layers: false,
        ..HiragConfig::default()
    };
    let embedder = Arc::new(HashingEmbedder::new(64));
    let index = Arc::new(build(&chunks, &extractions, embedder.clone(), &config).await);
    let s = index.stats();
    eprintln!("ultradomain-mix offline: {s:?}");
    assert!(
        s.hierarchy_layers.len() >= 2,
        "summary layers exist: {:?}",
        s.hierarchy_layers
    );
    assert!(s.entities_per_layer.len() >= 2);
    assert!(!s.communities_per_level.is_empty());
    assert_eq!(index.communities().len(), s.reports_written);
    assert!(index
        .communities()
        .iter()
        .all(|c| !c.report_string.is_empty()));

    let answers = std::fs::read_to_string(answers).unwrap();
    let first: serde_json::Value = serde_json::from_str(answers.lines().next().unwrap()).unwrap();
    let query = first["query"].as_str().unwrap();
    assert!(query.starts_with("What is the main objection Mary has"));
    let hi = HiragRetriever::new(index.clone(), embedder, Mode::Hi);
    let ctx = hi
        .retrieve(&RetrievalRequest {
            query: query.into(),
            top_k: 20,
        })
        .await
        .unwrap();
    assert_eq!(ctx.stats["no_entity_hit"], 0.0);
    assert!(ctx.rendered.contains("-----Backgrounds-----"));
    assert!(!ctx.reports.is_empty() && !ctx.passages.is_empty());
    // Every mode's summed token count equals a full count on real, long text.
    let questions: Vec<String> = answers
        .lines()
        .take(5)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["query"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    for mode in Mode::ALL {
        let r = HiragRetriever::new(index.clone(), Arc::new(HashingEmbedder::new(64)), mode);
        for q in &questions {
            let ctx = r
                .retrieve(&RetrievalRequest {
                    query: q.clone(),
                    top_k: 20,
                })
                .await
                .unwrap();
            assert_eq!(
                ctx.context_tokens,
                kgrag_text::Encoding::O200kBase
                    .count(&ctx.rendered)
                    .unwrap(),
                "{mode:?} {q}"
            );
        }
    }
}
