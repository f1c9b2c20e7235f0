//! Documents: the list (`GET /v1/documents`), additions (JSON or an uploaded file of any format kgrag
//! reads), deletions, and the original file of a document (`GET /v1/documents/{id}/file`), each change one
//! commit through the index's writer on a thread of its own.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{RawPathParams, Request, State as Shared};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use kgrag::documents::SourceDoc;
use kgrag::ChangeSummary;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{check_range, committed, ApiQuery};
use crate::catalog::Lease;
use crate::error::{ApiError, ApiResult};
use crate::indexes::{Changing, Reading};
use crate::State;

type AppState = Arc<State>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Page {
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

pub(crate) async fn list_documents(
    target: Reading,
    ApiQuery(page): ApiQuery<Page>,
) -> ApiResult<Json<Value>> {
    let searcher = target.lease.reader.searcher();
    let limit = check_range("limit", page.limit.unwrap_or(50), 1, 1000)?;
    check_range("offset", page.offset, 0, 1_000_000_000)?;
    let docs = searcher.documents();
    let page_docs: Vec<Value> = docs
        .iter()
        .skip(page.offset)
        .take(limit)
        .map(record)
        .collect();
    Ok(Json(json!({
        "index": target.lease.name,
        "total": docs.len(),
        "offset": page.offset,
        "limit": limit,
        "generation": searcher.generation(),
        "documents": page_docs,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewDocument {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) title: Option<String>,
    pub(crate) text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewDocuments {
    pub(crate) documents: Vec<NewDocument>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Upload {
    #[serde(default)]
    filename: Option<String>,
}

/// The most documents one request may add.
const MAX_DOCUMENTS: usize = 100_000;

/// Documents given as JSON, checked: ids not empty and unique, texts not empty.
pub(crate) fn json_documents(docs: NewDocuments) -> ApiResult<Vec<SourceDoc>> {
    if docs.documents.is_empty() {
        return Err(ApiError::unprocessable("\"documents\" is empty"));
    }
    if docs.documents.len() > MAX_DOCUMENTS {
        return Err(ApiError::unprocessable(format!(
            "{} documents in one request: send at most {MAX_DOCUMENTS}",
            docs.documents.len()
        )));
    }
    let docs = docs
        .documents
        .into_iter()
        .map(|d| kgrag::documents::NewDocument {
            id: d.id,
            title: d.title,
            text: d.text,
        })
        .collect();
    kgrag::documents::from_new(docs, "api").map_err(|e| match e {
        kgrag::KgragError::Input(message) => ApiError::unprocessable(message),
        other => ApiError::from(other),
    })
}

/// The body of `request`, read within the server's timeout: 413 past the body limit, 400 when the client
/// stops sending, 503 when it is too slow.
async fn read_body(state: &State, request: Request) -> ApiResult<axum::body::Bytes> {
    let limit = state.options.body_limit;
    let timeout = state.options.request_timeout;
    match tokio::time::timeout(timeout, axum::body::to_bytes(request.into_body(), limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let text = e.to_string();
            let too_large = e.into_inner().is::<http_body_util::LengthLimitError>();
            Err(if too_large {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the body is larger than the server's limit of {limit} bytes (--max-body-mib)"),
                )
            } else {
                ApiError::bad_request(format!("the body could not be read: {text}"))
            })
        }
        Err(_) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!(
                "the body did not arrive within {:.0} s (the server's --timeout)",
                timeout.as_secs_f64()
            ),
        )),
    }
}

/// JSON from bytes, its errors as [`ApiJson`]'s: 400 malformed, 422 wrong fields.
fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            ApiError::unprocessable(format!("the JSON body has the wrong fields: {e}"))
        } else {
            ApiError::bad_request(format!("the body is not valid JSON: {e}"))
        }
    })
}

