//! `hopwise retrieval-eval`: how well each query-rewriting method's queries retrieve the gold
//! evidence (ToQD's Table 3 protocol), over the configured retriever.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use hopwise_config::Config;
use hopwise_eval::retrieval_eval::render_retrieval_markdown;
use hopwise_eval::{load_dataset, retrieval_eval, write_retrieval_report, QueryMethod, RetrievalEvalConfig};

use crate::cli::RetrievalEvalArgs;
use crate::runtime::{self, Needs};

pub async fn run(config: Config, args: RetrievalEvalArgs) -> Result<ExitCode> {
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
        eprintln!("warning: skipped {}", crate::terminal::safe(&record.to_string()));
    }
    if let Some(limit) = args.limit {
        dataset.examples.truncate(limit);
    }
    // Each method rewrites queries itself, so the retriever is used as it is (no configured
    // rewriting or de-duplication); the native query calls no model, so then none is loaded.
    let needs = Needs {
        retriever: true,
        cache: !args.no_cache,
        no_model: methods.iter().all(|m| *m == QueryMethod::Native),
        progress: !args.json,
        ..Needs::default()
    };
    let runtime = std::sync::Arc::new(runtime::build(&config, &needs).await?);
    let eval_config = RetrievalEvalConfig { methods, k: args.k, concurrency: args.concurrency.max(1) };
    let started = std::time::Instant::now();
    let report = retrieval_eval(&dataset.examples, runtime, &eval_config).await?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    write_retrieval_report(&args.out, &report)?;
    if args.json {
        let summary = serde_json::json!({
            "dataset": args.dataset,
            "retriever": config.general.retriever,
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
            config.general.retriever,
            started.elapsed().as_secs_f64(),
            args.out.join("retrieval.jsonl").display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
