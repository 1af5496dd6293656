//! `hopwise eval`: run strategies over datasets, resumably, and write results, summary and plots.

use std::process::ExitCode;

use anyhow::Result;
use hopwise_config::Config;
use hopwise_eval::{IndicatifProgress, NoProgress};
use hopwise_runtime::eval::{evaluate, outcome_json, EvalPlan};

use crate::cli::EvalArgs;
use crate::terminal::safe;

/// Failed jobs named one by one on stderr; the rest are counted (all are in `--json`).
const MAX_FAILURES_SHOWN: usize = 20;

pub async fn run(mut config: Config, args: EvalArgs) -> Result<ExitCode> {
    config.apply(&hopwise_config::Overrides { retrieval: args.retrieval.clone(), ..Default::default() })?;
    let plan = EvalPlan {
        datasets: args.dataset.clone(),
        strategies: args.strategy.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect(),
        out: args.out.clone(),
        skip: args.skip,
        limit: args.limit,
        concurrency: args.concurrency,
        options: crate::commands::ask::parse_opts(&args.opts)?,
        context: args.context,
        cache: !args.no_cache,
        time_budget: args.time_budget,
        progress: !args.json,
    };
    let outcome = if args.json {
        evaluate(config, &plan, &NoProgress).await?
    } else {
        evaluate(config, &plan, &IndicatifProgress::new()).await?
    };
    // Unreadable dataset records are skipped, never silently: each one is named with its file:line.
    for record in &outcome.skipped {
        eprintln!("warning: skipped {}", safe(&record.to_string()));
    }
    // Each failed job with its reason: the next run retries it, and the reason says whether that helps.
    for job in outcome.failed.iter().take(MAX_FAILURES_SHOWN) {
        eprintln!("error: {} {} {}: {}", safe(&job.dataset), safe(&job.id), job.strategy, safe(&job.error));
    }
    if outcome.failed.len() > MAX_FAILURES_SHOWN {
        eprintln!("error: … and {} more failed jobs", outcome.failed.len() - MAX_FAILURES_SHOWN);
    }
    if args.json {
        let mut report = outcome_json(&outcome);
        report["out"] = serde_json::json!(args.out);
        println!("{report}");
    } else {
        eprintln!(
            "{} jobs: {} resumed, {} run, {} failed (retried next run), {} not started (time budget); summary in {}",
            outcome.total,
            outcome.resumed,
            outcome.ran,
            outcome.failed.len(),
            outcome.not_started,
            args.out.join("summary.md").display()
        );
    }
    Ok(if outcome.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
