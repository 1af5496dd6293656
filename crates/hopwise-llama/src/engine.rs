//! The worker thread that owns the model and its context.
//!
//! llama.cpp's context is not thread-safe, so exactly one thread touches it. Requests queue on a channel.
//! The worker serves them in *rounds*: a round clears the KV cache, evaluates each admitted request's
//! prompt once into its first sequence, copies that KV prefix to the request's other sample sequences,
//! and then decodes every live sequence of every admitted request together, one token per sequence per
//! step. In `Batch` mode the requests waiting when a round starts join it; in `Queue` mode each request
//! has its own round. A request whose samples do not all fit the KV cache runs in waves.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{mpsc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hopwise_core::{ChatRequest, ChatResponse, Completion, GenParams, Usage};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::oneshot;

use crate::error::{LlamaError, Result};
use crate::local::{Concurrency, Generation, LocalConfig, ModelInfo, Timing};
use crate::template::{self, role_name, TemplateSource};

/// At or below this temperature sampling is greedy.
pub const GREEDY_TEMPERATURE: f32 = 0.01;
/// Candidates reported for the first generated token when logprobs are requested.
const TOP_LOGPROBS: usize = 5;

pub(crate) struct Job {
    pub request: ChatRequest,
    pub reply: oneshot::Sender<Result<Generation>>,
    pub queued_at: Instant,
}

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

/// Starts the worker and waits until the model is loaded.
pub(crate) fn spawn(path: PathBuf, config: &LocalConfig) -> Result<(mpsc::Sender<Job>, ModelInfo)> {
    let (job_sender, job_receiver) = mpsc::channel::<Job>();
    let (ready_sender, ready_receiver) = mpsc::channel::<Result<ModelInfo>>();
    let config = config.clone();
    std::thread::Builder::new()
        .name("hopwise-llama".into())
        .spawn(move || run_worker(path, config, job_receiver, ready_sender))
        .map_err(|err| LlamaError::io("starting the model thread", err))?;
    let info = ready_receiver.recv().map_err(|_| LlamaError::WorkerGone)??;
    Ok((job_sender, info))
}

fn run_worker(path: PathBuf, config: LocalConfig, jobs: mpsc::Receiver<Job>, ready: mpsc::Sender<Result<ModelInfo>>) {
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
        // One cell pool for all sequences, so a shared prompt prefix is stored once.
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
    let mut engine = Engine::new(&model, context, &config, n_ctx, max_sequences, n_batch);
    let info = ModelInfo {
        path,
        n_ctx,
        n_ctx_train: model.n_ctx_train(),
        n_params: model.n_params(),
        size_bytes: model.size(),
        threads,
        template: engine.template_source,
        load_time: started.elapsed(),
    };
    if ready.send(Ok(info)).is_err() {
        return;
    }
    while let Ok(first) = jobs.recv() {
        let mut round = vec![first];
        if config.concurrency == Concurrency::Batch {
            round.extend(jobs.try_iter());
        }
        // A panic inside llama-cpp-2 drops this round's reply channels (callers see an error) but must
        // not take the worker down for later requests.
        let _ = catch_unwind(AssertUnwindSafe(|| engine.serve(round)));
    }
}

/// One request while it is being served.
struct Pending {
    reply: Option<oneshot::Sender<Result<Generation>>>,
    params: GenParams,
    prompt: Vec<LlamaToken>,
    /// Most new tokens per sample: `max_tokens`, bounded by the room the prompt leaves.
    generation_cap: usize,
    samples_wanted: usize,
    samples_started: usize,
    base_seed: u64,
    completions: Vec<Completion>,
    top_logprobs: Option<Vec<(String, f32)>>,
    timing: Timing,
    queued_at: Instant,
}

impl Pending {
    fn remaining(&self) -> usize {
        self.samples_wanted - self.samples_started
    }

    /// KV cells for `wave` samples: the shared prompt plus each sample's new tokens.
    fn cells(&self, wave: usize) -> usize {
        self.prompt.len() + wave * self.generation_cap
    }

