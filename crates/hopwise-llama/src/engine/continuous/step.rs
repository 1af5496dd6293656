//! One decode step: settle sequences waiting for a shared prefix, build one batch (every generating
//! sequence's next token and drafts, then prompt chunks), decode it, sample, and finish samples.

use std::time::Instant;

use llama_cpp_2::token::LlamaToken;

use super::super::kv::common_prefix;
use super::super::lookup;
use super::super::request::{Parked, Phase};
use super::super::runtime;
use super::super::sampling::{self, Output, SequenceSampler};
use super::admit::resume;
use super::Scheduler;
use crate::error::{LlamaError, Result};

/// What one sequence put into the batch.
struct Entry {
    request: usize,
    sequence: usize,
    seq_id: i32,
    /// The sequence's KV length before this step: its tokens go to the positions from here.
    start: usize,
    /// Batch index of its first token.
    first: usize,
    tokens: Vec<LlamaToken>,
    kind: EntryKind,
}

#[derive(Clone, Copy)]
enum EntryKind {
    /// The pending token and `drafts` prompt-lookup guesses after it, each with logits.
    Decode { drafts: usize },
    /// A chunk of prompt; `completes` when it ends the prompt (its last token has logits).
    Prompt { completes: bool },
}

impl Scheduler<'_> {
    pub(super) fn step(&mut self) {
        self.settle_awaited();
        let entries = self.plan_batch();
        if entries.is_empty() {
            return;
        }
        if let Err(err) = self.decode(&entries) {
            let failed: Vec<usize> = entries.iter().map(|entry| entry.request).collect();
            self.fail_requests(failed, &err);
            return;
        }
        self.totals.steps += 1;
        let mut failed = Vec::new();
        for entry in &entries {
            if let Err(err) = self.absorb(entry) {
                failed.push((entry.request, err));
            }
        }
        for (index, err) in failed {
            if self.running[index].error.is_none() {
                self.running[index].error = Some(err);
            }
        }
        self.finish_samples();
    }

    /// Sequences waiting for another prompt's shared prefix copy it once it is evaluated, or whatever
    /// is cached when that prompt went away.
    fn settle_awaited(&mut self) {
        for index in 0..self.running.len() {
            for position in 0..self.running[index].sequences.len() {
                let request = &self.running[index];
                let sequence = &request.sequences[position];
                let Phase::AwaitPrefix { source, upto } = sequence.phase else { continue };
                let seq = sequence.seq_id;
                let (from, len) = self.best_resident(&request.job.prompt, Some(seq));
                let source_coming = self.prompt_phase(source).is_some_and(|(other, next)| {
                    next < upto && common_prefix(&other.job.prompt, &request.job.prompt) >= upto
                });
                if source_coming && len < upto {
                    continue;
                }
                if len > 0 {
                    if let Err(err) = self.kv.copy_prefix(&mut self.core.context, from, seq, len) {
                        self.running[index].error = Some(err);
                        continue;
                    }
                    self.touch(from);
                }
                let request = &mut self.running[index];
                request.sequences[position].phase = Phase::Prompt { next: len };
                request.timing.cached_prompt_tokens = len;
                self.totals.prompt_tokens_reused += len as u64;
            }
        }
    }

    fn plan_batch(&self) -> Vec<Entry> {
        let n_batch = self.core.n_batch;
        let generating = self
            .running
            .iter()
            .flat_map(|request| &request.sequences)
            .filter(|sequence| matches!(sequence.phase, Phase::Generate { .. }) && !sequence.finished())
            .count();
        let prompting: Vec<(usize, usize, usize)> = self
            .running
            .iter()
            .enumerate()
            .filter(|(_, request)| request.error.is_none())
            .flat_map(|(index, request)| {
                request.sequences.iter().enumerate().filter_map(move |(position, sequence)| match sequence.phase {
                    Phase::Prompt { next } => Some((index, position, next)),
                    _ => None,
                })
            })
            .collect();
        let prompt_budget = match (prompting.is_empty(), generating) {
            (true, _) => 0,
            (false, 0) => n_batch,
            (false, _) => self.prefill_chunk,
        };
        let mut draft_room = n_batch.saturating_sub(generating + prompt_budget);
        let mut entries = Vec::new();
        let mut used = 0;

        for (index, request) in self.running.iter().enumerate() {
            if request.error.is_some() {
                continue;
            }
            for (position, sequence) in request.sequences.iter().enumerate() {
                let Phase::Generate { pending } = sequence.phase else { continue };
                if sequence.finished() || used >= n_batch {
                    continue;
                }
                let mut tokens = vec![pending];
                if request.draft_max > 0 && draft_room > 0 {
                    let within_cap = request.job.cap.saturating_sub(sequence.output.tokens + 1);
                    let want = sequence.draft_length.get().min(within_cap).min(draft_room).min(n_batch - used - 1);
                    if want > 0 {
                        let history: Vec<LlamaToken> =
                            request.job.prompt.iter().chain(&sequence.generated).copied().collect();
                        let drafts = lookup::draft(&history, want);
                        draft_room -= drafts.len();
                        tokens.extend(drafts);
                    }
                }
                let drafts = tokens.len() - 1;
                entries.push(Entry {
                    request: index,
                    sequence: position,
                    seq_id: sequence.seq_id,
                    start: self.kv.ledger.len(sequence.seq_id),
                    first: used,
                    kind: EntryKind::Decode { drafts },
                    tokens,
                });
                used = entries.last().map_or(used, |entry| entry.first + entry.tokens.len());
            }
        }

        // Prompt chunks: prompts others wait on first, then the shortest remaining (so a short request
        // is not stuck behind a long prompt), then the oldest.
        let awaited: Vec<i32> = self
            .running
            .iter()
            .flat_map(|request| &request.sequences)
            .filter_map(|sequence| match sequence.phase {
                Phase::AwaitPrefix { source, .. } => Some(source),
                _ => None,
            })
            .collect();
        let mut order: Vec<(bool, usize, u64, usize, usize, usize)> = prompting
            .into_iter()
            .map(|(index, position, next)| {
                let request = &self.running[index];
                let seq = request.sequences[position].seq_id;
                (!awaited.contains(&seq), request.job.prompt.len() - next, request.id, index, position, next)
            })
            .collect();
        order.sort_unstable();
        let mut budget = prompt_budget.min(n_batch - used);
        for (_, left, _, index, position, next) in order {
            if budget == 0 {
                break;
            }
            let request = &self.running[index];
            let chunk = left.min(budget);
            let sequence = &request.sequences[position];
            entries.push(Entry {
                request: index,
                sequence: position,
                seq_id: sequence.seq_id,
                start: next,
                first: used,
                tokens: request.job.prompt[next..next + chunk].to_vec(),
                kind: EntryKind::Prompt { completes: next + chunk == request.job.prompt.len() },
            });
            used += chunk;
            budget -= chunk;
        }
        entries
    }

    /// Decodes the batch. On failure llama.cpp's cells of this batch are removed again, so the KV
    /// cache still matches the ledger.
    fn decode(&mut self, entries: &[Entry]) -> Result<()> {
        let batch = &mut self.core.batch;
        batch.clear();
        for entry in entries {
            let last = entry.tokens.len() - 1;
            for (offset, token) in entry.tokens.iter().enumerate() {
                let logits = match entry.kind {
                    EntryKind::Decode { .. } => true,
                    EntryKind::Prompt { completes } => completes && offset == last,
                };
                let position = i32::try_from(entry.start + offset).map_err(runtime)?;
                batch.add(*token, position, &[entry.seq_id], logits).map_err(runtime)?;
            }
        }
        let need: usize = entries.iter().map(|entry| entry.tokens.len()).sum();
        while self.kv.ledger.free_cells() < need && self.evict_lru(None) {}
        if self.kv.ledger.free_cells() < need {
            return Err(LlamaError::Runtime(format!(
                "KV cache exhausted: {need} cells needed, {} free",
                self.kv.ledger.free_cells()
            )));
        }
        if let Err(err) = self.core.context.decode(&mut self.core.batch) {
            for entry in entries {
                let start = u32::try_from(entry.start).unwrap_or(u32::MAX);
                let _ = self.core.context.kv_cache_seq_rm(entry.seq_id, Some(start), None);
            }
            return Err(runtime(format!("decode: {err}")));
        }
        for entry in entries {
            self.kv.ledger.append(entry.seq_id, &entry.tokens);
        }
        Ok(())
    }

    /// Samples what the step's logits give one sequence.
    fn absorb(&mut self, entry: &Entry) -> Result<()> {
        match entry.kind {
            EntryKind::Prompt { completes } => {
                let request = &mut self.running[entry.request];
                let next = entry.start + entry.tokens.len();
                request.sequences[entry.sequence].phase = Phase::Prompt { next };
                self.totals.prompt_tokens_evaluated += entry.tokens.len() as u64;
                if completes {
                    self.begin_samples(entry.request, entry.sequence, entry.first + entry.tokens.len() - 1)?;
                }
                Ok(())
            }
            EntryKind::Decode { drafts } => self.verify(entry, drafts),
        }
    }

    /// Samples token by token from the pending token's logits on, continuing through the drafts while
    /// they match what was sampled; cells of rejected drafts are removed.
    fn verify(&mut self, entry: &Entry, drafts: usize) -> Result<()> {
        let step = self.totals.steps;
        let request = &mut self.running[entry.request];
        let sequence = &mut request.sequences[entry.sequence];
        let sampler = sequence.sampler.as_mut().ok_or_else(|| runtime("a generating sequence has no sampler"))?;
        let mut emitted = 0;
        loop {
            let index = i32::try_from(entry.first + emitted).map_err(runtime)?;
            let token = sampler.sample(&self.core.context, index)?;
            emitted += 1;
            if request.job.params.logprobs {
                let logprob = sampling::token_logprob(&self.core.context, index, token);
                sequence.output.note_logprob(self.core.model, token, logprob);
            }
            if sequence.output.push(self.core.model, token, &request.job.params.stop, request.job.cap) {
                break;
            }
            sequence.generated.push(token);
            if emitted <= drafts && entry.tokens[emitted] == token {
                continue;
            }
            sequence.phase = Phase::Generate { pending: token };
            break;
        }
        let accepted = (emitted - 1).min(drafts);
        sequence.draft_length.update(drafts, accepted);
        let seq = sequence.seq_id;
        if request.last_step != Some(step) {
            request.last_step = Some(step);
            request.timing.decode_steps += 1;
        }
        request.timing.drafted_tokens += drafts;
        request.timing.accepted_draft_tokens += accepted;
        self.totals.drafted_tokens += drafts as u64;
        self.totals.accepted_draft_tokens += accepted as u64;
        self.kv.truncate(&mut self.core.context, seq, entry.start + 1 + accepted)
    }

    /// The prompt is evaluated: every sample draws its first token from its last logits. The
    /// evaluating sequence takes sample 0, the reserved sequences copy the prompt and take the next
    /// ones, and samples beyond them are parked until a sequence is free.
    fn begin_samples(&mut self, index: usize, lead_position: usize, logits: usize) -> Result<()> {
        let now = Instant::now();
        let logits = i32::try_from(logits).map_err(runtime)?;
        let (model, top_k) = (self.core.model, self.core.top_k);
        let request = &mut self.running[index];
        request.first_token = Some(now);
        request.timing.prompt_time = now.saturating_duration_since(request.admitted.unwrap_or(now));
        if request.job.params.logprobs && request.top_logprobs.is_none() {
            request.top_logprobs = Some(sampling::top_logprobs(model, &self.core.context, logits));
        }
        let lead = request.sequences[lead_position].seq_id;
        let reserved = std::mem::take(&mut request.reserved);
        let (params, cap, seed) = (request.job.params.clone(), request.job.cap, request.job.base_seed);
        let first_sample = |sample: usize, context: &llama_cpp_2::context::LlamaContext<'_>| -> Result<_> {
            let mut sampler = SequenceSampler::new(model, &params, top_k, sample, seed)?;
            let token = sampler.sample(context, logits)?;
            let mut output = Output::default();
            if params.logprobs {
                output.note_logprob(model, token, sampling::token_logprob(context, logits, token));
            }
            output.push(model, token, &params.stop, cap);
            Ok((sampler, token, output))
        };

        let (sampler, token, output) = first_sample(0, &self.core.context)?;
        let sequence = &mut request.sequences[lead_position];
        sequence.sample = 0;
        sequence.sampler = Some(sampler);
        sequence.output = output;
        sequence.generated.push(token);
        sequence.phase = Phase::Generate { pending: token };

        let prompt_len = request.job.prompt.len();
        let draft_max = request.draft_max;
        for (offset, seq) in reserved.iter().copied().enumerate() {
            let sample = offset + 1;
            let started = first_sample(sample, &self.core.context).and_then(|(sampler, first, output)| {
                self.kv.copy_prefix(&mut self.core.context, lead, seq, prompt_len)?;
                Ok(Parked { sample, sampler, output, first })
            });
            match started {
                Ok(parked) => self.running[index].sequences.push(resume(seq, parked, draft_max)),
                Err(err) => {
                    for unused in &reserved[offset..] {
                        let _ = self.kv.release(&mut self.core.context, *unused);
                    }
                    return Err(err);
                }
            }
        }
        let request = &mut self.running[index];
        for sample in request.width..request.job.samples {
            let (sampler, first, output) = first_sample(sample, &self.core.context)?;
            if output.finish.is_some() {
                request.timing.generated_tokens += output.tokens;
                request.completions[sample] = Some(output.into_completion());
            } else {
                request.parked.push(Parked { sample, sampler, output, first });
            }
        }
        Ok(())
    }

    /// Records finished samples, hands their sequences to parked samples or frees them, and replies to
    /// finished (and failed) requests.
    fn finish_samples(&mut self) {
        let mut index = 0;
        while index < self.running.len() {
            if let Some(err) = self.running[index].error.take() {
                let request = self.running.swap_remove(index);
                self.fail(request, err);
                continue;
            }
            let mut position = 0;
            while position < self.running[index].sequences.len() {
                let request = &mut self.running[index];
                let sequence = &mut request.sequences[position];
                if !sequence.finished() {
                    position += 1;
                    continue;
                }
                let output = std::mem::take(&mut sequence.output);
                request.timing.generated_tokens += output.tokens;
                self.totals.tokens_generated += output.tokens as u64;
                let slot = request.completions.get_mut(sequence.sample);
                if let Some(slot) = slot {
                    *slot = Some(output.into_completion());
                }
                let seq = sequence.seq_id;
                if !request.parked.is_empty() {
                    // The next parked sample continues on this sequence, from the end of the prompt.
                    let prompt_len = request.job.prompt.len();
                    let parked = request.parked.remove(0);
                    let draft_max = request.draft_max;
                    request.sequences[position] = resume(seq, parked, draft_max);
                    if let Err(err) = self.kv.truncate(&mut self.core.context, seq, prompt_len) {
                        self.running[index].error = Some(err);
                    }
                    position += 1;
                    continue;
                }
                request.sequences.swap_remove(position);
                if request.sequences.is_empty() && request.is_done() {
                    self.retire(seq);
                } else {
                    let _ = self.kv.release(&mut self.core.context, seq);
                }
            }
            let request = &self.running[index];
            if request.sequences.is_empty() && request.is_done() {
                let mut request = self.running.swap_remove(index);
                for seq in std::mem::take(&mut request.reserved) {
                    let _ = self.kv.release(&mut self.core.context, seq);
                }
                let now = Instant::now();
                request.timing.decode_time = now.saturating_duration_since(request.first_token.unwrap_or(now));
                self.totals.completed += 1;
                let generation = request.response();
                request.send(Ok(generation));
                continue;
            }
            index += 1;
        }
    }

    /// Fails the requests at these indices of `running`.
    fn fail_requests(&mut self, mut indices: Vec<usize>, err: &LlamaError) {
        indices.sort_unstable();
        indices.dedup();
        for index in indices.into_iter().rev() {
            let request = self.running.swap_remove(index);
            self.fail(request, LlamaError::Runtime(err.to_string()));
        }
    }
}
