//! Finds the computed rows: `results/<model>/<dataset>/<row>/` holding `results.jsonl`, with its
//! `run.json` (the configuration fingerprint) and `sessions.jsonl` (one line per
//! `scripts/results.sh` invocation that worked on the row: when, where, with how many threads).
//! Rows under `results/archive/` are left out: they are kept in git for the analyses that read them
//! (a row measured with earlier prompts, say), not shown in the tables.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::RunFingerprint;
use crate::error::{EvalError, Result};
use crate::results::{read_results, ResultRecord};

/// One `scripts/results.sh` invocation on a row, as it recorded itself.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Session {
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started: String,
    pub ended: String,
    pub threads: Option<u32>,
    pub concurrency: Option<u32>,
    /// CPU model and logical CPU count of the machine.
    pub cpu: Option<String>,
    pub cpus: Option<u32>,
    /// Lines in `results.jsonl` before and after.
    pub done_before: Option<usize>,
    pub done_after: Option<usize>,
    /// The commit the binary was built from (`+dirty` when the checkout had changes); empty or
    /// absent when not recorded.
    pub revision: Option<String>,
}

/// Which questions of a dataset file a row answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Range {
    /// The first questions, whose traces are read to tune methods: `results/<model>/<dataset>/<row>/`.
    Tuning,
    /// The questions after them, reported only: `results/<model>/test/<dataset>/<row>/`.
    Test,
}

#[derive(Debug, Clone)]
pub struct RowResults {
    pub model: String,
    pub range: Range,
    pub dataset: String,
    pub label: String,
    pub dir: PathBuf,
    pub records: Vec<ResultRecord>,
    pub run: Option<RunFingerprint>,
    pub sessions: Vec<Session>,
}

fn subdirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| EvalError::Read { path: dir.to_path_buf(), source: e })?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')))
        .collect();
    out.sort();
    Ok(out)
}

fn name_of(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// A model, dataset or row name under `results/`: ASCII letters, digits, `.`, `-` and `_`, starting
/// with a letter or digit. The report writes these names into shell commands and table cells.
pub fn is_row_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// The name of `dir`, refused unless it is a [`is_row_name`].
fn checked_name(dir: &Path) -> Result<String> {
    let name = name_of(dir);
    if is_row_name(&name) {
        return Ok(name);
    }
    Err(EvalError::Report {
        path: dir.to_path_buf(),
        message: "a results folder's name may hold only ASCII letters, digits, `.`, `-` and `_`; rename or move it"
            .into(),
    })
}

/// Session lines that do not parse are skipped: they only annotate the tables.
fn read_sessions(path: &Path) -> Vec<Session> {
    std::fs::read_to_string(path)
        .map(|text| text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
        .unwrap_or_default()
}

/// The folder under `results/` that `scripts/results.sh --archive` moves rows into, out of the tables.
pub const ARCHIVE_DIR: &str = "archive";

/// The folder under `results/<model>/` holding the test-range rows (`test/<dataset>/<row>/`).
pub const TEST_DIR: &str = "test";

/// Every row directory under `results_dir` that holds a `results.jsonl`: three levels down
/// (`<model>/<dataset>/<row>`), and four under a model's [`TEST_DIR`]; none under [`ARCHIVE_DIR`].
pub fn scan(results_dir: &Path) -> Result<Vec<RowResults>> {
    let mut rows = Vec::new();
    for model_dir in subdirs(results_dir)?.into_iter().filter(|dir| name_of(dir) != ARCHIVE_DIR) {
        checked_name(&model_dir)?;
        for dataset_dir in subdirs(&model_dir)? {
            checked_name(&dataset_dir)?;
            if name_of(&dataset_dir) == TEST_DIR {
                for test_dataset in subdirs(&dataset_dir)? {
                    scan_dataset(&model_dir, &test_dataset, Range::Test, &mut rows)?;
                }
            } else {
                scan_dataset(&model_dir, &dataset_dir, Range::Tuning, &mut rows)?;
            }
        }
    }
    Ok(rows)
}

fn scan_dataset(model_dir: &Path, dataset_dir: &Path, range: Range, rows: &mut Vec<RowResults>) -> Result<()> {
    for row_dir in subdirs(dataset_dir)? {
        let results = row_dir.join("results.jsonl");
        if !results.is_file() {
            continue;
        }
        checked_name(&row_dir)?;
        let (records, _) = read_results(&results)?;
        let run = match std::fs::read(row_dir.join("run.json")) {
            Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| EvalError::Report {
                path: row_dir.join("run.json"),
                message: format!("not a run fingerprint: {e}"),
            })?),
            Err(_) => None,
        };
        rows.push(RowResults {
            model: name_of(model_dir),
            range,
            dataset: name_of(dataset_dir),
            label: name_of(&row_dir),
            sessions: read_sessions(&row_dir.join("sessions.jsonl")),
            dir: row_dir,
            records,
            run,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::scored_record;

    fn write_row(dir: &Path) {
        std::fs::create_dir_all(dir).expect("row folder");
        let record = scored_record("d", "q1", "rtr", 1.0, 1.0);
        let line = serde_json::to_string(&record).expect("a record serialises");
        std::fs::write(dir.join("results.jsonl"), format!("{line}\n")).expect("results.jsonl");
    }

    #[test]
    fn archived_rows_are_left_out_and_test_rows_are_found() {
        let results = tempfile::tempdir().expect("temp dir");
        write_row(&results.path().join("m/d/rtr"));
        write_row(&results.path().join("archive/m/d/rtr"));
        write_row(&results.path().join("m/test/d/rtr"));
        let rows = scan(results.path()).expect("scan");
        let found: Vec<_> =
            rows.iter().map(|r| (r.model.as_str(), r.range, r.dataset.as_str(), r.label.as_str())).collect();
        assert_eq!(found, [("m", Range::Tuning, "d", "rtr"), ("m", Range::Test, "d", "rtr")]);
        assert_eq!(rows[0].records.len(), 1);
    }

    #[test]
    fn a_row_folder_whose_name_could_break_a_command_or_a_table_is_refused() {
        for bad in ["cot';touch INJECTED;'", "a|b", "-rf", "row name"] {
            let results = tempfile::tempdir().expect("temp dir");
            write_row(&results.path().join("m/d").join(bad));
            let err = scan(results.path()).map(|_| ()).expect_err(bad);
            assert!(err.to_string().contains("letters, digits"), "{bad}: {err}");
        }
        for good in ["qwen2.5-1.5b", "toqd_paper", "2wikimultihopqa"] {
            assert!(is_row_name(good), "{good}");
        }
    }
}
