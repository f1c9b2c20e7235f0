//! A load generator for `kgrag serve`: N clients post questions to `/v1/query` for a while, cycling
//! through strategies and questions, while a writer adds a document every few seconds; it reports, per
//! strategy, requests, errors, queries per second and latency percentiles. Used by the `loadgen` example
//! and by the server's load test.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// The server, e.g. `http://127.0.0.1:8080`.
    pub base: String,
    /// Concurrent clients.
    pub clients: usize,
    /// How long.
    pub duration: Duration,
    /// Strategies, cycled per request.
    pub strategies: Vec<String>,
    /// Questions, cycled per request.
    pub questions: Vec<String>,
    /// Passages per query.
    pub top_k: usize,
    /// Run the reader.
    pub answer: bool,
    /// Add a document this often (`None`: no writes).
    pub insert_every: Option<Duration>,
    /// The bearer key.
    pub key: Option<String>,
    /// Named indexes the requests are spread over (`/v1/indexes/{name}/query`, in turn); empty: the
    /// default index (`/v1/query`).
    pub indexes: Vec<String>,
    /// Ask every request of all of `indexes` at once (`POST /v1/query` with `indexes`) instead.
    pub federate: bool,
}

/// Per-strategy (and `insert`) outcome.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Requests answered 200.
    pub ok: usize,
    /// Requests that failed (status or transport), with the first few messages.
    pub errors: usize,
    /// Up to 5 error messages.
    pub messages: Vec<String>,
    /// Latencies of the successful requests, in milliseconds.
    pub millis: Vec<f64>,
    /// Generations the answers came from.
    pub generations: Vec<u64>,
}

impl Tally {
    fn fail(&mut self, message: String) {
        self.errors += 1;
        if self.messages.len() < 5 {
            self.messages.push(message);
        }
    }

    /// The `q`-quantile latency (0 ≤ q ≤ 1), nearest rank.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.millis.is_empty() {
            return f64::NAN;
        }
        let mut v = self.millis.clone();
        v.sort_by(f64::total_cmp);
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }
}

/// The outcome of a run.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Per strategy, and `"insert"` for the writes.
    pub tallies: BTreeMap<String, Tally>,
    /// Wall seconds of the run.
    pub secs: f64,
}

impl LoadReport {
    /// Failed requests in all.
    pub fn errors(&self) -> usize {
        self.tallies.values().map(|t| t.errors).sum()
    }

    /// A table: strategy, requests, errors, queries per second, p50, p90, p99 (ms).
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| strategy | requests | errors | queries/s | p50 ms | p90 ms | p99 ms |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for (name, t) in &self.tallies {
            out.push_str(&format!(
                "| {name} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
                t.ok,
                t.errors,
                t.ok as f64 / self.secs.max(1e-9),
                t.quantile(0.5),
                t.quantile(0.9),
                t.quantile(0.99)
            ));
        }
        out
    }

    /// The same as JSON.
    pub fn to_json(&self) -> Value {
        let rows: BTreeMap<&String, Value> = self
            .tallies
            .iter()
            .map(|(k, t)| {
                (
                    k,
                    json!({
                        "requests": t.ok,
                        "errors": t.errors,
                        "error_messages": t.messages,
                        "qps": t.ok as f64 / self.secs.max(1e-9),
                        "p50_ms": t.quantile(0.5),
                        "p90_ms": t.quantile(0.9),
                        "p99_ms": t.quantile(0.99),
                    }),
                )
            })
            .collect();
        json!({"secs": self.secs, "strategies": rows})
    }
}

fn request(
    client: &reqwest::Client,
    plan: &LoadPlan,
    method: reqwest::Method,
    path: &str,
) -> reqwest::RequestBuilder {
    let r = client.request(method, format!("{}{path}", plan.base));
    match &plan.key {
        Some(k) => r.bearer_auth(k),
        None => r,
    }
}

