//! Query rewriting calls the model on the question's behalf: those calls go through the question's
//! meter, so they are in its trace and stats and stop at its `max_llm_calls`.

use std::sync::Arc;

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::{Prompts, Recorder, Retriever, Trace};
use hopwise_index::{RewriteMethod, RewriteRetriever};
use hopwise_reason::strategy::{build, run};
use hopwise_reason::{Budget, Ctx, StrategyOptions};

fn model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on("Write a short passage", "Dune is a novel by Frank Herbert.")
        .on("Passages:", "Answer: Frank Herbert")
}

/// Retrieve-then-read over a HyDE rewriter, with `max_llm_calls` as given.
async fn ask(max_llm_calls: u64) -> Trace {
    let base: Arc<dyn Retriever> =
        Arc::new(StaticRetriever::from_pairs(&[("Dune", "Dune is a novel by Frank Herbert.")]));
    let prompts = Arc::new(Prompts::default());
    let ctx = Ctx::new(Arc::new(model()), prompts.clone(), Recorder::new("Who wrote Dune?", "rtr"))
        .with_budget(Budget { max_llm_calls, ..Budget::default() });
    let rewriter = RewriteRetriever::new(base, ctx.model(), prompts, RewriteMethod::Hyde);
    let ctx = ctx.with_retriever(Some(Arc::new(rewriter)));
    let rtr = build("rtr", &StrategyOptions::default()).expect("rtr");
    run(rtr.as_ref(), &ctx, "Who wrote Dune?").await.expect("runs")
}

fn purposes(t: &Trace) -> Vec<String> {
    t.call_purposes()
}

#[tokio::test]
async fn rewrite_calls_are_counted_in_the_question_trace() {
    let trace = ask(10).await;
    assert_eq!(trace.answer, "Frank Herbert");
    assert_eq!(purposes(&trace), ["query_rewrite", "read"]);
    assert_eq!(trace.stats.llm_calls, 2, "the rewrite call and the reading call");
    assert_eq!(trace.retriever.as_deref(), Some("hyde+static"));
}

#[tokio::test]
async fn rewrite_calls_are_stopped_by_max_llm_calls() {
    let trace = ask(1).await;
    assert_eq!(purposes(&trace), ["query_rewrite"], "the reading call was refused");
    assert_eq!(trace.stats.llm_calls, 1);
    assert!(trace.best_effort, "a spent budget degrades to a best-effort answer");
    assert!(trace.notes.iter().any(|n| n.contains("max_llm_calls = 1")), "{:?}", trace.notes);

    let spent = ask(0).await;
    assert!(purposes(&spent).is_empty(), "with no call allowed the rewriter reaches no model");
    assert_eq!(spent.stats.llm_calls, 0);
    assert!(spent.best_effort);
}
