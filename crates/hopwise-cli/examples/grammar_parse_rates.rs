//! Parse-failure rates of ToQD's structured steps with and without a GBNF grammar, on real dev
//! questions and the real local model.
//!
//! For each question: the decomposition prompt is sent twice (grammar on / off) and parsed with
//! the same parser ToQD uses; then the construct prompt, over the *same* sub-question list for both
//! modes (the grammar run's list, so only the grammar differs), is sent twice and parsed into a
//! topology. Reported per mode: decompositions with no readable sub-question, constructs where no
//! edge could be read (ToQD falls back to a chain), and constructs that needed any other repair.
//!
//! ```text
//! cargo run --release -p hopwise --example grammar_parse_rates -- \
//!     "$HOPWISE_DATA/hotpotqa.jsonl" 50 qwen2.5-0.5b [threads]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use hopwise_core::{grammars, ChatMessage, ChatRequest, GenParams, Llm, Prompts};
use hopwise_llama::{LocalConfig, LocalLlm};
use hopwise_reason::protocol::{parse_edges, parse_numbered_list};

/// The same cap ToQD puts on list and edge outputs.
const LIST_TOKENS: u32 = 200;

#[derive(Default)]
struct Counts {
    decompositions: usize,
    empty_lists: usize,
    sub_questions: usize,
    constructs: usize,
    no_edges: usize,
    other_repairs: usize,
    rules: BTreeMap<String, usize>,
    seconds: f64,
}

async fn ask(llm: &LocalLlm, prompt: &str, grammar: Option<&str>) -> anyhow::Result<String> {
    let params = GenParams { max_tokens: LIST_TOKENS, grammar: grammar.map(str::to_string), ..GenParams::default() };
    let reply = llm.chat(&ChatRequest::new(vec![ChatMessage::user(prompt)], params)).await?;
    Ok(reply.text().to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dataset = PathBuf::from(
        args.get(1)
            .ok_or_else(|| anyhow::anyhow!("usage: grammar_parse_rates DATASET.jsonl [LIMIT] [MODEL] [THREADS]"))?,
    );
    let limit: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(50);
    let model = args.get(3).map_or("qwen2.5-0.5b", String::as_str);
    let threads: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);

    let home = hopwise_config::default_home();
    let config = LocalConfig { threads: Some(threads), ..LocalConfig::default() };
    let llm = LocalLlm::open(model, &home, config, &mut |_| {})?;
    let prompts = Prompts::default();
    let examples = hopwise_eval::load_dataset(&dataset)?.examples;

    let mut with = Counts::default();
    let mut without = Counts::default();
    let started = Instant::now();
    for (i, example) in examples.iter().take(limit).enumerate() {
        let decompose = prompts.render("toqd_decompose", &[("question", &example.question)])?;
        let mut lists = Vec::new();
        for (counts, grammar) in [(&mut with, Some(grammars::NUMBERED_QUESTIONS)), (&mut without, None)] {
            let t = Instant::now();
            let list = parse_numbered_list(&ask(&llm, &decompose, grammar).await?);
            counts.seconds += t.elapsed().as_secs_f64();
            counts.decompositions += 1;
            counts.empty_lists += usize::from(list.is_empty());
            counts.sub_questions += list.len();
            lists.push(list);
        }
        // Construct over one shared list, so the two modes see identical input.
        let Some(list) = lists.into_iter().find(|l| l.len() > 1) else { continue };
        let listed: String = list.iter().enumerate().map(|(i, q)| format!("{}. {q}\n", i + 1)).collect();
        let construct = prompts
            .render("toqd_construct", &[("question", &example.question), ("subquestions", listed.trim_end())])?;
        for (counts, grammar) in [(&mut with, Some(grammars::edges_for(list.len()))), (&mut without, None)] {
            let t = Instant::now();
            let topology = parse_edges(&ask(&llm, &construct, grammar.as_deref()).await?, list.len(), "construct");
            counts.seconds += t.elapsed().as_secs_f64();
            counts.constructs += 1;
            let no_edges = topology.repairs.iter().any(|r| r.rule == "no_edges_chain");
            counts.no_edges += usize::from(no_edges);
            counts.other_repairs += usize::from(!no_edges && !topology.repairs.is_empty());
            for r in &topology.repairs {
                *counts.rules.entry(r.rule.clone()).or_default() += 1;
            }
        }
        eprintln!("{}/{} questions, {:.0} s", i + 1, limit.min(examples.len()), started.elapsed().as_secs_f64());
    }

    println!("model {model}, {threads} thread(s), dataset {}", dataset.display());
    println!("| mode | decompositions | no sub-question read | mean sub-questions | constructs | no edge read (chain fallback) | other repairs | repair rules | seconds |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|---:|");
    for (mode, c) in [("grammar", &with), ("free text", &without)] {
        let pct = |x: usize, of: usize| if of == 0 { 0.0 } else { 100.0 * x as f64 / of as f64 };
        let rules: Vec<String> = c.rules.iter().map(|(r, n)| format!("{r} {n}")).collect();
        println!(
            "| {mode} | {} | {} ({:.0} %) | {:.2} | {} | {} ({:.0} %) | {} ({:.0} %) | {} | {:.0} |",
            c.decompositions,
            c.empty_lists,
            pct(c.empty_lists, c.decompositions),
            c.sub_questions as f64 / c.decompositions.max(1) as f64,
            c.constructs,
            c.no_edges,
            pct(c.no_edges, c.constructs),
            c.other_repairs,
            pct(c.other_repairs, c.constructs),
            if rules.is_empty() { "–".to_string() } else { rules.join(", ") },
            c.seconds
        );
    }
    Ok(())
}
