//! `cargo xtask distributed`: the build split across machines, measured on this one (a release `kgrag`
//! with PostgreSQL, a server of its own under target/distributed):
//!
//! - an LLM-bound build — synthetic passages, HippoRAG 2's OpenIE by a scripted OpenAI-compatible server
//!   answering after a fixed latency — by one process, then by a coordinator and 1, 2, 4, 8 workers, each
//!   worker with the same requests in flight as the one process: wall times and speed-ups;
//! - musique-100 offline (local MiniLM, rule extraction, every method) by one process, then by a
//!   coordinator and 2 workers on the same two cores: the queue's overhead;
//! - the queue alone: jobs that do nothing claimed in batches by 8 workers (`queue_throughput`).
//!
//! Prints a table and writes target/distributed/report.json (docs/distributed.md quotes it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fake_llm::{self, FakeLlm};
use crate::pg;
use crate::{cargo_command, fail, run_step, target_dir, TaskResult};

/// The options of `cargo xtask distributed`.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Worker counts of the LLM-bound build.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    workers: Vec<usize>,
    /// Passages of the LLM-bound build (two model requests each).
    #[arg(long, default_value_t = 400)]
    passages: usize,
    /// The scripted model's latency in milliseconds.
    #[arg(long, default_value_t = 200)]
    latency_ms: u64,
    /// Requests in flight per worker (and for the one process).
    #[arg(long, default_value_t = 4)]
    concurrency: u32,
    /// Leave out musique-100 (it needs the dataset under KGRAG_DATA_DIR).
    #[arg(long)]
    no_musique: bool,
    /// Jobs of the queue's own measurement.
    #[arg(long, default_value_t = 40_000)]
    queue_jobs: usize,
}

const URL_ENV: &str = "KGRAG_DATABASE_URL";

fn kgrag(bin: &Path, dir: &Path, url: &str, assets: &Path) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(dir)
        .env(URL_ENV, url)
        .env("KGRAG_ASSETS", assets)
        .stdin(Stdio::null());
    c
}

fn spawn(c: &mut Command, log: &Path) -> TaskResult<Child> {
    let f = std::fs::File::create(log).map_err(|e| fail(format!("{}: {e}", log.display())))?;
    let g = f
        .try_clone()
        .map_err(|e| fail(format!("{}: {e}", log.display())))?;
    c.stdout(f)
        .stderr(g)
        .spawn()
        .map_err(|e| fail(format!("cannot start kgrag: {e}")))
}

