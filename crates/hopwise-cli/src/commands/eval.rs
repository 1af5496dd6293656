//! `hopwise eval`: run strategies over datasets, resumably, and write results, summary and plots.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use hopwise_config::{Config, RetrieverKind};
use hopwise_core::Retriever;
use hopwise_eval::{run_eval, EvalConfig, ExampleContextRetriever, IndicatifProgress, Job, NoProgress};

use crate::cli::EvalArgs;
use crate::runtime::{self, Needs};
use crate::terminal::safe;

/// Failed jobs named one by one on stderr; the rest are counted (all are in `--json`).
const MAX_FAILURES_SHOWN: usize = 20;

pub async fn run(mut config: Config, args: EvalArgs) -> Result<ExitCode> {
    config.apply(&hopwise_config::Overrides {
        index: args.index.clone(),
        query_rewrite: args.retrieval.query_rewrite.clone(),
        dedup: args.retrieval.dedup.then_some(true),
        ..Default::default()
    })?;
    let strategies: Vec<String> =
        args.strategy.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
    // Flags over `[strategies.NAME]`, per strategy, fixed before the configuration changes below.
    let flag_options = crate::commands::ask::parse_opts(&args.opts)?;
    let mut strategy_options = std::collections::BTreeMap::new();
    for s in &strategies {
        let options = config.strategy_options(s).overlaid(&flag_options);
        hopwise_reason::strategy::build(s, &options)?;
        strategy_options.insert(s.clone(), options);
    }
    // Before any model loads, so a dataset name that is not fetched fails fast.
    let datasets = crate::commands::data::resolve_datasets(&config, &args.dataset)?;
    // Recorded in the run's fingerprint as configured, whether or not it applies (below).
    let rewrite_setting = config.query_rewrite.map(|m| m.name());
    if args.context {
        // An example's own paragraphs are searched as they are: the configured query rewriting
        // applies to the index retriever only.
        config.query_rewrite = None;
    }
    let needs = Needs {
        // With --context each example brings its own paragraphs.
        retriever: !args.context,
        cache: !args.no_cache,
        progress: !args.json,
        ..Needs::for_strategies(strategies.iter().map(String::as_str))?
    };
    let runtime = Arc::new(runtime::build(&config, &needs).await?);

    let mut eval = EvalConfig::new(datasets, strategies.clone(), args.out.clone());
    eval.skip = args.skip;
    eval.limit = args.limit;
    eval.concurrency = args.concurrency.max(1);
    eval.k = config.k;
    eval.model = runtime.llm().identity();
    eval.retriever = Some(if args.context {
        "example-context".to_string()
    } else if config.retriever == RetrieverKind::Bm25 {
        // What was indexed, not where: a committed run resumes on any machine that indexed the same corpus.
        hopwise_index::Bm25Retriever::open(&config.index_dir())?.content_identity()?
    } else {
        format!("{}:{}", config.retriever, config.index_dir().display())
    });
    if let Some(rewrite) = rewrite_setting {
        eval.settings.insert("query_rewrite".into(), rewrite.into());
    }
    if config.dedup {
        eval.settings.insert("dedup".into(), true.into());
    }
    if let Some(e) = runtime.embedder() {
        eval.settings.insert("embedder".into(), e.model_id().into());
    }
    eval.prompts = (**runtime.prompts()).clone();
    eval.strategy_options = strategy_options;
    eval.time_budget = args.time_budget;
    eval.settings.insert("budget".into(), serde_json::to_value(&config.budget)?);

    let context = args.context;
    let factory = Arc::new(move |job: &Job, rec: hopwise_core::Recorder| -> hopwise_eval::Result<hopwise_reason::Ctx> {
        let base: Option<Arc<dyn Retriever>> =
            if context { Some(Arc::new(ExampleContextRetriever::new(&job.example))) } else { None };
        Ok(runtime.context(rec, base))
    });
    let outcome = if args.json {
        run_eval(&eval, factory, &NoProgress).await?
    } else {
        run_eval(&eval, factory, &IndicatifProgress::new()).await?
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
        let failures: Vec<serde_json::Value> = outcome
            .failed
            .iter()
            .map(|j| serde_json::json!({"dataset": j.dataset, "id": j.id, "strategy": j.strategy, "error": j.error}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"total": outcome.total, "resumed": outcome.resumed, "ran": outcome.ran, "failed": outcome.failed.len(), "failures": failures, "not_started": outcome.not_started, "skipped": outcome.skipped.len(), "out": args.out})
        );
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
