//! `hopwise ask`: answer one question and print the answer with its graph, or the trace as JSON.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use hopwise_config::Config;
use hopwise_reason::strategy;
use hopwise_reason::Request;

use crate::cli::AskArgs;
use crate::render::render_trace;
use crate::runtime::{self, Needs};
use crate::terminal::safe;

/// Parses `KEY=VALUE` options; values are JSON when they parse as JSON (`true`, `3`, `"x"`), else strings.
pub fn parse_opts(pairs: &[String]) -> Result<serde_json::Map<String, serde_json::Value>> {
    let mut options = serde_json::Map::new();
    for pair in pairs {
        let (k, v) = pair.split_once('=').with_context(|| format!("--opt `{pair}` must be KEY=VALUE"))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
        options.insert(k.trim().to_string(), value);
    }
    Ok(options)
}

pub async fn run(mut config: Config, args: AskArgs) -> Result<ExitCode> {
    if args.question.trim().is_empty() {
        bail!("the question is empty");
    }
    config.apply(&hopwise_config::Overrides { retrieval: args.retrieval.clone(), ..args.run.overrides() })?;
    let name = strategy::resolve(&config.run.strategy, args.run.no_retrieval)?;
    let options = parse_opts(&args.opts)?;
    // Bad options stop the command before an index or a model is loaded.
    strategy::build(&name, &config.strategy_options(&name).overlaid(&options))?;

    let needs = Needs { progress: !args.json, ..Needs::for_strategies([name.as_str()])? };
    let runtime = runtime::build(&config, &needs).await?;
    let prepared = runtime.prepare(Request {
        question: args.question.clone(),
        strategy: Some(name),
        options,
        ..Request::default()
    })?;
    let trace = runtime.answer(&prepared, None).await?;

    if args.json {
        println!("{}", serde_json::to_string_pretty(&trace)?);
    } else if let Some(format) = args.graph {
        let format = match format {
            crate::cli::GraphArg::Mermaid => hopwise_core::graph_text::GraphFormat::Mermaid,
            crate::cli::GraphArg::Dot => hopwise_core::graph_text::GraphFormat::Dot,
        };
        print!("{}", hopwise_core::graph_text::render(&trace, format));
    } else {
        print!("{}", safe(&render_trace(&trace)));
    }
    // No answer is a failure whatever the cause, so scripts can tell it from an answer.
    if let Some(why) = trace.missing_answer_reason() {
        eprintln!("error: no answer could be produced: {}", safe(&why));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
