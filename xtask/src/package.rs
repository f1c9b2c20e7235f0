//! `cargo package --workspace`: every publishable crate packaged, then each package compiled alone from its
//! packaged files against the others' packages — by cargo itself (`cargo xtask package`), or type-checked
//! the same way in `cargo xtask test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo_command, fail, run_step, target_dir, workspace_root, TaskResult};

/// How the packages are verified after they are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// cargo's own verification (`cargo xtask package`): every package built to machine code from its
    /// extracted files against the packages of the others. 8 to 12 minutes on two cores even with the test
    /// build's dependencies at hand, since each package resolves its own features and compiles its
    /// dependencies again for them.
    Cargo,
    /// `cargo xtask test`: `cargo package --workspace --no-verify`, then every package extracted from its
    /// `.crate` outside the workspace and compiled from those files, the other kgrag crates taken from
    /// their packages too: what cargo's verification catches — a file a package leaves out, a dependency
    /// without a version, and for the crates used one at a time a feature one gets only from a sibling
    /// through the workspace's unification — without the machine code: the crates used one at a time are
    /// `cargo check`ed alone, the facade's packages together, with their default features (about two
    /// minutes cold; see [`check_groups`]).
    Check,
}

/// The packages cargo makes: all but xtask, kgrag-benches and kgrag-fuzz (`publish = false`). Each is
/// packaged as it would be published — its metadata, its README, every file it compiles from inside its
/// own folder, its kgrag dependencies by version — and then verified as `verify` says.
pub fn package_crates(verify: Verify) -> TaskResult {
    let mut command = cargo_command();
    if verify == Verify::Cargo {
        forget_packaged_builds()?;
        command.args(dev_profile_configs()?);
    }
    command
        .args(["package", "--workspace", "--allow-dirty"])
        .args(EXCLUDED.iter().flat_map(|name| ["--exclude", name]))
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    match verify {
        Verify::Cargo => run_step(
            "cargo package --workspace (every package built)",
            &mut command,
        ),
        Verify::Check => {
            // Offline: the test build has just fetched every dependency, and asking the registry's index
            // again for each package's lock file took most of this step (19 s of 20). A target folder of
            // its own: the checks share nothing with the test build (check mode, default features), and
            // `cargo xtask test` runs them while the tests hold the test build's folder.
            let target = check_target();
            command
                .args(["--no-verify", "--offline", "--target-dir"])
                .arg(&target);
            run_step("cargo package --workspace --no-verify", &mut command)?;
            check_packages(&target)
        }
    }
}

/// The target folder of [`Verify::Check`]: its packages and its checks' artifacts, beside the builds of
/// the example project outside the workspace (`target/alone/`: crates taken alone, outside the workspace,
/// with their own features; the proc macros and build scripts they share are compiled once).
pub(crate) fn check_target() -> PathBuf {
    target_dir().join("alone")
}

/// The workspace's packages that are not published.
const EXCLUDED: [&str; 4] = ["xtask", "kgrag-benches", "kgrag-fuzz", "kgrag-python"];

/// [`Verify::Check`]: every `.crate` cargo wrote to `target/alone/package/` extracted into a folder outside the
/// workspace (inside it, cargo would take them for undeclared members) and made a workspace of its own,
/// `[patch.crates-io]` pointing every kgrag dependency at its extracted package; then `cargo check` of
/// each package alone, or of the facade's packages together (see [`check_groups`]). The shared target
/// folder keeps what one check compiled for the next.
fn check_packages(target: &Path) -> TaskResult {
    let packages: Vec<(String, String)> = workspace_packages()?
        .into_iter()
        .filter(|(name, _)| !EXCLUDED.contains(&name.as_str()))
        .collect();
    let root = std::env::temp_dir().join(format!("kgrag-package-check-{}", std::process::id()));
    if root.exists() {
        std::fs::remove_dir_all(&root)
            .map_err(|e| fail(format!("cannot remove {}: {e}", root.display())))?;
    }
    std::fs::create_dir_all(&root)
        .map_err(|e| fail(format!("cannot create {}: {e}", root.display())))?;
    let result = check_extracted(&packages, target, &root);
    // The extracted copies are only for this check.
    let _ = std::fs::remove_dir_all(&root);
    result
}

