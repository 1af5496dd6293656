use serde::{Deserialize, Serialize};

/// What went wrong in a backend, coarse enough for retry policy and user messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendErrorKind {
    /// Could not connect, or the connection dropped.
    Connection,
    /// The request took longer than the configured timeout.
    Timeout,
    /// 429 or a similar back-pressure signal.
    RateLimited,
    /// 5xx from the server.
    Server,
    /// 4xx other than 429: retrying will not help.
    Rejected,
    /// The server answered, but not with what the protocol promises.
    Malformed,
    /// The backend cannot do this (e.g. a prompt longer than the context window).
    Unsupported,
}

impl BackendErrorKind {
    /// Whether retrying the same request may succeed.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Connection | Self::Timeout | Self::RateLimited | Self::Server)
    }
}

/// The one error type of the shared layer. Other crates wrap it in their own enums.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{backend}: {kind:?}: {message}")]
    Backend { backend: String, kind: BackendErrorKind, message: String },
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("prompt template `{name}`: {message}")]
    Template { name: String, message: String },
    #[error("budget exhausted: {0}")]
    Budget(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    pub fn backend(backend: impl Into<String>, kind: BackendErrorKind, message: impl Into<String>) -> Self {
        Self::Backend { backend: backend.into(), kind, message: message.into() }
    }

    /// The backend error kind, if this is a backend error.
    pub fn backend_kind(&self) -> Option<BackendErrorKind> {
        match self {
            Self::Backend { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
