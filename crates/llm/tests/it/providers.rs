//! Provider behaviour against a local fault-injecting server: retries, bounds, request bodies, and Ollama
//! request/response handling against exchanges recorded in the shape Ollama's API documents.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::{openai_reply, refused_port, serve, ScriptedServer};
use kgrag_llm::{
    build_chat, build_embedder, ChatConfig, EmbedderConfig, Limits, OllamaConfig, OpenAiConfig,
};
use kgrag_types::{ChatRequest, EmbedKind, ResponseFormat};

fn fast_limits(max_attempts: u32) -> Limits {
    Limits {
        max_attempts,
        initial_backoff_ms: 5,
        max_backoff_ms: 20,
        request_timeout_secs: 10.0,
        ..Limits::default()
    }
}

fn openai(base: String, max_attempts: u32) -> OpenAiConfig {
    OpenAiConfig {
        base_url: base,
        model: "test-model".into(),
        api_key_env: None,
        limits: fast_limits(max_attempts),
        dimension: None,
        batch_size: 2,
        price_per_million_input: None,
        price_per_million_output: None,
    }
}

#[tokio::test]
async fn openai_retries_429_then_500_then_succeeds() {
    let server = ScriptedServer::start(vec![
        (
            429,
            r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#.into(),
        ),
        (500, "upstream exploded".into()),
        (200, openai_reply("Paris")),
    ])
    .await;
    let chat = build_chat(
        &ChatConfig::Openai(openai(format!("{}/v1", server.base()), 5)),
        None,
    )
    .unwrap();
    let mut request = ChatRequest::user("Capital of France?");
    request.settings.temperature = Some(0.0);
    request.settings.max_tokens = Some(8);
    let reply = chat.chat(&request).await.unwrap();
    assert_eq!(reply.content, "Paris");
    assert_eq!(
        (reply.usage.prompt_tokens, reply.usage.completion_tokens),
        (11, 3)
    );
    let usage = chat.usage();
    assert_eq!(
        (usage.attempts, usage.retries, usage.calls, usage.failures),
        (3, 2, 1, 0)
    );
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (11, 3));

    let seen = server.requests();
    assert_eq!(seen.len(), 3);
    for r in &seen {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        let body = r.json();
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["messages"][0]["content"], "Capital of France?");
        assert_eq!(body["temperature"], 0.0);
        assert_eq!(body["max_tokens"], 8);
    }
}

#[tokio::test]
async fn openai_gives_up_at_the_bound_and_says_how_often_it_tried() {
    let server = ScriptedServer::start((0..10).map(|_| (503, "busy".to_owned())).collect()).await;
    let chat = build_chat(
        &ChatConfig::Openai(openai(format!("{}/v1", server.base()), 3)),
        None,
    )
    .unwrap();
    let err = chat.chat(&ChatRequest::user("hi")).await.unwrap_err();
    let message = format!(
        "{err}: {}",
        std::error::Error::source(&err)
            .map(|s| s.to_string())
            .unwrap_or_default()
    );
    assert!(message.contains("gave up after 3 attempts"), "{message}");
    assert!(message.contains("HTTP 503"), "{message}");
    assert_eq!(server.requests().len(), 3);
    assert_eq!(chat.usage().failures, 1);
}