fn check_extracted(packages: &[(String, String)], target: &Path, root: &Path) -> TaskResult {
    let mut folders = BTreeMap::new();
    let mut kgrag_deps = BTreeMap::new();
    for (name, version) in packages {
        let file = target
            .join("package")
            .join(format!("{name}-{version}.crate"));
        // `-m`: the files get the extraction time, not their packaged one. The folder's name repeats
        // whenever a process id does (a fresh machine hands out the same ids), and cargo compares a
        // source's time with the shared target folder's last build of the same path: with the packaged
        // times an edited package could pass for the one built there before, and be checked stale.
        let status = Command::new("tar")
            .arg("-xzmf")
            .arg(&file)
            .arg("-C")
            .arg(root)
            .status()
            .map_err(|e| fail(format!("cannot run tar on {}: {e}", file.display())))?;
        if !status.success() {
            return Err(fail(format!("tar could not extract {}", file.display())));
        }
        let folder = root.join(format!("{name}-{version}"));
        let deps = manifest_kgrag_dependencies(&folder.join("Cargo.toml"), packages)?;
        folders.insert(name.clone(), folder);
        kgrag_deps.insert(name.clone(), deps);
    }
    // One workspace of the extracted packages, its kgrag dependencies patched to them, with the
    // workspace's lock file: every check resolves the versions the tests ran with, once.
    let mut manifest = String::from("[workspace]\nresolver = \"2\"\nmembers = [\n");
    for folder in folders.values() {
        manifest.push_str(&format!(
            "    {},\n",
            toml::Value::String(folder.display().to_string())
        ));
    }
    manifest.push_str("]\n\n[patch.crates-io]\n");
    for (name, folder) in &folders {
        manifest.push_str(&format!(
            "{name} = {{ path = {} }}\n",
            toml::Value::String(folder.display().to_string())
        ));
    }
    let manifest_path = root.join("Cargo.toml");
    std::fs::write(&manifest_path, manifest)
        .map_err(|e| fail(format!("cannot write {}: {e}", manifest_path.display())))?;
    let lock = workspace_root().join("Cargo.lock");
    std::fs::copy(&lock, root.join("Cargo.lock"))
        .map_err(|e| fail(format!("cannot copy {}: {e}", lock.display())))?;
    let (alone, together) = check_groups(&kgrag_deps);
    let cargo = |subcommand: &[&str], names: &[String]| {
        let mut command = cargo_command();
        command
            .args(subcommand)
            .arg("--manifest-path")
            .arg(&manifest_path)
            .args(names.iter().flat_map(|n| ["-p", n.as_str()]))
            .env("CARGO_TARGET_DIR", target)
            .env_remove("RUSTC_WORKSPACE_WRAPPER");
        command
    };
    for name in &alone {
        let mut command = cargo(&["check"], std::slice::from_ref(name));
        run_step(
            &format!("cargo check of the package {name}, alone"),
            &mut command,
        )?;
    }
    if !together.is_empty() {
        let mut command = cargo(&["check"], &together);
        run_step(
            &format!("cargo check of the packages {}", together.join(", ")),
            &mut command,
        )?;
    }
    Ok(())
}

