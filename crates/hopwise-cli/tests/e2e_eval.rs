//! `hopwise eval` end to end: the real binary, a real BM25 index of the HotPotQA corpus, a real HTTP
//! server speaking the OpenAI protocol (scripted replies), real dataset files. Checks the outputs
//! agree with each other (summary = recomputation from results.jsonl), that a second run resumes
//! without a single model call, and that bad input is refused clearly without touching finished work.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use hopwise_core::scripted::ScriptedLlm;
use hopwise_models::testing::MockOpenAiServer;

fn hopwise(home: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hopwise"));
    cmd.env_remove("HOPWISE_CONFIG").env_remove("HOPWISE_LLM").env_remove("HOPWISE_MODEL").env_remove("HOPWISE_INDEX");
    cmd.env("HOPWISE_HOME", home);
    cmd
}

/// A file of the repository's sample data (`data/sample`, with its sources and licenses).
fn sample_data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample").join(file)
}

async fn output(mut cmd: std::process::Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run hopwise")).await.expect("join")
}

mod common;

/// Answers "yes" without passages; with passages, the title of the first one. Deterministic, and
/// right for some questions and wrong for others, so the scores are not trivially 0 or 100.
fn model() -> ScriptedLlm {
    common::first_title_model("NO!").on("Give a short answer", "Answer: yes")
}

fn eval_cmd(home: &Path, server: &str, index: &Path, out: &Path, strategies: &str) -> std::process::Command {
    eval_cmd_with_model(home, server, index, out, strategies, "scripted")
}

fn eval_cmd_with_model(
    home: &Path,
    server: &str,
    index: &Path,
    out: &Path,
    strategies: &str,
    model: &str,
) -> std::process::Command {
    let mut cmd = hopwise(home);
    cmd.args(["eval", "--json", "--limit", "6", "--model", model, "--base-url", server, "--strategy", strategies])
        .arg("--dataset")
        .arg(sample_data("hotpotqa.jsonl"))
        .arg("--dataset")
        .arg(sample_data("2wikimultihopqa.jsonl"))
        .arg("--index")
        .arg(index)
        .arg("--out")
        .arg(out);
    cmd
}

