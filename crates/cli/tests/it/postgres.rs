//! The `kgrag` binary over PostgreSQL + pgvector: the server killed with SIGKILL inside a commit (a server
//! of the test's own, started from the binaries `cargo xtask test` names in `KGRAG_TEST_PG_BIN`): after a
//! restart the previous generation is intact and the rerun completes; the database URL never appears in
//! any output.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cli::tmp;

#[path = "../../../../xtask/src/pg.rs"]
pub(crate) mod pg;

/// Whether the server binaries are there; without them the test is skipped, unless the run requires them.
pub(crate) fn have_server(test: &str) -> bool {
    if std::env::var_os("KGRAG_TEST_PG_BIN").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("KGRAG_REQUIRE_PG_SERVER").is_none(),
        "KGRAG_TEST_PG_BIN is not set but KGRAG_REQUIRE_PG_SERVER is: `cargo xtask test` names them"
    );
    eprintln!("{test}: skipped (no PostgreSQL: run it through `cargo xtask test`)");
    false
}

/// A server of the test's own, its data in `work/data`, from the binaries `cargo xtask test` names.
pub(crate) fn server(work: &Path) -> pg::Server {
    let launcher = pg::Launcher {
        bin: PathBuf::from(std::env::var_os("KGRAG_TEST_PG_BIN").unwrap()),
        runner: pg::Runner::from_name(&std::env::var("KGRAG_TEST_PG_RUNNER").unwrap()).unwrap(),
    };
    pg::Server::start(launcher, &work.join("data")).unwrap()
}

fn kgrag(cwd: &Path, url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kgrag"));
    c.current_dir(cwd)
        .env("KGRAG_DATABASE_URL", url)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null());
    c
}

/// Runs `c`; returns (success, stdout + stderr).
fn output(c: &mut Command) -> (bool, String) {
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

#[test]
fn a_server_killed_inside_a_commit_leaves_the_previous_generation_and_no_url_is_ever_shown() {
    if !have_server("a_server_killed") {
        return;
    }
    // Not "kill": the CLI's kill test of this binary works in that folder.
    let work = tmp("pg-kill");
    let mut server = server(&work);
    let secret = "kill-secret-8c1f";
    let url = server.url(secret);
    let mut seen = String::new();
    let ds = kgrag::eval::load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
    let line = |(i, p): (usize, &kgrag::eval::Passage)| {
        serde_json::json!({"id": format!("p{i:02}"), "title": p.title, "text": p.text}).to_string()
            + "\n"
    };
    let first: String = ds.passages.iter().enumerate().take(10).map(line).collect();
    let more: String = ds
        .passages
        .iter()
        .enumerate()
        .skip(10)
        .take(2)
        .map(line)
        .collect();
    std::fs::write(work.join("corpus.jsonl"), first).unwrap();
    std::fs::write(work.join("more.jsonl"), more).unwrap();
    std::fs::write(
        work.join("k.toml"),
        "openie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n\
         [storage]\nbackend = \"postgres\"\nschema = \"killed\"\n",
    )
    .unwrap();
    let run = |args: &[&str], seen: &mut String| {
        let (ok, text) = output(kgrag(&work, &url).args(args));
        seen.push_str(&text);
        assert!(ok, "kgrag {args:?} failed:\n{text}");
        text
    };
    run(
        &[
            "index",
            "corpus.jsonl",
            "--index",
            "idx",
            "--config",
            "k.toml",
            "--methods",
            "dense,hipporag2",
        ],
        &mut seen,
    );
    let stats = |seen: &mut String| -> serde_json::Value {
        let text = run(&["stats", "--index", "idx", "--json"], seen);
        serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap()
    };
    let before = stats(&mut seen);
    assert_eq!(before["generation"], 1);
    assert_eq!(before["documents"], 10);
    // With a configuration that names no database the index is found through storage.json, and a rerun
    // on the same documents is up to date.
    std::fs::write(
        work.join("plain.toml"),
        "openie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n",
    )
    .unwrap();
    let again = run(
        &[
            "index",
            "corpus.jsonl",
            "--index",
            "idx",
            "--config",
            "plain.toml",
            "--methods",
            "dense,hipporag2",
        ],
        &mut seen,
    );
    assert!(again.contains("up to date"), "{again}");

    // An insert stalls inside its transaction, every row written; the server dies there.
    let mut child = kgrag(&work, &url)
        .args(["insert", "more.jsonl", "--index", "idx"])
        .env("KGRAG_TEST_PG_STALL_MS", "3000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut stalled = false;
    let mut l = String::new();
    while err.read_line(&mut l).unwrap() > 0 {
        seen.push_str(&l);
        if l.contains("test stall") {
            stalled = true;
            break;
        }
        l.clear();
    }
    assert!(stalled, "the insert never reached its commit:\n{seen}");
    server.kill();
    let mut rest = String::new();
    for l in err.lines() {
        rest.push_str(&l.unwrap());
        rest.push('\n');
    }
    let status = child.wait().unwrap();
    seen.push_str(&rest);
    assert!(!status.success(), "the insert succeeded without its server");
    assert!(rest.contains("$KGRAG_DATABASE_URL"), "{rest}");

    // Back up: the previous generation, whole; the rerun completes.
    server.restart().unwrap();
    let after = stats(&mut seen);
    for k in [
        "generation",
        "documents",
        "chunks",
        "methods",
        "config_hash",
    ] {
        assert_eq!(before[k], after[k], "{k}");
    }
    run(
        &[
            "query",
            "Who founded it?",
            "--index",
            "idx",
            "--strategy",
            "hipporag2",
        ],
        &mut seen,
    );
    run(&["insert", "more.jsonl", "--index", "idx"], &mut seen);
    let done = stats(&mut seen);
    assert_eq!(done["generation"], 2);
    assert_eq!(done["documents"], 12);

    // Unreachable and malformed URLs: errors name the variable, never the value.
    let bad = format!("postgres://postgres:{secret}@127.0.0.1:1/postgres");
    let (ok, text) = output(kgrag(&work, &bad).args(["stats", "--index", "idx"]));
    assert!(!ok);
    assert!(text.contains("KGRAG_DATABASE_URL"), "{text}");
    seen.push_str(&text);
    let (ok, text) = output(
        kgrag(
            &work,
            &format!("host=127.0.0.1 password={secret} port=notaport"),
        )
        .args(["stats", "--index", "idx"]),
    );
    assert!(!ok);
    seen.push_str(&text);
    assert!(
        !seen.contains(secret) && !seen.contains(&url),
        "the URL or its password was printed:\n{seen}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(work);
}
