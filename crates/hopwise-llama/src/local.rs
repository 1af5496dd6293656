//! `LocalLlm`: the public face of the in-process backend.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hopwise_core::{ChatRequest, ChatResponse, Llm};
use tokio::sync::oneshot;

use crate::config::LocalConfig;
use crate::engine;
use crate::error::{LlamaError, Result};
use crate::gguf;
use crate::job::{EngineStats, Generation, Job, ModelInfo};

/// A GGUF model served in-process by llama.cpp.
///
/// The model and its context live on one worker thread; requests reach it through a queue and callers
/// await the reply, so any number of tasks may call [`Llm::chat`] at once. The `n` samples of a request
/// share one prompt evaluation, and requests share cached prompt prefixes. Dropping the future of a
/// call stops its generation within a decode step and frees its cells.
pub struct LocalLlm {
    name: String,
    /// See [`crate::setup::file_identity`].
    file_identity: String,
    info: ModelInfo,
    config: LocalConfig,
    jobs: mpsc::Sender<Job>,
    stats: Arc<Mutex<EngineStats>>,
}

impl std::fmt::Debug for LocalLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLlm").field("name", &self.name).field("info", &self.info).finish()
    }
}

impl LocalLlm {
    /// Loads the GGUF at `path` (validated first) and starts its worker thread. Blocks while loading.
    pub fn load(path: impl AsRef<Path>, config: LocalConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        gguf::validate(&path)?;
        let stem = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        let file_identity = crate::setup::file_identity(&path);
        let worker = engine::spawn(path, &config)?;
        Ok(Self {
            name: format!("local:{stem}"),
            file_identity,
            info: worker.info,
            config,
            jobs: worker.jobs,
            stats: worker.stats,
        })
    }

    /// Resolves a registry name or a GGUF path with [`crate::ensure_model`] (fetching a named model
    /// that is not installed yet under `home`), then loads it. Named models are called `local:<name>`.
    pub fn open(
        name_or_path: &str,
        home: &Path,
        config: LocalConfig,
        progress: &mut dyn FnMut(&crate::SetupEvent),
    ) -> Result<Self> {
        let path = crate::ensure_model(name_or_path, home, progress)?;
        let llm = Self::load(path, config)?;
        Ok(match crate::registry::find(name_or_path) {
            Some(known) => llm.with_name(format!("local:{}", known.name)),
            None => llm,
        })
    }

    /// Overrides the name shown in traces (e.g. `local:qwen2.5-0.5b`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// The engine's state after its latest decode step: requests, sequences, cells, running totals.
    pub fn stats(&self) -> EngineStats {
        self.stats.lock().map(|stats| stats.clone()).unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// Waits, polling every 20 ms, until the engine's counters satisfy `done`: `Err` with the last
    /// counters when `limit` passes first. For tests and benchmarks that watch the engine work.
    pub async fn wait_for_stats(
        &self,
        limit: Duration,
        done: impl Fn(&EngineStats) -> bool,
    ) -> std::result::Result<EngineStats, EngineStats> {
        let started = Instant::now();
        loop {
            let stats = self.stats();
            if done(&stats) {
                return Ok(stats);
            }
            if started.elapsed() >= limit {
                return Err(stats);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn submit(&self, request: &ChatRequest) -> Result<oneshot::Receiver<Result<Generation>>> {
        let (reply, receiver) = oneshot::channel();
        let job = Job { request: request.clone(), reply, queued_at: Instant::now() };
        self.jobs.send(job).map_err(|_| LlamaError::WorkerGone)?;
        Ok(receiver)
    }

    /// Generates with this crate's error type and the request's timing.
    pub async fn generate(&self, request: &ChatRequest) -> Result<Generation> {
        self.submit(request)?.await.map_err(|_| LlamaError::WorkerGone)?
    }

    /// [`Self::generate`] for synchronous callers. Must not be called from inside an async runtime.
    pub fn generate_blocking(&self, request: &ChatRequest) -> Result<Generation> {
        self.submit(request)?.blocking_recv().map_err(|_| LlamaError::WorkerGone)?
    }
}

#[async_trait]
impl Llm for LocalLlm {
    fn name(&self) -> &str {
        &self.name
    }

    /// The model file's contents and the settings that shape every reply (context size, top-k).
    fn identity(&self) -> String {
        format!("local model={} n_ctx={} top_k={}", self.file_identity, self.info.n_ctx, self.config.top_k)
    }

    async fn chat(&self, request: &ChatRequest) -> hopwise_core::Result<ChatResponse> {
        match self.generate(request).await {
            Ok(generation) => Ok(generation.response),
            Err(err) => Err(err.into_core(&self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_a_non_model_fails_before_llama_cpp_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.gguf");
        std::fs::write(&path, b"GGUF").unwrap();
        let err = LocalLlm::load(&path, LocalConfig::default()).unwrap_err();
        assert!(matches!(err, LlamaError::Truncated { .. }), "{err}");
    }
}
