//! Percentile bootstrap intervals over questions, for one score column and for the paired
//! difference of two strategies on the same questions.
//!
//! The generator is a fixed SplitMix64 stream from a fixed seed, so a table recomputed from the
//! same `results.jsonl` is byte-identical on every machine and in every later version.

use serde::{Deserialize, Serialize};

/// Resamples per interval: enough that the 2.5 % / 97.5 % quantiles move by well under a point
/// between seeds at n = 50.
pub const RESAMPLES: usize = 2000;
/// The seed of every interval (a published constant, so anyone can recompute the tables).
pub const SEED: u64 = 0x686f_7077_6973_6531; // "hopwise1"
/// Two-sided coverage of the intervals.
pub const LEVEL: f64 = 0.95;

/// A confidence interval `[low, high]` for a mean.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    pub fn contains(&self, x: f64) -> bool {
        self.low - 1e-12 <= x && x <= self.high + 1e-12
    }
}

/// SplitMix64: tiny, fast, and fully specified, which is all resampling needs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is below 2^-50 for the n used here).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// The `q` quantile of sorted values, interpolating linearly between order statistics.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lower = pos.floor() as usize;
    let upper = pos.ceil() as usize;
    let frac = pos - lower as f64;
    sorted[lower] + (sorted[upper] - sorted[lower]) * frac
}

/// The mean of one resample (with replacement) of `values`.
fn resampled_mean(values: &[f64], rng: &mut SplitMix64) -> f64 {
    let n = values.len();
    (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64
}

/// The `LEVEL` percentile interval of bootstrap statistics.
fn percentile_interval(mut statistics: Vec<f64>) -> Interval {
    statistics.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0;
    Interval { low: quantile(&statistics, tail), high: quantile(&statistics, 1.0 - tail) }
}

/// The 95 % percentile-bootstrap interval of the mean of `values`; `None` when there are none.
pub fn mean_interval(values: &[f64]) -> Option<Interval> {
    if values.is_empty() {
        return None;
    }
    let mut rng = SplitMix64(SEED);
    Some(percentile_interval((0..RESAMPLES).map(|_| resampled_mean(values, &mut rng)).collect()))
}

/// The 95 % percentile-bootstrap interval of `mean(high) - mean(low)` for two independent groups
/// (each resampled within itself, from one stream); `None` when either group is empty.
pub fn difference_interval(high: &[f64], low: &[f64]) -> Option<Interval> {
    if high.is_empty() || low.is_empty() {
        return None;
    }
    let mut rng = SplitMix64(SEED);
    Some(percentile_interval(
        (0..RESAMPLES).map(|_| resampled_mean(high, &mut rng) - resampled_mean(low, &mut rng)).collect(),
    ))
}

/// How two strategies compare on the same questions: `other - baseline`, question by question.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    pub n: usize,
    pub mean: f64,
    pub interval: Interval,
    /// Questions where the other strategy scored higher, the same, lower.
    pub wins: usize,
    pub ties: usize,
    pub losses: usize,
}

/// The paired difference of two score lists aligned by question (`pairs[i] = (baseline, other)`).
/// Resampling questions keeps each pair together, which is what makes the interval paired.
pub fn paired_difference(pairs: &[(f64, f64)]) -> Option<PairedDifference> {
    let differences: Vec<f64> = pairs.iter().map(|(baseline, other)| other - baseline).collect();
    let interval = mean_interval(&differences)?;
    let count = |keep: &dyn Fn(f64) -> bool| differences.iter().filter(|d| keep(**d)).count();
    Some(PairedDifference {
        n: differences.len(),
        mean: differences.iter().sum::<f64>() / differences.len() as f64,
        interval,
        wins: count(&|d| d > 1e-12),
        ties: count(&|d| d.abs() <= 1e-12),
        losses: count(&|d| d < -1e-12),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_scores_have_a_point_interval() {
        assert_eq!(mean_interval(&[1.0; 20]), Some(Interval { low: 1.0, high: 1.0 }));
        assert_eq!(mean_interval(&[]), None);
        assert_eq!(mean_interval(&[0.3]), Some(Interval { low: 0.3, high: 0.3 }));
    }

    #[test]
    fn the_interval_is_reproducible_and_brackets_the_mean() {
        let scores: Vec<f64> = (0..50).map(|i| f64::from(u8::from(i % 5 < 2))).collect(); // 40 %
        let a = mean_interval(&scores).expect("interval");
        assert_eq!(Some(a), mean_interval(&scores), "same input, same interval");
        assert!(a.contains(0.4) && a.low < 0.4 && a.high > 0.4, "{a:?}");
        // The normal approximation gives 0.4 ± 1.96·sqrt(0.4·0.6/50) = [0.264, 0.536]; the
        // bootstrap percentile interval lands within a few points of it.
        assert!((a.low - 0.264).abs() < 0.04 && (a.high - 0.536).abs() < 0.04, "{a:?}");
    }

    #[test]
    fn the_difference_interval_brackets_the_difference_of_the_groups() {
        let high: Vec<f64> = (0..25).map(|i| f64::from(u8::from(i % 2 == 0))).collect(); // 52 %
        let low: Vec<f64> = (0..20).map(|i| f64::from(u8::from(i % 5 == 0))).collect(); // 20 %
        let d = difference_interval(&high, &low).expect("interval");
        assert_eq!(Some(d), difference_interval(&high, &low), "same input, same interval");
        assert!(d.contains(0.32) && d.low > 0.0 && d.high < 0.64, "{d:?}");
        // Swapping the groups mirrors the interval up to resampling noise.
        let m = difference_interval(&low, &high).expect("mirror");
        assert!((m.low + d.high).abs() < 0.06 && (m.high + d.low).abs() < 0.06, "{d:?} vs {m:?}");
        assert_eq!(difference_interval(&high, &[]), None);
        assert_eq!(difference_interval(&[1.0; 10], &[0.0; 10]), Some(Interval { low: 1.0, high: 1.0 }));
    }

    #[test]
    fn more_questions_give_a_narrower_interval() {
        let small: Vec<f64> = (0..20).map(|i| f64::from(u8::from(i % 2 == 0))).collect();
        let large: Vec<f64> = (0..200).map(|i| f64::from(u8::from(i % 2 == 0))).collect();
        let (s, l) = (mean_interval(&small).expect("s"), mean_interval(&large).expect("l"));
        assert!(l.high - l.low < s.high - s.low, "{s:?} vs {l:?}");
    }

    #[test]
    fn paired_difference_counts_and_centres() {
        // other wins on 3, ties on 5, loses on 2 questions: mean difference 0.1.
        let mut pairs = vec![(0.0, 1.0); 3];
        pairs.extend(vec![(1.0, 1.0); 3]);
        pairs.extend(vec![(0.0, 0.0); 2]);
        pairs.extend(vec![(1.0, 0.0); 2]);
        let d = paired_difference(&pairs).expect("difference");
        assert_eq!((d.n, d.wins, d.ties, d.losses), (10, 3, 5, 2));
        assert!((d.mean - 0.1).abs() < 1e-12);
        assert!(d.interval.contains(0.1) && d.interval.low < 0.0, "ten questions cannot separate: {d:?}");
        assert_eq!(paired_difference(&[]), None);
    }

    #[test]
    fn identical_strategies_differ_by_exactly_zero() {
        let pairs: Vec<(f64, f64)> = (0..30).map(|i| (f64::from(i % 3), f64::from(i % 3))).collect();
        let d = paired_difference(&pairs).expect("difference");
        assert_eq!((d.mean, d.interval, d.ties), (0.0, Interval { low: 0.0, high: 0.0 }, 30));
    }
}