    fn finish(mut self) {
        let completion_tokens = self.timing.generated_tokens as u64;
        if let Some(top) = self.top_logprobs.take() {
            if let Some(first) = self.completions.first_mut() {
                first.top_logprobs = top;
            }
        }
        let response = ChatResponse {
            choices: self.completions,
            usage: Usage { prompt_tokens: self.prompt.len() as u64, completion_tokens },
            grammar_used: self.params.grammar.is_some(),
        };
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(Ok(Generation { response, timing: self.timing }));
        }
    }

    fn fail(mut self, err: LlamaError) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(Err(err));
        }
    }
}

/// One sampled continuation inside a round.
struct Sequence {
    owner: usize,
    seq_id: i32,
    position: i32,
    sampler: SequenceSampler,
    last_token: LlamaToken,
    tokens: usize,
    bytes: Vec<u8>,
    finish: Option<Finish>,
}

/// The sampling chain of one sequence, and its grammar kept apart from the chain.
///
/// Applying a grammar checks every vocabulary entry (150k for Qwen), costly at every token of every
/// sequence. So, like llama.cpp's own tools, we sample without it first and consult the grammar only
/// for the chosen token; only when the grammar rejects it do we filter the whole vocabulary and resample.
struct SequenceSampler {
    chain: LlamaSampler,
    grammar: Option<LlamaSampler>,
}

impl SequenceSampler {
    fn sample(&mut self, context: &LlamaContext<'_>, index: i32) -> Result<LlamaToken> {
        let Some(grammar) = self.grammar.as_mut() else {
            return Ok(self.chain.sample(context, index));
        };
        let mut candidates = context.token_data_array_ith(index);
        candidates.apply_sampler(&mut self.chain);
        let proposed = candidates.selected_token().ok_or_else(|| runtime("the sampler selected no token"))?;
        let mut single = LlamaTokenDataArray::new(vec![LlamaTokenData::new(proposed, 1.0, 0.0)], false);
        single.apply_sampler(grammar);
        let allowed = single.data.first().is_some_and(|data| data.logit().is_finite());
        let token = if allowed {
            proposed
        } else {
            let mut candidates = context.token_data_array_ith(index);
            candidates.apply_sampler(grammar);
            candidates.apply_sampler(&mut self.chain);
            candidates.selected_token().ok_or_else(|| runtime("the grammar allows no token here"))?
        };
        grammar.accept(token);
        self.chain.accept(token);
        Ok(token)
    }
}

enum Finish {
    /// End-of-generation token, or a stop string (the text is cut before it).
    Stop(Option<String>),
    Length,
}

struct Engine<'model> {
    model: &'model LlamaModel,
    context: LlamaContext<'model>,
    batch: LlamaBatch<'static>,
    template: Option<String>,
    template_source: TemplateSource,
    bos_text: String,
    eos_text: String,
    n_ctx: usize,
    max_sequences: usize,
    n_batch: usize,
    top_k: u32,
}

impl<'model> Engine<'model> {
    fn new(
        model: &'model LlamaModel,
        context: LlamaContext<'model>,
        config: &LocalConfig,
        n_ctx: u32,
        max_sequences: u32,
        n_batch: u32,
    ) -> Self {
        let vocab = model.vocab();
        let special_text = |token: LlamaToken| {
            if token.0 < 0 || token.0 >= vocab.n_tokens() {
                return String::new();
            }
            String::from_utf8_lossy(&vocab.token_to_piece(token, true, None)).into_owned()
        };
        let bos_text = special_text(vocab.bos());
        let eos_text = special_text(vocab.eos());
        let template = model.chat_template(None).ok().and_then(|template| template.to_string().ok());
        let mut engine = Self {
            model,
            context,
            batch: LlamaBatch::new(n_batch.max(max_sequences) as usize, 1),
            template,
            template_source: TemplateSource::ChatMlFallback,
            bos_text,
            eos_text,
            n_ctx: n_ctx as usize,
            max_sequences: max_sequences as usize,
            n_batch: n_batch as usize,
            top_k: config.top_k,
        };
        engine.template_source = engine.pick_template();
        engine
    }