/// `POST /v1/documents`: JSON documents, or one uploaded file named by `?filename=`.
pub(crate) async fn add_documents(
    Shared(state): Shared<AppState>,
    target: Changing,
    ApiQuery(upload): ApiQuery<Upload>,
    request: Request,
) -> ApiResult<Json<Value>> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim_start();
    let is_json = content_type.starts_with("application/json");
    let is_text = content_type.starts_with("text/plain");
    let json_file = upload
        .filename
        .as_deref()
        .is_some_and(|n| n.ends_with(".json") || n.ends_with(".jsonl"));
    if let Some(name) = &upload.filename {
        check_file_name(name)?;
    }
    // JSON is documents, unless ?filename= names a .json or .jsonl file (a corpus file's bytes).
    let docs = if is_json && !json_file {
        let bytes = read_body(&state, request).await?;
        json_documents(parse_json::<NewDocuments>(&bytes)?)?
    } else {
        if upload.filename.is_none() && !is_text {
            return Err(ApiError::bad_request(
                "send JSON {\"documents\": [{\"id\", \"text\"}]} with Content-Type: application/json, \
                 or a file's bytes with ?filename=NAME (.pdf, .docx, .pptx, .xlsx, .xls, .ods, .html, \
                 .epub, .txt, .md, .jsonl, .json)",
            ));
        }
        let bytes = read_body(&state, request).await?;
        // Plain text without a name: one document named by its content's hash (the same text again is
        // the same document, skipped).
        let name = upload.filename.unwrap_or_else(|| text_name(&bytes));
        let limits = target.lease.reader.searcher().config().documents.limits();
        kgrag::documents::parse_upload_with(&name, bytes.to_vec(), &limits)?
    };
    let summary = change(&target.lease, Change::Add(docs)).await?;
    Ok(Json(summary_json(&summary)))
}

/// A `?filename=` kgrag can read: not blank, with the extension of a format it reads.
fn check_file_name(name: &str) -> ApiResult<()> {
    let ext = name
        .rsplit_once('.')
        .map_or("", |(_, e)| e)
        .to_ascii_lowercase();
    let known = kgrag::documents::Format::from_extension(&ext).is_some()
        || matches!(ext.as_str(), "json" | "jsonl");
    if name.trim().is_empty() || !known {
        return Err(ApiError::unprocessable(format!(
            "?filename={name:?}: give the file's name with its extension (.pdf, .docx, .pptx, .xlsx, \
             .xls, .ods, .html, .epub, .txt, .md, .jsonl, .json)"
        )));
    }
    Ok(())
}

/// `inline` with the file's name: an ASCII stand-in (`filename`) and the name itself, UTF-8 and
/// percent-encoded (`filename*`, RFC 6266): a header value holds no other bytes.
fn content_disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("inline; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// The id of a text sent without a name: `text-` and the first 16 hex digits of its SHA-256.
fn text_name(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = hex::encode(Sha256::digest(bytes));
    format!("text-{}.txt", &digest[..16])
}

/// `GET /v1/documents/{id}`: one document's record, as the list shows it.
fn document(target: &Reading, id: &str) -> ApiResult<Response> {
    let searcher = committed(&target.lease)?;
    let d = searcher
        .documents()
        .iter()
        .find(|d| d.id == id)
        .ok_or_else(|| ApiError::not_found(format!("no document {id:?}")))?;
    Ok(Json(record(d)).into_response())
}

/// A document as the API shows it.
fn record(d: &kgrag::index_dir::DocRecord) -> Value {
    json!({
        "id": d.id,
        "title": d.title,
        "source": d.source,
        "chunks": d.chunks.len(),
        "doc_id": d.doc_id,
        "file": d.file,
    })
}

/// `GET /v1/documents/{id}/file`: the document's original file as the index keeps it, with its content
/// type, shown in the browser (`inline`): a PDF viewer opens it at `#page=N`. The id may hold slashes
/// (`reports/q3.pdf`), as is or percent-encoded.
pub(crate) async fn document_file(
    target: Reading,
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
) -> ApiResult<Response> {
    let path = id_param(params)?;
    let Some(id) = path.strip_suffix("/file") else {
        return document(&target, &path);
    };
    let searcher = committed(&target.lease)?;
    if !searcher.documents().iter().any(|d| d.id == id) {
        return Err(ApiError::not_found(format!("no document {id:?}")));
    }
    let Some((file, bytes)) = searcher.original(id)? else {
        return Err(ApiError::not_found(format!(
            "document {id:?} has no original file in the index (it was given as text, or the index was \
             built with [index] keep_originals = false)"
        )));
    };
    let content_type =
        kgrag::documents::Format::from_extension(kgrag::originals::extension(&file.format))
            .map_or("application/octet-stream", |f| f.content_type());
    let name = file.name.rsplit('/').next().unwrap_or(&file.name);
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::CONTENT_DISPOSITION, content_disposition(name)),
            (header::CACHE_CONTROL, "private, max-age=3600".to_owned()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        ],
        bytes,
    )
        .into_response())
}

