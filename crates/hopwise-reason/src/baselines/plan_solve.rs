//! Plan-and-Solve: the model first writes a short plan, then carries it out step by step and ends with
//! the answer, in one call. The retrieval variant retrieves once for the question and plans over the
//! passages.
use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::Decision;
use serde::Deserialize;

use super::{final_answer, parse_numbered_list, record_sink};
use crate::ctx::Ctx;
use crate::details::baseline::BaselineNode;
use crate::error::Result;
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlanSolveOptions {
    /// Passages to read (retrieval variant); the context's `k` when not set.
    pub k: Option<usize>,
}

pub struct PlanSolve {
    opts: PlanSolveOptions,
    with_retrieval: bool,
}

impl PlanSolve {
    pub fn new(opts: PlanSolveOptions, with_retrieval: bool) -> Self {
        Self { opts, with_retrieval }
    }
}

#[async_trait]
impl Strategy for PlanSolve {
    fn name(&self) -> &str {
        if self.with_retrieval {
            "plan-solve-rtr"
        } else {
            "plan-solve"
        }
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let (reply, passages) = if self.with_retrieval {
            let k = self.opts.k.unwrap_or(ctx.k()).max(1);
            let passages = ctx.retrieve(Some(SINK), question, k).await?;
            let vars = [("passages", ctx.format_passages(&passages)), ("question", question.to_string())];
            let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
            (ctx.complete("plan_and_solve", Some(SINK), "plan_solve_rtr", &vars).await?, passages)
        } else {
            (ctx.complete("plan_and_solve", Some(SINK), "plan_solve", &[("question", question)]).await?, Vec::new())
        };
        let text = final_answer(&reply);
        let plan = parse_numbered_list(&reply, 12);
        let decision = if self.with_retrieval { Decision::Retrieved } else { Decision::Known };
        record_sink(
            ctx,
            question,
            &text,
            decision,
            Vec::new(),
            passages,
            Some(BaselineNode { plan: Some(plan), reasoning: Some(reply.clone()), ..Default::default() }),
        );
        Ok(Answer { text, rationale: Some(reply) })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::{ctx, passage};
    use crate::strategy::run;

    const REPLY: &str = "Plan:\n1. Find the author of Dune.\n2. Find the birth year.\nSolution: Frank Herbert, born 1920.\nAnswer: 1920";

    #[tokio::test]
    async fn plans_then_answers() {
        let llm = ScriptedLlm::new().on("devise a short plan", REPLY);
        let c = ctx(llm, "plan-solve", None);
        let trace = run(&PlanSolve::new(PlanSolveOptions::default(), false), &c, "When was the author of Dune born?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "1920");
        assert_eq!(trace.stats.llm_calls, 1);
        let sink = trace.node("Q").expect("sink");
        let detail: BaselineNode = crate::details::read(sink).expect("the plan's detail");
        assert_eq!(detail.plan.map(|p| p.len()), Some(2));
    }

    #[tokio::test]
    async fn retrieval_variant_reads_passages() {
        let llm = ScriptedLlm::new().on_fn("devise a short plan", |prompt, _| {
            if prompt.contains("born in 1920") {
                REPLY.into()
            } else {
                "Answer: unknown".into()
            }
        });
        let docs = vec![passage("p", "Frank Herbert", "Frank Herbert, author of Dune, was born in 1920.")];
        let c = ctx(llm, "plan-solve-rtr", Some(docs));
        let trace = run(&PlanSolve::new(PlanSolveOptions::default(), true), &c, "When was the author of Dune born?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "1920");
        assert_eq!(trace.stats.retrieval_rounds, 1);
        assert_eq!(trace.node("Q").map(|n| n.passages.len()), Some(1));
    }
}
