//! The JSON API's routes and handlers, and the middleware every request passes (metrics, the key, the
//! concurrency limit, the timeout).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, MatchedPath, Path, Query, Request, State as Shared};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use kgrag::documents::SourceDoc;
use kgrag::types::RetrievedContext;
use kgrag::{ChangeSummary, Searcher};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::State;

type AppState = Arc<State>;

/// The routes of the JSON API, the OpenAI-compatible endpoints, the page, `/metrics` and `/openapi.json`
/// (without the guard: [`layered`] adds it once every route, `/mcp` included, is in).
pub(crate) fn routes(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/openapi.json", get(crate::assets::openapi))
        .route("/metrics", get(metrics))
        .route("/v1/stats", get(stats))
        .route("/v1/strategies", get(strategies))
        .route("/v1/query", post(query))
        .route("/v1/compare", post(compare))
        .route("/v1/documents", get(list_documents).post(add_documents))
        .route("/v1/documents/{*id}", delete(delete_document))
        .route("/v1/graph", get(crate::graph::graph))
        .route("/v1/communities", get(crate::graph::communities))
        .route("/v1/models", get(crate::openai::models))
        .route(
            "/v1/chat/completions",
            post(crate::openai::chat_completions),
        )
        .route("/", get(crate::assets::page))
        .route("/assets/{file}", get(crate::assets::asset))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// `router` with the body limit and the guard around every route.
pub(crate) fn layered(router: Router, state: AppState) -> Router {
    router
        .layer(axum::extract::DefaultBodyLimit::max(
            state.options.body_limit,
        ))
        .layer(middleware::from_fn_with_state(state, guard))
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {method} {}", uri.path()))
}

/// Paths anyone may fetch: the health check and the page's files.
fn is_public(path: &str) -> bool {
    path == "/health" || path == "/" || path.starts_with("/assets/")
}

/// Whether `headers` carry the key: the scheme `Bearer` in any case, the token compared as SHA-256
/// digests in constant time (neither its bytes nor its length leak through timing).
fn authorized(headers: &HeaderMap, key: &str) -> bool {
    use sha2::{Digest, Sha256};
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    let (a, b) = (
        Sha256::digest(token.trim().as_bytes()),
        Sha256::digest(key.as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The host name of an authority (`host`, `host:port`, `[v6]:port`), lower case.
fn host_name(authority: &str) -> String {
    let a = authority.trim();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_ascii_lowercase();
    }
    a.rsplit_once(':')
        .map_or(a, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                a
            }
        })
        .to_ascii_lowercase()
}

/// Without a key on a loopback address, the server answers only requests addressed to a loopback name
/// or to a name given with `--allowed-host` (a page elsewhere cannot reach it through DNS rebinding), and
/// takes changes from a browser only from its own origin (`Origin` equal to `Host`; `null` refused).
fn local_request_problem(
    headers: &HeaderMap,
    method: &Method,
    allowed: &[String],
) -> Option<String> {
    let text = |name| match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim().to_owned()))
            .map_err(|_| ()),
    };
    let (Ok(host), Ok(origin)) = (text(header::HOST), text(header::ORIGIN)) else {
        return Some("the Host or Origin header is not text".into());
    };
    let host = host.unwrap_or_default();
    let name = host_name(&host);
    let allowed_name = matches!(name.as_str(), "localhost" | "::1")
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
        || allowed.iter().any(|h| {
            let h = h.trim().to_ascii_lowercase();
            h == name || h == host.to_ascii_lowercase()
        });
    if !host.is_empty() && !allowed_name {
        return Some(format!(
            "Host {host:?} is not a loopback name: without an API key this server answers only \
             requests to localhost, 127.0.0.1 or a name given with --allowed-host"
        ));
    }
    if *method != Method::GET && *method != Method::HEAD {
        if let Some(origin) = origin {
            let authority = origin.split_once("://").map_or("", |(_, a)| a);
            if host.is_empty() || !authority.eq_ignore_ascii_case(&host) {
                return Some(format!(
                    "a page of {origin} may not change this server's index: without an API key only \
                     the server's own page may"
                ));
            }
        }
    }
    None
}

/// A strategy's task in `compare`, aborted when the request is dropped (a timeout, a client gone): it
/// must not run on past the request's permit.
struct AbortOnDrop(tokio::task::JoinHandle<ApiResult<Outcome>>);

