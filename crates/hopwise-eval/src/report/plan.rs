//! `results/plan.tsv`: the planned rows, in run order. Columns (tab-separated): row label, dataset,
//! strategy, options (space-separated `KEY=VALUE`, or `-`), questions: `N` for the first N questions
//! of the dataset file (the tuning set), `A-B` for questions A to B (1-based, inclusive). A row whose
//! questions start after the first is a test-range row and lives under `results/<model>/test/`.
//! `#` starts a comment line.

use std::path::Path;

use crate::error::{EvalError, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRow {
    pub label: String,
    pub dataset: String,
    pub strategy: String,
    /// `KEY=VALUE` pairs as written.
    pub options: Vec<String>,
    /// The row's first question, 1-based (1 for the tuning set).
    pub first: usize,
    /// Questions planned, from `first` on.
    pub questions: usize,
}

impl PlannedRow {
    /// A row named after its strategy is a main-table row; any other label is an ablation of its
    /// strategy (`toqd-no-critique` of `toqd`).
    pub fn is_main(&self) -> bool {
        self.label == self.strategy
    }

    /// A row over questions after the first ones: the test range, reported apart from the tuning set.
    pub fn is_test(&self) -> bool {
        self.first > 1
    }
}

/// `N` (the first N questions) or `A-B` (questions A to B, 1-based, inclusive): (first, count).
fn parse_questions(text: &str) -> Option<(usize, usize)> {
    match text.split_once('-') {
        None => Some((1, text.parse().ok()?)),
        Some((a, b)) => {
            let (first, last): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
            (first >= 1 && last >= first).then(|| (first, last - first + 1))
        }
    }
}

/// Parses the plan; a malformed line is an error naming its line.
pub fn parse_plan(path: &Path, text: &str) -> Result<Vec<PlannedRow>> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let bad = |message: String| EvalError::Report {
            path: path.to_path_buf(),
            message: format!("line {}: {message}", i + 1),
        };
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [label, dataset, strategy, options, questions] = fields[..] else {
            return Err(bad(format!("expected 5 tab-separated columns, found {}", fields.len())));
        };
        if [label, dataset, strategy].iter().any(|f| f.is_empty()) {
            return Err(bad("row label, dataset and strategy must not be empty".into()));
        }
        if let Some(name) = [label, dataset].into_iter().find(|n| !super::scan::is_row_name(n)) {
            return Err(bad(format!(
                "`{name}`: a row label or dataset may hold only ASCII letters, digits, `.`, `-` and `_`"
            )));
        }
        let (first, questions) = parse_questions(questions).ok_or_else(|| {
            bad(format!("questions `{questions}` is neither a whole number nor a range such as 51-150"))
        })?;
        let options =
            if options == "-" { Vec::new() } else { options.split_whitespace().map(str::to_string).collect() };
        if rows.iter().any(|r: &PlannedRow| r.label == label && r.dataset == dataset && (r.first > 1) == (first > 1)) {
            return Err(bad(format!("row `{label}` of `{dataset}` is planned twice")));
        }
        rows.push(PlannedRow {
            label: label.to_string(),
            dataset: dataset.to_string(),
            strategy: strategy.to_string(),
            options,
            first,
            questions,
        });
    }
    Ok(rows)
}

/// Reads and parses the plan file.
pub fn read_plan(path: &Path) -> Result<Vec<PlannedRow>> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::Read { path: path.to_path_buf(), source: e })?;
    parse_plan(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rows_skipping_comments() {
        let text = "# header\n\ndirect\thotpotqa\tdirect\t-\t50\nuar-ecc\t2wikimultihopqa\tuar\tuncertainty=ecc threshold=2\t50\n";
        let rows = parse_plan(Path::new("plan.tsv"), text).expect("parse");
        assert_eq!(rows.len(), 2);
        assert!(rows[0].is_main() && rows[0].options.is_empty());
        assert!(!rows[1].is_main());
        assert_eq!(rows[1].options, vec!["uncertainty=ecc", "threshold=2"]);
    }

    #[test]
    fn ranges_name_the_test_rows() {
        let text = "rtr\td\trtr\t-\t50\nrtr\td\trtr\t-\t51-150\n";
        let rows = parse_plan(Path::new("plan.tsv"), text).expect("a row may be planned once per range");
        assert_eq!((rows[0].first, rows[0].questions, rows[0].is_test()), (1, 50, false));
        assert_eq!((rows[1].first, rows[1].questions, rows[1].is_test()), (51, 100, true));
    }

    #[test]
    fn malformed_lines_are_named() {
        let err = parse_plan(Path::new("plan.tsv"), "direct hotpotqa direct - 50\n").expect_err("spaces, not tabs");
        assert!(err.to_string().contains("line 1") && err.to_string().contains("5 tab-separated"), "{err}");
        let err = parse_plan(Path::new("plan.tsv"), "a\tb\tc\t-\tfifty\n").expect_err("questions");
        assert!(err.to_string().contains("fifty"), "{err}");
        let err = parse_plan(Path::new("plan.tsv"), "a\tb\tc\t-\t150-51\n").expect_err("a backwards range");
        assert!(err.to_string().contains("150-51"), "{err}");
        let twice = "a\tb\tc\t-\t5\na\tb\tc\t-\t5\n";
        assert!(parse_plan(Path::new("plan.tsv"), twice).expect_err("twice").to_string().contains("twice"));
    }
}
