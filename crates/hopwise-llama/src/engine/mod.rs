//! The worker thread that owns the model and its context.
//!
//! llama.cpp's context is not thread-safe, so exactly one thread touches it. Requests queue on a
//! channel; the worker renders and tokenizes each ([`Core::prepare`]) and hands it to the scheduler,
//! [`continuous`]: continuous batching with a prefix cache and prompt-lookup decoding (or, with
//! `Concurrency::Queue`, one running request at a time).

mod continuous;
mod kv;
mod lookup;
mod prompt;
mod request;
mod sampling;

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Instant;

use hopwise_core::{ChatResponse, Completion, GenParams, Usage};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::oneshot;

pub use sampling::GREEDY_TEMPERATURE;

use crate::config::LocalConfig;
use crate::error::{LlamaError, Result};
use crate::job::{EngineStats, Generation, Job, ModelInfo, Timing};
use prompt::PromptFormat;

static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();

/// llama.cpp's backend may be initialised once per process; every model shares it.
fn backend() -> Result<&'static LlamaBackend> {
    BACKEND
        .get_or_init(|| {
            // llama.cpp's log lines go to `tracing`, shown only where the application enables them.
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|err| err.to_string())
        })
        .as_ref()
        .map_err(|err| LlamaError::Runtime(format!("backend init: {err}")))
}

/// The worker's handles, as [`crate::LocalLlm`] keeps them.
pub(crate) struct Worker {
    pub jobs: mpsc::Sender<Job>,
    pub info: ModelInfo,
    pub stats: Arc<Mutex<EngineStats>>,
}

/// Starts the worker and waits until the model is loaded.
pub(crate) fn spawn(path: PathBuf, config: &LocalConfig) -> Result<Worker> {
    let (job_sender, job_receiver) = mpsc::channel::<Job>();
    let (ready_sender, ready_receiver) = mpsc::channel::<Result<ModelInfo>>();
    let stats = Arc::new(Mutex::new(EngineStats::default()));
    let config = config.clone();
    let worker_stats = stats.clone();
    std::thread::Builder::new()
        .name("hopwise-llama".into())
        .spawn(move || run_worker(path, config, job_receiver, ready_sender, worker_stats))
        .map_err(|err| LlamaError::io("starting the model thread", err))?;
    let info = ready_receiver.recv().map_err(|_| LlamaError::WorkerGone)??;
    Ok(Worker { jobs: job_sender, info, stats })
}

fn run_worker(
    path: PathBuf,
    config: LocalConfig,
    jobs: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<ModelInfo>>,
    stats: Arc<Mutex<EngineStats>>,
) {
    let started = Instant::now();
    let threads = config.resolved_threads();
    let loaded = backend().and_then(|backend| {
        let model = LlamaModel::load_from_file(backend, &path, &LlamaModelParams::default())
            .map_err(|err| LlamaError::Load { path: path.clone(), message: err.to_string() })?;
        Ok((backend, model))
    });
    let (backend, model) = match loaded {
        Ok(loaded) => loaded,
        Err(err) => {
            let _ = ready.send(Err(err));
            return;
        }
    };
    let n_ctx = config.n_ctx.clamp(64, model.n_ctx_train().max(64));
    let max_sequences = config.max_sequences.clamp(1, 256);
    let n_batch = config.n_batch.max(32);
    let thread_count = i32::try_from(threads).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_seq_max(max_sequences)
        // One cell pool for all sequences, so a shared prompt prefix is stored once and copying it
        // to another sequence only tags its cells.
        .with_kv_unified(true)
        .with_n_threads(thread_count)
        .with_n_threads_batch(thread_count);
    let context = match model.new_context(backend, params) {
        Ok(context) => context,
        Err(err) => {
            let _ = ready.send(Err(LlamaError::Load { path: path.clone(), message: format!("context: {err}") }));
            return;
        }
    };
    let core = Core {
        model: &model,
        context,
        batch: LlamaBatch::new(n_batch.max(max_sequences) as usize, 1),
        format: PromptFormat::new(&model),
        n_ctx: n_ctx as usize,
        max_sequences: max_sequences as usize,
        n_batch: n_batch as usize,
        top_k: config.top_k,
    };
    let info = ModelInfo {
        path,
        n_ctx,
        n_ctx_train: model.n_ctx_train(),
        n_params: model.n_params(),
        size_bytes: model.size(),
        threads,
        template: core.format.source,
        load_time: started.elapsed(),
    };
    if ready.send(Ok(info)).is_err() {
        return;
    }
    continuous::Scheduler::new(core, &config, stats).run(&jobs);
}

/// A request rendered, tokenized and checked, ready for a scheduler.
pub(crate) struct Prepared {
    pub reply: oneshot::Sender<Result<Generation>>,
    pub params: GenParams,
    pub prompt: Vec<LlamaToken>,
    /// Most new tokens per sample: `max_tokens`, bounded by the room the prompt leaves.
    pub cap: usize,
    pub samples: usize,
    pub base_seed: u64,
    pub queued_at: Instant,
}

/// The model, its context and what both schedulers need around them.
pub(crate) struct Core<'model> {
    pub model: &'model LlamaModel,
    pub context: LlamaContext<'model>,
    pub batch: LlamaBatch<'static>,
    pub format: PromptFormat,
    pub n_ctx: usize,
    pub max_sequences: usize,
    pub n_batch: usize,
    pub top_k: u32,
}

impl Core<'_> {
    /// Renders and tokenizes a request and rejects what cannot run (too long a prompt, a bad grammar)
    /// before any scheduling. Requests that need no generation are answered here. `None` when the
    /// request was answered.
    pub fn prepare(&self, job: Job) -> Option<Prepared> {
        let Job { request, reply, queued_at } = job;
        let prepared = self.format.render(self.model, &request.messages).and_then(|text| {
            let prompt = self.format.tokenize(self.model, &text);
            if prompt.is_empty() || prompt.len() >= self.n_ctx {
                return Err(LlamaError::PromptTooLong { prompt_tokens: prompt.len(), n_ctx: self.n_ctx as u32 });
            }
            if let Some(grammar) = &request.params.grammar {
                // Fail the request up front rather than in a batch shared with others.
                LlamaSampler::grammar(self.model, grammar, "root").map_err(|_| LlamaError::Grammar)?;
            }
            Ok(prompt)
        });
        let prompt = match prepared {
            Ok(prompt) => prompt,
            Err(err) => {
                let _ = reply.send(Err(err));
                return None;
            }
        };
        let params = request.params;
        let samples = params.n.max(1) as usize;
        let cap = (params.max_tokens as usize).min(self.n_ctx - prompt.len());
        if cap == 0 {
            let completion = Completion { finish_reason: Some("length".into()), ..Completion::default() };
            let response = ChatResponse {
                choices: vec![completion; samples],
                usage: Usage::new(prompt.len() as u64, 0),
                grammar_used: params.grammar.is_some(),
                timing: Some(Timing::default().call_timing()),
            };
            let timing = Timing { prompt_tokens: prompt.len(), ..Timing::default() };
            let _ = reply.send(Ok(Generation { response, timing }));
            return None;
        }
        let base_seed = sampling::base_seed(&params);
        Some(Prepared { reply, params, prompt, cap, samples, base_seed, queued_at })
    }
}

fn runtime(err: impl std::fmt::Display) -> LlamaError {
    LlamaError::Runtime(err.to_string())
}