impl AbortOnDrop {
    async fn join(&mut self) -> ApiResult<Outcome> {
        match (&mut self.0).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => {
                tracing::error!("a query panicked: {e}");
                Err(ApiError::internal("the query failed inside the server"))
            }
            Err(_) => Err(ApiError::unavailable("the query was cancelled")),
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Decrements the in-flight gauge when the request ends, also when the client goes away mid-request.
struct InFlight<'a>(&'a crate::metrics::Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight(-1);
    }
}

/// Metrics, the key, the concurrency limit and the timeout, around every request.
async fn guard(Shared(state): Shared<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let endpoint = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let path = request.uri().path().to_owned();
    state.metrics.in_flight(1);
    let flight = InFlight(&state.metrics);
    let response = guarded(&state, &path, request, next).await;
    drop(flight);
    let status = response.status().as_u16();
    state.metrics.request(&endpoint, status);
    if !matches!(
        endpoint.as_str(),
        "/v1/query" | "/v1/compare" | "/v1/chat/completions"
    ) {
        state
            .metrics
            .latency(&endpoint, "", started.elapsed().as_secs_f64());
    }
    response
}

async fn guarded(state: &State, path: &str, request: Request, next: Next) -> Response {
    if state.options.api_key.is_none() && state.options.listen.ip().is_loopback() {
        if let Some(problem) = local_request_problem(
            request.headers(),
            request.method(),
            &state.options.allowed_hosts,
        ) {
            return ApiError::new(StatusCode::FORBIDDEN, "forbidden", problem).into_response();
        }
    }
    if let Some(key) = &state.options.api_key {
        if !is_public(path) && !authorized(request.headers(), key) {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs an API key: send `Authorization: Bearer <key>`",
            )
            .into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return r;
        }
    }
    if path == "/health" || path == "/metrics" {
        return next.run(request).await;
    }
    let timeout = state.options.request_timeout;
    let permit = match tokio::time::timeout(timeout, state.limiter.acquire()).await {
        Ok(Ok(p)) => p,
        _ => {
            state.metrics.busy();
            return ApiError::unavailable(format!(
                "the server is busy: {} requests are being answered; try again",
                state.options.max_concurrency
            ))
            .into_response();
        }
    };
    // A document change is not cut short once its body is read (the handler reads it within the
    // timeout): it commits on the writer's thread whatever the client does. MCP's event streams last.
    let is_change = path.starts_with("/v1/documents") && request.method() != Method::GET;
    let response = if is_change || path.starts_with("/mcp") {
        next.run(request).await
    } else {
        match tokio::time::timeout(timeout, next.run(request)).await {
            Ok(r) => r,
            Err(_) => {
                state.metrics.timeout();
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "timeout",
                    format!(
                        "the request took longer than {:.0} s (the server's --timeout)",
                        timeout.as_secs_f64()
                    ),
                )
                .into_response()
            }
        }
    };
    drop(permit);
    response
}

/// A JSON body whose rejections are the API's errors (400 malformed, 413 too large, 415 not JSON, 422
/// wrong fields).
pub(crate) struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Self(v)),
            Err(rejection) => Err(json_rejection(&rejection)),
        }
    }
}

fn json_rejection(rejection: &JsonRejection) -> ApiError {
    let status = rejection.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNPROCESSABLE_ENTITY => "unprocessable",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "bad_request",
    };
    ApiError::new(status, code, rejection.body_text())
}

/// Query-string parameters whose rejections are the API's errors.
pub(crate) struct ApiQuery<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(Self(v)),
            Err(r) => Err(ApiError::new(r.status(), "bad_request", r.body_text())),
        }
    }
}

async fn health(Shared(state): Shared<AppState>) -> Json<Value> {
    let searcher = state.reader.searcher();
    Json(json!({"status": "ok", "generation": searcher.generation()}))
}