#[tokio::test]
async fn openai_does_not_retry_a_bad_request() {
    let server = ScriptedServer::start(vec![(
        400,
        r#"{"error":{"message":"'messages' must not be empty","type":"invalid_request_error"}}"#
            .into(),
    )])
    .await;
    let chat = build_chat(
        &ChatConfig::Openai(openai(format!("{}/v1", server.base()), 5)),
        None,
    )
    .unwrap();
    let err = chat.chat(&ChatRequest::user("hi")).await.unwrap_err();
    let source = std::error::Error::source(&err)
        .map(|s| s.to_string())
        .unwrap_or_default();
    assert!(
        source.contains("HTTP 400: 'messages' must not be empty"),
        "{source}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn refused_connection_is_retried_then_reported() {
    let chat = build_chat(
        &ChatConfig::Openai(openai(format!("http://127.0.0.1:{}/v1", refused_port()), 2)),
        None,
    )
    .unwrap();
    let err = chat.chat(&ChatRequest::user("hi")).await.unwrap_err();
    let source = std::error::Error::source(&err)
        .map(|s| s.to_string())
        .unwrap_or_default();
    assert!(source.contains("gave up after 2 attempts"), "{source}");
    assert!(source.contains("could not be reached"), "{source}");
}

/// An OpenAI-style embeddings server that answers every request after `delay`, each text's vector
/// derived from the text (its length, its first byte), and counts the requests it holds at once.
async fn slow_embeddings_server(
    delay: std::time::Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let seen = most.clone();
    let port = serve(move |request| {
        let (now, most) = (now.clone(), most.clone());
        async move {
            let held = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(held, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            now.fetch_sub(1, Ordering::SeqCst);
            let data: Vec<serde_json::Value> = request.json()["input"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let t = t.as_str().unwrap();
                    let first = t.bytes().next().unwrap_or(0) as f32;
                    serde_json::json!({"index": i, "embedding": [t.len() as f32, first]})
                })
                .collect();
            let reply = serde_json::json!({"object": "list", "model": "e", "data": data});
            (200, reply.to_string())
        }
    })
    .await;
    (format!("http://127.0.0.1:{port}/v1"), seen)
}

/// A hosted embedder's batches of one call go out together, up to the concurrency limit, and come back
/// in the texts' order.
#[tokio::test]
async fn embedding_batches_go_out_together_up_to_the_limit() {
    let (base, most) = slow_embeddings_server(std::time::Duration::from_millis(200)).await;
    let mut config = openai(base, 2);
    config.limits.concurrency = 4;
    let embedder = build_embedder(&EmbedderConfig::Openai(config), None).unwrap();
    let texts: Vec<String> = (0..16)
        .map(|i| format!("{}{}", (b'a' + i as u8) as char, "x".repeat(i)))
        .collect();
    let started = std::time::Instant::now();
    let e = embedder.embed(&texts, &EmbedKind::Document).await.unwrap();
    let took = started.elapsed();
    let rows: Vec<Vec<f32>> = e.rows().map(|r| r.to_vec()).collect();
    let want: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| vec![t.len() as f32, t.as_bytes()[0] as f32])
        .collect();
    assert_eq!(rows, want, "vectors in the texts' order");
    let most = most.load(std::sync::atomic::Ordering::SeqCst);
    // Eight batches of two, at most four in flight: at least two held at once (the old loop sent one
    // request after the other), never more than the limit.
    assert!((2..=4).contains(&most), "{most} requests held at once");
    eprintln!("16 texts in batches of 2, 200 ms a request, concurrency 4: {took:?}");
}

#[tokio::test]
async fn openai_embeddings_are_batched_and_reordered_by_index() {
    let reply = |a: f32, b: f32| {
        serde_json::json!({"object": "list", "model": "e",
            "data": [{"index": 1, "embedding": [b, 0.0]}, {"index": 0, "embedding": [a, 0.0]}]})
        .to_string()
    };
    let server = ScriptedServer::start(vec![(200, reply(1.0, 2.0)), (200, reply(3.0, 4.0))]).await;
    // One request at a time: the scripted replies are taken in the order requests arrive.
    let mut config = openai(format!("{}/v1", server.base()), 2);
    config.limits.concurrency = 1;
    let embedder = build_embedder(&EmbedderConfig::Openai(config), None).unwrap();
    let texts: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
    let kind = EmbedKind::Query {
        instruction: Some("find passages".into()),
    };
    let e = embedder.embed(&texts, &kind).await.unwrap();
    assert_eq!(e.len(), 4);
    assert_eq!(e.dim(), 2);
    let firsts: Vec<f32> = e.rows().map(|r| r[0]).collect();
    assert_eq!(firsts, vec![1.0, 2.0, 3.0, 4.0]);
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].path, "/v1/embeddings");
    assert_eq!(
        seen[0].json()["input"],
        serde_json::json!([
            "Instruct: find passages\nQuery: a",
            "Instruct: find passages\nQuery: b"
        ])
    );
    assert_eq!(embedder.dimension(), 2);
}

fn ollama(port: u16, max_attempts: u32) -> OllamaConfig {
    OllamaConfig {
        host: "http://127.0.0.1".into(),
        port,
        model: "llama3.2".into(),
        options: [("num_ctx".to_owned(), serde_json::json!(4096))]
            .into_iter()
            .collect(),
        limits: fast_limits(max_attempts),
        dimension: None,
        batch_size: 16,
    }
}

/// `/api/chat` reply as Ollama documents it (non-streaming).
const OLLAMA_CHAT: &str = r#"{"model":"llama3.2","created_at":"2023-12-12T14:13:43.416799Z","message":{"role":"assistant","content":"{\"colour\": \"blue\"}"},"done":true,"done_reason":"stop","total_duration":5191566416,"load_duration":2154458,"prompt_eval_count":26,"prompt_eval_duration":383809000,"eval_count":8,"eval_duration":4799921000}"#;

/// `/api/embed` reply as Ollama documents it.
const OLLAMA_EMBED: &str = r#"{"model":"all-minilm","embeddings":[[0.010071029,-0.0017594862,0.05007221],[-0.0098027075,0.06042469,0.025450189]],"total_duration":14143917,"load_duration":1019500,"prompt_eval_count":8}"#;

