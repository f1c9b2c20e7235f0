//! The HTTP contract: schemathesis (pinned, from PyPI, in a venv under `target/contract/venv`) against the
//! `/openapi.json` that `kgrag serve` serves, fetched with an admin key, over two small offline indexes
//! under an indexes root (the browser test's corpora). Every operation of the document (each index's own
//! routes, the routes over the indexes, the OpenAI-compatible ones) is called with generated requests,
//! valid and invalid, and stateful sequences; every check is on but what
//! `crates/server/tests/contract/schemathesis.toml` turns off, with why. The seed is fixed, so that a run
//! is repeatable; `KGRAG_CONTRACT_SEED` picks another.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::browser::{pinned_venv, start_serve};
use crate::{fail, run_step, target_dir, workspace_root, TaskResult};

/// schemathesis, pinned.
const SCHEMATHESIS: &str = "schemathesis==4.32.5";

/// The admin key the document is fetched and the requests are sent with.
const KEY: &str = "contract-test-admin-key";

/// Requests generated per operation and phase.
const MAX_EXAMPLES: &str = "30";

/// The venv's `schemathesis` (created and installed once).
pub(crate) fn schemathesis(python: &str) -> TaskResult<PathBuf> {
    let venv = target_dir().join("contract").join("venv");
    pinned_venv(python, &venv, SCHEMATHESIS)?;
    Ok(venv.join("bin").join("schemathesis"))
}

/// Indexes `corpus` into `root/name` with the browser test's configuration.
fn index(kgrag: &Path, work: &Path, corpus: &Path, name: &str) -> TaskResult {
    run_step(
        &format!("kgrag index (the contract's {name} index)"),
        Command::new(kgrag)
            .arg("index")
            .arg("--index")
            .arg(work.join("root").join(name))
            .arg("--config")
            .arg(work.join("kgrag.toml"))
            .arg("-q")
            .arg(corpus),
    )
}

/// The stage: schemathesis, two indexes, the server with a keys file, the run.
pub fn run(kgrag: &Path, python: &str) -> TaskResult {
    let cli = schemathesis(python)?;
    let browser = workspace_root().join("crates/server/tests/browser");
    let config = workspace_root().join("crates/server/tests/contract/schemathesis.toml");
    let work = target_dir().join("contract").join("work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("root"))
        .map_err(|e| fail(format!("cannot create {}: {e}", work.display())))?;
    std::fs::copy(browser.join("kgrag.toml"), work.join("kgrag.toml"))
        .map_err(|e| fail(format!("cannot copy the browser test's kgrag.toml: {e}")))?;
    std::fs::write(
        work.join("keys.toml"),
        format!("[[key]]\nname = \"contract\"\nkey = \"{KEY}\"\nadmin = true\n"),
    )
    .map_err(|e| fail(format!("cannot write the contract's keys file: {e}")))?;
    index(kgrag, &work, &browser.join("corpus"), "main")?;
    index(kgrag, &work, &browser.join("corpus-notes"), "notes")?;
    let (server, url) = start_serve(
        kgrag,
        &work,
        &[
            "--indexes",
            "root",
            "--default-index",
            "main",
            "--keys",
            "keys.toml",
            "--config",
            "kgrag.toml",
        ],
        &[],
    )?;
    let seed = std::env::var("KGRAG_CONTRACT_SEED").unwrap_or_else(|_| "1".to_owned());
    let result = run_step(
        "schemathesis run (the served /openapi.json)",
        Command::new(&cli)
            .arg("--config-file")
            .arg(&config)
            .arg("run")
            .arg(format!("{url}/openapi.json"))
            .args(["-H", &format!("Authorization: Bearer {KEY}")])
            .args([
                "--max-examples",
                MAX_EXAMPLES,
                "--workers",
                "1",
                "--seed",
                &seed,
            ])
            .env("NO_COLOR", "1"),
    );
    drop(server);
    result
}