/// The packages a user picks one at a time — every one whose library does not reach [`FACADE_ROOT`] — each checked
/// in its own cargo invocation, so that its dependencies get only the features it asks for itself (one
/// that compiles only thanks to a feature a sibling turns on fails here); and the facade's packages, which
/// are used together with their defaults, checked in one invocation (features unified among them alone),
/// which saves checking the model and HTTP stack once per package. A missing file fails either way.
/// (Building them with every feature and the workspace's dev profile instead, hoping to reuse the test
/// build's compiled dependencies, was measured on a clean clone and dropped: the test build's features
/// are unified with every member's dev-dependencies, so ring, rustls, gemm and candle were compiled
/// again — 126 s against the check's ~80 s.)
fn check_groups(kgrag_deps: &BTreeMap<String, Vec<String>>) -> (Vec<String>, Vec<String>) {
    let reaches = |start: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(p) = stack.pop() {
            if p == FACADE_ROOT {
                return true;
            }
            if seen.insert(p) {
                stack.extend(kgrag_deps.get(p).into_iter().flatten());
            }
        }
        false
    };
    kgrag_deps.keys().cloned().partition(|name| !reaches(name))
}

/// The crate whose dependents (and itself) are checked together: the model clients (candle, reqwest,
/// rustls), which only the facade, the bench and the CLI build on.
const FACADE_ROOT: &str = "kgrag-llm";

/// The kgrag packages a packaged manifest's library is compiled with (normal and build dependencies; a
/// check of the library does not build the dev-dependencies).
fn manifest_kgrag_dependencies(
    manifest: &Path,
    packages: &[(String, String)],
) -> TaskResult<Vec<String>> {
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| fail(format!("cannot read {}: {e}", manifest.display())))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| fail(format!("{}: {e}", manifest.display())))?;
    let mut out = BTreeSet::new();
    for section in ["dependencies", "build-dependencies"] {
        for (key, spec) in table
            .get(section)
            .and_then(toml::Value::as_table)
            .into_iter()
            .flatten()
        {
            let name = spec
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key);
            if packages.iter().any(|(p, _)| p == name) {
                out.insert(name.to_owned());
            }
        }
    }
    Ok(out.into_iter().collect())
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
    let target = target_dir();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_below_the_model_clients_are_checked_alone_the_facade_together() {
        let deps: BTreeMap<String, Vec<String>> = [
            ("kgrag-types", vec![]),
            ("kgrag-text", vec!["kgrag-types"]),
            ("kgrag-llm", vec!["kgrag-text", "kgrag-types"]),
            ("kgrag-hirag", vec!["kgrag-text"]),
            ("kgrag", vec!["kgrag-hirag", "kgrag-llm"]),
            ("kgrag-cli", vec!["kgrag"]),
        ]
        .into_iter()
        .map(|(n, d)| (n.to_owned(), d.into_iter().map(str::to_owned).collect()))
        .collect();
        let (alone, together) = check_groups(&deps);
        assert_eq!(alone, ["kgrag-hirag", "kgrag-text", "kgrag-types"]);
        assert_eq!(together, ["kgrag", "kgrag-cli", "kgrag-llm"]);
    }

    #[test]
    fn a_packaged_manifest_names_the_kgrag_dependencies_its_library_is_built_with() -> TaskResult {
        let dir = std::env::temp_dir().join(format!("xtask-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| fail(e.to_string()))?;
        let manifest = dir.join("Cargo.toml");
        std::fs::write(
            &manifest,
            r#"
[package]
name = "kgrag-hirag"
version = "0.1.0"

[dependencies.serde]
version = "1"

[dependencies.kgrag-types]
version = "0.1.0"

[dependencies.store]
version = "0.1.0"
package = "kgrag-graph-store"

[build-dependencies.kgrag-text]
version = "0.1.0"

[dev-dependencies.kgrag-llm]
version = "0.1.0"
features = ["local"]
"#,
        )
        .map_err(|e| fail(e.to_string()))?;
        let packages: Vec<(String, String)> = [
            "kgrag-types",
            "kgrag-text",
            "kgrag-graph-store",
            "kgrag-llm",
            "kgrag-hirag",
        ]
        .iter()
        .map(|n| ((*n).to_owned(), "0.1.0".to_owned()))
        .collect();
        let deps = manifest_kgrag_dependencies(&manifest, &packages);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(deps?, ["kgrag-graph-store", "kgrag-text", "kgrag-types"]);
        Ok(())
    }
}
