//! `kgrag.Index` and what its queries return (`Hit`, `Context`, `Answer`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kgrag::{IndexReader, PassageHit, ReloadPolicy, Searcher};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{
    config_of, config_over, config_table_from_py, documents_from_py, ids_from_py, json_to_py,
    source_docs,
};
use crate::errors::{Failure, Outcome};
use crate::sources::{AnswerStream, Citation, Piece, Source};
use crate::{released, runtime};

/// The most passages one query may ask for.
const MAX_TOP_K: i64 = 10_000;

/// A kgrag index in a folder: documents added and deleted through it (each call one commit), searched,
/// read and answered with any of its strategies from any number of Python threads (the GIL is released
/// while Rust works).
#[pyclass(module = "kgrag", frozen)]
pub struct Index {
    index: kgrag::Index,
    reader: IndexReader,
    path: PathBuf,
    /// Changes through this object one at a time (the index has one writer).
    writing: Mutex<()>,
}

/// One ranked passage.
#[pyclass(module = "kgrag", frozen, get_all)]
#[derive(Clone)]
pub struct Hit {
    /// Rank, from 1.
    rank: usize,
    /// The chunk's id.
    chunk_id: String,
    /// The id of the (first) document holding the chunk.
    document_id: Option<String>,
    /// The ids of every document holding the chunk.
    documents: Vec<String>,
    /// The strategy's score.
    score: f64,
    /// The chunk's text.
    text: String,
    /// Where it came from: file, pages, section (`None` for documents given as text without a file).
    source: Option<Source>,
}

/// What a strategy retrieved for a question: the passages, the context the reader sees, its entities,
/// paths and statistics.
#[pyclass(module = "kgrag", frozen)]
#[derive(Clone)]
pub struct Context {
    /// The strategy.
    #[pyo3(get)]
    strategy: String,
    /// The question.
    #[pyo3(get)]
    question: String,
    /// The context as rendered for the reader's prompt.
    #[pyo3(get)]
    text: String,
    /// Tokens of `text` (the method's budget tokenizer).
    #[pyo3(get)]
    tokens: usize,
    /// The ranked passages.
    #[pyo3(get)]
    passages: Vec<Hit>,
    /// Names of the entities in the context, in the method's order.
    #[pyo3(get)]
    entities: Vec<String>,
    /// Reasoning paths as entity names (HiRAG's bridge, LeanRAG's paths).
    #[pyo3(get)]
    paths: Vec<Vec<String>>,
    /// Named numbers the method reports.
    #[pyo3(get)]
    stats: std::collections::BTreeMap<String, f64>,
    /// The full retrieval output as JSON, for `to_dict`.
    raw: serde_json::Value,
}

/// An answer with the passages and context it was read from.
#[pyclass(module = "kgrag", frozen, get_all)]
#[derive(Clone)]
pub struct Answer {
    /// The strategy.
    strategy: String,
    /// The question.
    question: String,
    /// The reader's answer (`None` with `reader = "none"`), citing its sources as `[n]`.
    answer: Option<String>,
    /// The sources the answer cites.
    citations: Vec<Citation>,
    /// Citation marks the reader wrote that named no source (removed from the answer).
    dropped_citations: u32,
    /// Milliseconds to the model's first token (an LLM reader).
    first_token_ms: Option<f64>,
    /// The ranked passages.
    passages: Vec<Hit>,
    /// The retrieval output the answer was read from.
    context: Context,
    /// Milliseconds retrieving (query embedding included).
    retrieve_ms: f64,
    /// Milliseconds in the reader.
    answer_ms: f64,
    /// The index generation that answered.
    generation: u64,
}

impl Hit {
    fn from_passage(p: PassageHit) -> Self {
        Hit {
            rank: p.rank,
            chunk_id: p.chunk_id.as_str().to_owned(),
            document_id: p.documents.first().cloned(),
            documents: p.documents,
            score: p.score,
            text: p.text,
            source: p.source.map(Source::of),
        }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "rank": self.rank,
            "chunk_id": self.chunk_id,
            "document_id": self.document_id,
            "documents": self.documents,
            "score": self.score,
            "text": self.text,
            "source": self.source.as_ref().map(Source::json),
        })
    }
}

fn preview(text: &str, chars: usize) -> String {
    let mut s: String = text.chars().take(chars).collect();
    if text.chars().count() > chars {
        s.push('…');
    }
    s.replace('\n', " ")
}

#[pymethods]
impl Hit {
    /// The hit as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.json())
    }

    fn __repr__(&self) -> String {
        format!(
            "Hit(rank={}, chunk_id={:?}, document_id={:?}, score={:.6}, text={:?})",
            self.rank,
            self.chunk_id,
            self.document_id.as_deref().unwrap_or(""),
            self.score,
            preview(&self.text, 60)
        )
    }
}

