//! `hopwise report`: regenerates the results section of EVALUATION.md from `results/`.
//!
//! - [`plan`]: reads `results/plan.tsv` (row order, planned questions, options).
//! - [`scan`]: finds `results/<model>/<dataset>/<row>/results.jsonl` and its `run.json`, `sessions.jsonl`.
//! - [`tables`]: main and ablation tables per dataset, paired comparisons with `rtr`.
//! - [`render`]: the Markdown; [`splice`]: puts it between the marker comments of the document.
//!
//! The cost-accuracy plots ([`crate::cost_plot`]) are drawn per model and dataset into the plots
//! directory and linked from the section.

pub mod calibration;
pub mod plan;
pub mod render;
pub mod scan;
pub mod splice;
pub mod tables;

use std::path::{Path, PathBuf};

use crate::cost_plot::{draw_cost_accuracy, CostPoint};
use crate::data::registry::display_name;
use crate::error::{EvalError, Result};
use crate::results::write_atomic;
pub use splice::Placement;

/// What to read and where to write.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// The `results/` folder.
    pub results_dir: PathBuf,
    /// `results/plan.tsv` (row order, planned questions).
    pub plan: PathBuf,
    /// The document whose marked section is rewritten (created if missing).
    pub out: PathBuf,
    /// Where the cost-accuracy plots go (a folder inside the repository, linked relatively).
    pub plots_dir: PathBuf,
    /// The command line, quoted in the section so readers know how to regenerate it.
    pub command: String,
}

#[derive(Debug, Clone)]
pub struct ReportOutcome {
    /// Rows found with results.
    pub rows: usize,
    /// Plot files written (PNG and SVG stems).
    pub plots: Vec<PathBuf>,
    pub placement: Placement,
    /// Plots that could not be drawn (e.g. no font), reported rather than failing the report.
    pub notes: Vec<String>,
}

/// `target` relative to `base` when it lies inside it, else `target` as given. Only the folders
/// need to exist (a plot stem has no file of its own).
fn relative_to(base: &Path, target: &Path) -> String {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let full = match (target.parent(), target.file_name()) {
        (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => canon(dir).join(name),
        _ => target.to_path_buf(),
    };
    full.strip_prefix(canon(base)).map(Path::to_path_buf).unwrap_or(full).to_string_lossy().replace('\\', "/")
}

/// One point per main-table row that has answered every question planned for it: a row part-way
/// through is measured on other questions than the rows beside it, so its place on the Pareto front
/// would compare unlike things. Rows found on disk but not in the plan have nothing left to run.
fn plot_points(table: &tables::Table) -> Vec<CostPoint> {
    table
        .rows
        .iter()
        .filter(|r| r.planned.is_none() || r.is_complete())
        .filter_map(|r| {
            r.cell.as_ref().map(|c| CostPoint {
                label: r.label.clone(),
                accuracy: c.em,
                seconds: c.seconds,
                tokens: c.prompt_tokens + c.completion_tokens,
            })
        })
        .collect()
}

/// Draws the cost-accuracy plot of every (model, dataset) with main-table results; returns the
/// links by (model, dataset) and the stems drawn.
fn draw_plots(
    models: &[tables::ModelReport],
    config: &ReportConfig,
    notes: &mut Vec<String>,
) -> (render::PlotLinks, Vec<PathBuf>) {
    let mut links = render::PlotLinks::new();
    let mut drawn = Vec::new();
    let doc_dir = config.out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    for m in models {
        for d in &m.datasets {
            let points = plot_points(&d.main);
            if points.is_empty() {
                continue;
            }
            let (file, range) = match m.range {
                scan::Range::Tuning => (format!("{}-cost", d.dataset), String::new()),
                scan::Range::Test => (format!("test-{}-cost", d.dataset), " (test range)".to_string()),
            };
            let stem = config.plots_dir.join(&m.model).join(file);
            let title = format!("{}{range} · {}: EM against cost per question", display_name(&d.dataset), m.model);
            match draw_cost_accuracy(&title, &points, &stem) {
                Ok(()) => {
                    links.insert((m.model.clone(), m.range, d.dataset.clone()), relative_to(doc_dir, &stem));
                    drawn.push(stem);
                }
                Err(e) => notes.push(e.to_string()),
            }
        }
    }
    (links, drawn)
}

/// A note for each row whose results hold records the tables leave out: records labelled with a
/// strategy other than the row's, or with another dataset than the row's folder.
fn left_out_records(models: &[tables::ModelReport]) -> Vec<String> {
    let mut notes = std::collections::BTreeSet::new();
    for d in models.iter().flat_map(|m| &m.datasets) {
        for row in std::iter::once(&d.main).chain(&d.ablations).flat_map(|t| &t.rows) {
            let Some(found) = row.results else { continue };
            let foreign =
                found.records.iter().filter(|r| r.strategy != row.strategy || r.dataset != found.dataset).count();
            if foreign > 0 {
                notes.insert(format!(
                    "{}: {foreign} of {} records are labelled with another strategy than `{}` or another dataset than `{}`; the tables leave them out",
                    found.dir.display(),
                    found.records.len(),
                    row.strategy,
                    found.dataset
                ));
            }
        }
    }
    notes.into_iter().collect()
}

/// Reads `results/`, draws the plots and rewrites the marked section of the document.
pub fn write_report(config: &ReportConfig) -> Result<ReportOutcome> {
    let plan = plan::read_plan(&config.plan)?;
    let found = scan::scan(&config.results_dir)?;
    let models = tables::build(&plan, &found);
    let mut notes = left_out_records(&models);
    let (links, plots) = draw_plots(&models, config, &mut notes);
    let section = render::render_section(&models, &links, &config.command);
    let document = match std::fs::read_to_string(&config.out) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(EvalError::Read { path: config.out.clone(), source: e }),
    };
    let (updated, placement) = splice::splice(&document, &section)
        .map_err(|message| EvalError::Report { path: config.out.clone(), message })?;
    write_atomic(&config.out, updated.as_bytes())?;
    Ok(ReportOutcome { rows: found.len(), plots, placement, notes })
}
