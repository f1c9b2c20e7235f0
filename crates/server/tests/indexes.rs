//! One server, several indexes: isolation, scoped keys (404 for what a key may not see), a question asked
//! of several indexes merged by reciprocal-rank fusion, and eviction under load.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{passage_documents as documents_of, small_index, Running};
use kgrag_server::{Indexes, Limits, NamedIndex, ServeOptions};
use reqwest::Method;
use serde_json::{json, Value};

/// Five small corpora; every document id starts with its index's name.
const CORPORA: [(&str, [(&str, &str); 2]); 5] = [
    (
        "wiki",
        [
            (
                "wiki-warsaw.md",
                "Warsaw is the capital of Poland. The Vistula River flows through Warsaw.",
            ),
            (
                "wiki-curie.md",
                "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903.",
            ),
        ],
    ),
    (
        "docs",
        [
            (
                "docs-paris.md",
                "Paris is the capital of France. The Seine flows through Paris.",
            ),
            (
                "docs-sorbonne.md",
                "Marie Curie taught at the Sorbonne in Paris. She was its first woman professor.",
            ),
        ],
    ),
    (
        "legal",
        [
            (
                "legal-lease.md",
                "The lease of the Krakow office runs until 2031. Its rent is paid quarterly.",
            ),
            (
                "legal-nda.md",
                "The agreement with Vistula Shipping forbids sharing its river charts.",
            ),
        ],
    ),
    (
        "hr",
        [
            (
                "hr-leave.md",
                "Staff in Warsaw get twenty-six days of leave a year.",
            ),
            (
                "hr-travel.md",
                "Travel to Paris is booked through the office in Krakow.",
            ),
        ],
    ),
    (
        "ops",
        [
            (
                "ops-backup.md",
                "The Warsaw servers are backed up every night to the Krakow data centre.",
            ),
            (
                "ops-oncall.md",
                "The on-call engineer for the Seine cluster lives in Paris.",
            ),
        ],
    ),
];

/// The first `n` corpora indexed under `root/NAME`.
async fn build(root: &Path, n: usize) {
    for (name, docs) in CORPORA.iter().take(n) {
        drop(small_index(&root.join(name), docs).await);
    }
}

