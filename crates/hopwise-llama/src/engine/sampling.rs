//! Choosing tokens and turning them into text: the per-sample sampler chain (with its grammar), the
//! first-token log-probabilities, and the text of one sample with its stop conditions.

use std::time::{SystemTime, UNIX_EPOCH};

use hopwise_core::{Completion, GenParams};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;

use super::runtime;
use crate::error::{LlamaError, Result};

/// At or below this temperature sampling is greedy.
pub const GREEDY_TEMPERATURE: f32 = 0.01;
/// Candidates reported for the first generated token when logprobs are requested.
const TOP_LOGPROBS: usize = 5;

/// The sampling chain of one sequence, and its grammar kept apart from the chain.
///
/// Applying a grammar checks every vocabulary entry (150k for Qwen), costly at every token of every
/// sequence. So, like llama.cpp's own tools, we sample without it first and consult the grammar only
/// for the chosen token; only when the grammar rejects it do we filter the whole vocabulary and resample.
pub(crate) struct SequenceSampler {
    chain: LlamaSampler,
    grammar: Option<LlamaSampler>,
}

impl SequenceSampler {
    /// Sample `sample_index` of a request: greedy at low temperature, else top-k / top-p / temperature
    /// with seed `base_seed + sample_index`.
    pub fn new(
        model: &LlamaModel,
        params: &GenParams,
        top_k: u32,
        sample_index: usize,
        base_seed: u64,
    ) -> Result<Self> {
        let grammar = match &params.grammar {
            Some(grammar) => Some(LlamaSampler::grammar(model, grammar, "root").map_err(|_| LlamaError::Grammar)?),
            None => None,
        };
        let mut stages = Vec::new();
        if params.temperature <= GREEDY_TEMPERATURE {
            stages.push(LlamaSampler::greedy());
        } else {
            if top_k > 0 {
                stages.push(LlamaSampler::top_k(i32::try_from(top_k).unwrap_or(i32::MAX)));
            }
            if params.top_p < 1.0 {
                stages.push(LlamaSampler::top_p(params.top_p.max(0.0), 1));
            }
            stages.push(LlamaSampler::temp(params.temperature));
            // u32::MAX asks llama.cpp for a random seed; keep seeds deterministic.
            let seed = (base_seed.wrapping_add(sample_index as u64) % u64::from(u32::MAX)) as u32;
            stages.push(LlamaSampler::dist(seed));
        }
        Ok(Self { chain: LlamaSampler::chain_simple(stages), grammar })
    }

    /// Samples from the logits at batch index `index` and advances the chain (and grammar) past it.
    pub fn sample(&mut self, context: &LlamaContext<'_>, index: i32) -> Result<LlamaToken> {
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

/// The seed of a request's first sample: the caller's, or one taken from the clock.
pub(crate) fn base_seed(params: &GenParams) -> u64 {
    params.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_nanos() as u64).unwrap_or(0)
    })
}

/// The most likely next tokens and their log-probabilities, from the logits at batch index `index`.
pub(crate) fn top_logprobs(model: &LlamaModel, context: &LlamaContext<'_>, index: i32) -> Vec<(String, f32)> {
    let logits = context.get_logits_ith(index);
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
    let vocab = model.vocab();
    best.into_iter()
        .map(|(token, logit)| {
            let piece = vocab.token_to_piece(LlamaToken(token as i32), false, None);
            (String::from_utf8_lossy(&piece).into_owned(), logit - log_sum)
        })
        .collect()
}

/// The log-probability of `token` under the logits at batch index `index` (before any sampling
/// stage: the model's own distribution).
pub(crate) fn token_logprob(context: &LlamaContext<'_>, index: i32, token: LlamaToken) -> f32 {
    let logits = context.get_logits_ith(index);
    let Some(&chosen) = usize::try_from(token.0).ok().and_then(|t| logits.get(t)) else {
        return f32::NEG_INFINITY;
    };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_sum = max + logits.iter().map(|logit| (logit - max).exp()).sum::<f32>().ln();
    chosen - log_sum
}

/// Why a sample stopped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Finish {
    /// End-of-generation token, or a stop string (the text is cut before it).
    Stop(Option<String>),
    Length,
}

/// The text of one sample as its tokens arrive.
#[derive(Debug, Default)]
pub(crate) struct Output {
    /// Tokens emitted, end-of-generation excluded.
    pub tokens: usize,
    bytes: Vec<u8>,
    pub finish: Option<Finish>,
    /// Each emitted token's text and log-probability, when the request asked for them.
    logprobs: Vec<(String, f32)>,
}

impl Output {
    /// Takes one sampled token: end of generation, text, stop strings, the length cap. Returns true
    /// when the sample is finished.
    pub fn push(&mut self, model: &LlamaModel, token: LlamaToken, stops: &[String], cap: usize) -> bool {
        let vocab = model.vocab();
        if vocab.is_eog(token) {
            self.finish = Some(Finish::Stop(None));
            return true;
        }
        self.tokens += 1;
        vocab.token_to_piece_into(token, &mut self.bytes, false, None);
        if !stops.is_empty() {
            let text = String::from_utf8_lossy(&self.bytes);
            let cut = stops.iter().filter(|stop| !stop.is_empty()).filter_map(|stop| text.find(stop.as_str())).min();
            if let Some(cut) = cut {
                self.finish = Some(Finish::Stop(Some(text[..cut].to_string())));
                return true;
            }
        }
        if self.tokens >= cap {
            self.finish = Some(Finish::Length);
        }
        self.finish.is_some()
    }

    /// Records `token`'s log-probability (an end-of-generation token is not part of the text, so it
    /// is left out). Called before [`Output::push`] for requests that ask for log-probabilities.
    pub fn note_logprob(&mut self, model: &LlamaModel, token: LlamaToken, logprob: f32) {
        if self.finish.is_some() || model.vocab().is_eog(token) {
            return;
        }
        let piece = model.vocab().token_to_piece(token, false, None);
        self.logprobs.push((String::from_utf8_lossy(&piece).into_owned(), logprob));
    }

    pub fn into_completion(self) -> Completion {
        let (text, reason) = match self.finish {
            Some(Finish::Stop(Some(cut))) => (cut, "stop"),
            Some(Finish::Stop(None)) => (String::from_utf8_lossy(&self.bytes).into_owned(), "stop"),
            _ => (String::from_utf8_lossy(&self.bytes).into_owned(), "length"),
        };
        Completion { text, finish_reason: Some(reason.into()), top_logprobs: Vec::new(), token_logprobs: self.logprobs }
    }
}
