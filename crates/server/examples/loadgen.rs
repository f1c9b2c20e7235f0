//! Load on a running `kgrag serve`: `cargo run --release -p kgrag-server --example loadgen -- --url
//! http://127.0.0.1:8080 --clients 16 --secs 30 --strategies hipporag2,dense --questions q.json
//! [--answer] [--insert-every 5] [--top-k 5] [--key-env VAR] [--indexes a,b,c [--federate]] [--json
//! out.json]`. Prints, per strategy, requests, errors, queries per second and p50/p90/p99 latency; exits
//! 1 on any error. `--indexes` spreads the requests over those indexes' routes in turn; with
//! `--federate` every request asks all of them at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/load.rs"]
#[allow(dead_code)]
mod load;

use std::time::Duration;

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let mut plan = load::LoadPlan {
        base: "http://127.0.0.1:8080".into(),
        clients: 4,
        duration: Duration::from_secs(10),
        strategies: vec!["hipporag2".into()],
        questions: vec!["What is this index about?".into()],
        top_k: 5,
        answer: false,
        insert_every: None,
        key: None,
        indexes: Vec::new(),
        federate: false,
    };
    let mut json_out = None;
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--url" => plan.base = value().trim_end_matches('/').to_owned(),
            "--clients" => plan.clients = value().parse().expect("--clients N"),
            "--secs" => plan.duration = Duration::from_secs_f64(value().parse().expect("--secs S")),
            "--strategies" => plan.strategies = value().split(',').map(str::to_owned).collect(),
            "--questions" => {
                plan.questions = load::read_questions(std::path::Path::new(&value()))
                    .unwrap_or_else(|e| panic!("{e}"))
            }
            "--top-k" => plan.top_k = value().parse().expect("--top-k K"),
            "--answer" => plan.answer = true,
            "--insert-every" => {
                plan.insert_every = Some(Duration::from_secs_f64(
                    value().parse().expect("--insert-every S"),
                ))
            }
            "--key-env" => plan.key = std::env::var(value()).ok(),
            "--indexes" => plan.indexes = value().split(',').map(str::to_owned).collect(),
            "--federate" => plan.federate = true,
            "--json" => json_out = Some(value()),
            other => panic!("unknown argument {other}"),
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(load::run(&plan));
    println!(
        "{} clients, {:.1} s, answer {}: {}",
        plan.clients, report.secs, plan.answer, plan.base
    );
    print!("{}", report.table());
    for (name, t) in &report.tallies {
        for m in &t.messages {
            println!("error ({name}): {m}");
        }
    }
    if let Some(path) = json_out {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&report.to_json()).unwrap(),
        )
        .unwrap();
    }
    if report.errors() == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
