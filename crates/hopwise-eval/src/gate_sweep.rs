//! A retrieval gate in front of a question, end to end: where the gate retrieves, the question gets
//! the reader's answer and pays its rounds and calls (a run with retrieval on the same question, such
//! as retrieve-then-read or ToQD, joined by example id); where it does not, the gate's own
//! closed-book answer. Sweeping θ per estimator traces accuracy against retrieval
//! rounds per question; the `NO!` gate, always retrieving and never retrieving are single points.

use std::fmt::Write;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{EvalError, Result};
#[cfg(test)]
use crate::gate_eval::ReaderAnswer;
use crate::gate_eval::{uncertainty_retrieves, GateRecord, Scored};
use crate::plots::{color, ensure_font, err, render, Figure, FONT};

/// The estimators the sweep traces (those the gate compares short answers with).
pub const SWEPT: [&str; 3] = ["deg-jaccard", "eigv", "ecc"];

/// One gate (at one threshold) over the items that have a reader's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// `NO!`, `always`, `never`, or the estimator's name.
    pub gate: String,
    pub threshold: Option<f64>,
    /// Retrieval rounds per question: the reader's, on the items the gate retrieves for.
    pub rounds: f64,
    /// LLM calls per question: the gate's own, plus the reader's where it retrieves.
    pub calls: f64,
    pub cover_em: f64,
    pub f1: f64,
}

fn point(
    records: &[&GateRecord],
    gate: &str,
    threshold: Option<f64>,
    gate_calls: f64,
    retrieves: impl Fn(&GateRecord) -> bool,
    kept: impl Fn(&GateRecord) -> &Scored,
) -> SweepPoint {
    let (mut rounds, mut calls, mut cover_em, mut f1) = (0.0, 0.0, 0.0, 0.0);
    for r in records {
        calls += gate_calls;
        let answer = match &r.reader {
            Some(read) if retrieves(r) => {
                rounds += read.retrieval_rounds;
                calls += read.llm_calls;
                &read.scored
            }
            _ => kept(r),
        };
        cover_em += answer.cover_em;
        f1 += answer.f1;
    }
    let n = records.len().max(1) as f64;
    SweepPoint {
        gate: gate.to_string(),
        threshold,
        rounds: rounds / n,
        calls: calls / n,
        cover_em: cover_em / n,
        f1: f1 / n,
    }
}

/// The fixed points and every distinct threshold of each estimator, over the records that have a
/// reader's answer (none when no record has one).
pub fn sweep(records: &[GateRecord]) -> Vec<SweepPoint> {
    let with: Vec<&GateRecord> = records.iter().filter(|r| r.reader.is_some()).collect();
    if with.is_empty() {
        return Vec::new();
    }
    let mut points = vec![
        point(&with, "never", None, 1.0, |_| false, |r| &r.greedy),
        point(&with, "always", None, 0.0, |_| true, |r| &r.greedy),
        point(&with, "NO!", None, 1.0, |r| r.said_no, |r| &r.self_verify_answer),
    ];
    for estimator in SWEPT {
        let mut values: Vec<f64> = with.iter().filter_map(|r| r.uncertainty.get(estimator).copied()).collect();
        values.sort_by(f64::total_cmp);
        values.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
        // Below the smallest value every item retrieves; at each value the items up to it stop.
        let below = values.first().map(|v| v - 1e-3);
        for theta in below.into_iter().chain(values) {
            let retrieves = |r: &GateRecord| uncertainty_retrieves(r, estimator, theta);
            points.push(point(&with, estimator, Some(theta), 1.0, retrieves, |r| &r.vote));
        }
    }
    points
}

