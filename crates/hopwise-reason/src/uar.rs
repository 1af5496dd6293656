//! Uncertainty-gated dynamic retrieval and its baselines, in one sentence loop.
//!
//! The answer grows one sentence per step (FLARE-style). Each step:
//! 1. a *temporary* sentence `t_i` from `uar_next_sentence(Q, D_current, y_<i)` (the default
//!    sampling parameters, i.e. near-greedy);
//! 2. the gate decides whether to retrieve:
//!    - `uar`: `n` samples of the same prompt in ONE request (`n > 1`, temperature > 0); `U` from the
//!      chosen estimator over their first sentences; retrieve iff `U > θ`;
//!    - `always-retrieve`: always, with `t_i` (or a sub-query) as the query;
//!    - `flare-instruct`: the model writes `[Search(query)]` instead of a sentence when it wants to;
//!    - `flare-direct` (Jiang et al. 2023, FLARE's main method): the temporary sentence is generated
//!      with token probabilities; when any token's probability is below θ, the search query is the
//!      sentence with its tokens below β masked out (FLARE's implicit query), and the sentence is
//!      regenerated with what it finds. Departures from the paper: the sentence loop's prompt and
//!      answer marker instead of FLARE's few-shot exemplars, the masked query only (the paper's second
//!      form, questions generated for the low-probability spans, is not built), and the previous
//!      sentences are not part of the query;
//! 3. on retrieval: a sub-query for the missing fact (`uar_subquery(Q, y_<i)`), `D = R(query, k)`
//!    (which becomes `D_current` for later steps), and the sentence is regenerated with `D`;
//!    otherwise `t_i` is accepted;
//! 4. the loop stops at the answer marker `So the answer is: X` (the final answer is `X`) or after
//!    `max_steps` sentences; then one `uar_conclude` call gives a best-effort answer.
//!
//! Degenerate inputs: samples that are all empty (or fewer than two usable samples) count as
//! maximal uncertainty, so the step retrieves; a failing NLI judge falls back to Jaccard similarity
//! and says so in the trace; a failing retrieval keeps the temporary sentence and says so.
//!
//! Every sentence is a trace node (`"1"`, `"2"`, … chained, the last feeding `Q`) whose `extra`
//! holds the samples, the similarity matrix, `U`, the estimator, `θ`, the decision and the query.
//! `stats.steps` counts sentences and `stats.retrieval_rounds` searches (the paper's #steps/#search).

use std::sync::Arc;

use async_trait::async_trait;
use hopwise_core::{Decision, GenParams, Nli, NodeTrace, Passage};

use crate::ctx::Ctx;
use crate::details::{
    self,
    sentence::{LoopGate, SentenceNode, SentenceTrace, StepDecision, StepGate},
};
use crate::error::{ReasonError, Result};
use crate::gate::{self, Estimate};
use crate::strategy::api::{Answer, Strategy};

/// The sentence loop's templates; `uar` adds the NLI judge's when its similarity is NLI.
pub(crate) const SENTENCE_LOOP_TEMPLATES: &[&str] =
    &["uar_next_sentence", "uar_subquery", "uar_flare_instruct", "uar_conclude"];
pub(crate) const SENTENCE_LOOP_NLI_TEMPLATES: &[&str] =
    &["uar_next_sentence", "uar_subquery", "uar_flare_instruct", "uar_conclude", "nli_judge"];
use crate::uncertainty::Matrix;

mod confidence;
mod options;

pub use crate::gate::{Similarity, UncertaintyGate, MAX_SAMPLES};
use crate::protocol::answer::marked_answer;
pub use crate::protocol::sentence::{clean_query, first_sentence, parse_search_request};
pub use options::{
    uncertainty_gate, AlwaysRetrieveOptions, ConfidenceGate, FlareDirectOptions, FlareInstructOptions, QuerySource,
    UarOptions, WithoutProbabilities,
};

/// Longest sentence a step may generate, in tokens.
const SENTENCE_MAX_TOKENS: u32 = 64;

#[derive(Debug, Clone)]
enum Gate {
    Uncertainty(UncertaintyGate),
    Always(QuerySource),
    FlareInstruct,
    Confidence(ConfidenceGate),
}

