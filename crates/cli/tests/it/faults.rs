//! `kgrag index` with HippoRAG's LLM OpenIE against a fault-injecting OpenAI-compatible server on
//! loopback: 429 storms, 500s, garbage bodies, connections dropped in the middle of a body, replies slower
//! than the request timeout, and well-formed replies a model might write that hold no JSON. The build
//! completes, every failure is counted, and a rerun retries only what failed: no request that was
//! answered is sent again (the response cache and the extraction store), and the rerun leaves no chunk
//! unextracted. And the same server answering every request after 200 ms: a build with every method keeps
//! the chat model's requests in flight (bound by the provider, not by a stage's queue).

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cli::{fixture_corpus, index_fixture, json, tmp};

/// What the server did, by kind, and the bodies it answered usefully.
#[derive(Default)]
struct Log {
    requests: u64,
    by_kind: BTreeMap<&'static str, u64>,
    answered: HashSet<u64>,
    /// Requests whose body had been answered usefully before.
    repeated: u64,
    /// Every answered request: what it asked for (see [`kind_of`]), when its body had arrived and when
    /// its reply was sent.
    timeline: Vec<(&'static str, Instant, Instant)>,
}

/// The fault-injecting server: while `faulty`, request `n` gets fault `n % 8` (six kinds of failure, two
/// good replies in eight); otherwise every request is answered.
struct FaultServer {
    port: u16,
    faulty: Arc<AtomicBool>,
    /// Milliseconds every reply waits before it is sent (a provider's latency).
    delay_ms: Arc<AtomicU64>,
    log: Arc<Mutex<Log>>,
}

impl FaultServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let faulty = Arc::new(AtomicBool::new(true));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let log = Arc::new(Mutex::new(Log::default()));
        let (f, d, l) = (faulty.clone(), delay_ms.clone(), log.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (f, d, l) = (f.clone(), d.clone(), l.clone());
                std::thread::spawn(move || serve(conn, &f, &d, &l));
            }
        });
        Self {
            port,
            faulty,
            delay_ms,
            log,
        }
    }
}

/// Serves the requests of one connection (keep-alive) until it closes or a fault closes it.
fn serve(conn: TcpStream, faulty: &AtomicBool, delay_ms: &AtomicU64, log: &Mutex<Log>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = conn.set_nodelay(true);
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
        let arrived = Instant::now();
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
        let delay = delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
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
        if kind == "ok" {
            let mut log = log.lock().unwrap();
            log.timeline.push((kind_of(&text), arrived, Instant::now()));
        }
    }
}

/// What a request asks for, from our prompts' wording: `ner`, `triples`, `hierarchy` (a HiRAG cluster
/// summary), `reports`, `aggregates`, `relations` (LeanRAG) or `other`.
fn kind_of(body: &str) -> &'static str {
    [
        ("RDF-style triples", "triples"),
        ("named_entities", "ner"),
        ("more abstract layer", "hierarchy"),
        ("communities of a knowledge graph", "reports"),
        ("entity aggregation analyst", "aggregates"),
        ("inter-aggregation relationship analyst", "relations"),
    ]
    .iter()
    .find(|(needle, _)| body.contains(needle))
    .map_or("other", |(_, kind)| kind)
}

