//! HGOT's cost per question — model requests, NLI judgements, tokens, seconds — for several sample
//! counts `m`, with the `m` samples in one shared request (`n = m`) or in `m` requests, and the NLI
//! judgements asked a pair per request or each round of a vote in one request (`batch_judgements`).
//!
//! The model is the scripted one with a fixed latency per request (a stand-in for a remote
//! backend), the NLI is the LLM judge over the same model, the retriever the static one; so the
//! figures are the orchestration's cost (requests, words counted as tokens, concurrency), not a
//! real model's speed.
//!
//! Run: `cargo run --release -p hopwise-reason --example hgot_cost [latency_ms]` (default 20).

use std::sync::Arc;
use std::time::Duration;

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::{Prompts, Recorder};
use hopwise_reason::strategy::{build, run, StrategyOptions};
use hopwise_reason::Ctx;

const QUESTION: &str = "Where was the director of Jaws born?";

fn cite(prompt: &str, keyword: &str) -> String {
    prompt
        .lines()
        .filter(|l| l.starts_with('['))
        .find(|l| l.contains(keyword))
        .and_then(|l| l.split(']').next())
        .map(|n| format!("{n}]"))
        .unwrap_or_else(|| "[9]".into())
}

/// A two-step plan (2 depends on 1); thoughts vary with the sample index.
fn script(prompt: &str, i: u32) -> String {
    let q = prompt.rsplit("Question: ").next().and_then(|s| s.lines().next()).unwrap_or("").trim();
    if prompt.contains("Hypothesis:") {
        return if i % 7 == 6 { "neutral" } else { "entail" }.into();
    }
    if prompt.contains("\nClaims:\n") {
        let claims = prompt.lines().filter(|l| l.split_once(". (text ").is_some_and(|(n, _)| n.parse::<u32>().is_ok()));
        let labels: Vec<String> = claims
            .enumerate()
            .map(|(k, _)| {
                format!("\"{}\":\"{}\"", k + 1, if (i + k as u32) % 7 == 6 { "neutral" } else { "entailment" })
            })
            .collect();
        return format!("{{{}}}", labels.join(","));
    }
    if prompt.contains("Reason about the question") {
        return match i % 3 {
            0 => format!(
                "Rationale: Steven Spielberg directed Jaws {}. He was born in Cincinnati {}.\nAnswer: Cincinnati",
                cite(prompt, "directed"),
                cite(prompt, "Cincinnati")
            ),
            1 => format!(
                "Rationale: Spielberg was born in Cincinnati {}.\nAnswer: Cincinnati, Ohio",
                cite(prompt, "Cincinnati")
            ),
            _ => "Rationale: He grew up in Arizona.\nAnswer: Phoenix".into(),
        };
    }
    if prompt.contains("Plan how to find the answer") {
        return if q == QUESTION {
            "Step 1: Who directed Jaws?\nStep 2: Where was the director from Step 1 born?\nStep 2 depends on Step 1."
                .into()
        } else {
            format!("Step 1: {q}")
        };
    }
    if prompt.contains("Look at the steps again") {
        return "Step 2 depends on Step 1.".into();
    }
    if prompt.contains("Write the dependencies as arrows") {
        return "Step 1 -> Step 2".into();
    }
    if prompt.contains("Rewrite the search question") {
        return "Where was Steven Spielberg born?".into();
    }
    "?".into()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let latency_ms: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let retriever = Arc::new(StaticRetriever::from_pairs(&[
        ("Jaws (film)", "Jaws is a 1975 film directed by Steven Spielberg."),
        ("Steven Spielberg", "Steven Spielberg was born in Cincinnati, Ohio."),
        ("Phoenix", "Spielberg spent his teenage years in Phoenix, Arizona."),
    ]));
    println!("latency {latency_ms} ms per request; scripted model; LLM NLI judge; max_depth 2");
    println!(
        "| m | sampling | judging | answer | requests | of which NLI | nli_calls | prompt tokens | completion tokens | wall ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let runs = [1u32, 5, 10, 20].into_iter().flat_map(|m| {
        [(true, false), (false, false), (true, true)].into_iter().map(move |(shared, batch)| (m, shared, batch))
    });
    for (m, shared, batch) in runs {
        if m == 1 && (!shared || batch) {
            continue;
        }
        let llm = ScriptedLlm::new().on_fn("", script).latency(Duration::from_millis(latency_ms));
        let mut options = StrategyOptions::default();
        options.set("samples", serde_json::json!(m));
        options.set("shared_sampling", serde_json::json!(shared));
        options.set("batch_judgements", serde_json::json!(batch));
        if m == 1 {
            options.set("temperature", serde_json::json!(0.0));
        }
        let strategy = match build("hgot", &options) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("m = {m}: {e}");
                continue;
            }
        };
        let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), Recorder::new(QUESTION, "hgot"))
            .with_retriever(Some(retriever.clone()));
        let trace = match run(strategy.as_ref(), &ctx, QUESTION).await {
            Ok(t) => t,
            Err(e) => {
                eprintln!("m = {m}: {e}");
                continue;
            }
        };
        let judge = trace
            .events
            .iter()
            .filter(|e| matches!(&e.kind, hopwise_core::EventKind::LlmCall { purpose, .. } if purpose.starts_with("nli_judge")))
            .count();
        let s = &trace.stats;
        println!(
            "| {m} | {} | {} | {} | {} | {judge} | {} | {} | {} | {} |",
            if shared { "shared (n = m)" } else { "m requests" },
            if batch { "batched" } else { "pairs" },
            trace.answer,
            s.llm_calls,
            s.nli_calls,
            s.prompt_tokens,
            s.completion_tokens,
            s.wall_ms
        );
    }
}
