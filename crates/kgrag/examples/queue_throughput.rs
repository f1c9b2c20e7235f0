//! The distributed build's queue measured alone: `--jobs` jobs that do nothing, claimed in batches of
//! `--batch` and marked done by `--workers` workers (each with its own connection, as separate machines
//! would have), from one PostgreSQL database; prints the jobs claimed and finished per second as JSON.
//!
//! ```sh
//! KGRAG_DATABASE_URL=postgres://… cargo run --release -p kgrag --features postgres \
//!     --example queue_throughput -- --workers 8 --jobs 40000 --batch 32
//! ```
//! `cargo xtask distributed` runs it against a server of its own.

use std::time::{Duration, Instant};

use kgrag::config::{StorageBackend, StorageConfig};
use kgrag::distribute::DistributeOptions;
use kgrag::storage::postgres::PgQueue;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (workers, jobs, batch) = (
        arg("--workers", 8),
        arg("--jobs", 40_000),
        arg("--batch", 32),
    );
    let storage = StorageConfig {
        backend: StorageBackend::Postgres,
        schema: format!("queue_bench_{}", std::process::id()),
        ..StorageConfig::default()
    };
    let queue = PgQueue::open(&storage, DistributeOptions::default())?;
    let t = Instant::now();
    queue.queue_noops(jobs, "noop").await?;
    let queued_secs = t.elapsed().as_secs_f64();
    let lease = Duration::from_secs(60);
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let storage = storage.clone();
        tasks.push(tokio::spawn(async move {
            let queue = PgQueue::open(&storage, DistributeOptions::default())?;
            let id = format!("bench:{w}");
            let mut done = 0usize;
            loop {
                let claimed = queue.claim(&id, batch, lease).await?;
                if claimed.is_empty() {
                    return Ok::<usize, kgrag::KgragError>(done);
                }
                done += claimed.len();
                queue
                    .complete_many(&id, claimed.iter().map(|j| j.id).collect())
                    .await?;
            }
        }));
    }
    let mut done = 0;
    for t in tasks {
        done += t.await??;
    }
    let secs = t.elapsed().as_secs_f64();
    let status = queue.status().await?;
    println!(
        "{}",
        serde_json::json!({
            "workers": workers,
            "jobs": jobs,
            "batch": batch,
            "queued_secs": queued_secs,
            "claimed": done,
            "secs": secs,
            "jobs_per_s": done as f64 / secs,
            "open_after": status.open,
        })
    );
    Ok(())
}
