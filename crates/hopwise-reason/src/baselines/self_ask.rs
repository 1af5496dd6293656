//! Self-Ask: the model asks itself follow-up questions one at a time and answers them, then states
//! the final answer. With retrieval, each follow-up is answered from passages retrieved for it;
//! without, the model answers it from its own knowledge. A step limit bounds the loop.
use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::{Decision, GenParams};
use serde::Deserialize;

use super::{final_answer, record_sink, step_node};
use crate::ctx::Ctx;
use crate::details::baseline::BaselineNode;
use crate::error::Result;
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelfAskOptions {
    /// Follow-up questions allowed before the answer is forced.
    pub max_steps: u32,
    /// Passages per follow-up; the context's `k` when not set.
    pub k: Option<usize>,
    /// Ask for a first follow-up question outright instead of letting the model choose between a
    /// follow-up and a final answer. Self-Ask's few-shot demonstrations always open with a follow-up;
    /// zero-shot, small models otherwise answer multi-hop questions in one guess.
    pub start_with_follow_up: bool,
}

impl Default for SelfAskOptions {
    fn default() -> Self {
        Self { max_steps: 5, k: None, start_with_follow_up: true }
    }
}

pub struct SelfAsk {
    opts: SelfAskOptions,
    with_retrieval: bool,
}

impl SelfAsk {
    pub fn new(opts: SelfAskOptions, with_retrieval: bool) -> Self {
        Self { opts, with_retrieval }
    }
}

/// What one self-ask step produced.
#[derive(Debug, Clone, PartialEq)]
pub enum SelfAskStep {
    FollowUp(String),
    Final(String),
    /// Neither a follow-up nor a final answer could be read.
    Unclear,
}

/// Reads one self-ask continuation: the first "Follow up: …" line, or a "final answer" statement.
/// A final answer wins over a follow-up that comes after it.
pub fn parse_self_ask_step(reply: &str) -> SelfAskStep {
    for (i, line) in reply.lines().enumerate() {
        let plain = line.trim().replace("**", "");
        let lower = plain.to_ascii_lowercase(); // keeps byte offsets valid in `plain`
        if lower.contains("final answer") {
            let rest: Vec<&str> = reply.lines().skip(i).collect();
            let answer = final_answer(&rest.join("\n"));
            if !answer.is_empty() {
                return SelfAskStep::Final(answer);
            }
        }
        for prefix in ["follow up:", "follow-up:", "followup:"] {
            if lower.starts_with(prefix) {
                let q = plain[prefix.len()..].trim();
                if !q.is_empty() {
                    return SelfAskStep::FollowUp(q.to_string());
                }
            }
        }
    }
    SelfAskStep::Unclear
}

fn scratchpad(ctx: &Ctx, pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return ctx.nothing_yet();
    }
    pairs.iter().map(|(q, a)| format!("Follow up: {q}\nIntermediate answer: {a}")).collect::<Vec<_>>().join("\n")
}

