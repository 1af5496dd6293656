//! A request inside the continuous scheduler: its prompt, the sequences generating its samples, the
//! samples waiting for a sequence, and what it will reply.

use std::time::Instant;

use hopwise_core::{ChatResponse, Completion, Usage};
use llama_cpp_2::token::LlamaToken;

use super::lookup::DraftLength;
use super::sampling::{Output, SequenceSampler};
use super::Prepared;
use crate::error::LlamaError;
use crate::job::{Generation, Timing};

/// What a sequence is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting until sequence `source` has evaluated the first `upto` prompt tokens this one shares
    /// with it, to copy them instead of evaluating them a second time.
    AwaitPrefix { source: i32, upto: usize },
    /// Evaluating the prompt from token `next` on (the KV cache holds the tokens before it).
    Prompt { next: usize },
    /// Generating: `pending` was sampled and goes into the KV cache with the next step.
    Generate { pending: LlamaToken },
}

/// A sample whose first token is drawn, waiting for a sequence (when `n` exceeds what fits at once).
pub(crate) struct Parked {
    pub sample: usize,
    pub sampler: SequenceSampler,
    pub output: Output,
    pub first: LlamaToken,
}

/// One sequence of the KV cache working for a request.
pub(crate) struct Sequence {
    pub seq_id: i32,
    /// Which sample of the request it generates (the sample's seed offset and place in the reply).
    /// The prompt-evaluating sequence generates sample 0.
    pub sample: usize,
    pub phase: Phase,
    pub sampler: Option<SequenceSampler>,
    pub output: Output,
    /// Tokens emitted so far (for prompt lookup).
    pub generated: Vec<LlamaToken>,
    pub draft_length: DraftLength,
}

impl Sequence {
    pub fn new(seq_id: i32, sample: usize, phase: Phase, draft_max: usize) -> Self {
        Self {
            seq_id,
            sample,
            phase,
            sampler: None,
            output: Output::default(),
            generated: Vec::new(),
            draft_length: DraftLength::new(draft_max),
        }
    }

    pub fn finished(&self) -> bool {
        self.output.finish.is_some()
    }
}

pub(crate) struct Request {
    pub id: u64,
    /// The request as prepared: reply channel, parameters, prompt tokens, cap, samples, seed.
    pub job: Prepared,
    /// Draft tokens per step for prompt lookup (0: off for this request).
    pub draft_max: usize,
    /// Sequences decoded at once (the rest of the samples wait in `parked`).
    pub width: usize,
    pub sequences: Vec<Sequence>,
    /// Sequence ids held for the samples that start when the prompt is evaluated.
    pub reserved: Vec<i32>,
    pub parked: Vec<Parked>,
    pub completions: Vec<Option<Completion>>,
    pub top_logprobs: Option<Vec<(String, f32)>>,
    pub timing: Timing,
    pub admitted: Option<Instant>,
    pub first_token: Option<Instant>,
    /// The last decode step counted in `timing.decode_steps`.
    pub last_step: Option<u64>,
    /// Set when serving it failed; the request is answered with it at the end of the step.
    pub error: Option<LlamaError>,
}

impl Request {
    pub fn is_done(&self) -> bool {
        self.completions.iter().all(Option::is_some)
    }

    /// The reply, once every sample is complete.
    pub fn response(&mut self) -> Generation {
        let mut choices: Vec<Completion> = self.completions.iter_mut().map(|c| c.take().unwrap_or_default()).collect();
        if let (Some(top), Some(first)) = (self.top_logprobs.take(), choices.first_mut()) {
            first.top_logprobs = top;
        }
        let response = ChatResponse {
            choices,
            usage: Usage {
                prompt_tokens: self.job.prompt.len() as u64,
                completion_tokens: self.timing.generated_tokens as u64,
                cached_prompt_tokens: self.timing.cached_prompt_tokens as u64,
            },
            grammar_used: self.job.params.grammar.is_some(),
            timing: Some(self.timing.call_timing()),
        };
        Generation { response, timing: self.timing }
    }

    pub fn send(self, result: std::result::Result<Generation, LlamaError>) {
        let _ = self.job.reply.send(result);
    }
}