#[pymethods]
impl Context {
    /// The full retrieval output as a dict (passages, facts, entities, relations, reports, paths, the
    /// rendered context, its tokens, the method's statistics).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.raw)
    }

    fn __str__(&self) -> String {
        self.text.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "Context(strategy={:?}, tokens={}, passages={}, entities={})",
            self.strategy,
            self.tokens,
            self.passages.len(),
            self.entities.len()
        )
    }
}

#[pymethods]
impl Answer {
    /// The answer as a dict (the context as `Context.to_dict` gives it).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = serde_json::json!({
            "strategy": self.strategy,
            "question": self.question,
            "answer": self.answer,
            "citations": self.citations.iter().map(Citation::json).collect::<Vec<_>>(),
            "dropped_citations": self.dropped_citations,
            "first_token_ms": self.first_token_ms,
            "passages": self.passages.iter().map(Hit::json).collect::<Vec<_>>(),
            "context": self.context.raw,
            "retrieve_ms": self.retrieve_ms,
            "answer_ms": self.answer_ms,
            "generation": self.generation,
        });
        json_to_py(py, &v)
    }

    fn __str__(&self) -> String {
        self.answer.clone().unwrap_or_default()
    }

    fn __repr__(&self) -> String {
        format!(
            "Answer(strategy={:?}, answer={:?}, passages={}, generation={})",
            self.strategy,
            self.answer.as_deref().map(|a| preview(a, 80)),
            self.passages.len(),
            self.generation
        )
    }
}

/// The `Context` of `ctx`, whose first passages (with their documents and texts) are `passages`.
fn context_of(
    strategy: &str,
    question: &str,
    ctx: kgrag::types::RetrievedContext,
    passages: Vec<Hit>,
) -> Context {
    let raw = serde_json::to_value(&ctx).unwrap_or(serde_json::Value::Null);
    Context {
        strategy: strategy.to_owned(),
        question: question.to_owned(),
        entities: ctx.entities.iter().map(|e| e.name.clone()).collect(),
        paths: ctx.paths,
        stats: ctx.stats,
        tokens: ctx.context_tokens,
        text: ctx.rendered,
        passages,
        raw,
    }
}

/// The Python `Answer` of a query's answer.
fn answer_of(a: kgrag::QueryAnswer) -> Answer {
    let passages = hits(a.passages);
    let context = context_of(&a.strategy, &a.question, a.context, passages.clone());
    Answer {
        strategy: a.strategy,
        question: a.question,
        answer: a.answer,
        citations: a.citations.into_iter().map(Citation::of).collect(),
        dropped_citations: a.dropped_citations,
        first_token_ms: a.first_token_ms,
        passages,
        context,
        retrieve_ms: a.retrieve_ms,
        answer_ms: a.answer_ms,
        generation: a.generation,
    }
}

fn hits(passages: Vec<PassageHit>) -> Vec<Hit> {
    passages.into_iter().map(Hit::from_passage).collect()
}

impl Index {
    fn wrap(index: kgrag::Index, path: PathBuf) -> Outcome<Self> {
        let reader = index.reader_with(ReloadPolicy::OnCommit)?;
        Ok(Index {
            index,
            reader,
            path,
            writing: Mutex::new(()),
        })
    }

    /// The strategy to use (`None`: the configuration's), checked against what this generation answers.
    fn strategy(&self, searcher: &Searcher, strategy: Option<String>) -> Outcome<String> {
        let strategy = strategy.unwrap_or_else(|| self.index.config().retriever.strategy.clone());
        searcher.check_strategy(&strategy).map_err(|e| match e {
            kgrag::KgragError::Config(message) => Failure::Strategy(message),
            other => Failure::Kgrag(other),
        })?;
        Ok(strategy)
    }

    /// `top_k` checked (`None`: the configuration's).
    fn top_k(&self, top_k: Option<i64>) -> Outcome<usize> {
        match top_k {
            None => Ok(self.index.config().retriever.top_k),
            Some(k) if (1..=MAX_TOP_K).contains(&k) => Ok(usize::try_from(k).unwrap_or(1)),
            Some(k) => Err(Failure::Value(format!(
                "top_k must be between 1 and {MAX_TOP_K}, not {k}"
            ))),
        }
    }

    /// The searcher, strategy and top_k of one query, checked.
    fn query(
        &self,
        question: &str,
        strategy: Option<String>,
        top_k: Option<i64>,
    ) -> Outcome<(Searcher, String, usize)> {
        if question.trim().is_empty() {
            return Err(Failure::Value("the question is empty".into()));
        }
        let searcher = self.reader.searcher();
        let strategy = self.strategy(&searcher, strategy)?;
        Ok((searcher, strategy, self.top_k(top_k)?))
    }

