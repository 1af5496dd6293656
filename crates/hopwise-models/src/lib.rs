//! Language-model backends of hopwise.
//!
//! - [`OpenAiLlm`]: any OpenAI-compatible `/chat/completions` server (vLLM, llama.cpp's server, Ollama,
//!   OpenAI), with timeouts, retries with backoff and jitter, and a per-backend concurrency limit.
//! - [`CachedLlm`]: a content-addressed on-disk cache of model calls, so evaluations can be replayed
//!   offline and resumed without paying twice. [`DiskCache`] is the store underneath, usable for other
//!   calls (e.g. retrieval) too.
//! - `testing` (feature `testing`, for dev-dependencies): a real HTTP mock of an OpenAI-compatible
//!   server with injectable faults, for the tests of this and other crates.
//!
//! A backend as configured in `hopwise.toml` (every [`OpenAiConfig`] field but `model` has a default):
//!
//! ```toml
//! [llm.remote]
//! kind = "openai"
//! base_url = "http://127.0.0.1:8080/v1"   # llama.cpp server, vLLM, Ollama (…:11434/v1), OpenAI
//! model = "qwen2.5-coder-1.5b"
//! api_key_env = "OPENAI_API_KEY"           # name of the variable, never the key
//! max_in_flight = 4
//! ```
//!
//! and in code:
//!
//! ```no_run
//! # async fn demo() -> hopwise_core::Result<()> {
//! use hopwise_core::{ChatRequest, Llm};
//! use hopwise_models::{CacheMode, CachedLlm, OpenAiConfig, OpenAiLlm};
//!
//! let llm = OpenAiLlm::new(OpenAiConfig::new("http://127.0.0.1:8080/v1", "qwen"))?;
//! let llm = CachedLlm::new(llm, ".hopwise/cache/llm", CacheMode::ReadWrite);
//! let answer = llm.chat(&ChatRequest::user("Who directed Jaws?")).await?;
//! println!("{} ({:?})", answer.text(), llm.stats());
//! # Ok(()) }
//! ```

pub mod cache;
pub mod openai;
mod retry;
#[cfg(feature = "testing")]
pub mod testing;
mod wire;

pub use cache::{CacheMode, CacheStats, CachedLlm, DiskCache};
pub use openai::{redact_url, OpenAiConfig, OpenAiLlm};
