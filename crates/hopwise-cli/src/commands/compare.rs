//! `hopwise compare`: runs against a base run, question by question (a row against rtr, a re-run
//! against the run before, ablations against the full method), from their results files alone.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use hopwise_eval::compare::{compare_runs, render_markdown, select};
use hopwise_eval::{read_results, ResultRecord};

use crate::cli::CompareArgs;

/// A run directory stands for its `results.jsonl`; anything else (a file, `/dev/fd/N` from a shell
/// substitution such as `<(git show REV:path)`) is read as the results file itself.
fn results_of(path: &Path) -> Result<(PathBuf, Vec<ResultRecord>)> {
    let file = if path.is_dir() { path.join("results.jsonl") } else { path.to_path_buf() };
    if !file.exists() {
        bail!("{}: no such results file (give a results.jsonl or the run directory holding one)", file.display());
    }
    let (records, _) = read_results(&file)?;
    Ok((file, records))
}

/// A run's name: its directory (`.../2wikimultihopqa/toqd-no-rewrite`), given or holding the file
/// next to its `run.json`; `None` for a bare file (`/dev/fd/63` names nothing).
fn run_name(path: &Path) -> Option<String> {
    let dir = if path.is_dir() { Some(path) } else { path.parent().filter(|p| p.join("run.json").exists()) };
    dir?.canonicalize().ok()?.file_name().map(|n| n.to_string_lossy().into_owned())
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    let (base_file, base) = results_of(&args.base)?;
    let base = select(&base, "base", args.base_strategy.as_deref()).with_context(|| base_file.display().to_string())?;
    let mut comparisons = Vec::with_capacity(args.others.len());
    for path in &args.others {
        let (other_file, other) = results_of(path)?;
        let other = select(&other, "other", args.other_strategy.as_deref())
            .with_context(|| other_file.display().to_string())?;
        let mut comparison = compare_runs(&base, &other, args.metric, args.by)
            .with_context(|| format!("{} against {}", other_file.display(), base_file.display()))?;
        // One strategy on both sides (an ablation, a re-run): name the sides by their runs instead,
        // and fall back to base / other when those are the same too.
        if comparison.base_strategy == comparison.other_strategy {
            (comparison.base_label, comparison.other_label) = match (run_name(&args.base), run_name(path)) {
                (Some(b), Some(o)) if b != o => (b, o),
                _ => ("base".into(), "other".into()),
            };
        }
        comparisons.push(comparison);
    }
    // Several runs of one strategy against the base (re-runs, ablations): tell them apart by run.
    let labels: Vec<String> = comparisons.iter().map(|c| c.other_label.clone()).collect();
    for (comparison, path) in comparisons.iter_mut().zip(&args.others) {
        if labels.iter().filter(|l| **l == comparison.other_label).count() > 1 {
            if let Some(name) = run_name(path) {
                comparison.other_label = name;
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&comparisons)?);
    } else {
        print!("{}", render_markdown(&comparisons));
    }
    Ok(ExitCode::SUCCESS)
}