fn folders(root: &Path, names: &[&str]) -> Vec<NamedIndex> {
    names
        .iter()
        .map(|n| NamedIndex::folder(*n, root.join(n)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_added_to_one_index_is_never_found_through_another() {
    let root = tempfile::tempdir().unwrap();
    build(root.path(), 2).await;
    let s = Running::start_with(
        Indexes {
            named: folders(root.path(), &["wiki", "docs"]),
            ..Indexes::default()
        },
        ServeOptions::default(),
    )
    .await;
    let secret = "The Zephyrine treaty was signed in Gdansk in 1454 by the Vistula guilds.";
    let (st, v) = s
        .post(
            "/v1/indexes/wiki/documents",
            json!({"documents": [{"id": "wiki-zephyrine.md", "text": secret}]}),
        )
        .await;
    assert_eq!((st, v["documents"].as_u64()), (200, Some(1)), "{v}");
    let question = "Where was the Zephyrine treaty signed?";
    for strategy in ["dense", "hipporag2"] {
        let body =
            json!({"question": question, "strategy": strategy, "top_k": 10, "answer": false});
        let (st, v) = s.post("/v1/indexes/wiki/query", body.clone()).await;
        assert_eq!(st, 200, "{v}");
        assert!(
            documents_of(&v).contains(&"wiki-zephyrine.md".to_owned()),
            "{v}"
        );
        // The default index is the first given: wiki.
        let (_, v) = s.post("/v1/query", body.clone()).await;
        assert!(
            documents_of(&v).contains(&"wiki-zephyrine.md".to_owned()),
            "{v}"
        );
        let (st, v) = s.post("/v1/indexes/docs/query", body.clone()).await;
        assert_eq!(st, 200, "{v}");
        let found = documents_of(&v);
        assert!(
            !found.is_empty() && found.iter().all(|d| d.starts_with("docs-")),
            "{v}"
        );
        let mut federated = body.clone();
        federated["indexes"] = json!(["docs"]);
        let (st, v) = s.post("/v1/query", federated).await;
        assert_eq!(st, 200, "{v}");
        assert!(
            documents_of(&v).iter().all(|d| d.starts_with("docs-")),
            "{v}"
        );
    }
    let (_, v) = s.get("/v1/indexes/docs/documents").await;
    assert_eq!(v["total"], 2, "{v}");
    let (_, v) = s.get("/v1/indexes/wiki/documents").await;
    assert_eq!(v["total"], 3, "{v}");
    let (st, v) = s
        .get("/v1/indexes/docs/documents/wiki-zephyrine.md/file")
        .await;
    assert_eq!(st, 404, "{v}");
    // A change through one index's route does not move the other's generation.
    let (_, v) = s.get("/v1/indexes").await;
    let generations: BTreeMap<String, u64> = v["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_owned(),
                i["generation"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        generations,
        BTreeMap::from([("docs".into(), 1), ("wiki".into(), 2)])
    );
    s.stop().await;
}

const READER: &str = "reader-key-wiki-0001";
const WRITER: &str = "writer-key-docs-0001";
const ADMIN: &str = "admin-key-000000001";

fn keys_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("keys.toml");
    std::fs::write(
        &path,
        format!(
            "[[key]]\nname = \"reader\"\nkey = \"{READER}\"\nread = [\"wiki\"]\n\n\
             [[key]]\nname = \"writer\"\nkey = \"{WRITER}\"\nread = [\"docs\"]\nchange = [\"docs\"]\n\n\
             [[key]]\nname = \"admin\"\nkey = \"{ADMIN}\"\nadmin = true\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_open_only_their_indexes_and_never_reveal_the_others() {
    let root = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    build(root.path(), 2).await;
    let s = Running::start_with(
        Indexes {
            root: Some(root.path().to_path_buf()),
            ..Indexes::default()
        },
        ServeOptions {
            keys_file: Some(keys_file(conf.path())),
            ..ServeOptions::default()
        },
    )
    .await;
    let names = |v: &Value| -> Vec<String> {
        v["indexes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // Without a key, or with a wrong one: 401.
    let (st, _) = s
        .call(Method::GET, "/v1/indexes", "not-a-key-at-all-00", None)
        .await;
    assert_eq!(st, 401);
    let r = s.client.get(s.url("/v1/indexes")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);

    // The reader sees wiki only.
    let (st, v) = s.call(Method::GET, "/v1/indexes", READER, None).await;
    assert_eq!((st, names(&v)), (200, vec!["wiki".to_owned()]), "{v}");
    assert_eq!(v["indexes"][0]["change"], false);
    assert_eq!(v["can_create"], false);
    let question = json!({"question": "Which river flows through Paris?", "answer": false});
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/indexes/wiki/query",
            READER,
            Some(question.clone()),
        )
        .await;
    assert_eq!(st, 200);
    // Another index's routes answer exactly as a missing index's do.
    for path in [
        "stats",
        "strategies",
        "documents",
        "graph?entity=Paris",
        "communities",
    ] {
        let (st, hidden) = s
            .call(
                Method::GET,
                &format!("/v1/indexes/docs/{path}"),
                READER,
                None,
            )
            .await;
        let (st2, missing) = s
            .call(
                Method::GET,
                &format!("/v1/indexes/nosuch/{path}"),
                READER,
                None,
            )
            .await;
        assert_eq!((st, st2), (404, 404), "{path}: {hidden}");
        assert_eq!(
            hidden["error"]["message"]
                .as_str()
                .unwrap()
                .replace("docs", "X"),
            missing["error"]["message"]
                .as_str()
                .unwrap()
                .replace("nosuch", "X"),
        );
    }
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/indexes/docs/query",
            READER,
            Some(question.clone()),
        )
        .await;
    assert_eq!(st, 404);
    let (st, _) = s.call(Method::GET, "/v1/indexes/docs", READER, None).await;
    assert_eq!(st, 404);
    // A path parameter that does not decode is 400, not the default index.
    let (st, _) = s
        .call(Method::GET, "/v1/indexes/%FF/documents", READER, None)
        .await;
    assert_eq!(st, 400);
    let mut federated = question.clone();
    federated["indexes"] = json!(["wiki", "docs"]);
    let (st, v) = s
        .call(Method::POST, "/v1/query", READER, Some(federated))
        .await;
    assert_eq!(st, 404, "{v}");
    // It may not change wiki, create or drop indexes, or read /metrics.
    let doc = json!({"documents": [{"id": "x.md", "text": "Gdansk is a port on the Baltic."}]});
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/indexes/wiki/documents",
            READER,
            Some(doc.clone()),
        )
        .await;
    assert_eq!(st, 403, "{v}");
    let (st, _) = s
        .call(
            Method::DELETE,
            "/v1/indexes/wiki/documents/wiki-curie.md",
            READER,
            None,
        )
        .await;
    assert_eq!(st, 403);
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/indexes",
            READER,
            Some(json!({"name": "mine"})),
        )
        .await;
    assert_eq!(st, 403);
    let (st, _) = s
        .call(Method::DELETE, "/v1/indexes/wiki", READER, None)
        .await;
    assert_eq!(st, 403);
    let (st, _) = s.call(Method::GET, "/metrics", READER, None).await;
    assert_eq!(st, 403);
    // Its OpenAI models are wiki's strategies only; another index's model is not found.
    let (_, v) = s.call(Method::GET, "/v1/models", READER, None).await;
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"wiki/hipporag2") && ids.iter().all(|i| i.starts_with("wiki/")),
        "{v}"
    );
    let chat = json!({"model": "docs/dense", "messages": [{"role": "user", "content": "Paris?"}]});
    let (st, _) = s
        .call(Method::POST, "/v1/chat/completions", READER, Some(chat))
        .await;
    assert_eq!(st, 404);
    let chat = json!({"model": "wiki/dense", "messages": [{"role": "user", "content": "Which river flows through Warsaw?"}]});
    let (st, v) = s
        .call(Method::POST, "/v1/chat/completions", READER, Some(chat))
        .await;
    assert_eq!(st, 200, "{v}");
    assert!(
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("Vistula"),
        "{v}"
    );

    // The writer changes docs, and does not see wiki.
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/indexes/docs/documents",
            WRITER,
            Some(doc.clone()),
        )
        .await;
    assert_eq!((st, v["generation"].as_u64()), (200, Some(2)), "{v}");
    let (_, v) = s.call(Method::GET, "/v1/indexes", WRITER, None).await;
    assert_eq!(names(&v), ["docs"]);
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/indexes/wiki/documents",
            WRITER,
            Some(doc.clone()),
        )
        .await;
    assert_eq!(st, 404);

    // The admin makes an index, fills it, asks it, and drops it.
    let (st, v) = s
        .call(Method::POST, "/v1/indexes", ADMIN, Some(json!({"name": "contracts", "config":
            "openie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n[index]\nmethods = [\"dense\"]\n"})))
        .await;
    assert_eq!(st, 201, "{v}");
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/indexes",
            ADMIN,
            Some(json!({"name": "contracts"})),
        )
        .await;
    assert_eq!(st, 409);
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/indexes",
            ADMIN,
            Some(json!({"name": "../up"})),
        )
        .await;
    assert_eq!(st, 422);
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/indexes/contracts/documents",
            ADMIN,
            Some(doc.clone()),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/indexes/contracts/query",
            ADMIN,
            Some(json!({"question": "Which sea is Gdansk on?", "answer": false})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(documents_of(&v), ["x.md"], "{v}");
    let (_, v) = s.call(Method::GET, "/v1/indexes", ADMIN, None).await;
    assert_eq!(names(&v), ["contracts", "docs", "wiki"]);
    let (st, _) = s.call(Method::GET, "/metrics", ADMIN, None).await;
    assert_eq!(st, 200);
    let (st, _) = s
        .call(Method::DELETE, "/v1/indexes/contracts", ADMIN, None)
        .await;
    assert_eq!(st, 200);
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/indexes/contracts/query",
            ADMIN,
            Some(json!({"question": "Which sea is Gdansk on?"})),
        )
        .await;
    assert_eq!(st, 404);
    assert!(!root.path().join("contracts").exists());
    s.stop().await;
}

