//! `kgrag index` with HippoRAG's LLM OpenIE against a fault-injecting OpenAI-compatible server on
//! loopback: 429 storms, 500s, garbage bodies, connections dropped in the middle of a body, replies slower
//! than the request timeout, and well-formed replies a model might write that hold no JSON. The build
//! completes, every failure is counted, and a rerun retries only what failed: no request that was
//! answered is sent again (the response cache and the extraction store), and the rerun leaves no chunk
//! unextracted.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cli::{fixture_corpus, index_fixture, json, tmp};

/// What the server did, by kind, and the bodies it answered usefully.
#[derive(Default)]
struct Log {
    requests: u64,
    by_kind: BTreeMap<&'static str, u64>,
    answered: HashSet<u64>,
    /// Requests whose body had been answered usefully before.
    repeated: u64,
}

/// The fault-injecting server: while `faulty`, request `n` gets fault `n % 8` (six kinds of failure, two
/// good replies in eight); otherwise every request is answered.
struct FaultServer {
    port: u16,
    faulty: Arc<AtomicBool>,
    log: Arc<Mutex<Log>>,
}

impl FaultServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let faulty = Arc::new(AtomicBool::new(true));
        let log = Arc::new(Mutex::new(Log::default()));
        let (f, l) = (faulty.clone(), log.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (f, l) = (f.clone(), l.clone());
                std::thread::spawn(move || serve(conn, &f, &l));
            }
        });
        Self { port, faulty, log }
    }
}

/// Serves the requests of one connection (keep-alive) until it closes or a fault closes it.
fn serve(conn: TcpStream, faulty: &AtomicBool, log: &Mutex<Log>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if first {
                first = false;
                continue;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, value)) = l.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut hasher);
        let key = hasher.finish();
        let n = {
            let mut log = log.lock().unwrap();
            log.requests += 1;
            log.requests - 1
        };
        let kind = if faulty.load(Ordering::SeqCst) {
            [
                "429", "garbage", "dropped", "slow", "500", "prose", "ok", "ok",
            ][(n % 8) as usize]
        } else {
            "ok"
        };
        {
            let mut log = log.lock().unwrap();
            *log.by_kind.entry(kind).or_default() += 1;
            if kind == "ok" {
                if log.answered.contains(&key) {
                    log.repeated += 1;
                }
                log.answered.insert(key);
            }
        }
        let text = String::from_utf8_lossy(&body);
        let sent = match kind {
            "429" => respond(
                &mut out,
                "429 Too Many Requests",
                "Retry-After: 0\r\n",
                r#"{"error": {"message": "rate limited", "type": "rate_limit"}}"#,
            ),
            "500" => respond(
                &mut out,
                "500 Internal Server Error",
                "",
                r#"{"error": {"message": "boom"}}"#,
            ),
            "garbage" => respond(&mut out, "200 OK", "", "<html>\u{0}\u{1}not json at all"),
            "dropped" => {
                let _ = out.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"id\": \"x\", \"choi",
                );
                let _ = out.flush();
                return;
            }
            "slow" => {
                std::thread::sleep(Duration::from_millis(1500));
                respond(&mut out, "200 OK", "", &completion(&reply_for(&text)))
            }
            "prose" => respond(
                &mut out,
                "200 OK",
                "",
                &completion("Sorry, I can't help with that."),
            ),
            _ => respond(&mut out, "200 OK", "", &completion(&reply_for(&text))),
        };
        if !sent {
            return;
        }
    }
}

fn respond(out: &mut TcpStream, status: &str, headers: &str, body: &str) -> bool {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())
        .and_then(|_| out.write_all(body.as_bytes()))
        .and_then(|_| out.flush())
        .is_ok()
}

