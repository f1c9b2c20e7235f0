//! Errors as the API returns them: `{"error": {"code", "message"}}` with a status, never a stack trace.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error of a request: its status, a stable code and a message for a person.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code (`bad_request`, `unauthorized`, `forbidden`, `not_found`, `conflict`,
    /// `payload_too_large`, `unprocessable`, `unavailable`, `timeout`, `internal`).
    pub code: &'static str,
    /// What went wrong, naming the field or the value.
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the request asks for something that does not exist or cannot be (an unknown strategy).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 422: well-formed but invalid (an empty question, a `top_k` of 0).
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message)
    }

    /// 503: the server cannot answer now (busy, shutting down, the index not committed, another writer).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 500: a failure of the index or a model; the message is the library's, which never holds secrets.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<kgrag::KgragError> for ApiError {
    fn from(e: kgrag::KgragError) -> Self {
        use kgrag::KgragError as E;
        let message = e.to_string();
        match e {
            E::Config(_) => Self::bad_request(message),
            E::Input(_) => Self::unprocessable(message),
            E::Conflict(_) => Self::new(StatusCode::CONFLICT, "conflict", message),
            E::Index(_) | E::Database(_) => Self::unavailable(message),
            _ => Self::internal(message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

/// The API's result type.
pub type ApiResult<T> = Result<T, ApiError>;
