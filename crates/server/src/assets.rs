//! The web page's files and the OpenAPI document, embedded in the binary (nothing is fetched at run time).

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");
const OPENAPI: &str = include_str!("../assets/openapi.json");

/// Headers every embedded file carries: no framing by other sites, no content sniffing, and a policy
/// that allows only the page's own files and requests.
fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
                 connect-src 'self'; frame-ancestors 'none'",
            ),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub(crate) async fn page() -> Response {
    file("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /assets/{file}`.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "app.js" => file("text/javascript; charset=utf-8", APP_JS),
        "app.css" => file("text/css; charset=utf-8", APP_CSS),
        _ => ApiError::not_found(format!("no asset {name:?}")).into_response(),
    }
}

/// `GET /openapi.json`: the document, with the strategies this index answers as the allowed values of
/// every strategy field (so a client or a fuzzer knows them).
pub(crate) async fn openapi(
    axum::extract::State(state): axum::extract::State<std::sync::Arc<crate::State>>,
) -> Response {
    /// The embedded document, parsed once.
    static TEMPLATE: std::sync::LazyLock<Option<serde_json::Value>> =
        std::sync::LazyLock::new(|| serde_json::from_str(OPENAPI).ok());
    let strategies = state.reader.searcher().strategies();
    match TEMPLATE.clone() {
        Some(mut doc) => {
            if !strategies.is_empty() {
                let names = serde_json::json!(strategies);
                let schemas = &mut doc["components"]["schemas"];
                schemas["QueryRequest"]["properties"]["strategy"]["enum"] = {
                    let mut v = names.clone();
                    if let Some(list) = v.as_array_mut() {
                        list.push(serde_json::Value::Null);
                    }
                    v
                };
                schemas["CompareRequest"]["properties"]["strategies"]["items"]["enum"] =
                    names.clone();
                doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]
                    ["application/json"]["schema"]["properties"]["model"]["enum"] = names;
            }
            axum::Json(doc).into_response()
        }
        None => ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response(),
    }
}