#[async_trait]
impl Strategy for SelfAsk {
    fn name(&self) -> &str {
        if self.with_retrieval {
            "self-ask"
        } else {
            "self-ask-noir"
        }
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut answered = None;
        let step_params = GenParams { stop: vec!["Intermediate answer:".to_string()], ..ctx.params().clone() };
        for step in 1..=self.opts.max_steps {
            let reply = if step == 1 && self.opts.start_with_follow_up {
                ctx.complete_with("follow_up", None, "self_ask_first", &[("question", question)], step_params.clone())
                    .await?
            } else {
                let pad = scratchpad(ctx, &pairs);
                let vars = [("question", question), ("scratchpad", pad.as_str())];
                ctx.complete_with("follow_up", None, "self_ask", &vars, step_params.clone()).await?
            };
            let follow_up = match parse_self_ask_step(&reply) {
                SelfAskStep::Final(a) => {
                    answered = Some(a);
                    break;
                }
                SelfAskStep::FollowUp(q) if !pairs.iter().any(|(p, _)| p.eq_ignore_ascii_case(&q)) => q,
                SelfAskStep::FollowUp(_) => {
                    ctx.rec().note("self-ask repeated a follow-up question; forcing the final answer");
                    break;
                }
                SelfAskStep::Unclear => {
                    ctx.rec()
                        .note("self-ask step gave neither a follow-up nor a final answer; forcing the final answer");
                    break;
                }
            };
            let id = step.to_string();
            let parents: Vec<String> = if step > 1 { vec![(step - 1).to_string()] } else { Vec::new() };
            if let Some(parent) = parents.first() {
                ctx.rec().add_edge(parent, &id);
            }
            ctx.rec().upsert_node(step_node(&id, &follow_up, parents));
            let (answer, decision, passages) = if self.with_retrieval {
                let k = self.opts.k.unwrap_or(ctx.k()).max(1);
                let passages = ctx.retrieve(Some(&id), &follow_up, k).await?;
                let reply = ctx
                    .complete(
                        "answer_follow_up",
                        Some(&id),
                        "self_ask_read",
                        &[("passages", &ctx.format_passages(&passages)), ("question", &follow_up)],
                    )
                    .await?;
                (final_answer(&reply), Decision::Retrieved, passages)
            } else {
                let reply =
                    ctx.complete("answer_follow_up", Some(&id), "self_ask_known", &[("question", &follow_up)]).await?;
                (final_answer(&reply), Decision::Known, Vec::new())
            };
            ctx.rec().update_node(&id, |n| {
                n.answer = Some(answer.clone());
                n.decision = decision;
                n.passages = passages;
            });
            pairs.push((follow_up, answer));
        }
        let forced = answered.is_none();
        let text = match answered {
            Some(a) => a,
            None => {
                let pad = scratchpad(ctx, &pairs);
                let reply = ctx
                    .complete("final", Some(SINK), "self_ask_final", &[("question", question), ("scratchpad", &pad)])
                    .await?;
                final_answer(&reply)
            }
        };
        let parents = if pairs.is_empty() { Vec::new() } else { vec![pairs.len().to_string()] };
        let decision = if pairs.is_empty() { Decision::Known } else { Decision::Decomposed };
        record_sink(
            ctx,
            question,
            &text,
            decision,
            parents,
            Vec::new(),
            Some(BaselineNode { forced_final: Some(forced), ..Default::default() }),
        );
        Ok(Answer { text, rationale: Some(scratchpad(ctx, &pairs)) })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::{ctx, passage};
    use crate::strategy::run;

    fn two_hop_model() -> ScriptedLlm {
        ScriptedLlm::new()
            .on("first follow-up question", "Follow up: Who wrote Dune?")
            .on_fn("Follow-up questions so far", |prompt, _| {
                if prompt.contains("Intermediate answer: Frank Herbert") && prompt.contains("Intermediate answer: 1920")
                {
                    "So the final answer is: 1920".into()
                } else if prompt.contains("Intermediate answer: Frank Herbert") {
                    "Follow up: When was Frank Herbert born?".into()
                } else {
                    "Are follow up questions needed here: Yes.\nFollow up: Who wrote Dune?".into()
                }
            })
            .on_fn("Passages:", |prompt, _| {
                if prompt.contains("Question: Who wrote Dune?") {
                    "Answer: Frank Herbert".into()
                } else {
                    "Answer: 1920".into()
                }
            })
            .on("Question: Who wrote Dune?", "Answer: Frank Herbert")
            .on("Question: When was Frank Herbert born?", "Answer: 1920")
    }

    #[tokio::test]
    async fn with_retrieval_each_follow_up_is_read_from_passages() {
        let docs = vec![
            passage("p1", "Dune", "Dune is a novel written by Frank Herbert."),
            passage("p2", "Frank Herbert", "Frank Herbert was born in 1920."),
        ];
        let llm = two_hop_model();
        let c = ctx(llm.clone(), "self-ask", Some(docs));
        let trace = run(&SelfAsk::new(SelfAskOptions::default(), true), &c, "When was the author of Dune born?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "1920");
        assert_eq!(trace.stats.retrieval_rounds, 2);
        // 3 follow-up/final steps + 2 readings.
        assert_eq!(trace.stats.llm_calls, 5);
        assert_eq!(llm.calls().len(), 5);
        let n1 = trace.node("1").expect("node 1");
        assert_eq!(n1.question, "Who wrote Dune?");
        assert_eq!(n1.decision, Decision::Retrieved);
        assert_eq!(n1.answer.as_deref(), Some("Frank Herbert"));
        assert!(!n1.passages.is_empty());
        assert_eq!(trace.node("2").map(|n| n.parents.clone()), Some(vec!["1".to_string()]));
        let sink = trace.node("Q").expect("sink");
        assert_eq!(sink.decision, Decision::Decomposed);
        assert_eq!(trace.edges.len(), 2, "1 -> 2 -> Q");
    }

    #[tokio::test]
    async fn without_retrieval_answers_from_knowledge() {
        let llm = two_hop_model();
        let c = ctx(llm, "self-ask-noir", None);
        let trace = run(&SelfAsk::new(SelfAskOptions::default(), false), &c, "When was the author of Dune born?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "1920");
        assert_eq!(trace.stats.retrieval_rounds, 0);
        assert_eq!(trace.node("2").map(|n| n.decision), Some(Decision::Known));
    }

    #[tokio::test]
    async fn step_limit_forces_a_final_answer() {
        let llm = ScriptedLlm::new()
            .on("first follow-up question", "Follow up: Who is it?")
            .on_fn("Follow-up questions so far", |_, _| "Follow up: Who is it?".into())
            .on("Give the final answer", "Answer: nobody")
            .on("Question: Who is it?", "Answer: someone");
        let c = ctx(llm, "self-ask-noir", None);
        let opts = SelfAskOptions { max_steps: 3, ..Default::default() };
        let trace = run(&SelfAsk::new(opts, false), &c, "Who?").await.expect("run");
        // Step 1 asks, step 2 repeats the same follow-up, which forces the final answer.
        assert_eq!(trace.answer, "nobody");
        assert_eq!(trace.nodes.len(), 2, "one follow-up node and the sink");
        let detail: Option<BaselineNode> = trace.node("Q").and_then(crate::details::read);
        assert_eq!(detail.and_then(|d| d.forced_final), Some(true));
    }

    #[tokio::test]
    async fn without_the_forced_first_follow_up_the_model_may_answer_at_once() {
        let llm = ScriptedLlm::new()
            .on("first follow-up question", "Follow up: Who wrote Dune?")
            .on("Follow-up questions so far", "So the final answer is: 1920");
        let c = ctx(llm.clone(), "self-ask-noir", None);
        let opts = SelfAskOptions { start_with_follow_up: false, ..Default::default() };
        let trace = run(&SelfAsk::new(opts, false), &c, "When was the author of Dune born?").await.expect("run");
        assert_eq!(trace.answer, "1920");
        assert_eq!(trace.stats.llm_calls, 1);
        assert_eq!(trace.node("Q").map(|n| n.decision), Some(Decision::Known));
    }

    #[test]
    fn step_parsing() {
        assert_eq!(parse_self_ask_step("Follow up: Who is X?"), SelfAskStep::FollowUp("Who is X?".into()));
        assert_eq!(
            parse_self_ask_step("Are follow up questions needed here: No.\nSo the final answer is: Paris."),
            SelfAskStep::Final("Paris".into())
        );
        assert_eq!(parse_self_ask_step("**Follow-up:** Where?"), SelfAskStep::FollowUp("Where?".into()));
        assert_eq!(parse_self_ask_step("I do not know"), SelfAskStep::Unclear);
        assert_eq!(parse_self_ask_step("\u{212A}ollow up: x"), SelfAskStep::Unclear, "no panic on odd case mappings");
    }
}