async fn metrics(Shared(state): Shared<AppState>) -> Response {
    let searcher = state.reader.searcher();
    let text = state
        .metrics
        .render(searcher.generation(), searcher.documents().len());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The searcher of the newest committed generation, or 503 when nothing is committed yet.
pub(crate) fn committed(state: &State) -> ApiResult<Searcher> {
    let searcher = state.reader.searcher();
    if searcher.generation() == 0 {
        return Err(ApiError::unavailable(
            "the index has no committed generation yet: add documents first (POST /v1/documents)",
        ));
    }
    Ok(searcher)
}

async fn stats(Shared(state): Shared<AppState>) -> ApiResult<Json<Value>> {
    let searcher = committed(&state)?;
    let mut s = searcher.stats()?;
    s["server"] = json!({
        "strategies": searcher.strategies(),
        "reader": state.reader_name,
        "max_concurrency": state.options.max_concurrency,
        "body_limit": state.options.body_limit,
        "request_timeout_secs": state.options.request_timeout.as_secs_f64(),
        "auth": state.options.api_key.is_some(),
    });
    Ok(Json(s))
}

async fn strategies(Shared(state): Shared<AppState>) -> Json<Value> {
    let searcher = state.reader.searcher();
    Json(json!({
        "strategies": searcher.strategies(),
        "default": default_strategy(&searcher),
        "top_k": searcher.config().retriever.top_k,
        "reader": state.reader_name,
        "methods": searcher.methods(),
        "generation": searcher.generation(),
    }))
}

/// The strategy a listing offers as the default: the configured one when this generation answers it, else
/// the first it answers (`None` before the first commit).
pub(crate) fn default_strategy(searcher: &Searcher) -> Option<&'static str> {
    let have = searcher.strategies();
    let configured = searcher.config().retriever.strategy.as_str();
    have.iter()
        .find(|s| **s == configured)
        .or_else(|| have.first())
        .copied()
}

/// `value` of the parameter `name` when it lies in `lo..=hi`, else 422 naming the range.
pub(crate) fn check_range(name: &str, value: usize, lo: usize, hi: usize) -> ApiResult<usize> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(ApiError::unprocessable(format!(
            "\"{name}\" is {value}: give {lo} to {hi}"
        )))
    }
}

/// Checks `strategy` against what `searcher` answers ([`Searcher::check_strategy`]): 400 naming the
/// allowed ones.
pub(crate) fn check_strategy(searcher: &Searcher, strategy: &str) -> ApiResult<()> {
    searcher.check_strategy(strategy).map_err(|e| match e {
        kgrag::KgragError::Config(message) => ApiError::bad_request(message),
        other => ApiError::from(other),
    })
}

/// The most passages a request may ask for.
const MAX_TOP_K: usize = 1000;

/// A question, checked: not empty, at most 10,000 characters.
pub(crate) fn check_question(question: &str) -> ApiResult<()> {
    if question.trim().is_empty() {
        return Err(ApiError::unprocessable("\"question\" is empty"));
    }
    if question.chars().count() > 10_000 {
        return Err(ApiError::unprocessable(
            "\"question\" is longer than 10,000 characters",
        ));
    }
    Ok(())
}

/// An optional count given as a JSON integer or as a number with no fraction (`5.0`, which JSON Schema
/// counts as an integer).
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return usize::try_from(u)
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{n} is too large")));
    }
    match n.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= 1e15 => Ok(Some(f as usize)),
        _ => Err(serde::de::Error::custom(format!(
            "{n} is not a whole number of 0 or more"
        ))),
    }
}

