//! A build split across machines: `kgrag index --distribute` and `kgrag worker` processes sharing a
//! PostgreSQL server of the test's own (from the binaries `cargo xtask test` names in `KGRAG_TEST_PG_BIN`)
//! and a scripted OpenAI-compatible chat server with a fixed latency, so that the work is really shared:
//!
//! - three workers and a coordinator build what one process builds (every strategy's rankings on fixed
//!   questions, every method's files byte for byte), with one worker and then the coordinator killed by
//!   SIGKILL midway: every request to the model is made once, except the jobs the killed worker held;
//! - a job that always fails is parked after its attempts, the commit is refused, `kgrag queue status`
//!   names it, `retry-failed` queues it again, and `--allow-failed` commits without it; PostgreSQL
//!   restarted while the workers work is survived by every process.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::tmp;

use crate::postgres::{have_server, server};

#[path = "../../../../xtask/src/fake_llm.rs"]
mod fake_llm;

/// The variable naming the database in these tests' configurations (only they set it).
const URL_ENV: &str = "KGRAG_DIST_TEST_URL";

fn config(llm: &str, schema: &str, methods: &[&str]) -> String {
    format!(
        "openie = \"llm\"\nreader = \"none\"\n\
         [index]\nmethods = {methods:?}\n\
         [embedder]\nprovider = \"hashing\"\ndim = 64\n\
         [chat]\nprovider = \"openai\"\nbase_url = {llm:?}\nmodel = \"scripted\"\n\
         [chat.limits]\nmax_attempts = 1\nrequest_timeout_secs = 30.0\n\
         [storage]\nbackend = \"postgres\"\nurl_env = \"{URL_ENV}\"\nschema = {schema:?}\n"
    )
}

fn kgrag(work: &Path, url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kgrag"));
    c.current_dir(work).env(URL_ENV, url).stdin(Stdio::null());
    c
}

