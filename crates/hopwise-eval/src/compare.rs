//! Any two runs compared question by question: which questions one got right and the other did not,
//! overall and per group (question type, or whether the second run searched), with the paired
//! bootstrap interval and what each side spent. `hopwise compare` prints it; the report's paired
//! table is the special case "every row against rtr".

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::bootstrap::{paired_difference, PairedDifference};
use crate::results::ResultRecord;

/// The per-question score that is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// The headline number: cover-EM for QA, label accuracy for fact checking.
    Accuracy,
    CoverEm,
    Em,
    F1,
}

impl Metric {
    fn score(self, r: &ResultRecord) -> f64 {
        match self {
            Metric::Accuracy => r.metrics.accuracy,
            Metric::CoverEm => r.metrics.cover_em,
            Metric::Em => r.metrics.em,
            Metric::F1 => r.metrics.f1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Accuracy => "accuracy",
            Metric::CoverEm => "cover-EM",
            Metric::Em => "EM",
            Metric::F1 => "F1",
        }
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "accuracy" => Ok(Metric::Accuracy),
            "cover-em" | "cover_em" => Ok(Metric::CoverEm),
            "em" => Ok(Metric::Em),
            "f1" => Ok(Metric::F1),
            _ => Err(format!("unknown metric `{s}` (choose accuracy, cover-em, em or f1)")),
        }
    }
}

/// How the paired questions are split into groups (besides "all").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupBy {
    /// The dataset's question type (bridge, comparison, compositional, ...).
    Qtype,
    /// Whether the second run retrieved for the question: what a retrieval gate kept closed-book.
    Searched,
}

impl std::str::FromStr for GroupBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "qtype" => Ok(GroupBy::Qtype),
            "searched" => Ok(GroupBy::Searched),
            _ => Err(format!("unknown grouping `{s}` (choose qtype or searched)")),
        }
    }
}

impl GroupBy {
    fn key(self, other: &ResultRecord) -> String {
        match self {
            GroupBy::Qtype => other.qtype.clone().unwrap_or_else(|| "untyped".into()),
            GroupBy::Searched if other.stats.retrieval_rounds > 0 => "searched".into(),
            GroupBy::Searched => "closed-book".into(),
        }
    }
}

/// What one side spent on a group's questions, per question.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spend {
    /// Mean score × 100.
    pub score: f64,
    pub llm_calls: f64,
    pub retrieval_rounds: f64,
    pub seconds: f64,
}

impl Spend {
    fn of(records: &[&ResultRecord], metric: Metric) -> Self {
        let n = records.len().max(1) as f64;
        let mean = |f: &dyn Fn(&ResultRecord) -> f64| records.iter().map(|r| f(r)).sum::<f64>() / n;
        Spend {
            score: 100.0 * mean(&|r| metric.score(r)),
            llm_calls: mean(&|r| r.stats.llm_calls as f64),
            retrieval_rounds: mean(&|r| r.stats.retrieval_rounds as f64),
            seconds: mean(&|r| r.seconds),
        }
    }
}

/// One group's comparison: `other - base` on the questions both runs answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupComparison {
    pub group: String,
    pub difference: PairedDifference,
    pub base: Spend,
    pub other: Spend,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub metric: Metric,
    pub base_strategy: String,
    pub other_strategy: String,
    /// How the table names the two sides: the strategies, unless the caller relabels them (two
    /// rows of one strategy with different options are told apart by their row names).
    pub base_label: String,
    pub other_label: String,
    /// Questions (dataset, id) only one side has; they are left out of every figure.
    pub only_base: usize,
    pub only_other: usize,
    /// "all" first, then the groups in name order.
    pub groups: Vec<GroupComparison>,
}

/// Why two runs cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    #[error("the {side} results are empty")]
    Empty { side: &'static str },
    #[error("the {side} results hold several strategies ({found}); choose one with --{side}-strategy")]
    SeveralStrategies { side: &'static str, found: String },
    #[error("the {side} results hold no `{wanted}` records (they hold {found})")]
    NoSuchStrategy { side: &'static str, wanted: String, found: String },
    #[error(
        "the two runs share no question (same dataset and id): {only_base} only in base, {only_other} only in other"
    )]
    NothingInCommon { only_base: usize, only_other: usize },
}

/// The records of one strategy, the first record of each question kept (as the summaries do: a
/// resumed run never rewrites a finished line). `wanted` may be omitted when only one is present.
pub fn select<'a>(
    records: &'a [ResultRecord],
    side: &'static str,
    wanted: Option<&str>,
) -> Result<Vec<&'a ResultRecord>, CompareError> {
    let strategies: Vec<&str> =
        records.iter().map(|r| r.strategy.as_str()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let found = strategies.join(", ");
    let chosen = match (wanted, strategies.as_slice()) {
        (_, []) => return Err(CompareError::Empty { side }),
        (Some(w), _) if strategies.contains(&w) => w,
        (Some(w), _) => return Err(CompareError::NoSuchStrategy { side, wanted: w.into(), found }),
        (None, [one]) => *one,
        (None, _) => return Err(CompareError::SeveralStrategies { side, found }),
    };
    let mut seen = HashSet::new();
    Ok(records.iter().filter(|r| r.strategy == chosen && seen.insert((&r.dataset, &r.id))).collect())
}

