//! What travels between [`crate::LocalLlm`] and its worker thread: requests, their results and
//! timings, what was loaded, and the engine's live counters.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hopwise_core::{CallTiming, ChatRequest, ChatResponse};
use tokio::sync::oneshot;

use crate::error::Result;
use crate::template::TemplateSource;

/// One request on its way to the worker. The worker drops it (and frees its KV cells) as soon as
/// `reply` is closed, i.e. when the caller stopped waiting.
pub(crate) struct Job {
    pub request: ChatRequest,
    pub reply: oneshot::Sender<Result<Generation>>,
    pub queued_at: Instant,
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

/// Where the time of one request went. Under continuous batching a request shares its decode steps
/// with others, so these are wall-clock spans of this request: queue + prompt + decode is its whole
/// time in the engine.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timing {
    /// From submission until its first prompt tokens were scheduled (waiting for room in the KV cache,
    /// or for the running request under `Concurrency::Queue`).
    pub queue_time: Duration,
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV cells were reused from the prefix cache instead of evaluated.
    pub cached_prompt_tokens: usize,
    /// From admission until the first token was sampled: evaluating the prompt (in chunks beside other
    /// requests' decoding).
    pub prompt_time: Duration,
    /// Tokens generated, over all samples.
    pub generated_tokens: usize,
    /// From the first sampled token until the last sample finished.
    pub decode_time: Duration,
    /// Batched decode calls this request took part in while generating.
    pub decode_steps: usize,
    /// Prompt-lookup draft tokens proposed, and how many of them the model confirmed.
    pub drafted_tokens: usize,
    pub accepted_draft_tokens: usize,
}

impl Timing {
    /// The backend-neutral form carried in [`ChatResponse::timing`] and the trace.
    pub fn call_timing(&self) -> CallTiming {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        CallTiming { queue_ms: ms(self.queue_time), prompt_ms: ms(self.prompt_time), decode_ms: ms(self.decode_time) }
    }
}

/// A response together with its timing.
#[derive(Debug, Clone)]
pub struct Generation {
    pub response: ChatResponse,
    pub timing: Timing,
}

/// The engine's state and running totals, updated after every decode step.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    /// Requests waiting for admission.
    pub waiting: usize,
    /// Requests admitted and not finished.
    pub running: usize,
    /// Sequences evaluating a prompt or generating.
    pub live_sequences: usize,
    /// Finished requests' sequences kept for prefix reuse.
    pub cached_sequences: usize,
    pub kv_cells_used: usize,
    pub kv_cells: usize,
    /// Decode calls so far.
    pub steps: u64,
    pub completed: u64,
    /// Requests dropped because their caller stopped waiting.
    pub cancelled: u64,
    pub failed: u64,
    pub prompt_tokens_evaluated: u64,
    pub prompt_tokens_reused: u64,
    pub tokens_generated: u64,
    pub drafted_tokens: u64,
    pub accepted_draft_tokens: u64,
}
