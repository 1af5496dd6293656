//! Runner overhead benchmark and a demo of the outputs: every baseline over real dev questions with a
//! scripted (instant, deterministic, not intelligent) model and the per-example BM25 retriever.
//! The accuracy it prints is meaningless; the time per job is the harness's own overhead
//! (strategy bookkeeping, scoring, trace files, fsync'd appends).
//!
//! cargo run --release -p hopwise-eval --example scripted_eval -- <data dir> <limit> <out dir> [concurrency]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{Prompts, Recorder, Retriever};
use hopwise_eval::{run_eval, EvalConfig, ExampleContextRetriever, IndicatifProgress, Job};
use hopwise_reason::Ctx;

/// Answers with the first passage's title when it sees passages, asks the question itself once as a
/// Self-Ask follow-up, and otherwise says "yes".
fn scripted_model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on_fn("Follow-up questions so far", |prompt, _| {
            if prompt.contains("(none yet)") {
                let q = prompt.split("Question: ").nth(1).and_then(|s| s.lines().next()).unwrap_or("?");
                format!("Follow up: {q}")
            } else {
                let last = prompt.rsplit("Intermediate answer: ").next().and_then(|s| s.lines().next()).unwrap_or("");
                format!("So the final answer is: {last}")
            }
        })
        .on_fn("Passages:", |prompt, _| {
            let title = prompt.split("[1] ").nth(1).and_then(|s| s.split(':').next()).unwrap_or("unknown");
            format!("Answer: {title}")
        })
        .on("simpler questions", "1. What is the first fact?\n2. What follows from it?")
        .fallback("Reasoning in a few words.\nAnswer: yes")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let data = args
        .get(1)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOPWISE_DATA").map(PathBuf::from))
        .ok_or("the evaluation data folder: pass it as the first argument or set HOPWISE_DATA")?;
    let limit: usize = args.get(2).map_or(Ok(50), |s| s.parse())?;
    let out = PathBuf::from(args.get(3).map_or("/tmp/hopwise-scripted-eval", String::as_str));
    let concurrency: usize = args.get(4).map_or(Ok(8), |s| s.parse())?;
    let strategies = [
        "direct",
        "cot",
        "cot-sc",
        "rtr",
        "self-ask",
        "self-ask-noir",
        "least-to-most",
        "plan-solve",
        "plan-solve-rtr",
    ];
    let mut config = EvalConfig::new(
        vec![data.join("hotpotqa.jsonl"), data.join("2wikimultihopqa.jsonl")],
        strategies.iter().map(|s| s.to_string()).collect(),
        out.clone(),
    );
    config.limit = Some(limit);
    config.concurrency = concurrency;
    config.model = "scripted".into();
    config.retriever = Some("example-context-bm25".into());
    let llm = scripted_model();
    let prompts = Arc::new(Prompts::default());
    let factory = Arc::new(move |job: &Job, rec: Recorder| -> hopwise_eval::Result<Ctx> {
        let retriever: Arc<dyn Retriever> = Arc::new(ExampleContextRetriever::new(&job.example));
        Ok(Ctx::new(Arc::new(llm.clone()), prompts.clone(), rec).with_retriever(Some(retriever)))
    });
    let started = Instant::now();
    let outcome = run_eval(&config, factory, &IndicatifProgress::new()).await?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "jobs run: {} (resumed {}), wall {:.2} s, {:.2} ms per job, {:.0} jobs/s, concurrency {}",
        outcome.ran,
        outcome.resumed,
        secs,
        1000.0 * secs / outcome.ran.max(1) as f64,
        outcome.ran as f64 / secs,
        concurrency
    );
    for note in &outcome.notes {
        println!("note: {note}");
    }
    println!("wrote {}", out.join("summary.md").display());
    Ok(())
}
