//! Which index a request is for, and whether its key may use it: the extractors every per-index route
//! takes ([`Reading`], [`Changing`]), and the routes over the indexes themselves (`GET /v1/indexes`,
//! `POST /v1/indexes`, `GET`/`DELETE /v1/indexes/{name}`).
//!
//! An index is named by the path (`/v1/indexes/{name}/…`) or is the server's default (the routes without
//! a name). A key that may neither read nor change an index gets the same 404 as for an index that does
//! not exist; a key that may read an index but not change it gets 403 on its changes.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams, State as Shared};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{default_strategy, ApiJson};
use crate::catalog::{no_index, Lease};
use crate::error::{ApiError, ApiResult};
use crate::keys::Grant;
use crate::State;

type AppState = Arc<State>;

/// The grant the guard gave the request (everything when the server has no keys; nothing when the
/// guard did not see the request).
pub(crate) fn grant_of(parts: &Parts) -> Grant {
    parts
        .extensions
        .get::<Grant>()
        .cloned()
        .unwrap_or_else(Grant::nothing)
}

/// The index named by the path, else the server's default; 404 without one, and for a client that may not
/// see the default (the same words: its name is not told).
pub(crate) async fn index_name(
    state: &State,
    parts: &mut Parts,
    grant: &Grant,
) -> ApiResult<String> {
    if let Some(name) = path_name(parts).await? {
        return Ok(name);
    }
    default_for(state, grant)
}

/// The default index's name, if the client may see it.
pub(crate) fn default_for(state: &State, grant: &Grant) -> ApiResult<String> {
    match state.catalog.default_name() {
        Some(d) if grant.can_see(d) => Ok(d.to_owned()),
        _ => Err(ApiError::not_found(
            "this server has no default index: name one, as /v1/indexes/{name}/… (GET /v1/indexes \
             lists them)",
        )),
    }
}

/// The `{name}` of the path, if the route has one; 400 when a parameter of it does not decode.
async fn path_name(parts: &mut Parts) -> ApiResult<Option<String>> {
    let Some(matched) = parts.extensions.get::<axum::extract::MatchedPath>() else {
        return Ok(None);
    };
    if !matched.as_str().starts_with("/v1/indexes/{name}") {
        return Ok(None);
    }
    let raw = RawPathParams::from_request_parts(parts, &())
        .await
        .map_err(|r| ApiError::bad_request(r.body_text()))?;
    Ok(raw
        .iter()
        .find(|(k, _)| *k == "name")
        .map(|(_, v)| v.to_owned()))
}

/// A lease on `name` for a client with `grant` that reads it: 404 when it may not see it.
pub(crate) async fn lease_to_read(state: &State, grant: &Grant, name: &str) -> ApiResult<Lease> {
    if !grant.can_read(name) {
        return Err(no_index(name));
    }
    state.catalog.lease(name).await
}

/// A lease on `name` for a client with `grant` that changes it: 404 when it may not see it, 403 when it
/// may only read it.
pub(crate) async fn lease_to_change(state: &State, grant: &Grant, name: &str) -> ApiResult<Lease> {
    if !grant.can_see(name) {
        return Err(no_index(name));
    }
    if !grant.can_change(name) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("this key may read index {name:?} but not change it"),
        ));
    }
    state.catalog.lease(name).await
}

/// The index of a request that reads it, leased for the request's life.
pub(crate) struct Reading {
    pub(crate) lease: Lease,
    pub(crate) grant: Grant,
}

impl FromRequestParts<AppState> for Reading {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let grant = grant_of(parts);
        let name = index_name(state, parts, &grant).await?;
        let lease = lease_to_read(state, &grant, &name).await?;
        Ok(Self { lease, grant })
    }
}

/// The index of a request that changes its documents, leased for the request's life.
pub(crate) struct Changing {
    pub(crate) lease: Lease,
}

impl FromRequestParts<AppState> for Changing {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let grant = grant_of(parts);
        let name = index_name(state, parts, &grant).await?;
        let lease = lease_to_change(state, &grant, &name).await?;
        Ok(Self { lease })
    }
}

