use hopwise_core::Error as CoreError;

#[derive(Debug, thiserror::Error)]
pub enum ReasonError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("unknown strategy `{0}` (see `hopwise strategies`)")]
    UnknownStrategy(String),
    #[error("strategy `{0}` needs a retriever, and none is configured (give --index, or use its no-retrieval mode)")]
    NeedsRetriever(String),
    #[error("invalid option: {0}")]
    InvalidOption(String),
}

pub type Result<T, E = ReasonError> = std::result::Result<T, E>;