/// An OpenAI chat completion holding `content`.
fn completion(content: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": 0,
        "model": "fault",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

/// A usable OpenIE reply to the request `body`: the capitalised words of its last message as entities, or
/// consecutive pairs of them as triples when the request asks for triples.
fn reply_for(body: &str) -> String {
    let request: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let mut words: Vec<&str> = Vec::new();
    for w in last.split(|c: char| !c.is_alphanumeric()) {
        if w.len() > 2 && w.starts_with(char::is_uppercase) && !words.contains(&w) {
            words.push(w);
        }
    }
    words.truncate(6);
    if body.contains("RDF-style triples") {
        let triples: Vec<[&str; 3]> = words
            .windows(2)
            .map(|p| [p[0], "appears with", p[1]])
            .collect();
        serde_json::json!({ "triples": triples }).to_string()
    } else {
        serde_json::json!({ "named_entities": words }).to_string()
    }
}

#[test]
fn llm_faults_during_indexing_are_counted_and_a_rerun_repeats_nothing_finished() {
    let server = FaultServer::start();
    let work = tmp("faults");
    fixture_corpus(&work);
    std::fs::write(
        work.join("kgrag.toml"),
        format!(
            "cache_dir = \"cache\"\nopenie = \"llm\"\n\
             [chat]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"fault\"\n\
             [chat.limits]\nmax_attempts = 3\nrequest_timeout_secs = 1.0\ninitial_backoff_ms = 1\n\
             max_backoff_ms = 5\nconcurrency = 4\n\
             [hipporag]\nfilter = \"none\"\n",
            server.port
        ),
    )
    .unwrap();
    let index = |label: &str| {
        let out = index_fixture(&work, "idx")
            .arg("--quiet")
            .env("OPENAI_API_KEY", "test")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{label}: {stderr}");
        stderr
    };
    // `--estimate` first: a table of the expected calls, no request sent, nothing written.
    let out = index_fixture(&work, "idx")
        .args(["--estimate", "--quiet"])
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table.contains("openie_ner") && table.contains("openie_triples"),
        "{table}"
    );
    assert_eq!(
        server.log.lock().unwrap().requests,
        0,
        "the estimate sent a request"
    );
    assert!(
        !work.join("idx").exists() && !work.join("cache").exists(),
        "the estimate wrote files"
    );
    // Under faults: the build completes; the failures are counted.
    let first = index("faulty build");
    let stats = json(&work, &["stats", "--index", "idx", "--json"]);
    let (failed, calls) = {
        let log = server.log.lock().unwrap();
        eprintln!("faulty build: {} requests {:?}", log.requests, log.by_kind);
        for kind in ["429", "garbage", "dropped", "slow", "500", "prose", "ok"] {
            assert!(
                log.by_kind.get(kind).copied().unwrap_or(0) > 0,
                "no {kind}: {:?}",
                log.by_kind
            );
        }
        assert_eq!(log.repeated, 0, "an answered request was sent again");
        (
            stats["last_build_extraction"]["failed"]
                .as_u64()
                .unwrap_or(0),
            log.requests,
        )
    };
    let usage = &stats["llm_by_stage"]["extraction"];
    eprintln!(
        "stats: extraction {:?}, usage {usage}",
        stats["last_build_extraction"]
    );
    assert!(
        usage["failures"].as_u64().unwrap_or(0) > 0,
        "failed attempts are counted: {usage}\n{first}"
    );
    // Chunks whose extraction failed for good (six faults in eight requests, three attempts each: about
    // four calls in ten fail) are counted, and the index says a rerun retries them.
    assert!(
        failed > 0,
        "no chunk failed: the rerun path is not exercised\n{first}"
    );
    // The estimate made before the build: two OpenIE calls per chunk, every chunk to extract.
    let chunks = stats["chunks"].as_u64().unwrap();
    let estimated = |stats: &serde_json::Value| {
        stats["llm_estimate"]["by_stage"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["stage"] == "extraction"))
            .map(|r| r["estimated"]["calls"].as_u64().unwrap_or(0))
    };
    assert_eq!(
        estimated(&stats),
        Some(2 * chunks),
        "{}",
        stats["llm_estimate"]
    );
    let notes = stats["notes"].to_string();
    assert!(notes.contains("a rerun retries them"), "{notes}\n{first}");
    // The rerun, the server healthy: only what failed is asked again, and every chunk is extracted.
    server.faulty.store(false, Ordering::SeqCst);
    let _ = index("rerun");
    let stats = json(&work, &["stats", "--index", "idx", "--json"]);
    let log = server.log.lock().unwrap();
    eprintln!(
        "rerun: {} more requests, extraction {:?}",
        log.requests - calls,
        stats["last_build_extraction"]
    );
    assert_eq!(log.repeated, 0, "an answered request was sent again");
    assert_eq!(stats["last_build_extraction"]["failed"].as_u64(), Some(0));
    // The rerun's estimate counts only the chunks left to extract (the others are in the store).
    assert_eq!(
        estimated(&stats),
        Some(2 * failed),
        "{}",
        stats["llm_estimate"]
    );
    assert_eq!(
        stats["last_build_extraction"]["extracted"].as_u64(),
        Some(failed),
        "the rerun extracts exactly the chunks that failed"
    );
    let _ = std::fs::remove_dir_all(&work);
}
