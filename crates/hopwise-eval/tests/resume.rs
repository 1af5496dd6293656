//! Kill -9 in the middle of a run, then resume: no duplicates, no partial lines, every job present,
//! and the lines finished before the kill are kept byte for byte.
mod common;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{config, factory, raw_lines, write_dataset};
use hopwise_eval::{run_eval, NoProgress};

const CHILD_ENV: &str = "HOPWISE_EVAL_RESUME_CHILD_DIR";
const EXAMPLES: usize = 40;
const STRATEGIES: [&str; 2] = ["direct", "cot"];

/// The runner as a separate process: this test binary re-invoked with only this test selected.
/// Run by `kill_9_mid_run_then_resume`; ignored on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "child process of kill_9_mid_run_then_resume"]
async fn resume_child() {
    let dir = PathBuf::from(std::env::var_os(CHILD_ENV).expect("run by kill_9_mid_run_then_resume"));
    let cfg = config(vec![dir.join("alpha.jsonl")], &STRATEGIES, &dir.join("out"));
    run_eval(&cfg, factory(Duration::from_millis(60), false), &NoProgress).await.expect("child run");
}

fn spawn_child(dir: &Path) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    Command::new(exe)
        .args(["resume_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .spawn()
        .expect("spawn child")
}

fn complete_lines(path: &Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0)
}

#[test]
fn kill_9_mid_run_then_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_dataset(dir.path(), "alpha", EXAMPLES);
    let results = dir.path().join("out/results.jsonl");
    let total = EXAMPLES * STRATEGIES.len();

    let mut child = spawn_child(dir.path());
    let deadline = Instant::now() + Duration::from_secs(120);
    while complete_lines(&results) < 10 {
        assert!(Instant::now() < deadline, "the child made no progress");
        assert!(child.try_wait().expect("poll").is_none(), "the child ended before it could be killed");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL"); // Child::kill sends SIGKILL on Unix.
    child.wait().expect("reap");
    let at_kill = std::fs::read(&results).expect("read");
    let finished = at_kill.iter().filter(|&&c| c == b'\n').count();
    assert!(finished < total, "killed mid-run ({finished} of {total} finished)");

    // A torn write as a crash inside `write` would leave it.
    let mut f = std::fs::OpenOptions::new().append(true).open(&results).expect("open");
    f.write_all(b"{\"dataset\":\"alpha\",\"id\":\"alpha-3").expect("tear");
    drop(f);

    let status = spawn_child(dir.path()).wait().expect("resume");
    assert!(status.success(), "the resumed run finished");

    let after = std::fs::read(&results).expect("read");
    let complete_prefix = at_kill.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
    assert_eq!(&after[..complete_prefix], &at_kill[..complete_prefix], "finished lines kept byte for byte");
    let lines = raw_lines(&dir.path().join("out"));
    assert_eq!(lines.len(), total, "every job once");
    let keys: HashSet<(String, String)> = lines
        .iter()
        .map(|l| (l["id"].as_str().unwrap_or("").to_string(), l["strategy"].as_str().unwrap_or("").to_string()))
        .collect();
    assert_eq!(keys.len(), total, "no duplicates");
    for i in 0..EXAMPLES {
        for s in STRATEGIES {
            assert!(keys.contains(&(format!("alpha-{i}"), s.to_string())), "alpha-{i} {s} present");
        }
    }
    assert!(dir.path().join("out/summary.md").exists());
}
