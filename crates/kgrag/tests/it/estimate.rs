//! `Index::estimate` against the calls a build makes: the fixture, every method, HippoRAG's LLM OpenIE and
//! LLM summaries and reports, with a scripted model that answers each prompt the way a model would (the
//! fixture's own entities and triples for OpenIE, a few records per cluster summary, JSON reports and
//! aggregates, one sentence per relation).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kgrag::types::testing::ScriptedChatModel;
use kgrag::types::ChatRequest;
use kgrag::Index;

use crate::pipeline::{config, embedder, fixture_docs, tmp};

/// The fixture's passages with their hand-written triples.
fn fixture_triples() -> Vec<(String, Vec<[String; 3]>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../datasets/kgrag-fixture/fixture.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let triples = p["triples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    let t: Vec<String> = t
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_str().unwrap().to_owned())
                        .collect();
                    [t[0].clone(), t[1].clone(), t[2].clone()]
                })
                .collect();
            (p["text"].as_str().unwrap().to_owned(), triples)
        })
        .collect()
}

/// A reply like a model's to each of the build's prompts.
fn responder(
    passages: Vec<(String, Vec<[String; 3]>)>,
) -> impl Fn(&ChatRequest) -> kgrag::types::Result<String> + Send + Sync + 'static {
    let counter = AtomicUsize::new(0);
    move |request: &ChatRequest| {
        let system = request.messages[0].content.as_str();
        let last = request.messages.last().map_or("", |m| m.content.as_str());
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let triples = || {
            passages
                .iter()
                .find(|(text, _)| last.contains(text.as_str()))
                .map(|(_, t)| t.clone())
                .unwrap_or_default()
        };
        Ok(if system.contains("\"named_entities\"") {
            let mut names: Vec<String> = Vec::new();
            for t in triples() {
                for x in [&t[0], &t[2]] {
                    if !names.contains(x) {
                        names.push(x.clone());
                    }
                }
            }
            serde_json::json!({ "named_entities": names }).to_string()
        } else if system.contains("\"triples\"") {
            serde_json::json!({ "triples": triples() }).to_string()
        } else if system.contains("communities of a knowledge graph") {
            serde_json::json!({
                "title": format!("Community {n}"),
                "summary": "A group of related entities.",
                "rating": 5.0,
                "rating_explanation": "Moderate.",
                "findings": [{"summary": "One finding.", "explanation": "It holds."}],
            })
            .to_string()
        } else if system.contains("entity aggregation analyst") {
            serde_json::json!({
                "entity_name": format!("AGGREGATE {n}"),
                "entity_description": "What the members share.",
                "findings": [{"summary": "Shared trait.", "explanation": "They share it."}],
            })
            .to_string()
        } else if system.contains("inter-aggregation relationship analyst") {
            "The two groups trade with each other.".to_owned()
        } else if last.contains("more abstract layer") {
            format!(
                "(\"entity\"<|>THEME {n}A<|>category<|>A theme of the group.)##\
                 (\"entity\"<|>THEME {n}B<|>category<|>Another theme of the group.)<|COMPLETE|>"
            )
        } else {
            "A summary.".to_owned()
        })
    }
}

#[test]
fn the_estimate_is_within_a_fifth_of_the_calls_a_build_makes() {
    let cache = tmp("estimate");
    let mut c = config(&cache);
    c.openie = kgrag::config::OpenIeMode::Llm;
    c.leanrag.cluster_size = 5;
    let chat = Arc::new(ScriptedChatModel::with_responder(responder(
        fixture_triples(),
    )));
    let index = Index::options()
        .config(c)
        .models(embedder(64), Some(chat.clone()))
        .cache_dir(&cache)
        .in_memory()
        .unwrap();
    let (docs, _) = fixture_docs();
    let methods: Vec<String> = kgrag::methods::METHOD_NAMES
        .iter()
        .map(|m| (*m).to_owned())
        .collect();
    let estimate = index
        .estimate(docs.clone(), &methods, &HashSet::new())
        .unwrap();
    eprintln!("{}", estimate.render());
    assert_eq!(estimate.documents, docs.len());
    assert_eq!(estimate.chunks_to_extract, docs.len());
    // Nothing was called to make it.
    assert_eq!(chat.calls(), 0);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut writer = index.writer().unwrap();
    rt.block_on(writer.rebuild(docs.clone(), &methods, HashMap::new()))
        .unwrap();
    rt.block_on(writer.commit()).unwrap();
    let requests = chat.requests();
    let openie = requests
        .iter()
        .filter(|r| {
            r.messages[0].content.contains("\"named_entities\"")
                || r.messages[0].content.contains("\"triples\"")
        })
        .count() as u64;
    let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in &requests {
        let system = r.messages[0].content.as_str();
        let last = r.messages.last().map_or("", |m| m.content.as_str());
        let kind = if system.contains("\"named_entities\"") || system.contains("\"triples\"") {
            "openie"
        } else if system.contains("communities of a knowledge graph") {
            "reports"
        } else if system.contains("entity aggregation analyst") {
            "aggregates"
        } else if system.contains("inter-aggregation relationship analyst") {
            "relations"
        } else if last.contains("more abstract layer") {
            "hierarchy"
        } else {
            "other"
        };
        *kinds.entry(kind).or_default() += 1;
    }
    eprintln!("calls by kind: {kinds:?}");
    let stages = estimate.stages();
    // The per-chunk calls are counted, not modelled: exact.
    assert_eq!(stages["extraction"].calls, openie);
    let total = estimate.total().calls as f64;
    let actual = requests.len() as f64;
    eprintln!("estimated {total} calls, the build made {actual}");
    assert!(
        (total - actual).abs() <= 0.2 * actual,
        "estimated {total} calls, the build made {actual}"
    );
    // Prompt tokens: the counted part is the prompts themselves, so the OpenIE estimate is close.
    let counted: u64 = requests
        .iter()
        .filter(|r| r.messages[0].content.contains("\"named_entities\""))
        .map(|r| {
            r.messages
                .iter()
                .map(|m| kgrag::text::Encoding::O200kBase.count(&m.content).unwrap() as u64 + 4)
                .sum::<u64>()
        })
        .sum();
    let ner = estimate
        .parts
        .iter()
        .find(|p| p.part == "openie_ner")
        .unwrap();
    assert_eq!(
        ner.prompt_tokens, counted,
        "NER prompts are counted exactly"
    );

    // A second estimate after the build: every chunk's extraction is in the store, so OpenIE costs nothing.
    let again = index
        .estimate(docs.clone(), &methods, &HashSet::new())
        .unwrap();
    assert_eq!(again.chunks_to_extract, 0);
    assert_eq!(again.stages()["extraction"].calls, 0);
    let _ = std::fs::remove_dir_all(&cache);
}
