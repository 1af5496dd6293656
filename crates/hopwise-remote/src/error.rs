//! The crate's one error type. Every variant names the engine, so a message read out of context
//! still says which server misbehaved.

use hopwise_core::BackendErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{engine} at {url} is unreachable ({message}); is the server running?")]
    Unreachable { engine: &'static str, url: String, message: String },
    #[error("{engine} at {url} did not answer within {secs:.1} s")]
    Timeout { engine: &'static str, url: String, secs: f64 },
    #[error("{engine} answered HTTP {status} to {what}: {body}")]
    Status { engine: &'static str, status: u16, what: String, body: String },
    /// The engine answered 200 but reported a failure in the body (Milvus puts its codes there).
    #[error("{engine} refused {what}: {message}")]
    Engine { engine: &'static str, what: String, message: String },
    #[error("{engine} sent a reply hopwise cannot read ({what}): {message}")]
    Malformed { engine: &'static str, what: String, message: String },
    #[error(
        "{engine} collection `{collection}` holds {found}-d vectors but the embedder makes {expected}-d ones; \
         use another collection name or drop this one"
    )]
    DimensionMismatch { engine: &'static str, collection: String, expected: usize, found: usize },
    #[error("{engine} rejected {failed} of {total} documents in a batch; first: {first}")]
    Import { engine: &'static str, failed: usize, total: usize, first: String },
    #[error(
        "{engine} collection `{collection}` does not exist; index into it first (`hopwise index --backend {engine}`)"
    )]
    MissingCollection { engine: &'static str, collection: String },
    #[error("configuration: {0}")]
    Config(String),
    #[error("embedding: {0}")]
    Embed(#[source] hopwise_core::Error),
    #[error("corpus: {0}")]
    Corpus(#[from] hopwise_index::IndexError),
}

impl RemoteError {
    /// `Ok` when a collection holding `found`-d vectors fits an embedder making `expected`-d ones.
    pub(crate) fn check_dim(engine: &'static str, collection: &str, expected: usize, found: usize) -> Result<(), Self> {
        if expected == found {
            Ok(())
        } else {
            Err(Self::DimensionMismatch { engine, collection: collection.into(), expected, found })
        }
    }

    /// The coarse kind used by retry policy and by the shared error type.
    pub fn kind(&self) -> BackendErrorKind {
        match self {
            Self::Unreachable { .. } => BackendErrorKind::Connection,
            Self::Timeout { .. } => BackendErrorKind::Timeout,
            Self::Status { status: 429, .. } => BackendErrorKind::RateLimited,
            Self::Status { status, .. } if *status >= 500 => BackendErrorKind::Server,
            Self::Status { .. } | Self::Import { .. } | Self::MissingCollection { .. } => BackendErrorKind::Rejected,
            Self::Engine { .. } => BackendErrorKind::Server,
            Self::Malformed { .. } => BackendErrorKind::Malformed,
            Self::DimensionMismatch { .. } | Self::Config(_) => BackendErrorKind::Unsupported,
            Self::Embed(e) => e.backend_kind().unwrap_or(BackendErrorKind::Unsupported),
            Self::Corpus(_) => BackendErrorKind::Unsupported,
        }
    }

    pub fn is_transient(&self) -> bool {
        self.kind().is_transient()
    }

    fn engine(&self) -> &'static str {
        match self {
            Self::Unreachable { engine, .. }
            | Self::Timeout { engine, .. }
            | Self::Status { engine, .. }
            | Self::Engine { engine, .. }
            | Self::Malformed { engine, .. }
            | Self::DimensionMismatch { engine, .. }
            | Self::Import { engine, .. }
            | Self::MissingCollection { engine, .. } => engine,
            Self::Config(_) | Self::Embed(_) | Self::Corpus(_) => "remote",
        }
    }
}

impl From<RemoteError> for hopwise_core::Error {
    fn from(e: RemoteError) -> Self {
        match e {
            RemoteError::Embed(inner) => inner,
            RemoteError::Config(m) => hopwise_core::Error::Config(m),
            other => hopwise_core::Error::backend(other.engine(), other.kind(), other.to_string()),
        }
    }
}

pub type Result<T, E = RemoteError> = std::result::Result<T, E>;
