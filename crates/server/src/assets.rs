//! The web page's files and the OpenAPI document, embedded in the binary (nothing is fetched at run time).

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use serde_json::{json, Value};

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

/// The paths of one index's routes, as the default index's are written in the document.
const PER_INDEX: [&str; 10] = [
    "/v1/stats",
    "/v1/strategies",
    "/v1/query",
    "/v1/compare",
    "/v1/documents",
    "/v1/documents/{id}",
    "/v1/documents/{id}/file",
    "/v1/graph",
    "/v1/communities",
    "/v1/indexes/{name}",
];

/// `GET /openapi.json`: the document, for the key that asks: its indexes' routes listed one by one with
/// the strategies each answers as the allowed values of their strategy fields (so that a client or a
/// fuzzer knows them), the indexes it may name in a question asked of several, and its models.
pub(crate) async fn openapi(
    axum::extract::State(state): axum::extract::State<std::sync::Arc<crate::State>>,
    crate::indexes::Client(grant): crate::indexes::Client,
) -> Response {
    /// The embedded document, parsed once.
    static TEMPLATE: std::sync::LazyLock<Option<Value>> =
        std::sync::LazyLock::new(|| serde_json::from_str(OPENAPI).ok());
    let Some(mut doc) = TEMPLATE.clone() else {
        return ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response();
    };
    let readable: Vec<String> = state
        .catalog
        .list()
        .into_iter()
        .map(|l| l.name)
        .filter(|n| grant.can_read(n))
        .collect();
    let strategies: Vec<(String, Vec<String>)> = readable
        .iter()
        .map(|n| (n.clone(), state.catalog.strategies(n)))
        .collect();
    let default = state
        .catalog
        .default_name()
        .filter(|d| grant.can_read(d))
        .map(str::to_owned);
    let schemas = doc["components"]["schemas"].clone();
    let error = json!({"$ref": "#/components/responses/Error"});
    // An index's routes may answer 404 (it is gone, or not this key's), 403 (a change by a reader) and
    // 409 (it holds nothing yet).
    for p in PER_INDEX {
        if let Some(item) = doc["paths"][p].as_object_mut() {
            for op in item.values_mut() {
                for status in ["403", "404", "409"] {
                    op["responses"][status] = error.clone();
                }
            }
        }
    }
    let own = |name: &str| {
        strategies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
            .unwrap_or_default()
    };
    // The default index's routes (and the bare model names) take its strategies: the schemas they name.
    if let Some(d) = &default {
        let names = own(d);
        if !names.is_empty() {
            let schemas = &mut doc["components"]["schemas"];
            schemas["QueryRequest"]["properties"]["strategy"]["enum"] = with_null(&names);
            schemas["CompareRequest"]["properties"]["strategies"]["items"]["enum"] = json!(names);
        }
    }
    // Each index the key may read: its own routes, with its strategies.
    for (name, names) in &strategies {
        for (p, item) in per_index_items(&doc, &schemas, names) {
            doc["paths"][format!("/v1/indexes/{name}{}", &p[3..])] = item;
        }
    }
    // A question asked of several: the indexes this key may read, a strategy every one answers.
    let common: Vec<String> = strategies.first().map_or_else(Vec::new, |(_, first)| {
        first
            .iter()
            .filter(|s| strategies.iter().all(|(_, other)| other.contains(s)))
            .cloned()
            .collect()
    });
    let federated = &mut doc["components"]["schemas"]["FederatedQueryRequest"]["properties"];
    if !readable.is_empty() {
        federated["indexes"]["items"]["enum"] = json!(readable);
    }
    if !common.is_empty() {
        federated["strategy"]["enum"] = with_null(&common);
    }
    let mut models: Vec<String> = default.as_deref().map(own).unwrap_or_default();
    for (name, names) in &strategies {
        models.extend(names.iter().map(|s| format!("{name}/{s}")));
    }
    if !models.is_empty() {
        doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]
            ["application/json"]["schema"]["properties"]["model"]["enum"] = json!(models);
    }
    axum::Json(doc).into_response()
}

/// `names` and `null`.
fn with_null(names: &[String]) -> Value {
    let mut v: Vec<Value> = names.iter().map(|n| json!(n)).collect();
    v.push(Value::Null);
    Value::Array(v)
}

/// The schema `name` with its strategy field limited to `strategies` (unlimited when there are none:
/// an index with nothing committed answers 409 first).
fn inline_request(schemas: &Value, name: &str, strategies: &[String]) -> Value {
    let mut schema = schemas[name].clone();
    if strategies.is_empty() {
        return schema;
    }
    match name {
        "CompareRequest" => schema["properties"]["strategies"]["items"]["enum"] = json!(strategies),
        _ => schema["properties"]["strategy"]["enum"] = with_null(strategies),
    }
    schema
}

/// The routes of one index (the default index's, as the document writes them) with their request
/// schemas inlined for `strategies`; its query route asks that index only.
fn per_index_items(
    doc: &Value,
    schemas: &Value,
    strategies: &[String],
) -> Vec<(&'static str, Value)> {
    PER_INDEX
        .iter()
        .filter(|p| **p != "/v1/indexes/{name}")
        .map(|p| {
            let mut item = doc["paths"][*p].clone();
            match *p {
                "/v1/query" => {
                    item["post"]["requestBody"]["content"]["application/json"]["schema"] =
                        inline_request(schemas, "QueryRequest", strategies);
                    item["post"]["responses"]["200"]["content"]["application/json"]["schema"] =
                        json!({"$ref": "#/components/schemas/Result"});
                }
                "/v1/compare" => {
                    item["post"]["requestBody"]["content"]["application/json"]["schema"] =
                        inline_request(schemas, "CompareRequest", strategies);
                }
                _ => {}
            }
            (*p, item)
        })
        .collect()
}
