//! Times an index as its backend serves it: open (manifest and passages), each strategy's first use (its
//! method index loaded: for HippoRAG 2 with PostgreSQL, the graph from the edge table), and retrieval over
//! a dataset's questions (p50/p95); with `--against`, the overlap of the first strategy's top 10 with
//! another index's (pgvector's HNSW search against the exact one: recall@10 of the passage vectors).
//!
//! ```sh
//! cargo run --release -p kgrag --features postgres --example backend_timing -- \
//!     INDEX_DIR musique-100 [--strategies dense,hipporag2] [--against OTHER_INDEX_DIR] [--rounds 3]
//! ```
//!
//! The dataset is read from `KGRAG_DATA_DIR`; a PostgreSQL index needs its URL in the variable its
//! `storage.json` names. Prints one JSON object.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use kgrag::types::RetrievalRequest;
use kgrag::Index;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(index), Some(dataset)) = (args.first(), args.get(1)) else {
        return Err("usage: backend_timing INDEX_DIR DATASET [--strategies a,b] [--against DIR] [--rounds N]".into());
    };
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let strategies: Vec<String> = option("--strategies")
        .unwrap_or_else(|| "dense,hipporag2".to_owned())
        .split(',')
        .map(str::to_owned)
        .collect();
    let rounds: usize = option("--rounds").and_then(|r| r.parse().ok()).unwrap_or(3);
    let questions: Vec<String> = kgrag::eval::load(dataset, &kgrag::eval::data_dir())?
        .questions
        .into_iter()
        .map(|q| q.question)
        .collect();

    let t = Instant::now();
    let p = Index::open(&PathBuf::from(index))?.reader()?.searcher();
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut report = serde_json::json!({
        "index": index,
        "storage": p.stats()?["storage"],
        "open_ms": open_ms,
        "questions": questions.len(),
    });
    let mut first_top: Vec<Vec<String>> = Vec::new();
    for (si, strategy) in strategies.iter().enumerate() {
        let t = Instant::now();
        let retriever = p.retriever(strategy)?;
        let load_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut ms = Vec::new();
        for round in 0..rounds {
            for q in &questions {
                let t = Instant::now();
                let ctx = retriever
                    .retrieve(&RetrievalRequest {
                        query: q.clone(),
                        top_k: 10,
                    })
                    .await?;
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                if si == 0 && round == 0 {
                    first_top.push(
                        ctx.passages
                            .iter()
                            .map(|s| s.chunk_id.as_str().to_owned())
                            .collect(),
                    );
                }
            }
        }
        ms.sort_by(f64::total_cmp);
        report[strategy.as_str()] = serde_json::json!({
            "load_ms": load_ms,
            "retrieve_p50_ms": percentile(&ms, 0.5),
            "retrieve_p95_ms": percentile(&ms, 0.95),
            "queries": ms.len(),
        });
    }
    if let Some(other) = option("--against") {
        let o = Index::open(&PathBuf::from(&other))?.reader()?.searcher();
        let retriever = o.retriever(&strategies[0])?;
        let mut overlap = 0.0;
        let mut identical = 0;
        for (q, mine) in questions.iter().zip(&first_top) {
            let theirs: Vec<String> = retriever
                .retrieve(&RetrievalRequest {
                    query: q.clone(),
                    top_k: 10,
                })
                .await?
                .passages
                .iter()
                .map(|s| s.chunk_id.as_str().to_owned())
                .collect();
            let a: BTreeSet<&String> = mine.iter().collect();
            let b: BTreeSet<&String> = theirs.iter().collect();
            overlap += a.intersection(&b).count() as f64 / b.len().max(1) as f64;
            identical += usize::from(*mine == theirs);
        }
        report["against"] = serde_json::json!({
            "index": other,
            "strategy": strategies[0],
            "recall_at_10": overlap / questions.len().max(1) as f64,
            "identical_rankings": identical,
        });
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
