//! Plots (SVG and PNG): accuracy against retrieval rounds per strategy, and accuracy per question
//! type; [`render`] draws any [`Figure`] to both formats (the cost-accuracy plots of the report use
//! it too). Text is drawn with a TrueType font found at run time (`HOPWISE_PLOT_FONT`, or a common
//! system font), so the build needs no system font libraries.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{EvalError, Result};
use crate::summary::Summary;

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

pub(crate) const FONT: &str = "sans-serif";

/// Registers a font for plot text once per process; the path used, or why none was found.
pub(crate) fn ensure_font() -> std::result::Result<&'static Path, String> {
    static REGISTERED: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let result = REGISTERED.get_or_init(|| {
        let from_env = std::env::var_os("HOPWISE_PLOT_FONT").map(PathBuf::from);
        let candidates = from_env.into_iter().chain(FONT_CANDIDATES.iter().map(PathBuf::from));
        for path in candidates {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                return Ok(path);
            }
        }
        Err("no TrueType font found for plot text; set HOPWISE_PLOT_FONT=/path/to/font.ttf".to_string())
    });
    result.as_ref().map(PathBuf::as_path).map_err(Clone::clone)
}

/// Draws every plot into `dir` as SVG and PNG. Returns notes for the user (empty when all drew).
pub fn draw_all(summary: &Summary, dir: &Path) -> Result<Vec<String>> {
    ensure_font().map_err(|message| EvalError::Plot { path: dir.to_path_buf(), message })?;
    std::fs::create_dir_all(dir).map_err(|e| EvalError::Write { path: dir.to_path_buf(), source: e })?;
    let mut notes = Vec::new();
    let rounds = dir.join("accuracy_vs_rounds");
    render(&rounds, (900, 600), &SummaryFigure { summary, kind: Kind::AccuracyVsRounds })?;
    for dataset in &summary.datasets {
        if summary.by_type.iter().filter(|c| &c.dataset == dataset).count() == 0 {
            continue;
        }
        let stem = dir.join(format!("per_type_{}", sanitize(dataset)));
        if let Err(e) = render(&stem, (1000, 600), &SummaryFigure { summary, kind: Kind::PerType(dataset) }) {
            notes.push(e.to_string());
        }
    }
    Ok(notes)
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Something drawable on any plotters backend, so one description yields both SVG and PNG.
pub(crate) trait Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> std::result::Result<(), String>
    where
        DB::ErrorType: 'static;
}

enum Kind<'a> {
    AccuracyVsRounds,
    PerType(&'a str),
}

struct SummaryFigure<'a> {
    summary: &'a Summary,
    kind: Kind<'a>,
}

impl Figure for SummaryFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> std::result::Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        match self.kind {
            Kind::AccuracyVsRounds => draw_accuracy_vs_rounds(root, self.summary),
            Kind::PerType(dataset) => draw_per_type(root, self.summary, dataset),
        }
    }
}

/// Draws one figure to `<stem>.svg` and `<stem>.png`.
pub(crate) fn render(stem: &Path, size: (u32, u32), figure: &impl Figure) -> Result<()> {
    let svg = stem.with_extension("svg");
    let png = stem.with_extension("png");
    let fail = |path: &Path, message: String| EvalError::Plot { path: path.to_path_buf(), message };
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        figure.draw(&root).map_err(|m| fail(&svg, m))?;
        root.present().map_err(|e| fail(&svg, e.to_string()))?;
    }
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        figure.draw(&root).map_err(|m| fail(&png, m))?;
        root.present().map_err(|e| fail(&png, e.to_string()))?;
    }
    Ok(())
}

pub(crate) fn color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

