//! The OpenAI-compatible client against a real llama.cpp server (SmolLM2, chat and embeddings on), which
//! `cargo xtask test` starts from the `xllamacpp` wheel and passes in `KGRAG_TEST_LLM_URL`. Without that
//! variable these tests say so and pass, unless `KGRAG_REQUIRE_LLM_SERVER` is set (xtask and CI set it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;
use kgrag_llm::{
    build_chat, build_embedder, ChatConfig, EmbedderConfig, Limits, OpenAiConfig, ResponseCache,
};
use kgrag_types::{ChatRequest, EmbedKind, ResponseFormat};

fn server() -> Option<String> {
    match std::env::var("KGRAG_TEST_LLM_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("KGRAG_REQUIRE_LLM_SERVER").is_none(),
                "KGRAG_TEST_LLM_URL is not set but KGRAG_REQUIRE_LLM_SERVER is: the local server did not start"
            );
            eprintln!("KGRAG_TEST_LLM_URL not set: skipping the real-server test (run `cargo xtask test`)");
            None
        }
    }
}

fn config(base_url: String) -> OpenAiConfig {
    OpenAiConfig {
        base_url,
        model: "smollm2".into(),
        api_key_env: None,
        limits: Limits {
            max_attempts: 2,
            initial_backoff_ms: 50,
            request_timeout_secs: 120.0,
            ..Limits::default()
        },
        dimension: None,
        batch_size: 8,
        price_per_million_input: None,
        price_per_million_output: None,
    }
}

fn short(prompt: &str) -> ChatRequest {
    let mut r = ChatRequest::user(prompt);
    r.settings.temperature = Some(0.0);
    r.settings.max_tokens = Some(24);
    r.settings.seed = Some(1);
    r
}

/// The server's task counter: it grows by one for every request the server handles.
async fn server_tasks(url: &str) -> u64 {
    let root = url.trim_end_matches("/v1");
    let port: u16 = root.rsplit(':').next().unwrap().parse().unwrap();
    let body = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET /slots HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    })
    .await
    .unwrap();
    let json = body.split("\r\n\r\n").nth(1).unwrap();
    let slots: serde_json::Value = serde_json::from_str(json).unwrap();
    slots
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id_task"].as_i64().unwrap_or(0).max(0) as u64)
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn chat_completion_counts_usage() {
    let Some(url) = server() else { return };
    let chat = build_chat(&ChatConfig::Openai(config(url)), None).unwrap();
    let reply = chat.chat(&short("Name one colour.")).await.unwrap();
    assert!(!reply.content.trim().is_empty());
    let usage = chat.usage();
    assert_eq!(usage.calls, 1);
    assert!(
        usage.prompt_tokens > 0 && usage.completion_tokens > 0,
        "{usage:?}"
    );
}

#[tokio::test]
async fn json_mode_reply_parses() {
    let Some(url) = server() else { return };
    let chat = build_chat(&ChatConfig::Openai(config(url)), None).unwrap();
    let mut request =
        short("Return a JSON object with the key \"ok\" set to true. Output only the object.");
    request.settings.response_format = ResponseFormat::JsonObject;
    request.settings.max_tokens = Some(32);
    let reply = chat.chat(&request).await.unwrap();
    let parsed: Result<serde_json::Value, _> = serde_json::from_str(&reply.content);
    assert!(
        parsed.as_ref().is_ok_and(|v| v.is_object()),
        "not a JSON object: {:?}",
        reply.content
    );
}

#[tokio::test]
async fn embeddings_have_the_right_shape() {
    let Some(url) = server() else { return };
    let embedder = build_embedder(&EmbedderConfig::Openai(config(url)), None).unwrap();
    let texts: Vec<String> = (0..11).map(|i| format!("passage number {i}")).collect();
    let e = embedder.embed(&texts, &EmbedKind::Document).await.unwrap();
    assert_eq!(e.len(), 11);
    // SmolLM2-135M's hidden size.
    assert_eq!(e.dim(), 576);
    assert_eq!(embedder.usage().calls, 2, "11 texts in batches of 8");
}

#[tokio::test]
async fn second_identical_call_is_served_from_the_cache() {
    let Some(url) = server() else { return };
    let dir = std::env::temp_dir().join(format!("kgrag-real-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = ResponseCache::open(dir.join("cache.redb")).unwrap();
    let chat = build_chat(&ChatConfig::Openai(config(url.clone())), Some(cache)).unwrap();
    let request = short("Say a greeting, cache test.");
    let first = chat.chat(&request).await.unwrap();
    let before = server_tasks(&url).await;
    let second = chat.chat(&request).await.unwrap();
    let after = server_tasks(&url).await;
    assert!(!first.cached && second.cached);
    assert_eq!(first.content, second.content);
    assert_eq!(before, after, "the cached call must not reach the server");
    let usage = chat.usage();
    assert_eq!((usage.calls, usage.cache_hits), (1, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn wrong_route_and_refused_connection_are_clear_errors() {
    let Some(url) = server() else { return };
    let wrong = url.trim_end_matches("/v1").to_owned() + "/no-such-api";
    let chat = build_chat(&ChatConfig::Openai(config(wrong)), None).unwrap();
    let err = chat.chat(&short("hi")).await.unwrap_err();
    let source = std::error::Error::source(&err)
        .map(|s| s.to_string())
        .unwrap_or_default();
    assert!(source.contains("HTTP 404"), "{source}");
    assert_eq!(chat.usage().attempts, 1, "a 404 is not retried");

    let refused = format!("http://127.0.0.1:{}/v1", common::refused_port());
    let chat = build_chat(&ChatConfig::Openai(config(refused)), None).unwrap();
    let err = chat.chat(&short("hi")).await.unwrap_err();
    let source = std::error::Error::source(&err)
        .map(|s| s.to_string())
        .unwrap_or_default();
    assert!(source.contains("could not be reached"), "{source}");
}
