use std::path::PathBuf;

/// Everything that can go wrong while reading a corpus, building an index or searching it.
///
/// Problems with single corpus lines or files are not errors: they are reported as
/// [`Issue`](crate::corpus::Issue)s and the rest of the corpus is indexed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{}: no such file or directory", path.display())]
    InputNotFound { path: PathBuf },

    #[error("{}: not a regular file or folder (a device, pipe or socket); give corpus files or folders", path.display())]
    NotARegularFile { path: PathBuf },

    #[error(
        "no index at {}: build one with `hopwise index PATH... --index {}`",
        dir.display(),
        dir.display()
    )]
    MissingIndex { dir: PathBuf },

    #[error(
        "the index at {} is unreadable ({reason}); rebuild it with `hopwise index PATH... --index {}`",
        dir.display(),
        dir.display()
    )]
    CorruptIndex { dir: PathBuf, reason: String },

    #[error(
        "the index at {} has schema version {found}, this hopwise reads version {expected}; \
         rebuild it with `hopwise index PATH... --index {}`",
        dir.display(),
        dir.display()
    )]
    IncompatibleIndex { dir: PathBuf, found: u32, expected: u32 },

    #[error("{} exists and is not a hopwise index; choose an empty or new directory", dir.display())]
    NotAnIndexDir { dir: PathBuf },

    #[error(
        "the index at {} has no dense index: build one with `hopwise index PATH... --index {} --dense`",
        dir.display(),
        dir.display()
    )]
    MissingDense { dir: PathBuf },

    #[error(
        "the dense index at {} was built with {index_model}, but the query side uses {query_model}; \
         use the same embedder, or rebuild the dense index (delete {}/dense and run `hopwise index --dense`)",
        dir.display(),
        dir.display()
    )]
    EmbedderMismatch { dir: PathBuf, index_model: String, query_model: String },

    #[error("embedding passages: {0}")]
    Embedding(String),

    #[error("invalid index options: {0}")]
    InvalidOptions(String),

    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    #[error("search engine: {0}")]
    Engine(#[from] tantivy::TantivyError),
}

impl IndexError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

impl From<IndexError> for hopwise_core::Error {
    fn from(err: IndexError) -> Self {
        match err {
            IndexError::Io { path, source } => {
                hopwise_core::Error::Io(std::io::Error::new(source.kind(), format!("{}: {source}", path.display())))
            }
            IndexError::InvalidOptions(msg) => hopwise_core::Error::InvalidInput(msg),
            other => {
                hopwise_core::Error::backend("bm25", hopwise_core::BackendErrorKind::Unsupported, other.to_string())
            }
        }
    }
}

pub type Result<T, E = IndexError> = std::result::Result<T, E>;
