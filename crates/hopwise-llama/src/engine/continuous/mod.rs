//! The continuous-batching scheduler.
//!
//! Every iteration of [`Scheduler::run`] takes in new requests without blocking (it blocks only when
//! idle), drops requests whose caller stopped waiting, admits waiting requests while their cells and
//! sequences fit ([`admit`]), and then runs one decode step ([`step`]): one batch with the next token
//! of every generating sequence (plus its prompt-lookup drafts) and a chunk of pending prompt tokens.
//! A sequence is freed the moment its sample finishes; the last one of a request stays in the KV cache
//! as a cached prompt for later requests to share ([`Scheduler::retire`]).
//!
//! Admission keeps a simple invariant: the cells in use plus what every running request may still add
//! (its unevaluated prompt and `max_tokens` per sequence) never exceed the cache, counting cached
//! prompts as free because they can be evicted. So a decode step never runs out of cells.

mod admit;
mod step;

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};

use super::kv::{common_prefix, Kv, Ledger};
use super::request::{Phase, Request};
use super::Core;
use crate::config::{Concurrency, LocalConfig};
use crate::error::LlamaError;
use crate::job::{EngineStats, Job, Timing};

/// A finished request's sequence kept for its prompt.
struct CachedSlot {
    seq_id: i32,
    last_used: u64,
}

pub(crate) struct Scheduler<'model> {
    core: Core<'model>,
    kv: Kv,
    waiting: VecDeque<Request>,
    running: Vec<Request>,
    cached: Vec<CachedSlot>,
    /// Orders cache uses for LRU eviction.
    clock: u64,
    next_id: u64,
    max_running: usize,
    prefill_chunk: usize,
    prefix_cache: bool,
    lookup_max_draft: usize,
    totals: EngineStats,
    shared: Arc<Mutex<EngineStats>>,
}

impl<'model> Scheduler<'model> {
    pub fn new(core: Core<'model>, config: &LocalConfig, shared: Arc<Mutex<EngineStats>>) -> Self {
        let capacity = core.context.n_ctx() as usize;
        let ledger = Ledger::new(capacity, core.max_sequences);
        Self {
            kv: Kv { ledger },
            waiting: VecDeque::new(),
            running: Vec::new(),
            cached: Vec::new(),
            clock: 0,
            next_id: 0,
            max_running: if config.concurrency == Concurrency::Queue { 1 } else { usize::MAX },
            prefill_chunk: (config.prefill_chunk as usize).clamp(1, core.n_batch),
            prefix_cache: config.prefix_cache,
            lookup_max_draft: config.lookup_max_draft as usize,
            totals: EngineStats { kv_cells: capacity, ..EngineStats::default() },
            shared,
            core,
        }
    }

