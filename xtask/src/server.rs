//! The real local model server for the tests: llama.cpp's own HTTP server from the `xllamacpp` wheel,
//! installed into a venv in the asset folder, serving SmolLM2 on a free 127.0.0.1 port.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{fail, workspace_root, TaskResult};

const WHEEL: &str =
    "xllamacpp-2026.10.11549-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";

/// A running server; killed (by pid) when dropped, so a failing test run still stops it.
pub struct LlamaServer {
    child: Child,
    /// Base URL of the OpenAI-compatible API, e.g. `http://127.0.0.1:PORT/v1`.
    pub url: String,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        println!(
            "xtask: stopped the llama.cpp server (pid {})",
            self.child.id()
        );
    }
}

fn venv_python(assets: &Path) -> PathBuf {
    assets.join("venv-xllamacpp/bin/python")
}

/// Creates the venv and installs the wheel from the asset folder, unless that is done already.
fn ensure_venv(assets: &Path, python: &str) -> TaskResult<PathBuf> {
    let py = venv_python(assets);
    let ready = Command::new(&py)
        .args(["-c", "import xllamacpp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if ready {
        return Ok(py);
    }
    println!(
        "xtask: installing xllamacpp into {}",
        assets.join("venv-xllamacpp").display()
    );
    let venv = assets.join("venv-xllamacpp");
    let _ = fs::remove_dir_all(&venv);
    let out = Command::new(python)
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .map_err(|e| fail(format!("could not run {python} -m venv: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "{python} -m venv failed (Debian: apt-get install python3-venv): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let out = crate::pip_install(&py)
        .args(["--no-index", "--no-deps"])
        .arg(assets.join("wheels").join(WHEEL))
        .output()
        .map_err(|e| fail(format!("could not run pip in the venv: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "installing the xllamacpp wheel failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(py)
}

fn free_port() -> TaskResult<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| fail(format!("cannot find a free port on 127.0.0.1: {e}")))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| fail(format!("cannot read the port: {e}")))
}

fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(1),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.contains("\"status\":\"ok\"")
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n  ")
}

/// Starts the server with SmolLM2 and waits until `/health` answers ok (at most 120 s).
pub fn start(assets: &Path, python: &str) -> TaskResult<LlamaServer> {
    let py = ensure_venv(assets, python)?;
    let gguf = assets.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    let port = free_port()?;
    let log_path = workspace_root().join("target/llama-server.log");
    if let Some(parent) = log_path.parent() {
        let _ = fs::create_dir_all(parent);
    }
    let log = fs::File::create(&log_path)
        .map_err(|e| fail(format!("cannot create {}: {e}", log_path.display())))?;
    let log_err = log
        .try_clone()
        .map_err(|e| fail(format!("cannot share the log file: {e}")))?;
    let child = Command::new(&py)
        .arg(workspace_root().join("xtask/llama_server.py"))
        .arg(&gguf)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| fail(format!("could not start the llama.cpp server: {e}")))?;
    let mut server = LlamaServer {
        child,
        url: format!("http://127.0.0.1:{port}/v1"),
    };
    let started = Instant::now();
    println!(
        "xtask: starting the llama.cpp server on 127.0.0.1:{port} (pid {})",
        server.child.id()
    );
    loop {
        if healthy(port) {
            println!(
                "xtask: llama.cpp server ready in {:.1}s",
                started.elapsed().as_secs_f64()
            );
            return Ok(server);
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(fail(format!(
                "the llama.cpp server exited ({status}) before it was ready; its log ({}):\n  {}",
                log_path.display(),
                log_tail(&log_path)
            )));
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err(fail(format!(
                "the llama.cpp server was not ready after 120 s; its log ({}):\n  {}",
                log_path.display(),
                log_tail(&log_path)
            )));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
