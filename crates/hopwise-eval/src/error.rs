use std::path::PathBuf;

use hopwise_reason::ReasonError;

/// Every failure of the evaluation harness.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{path}: {message}")]
    Dataset { path: PathBuf, message: String },
    #[error("{path}: no example could be loaded ({skipped} lines skipped; first problem: {first})")]
    EmptyDataset { path: PathBuf, skipped: usize, first: String },
    #[error("two datasets are both named `{0}` (names come from file names; rename one)")]
    DuplicateDataset(String),
    #[error(transparent)]
    Strategy(#[from] ReasonError),
    #[error(
        "{out_dir} holds results of a different configuration ({difference}); \
         use a new --out directory, or restore the original settings to resume"
    )]
    ConfigMismatch { out_dir: PathBuf, difference: String },
    #[error("{path}:{line}: corrupt results line ({message}); fix or remove that line to resume")]
    CorruptResults { path: PathBuf, line: usize, message: String },
    #[error("writing {path} failed ({source}){}", full_disk_hint(.source))]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A run's results file could not be written: the run stops with what it finished.
    #[error("writing {path} failed ({source}){}; the run stopped, finished results are kept", full_disk_hint(.source))]
    ResultsWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the output directory {0} is a file; name a directory (it is created if missing)")]
    OutIsAFile(PathBuf),
    #[error(
        "{out_dir} is being written by another run (it holds {out_dir}/run.lock); \
         wait for that run to end, or use another --out directory"
    )]
    Busy { out_dir: PathBuf },
    #[error("`{name}` is being fetched by another `hopwise data fetch` (it holds {dir}/run.lock); wait for it to end")]
    FetchBusy { name: String, dir: PathBuf },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building the context for {dataset}/{id} with `{strategy}`: {message}")]
    Context { dataset: String, id: String, strategy: String, message: String },
    #[error(
        "{count} jobs in a row failed in a backend (last: {last}); the run stopped. \
         Finished results are kept; fix the backend and run again to resume"
    )]
    BackendFailing { count: usize, last: String },
    #[error("plot {path}: {message}")]
    Plot { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{path}: {message}")]
    Report { path: PathBuf, message: String },
    #[error("{0}")]
    UnknownDataset(String),
    #[error("downloading {url}: {message}")]
    Download { url: String, message: String },
    #[error(
        "{file} from {url} has sha256 {actual}, but {expected} is pinned; the download was deleted. \
         The source may have changed or the transfer was corrupted: try again, and if it persists the \
         registry entry needs review"
    )]
    ChecksumMismatch { file: String, url: String, expected: String, actual: String },
    #[error("converting {name}: {message}")]
    Convert { name: String, message: String },
}

pub type Result<T, E = EvalError> = std::result::Result<T, E>;

/// Said only when it is so: a write refused for another reason (a file where a directory should be,
/// no permission) must not send the user looking for disk space.
fn full_disk_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => " (the disk is full)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a run's results file speaks of a stopped run; `report` and `data fetch` write files too.
    #[test]
    fn only_a_results_write_says_the_run_stopped() {
        let io = || std::io::Error::other("disk gone");
        let plain = EvalError::Write { path: PathBuf::from("EVALUATION.md"), source: io() }.to_string();
        assert!(plain.contains("EVALUATION.md") && !plain.contains("run stopped"), "{plain}");
        let results = EvalError::ResultsWrite { path: PathBuf::from("out/results.jsonl"), source: io() }.to_string();
        assert!(results.contains("the run stopped, finished results are kept"), "{results}");
    }
}