/// The grant of a request, for handlers that resolve indexes themselves.
pub(crate) struct Client(pub(crate) Grant);

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        Ok(Self(grant_of(parts)))
    }
}

/// The `{name}` of a request's path, or the default index's name; and whether the path named it.
pub(crate) struct Named(pub(crate) String, pub(crate) bool);

impl FromRequestParts<AppState> for Named {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        if let Some(name) = path_name(parts).await? {
            return Ok(Self(name, true));
        }
        default_for(state, &grant_of(parts)).map(|n| Self(n, false))
    }
}

/// What a listing says of one index the client may see (nothing is loaded for it).
fn describe(grant: &Grant, l: &crate::catalog::Listed) -> Value {
    let mut v = json!({
        "name": l.name,
        "default": l.default,
        "read": grant.can_read(&l.name),
        "change": grant.can_change(&l.name),
        "droppable": l.under_root && !l.default,
        "loaded": l.served.is_some(),
    });
    if let Some(s) = &l.served {
        let searcher = s.reader.searcher();
        v["generation"] = json!(searcher.generation());
        v["documents"] = json!(searcher.documents().len());
        v["strategies"] = json!(searcher.strategies());
        v["default_strategy"] = json!(default_strategy(&searcher));
        v["reader"] = json!(s.reader_name);
        v["in_use"] = json!(l.leases);
        v["load_secs"] = json!(s.load_secs);
        v["loaded_bytes"] = json!(s.bytes);
    }
    v
}

/// `GET /v1/indexes`: the indexes this key may see.
pub(crate) async fn list(Shared(state): Shared<AppState>, Client(grant): Client) -> Json<Value> {
    let indexes: Vec<Value> = state
        .catalog
        .list()
        .iter()
        .filter(|l| grant.can_see(&l.name))
        .map(|l| describe(&grant, l))
        .collect();
    let default = state
        .catalog
        .default_name()
        .filter(|d| grant.can_see(d))
        .map(str::to_owned);
    Json(json!({
        "indexes": indexes,
        "key": grant.key,
        "default": default,
        "can_create": grant.is_admin() && state.catalog.root().is_some(),
    }))
}

/// `GET /v1/indexes/{name}`: one index as the listing shows it.
pub(crate) async fn show(
    Shared(state): Shared<AppState>,
    Client(grant): Client,
    Named(name, _): Named,
) -> ApiResult<Json<Value>> {
    if !grant.can_see(&name) {
        return Err(no_index(&name));
    }
    state
        .catalog
        .list()
        .iter()
        .find(|l| l.name == name)
        .map(|l| Json(describe(&grant, l)))
        .ok_or_else(|| no_index(&name))
}

/// `POST /v1/indexes`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewIndex {
    name: String,
    /// A kgrag.toml's text (default: the server's configuration, else the defaults).
    #[serde(default)]
    config: Option<String>,
}

fn admin_only(grant: &Grant) -> ApiResult<()> {
    if grant.is_admin() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only an admin key may create or drop indexes",
        ))
    }
}

/// `POST /v1/indexes` (admin): an empty index under the indexes root; documents then come by
/// `POST /v1/indexes/{name}/documents`.
pub(crate) async fn create(
    Shared(state): Shared<AppState>,
    Client(grant): Client,
    ApiJson(body): ApiJson<NewIndex>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    admin_only(&grant)?;
    if state.catalog.closing() {
        return Err(ApiError::unavailable("the server is shutting down"));
    }
    state.catalog.create(&body.name, body.config).await?;
    let listed = state.catalog.list();
    let value = listed
        .iter()
        .find(|l| l.name == body.name)
        .map_or_else(|| json!({"name": body.name}), |l| describe(&grant, l));
    Ok((StatusCode::CREATED, Json(value)))
}

/// `DELETE /v1/indexes/{name}` (admin): stops serving an index made under the root and deletes it.
pub(crate) async fn drop_index(
    Shared(state): Shared<AppState>,
    Client(grant): Client,
    Named(name, _): Named,
) -> ApiResult<Json<Value>> {
    if !grant.can_see(&name) {
        return Err(no_index(&name));
    }
    admin_only(&grant)?;
    state.catalog.drop_index(&name).await?;
    Ok(Json(json!({"dropped": name})))
}