/// The sentence loop with one of its gates. Build it with [`DynamicRetrieval::uar`],
/// [`DynamicRetrieval::always_retrieve`] or [`DynamicRetrieval::flare_instruct`].
#[derive(Debug, Clone)]
pub struct DynamicRetrieval {
    name: &'static str,
    gate: Gate,
    max_steps: u32,
    initial_retrieval: bool,
}

fn check_max_steps(strategy: &str, max_steps: u32) -> Result<u32> {
    if (1..=50).contains(&max_steps) {
        Ok(max_steps)
    } else {
        Err(ReasonError::InvalidOption(format!("strategy `{strategy}`: max_steps = {max_steps}: must be 1 to 50")))
    }
}

impl DynamicRetrieval {
    pub fn uar(o: &UarOptions) -> Result<Self> {
        Ok(Self {
            name: "uar",
            gate: Gate::Uncertainty(uncertainty_gate("uar", o)?),
            max_steps: check_max_steps("uar", o.max_steps)?,
            initial_retrieval: o.initial_retrieval,
        })
    }

    /// `name` is `always-retrieve` (query defaults to the sentence) or `always-retrieve-subquery`
    /// (the query is the sub-query; asking it for `query = "sentence"` is an error).
    pub fn always_retrieve(name: &'static str, o: &AlwaysRetrieveOptions) -> Result<Self> {
        let query = match (name, o.query) {
            ("always-retrieve-subquery", Some(QuerySource::Sentence)) => {
                return Err(ReasonError::InvalidOption(
                    "strategy `always-retrieve-subquery` searches with the sub-query; use `always-retrieve` for \
                     query = \"sentence\""
                        .into(),
                ))
            }
            ("always-retrieve-subquery", _) => QuerySource::Subquery,
            (_, q) => q.unwrap_or(QuerySource::Sentence),
        };
        Ok(Self {
            name,
            gate: Gate::Always(query),
            max_steps: check_max_steps(name, o.max_steps)?,
            initial_retrieval: o.initial_retrieval,
        })
    }

    pub fn flare_instruct(o: &FlareInstructOptions) -> Result<Self> {
        Ok(Self {
            name: "flare-instruct",
            gate: Gate::FlareInstruct,
            max_steps: check_max_steps("flare-instruct", o.max_steps)?,
            initial_retrieval: o.initial_retrieval,
        })
    }

    pub fn flare_direct(o: &FlareDirectOptions) -> Result<Self> {
        Ok(Self {
            name: "flare-direct",
            gate: Gate::Confidence(ConfidenceGate::from_options(o)?),
            max_steps: check_max_steps("flare-direct", o.max_steps)?,
            initial_retrieval: o.initial_retrieval,
        })
    }

    /// The resolved uncertainty gate (for `uar`).
    pub fn uncertainty_gate(&self) -> Option<UncertaintyGate> {
        match &self.gate {
            Gate::Uncertainty(g) => Some(*g),
            _ => None,
        }
    }

    pub fn max_steps(&self) -> u32 {
        self.max_steps
    }

    fn describe(&self) -> SentenceTrace {
        let gate = match &self.gate {
            Gate::Uncertainty(g) => LoopGate::Uncertainty {
                estimator: g.estimator,
                threshold: g.threshold,
                samples: g.samples,
                similarity: g.similarity,
                sample_temperature: g.sample_temperature,
            },
            Gate::Always(q) => LoopGate::Always { query: *q },
            Gate::FlareInstruct => LoopGate::FlareInstruct,
            Gate::Confidence(g) => {
                LoopGate::FlareDirect { theta: g.theta, beta: g.beta, without_probabilities: g.without_probabilities }
            }
        };
        SentenceTrace { gate, max_steps: self.max_steps, initial_retrieval: self.initial_retrieval }
    }
}

#[async_trait]
impl Strategy for DynamicRetrieval {
    fn name(&self) -> &str {
        self.name
    }

