//! `hopwise data fetch | list`, and the `--dataset NAME` resolution `eval` and `retrieval-eval` use.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use hopwise_config::Config;
use hopwise_eval::data::{self, FetchEvent, FetchOptions, Registry};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{DataCommand, DataDemosArgs, DataFetchArgs, DataListArgs};

pub use hopwise_runtime::eval::resolve_datasets;

pub async fn run(config: &Config, command: DataCommand) -> Result<ExitCode> {
    match command {
        DataCommand::Fetch(args) => fetch(config, args).await,
        DataCommand::List(args) => list(config, args),
        DataCommand::Demos(args) => demos(config, args),
    }
}

fn demos(config: &Config, args: DataDemosArgs) -> Result<ExitCode> {
    use hopwise_eval::demo_pool::{build_pool, PoolSlice};
    let path = resolve_datasets(config, std::slice::from_ref(&args.dataset))?.remove(0);
    let dataset = hopwise_eval::load_dataset(&path)?;
    let (pool, report) = build_pool(&dataset.examples, PoolSlice { skip: args.skip, limit: args.limit });
    if pool.is_empty() {
        anyhow::bail!(
            "{}: no demonstration could be built from {} examples after the first {} (left out: {}); \
             nothing written",
            path.display(),
            report.read,
            args.skip,
            report.left_out()
        );
    }
    let mut text = String::new();
    for demo in &pool {
        text.push_str(&serde_json::to_string(demo)?);
        text.push('\n');
    }
    hopwise_eval::results::write_atomic(&args.out, text.as_bytes())?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "dataset": path, "out": args.out, "skip": args.skip, "report": report,
            }))?
        );
    } else {
        eprintln!(
            "{}: {} demonstrations from {} examples after the first {} (left out: {})",
            args.out.display(),
            report.kept,
            report.read,
            args.skip,
            report.left_out()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn progress_bar(hidden: bool) -> ProgressBar {
    let bar = if hidden { ProgressBar::hidden() } else { ProgressBar::new(0) };
    bar.set_style(
        ProgressStyle::with_template("{msg:40} [{bar:30}] {bytes}/{total_bytes} {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

async fn fetch(config: &Config, args: DataFetchArgs) -> Result<ExitCode> {
    let registry = Registry::load(args.registry.registry.as_deref())?;
    // Check every name before downloading anything.
    let entries = args.names.iter().map(|n| registry.get(n)).collect::<hopwise_eval::Result<Vec<_>>>()?;
    let client = data::download::client()?;
    let options =
        FetchOptions { force: args.force, allow_unpinned: args.allow_unpinned, keep_downloads: args.keep_downloads };
    let home = config.home_dir();
    let mut outcomes = Vec::new();
    for entry in entries {
        let bar = progress_bar(args.json);
        let name = entry.name.clone();
        let on_event = |event: FetchEvent| match event {
            FetchEvent::Downloading { file } => {
                bar.set_position(0);
                bar.set_length(file.size.unwrap_or(0));
                bar.set_message(format!("{name}: {}", file.name));
            }
            FetchEvent::Bytes { done, total } => {
                if let Some(total) = total {
                    bar.set_length(total);
                }
                bar.set_position(done);
            }
            FetchEvent::Reused { file } => bar.set_message(format!("{name}: {} (verified earlier)", file.name)),
            FetchEvent::Converting => bar.set_message(format!("{name}: converting")),
        };
        let outcome = data::fetch(entry, &home, options, &client, &on_event).await;
        bar.finish_and_clear();
        let outcome = outcome.with_context(|| format!("fetching `{name}`"))?;
        if !args.json {
            let m = &outcome.manifest;
            let state = if outcome.already_cached { "already cached (--force to fetch again)" } else { "fetched" };
            eprintln!("{name}: {state}: {} questions, {} passages, {}", m.questions, m.passages, m.license);
            eprintln!("  questions: {}", outcome.questions_file.display());
            if let Some(corpus) = &outcome.corpus_file {
                eprintln!("  corpus:    {}", corpus.display());
            }
            for f in m.files.iter().filter(|f| !f.pinned) {
                eprintln!("  warning: {} had no pinned checksum; recorded sha256 {}", f.name, f.sha256);
            }
        }
        outcomes.push(outcome);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcomes)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn cached_path(home: &Path, name: &str) -> Option<PathBuf> {
    data::cache::manifest(home, name).map(|_| data::cache::questions_file(home, name))
}

fn list(config: &Config, args: DataListArgs) -> Result<ExitCode> {
    let registry = Registry::load(args.registry.registry.as_deref())?;
    let home = config.home_dir();
    if args.json {
        let rows: Vec<serde_json::Value> = registry
            .datasets
            .iter()
            .map(|e| {
                serde_json::json!({
                    "name": e.name, "aliases": e.aliases, "title": e.title, "description": e.description,
                    "license": e.license, "homepage": e.homepage, "pinned": e.is_pinned(),
                    "files": e.files.iter().map(|f| serde_json::json!({"name": f.name, "url": hopwise_models::redact_url(&f.url), "size": f.size, "sha256": f.sha256, "unpinned": f.unpinned})).collect::<Vec<_>>(),
                    "cached": data::cache::manifest(&home, &e.name), "path": cached_path(&home, &e.name),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 5]> = registry
        .datasets
        .iter()
        .map(|e| {
            let cached = match data::cache::manifest(&home, &e.name) {
                Some(m) => format!("{} questions, fetched {}", m.questions, m.fetched_at),
                None => "no".into(),
            };
            let pinned = if e.is_pinned() { "sha256" } else { "no" };
            [e.name.clone(), e.aliases.join(","), pinned.into(), e.license.clone(), cached]
        })
        .collect();
    let header = ["name", "aliases", "pinned", "license", "cached"].map(String::from);
    let widths: Vec<usize> =
        (0..5).map(|i| rows.iter().chain([&header]).map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    for row in [&header].into_iter().chain(&rows) {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("{}", cells.join("  ").trim_end());
    }
    println!("\ndata directory: {}", data::cache::data_root(&home).display());
    Ok(ExitCode::SUCCESS)
}
