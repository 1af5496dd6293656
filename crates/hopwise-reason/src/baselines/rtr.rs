//! Direct Retrieval / Retrieve-then-Read: one retrieval round with the question as the query, then
//! one answer from the top-k passages.
use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::Decision;
use serde::Deserialize;

use super::{final_answer, record_sink};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RtrOptions {
    /// Passages to read; the context's `k` when not set.
    pub k: Option<usize>,
}

pub struct Rtr {
    opts: RtrOptions,
}

impl Rtr {
    pub fn new(opts: RtrOptions) -> Self {
        Self { opts }
    }
}

#[async_trait]
impl Strategy for Rtr {
    fn name(&self) -> &str {
        "rtr"
    }
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let k = self.opts.k.unwrap_or(ctx.k()).max(1);
        let passages = ctx.retrieve(Some(SINK), question, k).await?;
        let reply = ctx
            .complete(
                "read",
                Some(SINK),
                "rtr",
                &[("passages", &ctx.format_passages(&passages)), ("question", question)],
            )
            .await?;
        let text = final_answer(&reply);
        record_sink(ctx, question, &text, Decision::Retrieved, Vec::new(), passages, None);
        Ok(Answer { text, rationale: None })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::{ctx, passage};
    use crate::strategy::run;

    #[tokio::test]
    async fn reads_retrieved_passages() {
        let llm = ScriptedLlm::new().on_fn("Passages:", |prompt, _| {
            if prompt.contains("[1] Dune: Dune is a novel by Frank Herbert") {
                "Answer: Frank Herbert".into()
            } else {
                "Answer: unknown".into()
            }
        });
        let docs =
            vec![passage("p1", "Dune", "Dune is a novel by Frank Herbert."), passage("p2", "Other", "Nothing here.")];
        let c = ctx(llm, "rtr", Some(docs));
        let trace = run(&Rtr::new(RtrOptions::default()), &c, "Who wrote the novel Dune?").await.expect("run");
        assert_eq!(trace.answer, "Frank Herbert");
        assert_eq!(trace.stats.retrieval_rounds, 1);
        assert_eq!(trace.stats.llm_calls, 1);
        let sink = trace.node("Q").expect("sink");
        assert_eq!(sink.decision, Decision::Retrieved);
        assert_eq!(sink.passages.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), vec!["p1"]);
    }

    #[tokio::test]
    async fn refuses_to_run_without_retriever() {
        let c = ctx(ScriptedLlm::new(), "rtr", None);
        let err = run(&Rtr::new(RtrOptions::default()), &c, "q?").await;
        assert!(matches!(err, Err(crate::ReasonError::NeedsRetriever(_))));
    }
}