    /// Only a gate that compares samples by entailment asks the NLI judge.
    fn templates(&self) -> Option<Vec<&'static str>> {
        Some(if self.judges_entailment() { SENTENCE_LOOP_NLI_TEMPLATES } else { SENTENCE_LOOP_TEMPLATES }.to_vec())
    }

    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        ctx.rec().set_extra(details::to_extra(&self.describe()));
        let nli = self.nli_for(ctx);
        let mut run =
            Run { ctx, question, nli, sentences: Vec::new(), passages: Vec::new(), without_probabilities: false };
        let mut final_answer = None;
        let mut last_step = None;
        let outcome: Result<()> = async {
            if self.initial_retrieval {
                match ctx.retrieve(None, question, ctx.k()).await {
                    Ok(passages) => run.passages = passages,
                    Err(ReasonError::Core(e)) => {
                        ctx.rec().note(format!("initial retrieval failed ({e}); going on without"))
                    }
                    Err(e) => return Err(e),
                }
            }
            for step in 1..=self.max_steps {
                let sentence = self.step(&mut run, step).await?;
                last_step = Some(step);
                if sentence.is_empty() {
                    ctx.rec().note(format!("step {step}: the model wrote an empty sentence; stopping"));
                    break;
                }
                let marker = marked_answer(&sentence);
                run.sentences.push(sentence);
                if marker.is_some() {
                    final_answer = marker;
                    break;
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = outcome {
            if e.is_fatal() {
                return Err(e);
            }
            ctx.rec().best_effort(format!("the sentence loop stopped early: {e}"));
        }
        if let Some(last) = last_step {
            ctx.rec().add_edge(&last.to_string(), hopwise_core::trace::SINK);
        }
        let rationale = (!run.sentences.is_empty()).then(|| run.sentences.join(" "));
        let text = match final_answer {
            Some(a) => a,
            None => run.conclude().await,
        };
        Ok(Answer { text, rationale })
    }
}

/// The non-empty sample with the largest similarity degree (first on ties).
fn most_central(samples: &[String], w: &Matrix) -> Option<String> {
    let degree = |i: usize| (0..w.n()).map(|j| w.get(i, j)).sum::<f64>();
    (0..samples.len().min(w.n()))
        .filter(|&i| !samples[i].trim().is_empty())
        .fold(None, |best: Option<usize>, i| match best {
            Some(b) if degree(b) >= degree(i) => Some(b),
            _ => Some(i),
        })
        .map(|i| samples[i].clone())
}

/// One question's loop state.
struct Run<'a> {
    ctx: &'a Ctx,
    question: &'a str,
    nli: Option<Arc<dyn Nli>>,
    sentences: Vec<String>,
    passages: Vec<Passage>,
    /// `flare-direct` found no token probabilities and runs `flare-instruct`'s steps instead.
    without_probabilities: bool,
}

/// What a step decided, for the trace.
struct StepRecord {
    temporary: String,
    sentence: String,
    query: Option<String>,
    retrieved: Option<Vec<Passage>>,
    gate: StepGate,
}

impl DynamicRetrieval {
    /// The gate compares sampled sentences by entailment (NLI similarity).
    fn judges_entailment(&self) -> bool {
        matches!(&self.gate, Gate::Uncertainty(g) if g.similarity == Similarity::Nli)
    }

    fn nli_for(&self, ctx: &Ctx) -> Option<Arc<dyn Nli>> {
        self.judges_entailment().then(|| ctx.nli())
    }

