//! The `hopwise` command: a thin layer over the crates. Errors are reported once, here, with a
//! non-zero exit status.

mod backends;
mod cli;
mod commands;
mod render;
mod runtime;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let filter = match cli.global.verbose {
        // The server's access log is its normal output.
        0 if matches!(cli.command, crate::cli::Command::Serve(_)) => "warn,hopwise_serve=info",
        0 => "warn",
        1 => "info,hopwise=debug",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("HOPWISE_LOG").unwrap_or_else(|_| filter.into()))
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: logs redirected to a file or collector stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
