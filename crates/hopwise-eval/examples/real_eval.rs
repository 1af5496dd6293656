//! The evaluation harness against a real OpenAI-compatible server (e.g. llama.cpp's server with a
//! small local model), with each example's own paragraphs as the retrieval pool (distractor
//! setting, BM25). A smoke run of the real path until the CLI's `hopwise eval` is wired.
//!
//! cargo run --release -p hopwise-eval --example real_eval -- \
//!     <base_url> <model name> <data dir> <limit> <out dir> <strategies,comma,separated> [concurrency]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use hopwise_core::{Llm, Prompts, Recorder, Retriever};
use hopwise_eval::{run_eval, EvalConfig, ExampleContextRetriever, IndicatifProgress, Job};
use hopwise_models::{OpenAiConfig, OpenAiLlm};
use hopwise_reason::Ctx;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 7 {
        eprintln!("usage: real_eval <base_url> <model> <data dir> <limit> <out dir> <strategies> [concurrency]");
        std::process::exit(2);
    }
    let data = PathBuf::from(&args[3]);
    let limit: usize = args[4].parse()?;
    let out = PathBuf::from(&args[5]);
    let strategies: Vec<String> = args[6].split(',').map(|s| s.trim().to_string()).collect();
    let concurrency: usize = args.get(7).map_or(Ok(1), |s| s.parse())?;

    let mut llm_config = OpenAiConfig::new(args[1].clone(), args[2].clone());
    llm_config.max_in_flight = concurrency;
    llm_config.timeout_secs = 600.0;
    let llm: Arc<dyn Llm> = Arc::new(OpenAiLlm::new(llm_config)?);
    let prompts = Arc::new(Prompts::default());

    let mut config =
        EvalConfig::new(vec![data.join("hotpotqa.jsonl"), data.join("2wikimultihopqa.jsonl")], strategies, out.clone());
    config.limit = Some(limit);
    config.concurrency = concurrency;
    config.model = llm.identity();
    config.retriever = Some("example-context-bm25".into());
    config.prompts = (*prompts).clone();
    config.settings.insert("temperature".into(), serde_json::json!(0.1));

    let k = config.k;
    let factory = Arc::new(move |job: &Job, rec: Recorder| -> hopwise_eval::Result<Ctx> {
        let retriever: Arc<dyn Retriever> = Arc::new(ExampleContextRetriever::new(&job.example));
        Ok(Ctx::new(llm.clone(), prompts.clone(), rec).with_retriever(Some(retriever)).with_k(k))
    });
    let started = Instant::now();
    let outcome = run_eval(&config, factory, &IndicatifProgress::new()).await?;
    println!(
        "ran {} jobs (resumed {}, failed {}) in {:.0} s; {} dataset records skipped",
        outcome.ran,
        outcome.resumed,
        outcome.failed.len(),
        started.elapsed().as_secs_f64(),
        outcome.skipped.len()
    );
    for note in &outcome.notes {
        println!("note: {note}");
    }
    println!("{}", out.join("summary.md").display());
    Ok(())
}