    /// Runs step `step` and returns the accepted sentence.
    async fn step(&self, run: &mut Run<'_>, step: u32) -> Result<String> {
        let id = step.to_string();
        let ctx = run.ctx;
        let record = match &self.gate {
            Gate::Uncertainty(g) => {
                let temporary = run.next_sentence(&id, "temporary_sentence").await?;
                let samples = run.samples(&id, g).await?;
                let estimate = run.estimate(&id, g, &samples).await;
                let retrieve = estimate.uncertainty > g.threshold;
                let detail = StepGate::Uncertainty {
                    samples: samples.clone(),
                    similarity: estimate.similarity.clone(),
                    similarity_source: estimate.source.to_string(),
                    uncertainty: estimate.uncertainty,
                    estimator: g.estimator,
                    threshold: g.threshold,
                };
                if retrieve {
                    let query = run.subquery(&id).await?;
                    run.retrieve_and_regenerate(&id, temporary, query, detail).await?
                } else {
                    // A near-greedy call can come back empty while the samples agree on a sentence:
                    // accept the most central sample then rather than end the answer.
                    let sentence = if temporary.is_empty() {
                        most_central(&samples, &estimate.similarity).unwrap_or_default()
                    } else {
                        temporary.clone()
                    };
                    StepRecord { sentence, temporary, query: None, retrieved: None, gate: detail }
                }
            }
            Gate::Always(source) => {
                let temporary = run.next_sentence(&id, "temporary_sentence").await?;
                let query = match source {
                    QuerySource::Sentence if temporary.is_empty() => run.question.to_string(),
                    QuerySource::Sentence => temporary.clone(),
                    QuerySource::Subquery => run.subquery(&id).await?,
                };
                run.retrieve_and_regenerate(&id, temporary, query, StepGate::Always { query_source: *source }).await?
            }
            Gate::FlareInstruct => run.flare_instruct_step(&id).await?,
            Gate::Confidence(_) if run.without_probabilities => run.flare_instruct_step(&id).await?,
            Gate::Confidence(g) => {
                let prompt = run.prompt("uar_next_sentence", &run.passages)?;
                let params = GenParams { logprobs: true, ..run.sentence_params() };
                let reply = ctx.chat("temporary_sentence", Some(&id), prompt, params).await?;
                let text = reply.text().to_string();
                let tokens = reply.choices.first().map(|c| c.token_logprobs.clone()).unwrap_or_default();
                if tokens.is_empty() && !text.trim().is_empty() {
                    match g.without_probabilities {
                        WithoutProbabilities::Error => {
                            return Err(hopwise_core::Error::Config(
                                "strategy `flare-direct` needs token probabilities, and the model backend \
                                 reported none; use a backend that returns `logprobs`, or set the option \
                                 without_probabilities = \"flare-instruct\" to run flare-instruct instead"
                                    .into(),
                            )
                            .into());
                        }
                        WithoutProbabilities::FlareInstruct => {
                            ctx.rec().note(
                                "the model backend reported no token probabilities; running flare-instruct instead \
                                 (without_probabilities = \"flare-instruct\")",
                            );
                            run.without_probabilities = true;
                            let record = run.flare_instruct_step(&id).await?;
                            return run.record(&id, step, record);
                        }
                    }
                }
                let temporary = first_sentence(&text);
                let tokens = confidence::sentence_tokens(&tokens, &temporary);
                let lowest = confidence::lowest_probability(&tokens);
                let detail = StepGate::Confidence {
                    tokens: tokens.iter().map(|(t, lp)| (t.clone(), f64::from(*lp).exp())).collect(),
                    lowest_probability: lowest,
                    theta: g.theta,
                };
                if lowest.is_some_and(|p| p < g.theta) {
                    let masked = confidence::masked_query(&tokens, g.beta);
                    let query = if masked.is_empty() { run.question.to_string() } else { masked };
                    run.retrieve_and_regenerate(&id, temporary, query, detail).await?
                } else {
                    StepRecord { sentence: temporary.clone(), temporary, query: None, retrieved: None, gate: detail }
                }
            }
        };
        run.record(&id, step, record)
    }
}