    pub fn run(mut self, jobs: &mpsc::Receiver<Job>) {
        let mut open = true;
        loop {
            if self.waiting.is_empty() && self.running.is_empty() {
                if !open {
                    return;
                }
                match jobs.recv() {
                    Ok(job) => self.enqueue(job),
                    Err(_) => return,
                }
            }
            loop {
                match jobs.try_recv() {
                    Ok(job) => self.enqueue(job),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            // A panic inside llama-cpp-2 must not take the worker down for later requests: the
            // requests in flight fail and the cache starts over.
            if catch_unwind(AssertUnwindSafe(|| self.iterate())).is_err() {
                self.reset("the engine failed while serving this request and was reset");
            }
            self.publish();
        }
    }

    fn iterate(&mut self) {
        self.drop_cancelled();
        self.admit();
        self.step();
    }

    fn enqueue(&mut self, job: Job) {
        let Some(job) = self.core.prepare(job) else { return };
        let id = self.next_id;
        self.next_id += 1;
        let lookup = job.params.prompt_lookup.unwrap_or(true);
        self.waiting.push_back(Request {
            id,
            timing: Timing { prompt_tokens: job.prompt.len(), ..Timing::default() },
            completions: (0..job.samples).map(|_| None).collect(),
            draft_max: if lookup { self.lookup_max_draft } else { 0 },
            width: 0,
            sequences: Vec::new(),
            reserved: Vec::new(),
            parked: Vec::new(),
            top_logprobs: None,
            job,
            admitted: None,
            first_token: None,
            last_step: None,
            error: None,
        });
    }

    /// Requests whose caller is gone leave at once, and their cells with them.
    fn drop_cancelled(&mut self) {
        let before = self.waiting.len();
        self.waiting.retain(|request| !request.job.reply.is_closed());
        let mut cancelled = (before - self.waiting.len()) as u64;
        let mut index = 0;
        while index < self.running.len() {
            if self.running[index].job.reply.is_closed() {
                let request = self.running.swap_remove(index);
                self.release_request(&request);
                cancelled += 1;
            } else {
                index += 1;
            }
        }
        self.totals.cancelled += cancelled;
    }

    /// Frees every sequence a request holds (it is failing or its caller left).
    fn release_request(&mut self, request: &Request) {
        for seq in request.sequences.iter().map(|sequence| sequence.seq_id).chain(request.reserved.iter().copied()) {
            // A failed removal leaves llama.cpp's cells behind but the id must not leak either way.
            let _ = self.kv.release(&mut self.core.context, seq);
        }
    }

    fn fail(&mut self, request: Request, err: LlamaError) {
        self.release_request(&request);
        self.totals.failed += 1;
        request.send(Err(err));
    }

    /// Starts over after an internal failure: every running request fails, the cache is emptied.
    fn reset(&mut self, why: &str) {
        for request in std::mem::take(&mut self.running) {
            self.totals.failed += 1;
            request.send(Err(LlamaError::Runtime(why.to_string())));
        }
        self.cached.clear();
        self.kv.clear(&mut self.core.context);
    }

    /// Marks a cached slot as just used.
    fn touch(&mut self, seq: i32) {
        self.clock += 1;
        let now = self.clock;
        if let Some(slot) = self.cached.iter_mut().find(|slot| slot.seq_id == seq) {
            slot.last_used = now;
        }
    }

    /// Evicts the least recently used cached slot other than `keep`; false when there is none.
    fn evict_lru(&mut self, keep: Option<i32>) -> bool {
        let victim = self
            .cached
            .iter()
            .enumerate()
            .filter(|(_, slot)| Some(slot.seq_id) != keep)
            .min_by_key(|(_, slot)| slot.last_used)
            .map(|(index, _)| index);
        let Some(index) = victim else { return false };
        let slot = self.cached.swap_remove(index);
        let _ = self.kv.release(&mut self.core.context, slot.seq_id);
        true
    }

    /// A finished request's last sequence: kept as a cached prompt, or freed.
    fn retire(&mut self, seq: i32) {
        if !self.prefix_cache {
            let _ = self.kv.release(&mut self.core.context, seq);
            return;
        }
        let tokens = self.kv.ledger.tokens(seq).to_vec();
        // A cached slot whose tokens this one extends is redundant; if an existing one already holds
        // all of these tokens, this one is.
        let mut index = 0;
        while index < self.cached.len() {
            let other = self.cached[index].seq_id;
            let held = self.kv.ledger.tokens(other);
            let shared = common_prefix(held, &tokens);
            if shared == tokens.len() {
                let _ = self.kv.release(&mut self.core.context, seq);
                self.touch(other);
                return;
            }
            if shared == held.len() {
                self.cached.swap_remove(index);
                let _ = self.kv.release(&mut self.core.context, other);
            } else {
                index += 1;
            }
        }
        self.clock += 1;
        self.cached.push(CachedSlot { seq_id: seq, last_used: self.clock });
    }

    /// Cells the running requests may still add: each sequence up to prompt + `max_tokens`, and each
    /// reserved sequence its own `max_tokens` (it shares the prompt).
    fn committed(&self) -> usize {
        self.running
            .iter()
            .map(|request| {
                let full = request.job.prompt.len() + request.job.cap;
                let sequences: usize = request
                    .sequences
                    .iter()
                    .map(|sequence| full.saturating_sub(self.kv.ledger.len(sequence.seq_id)))
                    .sum();
                sequences + request.reserved.len() * request.job.cap
            })
            .sum()
    }

    fn publish(&mut self) {
        let totals = &mut self.totals;
        totals.waiting = self.waiting.len();
        totals.running = self.running.len();
        totals.live_sequences = self.running.iter().map(|request| request.sequences.len()).sum();
        totals.cached_sequences = self.cached.len();
        totals.kv_cells_used = self.kv.ledger.used();
        if let Ok(mut shared) = self.shared.lock() {
            *shared = totals.clone();
        }
    }

    /// Sequences of running requests currently evaluating a prompt, by id.
    fn prompt_phase(&self, seq: i32) -> Option<(&Request, usize)> {
        self.running.iter().find_map(|request| {
            request.sequences.iter().find(|sequence| sequence.seq_id == seq).and_then(|sequence| match sequence.phase {
                Phase::Prompt { next } => Some((request, next)),
                _ => None,
            })
        })
    }
}
