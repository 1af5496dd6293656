//! `results/plan.tsv`: the planned rows, in run order. Columns (tab-separated): row label, dataset,
//! strategy, options (space-separated `KEY=VALUE`, or `-`), questions. `#` starts a comment line.

use std::path::Path;

use crate::error::{EvalError, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRow {
    pub label: String,
    pub dataset: String,
    pub strategy: String,
    /// `KEY=VALUE` pairs as written.
    pub options: Vec<String>,
    pub questions: usize,
}

impl PlannedRow {
    /// A row named after its strategy is a main-table row; any other label is an ablation of its
    /// strategy (`toqd-no-critique` of `toqd`).
    pub fn is_main(&self) -> bool {
        self.label == self.strategy
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
        let questions = questions.parse().map_err(|_| bad(format!("questions `{questions}` is not a whole number")))?;
        let options =
            if options == "-" { Vec::new() } else { options.split_whitespace().map(str::to_string).collect() };
        if rows.iter().any(|r: &PlannedRow| r.label == label && r.dataset == dataset) {
            return Err(bad(format!("row `{label}` of `{dataset}` is planned twice")));
        }
        rows.push(PlannedRow {
            label: label.to_string(),
            dataset: dataset.to_string(),
            strategy: strategy.to_string(),
            options,
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
    fn malformed_lines_are_named() {
        let err = parse_plan(Path::new("plan.tsv"), "direct hotpotqa direct - 50\n").expect_err("spaces, not tabs");
        assert!(err.to_string().contains("line 1") && err.to_string().contains("5 tab-separated"), "{err}");
        let err = parse_plan(Path::new("plan.tsv"), "a\tb\tc\t-\tfifty\n").expect_err("questions");
        assert!(err.to_string().contains("fifty"), "{err}");
        let twice = "a\tb\tc\t-\t5\na\tb\tc\t-\t5\n";
        assert!(parse_plan(Path::new("plan.tsv"), twice).expect_err("twice").to_string().contains("twice"));
    }
}