impl Run<'_> {
    fn answer_so_far(&self) -> String {
        if self.sentences.is_empty() {
            self.ctx.nothing_yet()
        } else {
            self.sentences.join("\n")
        }
    }

    fn prompt(&self, template: &str, passages: &[Passage]) -> Result<String> {
        let passages = self.ctx.format_passages(passages);
        let so_far = self.answer_so_far();
        self.ctx.render(template, &[("passages", &passages), ("question", self.question), ("answer_so_far", &so_far)])
    }

    fn sentence_params(&self) -> GenParams {
        GenParams { n: 1, max_tokens: SENTENCE_MAX_TOKENS, ..self.ctx.params().clone() }
    }

    /// The next sentence from the current passages, at the context's default sampling parameters.
    async fn next_sentence(&self, id: &str, purpose: &str) -> Result<String> {
        let prompt = self.prompt("uar_next_sentence", &self.passages)?;
        let reply = self.ctx.chat(purpose, Some(id), prompt, self.sentence_params()).await?;
        Ok(first_sentence(reply.text()))
    }

    /// `flare-instruct`'s step: the model writes a sentence, or `[Search(query)]` to search first.
    async fn flare_instruct_step(&mut self, id: &str) -> Result<StepRecord> {
        let prompt = self.prompt("uar_flare_instruct", &self.passages)?;
        let reply = self.ctx.chat("flare_instruct", Some(id), prompt, self.sentence_params()).await?;
        let reply = reply.text().to_string();
        match parse_search_request(&reply) {
            Some(query) => self.retrieve_and_regenerate(id, String::new(), query, StepGate::Flare { reply }).await,
            None => {
                let sentence = first_sentence(&reply);
                Ok(StepRecord {
                    temporary: sentence.clone(),
                    sentence,
                    query: None,
                    retrieved: None,
                    gate: StepGate::Flare { reply },
                })
            }
        }
    }

    /// `n` samples of the next sentence in one request (`n > 1` lets the backend share the prompt).
    async fn samples(&self, id: &str, g: &UncertaintyGate) -> Result<Vec<String>> {
        let prompt = self.prompt("uar_next_sentence", &self.passages)?;
        gate::sample(self.ctx, id, "uncertainty_samples", &prompt, g, SENTENCE_MAX_TOKENS, first_sentence).await
    }

    /// `U` over the samples. All-empty samples, or fewer than two, are maximal uncertainty.
    async fn estimate(&self, id: &str, g: &UncertaintyGate, samples: &[String]) -> Estimate {
        gate::estimate(self.ctx, id, g, self.nli.as_ref(), samples).await
    }

    /// A search query for the fact still missing, given `Q` and `y_<i`.
    async fn subquery(&self, id: &str) -> Result<String> {
        let so_far = self.answer_so_far();
        let reply = self
            .ctx
            .complete("subquery", Some(id), "uar_subquery", &[("question", self.question), ("answer_so_far", &so_far)])
            .await?;
        let query = clean_query(&reply);
        Ok(if query.is_empty() { self.question.to_string() } else { query })
    }

    /// Retrieves with `query`; on success the passages become `D_current` and the sentence is
    /// regenerated with them. A failed retrieval keeps `temporary` (noted in the trace).
    async fn retrieve_and_regenerate(
        &mut self,
        id: &str,
        temporary: String,
        query: String,
        gate: StepGate,
    ) -> Result<StepRecord> {
        match self.ctx.retrieve(Some(id), &query, self.ctx.k()).await {
            Ok(passages) => {
                self.passages = passages.clone();
                let sentence = self.next_sentence(id, "regenerate_sentence").await?;
                Ok(StepRecord { temporary, sentence, query: Some(query), retrieved: Some(passages), gate })
            }
            Err(ReasonError::Core(e)) => {
                self.ctx.rec().note(format!("step {id}: retrieval failed ({e}); kept the sentence written without it"));
                Ok(StepRecord { sentence: temporary.clone(), temporary, query: Some(query), retrieved: None, gate })
            }
            Err(e) => Err(e),
        }
    }

    /// Writes the step's node and counts the step; returns the accepted sentence.
    fn record(&self, id: &str, step: u32, r: StepRecord) -> Result<String> {
        let decision = if r.query.is_some() { StepDecision::Retrieve } else { StepDecision::Accept };
        let extra = details::to_extra(&SentenceNode {
            temporary: r.temporary,
            sentence: r.sentence.clone(),
            decision,
            query: r.query.clone(),
            gate: r.gate,
        });
        let node = NodeTrace {
            id: id.to_string(),
            question: r.query.clone().unwrap_or_else(|| self.question.to_string()),
            parents: if step > 1 { vec![(step - 1).to_string()] } else { Vec::new() },
            decision: if r.retrieved.is_some() { Decision::Retrieved } else { Decision::Known },
            answer: Some(r.sentence.clone()),
            passages: r.retrieved.unwrap_or_default(),
            extra,
            ..Default::default()
        };
        self.ctx.rec().upsert_node(node);
        if step > 1 {
            self.ctx.rec().add_edge(&(step - 1).to_string(), id);
        }
        self.ctx.rec().with_stats(|s| s.steps += 1);
        Ok(r.sentence)
    }

    /// The answer when no sentence carried the marker: one `uar_conclude` call, best-effort.
    async fn conclude(&self) -> String {
        self.ctx.rec().best_effort("no answer marker within the step limit; concluded from the sentences so far");
        let prompt = match self.prompt("uar_conclude", &self.passages) {
            Ok(p) => p,
            Err(_) => return self.sentences.join(" "),
        };
        match self.ctx.chat("conclude", None, prompt, self.ctx.params().clone()).await {
            Ok(reply) => {
                let text = reply.text();
                marked_answer(text).unwrap_or_else(|| first_sentence(text))
            }
            Err(e) => {
                self.ctx.rec().note(format!("the concluding call failed ({e}); answering with the sentences so far"));
                self.sentences.join(" ")
            }
        }
    }
}

#[cfg(test)]
mod tests;