/// The sweep as Markdown: the fixed points, each estimator's thresholds, and per estimator the
/// fewest rounds within 2 points F1 of always retrieving.
pub fn render_sweep(points: &[SweepPoint], items: usize) -> String {
    let mut out = String::new();
    let Some(always) = points.iter().find(|p| p.gate == "always") else {
        return out;
    };
    let _ = writeln!(
        out,
        "\nEnd to end over the {items} items with a reader's answer (where the gate retrieves, the \
         reader's answer, rounds and calls; elsewhere the gate's closed-book answer; `always` is the \
         reader alone, `never` the greedy closed-book answer):\n"
    );
    let _ = writeln!(
        out,
        "| gate | θ | retrieval rounds / question | LLM calls / question | cover-EM | F1 | Δ F1 vs always (pp) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for p in points {
        let theta = p.threshold.map(|t| format!("{t:.3}")).unwrap_or_else(|| "–".into());
        let _ = writeln!(
            out,
            "| {} | {theta} | {:.2} | {:.2} | {:.1} | {:.1} | {:+.1} |",
            p.gate,
            p.rounds,
            p.calls,
            100.0 * p.cover_em,
            100.0 * p.f1,
            100.0 * (p.f1 - always.f1)
        );
    }
    let _ = writeln!(out, "\nFewest retrieval rounds at most 2 points F1 below always retrieving:\n");
    for gate in ["NO!"].into_iter().chain(SWEPT) {
        let best = points
            .iter()
            .filter(|p| p.gate == gate && p.f1 >= always.f1 - 0.02 - 1e-9)
            .min_by(|a, b| a.rounds.total_cmp(&b.rounds));
        let line = match best {
            Some(p) => format!(
                "- {gate}: {:.2} rounds{} ({:.0}% of always), F1 {:.1}",
                p.rounds,
                p.threshold.map(|t| format!(" at θ = {t:.3}")).unwrap_or_default(),
                100.0 * p.rounds / always.rounds.max(1e-9),
                100.0 * p.f1
            ),
            None => format!("- {gate}: no point within 2 points F1"),
        };
        let _ = writeln!(out, "{line}");
    }
    out
}

struct SweepFigure<'a> {
    title: &'a str,
    points: &'a [SweepPoint],
}