/// Reciprocal-rank fusion computed here from each index's own ranking.
fn hand_fused(lists: &[(&str, Vec<Value>)], k: f64) -> Vec<(String, String, f64)> {
    let mut merged: Vec<(String, String, f64, (usize, usize))> = Vec::new();
    for (li, (index, passages)) in lists.iter().enumerate() {
        for (pos, p) in passages.iter().enumerate() {
            let text = p["text"].as_str().unwrap().to_lowercase();
            let add = 1.0 / (k + (pos + 1) as f64);
            match merged.iter_mut().find(|m| m.0 == text) {
                Some(m) => m.2 += add,
                None => merged.push((text, (*index).to_owned(), add, (pos + 1, li))),
            }
        }
    }
    merged.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.3.cmp(&b.3)));
    merged.into_iter().map(|(t, i, s, _)| (i, t, s)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_of_three_indexes_is_fused_by_rank_and_cited_by_index() {
    let root = tempfile::tempdir().unwrap();
    build(root.path(), 3).await;
    let s = Running::start_with(
        Indexes {
            named: folders(root.path(), &["wiki", "docs", "legal"]),
            ..Indexes::default()
        },
        ServeOptions::default(),
    )
    .await;
    let question = "Which river flows through the capital?";
    let names = ["legal", "wiki", "docs"];
    for (strategy, k) in [("dense", 60), ("hipporag2", 1)] {
        let mut lists = Vec::new();
        for name in names {
            let (st, v) = s
                .post(
                    &format!("/v1/indexes/{name}/query"),
                    json!({"question": question, "strategy": strategy, "top_k": 3, "answer": false}),
                )
                .await;
            assert_eq!(st, 200, "{v}");
            lists.push((name, v["passages"].as_array().unwrap().clone()));
        }
        let want = hand_fused(&lists, f64::from(k));
        let (st, v) = s
            .post(
                "/v1/query",
                json!({"question": question, "strategy": strategy, "top_k": 4, "answer": false,
                       "indexes": names, "rrf_k": k}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        let got: Vec<(String, String, f64)> = v["passages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["index"].as_str().unwrap().to_owned(),
                    p["text"].as_str().unwrap().to_lowercase(),
                    p["score"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got.len(), 4);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                (&g.0, &g.1),
                (&w.0, &w.1),
                "{strategy}: {got:?} against {want:?}"
            );
            assert!((g.2 - w.2).abs() < 1e-12);
        }
        assert_eq!(v["fusion"]["k"], k);
        assert_eq!(v["per_index"].as_array().unwrap().len(), 3);
        assert!(v["answer"].is_null());
    }
    // With the reader: the answer cites merged passages by number, each naming its index and source.
    let (st, v) = s
        .post(
            "/v1/query",
            json!({"question": "Which river flows through Paris?", "strategy": "dense", "indexes": ["wiki", "docs"]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert!(v["answer"].as_str().unwrap().contains("Seine"), "{v}");
    let cited = &v["citations"][0];
    assert_eq!(cited["index"], "docs", "{v}");
    let n = cited["number"].as_u64().unwrap() as usize;
    assert_eq!(v["passages"][n - 1]["index"], "docs");
    assert_eq!(cited["source"]["document"], "docs-paris.md", "{v}");
    // Streamed: each index's passages, the fused ones, the answer's tokens, the whole result, done.
    let text = s
        .client
        .post(s.url("/v1/query"))
        .json(
            &json!({"question": "Which river flows through Paris?", "strategy": "dense",
                      "indexes": ["wiki", "docs"], "stream": true}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<(String, Value)> = text
        .split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_owned(), serde_json::from_str(data).unwrap()))
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&names[..2], ["passages", "passages"], "{names:?}");
    let streamed: BTreeSet<&str> = events[..2]
        .iter()
        .map(|(_, d)| d["index"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, BTreeSet::from(["docs", "wiki"]));
    assert_eq!(names[2], "fused");
    assert!(names.contains(&"token"), "{names:?}");
    assert_eq!(&names[names.len() - 2..], ["result", "done"]);
    let result = &events[events.len() - 2].1;
    assert_eq!(result["answer"], v["answer"], "{result}");
    assert_eq!(result["passages"], v["passages"]);
    // Errors name what is wrong.
    for (body, status) in [
        (json!({"question": "q", "indexes": []}), 422),
        (json!({"question": "q", "indexes": ["wiki", "wiki"]}), 422),
        (json!({"question": "q", "indexes": ["wiki", "nosuch"]}), 404),
        (
            json!({"question": "q", "indexes": ["wiki"], "context": true}),
            422,
        ),
        (
            json!({"question": "q", "indexes": ["nosuch"], "stream": true}),
            404,
        ),
        (
            json!({"question": "q", "indexes": ["wiki"], "strategy": "hirag"}),
            400,
        ),
        (json!({"question": "q", "rrf_k": 5}), 422),
    ] {
        let (st, v) = s.post("/v1/query", body.clone()).await;
        assert_eq!(st, status, "{body}: {v}");
    }
    let (st, _) = s
        .post(
            "/v1/indexes/wiki/query",
            json!({"question": "q", "indexes": ["docs"]}),
        )
        .await;
    assert_eq!(st, 422);
    s.stop().await;
}

/// A gauge or counter of `/metrics`, summed over its labels.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_over_five_indexes_with_two_loaded_get_every_answer_from_the_right_index() {
    let secs: f64 = std::env::var("KGRAG_EVICTION_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8.0);
    let root = tempfile::tempdir().unwrap();
    build(root.path(), 5).await;
    let names: Vec<&str> = CORPORA.iter().map(|(n, _)| *n).collect();
    let s = Arc::new(
        Running::start_with(
            Indexes {
                named: folders(root.path(), &names),
                limits: Limits {
                    max_loaded: Some(2),
                    memory_budget: None,
                },
                ..Indexes::default()
            },
            ServeOptions::default(),
        )
        .await,
    );
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let questions = [
        "Which river flows through Warsaw?",
        "Who lives in Paris?",
        "What is in Krakow?",
    ];
    let mut clients = Vec::new();
    for c in 0..16usize {
        let (s, done, failed) = (s.clone(), done.clone(), failed.clone());
        let names = names.clone();
        clients.push(tokio::spawn(async move {
            let mut i = c;
            while Instant::now() < until {
                // Each client walks the indexes in its own order: every index is wanted all the time.
                let index = names[(i * 7 + c) % names.len()];
                let strategy = if i % 2 == 0 { "dense" } else { "hipporag2" };
                let body = json!({"question": questions[i % 3], "strategy": strategy, "answer": i % 4 == 0});
                let (st, v) = s.post(&format!("/v1/indexes/{index}/query"), body).await;
                let docs = if st == 200 { documents_of(&v) } else { Vec::new() };
                if st != 200 || docs.is_empty() || !docs.iter().all(|d| d.starts_with(&format!("{index}-"))) {
                    eprintln!("client {c}: {index}: {st} {v}");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    let text = s.metrics().await;
    eprintln!(
        "{done} requests in {secs} s over 5 indexes, 2 loaded at most: {:.0} q/s; {} loads, {} evictions",
        done as f64 / secs,
        metric(&text, "kgrag_index_loads_total"),
        metric(&text, "kgrag_index_evictions_total")
    );
    assert_eq!(failed, 0, "{failed} of {done} requests failed");
    assert!(done >= 32, "only {done} requests");
    assert!(
        metric(&text, "kgrag_index_evictions_total") >= 3.0,
        "{text}"
    );
    assert_eq!(metric(&text, "kgrag_index_load_failures_total"), 0.0);
    // Nothing holds an index now: at most two stay loaded.
    assert!(metric(&text, "kgrag_indexes_loaded") <= 2.0, "{text}");
    assert_eq!(metric(&text, "kgrag_index_in_use"), 0.0, "{text}");
    Arc::try_unwrap(s).ok().unwrap().stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_take_an_index_and_a_key_sees_only_its_own() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;

    let root = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    build(root.path(), 2).await;
    let s = Running::start_with(
        Indexes {
            named: folders(root.path(), &["docs", "wiki"]),
            ..Indexes::default()
        },
        ServeOptions {
            keys_file: Some(keys_file(conf.path())),
            ..ServeOptions::default()
        },
    )
    .await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url("/mcp")).auth_header(READER),
    );
    let client = ().serve(transport).await.unwrap();
    let call = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let r = client
                .call_tool(
                    CallToolRequestParams::new(name)
                        .with_arguments(args.as_object().unwrap().clone()),
                )
                .await
                .unwrap();
            let text = r.content[0].as_text().unwrap().text.clone();
            (r.is_error == Some(true), text)
        }
    };
    let (err, text) = call("list_indexes", json!({})).await;
    assert!(!err, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["indexes"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["indexes"][0]["name"], "wiki");
    let (err, text) = call(
        "search",
        json!({"question": "Which river flows through Warsaw?", "index": "wiki"}),
    )
    .await;
    assert!(!err, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["index"], "wiki");
    assert!(
        documents_of(&v).iter().all(|d| d.starts_with("wiki-")),
        "{v}"
    );
    // The default index (docs) and any other it may not see: not found, as if absent
    let (err, text) = call(
        "search",
        json!({"question": "Which river flows through Paris?"}),
    )
    .await;
    // (and its name is not told)
    assert!(
        err && text.contains("no default index") && !text.contains("docs"),
        "{text}"
    );
    let (err, text) = call("list_strategies", json!({"index": "docs"})).await;
    assert!(err && text.contains("no index"), "{text}");
    let (err, text) = call(
        "add_documents",
        json!({"index": "wiki", "documents": [{"id": "m.md", "text": "Lodz is in Poland."}]}),
    )
    .await;
    assert!(err && text.contains("not change"), "{text}");
    client.cancel().await.unwrap();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_budget_keeps_only_what_fits_and_never_the_index_in_use() {
    let root = tempfile::tempdir().unwrap();
    build(root.path(), 3).await;
    // One byte: no two indexes fit, so one stays loaded (the one used last), never none.
    let s = Running::start_with(
        Indexes {
            named: folders(root.path(), &["wiki", "docs", "legal"]),
            limits: Limits {
                max_loaded: None,
                memory_budget: Some(1),
            },
            ..Indexes::default()
        },
        ServeOptions::default(),
    )
    .await;
    let body = json!({"question": "Which river flows through Warsaw?", "answer": false});
    for name in ["wiki", "docs", "legal", "wiki"] {
        let (st, v) = s
            .post(&format!("/v1/indexes/{name}/query"), body.clone())
            .await;
        assert_eq!(st, 200, "{v}");
        assert!(documents_of(&v)
            .iter()
            .all(|d| d.starts_with(&format!("{name}-"))));
        let (_, list) = s.get("/v1/indexes").await;
        let loaded: Vec<&str> = list["indexes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["loaded"] == true)
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(loaded, [name], "{list}");
        let bytes = list["indexes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .and_then(|i| i["loaded_bytes"].as_u64())
            .unwrap();
        assert!(bytes > 0, "{list}");
    }
    let text = s.metrics().await;
    assert_eq!(metric(&text, "kgrag_index_evictions_total"), 3.0, "{text}");
    assert_eq!(metric(&text, "kgrag_index_loads_total"), 4.0, "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_in_postgresql_is_served_beside_one_in_files() {
    const URL_ENV: &str = "KGRAG_TEST_DATABASE_URL";
    if std::env::var_os(URL_ENV).is_none() {
        assert!(
            std::env::var_os("KGRAG_REQUIRE_PG_SERVER").is_none(),
            "{URL_ENV} is not set but KGRAG_REQUIRE_PG_SERVER is: `cargo xtask test` starts the server"
        );
        eprintln!("skipped: no PostgreSQL (run it through `cargo xtask test`)");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    build(root.path(), 1).await;
    let config = kgrag::config::Config::parse(&format!(
        "openie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n\
         [index]\nmethods = [\"dense\", \"hipporag2\"]\n[retriever]\nstrategy = \"hipporag2\"\ntop_k = 3\n\
         [storage]\nbackend = \"postgres\"\nurl_env = \"{URL_ENV}\"\nschema = \"t_serve_{}\"\n",
        std::process::id()
    ))
    .unwrap();
    let pg_dir = root.path().join("pg");
    let made = kgrag::Index::create(&pg_dir, config);
    let index = match made {
        Ok(i) => i,
        // A build of this crate alone has no PostgreSQL backend (the workspace's test build has).
        Err(e)
            if e.to_string().contains("postgres")
                && std::env::var_os("KGRAG_REQUIRE_PG_SERVER").is_none() =>
        {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let mut writer = index.writer().unwrap();
    writer
        .add_documents(
            CORPORA[1]
                .1
                .iter()
                .map(|(id, text)| kgrag::documents::SourceDoc::text(*id, *text))
                .collect(),
        )
        .await
        .unwrap();
    writer.commit().await.unwrap();
    drop((writer, index));
    assert!(pg_dir.join("storage.json").is_file());
    let s = Running::start_with(
        Indexes {
            named: vec![
                NamedIndex::folder("wiki", root.path().join("wiki")),
                NamedIndex::folder("pg", &pg_dir),
            ],
            ..Indexes::default()
        },
        ServeOptions::default(),
    )
    .await;
    let body = json!({"question": "Which river flows through Paris?", "answer": false});
    let (st, v) = s.post("/v1/indexes/pg/query", body.clone()).await;
    assert_eq!(st, 200, "{v}");
    assert!(
        documents_of(&v).iter().all(|d| d.starts_with("docs-")),
        "{v}"
    );
    // A change through the server commits to the database.
    let (st, v) = s
        .post(
            "/v1/indexes/pg/documents",
            json!({"documents": [{"id": "docs-lyon.md", "text": "Lyon lies where the Rhone meets the Saone."}]}),
        )
        .await;
    assert_eq!((st, v["generation"].as_u64()), (200, Some(2)), "{v}");
    let (_, v) = s
        .post(
            "/v1/indexes/pg/query",
            json!({"question": "Where do the Rhone and the Saone meet?", "answer": false}),
        )
        .await;
    assert!(documents_of(&v).contains(&"docs-lyon.md".to_owned()), "{v}");
    let mut federated = body.clone();
    federated["indexes"] = json!(["wiki", "pg"]);
    let (st, v) = s.post("/v1/query", federated).await;
    assert_eq!(st, 200, "{v}");
    let indexes: BTreeSet<&str> = v["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["index"].as_str().unwrap())
        .collect();
    assert_eq!(indexes, BTreeSet::from(["pg", "wiki"]), "{v}");
    s.stop().await;
}
