//! ToQD's typed plans for a slice of a dataset, with the real local model: one plan call per
//! question (the prompt, grammar and sampling `toqd` uses), read by the same reader. Prints each
//! question's plan on one line, then how many plans of each operation, how many needed each repair,
//! and the seconds per plan. For looking at plans on the tuning set without running the graph.
//!
//! ```text
//! cargo run --release -p hopwise --example plan_check -- DATASET.jsonl [limit] [model] [threads]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use hopwise_core::{ChatMessage, ChatRequest, GenParams, Llm, Prompts};
use hopwise_llama::{LocalConfig, LocalLlm};
use hopwise_reason::protocol::plan::{self, FinalOp};

/// The plan call's output cap in `toqd`.
const PLAN_TOKENS: u32 = 400;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(dataset) = args.get(1).map(PathBuf::from) else {
        anyhow::bail!("usage: plan_check DATASET.jsonl [limit] [model] [threads]");
    };
    let limit: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(50);
    let model = args.get(3).map_or("qwen2.5-1.5b", String::as_str);
    let threads: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(2);

    let home = hopwise_config::default_home();
    let llm =
        LocalLlm::open(model, &home, LocalConfig { threads: Some(threads), ..LocalConfig::default() }, &mut |_| {})?;
    let prompts = Prompts::default();
    let examples = hopwise_eval::load_dataset(&dataset)?.examples;
    let (mut ops, mut repairs) = (BTreeMap::<String, usize>::new(), BTreeMap::<String, usize>::new());
    let started = Instant::now();
    let mut planned = 0usize;
    for example in examples.iter().take(limit) {
        let prompt = prompts.render("toqd_plan", &[("question", &example.question)])?;
        let mut messages = Vec::new();
        if let Some(system) = prompts.template("system") {
            messages.push(ChatMessage::system(system));
        }
        messages.push(ChatMessage::user(prompt));
        let params = GenParams {
            max_tokens: PLAN_TOKENS,
            grammar: Some(plan::grammar()),
            response_schema: Some(plan::json_schema()),
            ..GenParams::default()
        };
        let reply = llm.chat(&ChatRequest::new(messages, params)).await?;
        let mut found = Vec::new();
        let read = plan::read_plan(reply.text(), &example.question, 4, &mut found);
        let shape = match &read.final_op {
            FinalOp::Answer { answer_type } => format!("answer {}", answer_type.name()),
            FinalOp::Compare { pick, options } => format!(
                "compare {} [{}]",
                pick.name(),
                options.iter().map(|o| o.option.as_str()).collect::<Vec<_>>().join(" | ")
            ),
            FinalOp::All { options } | FinalOp::Select { options } => format!(
                "{} [{}]",
                read.final_op.name(),
                options.iter().map(|o| o.option.as_str()).collect::<Vec<_>>().join(" | ")
            ),
        };
        let steps: Vec<String> =
            read.steps.iter().map(|s| format!("{} ({})", s.question, s.answer_type.name())).collect();
        println!("{}\t{}\t{shape}\t{}", example.id, example.question, steps.join(" / "));
        *ops.entry(read.final_op.name().to_string()).or_default() += 1;
        for r in found {
            *repairs.entry(r.rule).or_default() += 1;
        }
        planned += 1;
    }
    let seconds = started.elapsed().as_secs_f64() / planned.max(1) as f64;
    println!("\n{planned} plans, {seconds:.1} s each; operations: {ops:?}; repairs: {repairs:?}");
    Ok(())
}
