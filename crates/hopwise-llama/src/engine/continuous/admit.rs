//! Admission: which waiting requests start now, on which sequences, from which reused prefix.

use std::time::Instant;

use llama_cpp_2::token::LlamaToken;

use super::super::kv::common_prefix;
use super::super::request::{Parked, Phase, Request, Sequence};
use super::Scheduler;
use crate::error::LlamaError;

/// Waiting for another request's prompt evaluation pays when it shares at least this many more tokens
/// than what is already in the cache.
const MIN_AWAIT_GAIN: usize = 16;

/// Where a new request's prompt evaluation starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prefix {
    /// Nothing reusable: from the first token.
    None,
    /// Copy the first `len` cells of sequence `from`.
    Copy { from: i32, len: usize },
    /// Take over the cached slot `seq` (all its tokens begin the prompt), cut to `len`.
    TakeOver { seq: i32, len: usize },
    /// Wait until sequence `source`, evaluating a prompt that shares `upto` tokens with this one, has
    /// evaluated them; then copy them.
    Await { source: i32, upto: usize },
}

impl Prefix {
    fn reused(self) -> usize {
        match self {
            Self::Copy { len, .. } | Self::TakeOver { len, .. } => len,
            Self::None | Self::Await { .. } => 0,
        }
    }

    /// The sequence this prefix comes from, which eviction must spare.
    fn source(self) -> Option<i32> {
        match self {
            Self::Copy { from, .. } => Some(from),
            Self::TakeOver { seq, .. } => Some(seq),
            Self::Await { source, .. } => Some(source),
            Self::None => None,
        }
    }
}

