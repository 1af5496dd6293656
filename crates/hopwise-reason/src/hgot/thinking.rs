//! PROBE and the weighted self-consistency shared by Probe and Infer: `m` thoughts in one request,
//! citation scoring, the vote, and the σ updates.

use hopwise_core::{GenParams, Passage, Repair};

use super::citations::{
    cited_thought_grammar, parse_thought, score_statements, split_statements, take_markers, CitationScore, Statement,
    Thought,
};
use super::{update_detail, Outcome, Run, ScoredPassage, ANSWER_CLAIM};

use crate::details::hgot::{SigmaEntry, ThoughtSample, ThoughtsRecord};
use crate::error::{ReasonError, Result};
use crate::vote::{
    initial_scores, normalize_support, passage_support, thought_quality, update_sigma, weighted_vote, Vote,
};

/// Longest thought, in tokens.
const THOUGHT_MAX_TOKENS: u32 = 256;

/// What every sample of one Probe or Infer is asked with.
struct Asking<'a> {
    purpose: &'a str,
    node: &'a str,
    prompt: &'a str,
    grammar: Option<String>,
}

/// One scored sample.
pub(super) struct Sample {
    pub raw: String,
    pub thought: Thought,
    pub citations: CitationScore,
    pub rho: f64,
}

/// The samples of one Probe or Infer and their vote.
pub(super) struct Deliberation {
    pub samples: Vec<Sample>,
    pub vote: Vote,
    /// ν̄ per passage of the prompt, in prompt order.
    pub nu_bar: Vec<f64>,
    /// Samples whose citations were not judged (a unanimous Probe).
    pub unjudged: usize,
}

impl Deliberation {
    /// The rationale of the heaviest sample that gave the winning answer.
    pub fn best_rationale(&self) -> Option<String> {
        let winner = self.vote.table.first()?;
        winner
            .samples
            .iter()
            .filter_map(|&i| self.samples.get(i))
            .max_by(|a, b| a.rho.total_cmp(&b.rho))
            .map(|s| s.thought.rationale.clone())
            .filter(|r| !r.is_empty())
    }

    /// The trace's record of these thoughts; `passages` are the prompt's, in order.
    pub fn to_record(&self, passages: &[Passage]) -> ThoughtsRecord {
        let samples = self
            .samples
            .iter()
            .map(|s| ThoughtSample {
                thought: s.thought.rationale.clone(),
                answer: s.thought.answer.clone(),
                rec: s.citations.recall,
                prec: s.citations.precision,
                rho: s.rho,
                statements: s.citations.statements.clone(),
                raw: s.raw.clone(),
            })
            .collect();
        ThoughtsRecord {
            samples,
            votes: self.vote.table.clone(),
            answer: self.vote.answer.clone(),
            confidence: self.vote.confidence,
            unweighted: self.vote.unweighted,
            nu_bar: passages.iter().zip(&self.nu_bar).map(|(p, v)| (p.id.clone(), *v)).collect(),
            ranked: None,
            unjudged_samples: self.unjudged,
        }
    }
}

