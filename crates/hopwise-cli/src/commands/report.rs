//! `hopwise report`: regenerates the results section of EVALUATION.md from results/.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use hopwise_eval::report::{write_report, Placement, ReportConfig};

use crate::cli::ReportArgs;

/// The command as a reader would type it again, quoted in the generated section.
fn command_line(args: &ReportArgs) -> String {
    let mut line = format!("hopwise report {} --out {}", args.results.display(), args.out.display());
    if let Some(plan) = &args.plan {
        line.push_str(&format!(" --plan {}", plan.display()));
    }
    if let Some(plots) = &args.plots {
        line.push_str(&format!(" --plots {}", plots.display()));
    }
    line
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let doc_dir =
        args.out.parent().filter(|p| !p.as_os_str().is_empty()).map_or_else(|| PathBuf::from("."), PathBuf::from);
    let config = ReportConfig {
        plan: args.plan.clone().unwrap_or_else(|| args.results.join("plan.tsv")),
        plots_dir: args.plots.clone().unwrap_or_else(|| doc_dir.join("docs").join("results")),
        results_dir: args.results.clone(),
        out: args.out.clone(),
        command: command_line(&args),
    };
    let outcome =
        write_report(&config).with_context(|| format!("writing the results section of {}", args.out.display()))?;
    for note in &outcome.notes {
        eprintln!("warning: {note}");
    }
    if args.json {
        let plots: Vec<String> = outcome.plots.iter().map(|p| p.display().to_string()).collect();
        println!(
            "{}",
            serde_json::json!({"rows": outcome.rows, "plots": plots, "out": args.out, "appended": outcome.placement == Placement::Appended, "notes": outcome.notes})
        );
    } else {
        let how = match outcome.placement {
            Placement::Replaced => "rewrote the results section of",
            Placement::Appended => "appended a results section (with its markers) to",
        };
        eprintln!("{} rows, {} plots; {how} {}", outcome.rows, outcome.plots.len(), args.out.display());
    }
    Ok(ExitCode::SUCCESS)
}
