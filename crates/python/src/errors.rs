//! Rust errors as Python exceptions: each kind is a class of `kgrag._errors` (pure Python, so a class can
//! also be a `ValueError`, `TypeError`, `OSError` or `FileNotFoundError`), raised with the Rust message.

use pyo3::prelude::*;

/// What went wrong in a call, before it is raised in Python.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The library's error.
    Kgrag(kgrag::KgragError),
    /// The bench's error.
    Bench(kgrag_bench::BenchError),
    /// A strategy that the index does not answer with (`UnknownStrategyError`, a `ValueError`).
    Strategy(String),
    /// An argument of the wrong type (`DocumentTypeError`, a `TypeError`).
    Type(String),
    /// An argument with a bad value (`InputError`, a `ValueError`).
    Value(String),
    /// A configuration that cannot be read (`ConfigError`, a `ValueError`).
    Config(String),
    /// No index at the path (`IndexNotFoundError`, a `FileNotFoundError`).
    NotFound(String),
    /// The runtime could not start, or a call panicked (`KgragError`).
    Runtime(String),
}

impl From<kgrag::KgragError> for Failure {
    fn from(e: kgrag::KgragError) -> Self {
        Failure::Kgrag(e)
    }
}

impl From<kgrag_bench::BenchError> for Failure {
    fn from(e: kgrag_bench::BenchError) -> Self {
        match e {
            kgrag_bench::BenchError::Kgrag(e) => Failure::Kgrag(e),
            other => Failure::Bench(other),
        }
    }
}

/// The class of `kgrag._errors` for a library error.
fn class_of(e: &kgrag::KgragError) -> &'static str {
    use kgrag::KgragError as E;
    match e {
        E::Io { .. } | E::Store(_) | E::Database(_) => "StorageError",
        E::Config(_) => "ConfigError",
        E::Input(_) | E::Conflict(_) | E::Text(_) => "InputError",
        E::Index(_) => "IndexStateError",
        E::Model(_) | E::Llm(_) => "ModelError",
        E::Eval(_) => "BenchError",
        E::Hippo(_) | E::Hirag(_) | E::Leanrag(_) | E::OpenIe(_) => "MethodError",
    }
}

impl Failure {
    /// The exception class's name and the message.
    fn parts(&self) -> (&'static str, String) {
        match self {
            Failure::Kgrag(e) => (class_of(e), e.to_string()),
            Failure::Bench(e) => {
                let class = match e {
                    kgrag_bench::BenchError::Config(_) => "ConfigError",
                    kgrag_bench::BenchError::Io { .. } | kgrag_bench::BenchError::Store(_) => {
                        "StorageError"
                    }
                    kgrag_bench::BenchError::Llm(_) => "ModelError",
                    kgrag_bench::BenchError::OpenIe(_) => "MethodError",
                    kgrag_bench::BenchError::Kgrag(k) => class_of(k),
                    kgrag_bench::BenchError::Eval(_) => "BenchError",
                };
                (class, e.to_string())
            }
            Failure::Strategy(m) => ("UnknownStrategyError", m.clone()),
            Failure::Type(m) => ("DocumentTypeError", m.clone()),
            Failure::Value(m) => ("InputError", m.clone()),
            Failure::Config(m) => ("ConfigError", format!("configuration: {m}")),
            Failure::NotFound(m) => ("IndexNotFoundError", m.clone()),
            Failure::Runtime(m) => ("KgragError", m.clone()),
        }
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> Self {
        let (class, message) = f.parts();
        Python::attach(|py| {
            let made = py
                .import("kgrag._errors")
                .and_then(|m| m.getattr(class))
                .and_then(|cls| cls.call1((message,)));
            match made {
                Ok(exception) => PyErr::from_value(exception),
                // The package's Python half is missing (the module imported alone): the import's error.
                Err(e) => e,
            }
        })
    }
}

/// The result of a call.
pub(crate) type Outcome<T> = Result<T, Failure>;
