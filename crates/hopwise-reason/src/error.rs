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
    /// A network client set an option that names a file on the server.
    #[error("option `{option}` of strategy `{strategy}` names a file on the server; set it in the server's configuration, not in a request")]
    ServerPathOption { strategy: String, option: String },
}

impl ReasonError {
    /// The one error policy of every strategy. Fatal errors are the caller's to fix (the input, the
    /// configuration, a prompt template) and stop the question; every other error (a backend that
    /// failed, a spent budget, I/O) degrades to a best-effort answer, marked as such in the trace.
    pub fn is_fatal(&self) -> bool {
        match self {
            Self::EmptyQuestion
            | Self::UnknownStrategy(_)
            | Self::NeedsRetriever(_)
            | Self::InvalidOption(_)
            | Self::ServerPathOption { .. } => true,
            Self::Core(e) => matches!(
                e,
                hopwise_core::Error::Template { .. }
                    | hopwise_core::Error::Config(_)
                    | hopwise_core::Error::InvalidInput(_)
            ),
        }
    }
}

pub type Result<T, E = ReasonError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use hopwise_core::{BackendErrorKind, Error as CoreError};

    use super::*;

    #[test]
    fn input_and_configuration_errors_are_fatal_the_rest_degrades() {
        assert!(ReasonError::EmptyQuestion.is_fatal());
        assert!(ReasonError::InvalidOption("x".into()).is_fatal());
        assert!(ReasonError::Core(CoreError::Template { name: "t".into(), message: "m".into() }).is_fatal());
        assert!(!ReasonError::Core(CoreError::Budget("max_llm_calls".into())).is_fatal());
        assert!(!ReasonError::Core(CoreError::backend("b", BackendErrorKind::Timeout, "slow")).is_fatal());
    }
}
