//! One module per subcommand.

mod ask;
mod compare;
pub mod data;
mod eval;
mod gate_eval;
mod index;
mod info;
mod report;
mod retrieval_eval;
mod serve;
mod setup;

use std::process::ExitCode;

use anyhow::Result;
use hopwise_config::{Config, Overrides};

use crate::cli::{Cli, Command, GlobalArgs};

/// Loads the configuration and applies the global flags (which already include their env vars).
pub fn load_config(global: &GlobalArgs) -> Result<Config> {
    let mut config = Config::load(global.config.as_deref())?;
    config.apply(&Overrides {
        general: global.general.clone(),
        model: global.model.clone(),
        remote: global.remote.clone(),
        ..Default::default()
    })?;
    Ok(config)
}

pub async fn dispatch(cli: Cli) -> Result<ExitCode> {
    let config = load_config(&cli.global)?;
    match cli.command {
        Command::Ask(args) => ask::run(config, args).await,
        Command::Eval(args) => eval::run(config, args).await,
        Command::Serve(args) => serve::run(config, args).await,
        Command::RetrievalEval(args) => retrieval_eval::run(config, args).await,
        Command::GateEval(args) => gate_eval::run(config, args).await,
        Command::Strategies(args) => info::strategies(args.name.as_deref(), args.json),
        Command::Prompts(args) => info::prompts(&config, args.name.as_deref()),
        Command::Config => info::config(&config),
        Command::Index(args) => index::run(&config, args).await,
        Command::Setup(args) => setup::run(&config, args),
        Command::Report(args) => report::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Data(command) => data::run(&config, command).await,
    }
}
