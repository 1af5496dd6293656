//! `LocalLlm`: the public face of the in-process backend.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hopwise_core::{ChatRequest, ChatResponse, Llm};
use tokio::sync::oneshot;

use crate::engine::{self, Job};
use crate::error::{LlamaError, Result};
use crate::gguf;
use crate::template::TemplateSource;

/// Environment variable with the number of inference threads.
pub const THREADS_ENV: &str = "HOPWISE_THREADS";

/// How requests that arrive while the model is busy are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Concurrency {
    /// Waiting requests join one decoding round: their sequences share every batched decode step.
    Batch,
    /// One request at a time, in arrival order.
    Queue,
}

/// Settings of the local backend.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LocalConfig {
    /// KV-cache cells shared by all sequences of a round: prompt + n × max_tokens must fit (larger `n`
    /// runs in waves). A prompt of `n_ctx` tokens or more is refused with [`LlamaError::PromptTooLong`];
    /// a shorter one gets at most `n_ctx - prompt` new tokens.
    pub n_ctx: u32,
    /// Inference threads; `None` reads `HOPWISE_THREADS`, else uses every available core.
    pub threads: Option<usize>,
    /// Tokens evaluated per prompt-decoding step.
    pub n_batch: u32,
    /// Most sequences decoded together (samples of all requests in a round).
    pub max_sequences: u32,
    pub concurrency: Concurrency,
    /// Keep only the k most likely tokens before top-p (0 = off); bounds the sampling cost per token.
    pub top_k: u32,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self { n_ctx: 4096, threads: None, n_batch: 512, max_sequences: 32, concurrency: Concurrency::Batch, top_k: 40 }
    }
}

impl LocalConfig {
    /// The thread count to use: the explicit setting, `HOPWISE_THREADS`, or the available cores.
    pub fn resolved_threads(&self) -> usize {
        self.threads
            .or_else(|| std::env::var(THREADS_ENV).ok().and_then(|value| value.trim().parse().ok()))
            .filter(|threads| *threads > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    }
}

/// What was loaded, and how.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelInfo {
    pub path: PathBuf,
    pub n_ctx: u32,
    pub n_ctx_train: u32,
    pub n_params: u64,
    pub size_bytes: u64,
    pub threads: usize,
    pub template: TemplateSource,
    pub load_time: Duration,
}

/// Where the time of one request went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timing {
    /// Waiting for the worker (earlier requests, or earlier waves of this one).
    pub queue_time: Duration,
    pub prompt_tokens: usize,
    /// Evaluating the prompt (once per wave of samples).
    pub prompt_time: Duration,
    /// How often the prompt was evaluated: 1 unless the samples did not fit the KV cache at once.
    pub prompt_evaluations: usize,
    /// Tokens generated, over all samples.
    pub generated_tokens: usize,
    /// Batched decoding of the round(s) this request took part in.
    pub decode_time: Duration,
    /// Batched decode calls in those rounds (each advances every live sequence by one token).
    pub decode_steps: usize,
}

/// A response together with its timing.
#[derive(Debug, Clone)]
pub struct Generation {
    pub response: ChatResponse,
    pub timing: Timing,
}

/// A GGUF model served in-process by llama.cpp.
///
/// The model and its context live on one worker thread; requests reach it through a queue and callers
/// await the reply, so any number of tasks may call [`Llm::chat`] at once. The `n` samples of a request
/// share one prompt evaluation (its KV cache is copied to `n` sequences decoded in one batch).
pub struct LocalLlm {
    name: String,
    /// See [`crate::setup::file_identity`].
    file_identity: String,
    info: ModelInfo,
    config: LocalConfig,
    jobs: mpsc::Sender<Job>,
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
        let (jobs, info) = engine::spawn(path, &config)?;
        Ok(Self { name: format!("local:{stem}"), file_identity, info, config, jobs })
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
    fn explicit_threads_win_and_zero_is_ignored() {
        let config = LocalConfig { threads: Some(3), ..LocalConfig::default() };
        assert_eq!(config.resolved_threads(), 3);
        let config = LocalConfig { threads: Some(0), ..LocalConfig::default() };
        assert!(config.resolved_threads() >= 1);
    }

    #[test]
    fn loading_a_non_model_fails_before_llama_cpp_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.gguf");
        std::fs::write(&path, b"GGUF").unwrap();
        let err = LocalLlm::load(&path, LocalConfig::default()).unwrap_err();
        assert!(matches!(err, LlamaError::Truncated { .. }), "{err}");
    }
}