pub(crate) async fn delete_document(
    target: Changing,
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
) -> ApiResult<Json<Value>> {
    let id = id_param(params)?;
    let lease = &target.lease;
    let known = |lease: &Lease| {
        lease
            .reader
            .searcher()
            .documents()
            .iter()
            .any(|d| d.id == id)
    };
    if !known(lease) {
        return Err(ApiError::not_found(format!("no document {id:?}")));
    }
    match change(lease, Change::Delete(vec![id.clone()])).await {
        Ok(summary) => Ok(Json(summary_json(&summary))),
        // Deleted by another request between the check and the writer's turn.
        Err(e) if e.status == StatusCode::UNPROCESSABLE_ENTITY && !known(lease) => {
            Err(ApiError::not_found(format!("no document {id:?}")))
        }
        Err(e) => Err(e),
    }
}

/// The `{*id}` of a document route (percent-decoded).
fn id_param(
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
) -> ApiResult<String> {
    let params = params.map_err(|r| ApiError::bad_request(r.body_text()))?;
    params
        .iter()
        .find(|(k, _)| *k == "id")
        .map(|(_, v)| v.to_owned())
        .ok_or_else(|| ApiError::bad_request("the route names no document"))
}

fn summary_json(s: &ChangeSummary) -> Value {
    json!({
        "documents": s.documents,
        "chunks": s.chunks,
        "skipped": s.skipped,
        "generation": s.generation,
    })
}

/// A change of the documents.
pub(crate) enum Change {
    /// Add these.
    Add(Vec<SourceDoc>),
    /// Delete these ids.
    Delete(Vec<String>),
}

/// Runs `change` and commits it through the index's writer, on the writer's thread, one change at a time:
/// a client that goes away does not cut a commit short (the change holds its own lease on the index, so
/// the index stays loaded until it is committed). Queries keep being answered from the previous
/// generation until the commit is written.
pub(crate) async fn change(lease: &Lease, change: Change) -> ApiResult<ChangeSummary> {
    lease.writer.submit(change, lease.clone()).await
}

