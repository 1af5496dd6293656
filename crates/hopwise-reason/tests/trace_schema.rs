//! Every strategy in the table, run on a scripted model over a small corpus, writes a trace that
//! validates against the published trace schema (docs/trace.schema.json). The same check runs inside
//! `Recorder::finish` for every other test of this crate (hopwise-core's `trace-check` feature, on in
//! this crate's dev-dependencies); this test makes sure no strategy is left out.

use std::sync::Arc;

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::trace_schema::check_trace;
use hopwise_core::{Prompts, Recorder, Retriever};
use hopwise_reason::ctx::Ctx;
use hopwise_reason::strategy::{build, run, StrategyOptions, STRATEGIES};

const QUESTION: &str = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";

/// Replies that move each strategy along: ToQD's bridge question (node 1 known, node 2 retrieved), a
/// sentence loop that concludes, HGOT's plan of two steps, and a labelled answer for everything else.
fn model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on("Break the question below", "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?")
        .on("Review the candidates", "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?")
        .on("Describe which answers help", "1 -> 2\n2 -> Q")
        .on("Rewrite the question below", "Who was the drummer of Rush?")
        .on_fn("from your own knowledge", |p, _| if p.contains("Counterparts") { "Rush".into() } else { "NO!".into() })
        .on("Using the passages, answer", "Neil Peart")
        .on("Reply in exactly this form", "Answer: Rush\nReason: Rush released Counterparts.")
        .on("Write only the next sentence.", "Counterparts is by Rush. So the answer is: Rush.")
        .on("Reply with the query only.", "Counterparts band")
        .on("Step 1", "Step 1: Which band released Counterparts?\nStep 2: Who drummed for that band?")
        .fallback("Rush released Counterparts [1].\nAnswer: Rush")
}

fn corpus() -> Arc<dyn Retriever> {
    Arc::new(StaticRetriever::from_pairs(&[
        ("Neil Peart", "Neil Peart was the drummer of Rush and was inducted into the Modern Drummer Hall of Fame."),
        ("Counterparts", "Counterparts is an album and song by the Canadian rock band Rush."),
        ("Jaws", "Jaws is a 1975 film directed by Steven Spielberg."),
    ]))
}

#[tokio::test]
async fn every_strategy_writes_a_trace_the_published_schema_accepts() {
    for spec in STRATEGIES {
        let strategy = build(spec.name, &StrategyOptions::default()).expect("builds");
        let ctx = Ctx::new(Arc::new(model()), Arc::new(Prompts::default()), Recorder::new(QUESTION, spec.name))
            .with_retriever(Some(corpus()));
        let trace = run(strategy.as_ref(), &ctx, QUESTION).await.unwrap_or_else(|e| panic!("{}: {e}", spec.name));
        assert!(!trace.events.is_empty(), "{}: an empty trace proves nothing", spec.name);
        if let Err(errors) = check_trace(&trace) {
            panic!("{}: {}", spec.name, errors.join("\n"));
        }
    }
}
