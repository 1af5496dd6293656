//! `hopwise ask`: answer one question and print the answer with its graph, or the trace as JSON.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hopwise_config::Config;
use hopwise_core::Recorder;
use hopwise_reason::strategy;
use hopwise_reason::{Ctx, StrategyOptions};

use crate::backends;
use crate::cli::AskArgs;
use crate::render::render_trace;
use crate::terminal::safe;

/// Parses `KEY=VALUE` options; values are JSON when they parse as JSON (`true`, `3`, `"x"`), else strings.
pub fn parse_opts(pairs: &[String], into: &mut StrategyOptions) -> Result<()> {
    for pair in pairs {
        let (k, v) = pair.split_once('=').with_context(|| format!("--opt `{pair}` must be KEY=VALUE"))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
        into.set(k.trim(), value);
    }
    Ok(())
}

pub async fn run(mut config: Config, args: AskArgs) -> Result<ExitCode> {
    if args.question.trim().is_empty() {
        bail!("the question is empty");
    }
    config.apply(&hopwise_config::Overrides {
        query_rewrite: args.retrieval.query_rewrite.clone(),
        dedup: args.retrieval.dedup.then_some(true),
        ..args.run.overrides()
    })?;
    let name = strategy::resolve(&config.strategy, args.run.no_retrieval)?;
    let mut options = config.strategy_options(&name);
    parse_opts(&args.opts, &mut options)?;
    let strategy = strategy::build(&name, &options)?;

    // Open the index before loading the model, so a missing index fails fast.
    let base = if strategy.needs_retriever() { Some(backends::open_retriever(&config).await?) } else { None };
    let llm = backends::build_llm(&config, !args.json).await?;
    let prompts = Arc::new(config.prompts()?);
    let retriever = match base {
        Some(base) => {
            let wrapped = backends::with_query_rewrite(&config, base, &llm, &prompts)?;
            Some(backends::per_question(&config, &wrapped))
        }
        None => None,
    };
    // HGOT's STOP test and demonstration choice use cosine similarity when an embedder is there.
    let embedder = if name.starts_with("hgot") { backends::installed_embedder(&config)? } else { None };
    let rec = Recorder::new(&args.question, &name);
    let ctx = Ctx::new(llm, prompts, rec)
        .with_retriever(retriever)
        .with_embedder(embedder)
        .with_budget(config.budget.clone())
        .with_k(config.k);
    let trace = strategy::run(strategy.as_ref(), &ctx, &args.question).await?;

    if args.json {
        println!("{}", serde_json::to_string_pretty(&trace)?);
    } else {
        print!("{}", safe(&render_trace(&trace)));
    }
    // No answer is a failure whatever the cause, so scripts can tell it from an answer.
    if trace.answer.trim().is_empty() {
        let why = if trace.notes.is_empty() {
            format!("the model replied with nothing ({} model calls)", trace.stats.llm_calls)
        } else {
            trace.notes.join("; ")
        };
        eprintln!("error: no answer could be produced: {}", safe(&why));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