/// Installs ring as rustls' provider: with the workspace's `https` features reqwest has none, and building
/// a client (plain http included) would fail. Installing twice is harmless.
pub fn crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Runs `plan` and returns what happened.
pub async fn run(plan: &LoadPlan) -> LoadReport {
    crypto_provider();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(plan.clients.max(1))
        .build()
        .unwrap_or_default();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..plan.clients {
        let client = client.clone();
        let plan = plan.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
            let mut n = c;
            while !stop.load(Ordering::Relaxed) {
                let strategy = &plan.strategies[n % plan.strategies.len()];
                let question = &plan.questions[(n / plan.strategies.len()) % plan.questions.len()];
                n += plan.clients;
                let mut body = json!({"question": question, "strategy": strategy, "top_k": plan.top_k, "answer": plan.answer});
                let path = match (plan.indexes.len(), plan.federate) {
                    (0, _) => "/v1/query".to_owned(),
                    (_, true) => {
                        body["indexes"] = json!(plan.indexes);
                        "/v1/query".to_owned()
                    }
                    (k, false) => format!(
                        "/v1/indexes/{}/query",
                        plan.indexes[(n / plan.clients + n % plan.clients) % k]
                    ),
                };
                let t = Instant::now();
                let sent = request(&client, &plan, reqwest::Method::POST, &path)
                    .json(&body)
                    .send()
                    .await;
                let tally = tallies.entry(strategy.clone()).or_default();
                match sent {
                    Ok(r) if r.status().is_success() => match r.json::<Value>().await {
                        Ok(v) => {
                            tally.millis.push(t.elapsed().as_secs_f64() * 1e3);
                            tally.ok += 1;
                            let generation = v["stats"]["generation"]
                                .as_u64()
                                .or_else(|| v["per_index"][0]["generation"].as_u64())
                                .unwrap_or(0);
                            tally.generations.push(generation);
                        }
                        Err(e) => tally.fail(format!("unreadable reply: {e}")),
                    },
                    Ok(r) => {
                        let status = r.status();
                        let text = r.text().await.unwrap_or_default();
                        tally.fail(format!("{status}: {text}"));
                    }
                    Err(e) => tally.fail(format!("transport: {e}")),
                }
            }
            tallies
        }));
    }
    let writer = plan.insert_every.map(|every| {
        let client = client.clone();
        let plan = plan.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut i = 0;
            // A fixed rate: an insert every `every` from the start, however long each takes.
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                i += 1;
                let id = format!("load-{}-{i}", std::process::id());
                let body = json!({"documents": [{"id": id, "text": format!("Load document {i}: the lighthouse of Varna number {i} was repainted in spring.")}]});
                let t = Instant::now();
                match request(&client, &plan, reqwest::Method::POST, "/v1/documents")
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(r) if r.status().is_success() => {
                        tally.ok += 1;
                        tally.millis.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                    Ok(r) => {
                        let status = r.status();
                        tally.fail(format!("{status}: {}", r.text().await.unwrap_or_default()));
                    }
                    Err(e) => tally.fail(format!("transport: {e}")),
                }
            }
            tally
        })
    });
    tokio::time::sleep(plan.duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut report = LoadReport::default();
    for t in tasks {
        match t.await {
            Ok(tallies) => {
                for (k, t) in tallies {
                    let e = report.tallies.entry(k).or_default();
                    e.ok += t.ok;
                    e.errors += t.errors;
                    e.millis.extend(t.millis);
                    e.generations.extend(t.generations);
                    for m in t.messages {
                        if e.messages.len() < 5 {
                            e.messages.push(m);
                        }
                    }
                }
            }
            Err(e) => report
                .tallies
                .entry("client".into())
                .or_default()
                .fail(format!("client task: {e}")),
        }
    }
    if let Some(w) = writer {
        match w.await {
            Ok(t) => {
                report.tallies.insert("insert".into(), t);
            }
            Err(e) => report
                .tallies
                .entry("insert".into())
                .or_default()
                .fail(format!("writer task: {e}")),
        }
    }
    report.secs = started.elapsed().as_secs_f64();
    report
}

/// Questions from a file: a JSON array (of strings, or of objects with `question`), JSON lines of either,
/// or plain lines.
pub fn read_questions(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let pick = |v: &Value| -> Option<String> {
        v.as_str()
            .map(str::to_owned)
            .or_else(|| v.get("question").and_then(Value::as_str).map(str::to_owned))
    };
    let out: Vec<String> = if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&text) {
        items.iter().filter_map(pick).collect()
    } else {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str::<Value>(l)
                    .ok()
                    .and_then(|v| pick(&v))
                    .unwrap_or_else(|| l.trim().to_owned())
            })
            .collect()
    };
    if out.is_empty() {
        return Err(format!("{}: no questions", path.display()));
    }
    Ok(out)
}