    /// Runs one change through the index's writer and commits it.
    fn change(&self, change: Change) -> Outcome<serde_json::Value> {
        let _one = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let rt = runtime()?;
        rt.block_on(async {
            let mut writer = self.index.writer()?;
            let mut summary = match change {
                Change::Add(docs) => writer.add_documents(docs).await?,
                Change::Delete(ids) => writer.delete_documents(&ids).await?,
            };
            summary.generation = writer.commit().await?;
            Ok(serde_json::json!({
                "documents": summary.documents,
                "chunks": summary.chunks,
                "skipped": summary.skipped,
                "generation": summary.generation,
            }))
        })
    }
}

enum Change {
    Add(Vec<kgrag::documents::SourceDoc>),
    Delete(Vec<String>),
}

fn opened(path: &Path) -> Outcome<()> {
    if path.is_dir() {
        Ok(())
    } else if path.exists() {
        Err(Failure::NotFound(format!(
            "no index at {}: it is a file, not an index folder",
            path.display()
        )))
    } else {
        Err(Failure::NotFound(format!(
            "no index at {}: there is no such folder (make one with kgrag.Index.create)",
            path.display()
        )))
    }
}

#[pymethods]
impl Index {
    /// A new, empty index in the folder `path` (made if missing; an error if it already holds one), with
    /// `config` (a dict, TOML text or the path of a TOML file; default: offline, every method).
    #[staticmethod]
    #[pyo3(signature = (path, config=None, *, progress=false))]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        config: Option<Bound<'_, PyAny>>,
        progress: bool,
    ) -> PyResult<Self> {
        let table = config_table_from_py(config.as_ref())?;
        let config = match table {
            Some(t) => config_of(&t)?,
            None => kgrag::config::Config::default(),
        };
        crate::show_progress(progress);
        released(py, move || {
            let index = kgrag::Index::options()
                .config(config)
                .progress(progress)
                .create(&path)?;
            Index::wrap(index, path)
        })
    }

    /// The index in the folder `path`, with the configuration it was built with; `config` (a dict, TOML
    /// text or a path) is laid over that configuration key by key — models, the reader and retrieval
    /// settings may change, the index settings must stay those it was built with.
    #[staticmethod]
    #[pyo3(signature = (path, config=None, *, progress=false))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        config: Option<Bound<'_, PyAny>>,
        progress: bool,
    ) -> PyResult<Self> {
        let over = config_table_from_py(config.as_ref())?;
        crate::show_progress(progress);
        released(py, move || {
            opened(&path)?;
            let mut options = kgrag::Index::options().progress(progress);
            if let Some(over) = over {
                // The stored configuration, read without loading a model.
                let stored = kgrag::Index::built_with(&path)?;
                options = options.config(config_over(&stored, over)?);
            }
            let index = options.open(&path)?;
            Index::wrap(index, path)
        })
    }

    /// The index's folder.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The strategy a query without one uses (the configuration's `retriever.strategy`).
    #[getter]
    fn default_strategy(&self) -> String {
        self.index.config().retriever.strategy.clone()
    }

    /// The committed generation queries are answered from (0: nothing committed).
    #[getter]
    fn generation(&self) -> u64 {
        self.reader.searcher().generation()
    }

    /// Adds `documents` (strings, or dicts with `text` and optionally `id` and `title`) and commits them
    /// as one generation; documents already present with the same text are skipped. Returns
    /// `{"documents", "chunks", "skipped", "generation"}`.
    fn add<'py>(
        &self,
        py: Python<'py>,
        documents: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let docs = documents_from_py(documents)?;
        let summary = released(py, || {
            let docs = source_docs(docs)?;
            self.change(Change::Add(docs))
        })?;
        json_to_py(py, &summary)
    }

    /// Adds the documents of files or folders — PDF, Word, PowerPoint, spreadsheets, web pages, EPUB,
    /// text, Markdown, `.jsonl`, `.json`, read as `kgrag index` reads them (a folder's hidden and
    /// `.gitignore`'d files left out, `include`/`exclude` globs) — and commits them as one generation. A
    /// file that cannot be read is listed in the summary's `skipped_files` with the reason.
    #[pyo3(signature = (paths, include=None, exclude=None))]
    fn add_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        include: Option<Vec<String>>,
        exclude: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let summary = released(py, || {
            let options = kgrag::documents::ReadOptions {
                limits: self.index.config().documents.limits(),
                include: include.unwrap_or_default(),
                exclude: exclude.unwrap_or_default(),
            };
            let report = kgrag::documents::read_paths(&paths, &options)?;
            let mut summary = self.change(Change::Add(report.docs))?;
            summary["files_by_format"] =
                serde_json::to_value(&report.by_format).unwrap_or_default();
            summary["skipped_files"] = serde_json::to_value(&report.skipped).unwrap_or_default();
            Ok(summary)
        })?;
        json_to_py(py, &summary)
    }

    /// Deletes the documents with these ids (a str is one id) and commits; ids not found are listed in
    /// `skipped`.
    fn delete<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let ids = ids_from_py(ids)?;
        let summary = released(py, || self.change(Change::Delete(ids)))?;
        json_to_py(py, &summary)
    }

    /// The `top_k` passages `strategy` ranks highest for `question` (defaults: the configuration's
    /// `retriever.strategy` and `retriever.top_k`).
    #[pyo3(signature = (question, strategy=None, top_k=None))]
    fn search(
        &self,
        py: Python<'_>,
        question: &str,
        strategy: Option<String>,
        top_k: Option<i64>,
    ) -> PyResult<Vec<Hit>> {
        released(py, || {
            let (searcher, strategy, top_k) = self.query(question, strategy, top_k)?;
            Ok(hits(
                runtime()?.block_on(searcher.search(question, &strategy, top_k))?,
            ))
        })
    }

    /// What `strategy` retrieves for `question`: passages, the rendered context, entities, paths.
    #[pyo3(signature = (question, strategy=None, top_k=None))]
    fn context(
        &self,
        py: Python<'_>,
        question: &str,
        strategy: Option<String>,
        top_k: Option<i64>,
    ) -> PyResult<Context> {
        released(py, || {
            let (searcher, strategy, top_k) = self.query(question, strategy, top_k)?;
            let ctx = runtime()?.block_on(searcher.context(question, &strategy, top_k))?;
            let passages = hits(searcher.passages(&ctx, top_k));
            Ok(context_of(&strategy, question, ctx, passages))
        })
    }

    /// Retrieves with `strategy` and reads the answer (the configured reader: an LLM, or the extractive
    /// reader offline).
    #[pyo3(signature = (question, strategy=None, top_k=None))]
    fn answer(
        &self,
        py: Python<'_>,
        question: &str,
        strategy: Option<String>,
        top_k: Option<i64>,
    ) -> PyResult<Answer> {
        released(py, || {
            let (searcher, strategy, top_k) = self.query(question, strategy, top_k)?;
            let a = runtime()?.block_on(searcher.answer(question, &strategy, top_k))?;
            Ok(answer_of(a))
        })
    }

    /// Retrieves with `strategy` and reads the answer as a stream: iterate it for the reader's text as
    /// it is generated; its `answer` is the finished `Answer` (with citations) once exhausted.
    #[pyo3(signature = (question, strategy=None, top_k=None))]
    fn answer_stream(
        &self,
        py: Python<'_>,
        question: &str,
        strategy: Option<String>,
        top_k: Option<i64>,
    ) -> PyResult<AnswerStream> {
        let (searcher, strategy, top_k) = released(py, || self.query(question, strategy, top_k))?;
        let rt = released(py, runtime)?;
        let (tx, rx) = std::sync::mpsc::channel::<Piece>();
        let question = question.to_owned();
        rt.spawn(async move {
            let tokens = tx.clone();
            let sink = move |piece: &str| {
                let _ = tokens.send(Piece::Token(piece.to_owned()));
            };
            let done = searcher
                .answer_streaming(&question, &strategy, top_k, Some(&sink))
                .await
                .map(answer_of)
                .map_err(Failure::from);
            let _ = tx.send(Piece::Done(Box::new(done)));
        });
        Ok(AnswerStream::new(rx))
    }

    /// What `kgrag stats --json` prints: documents, chunks, per-method statistics, bytes, caches, model
    /// use.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = released(py, || Ok(self.reader.searcher().stats()?))?;
        json_to_py(py, &stats)
    }

    /// The strategies this index answers with (its built methods' strategies).
    fn strategies(&self) -> Vec<String> {
        self.reader
            .searcher()
            .strategies()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// The documents in the index: `{"id", "title", "source", "chunks"}` each.
    fn documents<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let searcher = self.reader.searcher();
        let list = pyo3::types::PyList::empty(py);
        for d in searcher.documents() {
            let item = PyDict::new(py);
            item.set_item("id", &d.id)?;
            item.set_item("title", &d.title)?;
            item.set_item("source", &d.source)?;
            item.set_item("chunks", d.chunks.len())?;
            list.append(item)?;
        }
        Ok(list.into_any())
    }

    /// The number of documents.
    fn __len__(&self) -> usize {
        self.reader.searcher().documents().len()
    }

    fn __repr__(&self) -> String {
        let searcher = self.reader.searcher();
        format!(
            "Index(path={:?}, generation={}, documents={}, strategies=[{}])",
            self.path.display().to_string(),
            searcher.generation(),
            searcher.documents().len(),
            searcher.strategies().join(", ")
        )
    }
}
