//! `kgrag serve` and `kgrag mcp` as a user runs them: the address line, a request, SIGTERM; the refusal of
//! an open address without a key; the MCP tools over stdio, driven by the MCP SDK's client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::cli::{kgrag, tmp};

/// A small offline index (rule extraction, hashing embedder) of dense and HippoRAG 2 in `work/idx`.
fn small_index(work: &Path) {
    std::fs::write(
        work.join("k.toml"),
        "openie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n\
         [index]\nmethods = [\"dense\", \"hipporag2\"]\n",
    )
    .unwrap();
    let docs = work.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("warsaw.md"),
        "Warsaw is the capital of Poland. The Vistula flows through Warsaw.",
    )
    .unwrap();
    std::fs::write(
        docs.join("curie.md"),
        "Marie Curie was born in Warsaw. She won the Nobel Prize in 1903.",
    )
    .unwrap();
    let out = kgrag(work)
        .args([
            "index", "docs", "--index", "idx", "--config", "k.toml", "-q",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kgrag serve` of the small index on `listen`, not started yet.
fn serve(work: &Path, listen: &str) -> std::process::Command {
    let mut c = kgrag(work);
    c.args([
        "serve", "--index", "idx", "--config", "k.toml", "--listen", listen,
    ]);
    c
}

/// The `host:port` a started `kgrag serve` prints on its first line.
fn address(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

/// One HTTP/1.1 GET on a fresh connection: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

#[test]
fn serve_prints_its_address_answers_and_stops_on_sigterm() {
    let work = tmp("serve");
    small_index(&work);
    let mut child = serve(&work, "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = address(&mut child);
    let (status, body) = get(&addr, "/health");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"generation\":1"), "{body}");
    let (status, body) = get(&addr, "/");
    assert_eq!(status, 200);
    assert!(body.contains("<html"), "the page: {body:.200}");
    // SIGTERM: a graceful stop, exit 0.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    assert_eq!(term(pid), 0);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "serve did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("stopped"), "{err}");
    let _ = std::fs::remove_dir_all(&work);
}

/// Sends SIGTERM with the `kill` command (no unsafe code in the tests).
fn term(pid: libc::pid_t) -> i32 {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    status.code().unwrap_or(-1)
}

#[test]
fn serve_refuses_an_open_address_without_a_key() {
    let work = tmp("serve-open");
    small_index(&work);
    let out = serve(&work, "0.0.0.0:0").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("0.0.0.0") && err.contains("--api-key-env"),
        "{err}"
    );
    // A key named but not set is an error too, not a server without auth.
    let out = kgrag(&work)
        .args([
            "serve",
            "--index",
            "idx",
            "--api-key-env",
            "KGRAG_TEST_NO_SUCH_VAR",
        ])
        .env_remove("KGRAG_TEST_NO_SUCH_VAR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("KGRAG_TEST_NO_SUCH_VAR"));
    // A missing index says how to make one.
    let out = kgrag(&work)
        .args(["serve", "--index", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kgrag index"));
    let _ = std::fs::remove_dir_all(&work);
}

/// One request on an open keep-alive connection: (status, body), read to its Content-Length.
fn ask(stream: &mut TcpStream, addr: &str, path: &str, key: &str) -> (u16, String) {
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        if h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn serve_reloads_its_keys_file_on_sighup_without_dropping_connections() {
    let work = tmp("serve-keys");
    small_index(&work);
    let (old, new) = ("old-key-0123456789abc", "new-key-0123456789abc");
    let keys = |key: &str| {
        std::fs::write(
            work.join("keys.toml"),
            format!("[[key]]\nname = \"client\"\nkey = \"{key}\"\nread = [\"idx\"]\n"),
        )
        .unwrap();
    };
    keys(old);
    let mut child = serve(&work, "127.0.0.1:0")
        .args(["--keys", "keys.toml"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = address(&mut child);
    let mut kept = TcpStream::connect(&addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let (status, body) = ask(&mut kept, &addr, "/v1/indexes", old);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"idx\""), "{body}");
    assert_eq!(ask(&mut kept, &addr, "/v1/indexes", new).0, 401);
    // The file changes; SIGHUP reloads it.
    keys(new);
    let pid = child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = Instant::now();
    loop {
        let mut fresh = TcpStream::connect(&addr).unwrap();
        fresh
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        if ask(&mut fresh, &addr, "/v1/indexes", new).0 == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "SIGHUP did not reload the keys"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The connection opened before the reload is still served, under the new keys.
    let (status, body) = ask(&mut kept, &addr, "/v1/indexes", new);
    assert_eq!(status, 200, "{body}");
    assert_eq!(ask(&mut kept, &addr, "/v1/indexes", old).0, 401);
    // A keys file that does not parse is refused; the keys in force stay.
    std::fs::write(work.join("keys.toml"), "[[key]]\nname = ").unwrap();
    assert!(std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ask(&mut kept, &addr, "/v1/indexes", new).0, 200);
    // This key may not read /metrics (which names every loaded index).
    assert_eq!(ask(&mut kept, &addr, "/metrics", new).0, 403);
    assert_eq!(term(libc::pid_t::try_from(child.id()).unwrap()), 0);
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn mcp_over_stdio_serves_the_tools_to_the_sdk_client() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;

    let work = tmp("mcp");
    small_index(&work);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut command = tokio::process::Command::from(kgrag(&work));
        command.args(["mcp", "--index", "idx", "--config", "k.toml"]);
        let transport = TokioChildProcess::new(command).unwrap();
        let client = ().serve(transport).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "add_documents",
                "answer",
                "list_indexes",
                "list_strategies",
                "search"
            ]
        );
        let args = serde_json::json!({"question": "Which river flows through Warsaw?", "top_k": 1});
        let result = client
            .call_tool(
                CallToolRequestParams::new("search")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        let text = &result.content[0].as_text().unwrap().text;
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["strategy"], "hipporag2");
        assert_eq!(v["passages"][0]["documents"][0], "warsaw.md", "{v}");
        client.cancel().await.unwrap();
    });
    let _ = std::fs::remove_dir_all(&work);
}
