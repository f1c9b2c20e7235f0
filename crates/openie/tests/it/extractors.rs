//! The LLM extractors with a scripted chat model: the exact prompts sent (snapshots), parsing, gleaning, and
//! the merge rules; the LLM-free extractor on hand-written paragraphs; the parser against arbitrary input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use kgrag_openie::graphrag::parse_records;
use kgrag_openie::hipporag::{parse_ner, parse_triples};
use kgrag_openie::lenient::extract_key;
use kgrag_openie::{
    add_missing_endpoints, merge_entities, merge_relations, summarise_long_descriptions, Gleaning,
    GraphRagConfig, GraphRagExtractor, HippoOpenIe, RuleExtractor,
};
use kgrag_text::{Chunker, ChunkerConfig};
use kgrag_types::testing::{ScriptedChatModel, ScriptedSummarizer};
use kgrag_types::{Chunk, ChunkId, Document, Entity, Extractor, IssueSeverity, Relation, Triple};
use proptest::prelude::*;

fn chunk(text: &str) -> Chunk {
    Chunker::new(ChunkerConfig::hipporag())
        .unwrap()
        .chunk(&Document::new(text))
        .unwrap()
        .remove(0)
}

/// Compares `actual` with the committed snapshot `tests/snapshots/<name>`; `KGRAG_UPDATE_SNAPSHOTS=1` rewrites it.
fn snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("KGRAG_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "snapshot {} missing ({e}); run with KGRAG_UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    assert_eq!(
        actual, expected,
        "prompt changed: review, then KGRAG_UPDATE_SNAPSHOTS=1"
    );
}

const PASSAGE: &str = "Radio City\nRadio City is India's first private FM radio station. It was started on 3 July 2001.";

#[tokio::test]
async fn hippo_openie_sends_the_snapshot_prompts_and_parses_replies() {
    let model = ScriptedChatModel::new([
        "```json\n{\"named_entities\": [\"Radio City\", \"India\", \"3 July 2001\", \"Radio City\"]}\n```",
        "Here are the triples: {\"triples\": [[\"Radio City\", \"located in\", \"India\"], \
         [\"Radio City\", \"started on\", \"3 July 2001\"], [\"Radio City\", \"is\"], \
         [\"Radio City\", \"located in\", \"India\"]]}",
    ]);
    let openie = HippoOpenIe::new(&model);
    let c = chunk(PASSAGE);
    let e = openie.extract(&c).await.unwrap();
    let names: Vec<&str> = e.entities.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["Radio City", "India", "3 July 2001"]);
    assert_eq!(
        e.triples,
        vec![
            Triple::new("Radio City", "located in", "India"),
            Triple::new("Radio City", "started on", "3 July 2001")
        ]
    );
    assert_eq!(e.diagnostics.llm_calls, 2);
    assert_eq!(e.diagnostics.count(IssueSeverity::Skipped), 1);

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].settings.temperature, Some(0.0));
    assert_eq!(requests[0].settings.max_tokens, Some(2048));
    let last = &requests[1].messages[3].content;
    assert!(last.ends_with(&format!(
        "\nParagraph:\n```\n{PASSAGE}\n```\n\n{{\"named_entities\": [\"Radio City\", \"India\", \"3 July 2001\"]}}\n"
    )));
    snapshot(
        "hippo_ner_request.json",
        &serde_json::to_string_pretty(&requests[0]).unwrap(),
    );
    snapshot(
        "hippo_triple_request.json",
        &serde_json::to_string_pretty(&requests[1]).unwrap(),
    );
}

#[tokio::test]
async fn hippo_openie_records_unparseable_output_and_keeps_going() {
    let model = ScriptedChatModel::new([
        "I cannot help with that.",
        "{\"triples\": [[\"a\", \"b\", \"c\"], [\"d\"",
    ]);
    let e = HippoOpenIe::new(&model)
        .extract(&chunk("x y z"))
        .await
        .unwrap();
    assert!(e.entities.is_empty());
    assert_eq!(e.triples, vec![Triple::new("a", "b", "c")]);
    assert_eq!(e.diagnostics.count(IssueSeverity::Failed), 1);
    assert_eq!(e.diagnostics.count(IssueSeverity::Repaired), 1);
}