    /// Decides once, on a probe conversation, which renderer this model's template works with.
    fn pick_template(&self) -> TemplateSource {
        let Some(source) = &self.template else {
            return TemplateSource::ChatMlFallback;
        };
        let probe = [hopwise_core::ChatMessage::system("s"), hopwise_core::ChatMessage::user("u")];
        if template::render_jinja(source, &probe, &self.bos_text, &self.eos_text).is_ok() {
            TemplateSource::Gguf
        } else if self.render_builtin(&probe).is_ok() {
            TemplateSource::LlamaBuiltin
        } else {
            TemplateSource::ChatMlFallback
        }
    }

    fn render_builtin(&self, messages: &[hopwise_core::ChatMessage]) -> Result<String> {
        let template = self.model.chat_template(None).map_err(|err| LlamaError::Template(err.to_string()))?;
        let chat = messages
            .iter()
            .map(|message| LlamaChatMessage::new(role_name(message.role).to_string(), message.content.clone()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|err| LlamaError::Template(err.to_string()))?;
        self.model.apply_chat_template(&template, &chat, true).map_err(|err| LlamaError::Template(err.to_string()))
    }

    fn render_prompt(&self, messages: &[hopwise_core::ChatMessage]) -> Result<String> {
        match (self.template_source, &self.template) {
            (TemplateSource::Gguf, Some(source)) => {
                template::render_jinja(source, messages, &self.bos_text, &self.eos_text).map_err(LlamaError::Template)
            }
            (TemplateSource::LlamaBuiltin, _) => self.render_builtin(messages),
            _ => Ok(template::render_chatml(messages)),
        }
    }

    fn tokenize_prompt(&self, text: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        // Templates that write the BOS text themselves must not get a second one.
        let add_special = vocab.should_add_bos() && (self.bos_text.is_empty() || !text.starts_with(&self.bos_text));
        vocab.tokenize(text.as_bytes(), add_special, true)
    }

    fn prepare(&self, job: Job) -> Option<Pending> {
        let Job { request, reply, queued_at } = job;
        let prepared = self.render_prompt(&request.messages).and_then(|text| {
            let prompt = self.tokenize_prompt(&text);
            if prompt.is_empty() || prompt.len() >= self.n_ctx {
                return Err(LlamaError::PromptTooLong { prompt_tokens: prompt.len(), n_ctx: self.n_ctx as u32 });
            }
            if let Some(grammar) = &request.params.grammar {
                // Fail the request up front rather than inside a round shared with others.
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
        let generation_cap = (params.max_tokens as usize).min(self.n_ctx - prompt.len());
        let base_seed = params.seed.unwrap_or_else(|| {
            SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_nanos() as u64).unwrap_or(0)
        });
        Some(Pending {
            reply: Some(reply),
            samples_wanted: params.n.max(1) as usize,
            samples_started: 0,
            timing: Timing { prompt_tokens: prompt.len(), ..Timing::default() },
            params,
            prompt,
            generation_cap,
            base_seed,
            completions: Vec::new(),
            top_logprobs: None,
            queued_at,
        })
    }

    fn serve(&mut self, jobs: Vec<Job>) {
        let mut pending: VecDeque<Pending> = jobs.into_iter().filter_map(|job| self.prepare(job)).collect();
        while !pending.is_empty() {
            // Admit requests in arrival order while their next wave fits the cells and sequences left.
            let mut round: Vec<(Pending, usize)> = Vec::new();
            let (mut free_cells, mut free_sequences) = (self.n_ctx, self.max_sequences);
            while let Some(front) = pending.front() {
                if front.generation_cap == 0 {
                    if let Some(done) = pending.pop_front() {
                        let mut done = done;
                        done.completions =
                            vec![
                                Completion { finish_reason: Some("length".into()), ..Completion::default() };
                                done.samples_wanted
                            ];
                        done.finish();
                    }
                    continue;
                }
                let room = free_cells.saturating_sub(front.prompt.len()) / front.generation_cap;
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
                request.timing.queue_time += started.saturating_duration_since(request.queued_at);
            }
            let outcome = self.run_round(&mut round);
            let finished_at = Instant::now();
            let mut unfinished = Vec::new();
            for (mut request, _) in round {
                if let Err(err) = &outcome {
                    request.fail(LlamaError::Runtime(err.to_string()));
                } else if request.remaining() > 0 {
                    request.queued_at = finished_at;
                    unfinished.push(request);
                } else {
                    request.finish();
                }
            }
            // Requests with samples left keep their place at the front.
            for request in unfinished.into_iter().rev() {
                pending.push_front(request);
            }
        }
    }

    fn sampler(&self, params: &GenParams, sample_index: usize, base_seed: u64) -> Result<SequenceSampler> {
        let grammar = match &params.grammar {
            Some(grammar) => Some(LlamaSampler::grammar(self.model, grammar, "root").map_err(|_| LlamaError::Grammar)?),
            None => None,
        };
        let mut stages = Vec::new();
        if params.temperature <= GREEDY_TEMPERATURE {
            stages.push(LlamaSampler::greedy());
        } else {
            if self.top_k > 0 {
                stages.push(LlamaSampler::top_k(i32::try_from(self.top_k).unwrap_or(i32::MAX)));
            }
            if params.top_p < 1.0 {
                stages.push(LlamaSampler::top_p(params.top_p.max(0.0), 1));
            }
            stages.push(LlamaSampler::temp(params.temperature));
            // u32::MAX asks llama.cpp for a random seed; keep seeds deterministic.
            let seed = (base_seed.wrapping_add(sample_index as u64) % u64::from(u32::MAX)) as u32;
            stages.push(LlamaSampler::dist(seed));
        }
        Ok(SequenceSampler { chain: LlamaSampler::chain_simple(stages), grammar })
    }

    /// Evaluates `tokens` into sequence `seq_id` from position 0; returns the batch index of the logits.
    fn eval_prompt(&mut self, tokens: &[LlamaToken], seq_id: i32) -> Result<i32> {
        let mut last_index = 0;
        let chunks = tokens.len().div_ceil(self.n_batch);
        for (chunk_index, chunk) in tokens.chunks(self.n_batch).enumerate() {
            self.batch.clear();
            let is_last_chunk = chunk_index + 1 == chunks;
            for (offset, token) in chunk.iter().enumerate() {
                let position = (chunk_index * self.n_batch + offset) as i32;
                let wants_logits = is_last_chunk && offset + 1 == chunk.len();
                self.batch.add(*token, position, &[seq_id], wants_logits).map_err(runtime)?;
            }
            self.context.decode(&mut self.batch).map_err(runtime)?;
            last_index = chunk.len() as i32 - 1;
        }
        Ok(last_index)
    }

    /// The most likely next tokens and their log-probabilities, from the logits at `index`.
    fn top_logprobs(&self, index: i32) -> Vec<(String, f32)> {
        let logits = self.context.get_logits_ith(index);
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let log_sum = max + logits.iter().map(|logit| (logit - max).exp()).sum::<f32>().ln();
        let mut best: Vec<(usize, f32)> = Vec::with_capacity(TOP_LOGPROBS + 1);
        for (token, &logit) in logits.iter().enumerate() {
            if best.len() < TOP_LOGPROBS || logit > best[best.len() - 1].1 {
                let at = best.partition_point(|(_, other)| *other >= logit);
                best.insert(at, (token, logit));
                best.truncate(TOP_LOGPROBS);
            }
        }
        let vocab = self.model.vocab();
        best.into_iter()
            .map(|(token, logit)| {
                let piece = vocab.token_to_piece(LlamaToken(token as i32), false, None);
                (String::from_utf8_lossy(&piece).into_owned(), logit - log_sum)
            })
            .collect()
    }

    /// Records a sampled token: end of generation, text, stop strings, length.
    fn accept(&self, sequence: &mut Sequence, token: LlamaToken, request: &Pending) {
        let vocab = self.model.vocab();
        if vocab.is_eog(token) {
            sequence.finish = Some(Finish::Stop(None));
            return;
        }
        sequence.tokens += 1;
        sequence.last_token = token;
        vocab.token_to_piece_into(token, &mut sequence.bytes, false, None);
        let stops = &request.params.stop;
        if !stops.is_empty() {
            let text = String::from_utf8_lossy(&sequence.bytes);
            let cut = stops.iter().filter(|stop| !stop.is_empty()).filter_map(|stop| text.find(stop.as_str())).min();
            if let Some(cut) = cut {
                sequence.finish = Some(Finish::Stop(Some(text[..cut].to_string())));
                return;
            }
        }
        if sequence.tokens >= request.generation_cap {
            sequence.finish = Some(Finish::Length);
        }
    }

    fn run_round(&mut self, round: &mut [(Pending, usize)]) -> Result<()> {
        self.context.clear_kv_cache();
        let mut sequences: Vec<Sequence> = Vec::new();
        let mut next_seq_id = 0i32;
        for (owner, (request, wave)) in round.iter_mut().enumerate() {
            let first_seq = next_seq_id;
            let started = Instant::now();
            let logits_index = self.eval_prompt(&request.prompt, first_seq)?;
            request.timing.prompt_time += started.elapsed();
            request.timing.prompt_evaluations += 1;
            for offset in 1..*wave as i32 {
                self.context.kv_cache_seq_cp(first_seq, first_seq + offset, None, None).map_err(runtime)?;
            }
            if request.params.logprobs && request.top_logprobs.is_none() {
                request.top_logprobs = Some(self.top_logprobs(logits_index));
            }
            for offset in 0..*wave {
                let sample_index = request.samples_started;
                request.samples_started += 1;
                let mut sequence = Sequence {
                    owner,
                    seq_id: first_seq + offset as i32,
                    position: request.prompt.len() as i32,
                    sampler: self.sampler(&request.params, sample_index, request.base_seed)?,
                    last_token: LlamaToken(0),
                    tokens: 0,
                    bytes: Vec::new(),
                    finish: None,
                };
                let token = sequence.sampler.sample(&self.context, logits_index)?;
                self.accept(&mut sequence, token, request);
                sequences.push(sequence);
            }
            next_seq_id += *wave as i32;
        }

        let started = Instant::now();
        let mut steps = 0;
        loop {
            let live: Vec<usize> = (0..sequences.len()).filter(|&index| sequences[index].finish.is_none()).collect();
            if live.is_empty() {
                break;
            }
            self.batch.clear();
            for &index in &live {
                let sequence = &sequences[index];
                self.batch.add(sequence.last_token, sequence.position, &[sequence.seq_id], true).map_err(runtime)?;
            }
            self.context.decode(&mut self.batch).map_err(runtime)?;
            steps += 1;
            for (batch_index, &index) in live.iter().enumerate() {
                let sequence = &mut sequences[index];
                sequence.position += 1;
                let token = sequence.sampler.sample(&self.context, batch_index as i32)?;
                let owner = &round[sequence.owner].0;
                self.accept(sequence, token, owner);
            }
        }
        let decode_time = started.elapsed();

        for (request, _) in round.iter_mut() {
            request.timing.decode_time += decode_time;
            request.timing.decode_steps += steps;
        }
        for sequence in sequences {
            let request = &mut round[sequence.owner].0;
            request.timing.generated_tokens += sequence.tokens;
            let (text, reason) = match sequence.finish {
                Some(Finish::Stop(Some(cut))) => (cut, "stop"),
                Some(Finish::Stop(None)) => (String::from_utf8_lossy(&sequence.bytes).into_owned(), "stop"),
                _ => (String::from_utf8_lossy(&sequence.bytes).into_owned(), "length"),
            };
            request.completions.push(Completion { text, finish_reason: Some(reason.into()), top_logprobs: Vec::new() });
        }
        Ok(())
    }
}

fn runtime(err: impl std::fmt::Display) -> LlamaError {
    LlamaError::Runtime(err.to_string())
}
