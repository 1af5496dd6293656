//! `hopwise eval`: run strategies over datasets, resumably, and write results, summary and plots.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use hopwise_config::Config;
use hopwise_core::{Llm, Retriever};
use hopwise_eval::{run_eval, EvalConfig, ExampleContextRetriever, IndicatifProgress, Job, NoProgress};
use hopwise_models::{CacheMode, CachedLlm};
use hopwise_reason::Ctx;

use crate::backends;
use crate::cli::EvalArgs;

pub async fn run(mut config: Config, args: EvalArgs) -> Result<ExitCode> {
    config.apply(&hopwise_config::Overrides {
        index: args.index.clone(),
        query_rewrite: args.retrieval.query_rewrite.clone(),
        dedup: args.retrieval.dedup.then_some(true),
        ..Default::default()
    })?;
    let strategies: Vec<String> =
        args.strategy.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
    let options_for = |name: &str| -> Result<hopwise_reason::StrategyOptions> {
        let mut options = config.strategy_options(name);
        crate::commands::ask::parse_opts(&args.opts, &mut options)?;
        Ok(options)
    };
    for s in &strategies {
        hopwise_reason::strategy::build(s, &options_for(s)?)?;
    }
    // Before any model loads, so a dataset name that is not fetched fails fast.
    let datasets = crate::commands::data::resolve_datasets(&config, &args.dataset)?;
    let prompts = Arc::new(config.prompts()?);
    let base = backends::build_llm(&config, !args.json).await?;
    let llm: Arc<dyn Llm> = if args.no_cache {
        base
    } else {
        // Content-addressed: a finished run is recomputed offline and an interrupted one never pays twice.
        Arc::new(CachedLlm::new(base, config.home_dir().join("cache").join("llm"), CacheMode::ReadWrite))
    };
    let retriever: Option<Arc<dyn Retriever>> = if args.context {
        None
    } else {
        Some(backends::with_query_rewrite(&config, backends::open_retriever(&config).await?, &llm, &prompts)?)
    };
    let embedder =
        if strategies.iter().any(|s| s.starts_with("hgot")) { backends::installed_embedder(&config)? } else { None };

    let mut eval = EvalConfig::new(datasets, strategies.clone(), args.out.clone());
    eval.limit = args.limit;
    eval.concurrency = args.concurrency.max(1);
    eval.k = config.k;
    eval.model = llm.identity();
    eval.retriever = Some(if args.context {
        "example-context".to_string()
    } else if config.retriever == "bm25" {
        // What was indexed, not where: a committed run resumes on any machine that indexed the same corpus.
        hopwise_index::Bm25Retriever::open(&config.index_dir())?.content_identity()?
    } else {
        format!("{}:{}", config.retriever, config.index_dir().display())
    });
    if let Some(rewrite) = &config.query_rewrite {
        eval.settings.insert("query_rewrite".into(), rewrite.clone().into());
    }
    if config.dedup {
        eval.settings.insert("dedup".into(), true.into());
    }
    if let Some(e) = &embedder {
        eval.settings.insert("embedder".into(), e.model_id().into());
    }
    eval.prompts = (*prompts).clone();
    for s in &strategies {
        eval.strategy_options.insert(s.clone(), options_for(s)?);
    }
    eval.time_budget = args.time_budget;
    eval.settings.insert("budget".into(), serde_json::to_value(&config.budget)?);

    let budget = config.budget.clone();
    let k = config.k;
    let dedup_config = config.clone();
    let factory = Arc::new(move |job: &Job, rec: hopwise_core::Recorder| -> hopwise_eval::Result<Ctx> {
        let retriever: Arc<dyn Retriever> = match &retriever {
            Some(r) => r.clone(),
            None => Arc::new(ExampleContextRetriever::new(&job.example)),
        };
        // A fresh de-duplicating wrapper per question: rounds of one question share it, questions do not.
        let retriever = backends::per_question(&dedup_config, &retriever);
        Ok(Ctx::new(llm.clone(), prompts.clone(), rec)
            .with_retriever(Some(retriever))
            .with_embedder(embedder.clone())
            .with_budget(budget.clone())
            .with_k(k))
    });
    let outcome = if args.json {
        run_eval(&eval, factory, &NoProgress).await?
    } else {
        run_eval(&eval, factory, &IndicatifProgress::new()).await?
    };
    // Unreadable dataset records are skipped, never silently: each one is named with its file:line.
    for record in &outcome.skipped {
        eprintln!("warning: skipped {record}");
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({"total": outcome.total, "resumed": outcome.resumed, "ran": outcome.ran, "failed": outcome.failed.len(), "not_started": outcome.not_started, "skipped": outcome.skipped.len(), "out": args.out})
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
