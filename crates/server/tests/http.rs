//! The HTTP API end to end: a real server on a loopback port over a real (small, offline) index, driven
//! by an HTTP client, the OpenAI client library and the MCP SDK's client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{passage_documents as ids, Running, DOCS};
use kgrag::Index;
use kgrag_server::{ServeOptions, ServerError};
use serde_json::{json, Value};

fn error_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers() {
    let s = Running::start(ServeOptions::default()).await;

    let (st, v) = s.get("/health").await;
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")));
    assert_eq!(v["generation"], 1);

    let (st, v) = s.get("/v1/strategies").await;
    assert_eq!(st, 200);
    let strategies: Vec<&str> = v["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(strategies.contains(&"hipporag2") && strategies.contains(&"leanrag"));
    assert_eq!(v["default"], "hipporag2");
    assert_eq!(v["top_k"], 3);

    let (st, v) = s.get("/v1/stats").await;
    assert_eq!(st, 200);
    assert_eq!(v["documents"], 6);
    assert!(v["methods"]["hipporag2"].is_object(), "{v}");

    let (st, v) = s
        .post(
            "/v1/query",
            json!({"question": "Which river flows through the capital of Poland?", "strategy": "hipporag2", "context": true}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["passages"].as_array().unwrap().len(), 3);
    assert_eq!(v["passages"][0]["rank"], 1);
    assert!(ids(&v).contains(&"warsaw.md".to_owned()), "{v}");
    assert!(v["answer"].as_str().is_some_and(|a| !a.is_empty()));
    assert!(v["context"].as_str().is_some_and(|c| c.contains("Vistula")));
    assert!(v["stats"]["context_tokens"].as_u64().unwrap() > 0);
    assert_eq!(v["stats"]["llm_calls"], 0);
    assert_eq!(v["stats"]["generation"], 1);
    assert!(!v["entities"].as_array().unwrap().is_empty());

    // Without the reader and the context.
    let (st, v) = s
        .post(
            "/v1/query",
            json!({"question": "Who married Marie Curie?", "strategy": "dense", "top_k": 2, "answer": false}),
        )
        .await;
    assert_eq!(st, 200);
    assert!(v["answer"].is_null() && v.get("context").is_none());
    assert_eq!(v["passages"].as_array().unwrap().len(), 2);

    let (st, v) = s
        .post(
            "/v1/compare",
            json!({"question": "Where did Marie Curie teach?", "strategies": ["dense", "hirag", "leanrag"]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let results = v["results"].as_array().unwrap();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dense", "hirag", "leanrag"]);
    assert!(results
        .iter()
        .all(|r| !r["passages"].as_array().unwrap().is_empty()));

    let (st, v) = s.get("/v1/documents?limit=4").await;
    assert_eq!(st, 200);
    assert_eq!(
        (v["total"].as_u64(), v["limit"].as_u64()),
        (Some(6), Some(4))
    );
    assert_eq!(v["documents"].as_array().unwrap().len(), 4);
    let (_, v) = s.get("/v1/documents?offset=4").await;
    assert_eq!(v["documents"].as_array().unwrap().len(), 2);

    let (st, v) = s
        .get("/v1/graph?method=hipporag2&entity=Warsaw&depth=1")
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["center"], "warsaw");
    assert!(v["nodes"].as_array().unwrap().len() >= 2);
    assert!(!v["edges"].as_array().unwrap().is_empty());
    let (st, v) = s.get("/v1/graph?method=hirag&entity=marie%20curie").await;
    assert_eq!(st, 200, "{v}");
    assert!(v["nodes"].as_array().unwrap().len() >= 2);
    let (st, v) = s.get("/v1/communities").await;
    assert_eq!(st, 200, "{v}");
    assert!(v["levels"].as_u64().unwrap() >= 1);
    let c = &v["communities"][0];
    assert!(c["report"].as_str().is_some_and(|r| !r.is_empty()));
    assert!(!c["entities"].as_array().unwrap().is_empty());

    // The OpenAPI document names every path the router serves.
    let (st, v) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    for path in [
        "/health",
        "/v1/stats",
        "/v1/strategies",
        "/v1/query",
        "/v1/compare",
        "/v1/documents",
        "/v1/documents/{id}",
        "/v1/documents/{id}/file",
        "/v1/graph",
        "/v1/communities",
        "/v1/models",
        "/v1/chat/completions",
        "/metrics",
        "/mcp",
    ] {
        assert!(v["paths"].get(path).is_some(), "openapi.json lacks {path}");
    }
    // The served document names this index's strategies as the allowed values.
    let allowed =
        v["components"]["schemas"]["QueryRequest"]["properties"]["strategy"]["enum"].clone();
    assert!(
        allowed
            .as_array()
            .is_some_and(|a| a.contains(&json!("hipporag2")) && a.contains(&json!("leanrag"))),
        "{allowed}"
    );
    assert_eq!(
        v["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"]["properties"]["model"]["enum"]
            .as_array()
            .map(Vec::len),
        // The default index's 8 strategies, bare and as default/strategy.
        Some(16)
    );
    // Its own routes, under its name, with its strategies.
    assert!(
        v["paths"]["/v1/indexes/default/query"]["post"]["requestBody"]["content"]
            ["application/json"]["schema"]["properties"]["strategy"]["enum"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("leanrag"))),
        "{}",
        v["paths"]["/v1/indexes/default/query"]
    );

    // The page and its files.
    for (path, kind) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
    ] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        assert!(!r.text().await.unwrap().is_empty());
    }

    // Metrics count what was asked.
    let text = s.metrics().await;
    assert!(text.contains("kgrag_http_requests_total{endpoint=\"/v1/query\",status=\"200\"} 2"));
    assert!(text.contains(
        "kgrag_request_duration_seconds_count{endpoint=\"/v1/compare\",strategy=\"leanrag\"} 1"
    ));
    assert!(text.contains("kgrag_index_generation{index=\"default\"} 1"));
    assert!(text.contains("kgrag_index_loaded{index=\"default\"} 1"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors() {
    let options = ServeOptions {
        body_limit: 64 << 10,
        ..ServeOptions::default()
    };
    let s = Running::start(options).await;
    // Malformed JSON.
    let r = s
        .client
        .post(s.url("/v1/query"))
        .header("content-type", "application/json")
        .body("{\"question\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(error_code(&v), "bad_request");
    // An unknown strategy names the allowed ones.
    let (st, v) = s
        .post(
            "/v1/query",
            json!({"question": "x", "strategy": "graphrag"}),
        )
        .await;
    assert_eq!(st, 400);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("graphrag") && msg.contains("hipporag2") && msg.contains("leanrag"),
        "{msg}"
    );
    // Wrong fields, an empty question, a zero top_k: 422.
    let (st, v) = s.post("/v1/query", json!({"query": "x"})).await;
    assert_eq!((st, error_code(&v)), (422, "unprocessable"));
    let (st, _) = s.post("/v1/query", json!({"question": "  "})).await;
    assert_eq!(st, 422);
    let (st, _) = s
        .post("/v1/query", json!({"question": "x", "top_k": 0}))
        .await;
    assert_eq!(st, 422);
    let (st, _) = s
        .post("/v1/compare", json!({"question": "x", "strategies": []}))
        .await;
    assert_eq!(st, 422);
    // Too large a body: 413, for JSON and for an upload.
    let big = "word ".repeat(20_000);
    let (st, v) = s.post("/v1/query", json!({"question": big.clone()})).await;
    assert_eq!((st, error_code(&v)), (413, "payload_too_large"), "{v}");
    let (st, _) = s.upload("big.txt", big).await;
    assert_eq!(st, 413);
    // Unknown document, unknown route, unknown entity.
    let r = s
        .client
        .delete(s.url("/v1/documents/no-such.md"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let (st, v) = s.get("/v1/nothing").await;
    assert_eq!((st, error_code(&v)), (404, "not_found"));
    let (st, _) = s.get("/v1/graph?entity=Atlantis").await;
    assert_eq!(st, 404);
    let (st, _) = s.get("/v1/graph?entity=Warsaw&depth=9").await;
    assert_eq!(st, 422);
    let (st, _) = s.get("/v1/documents?limit=abc").await;
    assert_eq!(st, 400);
    // A document upload that is not UTF-8 or is empty.
    let (st, v) = s.upload("bin.txt", vec![0xffu8, 0xfe, 0x00]).await;
    assert_eq!(st, 422, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("bin.txt"));
    let (st, _) = s
        .post(
            "/v1/documents",
            json!({"documents": [{"id": "a", "text": " "}]}),
        )
        .await;
    assert_eq!(st, 422);
    // A method a path does not take: 405, as JSON.
    let (st, v) = s.get("/v1/query").await;
    assert_eq!((st, error_code(&v)), (405, "method_not_allowed"));
    // Without a key: only loopback host names (no DNS rebinding), and no changes from another site's page.
    let r = s
        .client
        .get(s.url("/v1/strategies"))
        .header("host", "attacker.example:8080")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(error_code(&v), "forbidden");
    let r = s
        .client
        .post(s.url("/v1/documents?filename=x.txt"))
        .header("origin", "https://attacker.example")
        .header("content-type", "text/plain")
        .body("injected text")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // `null` (a sandboxed frame, a file) and another local origin are not this server's page either.
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    for origin in ["null".to_owned(), "http://localhost:1".to_owned()] {
        let r = s
            .client
            .post(s.url("/v1/documents?filename=x.txt"))
            .header("origin", origin.as_str())
            .body("injected text")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "Origin {origin}");
    }
    // The server's own page may; a loopback name passes the host check.
    let r = s
        .client
        .get(s.url("/v1/strategies"))
        .header("host", format!("localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = s
        .client
        .post(s.url("/v1/query"))
        .header("origin", s.base.as_str())
        .json(&json!({"question": "Who married Marie Curie?", "answer": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Nothing of this changed the index.
    let (_, v) = s.get("/health").await;
    assert_eq!(v["generation"], 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_guards_everything_but_health_and_the_page() {
    let options = ServeOptions {
        api_key: Some("s3cret-key".into()),
        ..ServeOptions::default()
    };
    let s = Running::start(options).await;
    let plain = reqwest::Client::new();
    for path in ["/v1/strategies", "/v1/stats", "/metrics", "/openapi.json"] {
        let r = plain.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let v: Value = r.json().await.unwrap();
        assert_eq!(error_code(&v), "unauthorized");
        let r = plain
            .get(s.url(path))
            .bearer_auth("s3cret-kez")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path} with a wrong key");
    }
    let r = plain
        .post(s.url("/v1/query"))
        .json(&json!({"question": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // MCP is behind the key too.
    let r = plain
        .post(s.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "/mcp without the key");
    let v: Value = r.json().await.unwrap();
    assert_eq!(error_code(&v), "unauthorized");
    // The scheme's case does not matter.
    let r = plain
        .get(s.url("/v1/strategies"))
        .header("authorization", "bearer s3cret-key")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for path in ["/health", "/", "/assets/app.js"] {
        let r = plain.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let (st, _) = s.get("/v1/strategies").await;
    assert_eq!(st, 200);
    s.stop().await;

    // A non-loopback address is refused without a key.
    let open = ServeOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..ServeOptions::default()
    };
    match kgrag_server::bind(&open).await {
        Err(e @ ServerError::Insecure(_)) => assert!(e.to_string().contains("--api-key-env")),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let allowed = ServeOptions {
        insecure_no_auth: true,
        ..open
    };
    assert!(kgrag_server::bind(&allowed).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_change_while_eight_clients_query() {
    let s = Arc::new(Running::start(ServeOptions::default()).await);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..8usize {
        let s = s.clone();
        let stop = stop.clone();
        clients.push(tokio::spawn(async move {
            let strategies = ["hipporag2", "dense", "hirag", "leanrag"];
            let mut seen = Vec::new();
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) || n < 3 {
                let strategy = strategies[(c + n) % strategies.len()];
                let (st, v) = s
                    .post(
                        "/v1/query",
                        json!({"question": "Who keeps the Quagga orchard in Tbilisi?", "strategy": strategy, "top_k": 7}),
                    )
                    .await;
                assert_eq!(st, 200, "client {c}: {v}");
                seen.push((v["stats"]["generation"].as_u64().unwrap(), ids(&v)));
                n += 1;
            }
            seen
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // An upload, then a delete, each a commit.
    let (st, v) = s
        .upload(
            "quagga.md",
            "Ilia Quagga keeps the Quagga orchard in Tbilisi. The orchard grows purple lemons.",
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["documents"].as_u64(), v["generation"].as_u64()),
        (Some(1), Some(2))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = s
        .client
        .delete(s.url("/v1/documents/quagga.md"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["generation"], 3);
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut generations = BTreeSet::new();
    for c in clients {
        for (generation, docs) in c.await.unwrap() {
            generations.insert(generation);
            // Every answer comes from one committed generation: the new document only in generation 2.
            let has_new = docs.iter().any(|d| d == "quagga.md");
            assert!(
                generation == 2 || !has_new,
                "generation {generation} returned quagga.md"
            );
        }
    }
    assert!(generations.iter().all(|g| (1..=3).contains(g)));
    assert!(generations.contains(&3), "{generations:?}");
    // After the delete the new document is gone for good.
    let (_, v) = s
        .post(
            "/v1/query",
            json!({"question": "Who keeps the Quagga orchard?", "strategy": "dense", "top_k": 7}),
        )
        .await;
    assert!(!ids(&v).contains(&"quagga.md".to_owned()));
    let (_, v) = s.get("/v1/documents").await;
    assert_eq!(v["total"], 6);
    let s = Arc::try_unwrap(s).ok().expect("the clients are done");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_jsonl_documents_are_added_and_found() {
    let s = Running::start(ServeOptions::default()).await;
    let (st, v) = s
        .post(
            "/v1/documents",
            json!({"documents": [
                {"id": "tbilisi", "title": "Tbilisi", "text": "Tbilisi is the capital of Georgia. The Kura flows through Tbilisi."},
                {"id": "curie.md", "text": DOCS[0].1}
            ]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["documents"], 1);
    assert_eq!(v["skipped"], json!(["curie.md"]));
    let (st, v) = s.upload("more.jsonl", "{\"id\": \"yerevan\", \"text\": \"Yerevan is the capital of Armenia.\"}\n\n{\"text\": \"Baku is the capital of Azerbaijan.\"}\n").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["documents"].as_u64(), v["generation"].as_u64()),
        (Some(2), Some(3))
    );
    let (_, v) = s.get("/v1/documents?limit=100").await;
    let listed: Vec<&str> = v["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    for id in ["tbilisi", "yerevan", "more.jsonl:3"] {
        assert!(listed.contains(&id), "{id} not in {listed:?}");
    }
    let (_, v) = s
        .post(
            "/v1/query",
            json!({"question": "Does the Kura flow through Tbilisi in Georgia?", "strategy": "dense", "top_k": 1}),
        )
        .await;
    assert_eq!(ids(&v), ["tbilisi"]);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_clients_chat_with_a_strategy() {
    use async_openai::config::OpenAIConfig;
    use async_openai::types::chat::{
        ChatCompletionRequestUserMessage, CreateChatCompletionRequestArgs,
    };
    use futures_util::StreamExt;

    let s = Running::start(ServeOptions {
        api_key: Some("k-123".into()),
        ..ServeOptions::default()
    })
    .await;
    let client = async_openai::Client::with_config(
        OpenAIConfig::new()
            .with_api_base(s.url("/v1"))
            .with_api_key("k-123"),
    );
    let models = client.models().list().await.unwrap();
    let names: Vec<String> = models.data.iter().map(|m| m.id.clone()).collect();
    assert!(names.contains(&"hipporag2".to_owned()) && names.contains(&"hirag-local".to_owned()));

    let request = CreateChatCompletionRequestArgs::default()
        .model("dense")
        .messages(vec![ChatCompletionRequestUserMessage::from(
            "Where was Marie Curie born?",
        )
        .into()])
        .build()
        .unwrap();
    let reply = client.chat().create(request.clone()).await.unwrap();
    let answer = reply.choices[0].message.content.clone().unwrap();
    assert!(answer.contains("Warsaw"), "{answer}");
    assert_eq!(reply.model, "dense");

    // As OpenAI's API asks: `stream: true` in the request.
    let mut streaming = request.clone();
    streaming.stream = Some(true);
    let mut stream = client.chat().create_stream(streaming).await.unwrap();
    let mut streamed = String::new();
    let mut finished = false;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        for choice in chunk.choices {
            if let Some(text) = choice.delta.content {
                streamed.push_str(&text);
            }
            finished |= choice.finish_reason.is_some();
        }
    }
    assert_eq!(streamed, answer);
    assert!(finished);

    // An unknown model is a 400 naming the strategies.
    let bad = CreateChatCompletionRequestArgs::default()
        .model("gpt-4o")
        .messages(vec![ChatCompletionRequestUserMessage::from("hi").into()])
        .build()
        .unwrap();
    let err = client.chat().create(bad).await.unwrap_err().to_string();
    assert!(err.contains("hipporag2"), "{err}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_clients_list_and_call_the_tools() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;

    let s = Running::start(ServeOptions {
        api_key: Some("mcp-key".into()),
        ..ServeOptions::default()
    })
    .await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url("/mcp")).auth_header("mcp-key"),
    );
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        names,
        [
            "add_documents",
            "answer",
            "list_indexes",
            "list_strategies",
            "search"
        ]
        .into_iter()
        .map(str::to_owned)
        .collect()
    );
    let args = json!({"question": "Which river flows through Warsaw?", "strategy": "hipporag2", "top_k": 2});
    let result = client
        .call_tool(
            CallToolRequestParams::new("search").with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    let text = result.content[0].as_text().unwrap().text.clone();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["passages"].as_array().unwrap().len(), 2);
    assert!(ids(&v).contains(&"warsaw.md".to_owned()), "{v}");
    // A bad strategy is a tool error the model can read, not a protocol failure.
    let args = json!({"question": "x", "strategy": "nope"});
    let result = client
        .call_tool(
            CallToolRequestParams::new("answer").with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    client.cancel().await.unwrap();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_a_started_change_commit() {
    let s = Running::start(ServeOptions::default()).await;
    let client = s.client.clone();
    let url = s.url("/v1/documents");
    // A change that takes a while (hundreds of documents through every method).
    let body: Vec<Value> = (0..400)
        .map(|i| json!({"id": format!("bulk-{i}"), "text": format!("Document {i} mentions the city of Lviv and the river Poltva. Its author {i} lived in Odesa near the Black Sea.")}))
        .collect();
    let upload = tokio::spawn(async move {
        client
            .post(url)
            .json(&json!({"documents": body}))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    // Wait until the writer is making the change.
    let started = std::time::Instant::now();
    loop {
        let text = s.metrics().await;
        if text.contains("kgrag_document_changes_running 1") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the upload never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let folder = s.stop().await;
    // The change had started: it committed in full before the server stopped, and its client got 200.
    assert_eq!(upload.await.unwrap().ok(), Some(200));
    let index = Index::open(folder.path()).unwrap();
    let searcher = index.reader().unwrap().searcher();
    let bulk = searcher
        .documents()
        .iter()
        .filter(|d| d.id.starts_with("bulk-"))
        .count();
    assert_eq!((searcher.generation(), bulk), (2, 400));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_pass_the_host_check_without_a_key() {
    let s = Running::start(ServeOptions {
        allowed_hosts: vec!["kgrag.internal".into()],
        ..ServeOptions::default()
    })
    .await;
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    for (host, status) in [
        (format!("kgrag.internal:{port}"), 200),
        ("KGRAG.internal".to_owned(), 200),
        (format!("other.internal:{port}"), 403),
    ] {
        let r = s
            .client
            .get(s.url("/v1/strategies"))
            .header("host", host.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "Host {host}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_pdf_is_cited_to_the_page_streamed_and_opened() {
    let s = Running::start(ServeOptions::default()).await;
    let pdf = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../documents/tests/data/guilds.pdf"),
    )
    .unwrap();
    let (st, v) = s.upload("guilds.pdf", pdf.clone()).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["documents"], 1, "{v}");

    let question = "Where was Yselle Marrowind laid to rest after she retired ashore in 1760?";
    let (st, v) = s
        .post(
            "/v1/query",
            json!({"question": question, "strategy": "dense", "top_k": 10}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let hit = v["passages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["source"]["file"] == "guilds.pdf")
        .unwrap_or_else(|| panic!("the PDF is among the passages: {v}"));
    assert_eq!(hit["source"]["unit"], "page", "{hit}");
    assert!(hit["source"]["page"].as_u64().unwrap() >= 1, "{hit}");
    assert!(
        hit["source"]["label"]
            .as_str()
            .unwrap()
            .starts_with("guilds.pdf p. "),
        "{hit}"
    );
    // The extractive reader cites the passage its sentence came from.
    let citations = v["citations"].as_array().unwrap();
    assert!(!citations.is_empty(), "{v}");
    assert!(
        v["answer"].as_str().unwrap().contains("[1]")
            || v["answer"].as_str().unwrap().contains(']'),
        "{v}"
    );
    assert_eq!(v["stats"]["dropped_citations"], 0);

    // The original, as uploaded, with its content type; none for a document given as text.
    let r = s
        .client
        .get(s.url("/v1/documents/guilds.pdf/file"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "application/pdf");
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("inline"));
    assert_eq!(r.bytes().await.unwrap().to_vec(), pdf);
    let (st, v) = s.get("/v1/documents/curie.md/file").await;
    assert_eq!(st, 404, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no original file"),
        "{v}"
    );

    // Streamed: passages, then the answer's tokens, then the result with its citations, then done.
    let body = s
        .client
        .post(s.url("/v1/compare"))
        .json(&json!({"question": question, "strategies": ["dense", "hipporag2"], "stream": true}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    let first = |e: &str| {
        events
            .iter()
            .position(|x| *x == e)
            .unwrap_or_else(|| panic!("{e} in {body}"))
    };
    assert!(
        first("passages") < first("token") && first("token") < first("result"),
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&"done"), "{events:?}");
    assert_eq!(events.iter().filter(|e| **e == "result").count(), 2);
    let result: Value = body
        .split("\n\n")
        .find(|b| b.starts_with("event: result"))
        .and_then(|b| b.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .unwrap();
    assert!(result["citations"].is_array(), "{result}");

    // The OpenAI-compatible stream carries the citations in its last chunk.
    let body = s
        .client
        .post(s.url("/v1/chat/completions"))
        .json(&json!({"model": "dense", "stream": true, "messages": [{"role": "user", "content": question}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop", "{last}");
    assert!(
        last["kgrag"]["citations"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{last}"
    );
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(!text.is_empty());
    s.stop().await;
}
