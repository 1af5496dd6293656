//! Turns configuration into live backends.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hopwise_config::{Config, LlmConfig};
use hopwise_core::{Llm, Retriever};
use hopwise_index::Bm25Retriever;
use hopwise_llama::{LocalConfig, LocalLlm};
use hopwise_models::OpenAiLlm;

/// The configured model backend. `progress` allows progress output on stderr (model loading).
pub async fn build_llm(config: &Config, progress: bool) -> Result<Arc<dyn Llm>> {
    match config.llm_config() {
        LlmConfig::Openai(cfg) => {
            let llm = OpenAiLlm::new(cfg.clone()).with_context(|| format!("model backend at {}", cfg.base_url))?;
            Ok(Arc::new(llm))
        }
        LlmConfig::Local { model, threads, context } => {
            let home = config.home_dir();
            let path = hopwise_llama::installed_model(model, &home)
                .or_else(|| std::path::Path::new(model).is_file().then(|| model.into()));
            let Some(path) = path else {
                bail!(
                    "model `{model}` is not installed in {}; run `hopwise setup --fetch {model}` (known models: {})",
                    home.display(),
                    hopwise_llama::registry::known_names()
                );
            };
            let local = LocalConfig { n_ctx: *context, threads: threads.map(|t| t as usize), ..LocalConfig::default() };
            if progress {
                eprintln!("loading {} ...", path.display());
            }
            let name = format!("local:{model}");
            let llm = tokio::task::spawn_blocking(move || LocalLlm::load(&path, local))
                .await
                .context("the model loader stopped")??
                .with_name(name);
            Ok(Arc::new(llm))
        }
    }
}

/// The BM25 index named by config (`index`, `--index`, or the sample index).
pub fn open_retriever(config: &Config) -> Result<Arc<dyn Retriever>> {
    let dir = config.index_dir();
    let retriever = Bm25Retriever::open(&dir)?;
    Ok(Arc::new(retriever))
}
