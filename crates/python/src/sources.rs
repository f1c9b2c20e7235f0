//! Where passages come from and what answers cite: `kgrag.Source` (a passage's file, pages and section),
//! `kgrag.Citation` (an answer's `[n]` and its source), and `kgrag.AnswerStream` (an answer's tokens as
//! the reader generates them).

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;

use crate::convert::json_to_py;
use crate::errors::Failure;

/// Where a passage came from: its document, the file, the pages (slides, sheets, chapters) it spans and its
/// section, with a label to cite it by (`report.pdf p. 12–13 § 2.3 Methods`).
#[pyclass(module = "kgrag", frozen, get_all)]
#[derive(Clone)]
pub struct Source {
    /// The document's id.
    document: String,
    /// The file it was read from (its path in the folder indexed), if any.
    file: Option<String>,
    /// The file's format (`pdf`, `docx`, …).
    format: Option<String>,
    /// What its pages are: `page`, `slide`, `sheet`, `chapter`.
    unit: Option<String>,
    /// The first page the passage spans.
    page: Option<u32>,
    /// The last page it spans.
    page_end: Option<u32>,
    /// The heading of its section.
    section: Option<String>,
    /// Whether the index keeps the original file.
    original: bool,
    /// The citation as people read it.
    label: String,
}

impl Source {
    pub(crate) fn of(s: kgrag::citations::PassageSource) -> Self {
        let unit = s
            .unit
            .and_then(|u| serde_json::to_value(u).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        Source {
            document: s.document,
            file: s.file,
            format: s.format,
            unit,
            page: s.page,
            page_end: s.page_end,
            section: s.section,
            original: s.original,
            label: s.label,
        }
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "document": self.document,
            "file": self.file,
            "format": self.format,
            "unit": self.unit,
            "page": self.page,
            "page_end": self.page_end,
            "section": self.section,
            "original": self.original,
            "label": self.label,
        })
    }
}

#[pymethods]
impl Source {
    /// The source as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.json())
    }

    fn __str__(&self) -> String {
        self.label.clone()
    }

    fn __repr__(&self) -> String {
        format!("Source({:?})", self.label)
    }
}

/// One source an answer cites: its number (`[n]` in the answer), chunk and where it came from.
#[pyclass(module = "kgrag", frozen, get_all)]
#[derive(Clone)]
pub struct Citation {
    /// The number the answer cites it by.
    number: u32,
    /// The chunk's id.
    chunk_id: String,
    /// Where it came from (`None` for a chunk without a document, which does not happen in practice).
    source: Option<Source>,
}

impl Citation {
    pub(crate) fn of(c: kgrag::answer::Citation) -> Self {
        Citation {
            number: c.number,
            chunk_id: c.chunk_id.as_str().to_owned(),
            source: c.source.map(Source::of),
        }
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "number": self.number,
            "chunk_id": self.chunk_id,
            "source": self.source.as_ref().map(Source::json),
        })
    }
}

#[pymethods]
impl Citation {
    /// The citation as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.json())
    }

    fn __repr__(&self) -> String {
        format!(
            "Citation([{}] {})",
            self.number,
            self.source
                .as_ref()
                .map_or(self.chunk_id.as_str(), |s| s.label.as_str())
        )
    }
}

/// What the answering task sends: a token, or the finished answer (or its failure).
pub(crate) enum Piece {
    Token(String),
    Done(Box<Result<crate::index::Answer, Failure>>),
}

/// An answer being read: iterating yields the reader's text as it is generated (an LLM's tokens; an
/// offline reader's whole answer at once); once exhausted, `answer` is the finished `Answer` with its
/// citations.
#[pyclass(module = "kgrag")]
pub struct AnswerStream {
    rx: Mutex<Receiver<Piece>>,
    done: Mutex<Option<crate::index::Answer>>,
}

impl AnswerStream {
    pub(crate) fn new(rx: Receiver<Piece>) -> Self {
        AnswerStream {
            rx: Mutex::new(rx),
            done: Mutex::new(None),
        }
    }
}

#[pymethods]
impl AnswerStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next piece of text (the GIL is released while waiting for it).
    fn __next__(&self, py: Python<'_>) -> PyResult<String> {
        loop {
            let got = py.detach(|| {
                let rx = self.rx.lock().unwrap_or_else(|p| p.into_inner());
                rx.recv_timeout(Duration::from_millis(200))
            });
            match got {
                Ok(Piece::Token(t)) => return Ok(t),
                Ok(Piece::Done(done)) => match *done {
                    Ok(answer) => {
                        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(answer);
                        return Err(PyStopIteration::new_err(()));
                    }
                    Err(e) => return Err(e.into()),
                },
                Err(RecvTimeoutError::Timeout) => {
                    // Lets Ctrl-C through while the model is thinking.
                    py.check_signals()?;
                }
                Err(RecvTimeoutError::Disconnected) => return Err(PyStopIteration::new_err(())),
            }
        }
    }

    /// The finished answer (`None` until the stream is exhausted).
    #[getter]
    fn answer(&self) -> Option<crate::index::Answer> {
        self.done.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
