//! How a real-path test (a real server, model or browser it needs is not installed) says that it
//! did not run: the reason on stderr, and one line appended to the file `$HOPWISE_TEST_SKIPS` names,
//! so `scripts/test.sh` can end with one summary line of every skip (cargo hides a passing test's
//! stderr). Whether a skip is allowed at all (never under `CI`) is the caller's decision.

use std::io::Write;

/// Prints `skipped: <reason>` and records it (best effort: a failed write only loses the summary
/// line's entry, never the test's own result).
pub fn skipped(reason: &str) {
    eprintln!("skipped: {reason}");
    let Some(path) = std::env::var_os("HOPWISE_TEST_SKIPS").filter(|p| !p.is_empty()) else { return };
    let line = reason.replace('\n', " ");
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(file, "{line}");
    }
}
