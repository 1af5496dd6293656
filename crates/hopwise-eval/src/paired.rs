//! Paired comparisons: a strategy against a baseline (retrieve-then-read) on the questions both
//! answered, matched by dataset and example id.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{paired_difference, PairedDifference};
use crate::compare::pair_by_question;
use crate::results::ResultRecord;

/// The strategy every other one is compared with.
pub const BASELINE: &str = "rtr";

/// `strategy - baseline` on one dataset, over the questions both have results for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedComparison {
    pub dataset: String,
    pub baseline: String,
    pub strategy: String,
    /// Difference of the headline accuracy (cover-EM; label accuracy for fact checking).
    pub accuracy: PairedDifference,
    /// Exact match: no credit for an answer that only contains a gold alias (a sentence, a list).
    pub em: PairedDifference,
    pub f1: PairedDifference,
}

/// Compares `other` with `baseline` on their common questions (same dataset and id). `None` when
/// they share none. Labels name the two sides in the result (row labels or strategy names).
pub fn compare(
    dataset: &str,
    baseline_label: &str,
    baseline: &[&ResultRecord],
    label: &str,
    other: &[&ResultRecord],
) -> Option<PairedComparison> {
    let of_dataset: Vec<&ResultRecord> = other.iter().copied().filter(|r| r.dataset == dataset).collect();
    let matched = pair_by_question(baseline, &of_dataset);
    let pairs = |score: &dyn Fn(&ResultRecord) -> f64| -> Vec<(f64, f64)> {
        matched.iter().map(|(b, o)| (score(b), score(o))).collect()
    };
    Some(PairedComparison {
        dataset: dataset.to_string(),
        baseline: baseline_label.to_string(),
        strategy: label.to_string(),
        accuracy: paired_difference(&pairs(&|r| r.metrics.accuracy))?,
        em: paired_difference(&pairs(&|r| r.metrics.em))?,
        f1: paired_difference(&pairs(&|r| r.metrics.f1))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::scored_record as record;

    #[test]
    fn only_common_questions_of_the_dataset_are_paired() {
        let rtr =
            [record("d", "1", "rtr", 1.0, 1.0), record("d", "2", "rtr", 0.0, 0.5), record("d", "3", "rtr", 0.0, 0.0)];
        let mut sentence = record("d", "2", "toqd", 1.0, 1.0); // win, but only by containing the answer
        sentence.metrics.em = 0.0;
        let toqd = [
            record("d", "1", "toqd", 0.0, 0.5), // loss
            sentence,
            record("d", "4", "toqd", 1.0, 1.0), // rtr has no result: left out
            record("e", "3", "toqd", 1.0, 1.0), // another dataset: left out
        ];
        let c = compare("d", "rtr", &rtr.iter().collect::<Vec<_>>(), "toqd", &toqd.iter().collect::<Vec<_>>())
            .expect("two common questions");
        assert_eq!((c.accuracy.n, c.accuracy.wins, c.accuracy.ties, c.accuracy.losses), (2, 1, 0, 1));
        assert_eq!(c.accuracy.mean, 0.0);
        assert!((c.f1.mean - 0.0).abs() < 1e-12, "(-0.5 + 0.5) / 2");
        assert_eq!((c.em.mean, c.em.wins, c.em.losses), (-0.5, 0, 1), "EM: a loss and a tie");
        assert_eq!((c.baseline.as_str(), c.strategy.as_str()), ("rtr", "toqd"));
    }

    #[test]
    fn no_common_question_gives_no_comparison() {
        let rtr = [record("d", "1", "rtr", 1.0, 1.0)];
        let cot = [record("d", "2", "cot", 1.0, 1.0)];
        assert_eq!(compare("d", "rtr", &rtr.iter().collect::<Vec<_>>(), "cot", &cot.iter().collect::<Vec<_>>()), None);
    }
}