/// Waits for `child`; fails naming `log` when it fails.
fn finish(mut child: Child, what: &str, log: &Path) -> TaskResult {
    let status = child.wait().map_err(|e| fail(format!("{what}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        Err(fail(format!(
            "{what} failed ({status}); the end of {}:\n{}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )))
    }
}

/// One build: `workers` workers (none: one process) and the coordinator; the coordinator's wall time.
#[allow(clippy::too_many_arguments)]
fn build(
    bin: &Path,
    dir: &Path,
    url: &str,
    assets: &Path,
    corpus: &Path,
    config: &Path,
    name: &str,
    workers: Option<(usize, u32)>,
) -> TaskResult<f64> {
    let mut spawned = Vec::new();
    if let Some((n, concurrency)) = workers {
        for i in 0..n {
            let log = dir.join(format!("{name}-worker{i}.log"));
            let child = spawn(
                kgrag(bin, dir, url, assets).args([
                    "worker",
                    "--config",
                    &config.display().to_string(),
                    "--concurrency",
                    &concurrency.to_string(),
                    "--linger-secs",
                    "3",
                ]),
                &log,
            )?;
            spawned.push((child, log));
        }
    }
    let log = dir.join(format!("{name}.log"));
    let mut c = kgrag(bin, dir, url, assets);
    c.args(["index"])
        .arg(corpus)
        .args(["--index", name, "--config"])
        .arg(config);
    if workers.is_some() {
        c.arg("--distribute");
    }
    let t = Instant::now();
    let child = spawn(&mut c, &log)?;
    finish(child, &format!("the build {name}"), &log)?;
    let secs = t.elapsed().as_secs_f64();
    for (child, log) in spawned {
        finish(child, "a worker", &log)?;
    }
    Ok(secs)
}

pub fn run(o: &Options, assets: &Path, data: &Path) -> TaskResult {
    // One invocation: the binary and the example resolve the same features, so nothing builds twice.
    run_step(
        "cargo build --release -p kgrag-cli -p kgrag --features postgres --bin kgrag --example queue_throughput",
        cargo_command().args([
            "build",
            "--release",
            "-p",
            "kgrag-cli",
            "-p",
            "kgrag",
            "--features",
            "kgrag-cli/postgres,kgrag/postgres",
            "--bin",
            "kgrag",
            "--example",
            "queue_throughput",
        ]),
    )?;
    let release = target_dir().join("release");
    let bin = release.join("kgrag");
    let root = target_dir().join("distributed");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).map_err(|e| fail(format!("{}: {e}", root.display())))?;
    let launcher = pg::Launcher {
        bin: crate::postgres::binaries(assets)?,
        runner: pg::Runner::detect(),
    };
    let server = pg::Server::start(launcher, &root.join("data"))
        .map_err(|e| fail(format!("could not start PostgreSQL: {e}")))?;
    let url = server.url("kgrag");
    let mut report = serde_json::Map::new();

    // The LLM-bound build.
    let llm = FakeLlm::start(Duration::from_millis(o.latency_ms))
        .map_err(|e| fail(format!("could not start the scripted model server: {e}")))?;
    let dir = root.join("llm");
    std::fs::create_dir_all(&dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    let corpus = dir.join("corpus.jsonl");
    std::fs::write(&corpus, fake_llm::corpus(o.passages, None))
        .map_err(|e| fail(format!("{}: {e}", corpus.display())))?;
    let config = |schema: &str| -> TaskResult<PathBuf> {
        let path = dir.join(format!("{schema}.toml"));
        let text = format!(
            "openie = \"llm\"\nreader = \"none\"\n[index]\nmethods = [\"dense\", \"hipporag2\"]\n\
             [embedder]\nprovider = \"hashing\"\ndim = 64\n\
             [chat]\nprovider = \"openai\"\nbase_url = {:?}\nmodel = \"scripted\"\n\
             [chat.limits]\nconcurrency = {}\n\
             [storage]\nbackend = \"postgres\"\nschema = {schema:?}\n",
            llm.base_url, o.concurrency
        );
        std::fs::write(&path, text).map_err(|e| fail(format!("{}: {e}", path.display())))?;
        Ok(path)
    };
    println!(
        "xtask: an LLM-bound build of {} passages ({} ms a request, {} in flight per process)",
        o.passages, o.latency_ms, o.concurrency
    );
    let one = build(
        &bin,
        &dir,
        &url,
        assets,
        &corpus,
        &config("llm_one")?,
        "llm_one",
        None,
    )?;
    let requests = llm.requests();
    println!("  one process: {one:.1} s ({requests} requests)");
    let mut rows = vec![serde_json::json!({"workers": 0, "secs": one, "requests": requests})];
    let mut base = None;
    for &n in &o.workers {
        llm.reset();
        let name = format!("llm_w{n}");
        let secs = build(
            &bin,
            &dir,
            &url,
            assets,
            &corpus,
            &config(&name)?,
            &name,
            Some((n, o.concurrency)),
        )?;
        let base = *base.get_or_insert(secs * n as f64);
        let speedup = base / secs;
        println!(
            "  {n} workers: {secs:.1} s, {speedup:.2}× one worker ({:.0} % of {n}×; {} requests)",
            100.0 * speedup / n as f64,
            llm.requests()
        );
        rows.push(serde_json::json!({
            "workers": n, "secs": secs, "speedup": speedup,
            "efficiency": speedup / n as f64, "requests": llm.requests(),
        }));
    }
    report.insert(
        "llm_bound".into(),
        serde_json::json!({
            "passages": o.passages, "latency_ms": o.latency_ms, "concurrency": o.concurrency,
            "runs": rows,
        }),
    );
    drop(llm);

    // musique-100 offline.
    let musique = data.join("musique-hipporag/musique_train_corpus.json");
    if !o.no_musique && musique.is_file() {
        let dir = root.join("musique");
        std::fs::create_dir_all(&dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
        let config = |schema: &str| -> TaskResult<PathBuf> {
            let path = dir.join(format!("{schema}.toml"));
            let text = format!("[storage]\nbackend = \"postgres\"\nschema = {schema:?}\n");
            std::fs::write(&path, text).map_err(|e| fail(format!("{}: {e}", path.display())))?;
            Ok(path)
        };
        println!("xtask: musique-100 (1,890 passages) offline, every method");
        let one = build(
            &bin,
            &dir,
            &url,
            assets,
            &musique,
            &config("mus_one")?,
            "mus_one",
            None,
        )?;
        println!("  one process: {one:.1} s");
        let two = build(
            &bin,
            &dir,
            &url,
            assets,
            &musique,
            &config("mus_two")?,
            "mus_two",
            Some((2, 1)),
        )?;
        println!(
            "  a coordinator and 2 workers: {two:.1} s ({:+.1} %)",
            100.0 * (two / one - 1.0)
        );
        report.insert(
            "musique_offline".into(),
            serde_json::json!({"one_process_secs": one, "coordinator_and_two_workers_secs": two,
                               "overhead": two / one - 1.0}),
        );
    } else {
        println!("xtask: musique-100 left out (not under {})", data.display());
    }

    // The queue alone.
    let out = Command::new(release.join("examples/queue_throughput"))
        .env(URL_ENV, &url)
        .args([
            "--workers",
            "8",
            "--jobs",
            &o.queue_jobs.to_string(),
            "--batch",
            "32",
        ])
        .output()
        .map_err(|e| fail(format!("cannot run queue_throughput: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "queue_throughput failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let q: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| fail(format!("queue_throughput printed no JSON: {e}")))?;
    println!(
        "xtask: the queue alone: {} jobs claimed and finished by 8 workers in batches of 32: {:.0} jobs/s",
        q["claimed"], q["jobs_per_s"].as_f64().unwrap_or(0.0)
    );
    report.insert("queue".into(), q);
    let path = root.join("report.json");
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(report))
        .map_err(|e| fail(e.to_string()))?;
    std::fs::write(&path, text).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    println!("xtask: wrote {}", path.display());
    drop(server);
    Ok(())
}