fn read_records(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("results.jsonl")).expect("results.jsonl");
    assert!(text.ends_with('\n'), "no partial last line");
    text.lines().map(|l| serde_json::from_str(l).expect("each line is one JSON record")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_writes_consistent_results_resumes_and_refuses_bad_input() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let index = tmp.path().join("index");
    let out = tmp.path().join("run");
    let built = hopwise(&home)
        .args(["index", "--json", "--index"])
        .arg(&index)
        .arg(sample_data("corpus.jsonl"))
        .output()
        .expect("run hopwise index");
    assert!(built.status.success(), "index: {}", String::from_utf8_lossy(&built.stderr));

    let server = MockOpenAiServer::start(Arc::new(model())).await.expect("mock server");
    let url = server.base_url();

    let first = output(eval_cmd(&home, &url, &index, &out, "direct,rtr")).await;
    assert!(first.status.success(), "eval: {}", String::from_utf8_lossy(&first.stderr));
    let report: serde_json::Value = serde_json::from_slice(&first.stdout).expect("--json report");
    assert_eq!(report["total"], 24, "{report}");
    assert_eq!(report["ran"], 24, "{report}");
    let calls_after_first = server.request_count();
    assert_eq!(calls_after_first, 24, "one model call per direct/rtr question");

    // results.jsonl: one line per example x strategy, each with its trace file.
    let records = read_records(&out);
    assert_eq!(records.len(), 24);
    let keys: HashSet<(String, String, String)> =
        records.iter().map(|r| (r["dataset"].to_string(), r["id"].to_string(), r["strategy"].to_string())).collect();
    assert_eq!(keys.len(), 24, "no duplicates");
    for r in &records {
        let trace = out.join(r["trace"].as_str().expect("trace path"));
        assert!(trace.is_file(), "trace file {}", trace.display());
        if r["strategy"] == "rtr" {
            assert_eq!(r["stats"]["retrieval_rounds"], 1, "{r}");
            assert_ne!(r["prediction"], "unknown", "the real index returned passages: {r}");
        }
    }

    // summary.json equals a recomputation from results.jsonl.
    let mut sums: BTreeMap<(String, String), (f64, f64, usize)> = BTreeMap::new();
    for r in &records {
        let key = (r["strategy"].as_str().unwrap_or("").to_string(), r["dataset"].as_str().unwrap_or("").to_string());
        let e = sums.entry(key).or_default();
        e.0 += r["metrics"]["accuracy"].as_f64().expect("accuracy");
        e.1 += r["metrics"]["f1"].as_f64().expect("f1");
        e.2 += 1;
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).expect("summary.json")).expect("json");
    let cells = summary["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), sums.len(), "one cell per strategy x dataset");
    let mut accuracies = Vec::new();
    for cell in cells {
        let key =
            (cell["strategy"].as_str().unwrap_or("").to_string(), cell["dataset"].as_str().unwrap_or("").to_string());
        let (acc, f1, n) = sums[&key];
        assert_eq!(cell["n"].as_u64(), Some(n as u64));
        assert!((cell["accuracy"].as_f64().expect("accuracy") - acc / n as f64).abs() < 1e-9, "{cell}");
        assert!((cell["f1"].as_f64().expect("f1") - f1 / n as f64).abs() < 1e-9, "{cell}");
        accuracies.push(acc / n as f64);
    }
    let markdown = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(markdown.contains("| direct |") && markdown.contains("| rtr |"), "{markdown}");
    assert!(markdown.contains("## Efficiency"), "{markdown}");

    // A second run resumes: nothing re-run, not one model call, the file byte for byte the same.
    let before = std::fs::read(out.join("results.jsonl")).expect("read");
    let again = output(eval_cmd(&home, &url, &index, &out, "direct,rtr")).await;
    assert!(again.status.success(), "resume: {}", String::from_utf8_lossy(&again.stderr));
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).expect("--json report");
    assert_eq!((report["resumed"].as_u64(), report["ran"].as_u64()), (Some(24), Some(0)), "{report}");
    assert_eq!(server.request_count(), calls_after_first);
    assert_eq!(std::fs::read(out.join("results.jsonl")).expect("read"), before);

    // A different configuration (another model) is refused, and the finished results stay as they were.
    let refused = output(eval_cmd_with_model(&home, &url, &index, &out, "direct,rtr", "another-model")).await;
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("different configuration"), "{err}");
    assert_eq!(std::fs::read(out.join("results.jsonl")).expect("read"), before);

    // A second server with the same model name but other answers: resuming the folder is refused
    // (its rows came from the first server), and a fresh folder gets the second server's own answers,
    // not the first server's replayed from the call cache.
    let other = MockOpenAiServer::start(Arc::new(ScriptedLlm::new().fallback("Answer: Lyon"))).await.expect("mock");
    let refused = output(eval_cmd(&home, &other.base_url(), &index, &out, "direct,rtr")).await;
    assert!(!refused.status.success(), "resuming against another server must be refused");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("different configuration"));
    let fresh = tmp.path().join("other-server");
    let second = output(eval_cmd(&home, &other.base_url(), &index, &fresh, "direct")).await;
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert_eq!(other.request_count(), 12, "every question asked of the second server");
    assert!(read_records(&fresh).iter().all(|r| r["prediction"] == "Lyon"), "no answer replayed across servers");
    assert_eq!(server.request_count(), calls_after_first);

    // An unknown strategy is refused before any work.
    let unknown = output(eval_cmd(&home, &url, &index, &tmp.path().join("other"), "direct,nope")).await;
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nope"));

    // A dataset line without a question is skipped with a warning naming the file and line; the rest runs.
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"id\":\"a\",\"question\":\"Who?\",\"answers\":[\"x\"]}\n{\"id\":\"b\",\"answers\":[\"y\"]}\n",
    )
    .expect("write");
    let mut cmd = hopwise(&home);
    cmd.args(["eval", "--json", "--model", "scripted", "--base-url", &url, "--strategy", "direct", "--dataset"])
        .arg(&bad)
        .arg("--index")
        .arg(&index)
        .arg("--out")
        .arg(tmp.path().join("bad-run"));
    let partial = output(cmd).await;
    assert!(partial.status.success(), "{}", String::from_utf8_lossy(&partial.stderr));
    let err = String::from_utf8_lossy(&partial.stderr);
    assert!(err.contains("bad.jsonl:2") && err.contains("question"), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&partial.stdout).expect("--json report");
    assert_eq!((report["total"].as_u64(), report["skipped"].as_u64()), (Some(1), Some(1)), "{report}");
    // The scores are real: some right, some wrong.
    assert!(accuracies.iter().any(|&a| a < 1.0), "{accuracies:?}");
}