pub(crate) fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// One point per (strategy, dataset): mean retrieval rounds against accuracy; colour = dataset.
fn draw_accuracy_vs_rounds<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    summary: &Summary,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let max_rounds = summary.cells.iter().map(|c| c.retrieval_rounds).fold(1.0_f64, f64::max);
    let mut chart = ChartBuilder::on(root)
        .caption("Accuracy vs retrieval rounds", (FONT, 22))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..max_rounds * 1.25 + 0.25, 0.0..100.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("retrieval rounds per question")
        .y_desc("accuracy (%)")
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    let mut placed: Vec<(f64, f64)> = Vec::new();
    for (i, dataset) in summary.datasets.iter().enumerate() {
        let c = color(i);
        let mut points: Vec<(f64, f64, String, i32)> = Vec::new();
        for cell in summary.cells.iter().filter(|cell| cell.dataset.as_deref() == Some(dataset.as_str())) {
            let (x, y) = (cell.retrieval_rounds, 100.0 * cell.accuracy);
            // Stack the labels of points that coincide so they stay readable.
            let same = placed.iter().filter(|p| (p.0 - x).abs() < 1e-6 && (p.1 - y).abs() < 1e-6).count() as i32;
            placed.push((x, y));
            points.push((x, y, cell.strategy.clone(), same));
        }
        chart
            .draw_series(points.into_iter().map(move |(x, y, label, stack)| {
                EmptyElement::at((x, y))
                    + Circle::new((0, 0), 5, c.filled())
                    + Text::new(label, (8, -14 - 14 * stack), (FONT, 12))
            }))
            .map_err(err)?
            .label(dataset.clone())
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, c.filled()));
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Grouped bars: one group per question type, one bar per strategy.
fn draw_per_type<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    summary: &Summary,
    dataset: &str,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let cells: Vec<_> = summary.by_type.iter().filter(|c| c.dataset == dataset).collect();
    let mut types: Vec<&str> = cells.iter().map(|c| c.qtype.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    let strategies: Vec<&String> =
        summary.strategies.iter().filter(|s| cells.iter().any(|c| &c.strategy == *s)).collect();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(format!("Accuracy by question type: {dataset}"), (FONT, 22))
        .margin(20)
        .x_label_area_size(10)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..types.len() as f64, -10.0..100.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("accuracy (%)")
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    let width = 0.8 / strategies.len().max(1) as f64;
    for (si, strategy) in strategies.iter().enumerate() {
        let c = color(si);
        let bars: Vec<Rectangle<(f64, f64)>> = types
            .iter()
            .enumerate()
            .filter_map(|(ti, t)| {
                let cell = cells.iter().find(|x| &x.strategy == *strategy && x.qtype == *t)?;
                let x0 = ti as f64 + 0.1 + si as f64 * width;
                Some(Rectangle::new([(x0, 0.0), (x0 + width * 0.9, 100.0 * cell.accuracy)], c.filled()))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(strategy.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
    }
    let centered = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    chart
        .draw_series(
            types.iter().enumerate().map(|(i, t)| Text::new(t.to_string(), (i as f64 + 0.5, -5.0), centered.clone())),
        )
        .map_err(err)?;
    chart
        .configure_series_labels()
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{Cell, TypeCell};

    #[test]
    fn draws_svg_and_png_when_a_font_is_available() {
        if ensure_font().is_err() {
            eprintln!("skipping: no font on this machine");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let cell = |s: &str, d: &str, acc: f64, rounds: f64| Cell {
            strategy: s.into(),
            dataset: Some(d.into()),
            n: 2,
            accuracy: acc,
            retrieval_rounds: rounds,
            ..Default::default()
        };
        let summary = Summary {
            records: 4,
            strategies: vec!["cot".into(), "rtr".into()],
            datasets: vec!["hotpotqa".into()],
            cells: vec![cell("cot", "hotpotqa", 0.5, 0.0), cell("rtr", "hotpotqa", 0.75, 1.0)],
            overall: vec![],
            paired: vec![],
            config: None,
            by_type: vec![
                TypeCell {
                    strategy: "cot".into(),
                    dataset: "hotpotqa".into(),
                    qtype: "bridge".into(),
                    n: 1,
                    accuracy: 1.0,
                },
                TypeCell {
                    strategy: "rtr".into(),
                    dataset: "hotpotqa".into(),
                    qtype: "comparison".into(),
                    n: 1,
                    accuracy: 0.5,
                },
            ],
        };
        let notes = draw_all(&summary, dir.path()).expect("draw");
        assert!(notes.is_empty(), "{notes:?}");
        for f in ["accuracy_vs_rounds.svg", "accuracy_vs_rounds.png", "per_type_hotpotqa.svg", "per_type_hotpotqa.png"]
        {
            let bytes = std::fs::read(dir.path().join(f)).expect(f);
            assert!(bytes.len() > 500, "{f} is too small");
        }
        let svg = std::fs::read_to_string(dir.path().join("accuracy_vs_rounds.svg")).expect("svg");
        assert!(svg.contains("rtr") && svg.contains("hotpotqa"));
        let png = std::fs::read(dir.path().join("per_type_hotpotqa.png")).expect("png");
        assert_eq!(&png[1..4], b"PNG");
    }
}
