//! Direct prompting: one call, the model answers from its own knowledge.
use async_trait::async_trait;
use hopwise_core::Decision;
use serde::Deserialize;

use super::{final_answer, record_sink};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DirectOptions {}

pub struct Direct;

impl Direct {
    pub fn new(_opts: DirectOptions) -> Self {
        Self
    }
}

#[async_trait]
impl Strategy for Direct {
    fn name(&self) -> &str {
        "direct"
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let reply =
            ctx.complete("answer", Some(hopwise_core::trace::SINK), "direct", &[("question", question)]).await?;
        let text = final_answer(&reply);
        record_sink(ctx, question, &text, Decision::Known, Vec::new(), Vec::new(), None);
        Ok(Answer { text, rationale: None })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::ctx;
    use crate::strategy::run;

    #[tokio::test]
    async fn answers_in_one_call() {
        let llm = ScriptedLlm::new().on("Question: Who wrote Dune?", "Answer: Frank Herbert.");
        let c = ctx(llm.clone(), "direct", None);
        let trace = run(&Direct, &c, "Who wrote Dune?").await.expect("run");
        assert_eq!(trace.answer, "Frank Herbert");
        assert_eq!(trace.stats.llm_calls, 1);
        assert_eq!(trace.stats.retrieval_rounds, 0);
        let sink = trace.node("Q").expect("sink node");
        assert_eq!(sink.decision, Decision::Known);
        assert_eq!(sink.answer.as_deref(), Some("Frank Herbert"));
        assert_eq!(llm.calls().len(), 1);
    }
}
