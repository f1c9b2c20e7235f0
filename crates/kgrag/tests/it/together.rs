//! LeanRAG's G0 handed over from HiRAG's base layer: LeanRAG builds the same index with HiRAG beside it —
//! offline one after the other, with a chat model at the same time — as it builds alone, HiRAG the same
//! as alone (the CLI's provider test checks the overlap in time and the calls counted per method).

use std::collections::HashMap;
use std::sync::Arc;

use kgrag::types::testing::ScriptedChatModel;
use kgrag::types::ChatRequest;
use kgrag::Pipeline;

use crate::pipeline::{config, embedder, fixture_docs, tmp};

/// A reply to each build prompt that depends on the prompt alone (never on the order of the calls), so
/// builds that ask in another order get the same answers.
fn order_free(request: &ChatRequest) -> kgrag::types::Result<String> {
    let system = request.messages[0].content.as_str();
    let last = request.messages.last().map_or("", |m| m.content.as_str());
    let tag = &kgrag::types::md5_hex(
        request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<String>()
            .as_bytes(),
    )[..6];
    Ok(if system.contains("communities of a knowledge graph") {
        serde_json::json!({
            "title": format!("Community {tag}"),
            "summary": "A group of related entities.",
            "rating": 5.0,
            "rating_explanation": "Moderate.",
            "findings": [{"summary": "One finding.", "explanation": "It holds."}],
        })
        .to_string()
    } else if system.contains("entity aggregation analyst") {
        serde_json::json!({
            "entity_name": format!("AGGREGATE {tag}"),
            "entity_description": format!("What the members of {tag} share."),
            "findings": [{"summary": "Shared trait.", "explanation": "They share it."}],
        })
        .to_string()
    } else if system.contains("inter-aggregation relationship analyst") {
        format!("The groups of {tag} trade with each other.")
    } else if last.contains("more abstract layer") {
        format!(
            "(\"entity\"<|>THEME {tag}A<|>category<|>A theme of the group.)##\
             (\"entity\"<|>THEME {tag}B<|>category<|>Another theme of the group.)<|COMPLETE|>"
        )
    } else {
        format!("A summary {tag}.")
    })
}

/// A LeanRAG prompt (an aggregate or an inter-aggregate relation).
fn is_leanrag(r: &ChatRequest) -> bool {
    let system = r.messages[0].content.as_str();
    system.contains("entity aggregation analyst")
        || system.contains("inter-aggregation relationship analyst")
}

/// The saved bytes of every method's index after a build of `methods` (with `chat`, if any).
async fn build(
    name: &str,
    methods: &[&str],
    chat: Option<Arc<ScriptedChatModel>>,
) -> HashMap<String, Vec<u8>> {
    let cache = tmp(name);
    let mut c = config(&cache);
    c.leanrag.cluster_size = 5;
    let mut pipeline = Pipeline::with_models(
        c,
        cache.clone(),
        embedder(64),
        chat.map(|c| c as Arc<dyn kgrag::types::ChatModel>),
        None,
        false,
    )
    .unwrap();
    let (docs, _) = fixture_docs();
    let methods: Vec<String> = methods.iter().map(|m| (*m).to_owned()).collect();
    pipeline
        .index(docs, &methods, Default::default())
        .await
        .unwrap();
    let mut saved = HashMap::new();
    for m in &methods {
        let dir = cache.join(format!("saved-{m}"));
        std::fs::create_dir_all(&dir).unwrap();
        let files = pipeline.method_index(m).unwrap().save(&dir).unwrap();
        let mut bytes = Vec::new();
        for f in files {
            bytes.extend(std::fs::read(dir.join(f)).unwrap());
        }
        saved.insert(m.clone(), bytes);
    }
    let _ = std::fs::remove_dir_all(&cache);
    saved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leanrag_builds_the_same_beside_hirag_as_alone() {
    // Offline: the methods build one after another, LeanRAG on the base layer HiRAG handed over.
    let alone = build("g0-alone", &["leanrag"], None).await;
    let both = build("g0-both", &["hirag", "leanrag"], None).await;
    let hirag = build("g0-hirag", &["hirag"], None).await;
    assert_eq!(alone["leanrag"], both["leanrag"]);
    assert_eq!(hirag["hirag"], both["hirag"]);

    // With a chat model every method builds at the same time; the answers depend on the prompts only.
    let chat = || Arc::new(ScriptedChatModel::with_responder(order_free));
    let lean_chat = chat();
    let alone = build("g0-llm-alone", &["leanrag"], Some(lean_chat.clone())).await;
    let hirag_chat = chat();
    let hirag = build("g0-llm-hirag", &["hirag"], Some(hirag_chat.clone())).await;
    let every_chat = chat();
    let every = ["dense", "hipporag2", "hirag", "leanrag"];
    let together = build("g0-llm-every", &every, Some(every_chat.clone())).await;
    assert!(lean_chat.requests().iter().any(is_leanrag));
    assert_eq!(alone["leanrag"], together["leanrag"]);
    assert_eq!(hirag["hirag"], together["hirag"]);
    // Every prompt asked once: HiRAG's and LeanRAG's, none twice.
    assert!(hirag_chat.calls() > 0);
    assert_eq!(every_chat.calls(), hirag_chat.calls() + lean_chat.calls());
}
