//! `hopwise gate-eval`: how well each retrieval gate tells the single-fact questions the model gets
//! wrong closed-book from those it gets right (hopwise_eval::gate_eval).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use futures::stream::{self, StreamExt};
use hopwise_config::Config;
use hopwise_core::Llm;
use hopwise_eval::gate_eval::{gate_items, join_reader, judge, render_report, GateRecord, ItemKind};
use hopwise_eval::gate_sweep::{draw_sweep, sweep};
use hopwise_models::{CacheMode, CachedLlm};

use crate::backends;
use crate::cli::{GateEvalArgs, GateItems};

pub async fn run(config: Config, args: GateEvalArgs) -> Result<ExitCode> {
    if args.samples < 2 {
        bail!("--samples must be at least 2 (the estimators compare samples)");
    }
    let kind = match args.items {
        GateItems::Auto => ItemKind::Auto,
        GateItems::Questions => ItemKind::Questions,
    };
    let mut sets = Vec::new();
    for path in &args.dataset {
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        sets.push((name, gate_items(path, args.limit, kind)?));
    }
    let mut readers = Vec::new();
    for path in &args.reader {
        if !path.is_file() {
            bail!("--reader {}: no such results file", path.display());
        }
        readers.extend(hopwise_eval::results::read_results(path)?.0);
    }
    let base = backends::build_llm(&config, true).await?;
    let llm: Arc<dyn Llm> = if args.no_cache {
        base
    } else {
        Arc::new(CachedLlm::new(base, config.home_dir().join("cache").join("llm"), CacheMode::ReadWrite))
    };
    let prompts = Arc::new(config.prompts()?);
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut lines = std::fs::File::create(args.out.join("gate.jsonl")).context("gate.jsonl")?;
    let mut report = format!(
        "# Retrieval gates against the closed-book oracle\n\nModel `{}`, {} samples at temperature {}.\n\n",
        llm.name(),
        args.samples,
        args.temperature
    );
    for (name, items) in sets {
        let total = items.len();
        let label = name.as_str();
        let mut records: Vec<GateRecord> = stream::iter(items)
            .map(|item| judge(llm.clone(), prompts.clone(), item, args.samples, args.temperature))
            .buffered(args.concurrency.max(1))
            .enumerate()
            .map(|(i, record)| {
                eprint!("\r{label}: {}/{total}", i + 1);
                record
            })
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<hopwise_eval::Result<_>>()?;
        eprintln!();
        if !readers.is_empty() {
            let joined = join_reader(&mut records, &readers);
            eprintln!("{label}: {joined} of {total} items have a reader's answer");
            let points = sweep(&records);
            if !points.is_empty() {
                let stem = args.out.join(format!("gate-{name}"));
                if let Err(e) =
                    draw_sweep(&format!("{name}: a retrieval gate in front of the question"), &points, &stem)
                {
                    eprintln!("warning: sweep plot not drawn: {e}");
                }
            }
        }
        for r in &records {
            let mut line = serde_json::to_value(r)?;
            line["dataset"] = serde_json::Value::String(name.clone());
            writeln!(lines, "{line}")?;
        }
        report.push_str(&render_report(&records, &name));
        report.push('\n');
    }
    std::fs::write(args.out.join("gate.md"), &report)?;
    print!("{report}");
    Ok(ExitCode::SUCCESS)
}
