//! Iter-RetGen (Shao et al., 2023, "Enhancing Retrieval-Augmented Large Language Models with
//! Iterative Retrieval-Generation Synergy").
//!
//! `iterations` rounds. Round 1 retrieves `k` passages with the question; round `t > 1` retrieves
//! with the question followed by round `t - 1`'s whole generation, so what the model wrote (right or
//! not) pulls in the passages the question alone does not reach. Each round writes a reasoned answer
//! from its own passages; the last round's answer is the answer.
//!
//! Departures from the paper: zero-shot chain of thought (the paper prompts with demonstrations);
//! the default of 3 rounds is the upper end of the paper's best range (2–3).

use async_trait::async_trait;
use hopwise_core::Decision;
use serde::Deserialize;

use super::chain_node;
use crate::chain::record_sink;
use crate::ctx::Ctx;
use crate::details::baseline::BaselineNode;
use crate::error::{ReasonError, Result};
use crate::protocol::answer::final_answer;
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IterRetGenOptions {
    /// Retrieval-generation rounds.
    pub iterations: u32,
    /// Passages per round; the context's `k` when not set.
    pub k: Option<usize>,
}

impl Default for IterRetGenOptions {
    fn default() -> Self {
        Self { iterations: 3, k: None }
    }
}

pub struct IterRetGen {
    opts: IterRetGenOptions,
}

impl IterRetGen {
    pub fn new(opts: IterRetGenOptions) -> Result<Self> {
        if opts.iterations == 0 {
            return Err(ReasonError::InvalidOption("strategy `iter-retgen`: iterations must be at least 1".into()));
        }
        Ok(Self { opts })
    }
}

#[async_trait]
impl Strategy for IterRetGen {
    fn name(&self) -> &str {
        "iter-retgen"
    }

    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let k = self.opts.k.unwrap_or(ctx.k()).max(1);
        let mut generation = String::new();
        let mut answer = String::new();
        let mut passages = Vec::new();
        let rounds = self.opts.iterations as usize;
        for round in 1..=rounds {
            let id = round.to_string();
            let query = if generation.is_empty() { question.to_string() } else { format!("{question} {generation}") };
            if round > 1 {
                ctx.rec().add_edge(&(round - 1).to_string(), &id);
            }
            ctx.rec().upsert_node(chain_node(round, &query));
            passages = ctx.retrieve(Some(&id), &query, k).await?;
            let reply = ctx
                .complete(
                    "generate",
                    Some(&id),
                    "iter_retgen",
                    &[("passages", &ctx.format_passages(&passages)), ("question", question)],
                )
                .await?;
            answer = final_answer(&reply);
            // The next query carries the generation as one line.
            generation = reply.split_whitespace().collect::<Vec<_>>().join(" ");
            let found = passages.clone();
            ctx.rec().update_node(&id, |n| {
                n.answer = Some(answer.clone());
                n.decision = Decision::Retrieved;
                n.passages = found;
            });
        }
        let detail = BaselineNode { reasoning: Some(generation.clone()), ..Default::default() };
        record_sink(ctx, question, &answer, Decision::Retrieved, vec![rounds.to_string()], passages, Some(detail));
        Ok(Answer { text: answer, rationale: Some(generation) })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::{ctx, passage, searched_queries};
    use crate::strategy::run;

    #[tokio::test]
    async fn each_round_searches_with_the_question_and_the_previous_generation() {
        // The tiny retriever returns matches in list order: the Tacoma passage is reached only once
        // the query names Herbert.
        let docs = vec![
            passage("p2", "Frank Herbert", "Herbert grew up in Tacoma."),
            passage("p1", "Dune", "Dune is a novel written by Frank Herbert."),
        ];
        let llm = ScriptedLlm::new().on_fn("step by step", |prompt, _| {
            if prompt.contains("grew up in Tacoma") {
                "Dune is by Frank Herbert, who grew up in Tacoma.\nAnswer: Tacoma".into()
            } else {
                "Herbert wrote Dune\nAnswer: unknown".into()
            }
        });
        let c = ctx(llm.clone(), "iter-retgen", Some(docs));
        let opts = IterRetGenOptions { iterations: 2, k: Some(1) };
        let trace = run(&IterRetGen::new(opts).expect("options"), &c, "Where did the author of Dune grow up?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "Tacoma");
        assert_eq!(trace.stats.retrieval_rounds, 2);
        assert_eq!(trace.stats.llm_calls, 2);
        let queries = searched_queries(&trace);
        assert_eq!(queries[0], "Where did the author of Dune grow up?");
        assert_eq!(queries[1], "Where did the author of Dune grow up? Herbert wrote Dune Answer: unknown");
        assert_eq!(trace.node("1").and_then(|n| n.answer.clone()).as_deref(), Some("unknown"));
        assert_eq!(trace.node("Q").map(|n| n.parents.clone()), Some(vec!["2".to_string()]));
    }

    #[test]
    fn zero_iterations_are_refused() {
        assert!(IterRetGen::new(IterRetGenOptions { iterations: 0, k: None }).is_err());
    }
}
