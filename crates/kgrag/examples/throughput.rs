//! Query throughput of one shared index: the same `Searcher` queried by 1, 2 and 4 threads at once.
//!
//! ```sh
//! kgrag index corpus.json --index DIR …                    # any index (e.g. musique-100's corpus)
//! cargo run --release -p kgrag --example throughput -- DIR musique-100 [--strategies hipporag2,hirag]
//!     [--threads 1,2,4] [--rounds 3] [--no-cache]
//! ```
//!
//! Every strategy is warmed first (its index loaded, its retriever built, each question asked once), so the
//! figures measure retrieval alone. With the response cache (the default) the query embeddings of the timed
//! rounds are cache reads; `--no-cache` embeds every query with the model again. Prints JSON: queries per
//! second per strategy and thread count, the speed-up over one thread, and the median latency of one query
//! (`p50_us`). `examples/python/throughput.py` measures the same through the Python package.

use std::path::PathBuf;
use std::time::Instant;

use kgrag::{Index, Searcher};

fn option(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    option(name)
        .unwrap_or_else(|| default.to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Asks every question `rounds` times, spread over `threads` threads; returns queries per second and the
/// median latency of one query in microseconds.
fn run(
    searcher: &Searcher,
    strategy: &str,
    questions: &[String],
    threads: usize,
    rounds: usize,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let total = questions.len() * rounds;
    let latencies = std::sync::Mutex::new(Vec::with_capacity(total));
    let started = Instant::now();
    let failures: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let searcher = searcher.clone();
                let latencies = &latencies;
                scope.spawn(move || {
                    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    else {
                        return total;
                    };
                    let mut failed = 0;
                    let mut mine = Vec::new();
                    for i in (t..total).step_by(threads) {
                        let q = &questions[i % questions.len()];
                        let t = Instant::now();
                        if rt.block_on(searcher.search(q, strategy, 10)).is_err() {
                            failed += 1;
                        }
                        mine.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    if let Ok(mut all) = latencies.lock() {
                        all.extend(mine);
                    }
                    failed
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(total)).sum()
    });
    let secs = started.elapsed().as_secs_f64();
    if failures > 0 {
        return Err(format!("{strategy}: {failures} of {total} queries failed").into());
    }
    let mut latencies = latencies.into_inner().unwrap_or_default();
    latencies.sort_by(f64::total_cmp);
    let p50 = latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    Ok((total as f64 / secs, p50))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: throughput DIR DATASET [--strategies a,b] [--threads 1,2,4] [--rounds N] [--no-cache]";
    let dir = PathBuf::from(args.next().ok_or(usage)?);
    let dataset = args.next().ok_or(usage)?;
    let strategies: Vec<String> = list("--strategies", "hipporag2,hirag");
    let threads: Vec<usize> = list("--threads", "1,2,4");
    let rounds: usize = option("--rounds").and_then(|r| r.parse().ok()).unwrap_or(3);
    let questions: Vec<String> = kgrag::eval::load(&dataset, &kgrag::eval::data_dir())?
        .questions
        .into_iter()
        .map(|q| q.question)
        .collect();

    let index = if std::env::args().any(|a| a == "--no-cache") {
        let stored = Index::open(&dir)?.config().clone();
        let embedder = kgrag::llm::build_embedder(&stored.embedder, None)?;
        Index::options()
            .config(stored)
            .models(embedder, None)
            .open(&dir)?
    } else {
        Index::open(&dir)?
    };
    let searcher = index.reader()?.searcher();
    let mut report = serde_json::json!({
        "index": dir,
        "generation": searcher.generation(),
        "questions": questions.len(),
        "rounds": rounds,
        "machine_threads": std::thread::available_parallelism().map_or(1, |n| n.get()),
    });
    for strategy in &strategies {
        // Warm: the method's index, the retriever, every question once.
        let t = Instant::now();
        run(&searcher, strategy, &questions, 1, 1)?;
        let warm_s = t.elapsed().as_secs_f64();
        let mut by_threads = serde_json::Map::new();
        let mut single = None;
        for &n in &threads {
            let (qps, p50_us) = run(&searcher, strategy, &questions, n.max(1), rounds)?;
            let base = *single.get_or_insert(qps);
            by_threads.insert(
                n.to_string(),
                serde_json::json!({"qps": qps, "speedup": qps / base, "p50_us": p50_us}),
            );
        }
        report[strategy.as_str()] = serde_json::json!({"warm_s": warm_s, "threads": by_threads});
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
