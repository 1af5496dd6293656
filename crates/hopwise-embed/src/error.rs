use std::path::PathBuf;

use hopwise_core::BackendErrorKind;

/// Everything that can go wrong while fetching, loading or running an embedder.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("model file missing: {0} (run `hopwise setup --fetch all-minilm-l6-v2` to fetch the embedding model)")]
    MissingFile(PathBuf),
    #[error(
        "model file damaged: {path}: {reason} (run `hopwise setup --fetch all-minilm-l6-v2` to fetch the embedding model again)"
    )]
    Damaged { path: PathBuf, reason: String },
    #[error("{path}: sha256 is {actual}, expected {expected} (file corrupt or from another release)")]
    Checksum { path: PathBuf, expected: String, actual: String },
    #[error("fetching the embedding model failed: {0}")]
    Fetch(String),
    #[error("model config {path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("model weights: {0}")]
    Weights(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("{0}")]
    Backend(#[from] hopwise_core::Error),
}

impl EmbedError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

impl From<EmbedError> for hopwise_core::Error {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::Backend(inner) => inner,
            EmbedError::Tokenizer(message) => {
                hopwise_core::Error::backend("minilm", BackendErrorKind::Unsupported, message)
            }
            other => hopwise_core::Error::Config(other.to_string()),
        }
    }
}

pub type Result<T, E = EmbedError> = std::result::Result<T, E>;
