//! `hopwise retrieval-eval`: how well each query-rewriting method's queries retrieve the gold
//! evidence (ToQD's Table 3 protocol), over the configured retriever.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hopwise_config::Config;
use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::Llm;
use hopwise_eval::retrieval_eval::render_retrieval_markdown;
use hopwise_eval::{load_dataset, retrieval_eval, write_retrieval_report, QueryMethod, RetrievalEvalConfig};
use hopwise_models::{CacheMode, CachedLlm};

use crate::backends;
use crate::cli::RetrievalEvalArgs;

pub async fn run(mut config: Config, args: RetrievalEvalArgs) -> Result<ExitCode> {
    config.apply(&hopwise_config::Overrides { index: args.index.clone(), ..Default::default() })?;
    if args.k == 0 {
        bail!("--k must be at least 1");
    }
    let methods = args
        .method
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(QueryMethod::parse)
        .collect::<hopwise_eval::Result<Vec<_>>>()?;
    if methods.is_empty() {
        bail!("no method given; choose from native, hyde, sub-question, multi-query, toqd, toqd-no-critique");
    }
    let dataset_path = crate::commands::data::resolve_datasets(&config, std::slice::from_ref(&args.dataset))?.remove(0);
    let mut dataset = load_dataset(&dataset_path)?;
    for record in &dataset.skipped {
        eprintln!("warning: skipped {record}");
    }
    if let Some(limit) = args.limit {
        dataset.examples.truncate(limit);
    }
    // Open the index before loading a model, so a missing index fails fast.
    let retriever = backends::open_retriever(&config).await?;
    let llm: Arc<dyn Llm> = if methods.iter().all(|m| *m == QueryMethod::Native) {
        // The native query calls no model; none is loaded.
        Arc::new(ScriptedLlm::new())
    } else {
        let base = backends::build_llm(&config, !args.json).await?;
        if args.no_cache {
            base
        } else {
            Arc::new(CachedLlm::new(base, config.home_dir().join("cache").join("llm"), CacheMode::ReadWrite))
        }
    };
    let prompts = Arc::new(config.prompts()?);
    let eval_config = RetrievalEvalConfig { methods, k: args.k, concurrency: args.concurrency.max(1) };
    let started = std::time::Instant::now();
    let report = retrieval_eval(&dataset.examples, llm, retriever, prompts, &eval_config).await?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    write_retrieval_report(&args.out, &report)?;
    if args.json {
        let summary = serde_json::json!({
            "dataset": args.dataset,
            "retriever": config.retriever,
            "k": report.k,
            "skipped_without_gold": report.skipped_without_gold,
            "seconds": started.elapsed().as_secs_f64(),
            "methods": report.methods,
            "out": args.out,
        });
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", render_retrieval_markdown(&report));
        eprintln!(
            "retriever {}; {:.1} s; per-question records in {}",
            config.retriever,
            started.elapsed().as_secs_f64(),
            args.out.join("retrieval.jsonl").display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
