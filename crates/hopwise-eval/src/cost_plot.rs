//! The cost-accuracy plot of one dataset: accuracy against seconds per question (left) and against
//! tokens per question (right), one labelled point per row, the Pareto front of each panel joined
//! by a line and drawn filled (points off the front are hollow). Both cost axes are logarithmic:
//! the strategies span two orders of magnitude.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{EvalError, Result};
use crate::plots::{color, ensure_font, err, render, Figure, FONT};

/// One row of a results table, placed by its cost and accuracy.
#[derive(Debug, Clone, PartialEq)]
pub struct CostPoint {
    pub label: String,
    /// Headline accuracy, 0–1.
    pub accuracy: f64,
    pub seconds: f64,
    /// Prompt + completion tokens per question.
    pub tokens: f64,
}

/// Indices of the points no other point beats on both axes (cost no higher and accuracy no lower,
/// one of them strictly), ordered by cost.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<usize> {
    let dominated = |i: usize| {
        let (cost, acc) = points[i];
        points.iter().any(|&(c, a)| c <= cost && a >= acc && (c < cost || a > acc))
    };
    let mut front: Vec<usize> = (0..points.len()).filter(|&i| !dominated(i)).collect();
    front.sort_by(|&a, &b| points[a].0.total_cmp(&points[b].0));
    front
}

struct CostFigure<'a> {
    title: &'a str,
    points: &'a [CostPoint],
}

impl Figure for CostFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> std::result::Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(self.title, (FONT, 22)).map_err(err)?;
        let (left, right) = root.split_horizontally(root.dim_in_pixel().0 / 2);
        let seconds: Vec<(f64, f64)> = self.points.iter().map(|p| (p.seconds, p.accuracy)).collect();
        let tokens: Vec<(f64, f64)> = self.points.iter().map(|p| (p.tokens, p.accuracy)).collect();
        panel(&left, self.points, &seconds, "seconds per question (log)")?;
        panel(&right, self.points, &tokens, "tokens per question, prompt + completion (log)")
    }
}

/// A log axis range around the values, with room for labels.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo > hi { (1.0, 10.0) } else { (lo.max(1e-3), hi.max(1e-3)) };
    (lo / 1.6, hi * 2.5)
}

/// Labels only the 1-2-5 ticks of a log axis, so neighbouring labels never run together.
fn log_tick(v: &f64) -> String {
    if *v <= 0.0 {
        return String::new();
    }
    let leading = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|d| (leading - d).abs() < 1e-6) {
        if *v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v}")
        }
    } else {
        String::new()
    }
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    points: &[CostPoint],
    placed: &[(f64, f64)],
    x_desc: &str,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (lo, hi) = log_range(placed.iter().map(|p| p.0));
    let mut chart = ChartBuilder::on(area)
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..100.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("EM (%)")
        .label_style((FONT, 13))
        .light_line_style(WHITE)
        .x_labels(12)
        .x_label_formatter(&log_tick)
        .y_labels(11)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    let front = pareto_front(placed);
    let line: Vec<(f64, f64)> = front.iter().map(|&i| (placed[i].0.max(1e-3), 100.0 * placed[i].1)).collect();
    chart.draw_series(LineSeries::new(line, color(0).stroke_width(2))).map_err(err)?;
    for (i, (point, &(x, acc))) in points.iter().zip(placed).enumerate() {
        let style = if front.contains(&i) { color(0).filled() } else { color(0).stroke_width(2) };
        let at = (x.max(1e-3), 100.0 * acc);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at(at)
                    + Circle::new((0, 0), 5, style)
                    + Text::new(point.label.clone(), (8, -14), (FONT, 12)),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// Draws the plot to `<stem>.svg` and `<stem>.png`. Needs at least one point.
pub fn draw_cost_accuracy(title: &str, points: &[CostPoint], stem: &Path) -> Result<()> {
    if points.is_empty() {
        return Err(EvalError::Plot { path: stem.to_path_buf(), message: "no rows with results to plot".into() });
    }
    ensure_font().map_err(|message| EvalError::Plot { path: stem.to_path_buf(), message })?;
    if let Some(parent) = stem.parent() {
        std::fs::create_dir_all(parent).map_err(|e| EvalError::Write { path: parent.to_path_buf(), source: e })?;
    }
    render(stem, (1300, 560), &CostFigure { title, points })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_keeps_only_undominated_points_in_cost_order() {
        // direct: cheap, weak; rtr: more, better; toqd: dearer, worse than rtr; hgot: dearest, best.
        let points = [(5.0, 0.2), (30.0, 0.4), (300.0, 0.3), (900.0, 0.5), (30.0, 0.4)];
        assert_eq!(pareto_front(&points), vec![0, 1, 4, 3], "toqd is dominated by rtr; ties both stay");
        assert_eq!(pareto_front(&[]), Vec::<usize>::new());
        assert_eq!(pareto_front(&[(1.0, 0.0)]), vec![0]);
    }

    #[test]
    fn a_cheaper_point_at_equal_accuracy_dominates() {
        assert_eq!(pareto_front(&[(10.0, 0.5), (20.0, 0.5)]), vec![0]);
    }

    #[test]
    fn draws_both_formats_with_every_label() {
        if ensure_font().is_err() {
            eprintln!("skipping: no font on this machine");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let point = |label: &str, accuracy: f64, seconds: f64, tokens: f64| CostPoint {
            label: label.into(),
            accuracy,
            seconds,
            tokens,
        };
        let points =
            [point("direct", 0.2, 4.0, 120.0), point("rtr", 0.42, 60.0, 900.0), point("toqd", 0.3, 500.0, 9000.0)];
        let stem = dir.path().join("nested/hotpotqa-cost");
        draw_cost_accuracy("HotpotQA", &points, &stem).expect("draw");
        let svg = std::fs::read_to_string(stem.with_extension("svg")).expect("svg");
        for label in ["direct", "rtr", "toqd", "HotpotQA", "seconds per question"] {
            assert!(svg.contains(label), "{label} missing from the svg");
        }
        let png = std::fs::read(stem.with_extension("png")).expect("png");
        assert_eq!(&png[1..4], b"PNG");
        assert!(draw_cost_accuracy("x", &[], &stem).is_err());
    }
}
