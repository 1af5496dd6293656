//! How well a row's confidences predict its accuracy: the records that carry the confidence their
//! strategy gave its answer (HGOT's citation-weighted vote, ToQD's reading vote) in equal-width
//! bins, each with its mean confidence and its EM, and the expected calibration error (the
//! bins' |confidence − EM| weighted by their share of the records).

use std::fmt::Write;

use crate::results::ResultRecord;

/// Equal-width confidence bins over [0, 1].
pub const BINS: usize = 5;

/// One bin: records in it, their mean confidence, their EM (both in [0, 1]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bin {
    pub n: usize,
    pub confidence: f64,
    pub em: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reliability {
    /// Records with a confidence.
    pub n: usize,
    pub bins: [Bin; BINS],
    /// Expected calibration error, in [0, 1].
    pub ece: f64,
}

/// The reliability of `records`' confidences, or `None` when none carries one.
pub fn reliability(records: &[&ResultRecord]) -> Option<Reliability> {
    let scored: Vec<(f64, f64)> = records
        .iter()
        .filter_map(|r| r.confidence.filter(|c| c.is_finite()).map(|c| (c.clamp(0.0, 1.0), r.metrics.em)))
        .collect();
    if scored.is_empty() {
        return None;
    }
    let mut bins = [Bin::default(); BINS];
    for &(confidence, em) in &scored {
        // Truncation picks the bin; a confidence of exactly 1 belongs to the top one.
        let b = ((confidence * BINS as f64) as usize).min(BINS - 1);
        bins[b].n += 1;
        bins[b].confidence += confidence;
        bins[b].em += em;
    }
    let n = scored.len();
    let mut ece = 0.0;
    for bin in bins.iter_mut().filter(|b| b.n > 0) {
        bin.confidence /= bin.n as f64;
        bin.em /= bin.n as f64;
        ece += bin.n as f64 / n as f64 * (bin.confidence - bin.em).abs();
    }
    Some(Reliability { n, bins, ece })
}

/// A table with one line per row: its records with a confidence, its ECE, and each bin's EM with
/// its count.
pub fn render(out: &mut String, rows: &[(String, Reliability)]) {
    let edges: Vec<String> =
        (0..BINS).map(|i| format!("{:.1}–{:.1}", i as f64 / BINS as f64, (i + 1) as f64 / BINS as f64)).collect();
    let _ = writeln!(out, "| row | n | ECE | {} |", edges.join(" | "));
    let _ = writeln!(out, "|---|---:|---:|{}", "---:|".repeat(BINS));
    for (label, r) in rows {
        let cells: Vec<String> = r
            .bins
            .iter()
            .map(|b| if b.n == 0 { "–".to_string() } else { format!("{:.0} ({})", b.em * 100.0, b.n) })
            .collect();
        let _ = writeln!(out, "| {label} | {} | {:.3} | {} |", r.n, r.ece, cells.join(" | "));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::scored_record;

    fn with_confidence(id: &str, confidence: Option<f64>, em: f64) -> ResultRecord {
        let mut r = scored_record("d", id, "hgot", em, em);
        r.confidence = confidence;
        r
    }

    #[test]
    fn bins_hold_their_records_and_the_error_weighs_each_bin_by_its_share() {
        let records = [
            with_confidence("a", Some(0.9), 1.0),
            with_confidence("b", Some(1.0), 0.0),
            with_confidence("c", Some(0.1), 0.0),
            with_confidence("d", Some(0.1), 0.0),
            with_confidence("e", None, 1.0),
        ];
        let refs: Vec<&ResultRecord> = records.iter().collect();
        let r = reliability(&refs).expect("four records carry a confidence");
        assert_eq!(r.n, 4);
        assert_eq!((r.bins[4].n, r.bins[0].n), (2, 2));
        assert!((r.bins[4].confidence - 0.95).abs() < 1e-9 && (r.bins[4].em - 0.5).abs() < 1e-9);
        // Top bin |0.95 - 0.5| and bottom bin |0.1 - 0|, each half of the records.
        assert!((r.ece - (0.5 * 0.45 + 0.5 * 0.1)).abs() < 1e-9, "{}", r.ece);
        let mut out = String::new();
        render(&mut out, &[("hgot".into(), r)]);
        assert!(out.contains("| hgot | 4 | 0.275 | 0 (2) | – | – | – | 50 (2) |"), "{out}");
        assert!(reliability(&[&records[4]]).is_none(), "no confidence, no table");
    }
}
