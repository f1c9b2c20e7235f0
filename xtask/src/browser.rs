//! The web page of `kgrag serve` in a real browser: Debian's Chromium (installed with apt-get when it is
//! missing), driven by Playwright for Python (pinned, in a venv under `target/browser/venv`, launched with
//! `executable_path`: no browser download), against `kgrag serve` over a small offline index of the
//! documents in `crates/server/tests/browser/corpus`, with an API key. Screenshots go to
//! `target/browser/shots`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::{fail, run_step, target_dir, workspace_root, TaskResult};

/// Playwright for Python, pinned.
const PLAYWRIGHT: &str = "playwright==1.58.0";

/// The key the page is given.
const KEY: &str = "browser-test-key";

/// A running `kgrag serve`, stopped with SIGTERM when dropped.
pub(crate) struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's Chromium: `KGRAG_CHROMIUM`, else `/usr/bin/chromium`, installed with apt-get when missing.
pub(crate) fn chromium() -> TaskResult<PathBuf> {
    if let Some(path) = std::env::var_os("KGRAG_CHROMIUM") {
        return Ok(PathBuf::from(path));
    }
    let path = PathBuf::from("/usr/bin/chromium");
    if path.is_file() {
        return Ok(path);
    }
    println!("xtask: installing Debian's chromium for the browser test (apt-get)");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let apt = |args: &[&str]| -> bool {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut c = Command::new("sudo");
            c.args(["-n", "apt-get"]);
            c
        };
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    let install = ["install", "-y", "-q", "--no-install-recommends", "chromium"];
    // A stale package list is the usual reason an install fails: update it once and retry.
    let installed = apt(&install) || (apt(&["update", "-q"]) && apt(&install));
    if !installed {
        return Err(fail(
            "the browser test needs Chromium and `apt-get install chromium` failed: install Debian's \
             chromium package, or set KGRAG_CHROMIUM to a Chromium binary",
        ));
    }
    if path.is_file() {
        Ok(path)
    } else {
        Err(fail(format!(
            "apt-get installed chromium but {} is missing",
            path.display()
        )))
    }
}

/// The venv's Python with Playwright importable (created and installed once).
pub(crate) fn playwright_python(python: &str) -> TaskResult<PathBuf> {
    pinned_venv(
        python,
        &target_dir().join("browser").join("venv"),
        PLAYWRIGHT,
    )
}

/// The Python of a venv in `venv` with `package` (`name==version`) installed: made with `python` and
/// pip when it is missing or holds another version.
pub(crate) fn pinned_venv(python: &str, venv: &Path, package: &str) -> TaskResult<PathBuf> {
    let py = venv.join("bin").join("python");
    let (name, version) = package.split_once("==").unwrap_or((package, ""));
    let check = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version('{name}') != '{version}')"
    );
    let ready = Command::new(&py)
        .args(["-c", &check])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ready {
        return Ok(py);
    }
    let _ = std::fs::remove_dir_all(venv);
    run_step(
        &format!("python venv for {name}"),
        Command::new(python).args(["-m", "venv"]).arg(venv),
    )?;
    run_step(
        &format!("pip install {package}"),
        crate::pip_install(&py).arg(package),
    )?;
    Ok(py)
}

/// Starts `kgrag serve` on a free port and returns it with its base URL (from the line it prints).
fn serve(kgrag: &Path, work: &Path) -> TaskResult<(Serve, String)> {
    start_serve(
        kgrag,
        work,
        &[
            "--index",
            "idx",
            "--index",
            "notes",
            "--config",
            "kgrag.toml",
            "--api-key-env",
            "KGRAG_BROWSER_KEY",
        ],
        &[("KGRAG_BROWSER_KEY", KEY)],
    )
}

/// Starts `kgrag serve ARGS` in `work` on a free loopback port, with `env`; returns it (stopped with
/// SIGTERM when dropped) with its base URL, read from the line it prints.
pub(crate) fn start_serve(
    kgrag: &Path,
    work: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> TaskResult<(Serve, String)> {
    let mut command = Command::new(kgrag);
    command
        .current_dir(work)
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"]);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("could not start {}: {e}", kgrag.display())))?;
    let stdout = child.stdout.take();
    let server = Serve(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        if let Some(out) = stdout {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(120))
        .map_err(|_| fail("kgrag serve printed no address within 120 s"))?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .map(|u| u.trim_end_matches('/').to_owned())
        .ok_or_else(|| fail(format!("kgrag serve printed no address: {line:?}")))?;
    Ok((server, url))
}

/// The stage: Chromium, Playwright, an index, the server, the page's test.
pub fn run(kgrag: &Path, python: &str) -> TaskResult {
    let chromium = chromium()?;
    let py = playwright_python(python)?;
    let source = workspace_root().join("crates/server/tests/browser");
    let work = target_dir().join("browser").join("work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)
        .map_err(|e| fail(format!("cannot create {}: {e}", work.display())))?;
    std::fs::copy(source.join("kgrag.toml"), work.join("kgrag.toml"))
        .map_err(|e| fail(format!("cannot copy the browser test's kgrag.toml: {e}")))?;
    // Absolute paths: `run_step` runs commands in the workspace's root.
    run_step(
        "kgrag index (the browser test's corpus)",
        Command::new(kgrag)
            .arg("index")
            .arg("--index")
            .arg(work.join("idx"))
            .arg("--config")
            .arg(work.join("kgrag.toml"))
            .arg("-q")
            .arg(source.join("corpus")),
    )?;
    // A second index: the page's picker switches to it.
    run_step(
        "kgrag index (the browser test's second corpus)",
        Command::new(kgrag)
            .arg("index")
            .arg("--index")
            .arg(work.join("notes"))
            .arg("--config")
            .arg(work.join("kgrag.toml"))
            .arg("-q")
            .arg(source.join("corpus-notes")),
    )?;
    let (server, url) = serve(kgrag, &work)?;
    let shots = target_dir().join("browser").join("shots");
    let result = run_step(
        "the page in Chromium (Playwright)",
        Command::new(&py)
            .arg(source.join("test_page.py"))
            .args(["--base-url", &url, "--api-key", KEY, "--chromium"])
            .arg(&chromium)
            .arg("--screenshots")
            .arg(&shots),
    );
    drop(server);
    if result.is_ok() {
        println!("xtask: screenshots in {}", shots.display());
    }
    result
}
