//! `kgrag.bench`: `kgrag bench` from Python, the report returned as a dict.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::convert::{checked_toml, config_table_from_py, json_to_py, looks_like_toml};
use crate::errors::{Failure, Outcome};
use crate::{released, runtime};

/// The configuration of a bench run as a file `kgrag bench` reads: a path as given, a dict or TOML text
/// checked, then written to a new file of its own in the temporary folder for the run.
enum BenchConfig {
    None,
    Path(PathBuf),
    Text(String),
}

fn bench_config(config: Option<&Bound<'_, PyAny>>) -> Outcome<BenchConfig> {
    let Some(config) = config.filter(|c| !c.is_none()) else {
        return Ok(BenchConfig::None);
    };
    if !config.is_instance_of::<pyo3::types::PyDict>() {
        if let Ok(path) = config.extract::<PathBuf>() {
            if !looks_like_toml(&path.display().to_string()) {
                return Ok(BenchConfig::Path(path));
            }
        }
    }
    // A dict or TOML text: checked here (unknown keys are errors naming the key), handed over as TOML.
    let table = config_table_from_py(Some(config))?.unwrap_or_default();
    let (text, _) = checked_toml(&table)?;
    Ok(BenchConfig::Text(text))
}

/// Writes `text` to a new file (never an existing one or a link planted there) in the temporary folder.
fn write_new(text: &str) -> Outcome<PathBuf> {
    use std::io::Write;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let file = std::env::temp_dir().join(format!(
        "kgrag-bench-config-{}-{stamp}.toml",
        std::process::id()
    ));
    let io = |source| {
        Failure::Kgrag(kgrag::KgragError::Io {
            path: file.clone(),
            source,
        })
    };
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)
        .map_err(io)?;
    out.write_all(text.as_bytes()).map_err(io)?;
    Ok(file)
}

/// Runs the benchmark as `kgrag bench` does — one index of `dataset` shared by every method, passage
/// recall@k, EM/F1, context tokens, latency, LLM use — writes `report.json`, `report.md`, `report.html` and
/// plots into `out` (default `target/bench/<dataset>`) and returns the report as a dict.
#[pyfunction]
#[pyo3(signature = (dataset=None, methods=None, out=None, config=None, *, limit=None, docs=None, question_corpus=false, data_dir=None, progress=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn bench<'py>(
    py: Python<'py>,
    dataset: Option<String>,
    methods: Option<Vec<String>>,
    out: Option<PathBuf>,
    config: Option<Bound<'py, PyAny>>,
    limit: Option<usize>,
    docs: Option<usize>,
    question_corpus: bool,
    data_dir: Option<PathBuf>,
    progress: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let config = bench_config(config.as_ref())?;
    let mut args = kgrag_bench::BenchArgs::new(data_dir.unwrap_or_else(kgrag::eval::data_dir));
    args.dataset = dataset;
    args.methods = methods.unwrap_or_default();
    args.out = out;
    args.limit = limit;
    args.docs = docs;
    args.question_corpus = question_corpus;
    args.progress = progress;
    crate::show_progress(progress);
    let report = released(py, move || -> Outcome<serde_json::Value> {
        let written = match config {
            BenchConfig::None => None,
            BenchConfig::Path(p) => {
                args.config = Some(p);
                None
            }
            BenchConfig::Text(text) => {
                let file = write_new(&text)?;
                args.config = Some(file.clone());
                Some(file)
            }
        };
        let outcome = runtime().and_then(|rt| Ok(rt.block_on(kgrag_bench::run(&args))?));
        if let Some(file) = written {
            let _ = std::fs::remove_file(file);
        }
        let outcome = outcome?;
        let mut report = serde_json::to_value(&outcome.report)
            .map_err(|e| Failure::Runtime(format!("the report cannot be serialised: {e}")))?;
        if let serde_json::Value::Object(map) = &mut report {
            map.entry("report_path")
                .or_insert_with(|| serde_json::Value::String(outcome.path.display().to_string()));
        }
        Ok(report)
    })?;
    json_to_py(py, &report)
}