#[test]
fn parser_golden_cases() {
    let mut issues = Vec::new();
    assert_eq!(
        parse_ner("{\"named_entities\": []}", &mut issues),
        Vec::<String>::new()
    );
    assert_eq!(parse_ner("", &mut issues), Vec::<String>::new());
    assert_eq!(
        parse_ner("{'named_entities': ['A', 2]}", &mut issues),
        vec!["A", "2"]
    );
    assert_eq!(
        parse_triples(
            "{\"triples\": [[\"a\", \"b\", \"c\", \"d\"], [\"e\", \"f\", 7]]}",
            &mut issues
        ),
        vec![Triple::new("e", "f", "7")]
    );
    assert_eq!(
        parse_triples("{\"triples\": \"none\"}", &mut issues),
        Vec::<Triple>::new()
    );
    let kinds: Vec<IssueSeverity> = issues.iter().map(|i| i.severity).collect();
    assert_eq!(
        kinds,
        [
            IssueSeverity::Failed,
            IssueSeverity::Skipped,
            IssueSeverity::Failed
        ]
    );
}

fn er_config(gleaning: Gleaning, max_gleaning: usize) -> GraphRagConfig {
    GraphRagConfig {
        gleaning,
        max_gleaning,
        ..GraphRagConfig::default()
    }
}

const ENTITIES: &str =
    "(\"entity\"<|>RADIO CITY<|>ORGANIZATION<|>India's first private FM station.)##\
(\"entity\"<|>INDIA<|>GEO<|>The country where Radio City broadcasts.)<|COMPLETE|>";
const RELATIONS: &str =
    "(\"relationship\"<|>RADIO CITY<|>INDIA<|>Radio City broadcasts in India.<|>8)<|COMPLETE|>";

#[tokio::test]
async fn gated_gleaning_stops_on_no() {
    let model = ScriptedChatModel::new([ENTITIES, "NO", RELATIONS, "\"No\""]);
    let ex = GraphRagExtractor::new(&model, er_config(Gleaning::Gated, 3));
    let e = ex.extract(&chunk(PASSAGE)).await.unwrap();
    assert_eq!(model.calls(), 4);
    assert_eq!(e.entities.len(), 2);
    assert_eq!(e.relations.len(), 1);
    assert_eq!(e.relations[0].weight, 8.0);
    let requests = model.requests();
    assert!(requests[2].messages[0]
        .content
        .contains("[RADIO CITY,INDIA]"));
    assert!(requests[1]
        .messages
        .last()
        .unwrap()
        .content
        .contains("YES or NO"));
    snapshot(
        "graphrag_entity_request.json",
        &serde_json::to_string_pretty(&requests[0]).unwrap(),
    );
    snapshot(
        "graphrag_relation_request.json",
        &serde_json::to_string_pretty(&requests[2]).unwrap(),
    );
}

#[tokio::test]
async fn gated_gleaning_continues_on_yes_and_always_gleans_unconditionally() {
    let more = "(\"entity\"<|>3 JULY 2001<|>EVENT<|>The day Radio City started.)<|COMPLETE|>";
    let model = ScriptedChatModel::new([ENTITIES, "yes", more, "NO", RELATIONS, "NO"]);
    let e = GraphRagExtractor::new(&model, er_config(Gleaning::Gated, 2))
        .extract(&chunk(PASSAGE))
        .await
        .unwrap();
    assert_eq!(model.calls(), 6);
    assert_eq!(e.entities.len(), 3);

    let model = ScriptedChatModel::new([ENTITIES, "", RELATIONS, ""]);
    let e = GraphRagExtractor::new(&model, er_config(Gleaning::Always, 1))
        .extract(&chunk(PASSAGE))
        .await
        .unwrap();
    assert_eq!(model.calls(), 4);
    assert_eq!(e.diagnostics.llm_calls, 4);
    let glean = &model.requests()[1];
    assert_eq!(
        glean.messages.len(),
        3,
        "prompt, first answer, gleaning turn"
    );
}

fn chunk_id(s: &str) -> ChunkId {
    ChunkId::from_content(s)
}