impl Run<'_> {
    /// `m` thoughts for `prompt` (temperature > 0; one request with `n = m` unless
    /// `shared_sampling` is off), each scored by its citations; then the weighted vote and ν̄.
    /// With `skip_if_unanimous`, samples that all give one answer are not judged (each weighs 1).
    pub(super) async fn deliberate(
        &self,
        purpose: &str,
        node: &str,
        question: &str,
        prompt: String,
        passages: &[Passage],
        skip_if_unanimous: bool,
    ) -> Result<Deliberation> {
        let opts = &self.hgot.opts;
        let grammar = opts.cited_grammar.then(|| cited_thought_grammar(passages.len())).flatten();
        let ask = Asking { purpose, node, prompt: &prompt, grammar };
        let texts =
            if opts.shared_sampling { self.shared_samples(&ask).await? } else { self.separate_samples(&ask).await? };
        if texts.len() < opts.samples as usize {
            self.ctx.rec().note(format!("node {node}: {purpose} got {} of {} samples", texts.len(), opts.samples));
        }
        let thoughts: Vec<(String, Thought)> = texts
            .into_iter()
            .map(|raw| {
                let thought = parse_thought(&raw);
                (raw, thought)
            })
            .collect();
        if skip_if_unanimous && unanimous(&thoughts) {
            let answer = thoughts[0].1.answer.clone();
            self.ctx.rec().note(format!(
                "node {node}: all {} {purpose} samples answered `{answer}`; their citations were not judged \
                 (the vote and its confidence cannot change)",
                thoughts.len()
            ));
            let unjudged = thoughts.len();
            let samples: Vec<Sample> = thoughts
                .into_iter()
                .map(|(raw, thought)| Sample { raw, thought, citations: CitationScore::default(), rho: 1.0 })
                .collect();
            let answers: Vec<String> = samples.iter().map(|s| s.thought.answer.clone()).collect();
            let vote = weighted_vote(&answers, &vec![1.0; answers.len()]);
            return Ok(Deliberation { samples, vote, nu_bar: vec![0.0; passages.len()], unjudged });
        }
        // Every sample's citations are judged together; the judge asks each distinct pair once.
        let mut statements = Vec::with_capacity(thoughts.len());
        for (_, thought) in &thoughts {
            statements.push(self.statements(question, thought)?);
        }
        let scores = score_statements(statements, passages, &self.judge, opts.uncited_entailment).await;
        let mut samples = Vec::with_capacity(thoughts.len());
        for (i, ((raw, thought), citations)) in thoughts.into_iter().zip(scores).enumerate() {
            let dangling: Vec<usize> = citations.statements.iter().flat_map(|s| s.dangling.iter().copied()).collect();
            if !dangling.is_empty() {
                self.ctx.rec().repair(Repair {
                    stage: Self::stage(purpose, node),
                    rule: "dangling_citation".into(),
                    detail: format!(
                        "sample {i} cites {dangling:?} but only passages 1..{} exist; those statements count as unsupported",
                        passages.len()
                    ),
                });
            }
            let rho = thought_quality(opts.alpha, opts.beta, opts.gamma, citations.recall, citations.precision);
            samples.push(Sample { raw, thought, citations, rho });
        }
        let answers: Vec<String> = samples.iter().map(|s| s.thought.answer.clone()).collect();
        let rho: Vec<f64> = samples.iter().map(|s| s.rho).collect();
        let vote = weighted_vote(&answers, &rho);
        let support: Vec<Vec<u32>> = samples.iter().map(|s| s.citations.support.clone()).collect();
        let nu_bar = normalize_support(&passage_support(&support, &rho, passages.len()));
        Ok(Deliberation { samples, vote, nu_bar, unjudged: 0 })
    }

    /// The statements a thought's citations are scored on: its rationale's sentences, or, with
    /// `answer_claim`, for a rationale of bare markers the answer as a claim citing those markers.
    fn statements(&self, question: &str, thought: &Thought) -> Result<Vec<Statement>> {
        let statements = split_statements(&thought.rationale);
        let answer = thought.answer.trim();
        if !self.hgot.opts.answer_claim || !statements.is_empty() || answer.is_empty() {
            return Ok(statements);
        }
        let citations = take_markers(&thought.rationale).1;
        let claim = self.ctx.render(ANSWER_CLAIM, &[("question", question), ("answer", answer)])?;
        Ok(vec![Statement { claim: claim.trim().to_string(), citations }])
    }

    fn sample_params(&self, n: u32, offset: u64, ask: &Asking<'_>) -> GenParams {
        let opts = &self.hgot.opts;
        GenParams {
            n,
            grammar: ask.grammar.clone(),
            temperature: opts.temperature,
            top_p: 1.0,
            max_tokens: THOUGHT_MAX_TOKENS,
            // A different seed per request, so a seeded backend does not repeat itself.
            seed: self.ctx.params().seed.map(|s| s.wrapping_add(offset)),
            ..self.ctx.params().clone()
        }
    }

    /// One request with `n = m`, topped up once when the backend returns fewer choices.
    async fn shared_samples(&self, ask: &Asking<'_>) -> Result<Vec<String>> {
        let Asking { purpose, node, prompt, .. } = *ask;
        let m = self.hgot.opts.samples;
        let mut texts: Vec<String> = Vec::with_capacity(m as usize);
        for attempt in 0..2u64 {
            let missing = m.saturating_sub(texts.len() as u32);
            if missing == 0 {
                break;
            }
            match self
                .ctx
                .chat(purpose, Some(node), prompt.to_string(), self.sample_params(missing, attempt, ask))
                .await
            {
                Ok(reply) => texts.extend(reply.choices.iter().take(missing as usize).map(|c| c.text.clone())),
                Err(e) if attempt == 0 => return Err(e),
                Err(e) => {
                    self.ctx.rec().note(format!("node {node}: topping up the {purpose} samples failed ({e})"));
                    break;
                }
            }
        }
        Ok(texts)
    }

    /// `m` concurrent requests with `n = 1`; fails only when every request fails.
    async fn separate_samples(&self, ask: &Asking<'_>) -> Result<Vec<String>> {
        let m = self.hgot.opts.samples;
        let requests = (0..m).map(|i| {
            self.ctx.chat(ask.purpose, Some(ask.node), ask.prompt.to_string(), self.sample_params(1, u64::from(i), ask))
        });
        let mut texts = Vec::with_capacity(m as usize);
        let mut last_error = None;
        for reply in futures::future::join_all(requests).await {
            match reply {
                Ok(r) => texts.extend(r.choices.first().map(|c| c.text.clone())),
                Err(e) => last_error = Some(e),
            }
        }
        match last_error {
            Some(e) if texts.is_empty() => Err(e),
            _ => Ok(texts),
        }
    }

    /// Applies `σ(p, t+1) = w·[σ(p, t), ν̄(p), CI]` to `passages` (in prompt order) and logs each.
    pub(super) fn update_sigma(
        &self,
        node: &str,
        stage: &str,
        passages: &mut [ScoredPassage],
        nu_bar: &[f64],
        ci: f64,
    ) {
        let w = self.hgot.opts.w;
        let mut entries = Vec::with_capacity(passages.len());
        for (p, nb) in passages.iter_mut().zip(nu_bar) {
            let before = p.sigma;
            p.sigma = update_sigma(w, before, *nb, ci);
            entries.push(SigmaEntry::Update {
                node: node.to_string(),
                stage: stage.to_string(),
                passage: p.passage.id.clone(),
                sigma_before: before,
                nu_bar: *nb,
                ci,
                sigma: p.sigma,
            });
        }
        if let Ok(mut h) = self.sigma_history.lock() {
            h.extend(entries);
        }
    }

    fn log_initial(&self, node: &str, passages: &[ScoredPassage]) {
        let entries = passages.iter().map(|p| SigmaEntry::Retrieved {
            node: node.to_string(),
            stage: "retrieved".to_string(),
            passage: p.passage.id.clone(),
            engine_score: p.passage.score,
            sigma: p.sigma,
        });
        if let Ok(mut h) = self.sigma_history.lock() {
            h.extend(entries);
        }
    }

    /// PROBE: retrieve for `question`, sample cited thoughts, vote, update σ. A failed retrieval
    /// is noted and the thoughts are written without passages.
    pub(super) async fn probe(&self, question: &str, id: &str) -> Result<Outcome> {
        let passages = match self.ctx.retrieve(Some(id), question, self.ctx.k()).await {
            Ok(p) => p,
            Err(ReasonError::Core(e)) => {
                self.ctx.rec().note(format!("node {id}: retrieval failed ({e}); probing without passages"));
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        let raw_scores: Vec<f32> = passages.iter().map(|p| p.score).collect();
        let mut scored: Vec<ScoredPassage> = passages
            .iter()
            .cloned()
            .zip(initial_scores(&raw_scores))
            .map(|(passage, sigma)| ScoredPassage { passage, sigma })
            .collect();
        self.log_initial(id, &scored);
        let ps = passages.clone();
        self.ctx.rec().update_node(id, |n| n.passages = ps);

        let demos = self.thought_demos(question).await?;
        let prompt = self.ctx.render(
            "hgot_probe",
            &[("demonstrations", &demos), ("passages", &self.ctx.format_passages(&passages)), ("question", question)],
        )?;
        // A unanimous Probe stops its node when `stop_confidence` is set: its judgements decide nothing.
        let skip = self.hgot.opts.stop_confidence.is_some() && !self.hgot.opts.judge_unanimous;
        let thought = self.deliberate("probe", id, question, prompt, &passages, skip).await?;
        self.update_sigma(id, "probe", &mut scored, &thought.nu_bar, thought.vote.confidence);
        let record = thought.to_record(&passages);
        let answer = thought.vote.answer.clone();
        let a = answer.clone();
        self.ctx.rec().update_node(id, |n| {
            update_detail(n, |d| d.probe = Some(record));
            n.answer = Some(a);
        });
        Ok(Outcome {
            answer,
            confidence: thought.vote.confidence,
            passages: scored,
            rationale: thought.best_rationale(),
        })
    }
}

/// Every sample gave an answer, and the same one (compared as the vote compares them).
fn unanimous(thoughts: &[(String, Thought)]) -> bool {
    let first = match thoughts.first() {
        Some((_, t)) => hopwise_core::text::normalize_answer(&t.answer),
        None => return false,
    };
    !first.is_empty() && thoughts.iter().all(|(_, t)| hopwise_core::text::normalize_answer(&t.answer) == first)
}
