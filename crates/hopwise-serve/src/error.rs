//! The crate's one error type, and how each kind maps to an HTTP status and a JSON body.
//!
//! Every error body has the OpenAI shape `{"error": {"type", "message", "code"}}`, so OpenAI client
//! libraries surface the message, and the ask API uses the same shape for consistency. Internal and
//! upstream failures tell the client only their kind: their details (backend addresses, error bodies)
//! go to the server log.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hopwise_reason::ReasonError;
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Malformed or invalid input: bad JSON, empty question, bad option value.
    #[error("{message}")]
    BadRequest { status: StatusCode, message: String },
    #[error("unknown strategy `{0}`; GET /v1/strategies lists them")]
    UnknownStrategy(String),
    /// The OpenAI endpoint's name for an unknown strategy.
    #[error("the model `{0}` does not exist; GET /v1/models lists them")]
    ModelNotFound(String),
    #[error("missing or invalid bearer token")]
    Unauthorized,
    #[error("the server is answering as many questions as it is configured to ({limit}); retry later")]
    Busy { limit: usize, retry_after_secs: u64 },
    /// A connection from the reserve kept for health checks asked for something else.
    #[error("every connection slot is taken, so this connection answers only /healthz; retry later")]
    ConnectionsFull { retry_after_secs: u64 },
    #[error("the question was not answered within {0} s")]
    Timeout(u64),
    /// The model or retrieval backend failed and no answer could be produced.
    #[error("backend failure: {0}")]
    Upstream(String),
    #[error("internal error: {0}")]
    Internal(String),
    #[error("server I/O: {0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = ServeError> = std::result::Result<T, E>;

/// Every `error.type` a response can carry ([`ServeError::kind`]); the API document lists them.
pub const ERROR_KINDS: [&str; 11] = [
    "invalid_request_error",
    "body_too_large",
    "not_found",
    "method_not_allowed",
    "unknown_strategy",
    "model_not_found",
    "authentication_error",
    "overloaded",
    "timeout",
    "upstream_error",
    "internal_error",
];

impl ServeError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest { status: StatusCode::BAD_REQUEST, message: message.into() }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { status, .. } => *status,
            Self::UnknownStrategy(_) => StatusCode::BAD_REQUEST,
            Self::ModelNotFound(_) => StatusCode::NOT_FOUND,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Busy { .. } | Self::ConnectionsFull { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Upstream(_) => StatusCode::BAD_GATEWAY,
            Self::Internal(_) | Self::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A stable machine-readable name (`type` in the body).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadRequest { status, .. } if *status == StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
            Self::BadRequest { status, .. } if *status == StatusCode::NOT_FOUND => "not_found",
            Self::BadRequest { status, .. } if *status == StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            Self::BadRequest { .. } => "invalid_request_error",
            Self::UnknownStrategy(_) => "unknown_strategy",
            Self::ModelNotFound(_) => "model_not_found",
            Self::Unauthorized => "authentication_error",
            Self::Busy { .. } | Self::ConnectionsFull { .. } => "overloaded",
            Self::Timeout(_) => "timeout",
            Self::Upstream(_) => "upstream_error",
            Self::Internal(_) | Self::Io(_) => "internal_error",
        }
    }

    /// What the client may read. Internal and upstream details stay out of it.
    pub fn public_message(&self) -> String {
        match self {
            Self::Upstream(_) => "the model or retrieval backend failed, so no answer could be produced; \
                                  the server log has the details"
                .into(),
            Self::Internal(_) | Self::Io(_) => "internal error; the server log has the details".into(),
            other => other.to_string(),
        }
    }

    /// The JSON error body for the client. Logs the details of internal and upstream failures,
    /// which the body leaves out; call it once per error sent.
    pub fn public_body(&self) -> serde_json::Value {
        match self {
            Self::Upstream(_) => tracing::warn!(target: "hopwise_serve", "{self}"),
            Self::Internal(_) | Self::Io(_) => tracing::error!(target: "hopwise_serve", "{self}"),
            _ => {}
        }
        json!({"error": {"type": self.kind(), "code": self.kind(), "message": self.public_message()}})
    }
}

impl From<ReasonError> for ServeError {
    fn from(e: ReasonError) -> Self {
        match e {
            ReasonError::UnknownStrategy(name) => Self::UnknownStrategy(name),
            ReasonError::ServerPathOption { .. } => {
                Self::BadRequest { status: StatusCode::UNPROCESSABLE_ENTITY, message: e.to_string() }
            }
            ReasonError::EmptyQuestion | ReasonError::NeedsRetriever(_) | ReasonError::InvalidOption(_) => {
                Self::bad_request(e.to_string())
            }
            ReasonError::Core(e) if e.backend_kind().is_some() => Self::Upstream(e.to_string()),
            // Template and configuration problems are the server's, not the caller's.
            ReasonError::Core(e) => Self::Internal(e.to_string()),
        }
    }
}

impl IntoResponse for ServeError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), axum::Json(self.public_body())).into_response();
        match &self {
            Self::Busy { retry_after_secs, .. } | Self::ConnectionsFull { retry_after_secs } => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            Self::Unauthorized => {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

/// Rejections of axum's extractors keep their status (400 syntax, 422 wrong fields, 413 too large,
/// 415 wrong content type) and explain themselves in our body shape.
impl From<axum::extract::rejection::JsonRejection> for ServeError {
    fn from(r: axum::extract::rejection::JsonRejection) -> Self {
        Self::BadRequest { status: r.status(), message: r.body_text() }
    }
}

impl From<axum::extract::rejection::QueryRejection> for ServeError {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        Self::BadRequest { status: r.status(), message: r.body_text() }
    }
}
