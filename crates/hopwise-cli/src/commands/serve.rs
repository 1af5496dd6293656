//! `hopwise serve`: the HTTP API over the same runtime as `ask` (backends, query rewriting,
//! de-duplication, embedder, prompts, strategy options).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use hopwise_config::Config;
use hopwise_serve::{AppState, Limits};

use crate::cli::ServeArgs;
use crate::runtime::{self, Needs};

pub async fn run(mut config: Config, args: ServeArgs) -> Result<ExitCode> {
    config.apply(&args.run.overrides())?;
    config.serve.apply(&args.serve)?;
    // The default strategy must be valid before the server accepts anything.
    hopwise_reason::strategy::resolve(&config.run.strategy, args.run.no_retrieval)?;
    let token = config.serve.token()?;

    let needs = Needs { retriever: !args.run.no_retrieval, progress: true, ..Needs::for_any_strategy() };
    let runtime = runtime::build(&config, &needs).await?;
    let limits = Limits {
        max_concurrency: config.serve.max_concurrency,
        timeout: Duration::from_secs(config.serve.timeout_secs),
        max_body_bytes: config.serve.max_body_bytes,
        max_connections: config.serve.max_connections,
        max_connections_per_peer: config.serve.max_connections_per_peer,
        read_timeout: Duration::from_secs(config.serve.read_timeout_secs),
        ..Limits::default()
    };
    let state = AppState::builder(runtime.llm().clone()).runtime(runtime).limits(limits).token(token.clone()).build();

    let listener = tokio::net::TcpListener::bind(&config.serve.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.serve.bind))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "hopwise serve: http://{addr}/ (strategy {}, {}; Ctrl-C or SIGTERM finishes in-flight requests and stops)",
        config.run.strategy,
        if token.is_some() { "bearer token required" } else { "no token" }
    );
    hopwise_serve::serve(listener, state, hopwise_serve::shutdown_signal()).await?;
    eprintln!("hopwise serve: stopped");
    Ok(ExitCode::SUCCESS)
}