/// A change waiting for the writer's thread, and where its outcome goes.
enum Job {
    Change(
        Change,
        tokio::sync::oneshot::Sender<ApiResult<ChangeSummary>>,
        Lease,
    ),
    /// Answered once every job before it is done.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The thread that makes document changes. The index's writer is used from one thread (its futures are
/// not `Send`), on a runtime of its own; changes queue in order.
pub(crate) struct WriterThread {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl WriterThread {
    /// Starts the thread for `index`; changes arriving after `closing` (the server stops) or `dropped`
    /// (the index is dropped) is set are refused.
    pub(crate) fn start(
        index: kgrag::Index,
        closing: Arc<std::sync::atomic::AtomicBool>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> std::io::Result<Self> {
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("kgrag-writer".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(job) = queue.recv().await {
                        match job {
                            Job::Flush(done) => {
                                let _ = done.send(());
                            }
                            Job::Change(change, reply, lease) => {
                                let outcome = if closing.load(Ordering::SeqCst) {
                                    metrics.change_done("refused");
                                    Err(ApiError::unavailable(
                                        "the server is shutting down: the change was not made",
                                    ))
                                } else if dropped.load(Ordering::SeqCst) {
                                    metrics.change_done("refused");
                                    Err(ApiError::not_found(
                                        "the index was dropped: the change was not made",
                                    ))
                                } else {
                                    use futures_util::FutureExt;
                                    metrics.change_running(1);
                                    // A panic fails this change, not every later one.
                                    let outcome = std::panic::AssertUnwindSafe(commit(&index, change))
                                        .catch_unwind()
                                        .await
                                        .unwrap_or_else(|_| {
                                            tracing::error!("a document change panicked; it was not committed");
                                            Err(ApiError::internal(
                                                "the change failed inside the index's writer and was not committed",
                                            ))
                                        });
                                    metrics.change_running(-1);
                                    metrics.change_done(if outcome.is_ok() { "committed" } else { "failed" });
                                    outcome
                                };
                                let _ = reply.send(outcome);
                                drop(lease);
                            }
                        }
                    }
                });
            })?;
        Ok(Self { jobs })
    }

    async fn submit(&self, change: Change, lease: Lease) -> ApiResult<ChangeSummary> {
        let (reply, outcome) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Job::Change(change, reply, lease))
            .map_err(|_| ApiError::unavailable("the index's writer has stopped"))?;
        outcome
            .await
            .map_err(|_| ApiError::internal("the index's writer stopped during the change"))?
    }

    /// Waits until every change submitted so far is done (committed or refused).
    pub(crate) async fn flush(&self) {
        let (done, finished) = tokio::sync::oneshot::channel();
        if self.jobs.send(Job::Flush(done)).is_ok() {
            let _ = finished.await;
        }
    }
}

async fn commit(index: &kgrag::Index, change: Change) -> ApiResult<ChangeSummary> {
    let mut writer = index.writer().map_err(writer_error)?;
    let mut summary = match change {
        Change::Add(docs) => writer.add_documents(docs).await?,
        Change::Delete(ids) => writer.delete_documents(&ids).await?,
    };
    summary.generation = writer.commit().await?;
    Ok(summary)
}

/// The writer could not be opened: another process holds it (503), or the index is unusable.
fn writer_error(e: kgrag::KgragError) -> ApiError {
    let mut err = ApiError::from(e);
    if err.status == StatusCode::INTERNAL_SERVER_ERROR {
        err.status = StatusCode::SERVICE_UNAVAILABLE;
        err.code = "unavailable";
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_of_any_script_makes_a_valid_header() {
        let v = content_disposition("Łódź \"plan\".pdf");
        assert_eq!(
            v,
            "inline; filename=\"__d_ _plan_.pdf\"; filename*=UTF-8''%C5%81%C3%B3d%C5%BA%20%22plan%22.pdf"
        );
        assert!(axum::http::HeaderValue::from_str(&v).is_ok());
        assert_eq!(
            content_disposition("q3.pdf"),
            "inline; filename=\"q3.pdf\"; filename*=UTF-8''q3.pdf"
        );
    }

    #[test]
    fn upload_names_need_a_format_kgrag_reads() {
        assert!(check_file_name("notes.md").is_ok() && check_file_name("Q3.PDF").is_ok());
        assert!(check_file_name("corpus.jsonl").is_ok());
        for bad in ["", "  ", "notes", "x.exe", "x."] {
            assert_eq!(
                check_file_name(bad).unwrap_err().status,
                StatusCode::UNPROCESSABLE_ENTITY
            );
        }
        assert_eq!(text_name(b"abc"), "text-ba7816bf8f01cfea.txt");
    }
}