#[tokio::test]
async fn merge_rules() {
    let e = |name: &str, t: &str, d: &str, c: &str| Entity {
        name: name.into(),
        entity_type: t.into(),
        description: d.into(),
        source_chunks: [chunk_id(c)].into_iter().collect(),
    };
    let merged = merge_entities(&[
        e("A", "PERSON", "b desc", "c1"),
        e("B", "GEO", "x", "c1"),
        e("A", "ORG", "a desc", "c2"),
        e("A", "ORG", "b desc", "c3"),
        e("A", "PERSON", "c desc", "c3"),
    ]);
    assert_eq!(merged.len(), 2);
    assert_eq!(merged[0].name, "A");
    assert_eq!(
        merged[0].entity_type, "PERSON",
        "tie between PERSON and ORG: first seen wins"
    );
    assert_eq!(merged[0].description, "a desc<SEP>b desc<SEP>c desc");
    assert_eq!(merged[0].source_chunks.len(), 3);

    let r = |s: &str, t: &str, d: &str, w: f64| Relation {
        source: s.into(),
        target: t.into(),
        description: d.into(),
        weight: w,
        source_chunks: [chunk_id(d)].into_iter().collect(),
        ..Relation::default()
    };
    let merged = merge_relations(&[
        r("B", "A", "second", 2.0),
        r("A", "B", "first", 3.5),
        r("A", "C", "x", 1.0),
    ]);
    assert_eq!(merged.len(), 2);
    assert_eq!(
        (merged[0].source.as_str(), merged[0].target.as_str()),
        ("A", "B")
    );
    assert_eq!(merged[0].weight, 5.5);
    assert_eq!(merged[0].description, "first<SEP>second");

    // Endpoints no entity names become UNKNOWN entities with the relation's description and sources.
    let mut entities = vec![e("A", "PERSON", "x", "c1")];
    assert_eq!(add_missing_endpoints(&mut entities, &merged), 2);
    let names: Vec<(&str, &str)> = entities
        .iter()
        .map(|x| (x.name.as_str(), x.entity_type.as_str()))
        .collect();
    assert_eq!(names, [("A", "PERSON"), ("B", "UNKNOWN"), ("C", "UNKNOWN")]);
    assert_eq!(entities[1].description, "first<SEP>second");

    // Long merged descriptions are summarised through the Summarizer.
    let long = ["word ".repeat(300), "other ".repeat(300)].join("<SEP>");
    let mut entities = vec![Entity {
        name: "A".into(),
        description: long,
        ..Entity::default()
    }];
    let summarizer = ScriptedSummarizer::new();
    let n = summarise_long_descriptions(&mut entities, &mut [], &summarizer, 500)
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(summarizer.requests()[0].descriptions.len(), 2);
    assert_eq!(entities[0].description.split_whitespace().count(), 500);
}

#[tokio::test]
async fn rule_extractor_on_hand_written_paragraphs() {
    let text = "Marie Curie was born in Warsaw in 1867. She moved to Paris, where she met Pierre Curie.\n\n\
                The University of Paris appointed Marie Curie professor in 1906.";
    let e = RuleExtractor.extract(&chunk(text)).await.unwrap();
    let entities: Vec<(String, String)> = e
        .entities
        .iter()
        .map(|x| (x.name.clone(), x.entity_type.clone()))
        .collect();
    let expect = |n: &str, t: &str| (n.to_owned(), t.to_owned());
    assert_eq!(
        entities,
        vec![
            expect("Marie Curie", "ENTITY"),
            expect("Warsaw", "ENTITY"),
            expect("1867", "DATE"),
            expect("Paris", "ENTITY"),
            expect("Pierre Curie", "ENTITY"),
            expect("The University of Paris", "ENTITY"),
            expect("1906", "DATE"),
        ]
    );
    assert_eq!(
        e.entities[0].description,
        "Marie Curie was born in Warsaw in 1867."
    );
    assert!(e
        .triples
        .contains(&Triple::new("Marie Curie", "was born in", "Warsaw")));
    assert!(e
        .triples
        .contains(&Triple::new("Paris", "where she met", "Pierre Curie")));
    assert!(e.triples.contains(&Triple::new(
        "The University of Paris",
        "appointed",
        "Marie Curie"
    )));
    let rel = e
        .relations
        .iter()
        .find(|r| r.source == "Marie Curie" && r.target == "Warsaw")
        .unwrap();
    assert_eq!(rel.description, "Marie Curie was born in Warsaw in 1867.");
    assert_eq!(rel.weight, 1.0);
    assert_eq!(e.diagnostics.llm_calls, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn parsers_never_panic(s in any::<String>()) {
        let mut issues = Vec::new();
        let _ = parse_ner(&s, &mut issues);
        let _ = parse_triples(&s, &mut issues);
        let _ = parse_records(&s, "x", &mut issues);
        let _ = extract_key(&s, "triples");
    }

    #[test]
    fn parsers_never_panic_on_json_like_input(s in "[\\[\\]{}(),:'\"a-c0-9 \\\\<|>#]{0,80}") {
        let mut issues = Vec::new();
        let _ = parse_triples(&format!("{{\"triples\": {s}"), &mut issues);
        let _ = parse_records(&s, "x", &mut issues);
    }

    #[test]
    fn rule_extractor_never_panics(s in any::<String>()) {
        let c = Chunk { text: s.clone(), ..chunk("seed") };
        let _ = RuleExtractor.extract_text(&c);
    }
}
