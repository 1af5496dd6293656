//! Chain-of-thought, and chain-of-thought with self-consistency (CoT-SC: `samples` reasoning paths
//! drawn in one request with n > 1, majority vote over the normalised final answers).
use std::collections::HashMap;

use async_trait::async_trait;
use hopwise_core::text::normalize_answer;
use hopwise_core::trace::SINK;
use hopwise_core::{Decision, GenParams};
use serde::Deserialize;

use super::{final_answer, record_sink};
use crate::ctx::Ctx;
use crate::details::baseline::BaselineNode;
use crate::error::{ReasonError, Result};
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CotOptions {}

pub struct Cot;

impl Cot {
    pub fn new(_opts: CotOptions) -> Self {
        Self
    }
}

#[async_trait]
impl Strategy for Cot {
    fn name(&self) -> &str {
        "cot"
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let reply = ctx.complete("reason", Some(SINK), "cot", &[("question", question)]).await?;
        let text = final_answer(&reply);
        record_sink(
            ctx,
            question,
            &text,
            Decision::Known,
            Vec::new(),
            Vec::new(),
            Some(BaselineNode { reasoning: Some(reply.clone()), ..Default::default() }),
        );
        Ok(Answer { text, rationale: Some(reply) })
    }
}

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CotScOptions {
    /// Reasoning paths sampled (the request's `n`).
    pub samples: u32,
    pub temperature: f32,
}

impl Default for CotScOptions {
    fn default() -> Self {
        Self { samples: 5, temperature: 0.7 }
    }
}

pub struct CotSc {
    opts: CotScOptions,
}

impl CotSc {
    pub fn new(opts: CotScOptions) -> Result<Self> {
        if opts.samples == 0 || opts.samples > 64 {
            return Err(ReasonError::InvalidOption(format!(
                "strategy `cot-sc`: samples must be 1..=64, got {}",
                opts.samples
            )));
        }
        Ok(Self { opts })
    }
}

/// The majority answer among `answers`, compared after SQuAD normalisation; empty answers do not vote.
/// Ties go to the answer seen first. Returns the first original spelling of the winner and its votes.
pub fn majority_vote(answers: &[String]) -> Option<(String, usize)> {
    let mut counts: HashMap<String, (usize, usize)> = HashMap::new(); // normalised -> (votes, first index)
    for (i, a) in answers.iter().enumerate() {
        let key = normalize_answer(a);
        if key.is_empty() {
            continue;
        }
        counts.entry(key).or_insert((0, i)).0 += 1;
    }
    counts
        .into_values()
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(votes, first)| (answers[first].clone(), votes))
}

#[async_trait]
impl Strategy for CotSc {
    fn name(&self) -> &str {
        "cot-sc"
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let prompt = ctx.render("cot", &[("question", question)])?;
        let params =
            GenParams { temperature: self.opts.temperature, top_p: 1.0, n: self.opts.samples, ..ctx.params().clone() };
        let resp = ctx.chat("reason_samples", Some(SINK), prompt, params).await?;
        let answers: Vec<String> = resp.choices.iter().map(|c| final_answer(&c.text)).collect();
        let (text, votes) = majority_vote(&answers).unwrap_or_default();
        let rationale = resp
            .choices
            .iter()
            .zip(&answers)
            .find(|(_, a)| !text.is_empty() && normalize_answer(a) == normalize_answer(&text))
            .map(|(c, _)| c.text.clone());
        let detail = BaselineNode {
            samples: Some(answers),
            votes: Some(votes),
            requested: Some(self.opts.samples),
            ..Default::default()
        };
        record_sink(ctx, question, &text, Decision::Known, Vec::new(), Vec::new(), Some(detail));
        Ok(Answer { text, rationale })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::ctx;
    use crate::strategy::run;

    #[tokio::test]
    async fn cot_keeps_reasoning_and_parses_answer() {
        let llm = ScriptedLlm::new().on("step by step", "Dune was written by Frank Herbert.\nAnswer: Frank Herbert");
        let c = ctx(llm, "cot", None);
        let trace = run(&Cot, &c, "Who wrote Dune?").await.expect("run");
        assert_eq!(trace.answer, "Frank Herbert");
        assert_eq!(trace.stats.llm_calls, 1);
        let sink = trace.node("Q").expect("sink");
        let detail: BaselineNode = crate::details::read(sink).expect("CoT's detail");
        assert!(detail.reasoning.unwrap_or_default().contains("written by"));
    }

    #[tokio::test]
    async fn cot_sc_votes_over_one_n_sample_request() {
        // Samples 0, 2, 3 say "the Beatles" (spelled differently), 1 and 4 say Queen.
        let llm = ScriptedLlm::new().on_fn("step by step", |_, i| match i {
            0 => "... Answer: The Beatles".into(),
            2 => "... Answer: the beatles.".into(),
            3 => "... Answer: Beatles".into(),
            _ => "... Answer: Queen".into(),
        });
        let c = ctx(llm.clone(), "cot-sc", None);
        let s = CotSc::new(CotScOptions::default()).expect("options");
        let trace = run(&s, &c, "Which band?").await.expect("run");
        assert_eq!(trace.answer, "The Beatles");
        assert_eq!(llm.calls().len(), 1, "one request carries all samples");
        assert_eq!(trace.stats.llm_calls, 1);
        let sink = trace.node("Q").expect("sink");
        let detail: BaselineNode = crate::details::read(sink).expect("CoT-SC's detail");
        assert_eq!(detail.votes, Some(3));
        assert_eq!(detail.samples.map(|s| s.len()), Some(5));
    }

    #[test]
    fn vote_ties_go_to_first_seen_and_empty_does_not_vote() {
        let v = |xs: &[&str]| majority_vote(&xs.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(v(&["b", "a", "a", "b"]), Some(("b".to_string(), 2)));
        assert_eq!(v(&["", "", "x"]), Some(("x".to_string(), 1)));
        assert_eq!(v(&["", "."]), None);
        assert!(CotSc::new(CotScOptions { samples: 0, temperature: 0.7 }).is_err());
    }
}