impl Figure for SweepFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> std::result::Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(err)?;
        // Room for the rightmost label and for the legend under the highest point.
        let x_max = self.points.iter().map(|p| p.rounds).fold(1.0, f64::max) * 1.12;
        let y_max = (self.points.iter().map(|p| 100.0 * p.cover_em).fold(0.0, f64::max) * 1.25 + 5.0).min(100.0);
        let mut chart = ChartBuilder::on(root)
            .caption(self.title, (FONT, 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.02..x_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("retrieval rounds per question")
            .y_desc("cover-EM (%)")
            .label_style((FONT, 13))
            .light_line_style(WHITE)
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(err)?;
        for (i, estimator) in SWEPT.iter().enumerate() {
            let mut line: Vec<(f64, f64)> =
                self.points.iter().filter(|p| p.gate == *estimator).map(|p| (p.rounds, 100.0 * p.cover_em)).collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            let style = color(i + 1);
            chart
                .draw_series(LineSeries::new(line.clone(), style.stroke_width(2)))
                .map_err(err)?
                .label(format!("{estimator}, θ swept"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style.stroke_width(2)));
            chart.draw_series(line.into_iter().map(|at| Circle::new(at, 3, style.filled()))).map_err(err)?;
        }
        for p in self.points.iter().filter(|p| p.threshold.is_none()) {
            let at = (p.rounds, 100.0 * p.cover_em);
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at(at)
                        + Circle::new((0, 0), 6, color(0).filled())
                        + Text::new(p.gate.clone(), (8, -14), (FONT, 13)),
                ))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

/// Draws the sweep to `<stem>.svg` and `<stem>.png`. Needs at least one point.
pub fn draw_sweep(title: &str, points: &[SweepPoint], stem: &Path) -> Result<()> {
    if points.is_empty() {
        return Err(EvalError::Plot { path: stem.to_path_buf(), message: "no items with a reader's answer".into() });
    }
    ensure_font().map_err(|message| EvalError::Plot { path: stem.to_path_buf(), message })?;
    render(stem, (900, 560), &SweepFigure { title, points })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate_eval::GateItem;

    fn scored(right: bool) -> Scored {
        Scored {
            answer: if right { "a" } else { "b" }.into(),
            cover_em: f64::from(u8::from(right)),
            f1: f64::from(u8::from(right)),
        }
    }

    fn record(closed_book_right: bool, reader_right: Option<bool>, said_no: bool, u: f64) -> GateRecord {
        GateRecord {
            item: GateItem { id: "x".into(), question: "q".into(), gold: vec!["a".into()], kind: "question".into() },
            greedy: scored(closed_book_right),
            self_verify: String::new(),
            said_no,
            self_verify_answer: if said_no { Scored::default() } else { scored(closed_book_right) },
            samples: Vec::new(),
            uncertainty: [("deg-jaccard".to_string(), u)].into_iter().collect(),
            vote: scored(closed_book_right),
            vote_share: 1.0,
            reader: reader_right.map(|right| ReaderAnswer {
                scored: scored(right),
                retrieval_rounds: 2.0,
                llm_calls: 3.0,
            }),
        }
    }

    #[test]
    fn a_gate_answers_with_the_reader_where_it_retrieves_and_closed_book_elsewhere() {
        // Closed-book right and sure; closed-book wrong and unsure, the reader right; both wrong;
        // and one item without a reader's answer, left out.
        let records = [
            record(true, Some(false), false, 0.0),
            record(false, Some(true), true, 0.8),
            record(false, Some(false), false, 0.2),
            record(true, None, false, 0.0),
        ];
        let points = sweep(&records);
        let find = |gate: &str, theta: Option<f64>| {
            points
                .iter()
                .find(|p| p.gate == gate && p.threshold.is_none_or(|t| theta.is_some_and(|x| (t - x).abs() < 1e-9)))
                .cloned()
                .expect("point")
        };
        let third = 1.0 / 3.0;
        assert_eq!((find("never", None).rounds, find("never", None).cover_em), (0.0, third));
        // The reader takes 2 rounds and 3 calls per question.
        let always = find("always", None);
        assert_eq!((always.rounds, always.calls, always.cover_em), (2.0, 3.0, third));
        let no = find("NO!", None);
        assert!((no.rounds - 2.0 * third).abs() < 1e-9 && (no.cover_em - 2.0 * third).abs() < 1e-9, "{no:?}");
        assert!((no.calls - 2.0).abs() < 1e-9, "one call each, the reader's three for one: {no:?}");
        // θ = 0.2: only the unsure item retrieves — the best of both.
        let at = find("deg-jaccard", Some(0.2));
        assert!((at.rounds - 2.0 * third).abs() < 1e-9 && (at.cover_em - 2.0 * third).abs() < 1e-9, "{at:?}");
        // Below the smallest U everything retrieves.
        let most = points.iter().filter(|p| p.gate == "deg-jaccard").map(|p| p.rounds).fold(0.0, f64::max);
        assert_eq!(most, 2.0);
        let text = render_sweep(&points, 3);
        assert!(text.contains("| NO! | – | 0.67 | 2.00 | 66.7 | 66.7 | +33.3 |"), "{text}");
        assert!(text.contains("- deg-jaccard: 0.00 rounds"), "{text}");
        assert!(sweep(&records[3..]).is_empty(), "no reader, no sweep");
    }

    #[test]
    fn draws_both_formats() {
        if ensure_font().is_err() {
            eprintln!("skipping: no font on this machine");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let records = [record(true, Some(false), false, 0.0), record(false, Some(true), true, 0.8)];
        let stem = dir.path().join("gate-hotpotqa");
        draw_sweep("HotpotQA questions", &sweep(&records), &stem).expect("draw");
        let svg = std::fs::read_to_string(stem.with_extension("svg")).expect("svg");
        assert!(svg.contains("NO!") && svg.contains("deg-jaccard"), "labels drawn");
        assert!(draw_sweep("x", &[], &stem).is_err());
    }
}
