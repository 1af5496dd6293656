//! Language-model backends of hopwise.
//!
//! - [`OpenAiLlm`]: any OpenAI-compatible `/chat/completions` server (vLLM, llama.cpp's server, Ollama,
//!   OpenAI), with timeouts, retries with backoff and jitter, and a per-backend concurrency limit.
//! - [`CachedLlm`]: a content-addressed on-disk cache of model calls, so evaluations can be replayed
//!   offline and resumed without paying twice. [`DiskCache`] is the store underneath, usable for other
//!   calls (e.g. retrieval) too.
//! - [`testing`]: a real HTTP mock of an OpenAI-compatible server with injectable faults, for the tests of
//!   this and other crates.

pub mod cache;
pub mod openai;
mod retry;
pub mod testing;
mod wire;

pub use cache::{CacheMode, CacheStats, CachedLlm, DiskCache};
pub use openai::{OpenAiConfig, OpenAiLlm};
