//! Turns configuration into live backends.

use std::sync::Arc;

use anyhow::{bail, Result};
use hopwise_config::Config;
use hopwise_core::{Llm, Retriever};

pub async fn build_llm(_config: &Config, _progress: bool) -> Result<Arc<dyn Llm>> {
    bail!("model backends are not wired yet")
}

pub fn open_retriever(_config: &Config) -> Result<Arc<dyn Retriever>> {
    bail!("retrievers are not wired yet")
}
