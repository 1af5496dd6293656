//! Least-to-Most: first reduce the question to a list of simpler sub-questions, then solve them in
//! order, each with the answers so far in view, and finally answer the question from that dialog.
use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::Decision;
use serde::Deserialize;

use super::{final_answer, parse_numbered_list, record_sink, step_node};
use crate::ctx::Ctx;
use crate::details::baseline::BaselineNode;
use crate::error::Result;
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeastToMostOptions {
    /// Sub-questions kept from the reduction step.
    pub max_subquestions: usize,
}

impl Default for LeastToMostOptions {
    fn default() -> Self {
        Self { max_subquestions: 5 }
    }
}

pub struct LeastToMost {
    opts: LeastToMostOptions,
}

impl LeastToMost {
    pub fn new(opts: LeastToMostOptions) -> Self {
        Self { opts }
    }
}

#[async_trait]
impl Strategy for LeastToMost {
    fn name(&self) -> &str {
        "least-to-most"
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let reply = ctx.complete("reduce", None, "ltm_reduce", &[("question", question)]).await?;
        let subquestions = parse_numbered_list(&reply, self.opts.max_subquestions.max(1));
        if subquestions.is_empty() {
            ctx.rec().note("least-to-most: no sub-questions could be read; answering the question directly");
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (i, sub) in subquestions.iter().enumerate() {
            let id = (i + 1).to_string();
            let parents: Vec<String> = if i > 0 { vec![i.to_string()] } else { Vec::new() };
            if let Some(parent) = parents.first() {
                ctx.rec().add_edge(parent, &id);
            }
            ctx.rec().upsert_node(step_node(&id, sub, parents));
            let dialog = ctx.format_dialog(&pairs);
            let reply =
                ctx.complete("solve", Some(&id), "ltm_solve", &[("dialog", &dialog), ("question", sub)]).await?;
            let answer = final_answer(&reply);
            ctx.rec().update_node(&id, |n| {
                n.answer = Some(answer.clone());
                n.decision = Decision::Known;
            });
            pairs.push((sub.clone(), answer));
        }
        let dialog = ctx.format_dialog(&pairs);
        let reply =
            ctx.complete("final", Some(SINK), "ltm_final", &[("dialog", &dialog), ("question", question)]).await?;
        let text = final_answer(&reply);
        let parents = if pairs.is_empty() { Vec::new() } else { vec![pairs.len().to_string()] };
        let decision = if pairs.is_empty() { Decision::Known } else { Decision::Decomposed };
        record_sink(
            ctx,
            question,
            &text,
            decision,
            parents,
            Vec::new(),
            Some(BaselineNode { subquestions: Some(subquestions), ..Default::default() }),
        );
        Ok(Answer { text, rationale: Some(dialog) })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::ctx;
    use crate::strategy::run;

    #[tokio::test]
    async fn solves_sub_questions_in_order_with_earlier_answers_in_view() {
        let llm = ScriptedLlm::new()
            .on("simpler questions", "1. Who wrote Dune?\n2. When was that author born?")
            .on_fn("Answers so far", |prompt, _| {
                if prompt.contains("Question: Who wrote Dune?") {
                    "Answer: Frank Herbert".into()
                } else if prompt.contains("A: Frank Herbert") {
                    "He was born in 1920.\nAnswer: 1920".into()
                } else {
                    "Answer: unknown".into()
                }
            })
            .on("Now answer the original question", "Answer: 1920");
        let c = ctx(llm.clone(), "least-to-most", None);
        let trace = run(&LeastToMost::new(LeastToMostOptions::default()), &c, "When was the author of Dune born?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "1920");
        assert_eq!(trace.stats.llm_calls, 4, "reduce + 2 solves + final");
        assert_eq!(trace.node("2").and_then(|n| n.answer.clone()).as_deref(), Some("1920"));
        assert_eq!(trace.node("Q").map(|n| n.parents.clone()), Some(vec!["2".to_string()]));
        assert_eq!(trace.stats.retrieval_rounds, 0);
    }
}
