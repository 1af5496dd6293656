//! The round scheduler (the engine before continuous batching), kept so benchmarks can compare.
//!
//! Requests are served in *rounds*: a round clears the KV cache, evaluates each admitted request's
//! prompt once into its first sequence, copies that KV prefix to the request's other sample sequences,
//! and then decodes every live sequence of every admitted request together, one token per sequence per
//! step, until all of them finish. With `batch`, the requests waiting when a round starts join it;
//! otherwise each request has its own round. A request whose samples do not all fit the KV cache runs
//! in waves. Nothing is reused between rounds, and a caller that goes away is not noticed.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Mutex};
use std::time::Instant;

use hopwise_core::{ChatResponse, Completion, Usage};
use llama_cpp_2::token::LlamaToken;

use super::sampling::{self, Output, SequenceSampler};
use super::{runtime, Core, Prepared};
use crate::error::{LlamaError, Result};
use crate::job::{EngineStats, Generation, Job, Timing};

pub(crate) fn run(mut core: Core<'_>, batch_waiting: bool, jobs: &mpsc::Receiver<Job>, stats: &Mutex<EngineStats>) {
    while let Ok(first) = jobs.recv() {
        let mut round = vec![first];
        if batch_waiting {
            round.extend(jobs.try_iter());
        }
        // A panic inside llama-cpp-2 drops this round's reply channels (callers see an error) but must
        // not take the worker down for later requests.
        let _ = catch_unwind(AssertUnwindSafe(|| serve(&mut core, round, stats)));
    }
}

/// One request while it is being served.
struct Pending {
    job: Prepared,
    samples_started: usize,
    completions: Vec<Completion>,
    top_logprobs: Option<Vec<(String, f32)>>,
    timing: Timing,
}

impl Pending {
    fn remaining(&self) -> usize {
        self.job.samples - self.samples_started
    }

    /// KV cells for `wave` samples: the shared prompt plus each sample's new tokens.
    fn cells(&self, wave: usize) -> usize {
        self.job.prompt.len() + wave * self.job.cap
    }

    fn finish(mut self) {
        if let (Some(top), Some(first)) = (self.top_logprobs.take(), self.completions.first_mut()) {
            first.top_logprobs = top;
        }
        let response = ChatResponse {
            choices: self.completions,
            usage: Usage::new(self.job.prompt.len() as u64, self.timing.generated_tokens as u64),
            grammar_used: self.job.params.grammar.is_some(),
            timing: Some(self.timing.call_timing()),
        };
        let _ = self.job.reply.send(Ok(Generation { response, timing: self.timing }));
    }

    fn fail(self, err: LlamaError) {
        let _ = self.job.reply.send(Err(err));
    }
}

/// One sampled continuation inside a round.
struct Sequence {
    owner: usize,
    seq_id: i32,
    position: i32,
    sampler: SequenceSampler,
    last_token: LlamaToken,
    output: Output,
}

fn serve(core: &mut Core<'_>, jobs: Vec<Job>, stats: &Mutex<EngineStats>) {
    let mut pending: VecDeque<Pending> = jobs
        .into_iter()
        .filter_map(|job| core.prepare(job))
        .map(|job| Pending {
            timing: Timing { prompt_tokens: job.prompt.len(), ..Timing::default() },
            job,
            samples_started: 0,
            completions: Vec::new(),
            top_logprobs: None,
        })
        .collect();
    while !pending.is_empty() {
        // Admit requests in arrival order while their next wave fits the cells and sequences left.
        let mut round: Vec<(Pending, usize)> = Vec::new();
        let (mut free_cells, mut free_sequences) = (core.n_ctx, core.max_sequences);
        while let Some(front) = pending.front() {
            let room = free_cells.saturating_sub(front.job.prompt.len()) / front.job.cap;
            let wave = front.remaining().min(free_sequences).min(room);
            if wave == 0 {
                break;
            }
            free_cells -= front.cells(wave);
            free_sequences -= wave;
            if let Some(admitted) = pending.pop_front() {
                round.push((admitted, wave));
            }
        }
        if round.is_empty() {
            // Unreachable by construction (a lone request always fits); never spin on it.
            if let Some(stuck) = pending.pop_front() {
                stuck.fail(LlamaError::Runtime("request does not fit the KV cache".into()));
            }
            continue;
        }
        let started = Instant::now();
        for (request, _) in round.iter_mut() {
            request.timing.queue_time += started.saturating_duration_since(request.job.queued_at);
        }
        let outcome = run_round(core, &mut round, stats);
        let finished_at = Instant::now();
        let mut unfinished = Vec::new();
        let mut completed = 0;
        for (mut request, _) in round {
            if let Err(err) = &outcome {
                request.fail(LlamaError::Runtime(err.to_string()));
            } else if request.remaining() > 0 {
                request.job.queued_at = finished_at;
                unfinished.push(request);
            } else {
                request.finish();
                completed += 1;
            }
        }
        if let Ok(mut stats) = stats.lock() {
            stats.completed += completed;
        }
        // Requests with samples left keep their place at the front.
        for request in unfinished.into_iter().rev() {
            pending.push_front(request);
        }
    }
}