/// `(base, other)` for each question (same dataset and id) both have, in `other`'s order.
pub fn pair_by_question<'a>(
    base: &[&'a ResultRecord],
    other: &[&'a ResultRecord],
) -> Vec<(&'a ResultRecord, &'a ResultRecord)> {
    let base_by_id: HashMap<(&str, &str), &ResultRecord> =
        base.iter().map(|r| ((r.dataset.as_str(), r.id.as_str()), *r)).collect();
    other.iter().filter_map(|o| base_by_id.get(&(o.dataset.as_str(), o.id.as_str())).map(|b| (*b, *o))).collect()
}

/// Pairs `other` with `base` by (dataset, id) and compares them overall and per group.
pub fn compare_runs(
    base: &[&ResultRecord],
    other: &[&ResultRecord],
    metric: Metric,
    group_by: Option<GroupBy>,
) -> Result<Comparison, CompareError> {
    let pairs = pair_by_question(base, other);
    // Saturating: a caller may pass a side with a question twice (`select` never does).
    let (only_base, only_other) = (base.len().saturating_sub(pairs.len()), other.len().saturating_sub(pairs.len()));
    let mut groups: BTreeMap<String, Vec<(&ResultRecord, &ResultRecord)>> = BTreeMap::new();
    if let Some(by) = group_by {
        for pair in &pairs {
            groups.entry(by.key(pair.1)).or_default().push(*pair);
        }
    }
    let summarise = |group: String, pairs: &[(&ResultRecord, &ResultRecord)]| {
        let scores: Vec<(f64, f64)> = pairs.iter().map(|(b, o)| (metric.score(b), metric.score(o))).collect();
        let (b, o): (Vec<&ResultRecord>, Vec<&ResultRecord>) = pairs.iter().copied().unzip();
        paired_difference(&scores).map(|difference| GroupComparison {
            group,
            difference,
            base: Spend::of(&b, metric),
            other: Spend::of(&o, metric),
        })
    };
    let all = summarise("all".into(), &pairs).ok_or(CompareError::NothingInCommon { only_base, only_other })?;
    let groups = std::iter::once(all).chain(groups.into_iter().filter_map(|(g, p)| summarise(g, &p))).collect();
    let base_strategy = base.first().map(|r| r.strategy.clone()).unwrap_or_default();
    let other_strategy = other.first().map(|r| r.strategy.clone()).unwrap_or_default();
    Ok(Comparison {
        metric,
        base_label: base_strategy.clone(),
        other_label: other_strategy.clone(),
        base_strategy,
        other_strategy,
        only_base,
        only_other,
        groups,
    })
}

/// The figures of one group, as the cells after the label columns.
fn cells(g: &GroupComparison) -> String {
    let d = &g.difference;
    format!(
        "{} | {:.1} | {:.1} | {:+.1} [{:+.1}, {:+.1}] | {} / {} / {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.1} / {:.1}",
        d.n,
        g.base.score,
        g.other.score,
        100.0 * d.mean,
        100.0 * d.interval.low,
        100.0 * d.interval.high,
        d.wins,
        d.ties,
        d.losses,
        g.base.llm_calls,
        g.other.llm_calls,
        g.base.retrieval_rounds,
        g.other.retrieval_rounds,
        g.base.seconds,
        g.other.seconds,
    )
}

fn left_out(c: &Comparison) -> Option<String> {
    (c.only_base + c.only_other > 0)
        .then(|| format!("{} only in {}, {} only in {}", c.only_base, c.base_label, c.only_other, c.other_label))
}

/// A markdown table, one line per group (and per run, when several are compared with one base);
/// scores and differences in points (× 100).
pub fn render_markdown(comparisons: &[Comparison]) -> String {
    let Some(first) = comparisons.first() else { return String::new() };
    let (metric, b) = (first.metric.name(), &first.base_label);
    if let [c] = comparisons {
        let o = &c.other_label;
        let unpaired = left_out(c).map(|l| format!(" (left out: {l})")).unwrap_or_default();
        let mut out = format!(
            "{o} against {b}, {metric} on the questions both answered{unpaired}\n\n\
             | group | n | {b} | {o} | difference [95% CI] | won / tied / lost | calls {b} / {o} | rounds {b} / {o} | s/q {b} / {o} |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        );
        for g in &c.groups {
            out.push_str(&format!("| {} | {} |\n", g.group, cells(g)));
        }
        return out;
    }
    let mut out = format!(
        "against {b}, {metric}, each run on the questions it shares with {b}\n\n\
         | run | group | n | {b} | run | difference [95% CI] | won / tied / lost | calls {b} / run | rounds {b} / run | s/q {b} / run |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for c in comparisons {
        for g in &c.groups {
            out.push_str(&format!("| {} | {} | {} |\n", c.other_label, g.group, cells(g)));
        }
    }
    let unpaired: Vec<String> = comparisons.iter().filter_map(left_out).collect();
    if !unpaired.is_empty() {
        out.push_str(&format!("\nLeft out: {}.\n", unpaired.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::scored_record;

    fn rec(id: &str, strategy: &str, right: bool, qtype: &str, rounds: u64) -> ResultRecord {
        let mut r = scored_record("d", id, strategy, f64::from(u8::from(right)), 0.5);
        r.qtype = Some(qtype.into());
        r.stats.retrieval_rounds = rounds;
        r.stats.llm_calls = 1 + rounds;
        r
    }

    #[test]
    fn groups_split_the_paired_questions_and_unpaired_ones_are_counted() {
        let base = [
            rec("1", "rtr", true, "bridge", 1),
            rec("2", "rtr", false, "bridge", 1),
            rec("3", "rtr", false, "comparison", 1),
            rec("9", "rtr", true, "comparison", 1), // only in base
        ];
        let other = [
            rec("1", "toqd", false, "bridge", 0),    // lost, closed-book
            rec("2", "toqd", true, "bridge", 2),     // won
            rec("3", "toqd", true, "comparison", 1), // won
        ];
        let (base, other): (Vec<_>, Vec<_>) = (base.iter().collect(), other.iter().collect());
        let c = compare_runs(&base, &other, Metric::CoverEm, Some(GroupBy::Qtype)).expect("pairs");
        assert_eq!((c.only_base, c.only_other), (1, 0));
        let names: Vec<&str> = c.groups.iter().map(|g| g.group.as_str()).collect();
        assert_eq!(names, ["all", "bridge", "comparison"]);
        let all = &c.groups[0];
        assert_eq!((all.difference.n, all.difference.wins, all.difference.ties, all.difference.losses), (3, 2, 0, 1));
        assert!((all.base.score - 100.0 / 3.0).abs() < 1e-9 && (all.other.score - 200.0 / 3.0).abs() < 1e-9);
        assert!((all.other.retrieval_rounds - 1.0).abs() < 1e-9, "(0 + 2 + 1) / 3");
        let bridge = &c.groups[1];
        assert_eq!((bridge.difference.wins, bridge.difference.losses), (1, 1));

        let by_search = compare_runs(&base, &other, Metric::CoverEm, Some(GroupBy::Searched)).expect("pairs");
        let split: Vec<(&str, usize)> = by_search.groups.iter().map(|g| (g.group.as_str(), g.difference.n)).collect();
        assert_eq!(split, [("all", 3), ("closed-book", 1), ("searched", 2)]);
        let table = render_markdown(std::slice::from_ref(&c));
        assert!(table.contains("| all | 3 | 33.3 | 66.7 | +33.3 ["), "{table}");
        assert!(table.contains("(left out: 1 only in rtr, 0 only in toqd)"), "{table}");
        // Several runs against one base: a line per run and group, the left-out questions below.
        let several = render_markdown(&[c, by_search]);
        assert!(several.starts_with("against rtr, cover-EM, each run on the questions it shares with rtr\n"));
        assert!(several.contains("| toqd | bridge | 2 | 50.0 | 50.0 | +0.0 ["), "{several}");
        assert!(several.contains("| toqd | closed-book | 1 | 100.0 | 0.0 | -100.0 ["), "{several}");
        assert!(
            several.contains("\nLeft out: 1 only in rtr, 0 only in toqd; 1 only in rtr, 0 only in toqd.\n"),
            "{several}"
        );
    }

    #[test]
    fn selection_names_the_strategies_it_found_and_keeps_the_first_line_of_a_question() {
        let mixed = [rec("1", "rtr", true, "t", 1), rec("1", "toqd", false, "t", 1), rec("1", "toqd", true, "t", 1)];
        assert_eq!(
            select(&mixed, "base", None),
            Err(CompareError::SeveralStrategies { side: "base", found: "rtr, toqd".into() })
        );
        assert_eq!(
            select(&mixed, "other", Some("hgot")),
            Err(CompareError::NoSuchStrategy { side: "other", wanted: "hgot".into(), found: "rtr, toqd".into() })
        );
        let toqd = select(&mixed, "other", Some("toqd")).expect("present");
        assert_eq!(toqd.len(), 1);
        assert_eq!(toqd[0].metrics.cover_em, 0.0, "the first line of a question wins");
        assert_eq!(select(&[], "base", None), Err(CompareError::Empty { side: "base" }));
    }

    #[test]
    fn runs_without_a_common_question_are_an_error_not_an_empty_table() {
        let a = [rec("1", "rtr", true, "t", 1)];
        let b = [rec("2", "toqd", true, "t", 1)];
        let (a, b): (Vec<_>, Vec<_>) = (a.iter().collect(), b.iter().collect());
        assert_eq!(
            compare_runs(&a, &b, Metric::Accuracy, None),
            Err(CompareError::NothingInCommon { only_base: 1, only_other: 1 })
        );
    }
}