fn run(c: &mut Command) -> (bool, String) {
    let out = c.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A background `kgrag` writing its output to `log`.
fn spawn(c: &mut Command, log: &Path) -> Child {
    let f = std::fs::File::create(log).unwrap();
    c.stdout(f.try_clone().unwrap()).stderr(f).spawn().unwrap()
}

fn worker(work: &Path, url: &str, n: usize, concurrency: u32) -> Child {
    spawn(
        kgrag(work, url).args([
            "worker",
            "--config",
            "dist.toml",
            "--concurrency",
            &concurrency.to_string(),
            "--lease-secs",
            "2",
            "--linger-secs",
            "4",
        ]),
        &work.join(format!("worker{n}.log")),
    )
}

fn log(work: &Path, name: &str) -> String {
    std::fs::read_to_string(work.join(name)).unwrap_or_default()
}

/// Waits for `child` (at most `secs`); its success.
fn wait(child: &mut Child, secs: u64, what: &str, work: &Path, logname: &str) -> bool {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.success();
        }
        if t.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            panic!("{what} did not finish in {secs} s:\n{}", log(work, logname));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_until(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(secs), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every strategy's top 10 for fixed questions, and every method file's checksum, of the index in `dir`.
type Rankings = Vec<(String, Vec<String>)>;

fn fingerprint(dir: &Path) -> (Rankings, Vec<(String, String)>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut p = kgrag::Pipeline::open(dir, None, false).unwrap();
    let manifest = p.manifest().unwrap().clone();
    std::fs::write(
        dir.with_extension("stats.json"),
        serde_json::to_string_pretty(&p.stats().unwrap()).unwrap(),
    )
    .unwrap();
    let mut files: Vec<(String, String)> = manifest
        .methods
        .iter()
        .flat_map(|(m, e)| {
            e.files.iter().map(move |f| {
                let name = f.path.rsplit('/').next().unwrap().to_owned();
                (format!("{m}/{name}"), f.sha256.clone())
            })
        })
        .collect();
    files.sort();
    let mut ranks = Vec::new();
    for strategy in kgrag::methods::strategies() {
        let method = kgrag::methods::method_of(strategy).unwrap();
        if !manifest.methods.contains_key(method.name()) {
            continue;
        }
        let r = p.retriever(strategy).unwrap();
        for q in [
            "Who founded Halcyon Works?",
            "Where did Greta Lund meet Jonas Weber?",
            "Which firm moved to Port Amund?",
        ] {
            let ctx = rt
                .block_on(r.retrieve(&kgrag::types::RetrievalRequest {
                    query: q.into(),
                    top_k: 10,
                }))
                .unwrap();
            ranks.push((
                format!("{strategy}: {q}"),
                ctx.passages
                    .iter()
                    .map(|s| s.chunk_id.as_str().to_owned())
                    .collect(),
            ));
        }
    }
    (ranks, files)
}

#[test]
fn three_workers_and_a_coordinator_build_what_one_process_builds_though_two_are_killed() {
    if !have_server("three_workers") {
        return;
    }
    let work = tmp("dist-three");
    let db = server(&work);
    let url = db.url("dist-secret-3a9e");
    // The database of the in-process reads below (only these tests name this variable).
    std::env::set_var(URL_ENV, &url);
    let llm = fake_llm::FakeLlm::start(Duration::from_millis(20)).unwrap();
    let methods = ["dense", "hipporag2", "hirag", "leanrag"];
    std::fs::write(work.join("corpus.jsonl"), fake_llm::corpus(200, None)).unwrap();
    std::fs::write(
        work.join("ref.toml"),
        config(&llm.base_url, "one", &methods),
    )
    .unwrap();
    std::fs::write(
        work.join("dist.toml"),
        config(&llm.base_url, "many", &methods),
    )
    .unwrap();

    // One process.
    let (ok, text) = run(kgrag(&work, &url).args([
        "index",
        "corpus.jsonl",
        "--index",
        "one",
        "--config",
        "ref.toml",
    ]));
    assert!(ok, "{text}");
    let by_one = llm.counts();
    llm.reset();

    // A coordinator and three workers; one worker is killed while it holds jobs, then the coordinator.
    let mut workers: Vec<Child> = (0..3).map(|i| worker(&work, &url, i, 4)).collect();
    let coordinate = |log: &str| {
        spawn(
            kgrag(&work, &url).args([
                "index",
                "corpus.jsonl",
                "--index",
                "many",
                "--config",
                "dist.toml",
                "--distribute",
            ]),
            &work.join(log),
        )
    };
    let mut coordinator = coordinate("coordinator1.log");
    wait_until("a third of the extraction asked", 120, || {
        llm.requests() >= 130
    });
    workers[0].kill().unwrap();
    let _ = workers[0].wait();
    wait_until("two thirds of the extraction asked", 120, || {
        llm.requests() >= 260
    });
    coordinator.kill().unwrap();
    let _ = coordinator.wait();
    let mut coordinator = coordinate("coordinator2.log");
    assert!(
        wait(
            &mut coordinator,
            600,
            "the second coordinator",
            &work,
            "coordinator2.log"
        ),
        "the second coordinator failed:\n{}",
        log(&work, "coordinator2.log")
    );
    for (i, w) in workers.iter_mut().enumerate().skip(1) {
        let name = format!("worker{i}.log");
        assert!(
            wait(w, 60, "a worker", &work, &name),
            "{}",
            log(&work, &name)
        );
        assert!(
            log(&work, &name).contains("done ("),
            "{}",
            log(&work, &name)
        );
    }

    // Every request one process made was made, each as often, but for what the killed worker held when
    // it died (4 jobs, 2 requests each).
    let by_many = llm.counts();
    let mut again = 0;
    for (k, n) in &by_one {
        let m = by_many.get(k).copied().unwrap_or(0);
        assert!(
            m >= *n,
            "a request one process made {n} times was made {m} times"
        );
        again += m - n;
    }
    assert_eq!(by_one.len(), by_many.len(), "other requests were made");
    assert!(again <= 8, "{again} requests were made again");
    // The same index as one process built.
    let (one_ranks, one_files) = fingerprint(&work.join("one"));
    let (many_ranks, many_files) = fingerprint(&work.join("many"));
    assert_eq!(one_ranks.len(), many_ranks.len());
    for (a, b) in one_ranks.iter().zip(&many_ranks) {
        assert_eq!(a, b);
    }
    assert_eq!(one_files, many_files, "the method files differ");
    // The coordinator itself asked the model nothing, and says what the workers did.
    let said = log(&work, "coordinator2.log");
    assert!(said.contains("indexed 200 documents"), "{said}");
    // The queue is empty once committed.
    let (ok, status) = run(kgrag(&work, &url).args(["queue", "status", "--index", "many"]));
    assert!(ok, "{status}");
    assert!(status.contains("queue: empty"), "{status}");
    drop(db);
    if std::env::var_os("KGRAG_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
}

#[test]
fn a_poison_job_is_parked_and_refused_until_allowed_and_a_postgres_restart_is_survived() {
    if !have_server("a_poison_job") {
        return;
    }
    let work = tmp("dist-poison");
    let mut db = server(&work);
    let url = db.url("dist-secret-77c1");
    let llm = fake_llm::FakeLlm::start(Duration::from_millis(30)).unwrap();
    std::fs::write(work.join("corpus.jsonl"), fake_llm::corpus(80, Some(17))).unwrap();
    std::fs::write(
        work.join("dist.toml"),
        config(&llm.base_url, "poison", &["dense", "hipporag2"]),
    )
    .unwrap();
    let mut workers: Vec<Child> = (0..2).map(|i| worker(&work, &url, i, 3)).collect();
    let mut coordinator = spawn(
        kgrag(&work, &url).args([
            "index",
            "corpus.jsonl",
            "--index",
            "idx",
            "--config",
            "dist.toml",
            "--distribute",
            "--max-attempts",
            "2",
        ]),
        &work.join("coordinator1.log"),
    );
    // PostgreSQL goes away while the workers work, and comes back.
    wait_until("some extraction asked", 120, || llm.requests() >= 40);
    db.kill();
    std::thread::sleep(Duration::from_millis(1500));
    db.restart().unwrap();
    assert!(
        !wait(
            &mut coordinator,
            300,
            "the coordinator",
            &work,
            "coordinator1.log"
        ),
        "the build committed with a failed job:\n{}",
        log(&work, "coordinator1.log")
    );
    let said = log(&work, "coordinator1.log");
    assert!(said.contains("failed on every attempt"), "{said}");
    assert!(said.contains("scripted failure"), "{said}");
    assert!(!said.contains("dist-secret-77c1"), "{said}");
    // The poison chunk is named; everything else was done, once.
    let (ok, status) = run(kgrag(&work, &url).args(["queue", "status", "--config", "dist.toml"]));
    assert!(ok, "{status}");
    assert!(status.contains("1 failed"), "{status}");
    assert!(status.contains("scripted failure"), "{status}");
    let counts = llm.counts();
    assert!(
        counts.values().filter(|n| **n > 1).count() <= 1 + 6,
        "requests asked again: {counts:?}"
    );
    for (i, w) in workers.iter_mut().enumerate() {
        let name = format!("worker{i}.log");
        assert!(
            wait(w, 60, "a worker", &work, &name),
            "{}",
            log(&work, &name)
        );
    }
    // Queued again, it fails again; --allow-failed commits without it and names it.
    let (ok, text) =
        run(kgrag(&work, &url).args(["queue", "retry-failed", "--config", "dist.toml"]));
    assert!(ok && text.contains("1 failed jobs queued again"), "{text}");
    let mut w = worker(&work, &url, 9, 2);
    let (ok, text) = run(kgrag(&work, &url).args([
        "index",
        "corpus.jsonl",
        "--index",
        "idx",
        "--config",
        "dist.toml",
        "--distribute",
        "--allow-failed",
        "--max-attempts",
        "2",
    ]));
    assert!(ok, "{text}");
    assert!(text.contains("committing without 1 failed jobs"), "{text}");
    assert!(text.contains("indexed 80 documents"), "{text}");
    assert!(wait(&mut w, 60, "the last worker", &work, "worker9.log"));
    drop(db);
    let _ = std::fs::remove_dir_all(&work);
}