#[tokio::test]
async fn ollama_chat_request_and_response() {
    let server = ScriptedServer::start(vec![
        (
            503,
            r#"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#
                .into(),
        ),
        (200, OLLAMA_CHAT.into()),
    ])
    .await;
    let chat = build_chat(&ChatConfig::Ollama(ollama(server.port, 3)), None).unwrap();
    let mut request = ChatRequest::user("Why is the sky blue? Answer in JSON.");
    request.settings.temperature = Some(0.0);
    request.settings.seed = Some(7);
    request.settings.max_tokens = Some(64);
    request.settings.response_format = ResponseFormat::JsonObject;
    let reply = chat.chat(&request).await.unwrap();
    assert_eq!(reply.content, r#"{"colour": "blue"}"#);
    assert_eq!(
        (reply.usage.prompt_tokens, reply.usage.completion_tokens),
        (26, 8)
    );
    assert_eq!(chat.usage().retries, 1);

    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].path, "/api/chat");
    let body = seen[1].json();
    assert_eq!(body["model"], "llama3.2");
    assert_eq!(body["stream"], false);
    assert_eq!(body["format"], "json");
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(
        body["messages"][0]["content"],
        "Why is the sky blue? Answer in JSON."
    );
    assert_eq!(body["options"]["temperature"], 0.0);
    assert_eq!(body["options"]["seed"], 7);
    assert_eq!(body["options"]["num_predict"], 64);
    assert_eq!(body["options"]["num_ctx"], 4096);
}

#[tokio::test]
async fn ollama_missing_model_is_final() {
    let server = ScriptedServer::start(vec![(
        404,
        r#"{"error":"model \"llama3.2\" not found, try pulling it first"}"#.into(),
    )])
    .await;
    let chat = build_chat(&ChatConfig::Ollama(ollama(server.port, 3)), None).unwrap();
    let err = chat.chat(&ChatRequest::user("hi")).await.unwrap_err();
    let source = std::error::Error::source(&err)
        .map(|s| s.to_string())
        .unwrap_or_default();
    assert!(source.contains("not found"), "{source}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn ollama_embeddings_request_and_response() {
    let server = ScriptedServer::start(vec![(200, OLLAMA_EMBED.into())]).await;
    let mut config = ollama(server.port, 1);
    config.model = "all-minilm".into();
    let embedder = build_embedder(&EmbedderConfig::Ollama(config), None).unwrap();
    let texts = vec![
        "Why is the sky blue?".to_owned(),
        "Why is the grass green?".to_owned(),
    ];
    let e = embedder.embed(&texts, &EmbedKind::Document).await.unwrap();
    assert_eq!((e.len(), e.dim()), (2, 3));
    assert!((e.row(1).unwrap()[1] - 0.06042469).abs() < 1e-7);
    let body = server.requests()[0].json();
    assert_eq!(body["model"], "all-minilm");
    assert_eq!(body["input"], serde_json::json!(texts));
}

#[tokio::test]
async fn api_keys_stay_out_of_debug_and_errors() {
    std::env::set_var("KGRAG_TEST_SECRET_KEY", "sk-very-secret-123");
    let server = ScriptedServer::start(vec![(
        401,
        r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
    )])
    .await;
    let mut config = openai(format!("{}/v1", server.base()), 1);
    config.api_key_env = Some("KGRAG_TEST_SECRET_KEY".into());
    let chat = build_chat(&ChatConfig::Openai(config), None).unwrap();
    let err = chat.chat(&ChatRequest::user("hi")).await.unwrap_err();
    let shown = format!("{err} {err:?} {:?}", std::error::Error::source(&err));
    assert!(!shown.contains("sk-very-secret-123"), "{shown}");
    let debug = format!("{chat:?}");
    assert!(!debug.contains("sk-very-secret-123"), "{debug}");
    // The key was sent where it belongs.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn https_endpoints_are_supported() {
    // A plain-text peer behind an https URL: with TLS built in, this fails in the handshake (a connection
    // error), not because the client cannot speak https at all.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::Write;
        if let Ok((mut socket, _)) = listener.accept() {
            let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let url = format!("https://127.0.0.1:{port}/v1");
    let chat = build_chat(&ChatConfig::Openai(openai(url, 1)), None).unwrap();
    let err = chat.chat(&ChatRequest::user("hi")).await.unwrap_err();
    let source = std::error::Error::source(&err)
        .map(|s| s.to_string())
        .unwrap_or_default();
    assert!(source.contains("could not be reached"), "{source}");
    assert!(!source.contains("https needs"), "{source}");
}
