//! A bounded load test on loopback: 16 clients for 30 s (`KGRAG_LOAD_SECS`), every strategy in turn,
//! one document added every 5 s — no request may fail, and every answer comes from a committed
//! generation. Figures are printed, not asserted (the machine's speed is not the server's).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "../examples/support/load.rs"]
#[allow(dead_code)]
mod load;

use std::time::Duration;

use common::Running;
use kgrag_server::ServeOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_and_a_writer_for_thirty_seconds_without_an_error() {
    let secs: f64 = std::env::var("KGRAG_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30.0);
    let s = Running::start(ServeOptions::default()).await;
    let plan = load::LoadPlan {
        base: s.base.clone(),
        clients: 16,
        duration: Duration::from_secs_f64(secs),
        strategies: [
            "hipporag2",
            "dense",
            "hirag",
            "hirag-local",
            "hirag-global",
            "hirag-bridge",
            "leanrag",
        ]
        .map(str::to_owned)
        .to_vec(),
        questions: [
            "Which river flows through the capital of Poland?",
            "Who married Marie Curie?",
            "Where did Marie Curie teach?",
            "What stands in Krakow?",
            "Which lighthouse was repainted in spring?",
        ]
        .map(str::to_owned)
        .to_vec(),
        top_k: 3,
        answer: true,
        insert_every: Some(Duration::from_secs(5)),
        key: None,
        indexes: Vec::new(),
        federate: false,
    };
    let report = load::run(&plan).await;
    println!("{}", report.table());
    for (name, t) in &report.tallies {
        assert_eq!(t.errors, 0, "{name}: {:?}", t.messages);
    }
    let inserts = &report.tallies["insert"];
    let expected = (secs / 5.0).floor() as usize;
    assert!(
        inserts.ok + 1 >= expected,
        "{} inserts in {secs} s",
        inserts.ok
    );
    let committed = 1 + inserts.ok as u64;
    for (name, t) in &report.tallies {
        if name != "insert" {
            assert!(t.ok > 0, "{name} answered nothing");
            assert!(
                t.generations.iter().all(|g| (1..=committed).contains(g)),
                "{name}"
            );
        }
    }
    let (_, v) = s.get("/health").await;
    assert_eq!(v["generation"].as_u64(), Some(committed));
    s.stop().await;
}
