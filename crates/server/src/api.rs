//! The JSON API's routes and handlers, and the middleware every request passes (metrics, the key, the
//! concurrency limit, the timeout).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, MatchedPath, Query, Request, State as Shared};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kgrag::Searcher;
use serde_json::{json, Value};

use crate::catalog::Lease;
use crate::error::{ApiError, ApiResult};
use crate::indexes::{Client, Reading};
use crate::keys::Grant;
use crate::State;

type AppState = Arc<State>;

/// The routes of the JSON API, the OpenAI-compatible endpoints, the page, `/metrics` and `/openapi.json`
/// (without the guard: [`layered`] adds it once every route, `/mcp` included, is in).
pub(crate) fn routes(state: AppState) -> Router {
    let mut router = Router::new()
        .route("/health", get(health))
        .route("/openapi.json", get(crate::assets::openapi))
        .route("/metrics", get(metrics))
        .route(
            "/v1/indexes",
            get(crate::indexes::list).post(crate::indexes::create),
        )
        .route(
            "/v1/indexes/{name}",
            get(crate::indexes::show).delete(crate::indexes::drop_index),
        )
        .route("/v1/models", get(crate::openai::models))
        .route(
            "/v1/chat/completions",
            post(crate::openai::chat_completions),
        )
        .route("/", get(crate::assets::page))
        .route("/assets/{file}", get(crate::assets::asset));
    // The routes of one index: the default index's under /v1, any index's under /v1/indexes/{name}.
    for prefix in ["/v1", "/v1/indexes/{name}"] {
        router = router
            .route(&format!("{prefix}/stats"), get(stats))
            .route(&format!("{prefix}/strategies"), get(strategies))
            .route(&format!("{prefix}/query"), post(crate::query::query))
            .route(&format!("{prefix}/compare"), post(crate::query::compare))
            .route(
                &format!("{prefix}/documents"),
                get(crate::documents::list_documents).post(crate::documents::add_documents),
            )
            .route(
                &format!("{prefix}/documents/{{*id}}"),
                get(crate::documents::document_file).delete(crate::documents::delete_document),
            )
            .route(&format!("{prefix}/graph"), get(crate::graph::graph))
            .route(
                &format!("{prefix}/communities"),
                get(crate::graph::communities),
            );
    }
    router
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

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> Response {
    let mut r = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
    .into_response();
    // One route serves a document (GET, DELETE) and its original file (GET only).
    if uri.path().contains("/documents/") && uri.path().ends_with("/file") {
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET,HEAD"));
    }
    r
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {method} {}", uri.path()))
}

/// Paths anyone may fetch: the health check and the page's files.
fn is_public(path: &str) -> bool {
    path == "/health" || path == "/" || path.starts_with("/assets/")
}

/// The grant of the bearer token `headers` carry, if it is one of `keys` (see [`crate::keys`]).
fn authorized(headers: &HeaderMap, keys: &crate::keys::Keys) -> Option<Grant> {
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())?;
    let token = crate::keys::bearer(value)?;
    keys.current().grant_of(token)
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
    let response = guarded(&state, &path, &endpoint, request, next).await;
    drop(flight);
    let status = response.status().as_u16();
    state.metrics.request(&endpoint, status);
    let timed_by_strategy = endpoint.ends_with("/query")
        || endpoint.ends_with("/compare")
        || endpoint == "/v1/chat/completions";
    if !timed_by_strategy {
        state
            .metrics
            .latency(&endpoint, "", started.elapsed().as_secs_f64());
    }
    response
}

async fn guarded(
    state: &State,
    path: &str,
    endpoint: &str,
    mut request: Request,
    next: Next,
) -> Response {
    if state.keys.is_none() && state.options.listen.ip().is_loopback() {
        if let Some(problem) = local_request_problem(
            request.headers(),
            request.method(),
            &state.options.allowed_hosts,
        ) {
            return ApiError::new(StatusCode::FORBIDDEN, "forbidden", problem).into_response();
        }
    }
    if let Some(keys) = &state.keys {
        let grant = authorized(request.headers(), keys);
        match grant {
            Some(g) => {
                request.extensions_mut().insert(g);
            }
            None if is_public(path) => {
                request.extensions_mut().insert(Grant::nothing());
            }
            None => {
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
    } else {
        request.extensions_mut().insert(Grant::everything(""));
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
    let is_change = (endpoint.ends_with("/documents") || endpoint.ends_with("/documents/{*id}"))
        && request.method() != Method::GET;
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
    let generation = state
        .catalog
        .default_name()
        .and_then(|d| state.catalog.if_loaded(d))
        .map_or(0, |s| s.reader.searcher().generation());
    Json(json!({"status": "ok", "generation": generation}))
}

async fn metrics(Shared(state): Shared<AppState>, Client(grant): Client) -> Response {
    if !grant.can_read_metrics() {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this key may not read /metrics (give it `metrics = true` in the keys file)",
        )
        .into_response();
    }
    // A key that may read /metrics without being an admin sees only the indexes it may see.
    let loaded: Vec<_> = state
        .catalog
        .loaded_info()
        .into_iter()
        .filter(|l| grant.can_see(&l.name))
        .collect();
    let text = state.metrics.render(&loaded, &|name| grant.can_see(name));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The searcher of `lease`'s newest committed generation, or 409 when nothing is committed yet (an
/// index made empty, before its first documents).
pub(crate) fn committed(lease: &Lease) -> ApiResult<Searcher> {
    let searcher = lease.reader.searcher();
    if searcher.generation() == 0 {
        return Err(nothing_committed(&lease.name));
    }
    Ok(searcher)
}

/// 409: index `name` holds nothing yet.
pub(crate) fn nothing_committed(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "conflict",
        format!(
            "index {name:?} holds no documents yet (nothing is committed): add documents first (POST \
             …/documents)"
        ),
    )
}

async fn stats(Shared(state): Shared<AppState>, target: Reading) -> ApiResult<Json<Value>> {
    let lease = &target.lease;
    let searcher = committed(lease)?;
    let mut s = searcher.stats()?;
    s["server"] = json!({
        "index": lease.name,
        "strategies": searcher.strategies(),
        "reader": lease.reader_name,
        "max_concurrency": state.options.max_concurrency,
        "body_limit": state.options.body_limit,
        "request_timeout_secs": state.options.request_timeout.as_secs_f64(),
        "auth": state.keys.is_some(),
        "can_change": target.grant.can_change(&lease.name),
    });
    Ok(Json(s))
}

async fn strategies(target: Reading) -> Json<Value> {
    let lease = &target.lease;
    let searcher = lease.reader.searcher();
    Json(json!({
        "index": lease.name,
        "strategies": searcher.strategies(),
        "default": default_strategy(&searcher),
        "top_k": searcher.config().retriever.top_k,
        "reader": lease.reader_name,
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
