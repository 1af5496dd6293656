//! The environment variables of `docs/configuration.md`, generated from the one place each is
//! declared: the clap argument that reads it (its flag, its help, the commands that take it), plus the
//! few variables read outside clap, listed here. `HOPWISE_BLESS=1 cargo test -p hopwise
//! environment` rewrites the block; the test fails while it is stale.

use std::collections::BTreeMap;

use clap::CommandFactory;

use crate::cli::Cli;

/// Variables read outside clap: (name, what it sets).
const READ_ELSEWHERE: &[(&str, &str)] = &[
    ("HOPWISE_LOG", "log filter (`tracing` syntax, e.g. `info,hopwise_serve=debug`); default by `-v`"),
    (
        "HOPWISE_EMBED_PRECISION",
        "`int8` or `f32` for the sentence embedder; default: what the index's dense vectors were built with, else int8",
    ),
];

const BEGIN: &str = "<!-- environment:begin (generated from the CLI's arguments; `HOPWISE_BLESS=1 cargo test -p hopwise environment` rewrites it) -->";
const END: &str = "<!-- environment:end -->";

/// One variable: its flag, the commands that read it, and the first paragraph of its help.
struct Variable {
    flag: String,
    commands: Vec<String>,
    help: String,
}

fn first_paragraph(help: &str) -> String {
    help.split("\n\n").next().unwrap_or(help).replace('\n', " ").trim().to_string()
}

fn collect(command: &clap::Command, path: &str, out: &mut BTreeMap<String, Variable>) {
    for arg in command.get_arguments() {
        let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) else { continue };
        let name = env.to_string_lossy().into_owned();
        let help = arg.get_long_help().or(arg.get_help()).map(|h| first_paragraph(&h.to_string())).unwrap_or_default();
        let entry =
            out.entry(name).or_insert_with(|| Variable { flag: format!("--{long}"), commands: Vec::new(), help });
        if !path.is_empty() && !entry.commands.iter().any(|c| c == path) {
            entry.commands.push(path.to_string());
        }
    }
    for sub in command.get_subcommands() {
        let path = if path.is_empty() { sub.get_name().to_string() } else { format!("{path} {}", sub.get_name()) };
        collect(sub, &path, out);
    }
}

/// The generated block, markers included.
pub fn render() -> String {
    let mut variables = BTreeMap::new();
    collect(&Cli::command(), "", &mut variables);
    let mut out = format!("{BEGIN}\n| variable | flag | commands | sets |\n|---|---|---|---|\n");
    for (name, v) in &variables {
        let commands = if v.commands.is_empty() { "all".to_string() } else { v.commands.join(", ") };
        out.push_str(&format!("| `{name}` | `{}` | {commands} | {} |\n", v.flag, v.help.replace('|', "\\|")));
    }
    for (name, what) in READ_ELSEWHERE {
        out.push_str(&format!("| `{name}` | – | all | {what} |\n"));
    }
    out.push_str(END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_block_matches_the_cli() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
        let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
        let (Some(start), Some(end)) = (doc.find("<!-- environment:begin"), doc.find(END)) else {
            panic!("docs/configuration.md has no environment block")
        };
        let current = &doc[start..end + END.len()];
        let fresh = render();
        if current != fresh && std::env::var_os("HOPWISE_BLESS").is_some() {
            std::fs::write(&path, format!("{}{fresh}{}", &doc[..start], &doc[end + END.len()..])).expect("write");
            return;
        }
        assert_eq!(current, fresh, "docs/configuration.md's environment block is stale; rerun with HOPWISE_BLESS=1");
        for must in ["HOPWISE_SERVE_MAX_CONNECTIONS_PER_PEER", "HOPWISE_HOME", "HOPWISE_LOG"] {
            assert!(fresh.contains(must), "{must} is missing");
        }
    }
}
