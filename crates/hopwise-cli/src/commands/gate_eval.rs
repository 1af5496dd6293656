//! `hopwise gate-eval`: how well each retrieval gate tells the questions (or single-hop steps) the
//! model gets wrong closed-book from those it gets right (hopwise_eval::gate_eval), and with
//! `--reader`, what the gate in front of a reader costs and scores end to end
//! (hopwise_eval::gate_sweep). `--records` recomputes the report from an earlier run's records
//! without a model.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use futures::stream::{self, StreamExt};
use hopwise_config::Config;
use hopwise_core::Llm;
use hopwise_eval::gate_eval::{gate_items, join_reader, judge, render_report, GateRecord, ItemKind};
use hopwise_eval::gate_sweep::{draw_sweep, sweep};

use crate::cli::{GateEvalArgs, GateItems};
use crate::runtime::{self, Needs};

pub async fn run(config: Config, args: GateEvalArgs) -> Result<ExitCode> {
    if args.samples < 2 {
        bail!("--samples must be at least 2 (the estimators compare samples)");
    }
    let mut readers = Vec::new();
    for path in &args.reader {
        if !path.is_file() {
            bail!("--reader {}: no such results file", path.display());
        }
        readers.extend(hopwise_eval::results::read_results(path)?.0);
    }
    let mut reader_names: Vec<&str> = readers.iter().map(|r| r.strategy.as_str()).collect();
    reader_names.dedup();
    let reader_name = reader_names.join(" + ");
    let (sets, header) = match &args.records {
        Some(path) => (read_records(path)?, format!("Recomputed from `{}`.\n\n", path.display())),
        None => {
            let (sets, model) = judge_all(&config, &args).await?;
            (sets, format!("Model `{model}`, {} samples at temperature {}.\n\n", args.samples, args.temperature))
        }
    };
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut lines = std::fs::File::create(args.out.join("gate.jsonl")).context("gate.jsonl")?;
    let mut report = format!("# Retrieval gates against the closed-book oracle\n\n{header}");
    for (name, mut records) in sets {
        if !readers.is_empty() {
            let joined = join_reader(&mut records, &readers);
            eprintln!("{name}: {joined} of {} items have a reader's answer", records.len());
            let points = sweep(&records);
            if !points.is_empty() {
                let stem = args.out.join(format!("gate-{name}"));
                let title = format!("{name}: a retrieval gate in front of {reader_name}");
                if let Err(e) = draw_sweep(&title, &points, &stem) {
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

/// Asks the model about every item of every `--dataset`; the records per dataset, and the model's name.
async fn judge_all(config: &Config, args: &GateEvalArgs) -> Result<(Vec<(String, Vec<GateRecord>)>, String)> {
    if args.dataset.is_empty() {
        bail!("give --dataset (items to ask the model about) or --records (an earlier run's gate.jsonl)");
    }
    let kind = match args.items {
        GateItems::Auto => ItemKind::Auto,
        GateItems::Questions => ItemKind::Questions,
    };
    let mut sets = Vec::new();
    for path in &crate::commands::data::resolve_datasets(config, &args.dataset)? {
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        sets.push((name, gate_items(path, args.limit, kind)?));
    }
    // The same runtime as `ask` (its model, cache, prompts and defaults), without a retriever: the
    // items are asked closed-book.
    let needs = Needs { cache: !args.no_cache, progress: true, ..Needs::default() };
    let runtime = runtime::build(config, &needs).await?;
    let mut out = Vec::new();
    for (name, items) in sets {
        let total = items.len();
        let label = name.as_str();
        let records: Vec<GateRecord> = stream::iter(items)
            .map(|item| judge(&runtime, item, args.samples, args.temperature))
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
        out.push((name, records));
    }
    Ok((out, runtime.llm().name().to_string()))
}

/// An earlier run's `gate.jsonl`, grouped by its `dataset` field in order of first appearance.
fn read_records(path: &Path) -> Result<Vec<(String, Vec<GateRecord>)>> {
    let file = std::fs::File::open(path).with_context(|| format!("--records {}", path.display()))?;
    let mut sets: Vec<(String, Vec<GateRecord>)> = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("{} line {}: not JSON", path.display(), n + 1))?;
        let dataset = value["dataset"].as_str().unwrap_or("items").to_string();
        let mut record: GateRecord = serde_json::from_value(value)
            .with_context(|| format!("{} line {}: not a gate record", path.display(), n + 1))?;
        // The reader is joined again from --reader; an old one would outlive a changed results file.
        record.reader = None;
        match sets.iter_mut().find(|(name, _)| *name == dataset) {
            Some((_, records)) => records.push(record),
            None => sets.push((dataset, vec![record])),
        }
    }
    if sets.is_empty() {
        bail!("--records {}: no records", path.display());
    }
    Ok(sets)
}
