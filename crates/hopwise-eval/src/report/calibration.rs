//! How well a row's confidences predict its accuracy: the records that carry the confidence their
//! strategy gave its answer (HGOT's citation-weighted vote, ToQD's reading vote) in equal-width
//! bins, each with its mean confidence and its EM, and the expected calibration error (the
//! bins' |confidence − EM| weighted by their share of the records), and whether accuracy rises
//! with confidence: the EM of the highest well-filled bin minus that of the lowest, with its
//! bootstrap interval.

use std::fmt::Write;

use crate::bootstrap::{self, Interval};
use crate::results::ResultRecord;

/// Equal-width confidence bins over [0, 1].
pub const BINS: usize = 5;

/// Records a bin needs before its EM enters the rise: a bin of two or three records has a
/// bootstrap interval far narrower than its real uncertainty.
pub const RISE_MIN_RECORDS: usize = 10;

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
    /// The rise of EM from the lowest to the highest bin holding `RISE_MIN_RECORDS` records;
    /// `None` when fewer than two bins do.
    pub rise: Option<Rise>,
}

/// EM of bin `high` minus EM of bin `low` (bin indices), in [-1, 1], with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rise {
    pub low: usize,
    pub high: usize,
    pub difference: f64,
    pub interval: Interval,
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
    let mut scores: [Vec<f64>; BINS] = Default::default();
    for &(confidence, em) in &scored {
        // Truncation picks the bin; a confidence of exactly 1 belongs to the top one.
        let b = ((confidence * BINS as f64) as usize).min(BINS - 1);
        bins[b].n += 1;
        bins[b].confidence += confidence;
        bins[b].em += em;
        scores[b].push(em);
    }
    let n = scored.len();
    let mut ece = 0.0;
    for bin in bins.iter_mut().filter(|b| b.n > 0) {
        bin.confidence /= bin.n as f64;
        bin.em /= bin.n as f64;
        ece += bin.n as f64 / n as f64 * (bin.confidence - bin.em).abs();
    }
    Some(Reliability { n, bins, ece, rise: rise(&bins, &scores) })
}

fn rise(bins: &[Bin; BINS], scores: &[Vec<f64>; BINS]) -> Option<Rise> {
    let filled: Vec<usize> = (0..BINS).filter(|&b| scores[b].len() >= RISE_MIN_RECORDS).collect();
    let (&low, &high) = (filled.first()?, filled.last()?);
    if low == high {
        return None;
    }
    let interval = bootstrap::difference_interval(&scores[high], &scores[low])?;
    Some(Rise { low, high, difference: bins[high].em - bins[low].em, interval })
}

fn bin_range(b: usize) -> String {
    format!("{:.1}–{:.1}", b as f64 / BINS as f64, (b + 1) as f64 / BINS as f64)
}

/// A table with one line per row: its records with a confidence, its ECE, each bin's EM with its
/// count, and the rise with the bins it compares.
pub fn render(out: &mut String, rows: &[(String, Reliability)]) {
    let edges: Vec<String> = (0..BINS).map(bin_range).collect();
    let _ = writeln!(out, "| row | n | ECE | {} | rise (bins) |", edges.join(" | "));
    let _ = writeln!(out, "|---|---:|---:|{}---:|", "---:|".repeat(BINS));
    for (label, r) in rows {
        let cells: Vec<String> = r
            .bins
            .iter()
            .map(|b| if b.n == 0 { "–".to_string() } else { format!("{:.0} ({})", b.em * 100.0, b.n) })
            .collect();
        let rise = r.rise.map_or_else(
            || "–".to_string(),
            |rise| {
                format!(
                    "{:+.0} [{:+.0}, {:+.0}] ({} vs {})",
                    rise.difference * 100.0,
                    rise.interval.low * 100.0,
                    rise.interval.high * 100.0,
                    bin_range(rise.high),
                    bin_range(rise.low)
                )
            },
        );
        let _ = writeln!(out, "| {label} | {} | {:.3} | {} | {rise} |", r.n, r.ece, cells.join(" | "));
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
        assert_eq!(r.rise, None, "no bin holds enough records for a rise");
        let mut out = String::new();
        render(&mut out, &[("hgot".into(), r)]);
        assert!(out.contains("| hgot | 4 | 0.275 | 0 (2) | – | – | – | 50 (2) | – |"), "{out}");
        assert!(reliability(&[&records[4]]).is_none(), "no confidence, no table");
    }

    #[test]
    fn the_rise_compares_the_outermost_well_filled_bins() {
        let mut records = Vec::new();
        // 12 at 0.5 with EM 25 %, 3 at 0.7 (too few to count), 20 at 0.9 with EM 75 %.
        for i in 0..12 {
            records.push(with_confidence(&format!("m{i}"), Some(0.5), f64::from(u8::from(i % 4 == 0))));
        }
        for i in 0..3 {
            records.push(with_confidence(&format!("h{i}"), Some(0.7), 0.0));
        }
        for i in 0..20 {
            records.push(with_confidence(&format!("t{i}"), Some(0.9), f64::from(u8::from(i % 4 != 0))));
        }
        let refs: Vec<&ResultRecord> = records.iter().collect();
        let r = reliability(&refs).expect("confidences");
        let m = r.rise.expect("two bins hold ten records");
        assert_eq!((m.low, m.high), (2, 4));
        assert!((m.difference - 0.5).abs() < 1e-9, "{m:?}");
        assert!(m.interval.contains(0.5) && m.interval.low > 0.0, "{m:?}");
        let mut out = String::new();
        render(&mut out, &[("hgot".into(), r)]);
        assert!(
            out.contains(&format!(
                "| +50 [{:+.0}, {:+.0}] (0.8–1.0 vs 0.4–0.6) |",
                m.interval.low * 100.0,
                m.interval.high * 100.0
            )),
            "{out}"
        );
        // One well-filled bin gives no rise.
        let refs: Vec<&ResultRecord> = records[..15].iter().collect();
        assert_eq!(reliability(&refs).expect("confidences").rise, None);
    }
}