/// Evaluates `tokens` into sequence `seq_id` from position 0; returns the batch index of the logits.
fn eval_prompt(core: &mut Core<'_>, tokens: &[LlamaToken], seq_id: i32) -> Result<i32> {
    let mut last_index = 0;
    let chunks = tokens.len().div_ceil(core.n_batch);
    for (chunk_index, chunk) in tokens.chunks(core.n_batch).enumerate() {
        core.batch.clear();
        let is_last_chunk = chunk_index + 1 == chunks;
        for (offset, token) in chunk.iter().enumerate() {
            let position = (chunk_index * core.n_batch + offset) as i32;
            let wants_logits = is_last_chunk && offset + 1 == chunk.len();
            core.batch.add(*token, position, &[seq_id], wants_logits).map_err(runtime)?;
        }
        core.context.decode(&mut core.batch).map_err(runtime)?;
        last_index = chunk.len() as i32 - 1;
    }
    Ok(last_index)
}

fn run_round(core: &mut Core<'_>, round: &mut [(Pending, usize)], stats: &Mutex<EngineStats>) -> Result<()> {
    core.context.clear_kv_cache();
    let mut sequences: Vec<Sequence> = Vec::new();
    let mut next_seq_id = 0i32;
    for (owner, (request, wave)) in round.iter_mut().enumerate() {
        let first_seq = next_seq_id;
        let started = Instant::now();
        let logits_index = eval_prompt(core, &request.job.prompt, first_seq)?;
        request.timing.prompt_time += started.elapsed();
        request.timing.prompt_evaluations += 1;
        for offset in 1..*wave as i32 {
            core.context.kv_cache_seq_cp(first_seq, first_seq + offset, None, None).map_err(runtime)?;
        }
        if request.job.params.logprobs && request.top_logprobs.is_none() {
            request.top_logprobs = Some(sampling::top_logprobs(core.model, &core.context, logits_index));
        }
        for offset in 0..*wave {
            let sample_index = request.samples_started;
            request.samples_started += 1;
            let job = &request.job;
            let mut sequence = Sequence {
                owner,
                seq_id: first_seq + offset as i32,
                position: job.prompt.len() as i32,
                sampler: SequenceSampler::new(core.model, &job.params, core.top_k, sample_index, job.base_seed)?,
                last_token: LlamaToken(0),
                output: Output::default(),
            };
            let token = sequence.sampler.sample(&core.context, logits_index)?;
            sequence.last_token = token;
            if job.params.logprobs {
                let logprob = sampling::token_logprob(&core.context, logits_index, token);
                sequence.output.note_logprob(core.model, token, logprob);
            }
            sequence.output.push(core.model, token, &job.params.stop, job.cap);
            sequences.push(sequence);
        }
        next_seq_id += *wave as i32;
    }

    let started = Instant::now();
    let mut steps = 0;
    loop {
        let live: Vec<usize> = (0..sequences.len()).filter(|&index| sequences[index].output.finish.is_none()).collect();
        if live.is_empty() {
            break;
        }
        core.batch.clear();
        for &index in &live {
            let sequence = &sequences[index];
            core.batch.add(sequence.last_token, sequence.position, &[sequence.seq_id], true).map_err(runtime)?;
        }
        core.context.decode(&mut core.batch).map_err(runtime)?;
        steps += 1;
        for (batch_index, &index) in live.iter().enumerate() {
            let sequence = &mut sequences[index];
            sequence.position += 1;
            let token = sequence.sampler.sample(&core.context, batch_index as i32)?;
            sequence.last_token = token;
            let job = &round[sequence.owner].0.job;
            if job.params.logprobs {
                let logprob = sampling::token_logprob(&core.context, batch_index as i32, token);
                sequence.output.note_logprob(core.model, token, logprob);
            }
            sequence.output.push(core.model, token, &job.params.stop, job.cap);
        }
    }
    let decode_time = started.elapsed();
    if let Ok(mut stats) = stats.lock() {
        stats.steps += steps as u64;
    }

    for (request, _) in round.iter_mut() {
        request.timing.decode_time += decode_time;
        request.timing.decode_steps += steps;
    }
    for sequence in sequences {
        let request = &mut round[sequence.owner].0;
        request.timing.generated_tokens += sequence.output.tokens;
        request.completions.push(sequence.output.into_completion());
    }
    Ok(())
}