impl Scheduler<'_> {
    pub(super) fn admit(&mut self) {
        self.grow_running();
        while let Some(front) = self.waiting.front() {
            if self.running.len() >= self.max_running {
                break;
            }
            let prefix = self.plan_prefix(&front.job.prompt);
            let width = self.width_that_fits(front, prefix);
            let Some(request) = self.waiting.pop_front() else { break };
            if width > 0 {
                self.start(request, prefix, width);
            } else if self.running.is_empty() {
                // Alone, with the cache emptied, a request always fits (its cap leaves room for the
                // prompt); anything else is a bug that must not stall the queue.
                while self.evict_lru(None) {}
                if self.width_that_fits(&request, Prefix::None) > 0 {
                    self.start(request, Prefix::None, 1);
                } else {
                    self.fail(request, LlamaError::Runtime("the request does not fit the KV cache".into()));
                }
            } else {
                self.waiting.push_front(request);
                break;
            }
        }
    }

    /// The longest prefix of `prompt` held by any sequence (`except` aside), at most all but its last
    /// token (whose logits must be computed afresh).
    pub(super) fn best_resident(&self, prompt: &[LlamaToken], except: Option<i32>) -> (i32, usize) {
        let limit = prompt.len().saturating_sub(1);
        self.kv
            .ledger
            .live_ids()
            .filter(|seq| Some(*seq) != except)
            .map(|seq| (seq, common_prefix(prompt, self.kv.ledger.tokens(seq)).min(limit)))
            .max_by_key(|(_, shared)| *shared)
            .unwrap_or((-1, 0))
    }

    fn plan_prefix(&self, prompt: &[LlamaToken]) -> Prefix {
        if !self.prefix_cache {
            return Prefix::None;
        }
        let (from, resident) = self.best_resident(prompt, None);
        let limit = prompt.len().saturating_sub(1);
        // A prompt being evaluated right now that shares more is worth waiting for.
        let in_flight = self
            .running
            .iter()
            .flat_map(|request| {
                let shared = common_prefix(prompt, &request.job.prompt).min(limit);
                request.sequences.iter().filter_map(move |sequence| match sequence.phase {
                    Phase::Prompt { next } if next < shared => Some((sequence.seq_id, shared)),
                    _ => None,
                })
            })
            .max_by_key(|(_, shared)| *shared);
        if let Some((source, upto)) = in_flight {
            if upto >= resident + MIN_AWAIT_GAIN {
                return Prefix::Await { source, upto };
            }
        }
        if resident == 0 {
            return Prefix::None;
        }
        let whole_slot = common_prefix(prompt, self.kv.ledger.tokens(from)) == self.kv.ledger.len(from);
        if whole_slot && self.cached.iter().any(|slot| slot.seq_id == from) {
            Prefix::TakeOver { seq: from, len: resident }
        } else {
            Prefix::Copy { from, len: resident }
        }
    }

    /// How many of the request's samples can decode at once now (0: none, it must wait), counting
    /// cached slots other than the prefix source as free.
    fn width_that_fits(&self, request: &Request, prefix: Prefix) -> usize {
        let keep = prefix.source();
        let evictable: Vec<i32> = self.cached.iter().map(|slot| slot.seq_id).filter(|seq| Some(*seq) != keep).collect();
        let ids = self.kv.ledger.free_ids() + evictable.len() + usize::from(matches!(prefix, Prefix::TakeOver { .. }));
        let reclaimable: usize = evictable.iter().map(|seq| self.kv.ledger.exclusive(*seq)).sum();
        let free_cells = (self.kv.ledger.free_cells() + reclaimable).saturating_sub(self.committed());
        let lead = request.job.prompt.len() - prefix.reused() + request.job.cap;
        if free_cells < lead {
            return 0;
        }
        let by_cells = 1 + (free_cells - lead) / request.job.cap;
        request.job.samples.min(ids).min(by_cells)
    }

    /// Evicts cached slots (sparing `keep`) until `ids` sequence ids and `cells` cells are free beyond
    /// what running requests may still need.
    fn make_room(&mut self, ids: usize, cells: usize, keep: Option<i32>) {
        while self.kv.ledger.free_ids() < ids && self.evict_lru(keep) {}
        while self.kv.ledger.free_cells().saturating_sub(self.committed()) < cells && self.evict_lru(keep) {}
    }

    fn start(&mut self, mut request: Request, prefix: Prefix, width: usize) {
        let keep = prefix.source();
        let new_ids = width - usize::from(matches!(prefix, Prefix::TakeOver { .. }));
        self.make_room(new_ids, request.job.prompt.len() - prefix.reused() + width * request.job.cap, keep);
        let lead = match prefix {
            Prefix::TakeOver { seq, len } => {
                self.cached.retain(|slot| slot.seq_id != seq);
                self.kv.truncate(&mut self.core.context, seq, len).map(|()| seq)
            }
            Prefix::Copy { from, len } => self.allocate().and_then(|seq| {
                self.touch(from);
                self.kv.copy_prefix(&mut self.core.context, from, seq, len).map(|()| seq)
            }),
            Prefix::None | Prefix::Await { .. } => self.allocate(),
        };
        let lead = match lead {
            Ok(seq) => seq,
            Err(err) => return self.fail(request, err),
        };
        let phase = match prefix {
            Prefix::Await { source, upto } => Phase::AwaitPrefix { source, upto },
            _ => Phase::Prompt { next: prefix.reused() },
        };
        request.sequences.push(Sequence::new(lead, 0, phase, request.draft_max));
        for _ in 1..width {
            match self.allocate() {
                Ok(seq) => request.reserved.push(seq),
                Err(err) => return self.fail(request, err),
            }
        }
        let now = Instant::now();
        request.width = width;
        request.admitted = Some(now);
        request.timing.queue_time = now.saturating_duration_since(request.job.queued_at);
        request.timing.cached_prompt_tokens = prefix.reused();
        self.totals.prompt_tokens_reused += prefix.reused() as u64;
        self.running.push(request);
    }

    fn allocate(&mut self) -> crate::error::Result<i32> {
        self.kv.ledger.allocate().ok_or_else(|| LlamaError::Runtime("no free KV sequence".into()))
    }

    /// Starts parked samples of running requests on new sequences where room allows, oldest first.
    fn grow_running(&mut self) {
        for index in 0..self.running.len() {
            while !self.running[index].parked.is_empty() {
                let request = &self.running[index];
                let prompt_len = request.job.prompt.len();
                let Some(source) = request
                    .sequences
                    .iter()
                    .find(|sequence| {
                        matches!(sequence.phase, Phase::Generate { .. })
                            && common_prefix(self.kv.ledger.tokens(sequence.seq_id), &request.job.prompt) == prompt_len
                    })
                    .map(|sequence| sequence.seq_id)
                else {
                    break;
                };
                let cap = request.job.cap;
                let evictable = self.cached.len();
                let reclaimable: usize = self.cached.iter().map(|slot| self.kv.ledger.exclusive(slot.seq_id)).sum();
                let free = (self.kv.ledger.free_cells() + reclaimable).saturating_sub(self.committed());
                if self.kv.ledger.free_ids() + evictable == 0 || free < cap {
                    break;
                }
                self.make_room(1, cap, None);
                let started = self
                    .allocate()
                    .and_then(|seq| self.kv.copy_prefix(&mut self.core.context, source, seq, prompt_len).map(|()| seq));
                let Ok(seq) = started else { break };
                let request = &mut self.running[index];
                let parked = request.parked.remove(0);
                request.sequences.push(resume(seq, parked, request.draft_max));
            }
        }
    }
}

/// A parked sample continuing on sequence `seq`, which holds the prompt.
pub(super) fn resume(seq: i32, parked: Parked, draft_max: usize) -> Sequence {
    let Parked { sample, sampler, output, first } = parked;
    let mut sequence = Sequence::new(seq, sample, Phase::Generate { pending: first }, draft_max);
    sequence.sampler = Some(sampler);
    sequence.output = output;
    sequence.generated.push(first);
    sequence
}
