//! `hopwise index`: build or update a BM25 index.

use std::process::ExitCode;

use anyhow::Result;
use hopwise_config::Config;
use hopwise_index::{build_index, ChunkOptions, IndexOptions, IndexProgressBar};

use crate::cli::IndexArgs;

pub fn run(config: &Config, args: IndexArgs) -> Result<ExitCode> {
    let dir = args.index.clone().unwrap_or_else(|| config.index_dir());
    let opts = IndexOptions {
        chunking: ChunkOptions { window_tokens: args.chunk_tokens, overlap_tokens: args.overlap },
        ..IndexOptions::default()
    };
    let bar = if args.json { IndexProgressBar::hidden() } else { IndexProgressBar::new() };
    let report = build_index(&args.paths, &dir, &opts, &|p| bar.update(&p))?;
    bar.finish();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for issue in report.skipped.iter().chain(report.warnings.iter()) {
            eprintln!("warning: {issue}");
        }
        if report.skipped_total > report.skipped.len() as u64 {
            eprintln!("warning: … and {} more skipped", report.skipped_total - report.skipped.len() as u64);
        }
        println!(
            "indexed {} passages from {} documents into {} in {:.1} s ({} replaced, {} skipped, {} empty; {} in the index)",
            report.passages_indexed,
            report.documents,
            report.index_dir.display(),
            report.seconds,
            report.passages_replaced,
            report.skipped_total,
            report.empty_documents,
            report.passages_total
        );
    }
    Ok(ExitCode::SUCCESS)
}