fn respond(out: &mut TcpStream, status: &str, headers: &str, body: &str) -> bool {
    // One write: a head and a body in two small segments meet Nagle's algorithm and the client's delayed
    // ACK, and the body would wait 40 ms — the test server's latency, not a provider's.
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    out.write_all(reply.as_bytes())
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
    match kind_of(body) {
        "hierarchy" => {
            return format!(
                "(\"entity\"<|>THEME OF {0}<|>category<|>What the group around {0} shares.)<|COMPLETE|>",
                words.first().copied().unwrap_or("IT").to_uppercase()
            )
        }
        "reports" => {
            return serde_json::json!({"title": "A community", "summary": "Related entities.",
                "rating": 5.0, "rating_explanation": "Moderate.",
                "findings": [{"summary": "A finding.", "explanation": "It holds."}]})
            .to_string()
        }
        "aggregates" => {
            return serde_json::json!({"entity_name": format!("GROUP OF {}", words.join(" ")),
                "entity_description": "What the members share.",
                "findings": [{"summary": "A trait.", "explanation": "They share it."}]})
            .to_string()
        }
        "relations" => return "The two groups are linked by trade.".to_owned(),
        _ => {}
    }
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

/// The requests of the kinds `keep` accepts (see [`kind_of`]): how many, the span from the first arrival
/// to the last reply, and the mean number in flight over that span.
fn wave(
    timeline: &[(&'static str, Instant, Instant)],
    keep: impl Fn(&str) -> bool,
) -> (usize, f64, f64) {
    let mine: Vec<_> = timeline.iter().filter(|t| keep(t.0)).collect();
    let (Some(first), Some(last)) = (
        mine.iter().map(|t| t.1).min(),
        mine.iter().map(|t| t.2).max(),
    ) else {
        return (0, 0.0, 0.0);
    };
    let span = (last - first).as_secs_f64();
    let busy: f64 = mine.iter().map(|t| (t.2 - t.1).as_secs_f64()).sum();
    (mine.len(), span, busy / span.max(1e-9))
}

/// The most requests of the kinds `keep` accepts that were in flight at one moment.
fn peak_in_flight(
    timeline: &[(&'static str, Instant, Instant)],
    keep: impl Fn(&str) -> bool,
) -> usize {
    // Ends sort before starts at the same instant: a request that ends as another starts is not beside it.
    let mut events: Vec<(Instant, i32)> = timeline
        .iter()
        .filter(|t| keep(t.0))
        .flat_map(|t| [(t.1, 1), (t.2, -1)])
        .collect();
    events.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        peak = peak.max(now);
    }
    peak as usize
}

#[test]
fn an_llm_build_is_bound_by_the_provider() {
    // Every reply takes 200 ms; the chat model keeps 8 requests in flight: at most 40 requests a second.
    const CONCURRENCY: usize = 8;
    let server = FaultServer::start();
    server.faulty.store(false, Ordering::SeqCst);
    server.delay_ms.store(200, Ordering::SeqCst);
    let work = tmp("throughput");
    // The fixture three times over (each copy its own documents), for waves wider than the concurrency.
    let ds = kgrag::eval::load("kgrag-fixture", std::path::Path::new("/nonexistent")).unwrap();
    let mut lines = String::new();
    for copy in 0..3 {
        for (i, p) in ds.passages.iter().enumerate() {
            let text = format!("{} (Record {copy}.)", p.text);
            let line = serde_json::json!({"id": format!("c{copy}p{i:02}"), "title": p.title, "text": text});
            lines.push_str(&format!("{line}\n"));
        }
    }
    std::fs::write(work.join("corpus.jsonl"), lines).unwrap();
    std::fs::write(
        work.join("kgrag.toml"),
        format!(
            "cache_dir = \"cache\"\nopenie = \"llm\"\n\
             [chat]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"slow\"\n\
             [chat.limits]\nmax_attempts = 2\nrequest_timeout_secs = 10.0\nconcurrency = {CONCURRENCY}\n\
             [hipporag]\nfilter = \"none\"\n[leanrag]\ncluster_size = 5\n",
            server.port
        ),
    )
    .unwrap();
    let started = Instant::now();
    let out = super::cli::kgrag(&work)
        .args(["index", "corpus.jsonl", "--index", "idx", "--quiet"])
        .args(["--methods", "dense,hipporag2,hirag,leanrag"])
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = server.log.lock().unwrap();
    let kinds: std::collections::BTreeSet<&str> = log.timeline.iter().map(|t| t.0).collect();
    let w: BTreeMap<&str, _> = kinds
        .into_iter()
        .map(|k| (k, wave(&log.timeline, |x| x == k)))
        .collect();
    let total = log.timeline.len();
    eprintln!("{total} requests in {wall:.1} s; by kind (requests, span s, mean in flight): {w:?}");
    let ideal = CONCURRENCY as f64 / 0.2;
    // OpenIE: the chunks are independent, so the provider is the bound: ≥ 0.8 × 40 requests a second.
    let (n, span, in_flight) = wave(&log.timeline, |k| k == "ner" || k == "triples");
    let rate = n as f64 / span;
    eprintln!(
        "OpenIE: {n} requests, {rate:.1} a second ({in_flight:.1} in flight), ideal {ideal:.0}"
    );
    assert!(
        rate >= 0.8 * ideal,
        "OpenIE ran {rate:.1} requests a second, under 0.8 × {ideal:.0}"
    );
    // The community reports of a level are independent too: more in flight than `[hirag] concurrency`
    // (4), since a stage keeps as many requests in flight as the chat model takes. Measured at the
    // widest moment: the mean over the stage also counts the waits of a level on the one below it (its
    // sub-reports stand in), which a busy machine lengthens.
    let (n, _, _) = w["reports"];
    assert!(
        n >= 2 * CONCURRENCY,
        "only {n} reports: the wave is too narrow to tell"
    );
    let peak = peak_in_flight(&log.timeline, |k| k == "reports");
    eprintln!("reports: at most {peak} in flight");
    assert!(peak > 4, "reports ran at most {peak} in flight");
    // LeanRAG waits only for HiRAG's base layer, not for its hierarchy and reports: its first aggregate
    // is asked while HiRAG's requests are still running.
    let first = |k: &str| log.timeline.iter().filter(|t| t.0 == k).map(|t| t.1).min();
    let last = |k: &str| log.timeline.iter().filter(|t| t.0 == k).map(|t| t.2).max();
    let (Some(lean_first), Some(hirag_last)) = (first("aggregates"), last("reports")) else {
        panic!("the build asked for no aggregates or no reports: {w:?}");
    };
    assert!(
        lean_first < hirag_last,
        "LeanRAG's first aggregate came {:.2} s after HiRAG's last report",
        (lean_first - hirag_last).as_secs_f64()
    );
    // The builds overlapped, and each one's calls are counted under its own name.
    let count =
        |kinds: &[&str]| log.timeline.iter().filter(|t| kinds.contains(&t.0)).count() as u64;
    let stats = super::cli::json(&work, &["stats", "--index", "idx", "--json"]);
    let calls = |stage: &str| stats["llm_by_stage"][stage]["calls"].as_u64().unwrap_or(0);
    eprintln!("calls by stage: {}", stats["llm_by_stage"]);
    assert_eq!(calls("extraction"), count(&["ner", "triples"]));
    assert_eq!(calls("leanrag"), count(&["aggregates", "relations"]));
    assert_eq!(
        calls("extraction") + calls("hirag") + calls("leanrag"),
        total as u64
    );
    let _ = std::fs::remove_dir_all(&work);
}
