//! `cargo package --workspace`, verified: every publishable crate packaged and built from its package against
//! the others' packages.

use std::path::{Path, PathBuf};

use crate::{cargo_command, fail, run_step, workspace_root, TaskResult};

/// `cargo package --workspace` on the publishable crates (all but xtask, kgrag-benches and kgrag-fuzz):
/// each is packaged as it would be published — its metadata, its README, every file it compiles from
/// inside its own folder, its kgrag dependencies by version. With `verify` (`cargo xtask package`), cargo
/// then builds every package from its extracted files against the packages of the others: 8 minutes on
/// two cores even with the test build's dependencies at hand, since each package resolves its own features
/// and compiles its dependencies again for them, which CI's 20 minutes cannot hold next to the test build;
/// `cargo xtask test` packages without building (`--no-verify`, half a minute).
pub fn package_crates(verify: bool) -> TaskResult {
    let mut command = cargo_command();
    if verify {
        forget_packaged_builds()?;
        command.args(dev_profile_configs()?);
    }
    command
        .args(["package", "--workspace", "--allow-dirty"])
        .args([
            "--exclude",
            "xtask",
            "--exclude",
            "kgrag-benches",
            "--exclude",
            "kgrag-fuzz",
        ])
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    if !verify {
        command.arg("--no-verify");
    }
    let name = if verify {
        "cargo package --workspace (every package built)"
    } else {
        "cargo package --workspace --no-verify"
    };
    run_step(name, &mut command)
}

/// The workspace's `[profile.dev]` as `--config` arguments. A packaged crate carries no profile, so cargo
/// would verify every package with the default dev profile (full debug information, nothing optimised):
/// it would compile every dependency again, and the `kgrag` binary it builds — into the shared target
/// folder, where it replaces the test build's — would embed text ten times slower. With the workspace's
/// profile, the dependencies the test build compiled with the same features are reused, and what the
/// verification builds is compiled as the test build compiles it.
fn dev_profile_configs() -> TaskResult<Vec<String>> {
    let path = workspace_root().join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    let manifest: toml::Table =
        toml::from_str(&text).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    let Some(dev) = manifest
        .get("profile")
        .and_then(|p| p.get("dev"))
        .and_then(toml::Value::as_table)
    else {
        return Ok(out);
    };
    for (key, value) in dev {
        match (key.as_str(), value.as_table()) {
            ("package", Some(packages)) => {
                for (name, settings) in packages {
                    for (setting, v) in settings.as_table().into_iter().flatten() {
                        out.push("--config".to_owned());
                        out.push(format!("profile.dev.package.\"{name}\".{setting}={v}"));
                    }
                }
            }
            (_, Some(_)) => {}
            _ => {
                out.push("--config".to_owned());
                out.push(format!("profile.dev.{key}={value}"));
            }
        }
    }
    Ok(out)
}

/// Removes what an earlier verification left of our packages. cargo verifies a package against the
/// others' packaged copies, which it unpacks under `$CARGO_HOME/registry/src/<local registry>/` and
/// compiles into the target folder as registry crates; a registry crate of a given version is immutable to
/// cargo, so an unpacked copy or a compiled one from an earlier run would be used again, and a crate would
/// be verified against the others as they were then. A fresh clone has neither; a developer's checkout
/// has both. Only our own packages (`NAME-VERSION`, registry builds) are removed.
fn forget_packaged_builds() -> TaskResult {
    let packages = workspace_packages()?;
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let remove = |path: &Path| {
        std::fs::remove_dir_all(path)
            .map_err(|e| fail(format!("cannot remove {}: {e}", path.display())))
    };
    if let Some(sources) = cargo_home.map(|h| h.join("registry").join("src")) {
        for registry in read_dirs(&sources)? {
            for (name, version) in &packages {
                let unpacked = registry.join(format!("{name}-{version}"));
                if unpacked.is_dir() {
                    remove(&unpacked)?;
                }
            }
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let fingerprints = target.join("debug").join(".fingerprint");
    for dir in read_dirs(&fingerprints)? {
        let Some(dir_name) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let ours = packages.iter().any(|(name, _)| {
            dir_name
                .strip_prefix(name.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|hash| hash.chars().all(|c| c.is_ascii_hexdigit()))
        });
        // A registry build's fingerprint is its version ("Precalculated"); a path build's is its files.
        if ours && fingerprint_is_precalculated(&dir) {
            remove(&dir)?;
        }
    }
    Ok(())
}

/// The subfolders of `dir` (none when it does not exist).
fn read_dirs(dir: &Path) -> TaskResult<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(fail(format!("cannot read {}: {e}", dir.display()))),
    };
    Ok(entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect())
}

/// Whether a fingerprint folder of the target directory belongs to a registry build.
fn fingerprint_is_precalculated(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let path = e.path();
            path.extension().is_some_and(|x| x == "json")
                && std::fs::read_to_string(&path).is_ok_and(|t| t.contains("\"Precalculated\""))
        })
    })
}

/// `(name, version)` of every package of the workspace (`cargo metadata`).
fn workspace_packages() -> TaskResult<Vec<(String, String)>> {
    let output = cargo_command()
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .map_err(|e| fail(format!("cannot run cargo metadata: {e}")))?;
    if !output.status.success() {
        return Err(fail(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| fail(format!("cargo metadata printed no JSON: {e}")))?;
    let packages = metadata["packages"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|p| {
                    Some((
                        p["name"].as_str()?.to_owned(),
                        p["version"].as_str()?.to_owned(),
                    ))
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    if packages.is_empty() {
        return Err(fail("cargo metadata lists no packages"));
    }
    Ok(packages)
}
