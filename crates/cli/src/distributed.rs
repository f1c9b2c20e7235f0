//! `kgrag worker` and `kgrag queue`: the machines that share a build through PostgreSQL (see
//! `docs/distributed.md`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::{config_arg, CliError};

/// What `kgrag worker` was asked.
#[derive(Args)]
pub(crate) struct WorkerArgs {
    /// Configuration file (TOML): the models and the database ([storage] backend = "postgres"); default
    /// ./kgrag.toml. It must name the coordinator's models.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Jobs done at once (model calls in flight).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) concurrency: u32,
    /// The lease on a job in seconds, renewed while it runs; a worker that dies gives its jobs back when
    /// it runs out.
    #[arg(long, default_value_t = 60.0)]
    pub(crate) lease_secs: f64,
    /// How long to wait for work, while no coordinator runs and the queue is empty, before exiting.
    #[arg(long, default_value_t = 60.0)]
    pub(crate) linger_secs: f64,
    /// The folder of this worker's response cache (default: one of its own, removed at exit).
    #[arg(long)]
    pub(crate) cache: Option<PathBuf>,
}

/// What `kgrag queue` does.
#[derive(Subcommand)]
pub(crate) enum QueueAction {
    /// The jobs by kind and state, the workers alive, the rate and the time left, the failed jobs.
    Status(QueueArgs),
    /// Put the jobs that failed on every attempt back in the queue.
    RetryFailed(QueueArgs),
}

/// Where the queue is.
#[derive(Args)]
pub(crate) struct QueueArgs {
    /// The index directory (its storage.json names the database).
    #[arg(long, conflicts_with = "config")]
    pub(crate) index: Option<PathBuf>,
    /// Configuration file naming the database ([storage]); default ./kgrag.toml.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `[storage]` of the database the arguments name.
fn storage(
    index: Option<&std::path::Path>,
    config: Option<&std::path::Path>,
) -> kgrag::Result<kgrag::config::StorageConfig> {
    if let Some(dir) = index {
        let p = kgrag::storage::read_pointer(dir)?.ok_or_else(|| {
            kgrag::KgragError::Config(format!(
                "{} has no storage.json: it is not an index in PostgreSQL",
                dir.display()
            ))
        })?;
        return Ok(kgrag::config::StorageConfig {
            backend: p.backend,
            url_env: p.url_env,
            schema: p.schema,
            ..Default::default()
        });
    }
    let c = config_arg(config)?.unwrap_or_default();
    if c.storage.backend != kgrag::config::StorageBackend::Postgres {
        return Err(kgrag::KgragError::Config(
            "the queue is in PostgreSQL: give --index DIR of an index there, or a configuration with \
             [storage] backend = \"postgres\""
                .into(),
        ));
    }
    Ok(c.storage)
}

#[cfg(feature = "postgres")]
pub(crate) async fn run_worker(args: WorkerArgs, quiet: bool) -> Result<(), CliError> {
    use kgrag::distribute::worker::{Worker, WorkerOptions};
    let config = config_arg(args.config.as_deref())?.unwrap_or_default();
    if config.storage.backend != kgrag::config::StorageBackend::Postgres {
        return Err(kgrag::KgragError::Config(
            "kgrag worker takes jobs from an index in PostgreSQL: its configuration needs [storage] \
             backend = \"postgres\" (and the coordinator's schema and models)"
                .into(),
        )
        .into());
    }
    let (cache, own) = match &args.cache {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("kgrag-worker-{}", std::process::id())),
            true,
        ),
    };
    let seconds = |s: f64, least: f64, what: &str| {
        std::time::Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| d.as_secs_f64() >= least && d.as_secs() <= 86_400 * 7)
            .ok_or_else(|| {
                kgrag::KgragError::Config(format!(
                    "--{what} must be between {least} seconds and a week, not {s}"
                ))
            })
    };
    let options = WorkerOptions {
        concurrency: args.concurrency as usize,
        lease: seconds(args.lease_secs, 1.0, "lease-secs")?,
        linger: seconds(args.linger_secs, 0.0, "linger-secs")?,
        ..WorkerOptions::default()
    };
    let index = kgrag::Index::options()
        .config(config)
        .cache_dir(&cache)
        .progress(false)
        .in_memory()?;
    let worker = Worker::new(&index, options)?;
    let id = worker.id().to_owned();
    let stop = async {
        kgrag_server::shutdown_signal().await;
        eprintln!("kgrag worker: stopping after the jobs in hand (a second Ctrl-C stops at once)");
        tokio::spawn(async {
            kgrag_server::shutdown_signal().await;
            std::process::exit(130);
        });
    };
    let result = worker.run(stop).await;
    drop(index);
    if own {
        let _ = std::fs::remove_dir_all(&cache);
    }
    let report = result?;
    if !quiet {
        let done: Vec<String> = report
            .done
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        println!(
            "worker {id}: done ({} jobs: {}; {} failed attempts)",
            report.done.values().sum::<u64>(),
            if done.is_empty() {
                "none".into()
            } else {
                done.join(", ")
            },
            report.failed
        );
    }
    Ok(())
}

#[cfg(feature = "postgres")]
pub(crate) async fn run_queue(action: QueueAction) -> Result<(), CliError> {
    use kgrag::distribute::DistributeOptions;
    use kgrag::storage::postgres::PgQueue;
    match action {
        QueueAction::Status(a) => {
            let q = PgQueue::open(
                &storage(a.index.as_deref(), a.config.as_deref())?,
                DistributeOptions::default(),
            )?;
            let st = q.status().await?;
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&st).map_err(kgrag::KgragError::from)?
                );
            } else {
                println!("{st}");
            }
        }
        QueueAction::RetryFailed(a) => {
            let q = PgQueue::open(
                &storage(a.index.as_deref(), a.config.as_deref())?,
                DistributeOptions::default(),
            )?;
            let n = q.retry_failed().await?;
            println!("{n} failed jobs queued again");
        }
    }
    Ok(())
}

#[cfg(not(feature = "postgres"))]
fn no_postgres() -> CliError {
    kgrag::KgragError::Config(
        "the queue of a distributed build is in PostgreSQL: this kgrag was built without the `postgres` \
         feature (cargo install … --features postgres)"
            .into(),
    )
    .into()
}

#[cfg(not(feature = "postgres"))]
pub(crate) async fn run_worker(_args: WorkerArgs, _quiet: bool) -> Result<(), CliError> {
    Err(no_postgres())
}

#[cfg(not(feature = "postgres"))]
pub(crate) async fn run_queue(action: QueueAction) -> Result<(), CliError> {
    let (QueueAction::Status(a) | QueueAction::RetryFailed(a)) = action;
    storage(a.index.as_deref(), a.config.as_deref())?;
    Err(no_postgres())
}
