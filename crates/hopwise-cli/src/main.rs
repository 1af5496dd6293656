//! The `hopwise` command: a thin layer over the crates. Errors are reported once, here, with a
//! non-zero exit status.

mod cli;
mod commands;
#[cfg(test)]
mod environment_doc;
mod render;
mod terminal;

use std::process::ExitCode;

use clap::Parser;
use hopwise_runtime as runtime;
use hopwise_runtime::backends;

fn main() -> ExitCode {
    quiet_when_stdout_closes();
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
            eprintln!("error: {}", terminal::safe(&error_chain(&e)));
            ExitCode::FAILURE
        }
    }
}

/// A reader that stops early (`hopwise strategies | head`) closes stdout, and the next `print!`
/// panics; leave quietly instead, with the status a shell gives a process ended by SIGPIPE. Finished
/// work is already on disk: every command that writes results writes them as it goes.
fn quiet_when_stdout_closes() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info)
    }));
}

/// The error and its causes, joined by `: `, leaving out a cause whose text the message already
/// holds (an error that shows its source would otherwise print it twice).
fn error_chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        /// Like the crates' errors: the message shows the cause, which is also its `source`.
        #[derive(Debug)]
        struct Read(std::io::Error);
        impl std::fmt::Display for Read {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "reading data.jsonl: {}", self.0)
            }
        }
        impl std::error::Error for Read {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let e = anyhow::Error::new(Read(io)).context("loading the dataset");
        assert_eq!(error_chain(&e), "loading the dataset: reading data.jsonl: No such file or directory (os error 2)");
    }
}
