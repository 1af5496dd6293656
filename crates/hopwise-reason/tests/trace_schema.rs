//! The published trace schema (docs/trace.schema.json) is exactly what the types generate; and every
//! strategy in the table, run on a scripted model over a small corpus, writes a trace that validates
//! against it. The same check runs inside `Recorder::finish` for every other test of this crate
//! (hopwise-core's `trace-check` feature, on in this crate's dev-dependencies); this test makes sure
//! no strategy is left out.

use std::path::Path;
use std::sync::Arc;

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::trace_schema::{check_trace, check_trace_json, PUBLISHED_PATH};
use hopwise_core::NodeTrace;
use hopwise_core::{Prompts, Recorder, Retriever};
use hopwise_reason::ctx::Ctx;
use hopwise_reason::details;
use hopwise_reason::details::schema::trace_schema_text;
use hopwise_reason::details::sentence::{SentenceNode, StepDecision, StepGate};
use hopwise_reason::details::toqd::ToqdNode;
use hopwise_reason::strategy::{build, run, StrategyOptions, STRATEGIES};
use hopwise_reason::uar::QuerySource;
use serde_json::{json, Value};

#[test]
fn the_published_schema_is_generated_from_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(PUBLISHED_PATH);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == trace_schema_text(),
        "{PUBLISHED_PATH} is out of date: run `cargo run -p hopwise-reason --example trace_schema`"
    );
}

const QUESTION: &str = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";

/// Replies that move each strategy along: ToQD's bridge question (node 1 known, node 2 retrieved), a
/// sentence loop that concludes, HGOT's plan of two steps, and a labelled answer for everything else.
fn model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on(
            "Plan how to answer the question",
            r##"{"op":"answer","answer_type":"person","steps":[{"question":"Which band released the song Counterparts?","answer_type":"organisation"},{"question":"Who was the drummer of #1?","answer_type":"person"}]}"##,
        )
        .on(
            "Break the question below",
            "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?",
        )
        .on(
            "Review the candidates",
            "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?",
        )
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

/// A trace of `strategy` whose node `Q` carries `extra` (and the trace `trace_extra`), as JSON.
/// Built without `finish`, which would reject the broken ones on purpose (trace-check).
fn trace_with(strategy: &str, extra: Value, trace_extra: Value) -> Value {
    let rec = Recorder::new("q", strategy);
    rec.upsert_node(NodeTrace { id: "Q".into(), question: "q".into(), extra, ..Default::default() });
    rec.set_extra(trace_extra);
    serde_json::to_value(rec.snapshot()).expect("serialise")
}

#[test]
fn node_details_are_checked_against_their_strategys_types() {
    let toqd = details::to_extra(&ToqdNode { confidence: Some(0.8), ..Default::default() });
    let sentence = details::to_extra(&SentenceNode {
        temporary: "Rush.".into(),
        sentence: "Rush.".into(),
        decision: StepDecision::Retrieve,
        query: Some("Counterparts band".into()),
        gate: StepGate::Always { query_source: QuerySource::Sentence },
    });
    let accepted = [
        ("toqd", toqd.clone(), Value::Null),
        ("toqd-noir", json!({"gate": null}), Value::Null),
        ("always-retrieve", sentence.clone(), Value::Null),
        ("cot", json!({"reasoning": "Rush wrote it."}), Value::Null),
        ("direct", Value::Null, Value::Null),
    ];
    for (strategy, extra, trace_extra) in accepted {
        let trace = trace_with(strategy, extra.clone(), trace_extra);
        assert_eq!(check_trace_json(&trace), Ok(()), "{strategy}: {extra}");
    }
    let rejected = [
        ("cot", toqd.clone(), Value::Null, "a ToQD detail on a CoT trace"),
        ("hgot", sentence.clone(), Value::Null, "a sentence step on an HGOT trace"),
        ("toqd", json!({"confidence": "high"}), Value::Null, "a confidence that is not a number"),
        ("toqd", json!({"gate": {"decision": "maybe"}}), Value::Null, "an incomplete gate record"),
        ("hgot", json!({"layer": 0, "mood": "sure"}), Value::Null, "a field HGOT does not write"),
        ("uar", json!({"sentence": "x", "decision": "accept", "temporary": "x"}), Value::Null, "no gate record"),
        ("toqd", toqd.clone(), json!({"gate": "x"}), "trace detail on a strategy that writes none"),
        ("uar", sentence.clone(), json!({"max_steps": 3}), "an incomplete loop configuration"),
    ];
    for (strategy, extra, trace_extra, what) in rejected {
        assert!(check_trace_json(&trace_with(strategy, extra, trace_extra)).is_err(), "{what}: accepted");
    }
}
