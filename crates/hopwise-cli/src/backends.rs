//! Turns configuration into live backends.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hopwise_config::{Config, LlmConfig};
use hopwise_core::{Llm, Retriever};
use hopwise_index::Bm25Retriever;
use hopwise_models::OpenAiLlm;

/// The configured model backend. `progress` allows progress output on stderr (model loading).
pub async fn build_llm(config: &Config, _progress: bool) -> Result<Arc<dyn Llm>> {
    match config.llm_config() {
        LlmConfig::Openai(cfg) => {
            let llm = OpenAiLlm::new(cfg.clone()).with_context(|| format!("model backend at {}", cfg.base_url))?;
            Ok(Arc::new(llm))
        }
        LlmConfig::Local { model, .. } => {
            bail!("the in-process backend is not part of this build yet (model `{model}`); use --base-url for an OpenAI-compatible server")
        }
    }
}

/// The BM25 index named by config (`index`, `--index`, or the sample index).
pub fn open_retriever(config: &Config) -> Result<Arc<dyn Retriever>> {
    let dir = config.index_dir();
    let retriever = Bm25Retriever::open(&dir)?;
    Ok(Arc::new(retriever))
}