fn check_top_k(top_k: Option<usize>, default: usize) -> ApiResult<usize> {
    match top_k {
        None => Ok(default),
        Some(k) => check_range("top_k", k, 1, MAX_TOP_K),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryRequest {
    question: String,
    #[serde(default)]
    strategy: Option<String>,
    #[serde(default, deserialize_with = "whole_number")]
    top_k: Option<usize>,
    #[serde(default)]
    context: bool,
    #[serde(default)]
    answer: Option<bool>,
}

/// What one strategy returned for one question, as the API shows it.
pub(crate) struct Outcome {
    pub(crate) strategy: String,
    pub(crate) answer: Option<String>,
    pub(crate) passages: Vec<kgrag::PassageHit>,
    pub(crate) context: RetrievedContext,
    pub(crate) retrieve_ms: f64,
    pub(crate) answer_ms: f64,
    pub(crate) latency_ms: f64,
    pub(crate) usage: kgrag::types::StageUsage,
    pub(crate) generation: u64,
}

impl Outcome {
    /// The JSON of the API (`Result` in the OpenAPI document).
    pub(crate) fn to_json(&self, question: &str, with_context: bool) -> Value {
        let mut v = json!({
            "strategy": self.strategy,
            "question": question,
            "answer": self.answer,
            "passages": self.passages,
            "entities": entities(&self.context),
            "stats": {
                "latency_ms": self.latency_ms,
                "retrieve_ms": self.retrieve_ms,
                "answer_ms": self.answer_ms,
                "context_tokens": self.context.context_tokens,
                "llm_calls": self.usage.calls,
                "llm_cache_hits": self.usage.cache_hits,
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "generation": self.generation,
                "method": self.context.stats,
            },
        });
        if with_context {
            v["context"] = Value::String(self.context.rendered.clone());
        }
        v
    }
}

/// The entity names a method used: HiRAG's and LeanRAG's entities, HippoRAG 2's facts' subjects and
/// objects; first seen first, at most 24.
fn entities(ctx: &RetrievedContext) -> Vec<String> {
    let mut seen = HashSet::new();
    let names = ctx.entities.iter().map(|e| e.name.as_str()).chain(
        ctx.facts
            .iter()
            .flat_map(|f| [f.triple.subject(), f.triple.object()]),
    );
    names
        .filter(|n| !n.trim().is_empty() && seen.insert(n.to_owned()))
        .take(24)
        .map(str::to_owned)
        .collect()
}

/// Retrieves (and reads, with `answer`) `question` with `strategy` on `searcher`, timing it and counting
/// its model calls; the latency goes into the metrics under `endpoint`.
pub(crate) async fn run_strategy(
    state: &State,
    searcher: &Searcher,
    endpoint: &str,
    question: &str,
    strategy: &str,
    top_k: usize,
    answer: bool,
) -> ApiResult<Outcome> {
    let started = Instant::now();
    let (result, usage) = kgrag::usage::counting(async {
        let t = Instant::now();
        let ctx = searcher.context(question, strategy, top_k).await?;
        let retrieve_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let text = if answer {
            searcher.read(strategy, question, &ctx).await?
        } else {
            None
        };
        Ok::<_, kgrag::KgragError>((ctx, text, retrieve_ms, t.elapsed().as_secs_f64() * 1e3))
    })
    .await;
    let (context, answer, retrieve_ms, answer_ms) = result?;
    let secs = started.elapsed().as_secs_f64();
    state.metrics.latency(endpoint, strategy, secs);
    Ok(Outcome {
        strategy: strategy.to_owned(),
        answer,
        passages: searcher.passages(&context, top_k),
        context,
        retrieve_ms,
        answer_ms,
        latency_ms: secs * 1e3,
        usage,
        generation: searcher.generation(),
    })
}

async fn query(
    Shared(state): Shared<AppState>,
    ApiJson(q): ApiJson<QueryRequest>,
) -> ApiResult<Json<Value>> {
    let searcher = committed(&state)?;
    check_question(&q.question)?;
    let strategy = q
        .strategy
        .unwrap_or_else(|| searcher.config().retriever.strategy.clone());
    check_strategy(&searcher, &strategy)?;
    let top_k = check_top_k(q.top_k, searcher.config().retriever.top_k)?;
    let outcome = run_strategy(
        &state,
        &searcher,
        "/v1/query",
        &q.question,
        &strategy,
        top_k,
        q.answer.unwrap_or(true),
    )
    .await?;
    Ok(Json(outcome.to_json(&q.question, q.context)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompareRequest {
    question: String,
    strategies: Vec<String>,
    #[serde(default, deserialize_with = "whole_number")]
    top_k: Option<usize>,
    #[serde(default)]
    context: bool,
    #[serde(default)]
    answer: Option<bool>,
}

async fn compare(
    Shared(state): Shared<AppState>,
    ApiJson(q): ApiJson<CompareRequest>,
) -> ApiResult<Json<Value>> {
    let searcher = committed(&state)?;
    check_question(&q.question)?;
    if q.strategies.is_empty() {
        return Err(ApiError::unprocessable(format!(
            "\"strategies\" is empty: name one or more of {}",
            searcher.strategies().join(", ")
        )));
    }
    let mut seen = HashSet::new();
    for s in &q.strategies {
        check_strategy(&searcher, s)?;
        if !seen.insert(s.as_str()) {
            return Err(ApiError::unprocessable(format!(
                "strategy {s:?} is named twice"
            )));
        }
    }
    let top_k = check_top_k(q.top_k, searcher.config().retriever.top_k)?;
    let answer = q.answer.unwrap_or(true);
    // One searcher for all: every strategy answers from the same generation. Each strategy runs as a task
    // of its own (on both cores), aborted if the request is dropped; one that fails is reported in its
    // place, the others still answer.
    let tasks: Vec<_> = q
        .strategies
        .iter()
        .map(|s| {
            let (state, searcher, question, strategy) = (
                state.clone(),
                searcher.clone(),
                q.question.clone(),
                s.clone(),
            );
            AbortOnDrop(tokio::spawn(async move {
                run_strategy(
                    &state,
                    &searcher,
                    "/v1/compare",
                    &question,
                    &strategy,
                    top_k,
                    answer,
                )
                .await
            }))
        })
        .collect();
    let mut results = Vec::with_capacity(tasks.len());
    for (strategy, mut task) in q.strategies.iter().zip(tasks) {
        let outcome = task.join().await;
        results.push(match outcome {
            Ok(o) => o.to_json(&q.question, q.context),
            Err(e) => json!({
                "strategy": strategy,
                "question": q.question,
                "error": {"code": e.code, "message": e.message},
            }),
        });
    }
    Ok(Json(json!({
        "question": q.question,
        "generation": searcher.generation(),
        "results": results,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Page {
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

async fn list_documents(
    Shared(state): Shared<AppState>,
    ApiQuery(page): ApiQuery<Page>,
) -> ApiResult<Json<Value>> {
    let searcher = state.reader.searcher();
    let limit = check_range("limit", page.limit.unwrap_or(50), 1, 1000)?;
    let docs = searcher.documents();
    let page_docs: Vec<Value> = docs
        .iter()
        .skip(page.offset)
        .take(limit)
        .map(|d| {
            json!({
                "id": d.id,
                "title": d.title,
                "source": d.source,
                "chunks": d.chunks.len(),
                "doc_id": d.doc_id,
            })
        })
        .collect();
    Ok(Json(json!({
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
struct Upload {
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
async fn add_documents(
    Shared(state): Shared<AppState>,
    ApiQuery(upload): ApiQuery<Upload>,
    request: Request,
) -> ApiResult<Json<Value>> {
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    let docs = if is_json && upload.filename.is_none() {
        let bytes = read_body(&state, request).await?;
        json_documents(parse_json::<NewDocuments>(&bytes)?)?
    } else {
        let Some(name) = upload.filename else {
            return Err(ApiError::bad_request(
                "send JSON {\"documents\": [{\"id\", \"text\"}]} with Content-Type: application/json, \
                 or a file's bytes with ?filename=NAME (.txt, .md, .jsonl, .json)",
            ));
        };
        let bytes = read_body(&state, request).await?;
        kgrag::documents::parse_upload(&name, bytes.to_vec())?
    };
    let summary = change(&state, Change::Add(docs)).await?;
    Ok(Json(summary_json(&summary)))
}

async fn delete_document(
    Shared(state): Shared<AppState>,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(id) = id.map_err(|r| ApiError::bad_request(r.body_text()))?;
    let known = |state: &State| {
        state
            .reader
            .searcher()
            .documents()
            .iter()
            .any(|d| d.id == id)
    };
    if !known(&state) {
        return Err(ApiError::not_found(format!("no document {id:?}")));
    }
    match change(&state, Change::Delete(vec![id.clone()])).await {
        Ok(summary) => Ok(Json(summary_json(&summary))),
        // Deleted by another request between the check and the writer's turn.
        Err(e) if e.status == StatusCode::UNPROCESSABLE_ENTITY && !known(&state) => {
            Err(ApiError::not_found(format!("no document {id:?}")))
        }
        Err(e) => Err(e),
    }
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
/// a client that goes away does not cut a commit short. Queries keep being answered from the previous
/// generation until the commit is written.
pub(crate) async fn change(state: &Arc<State>, change: Change) -> ApiResult<ChangeSummary> {
    state.writer.submit(change).await
}

/// A change waiting for the writer's thread, and where its outcome goes.
enum Job {
    Change(
        Change,
        tokio::sync::oneshot::Sender<ApiResult<ChangeSummary>>,
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
    /// Starts the thread for `index`; changes arriving after `closing` is set are refused.
    pub(crate) fn start(
        index: kgrag::Index,
        closing: Arc<std::sync::atomic::AtomicBool>,
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
                            Job::Change(change, reply) => {
                                let outcome = if closing.load(Ordering::SeqCst) {
                                    metrics.change_done("refused");
                                    Err(ApiError::unavailable(
                                        "the server is shutting down: the change was not made",
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
                            }
                        }
                    }
                });
            })?;
        Ok(Self { jobs })
    }

    async fn submit(&self, change: Change) -> ApiResult<ChangeSummary> {
        let (reply, outcome) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Job::Change(change, reply))
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
