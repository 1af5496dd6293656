//! `hopwise strategies`, `hopwise prompts`, `hopwise config`.

use std::process::ExitCode;

use anyhow::{Context, Result};
use hopwise_config::Config;
use hopwise_reason::strategy::STRATEGIES;

pub fn strategies(json: bool) -> Result<ExitCode> {
    if json {
        let list: Vec<_> = STRATEGIES
            .iter()
            .map(|s| serde_json::json!({"name": s.name, "description": s.description, "needs_retriever": s.needs_retriever}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        let width = STRATEGIES.iter().map(|s| s.name.len()).max().unwrap_or(0);
        for s in STRATEGIES {
            println!("{:<width$}  {}", s.name, s.description);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn prompts(config: &Config, name: Option<&str>) -> Result<ExitCode> {
    let prompts = config.prompts()?;
    match name {
        Some(n) => {
            let text =
                prompts.template(n).with_context(|| format!("no template `{n}`; `hopwise prompts` lists them"))?;
            println!("{text}");
        }
        None => prompts.names().for_each(|n| println!("{n}")),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn config(config: &Config) -> Result<ExitCode> {
    print!("{}", toml::to_string_pretty(config)?);
    println!("# data directory: {}", config.home_dir().display());
    println!("# index: {}", config.index_dir().display());
    Ok(ExitCode::SUCCESS)
}
