//! End-to-end tests of the runner through the real path: loaders, strategies, results file, reports.
mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{config, factory, raw_lines, write_dataset};
use hopwise_eval::{read_results, run_eval, EvalError, NoProgress, ProgressSnapshot};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_runs_resumes_and_summary_equals_recomputation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write_dataset(dir.path(), "alpha", 7);
    let b = write_dataset(dir.path(), "beta", 5);
    let out = dir.path().join("out");
    let cfg = config(vec![a, b], &["direct", "cot", "rtr"], &out);
    let seen = Arc::new(Mutex::new(Vec::<ProgressSnapshot>::new()));
    let sink = {
        let seen = seen.clone();
        move |s: &ProgressSnapshot| seen.lock().expect("lock").push(s.clone())
    };
    let outcome = run_eval(&cfg, factory(Duration::ZERO, true), &sink).await.expect("run");
    assert_eq!((outcome.total, outcome.resumed, outcome.ran), (36, 0, 36));
    let last = seen.lock().expect("lock").last().cloned().expect("progress reported");
    assert_eq!((last.done, last.total), (36, 36));

    // Every job once, with a trace file that parses.
    let lines = raw_lines(&out);
    assert_eq!(lines.len(), 36);
    let keys: HashSet<(String, String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["dataset"].as_str().unwrap_or("").into(),
                l["id"].as_str().unwrap_or("").into(),
                l["strategy"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(keys.len(), 36, "no duplicates");
    for l in &lines {
        let trace_file = out.join(l["trace"].as_str().expect("trace path"));
        let trace: hopwise_core::Trace =
            serde_json::from_slice(&std::fs::read(&trace_file).expect("trace file")).expect("trace json");
        assert_eq!(trace.answer, l["prediction"].as_str().unwrap_or(""));
    }

    // Scores follow the scripted model: direct/cot know questions whose number is not a multiple of 3,
    // rtr reads every answer from its passages.
    let direct_alpha: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["strategy"] == "direct" && l["dataset"] == "alpha").collect();
    assert_eq!(direct_alpha.iter().filter(|l| l["metrics"]["accuracy"] == 1.0).count(), 4, "1,2,4,5 of 0..7");
    let rtr = lines.iter().find(|l| l["strategy"] == "rtr").expect("rtr line");
    assert_eq!(rtr["metrics"]["em"], 1.0);
    assert_eq!(rtr["stats"]["retrieval_rounds"], 1);
    assert_eq!(rtr["retrieval"]["mrr"], 0.5, "gold passage ranked second");
    assert_eq!(rtr["retrieval"]["hits"], 1.0);

    // summary.json equals a recomputation from the raw lines.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).expect("summary.json")).expect("json");
    let markdown = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    let mut groups: BTreeMap<(String, String), Vec<&serde_json::Value>> = BTreeMap::new();
    for l in &lines {
        groups
            .entry((l["strategy"].as_str().unwrap_or("").into(), l["dataset"].as_str().unwrap_or("").into()))
            .or_default()
            .push(l);
    }
    let mean = |rs: &[&serde_json::Value], f: &dyn Fn(&serde_json::Value) -> f64| {
        rs.iter().map(|r| f(r)).sum::<f64>() / rs.len() as f64
    };
    let cells = summary["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), groups.len());
    for ((strategy, dataset), rs) in &groups {
        let cell = cells
            .iter()
            .find(|c| c["strategy"] == strategy.as_str() && c["dataset"] == dataset.as_str())
            .expect("cell");
        let checks: [(&str, f64); 6] = [
            ("accuracy", mean(rs, &|r| r["metrics"]["accuracy"].as_f64().unwrap_or(-1.0))),
            ("em", mean(rs, &|r| r["metrics"]["em"].as_f64().unwrap_or(-1.0))),
            ("f1", mean(rs, &|r| r["metrics"]["f1"].as_f64().unwrap_or(-1.0))),
            ("llm_calls", mean(rs, &|r| r["stats"]["llm_calls"].as_f64().unwrap_or(-1.0))),
            ("retrieval_rounds", mean(rs, &|r| r["stats"]["retrieval_rounds"].as_f64().unwrap_or(-1.0))),
            ("input_words", mean(rs, &|r| r["stats"]["input_words"].as_f64().unwrap_or(-1.0))),
        ];
        for (field, expected) in checks {
            let got = cell[field].as_f64().expect(field);
            assert!((got - expected).abs() < 1e-9, "{strategy}/{dataset} {field}: {got} != {expected}");
        }
        assert_eq!(cell["n"], rs.len());
        let acc = checks[0].1;
        let shown = format!("{:.2} (n={})", 100.0 * acc, rs.len());
        assert!(markdown.contains(&shown), "summary.md shows {shown} for {strategy}/{dataset}");
    }
    assert!(markdown.contains("| rtr |") && markdown.contains("retrieval rounds") && markdown.contains("bridge"));

    // A second run finds everything finished and changes nothing.
    let before = std::fs::read(out.join("results.jsonl")).expect("read");
    let again = run_eval(&cfg, factory(Duration::ZERO, true), &NoProgress).await.expect("rerun");
    assert_eq!((again.resumed, again.ran), (36, 0));
    assert_eq!(std::fs::read(out.join("results.jsonl")).expect("read"), before);

    // Growing the grid with a new strategy runs only the new jobs.
    let mut more = cfg.clone();
    more.strategies.push("least-to-most".into());
    let grown = run_eval(&more, factory(Duration::ZERO, true), &NoProgress).await.expect("grow");
    assert_eq!((grown.resumed, grown.ran), (36, 12));
    let (records, _) = read_results(&out.join("results.jsonl")).expect("read");
    assert_eq!(records.len(), 48);
}

#[tokio::test]
async fn a_different_configuration_is_refused_and_nothing_is_touched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write_dataset(dir.path(), "alpha", 3);
    let out = dir.path().join("out");
    let cfg = config(vec![a], &["direct"], &out);
    run_eval(&cfg, factory(Duration::ZERO, false), &NoProgress).await.expect("run");
    let before = std::fs::read(out.join("results.jsonl")).expect("read");
    let mut other = cfg.clone();
    other.model = "another-model".into();
    let err = run_eval(&other, factory(Duration::ZERO, false), &NoProgress).await.expect_err("mismatch");
    assert!(matches!(err, EvalError::ConfigMismatch { .. }), "{err}");
    assert!(err.to_string().contains("--out"), "{err}");
    assert_eq!(std::fs::read(out.join("results.jsonl")).expect("read"), before);
}

#[tokio::test]
async fn unknown_strategy_fails_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write_dataset(dir.path(), "alpha", 2);
    let out = dir.path().join("out");
    let err = run_eval(&config(vec![a], &["direct", "no-such"], &out), factory(Duration::ZERO, false), &NoProgress)
        .await
        .expect_err("unknown strategy");
    assert!(err.to_string().contains("unknown strategy `no-such`"), "{err}");
    assert!(!out.exists());
}

#[tokio::test]
async fn a_strategy_needing_a_retriever_without_one_stops_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write_dataset(dir.path(), "alpha", 2);
    let out = dir.path().join("out");
    let err = run_eval(&config(vec![a], &["rtr"], &out), factory(Duration::ZERO, false), &NoProgress)
        .await
        .expect_err("no retriever");
    assert!(err.to_string().contains("needs a retriever"), "{err}");
}

#[tokio::test]
async fn bad_dataset_lines_are_skipped_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_dataset(dir.path(), "alpha", 3);
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str("{\"id\": \"broken\", \"answers\": [\"x\"]}\n");
    std::fs::write(&path, text).expect("write");
    let out = dir.path().join("out");
    let outcome = run_eval(&config(vec![path.clone()], &["direct"], &out), factory(Duration::ZERO, false), &NoProgress)
        .await
        .expect("the good lines run");
    assert_eq!(outcome.total, 3);
    assert_eq!(outcome.skipped.len(), 1);
    assert!(outcome.skipped[0].location.ends_with("alpha.jsonl:4"), "{}", outcome.skipped[0].location);
    assert!(outcome.skipped[0].message.contains("missing field `question`"));

    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "{\"id\": 1}\n").expect("write");
    let err = run_eval(
        &config(vec![empty], &["direct"], &dir.path().join("out2")),
        factory(Duration::ZERO, false),
        &NoProgress,
    )
    .await
    .expect_err("nothing loads");
    assert!(err.to_string().contains("empty.jsonl:1"), "{err}");
}

/// Fails every call whose question has number 1 (or every call, with `all`), like a dead server.
struct FailingLlm {
    all: bool,
    inner: hopwise_core::scripted::ScriptedLlm,
}

#[async_trait::async_trait]
impl hopwise_core::Llm for FailingLlm {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn chat(&self, request: &hopwise_core::ChatRequest) -> hopwise_core::Result<hopwise_core::ChatResponse> {
        let text: String = request.messages.iter().map(|m| m.content.as_str()).collect();
        if self.all || common::number_in(&text) == Some(1) {
            return Err(hopwise_core::Error::backend(
                "test",
                hopwise_core::BackendErrorKind::Connection,
                "connection refused",
            ));
        }
        self.inner.chat(request).await
    }
}

fn failing_factory(all: bool) -> Arc<dyn hopwise_eval::CtxFactory> {
    let llm = Arc::new(FailingLlm { all, inner: common::model(Duration::ZERO) });
    Arc::new(
        move |_job: &hopwise_eval::Job, rec: hopwise_core::Recorder| -> hopwise_eval::Result<hopwise_reason::Ctx> {
            Ok(hopwise_reason::Ctx::new(llm.clone(), Arc::new(hopwise_core::Prompts::default()), rec))
        },
    )
}

#[tokio::test]
async fn backend_failures_are_not_written_and_are_retried_by_the_next_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write_dataset(dir.path(), "alpha", 6);
    let out = dir.path().join("out");
    let cfg = config(vec![a], &["direct", "cot"], &out);
    let first = run_eval(&cfg, failing_factory(false), &NoProgress).await.expect("run");
    assert_eq!(first.ran, 10);
    assert_eq!(first.failed.len(), 2, "alpha-1 with both strategies");
    assert!(first.failed.iter().all(|f| f.id == "alpha-1" && f.error.contains("connection refused")));
    assert_eq!(raw_lines(&out).len(), 10);
    let second = run_eval(&cfg, factory(Duration::ZERO, false), &NoProgress).await.expect("rerun");
    assert_eq!((second.resumed, second.ran, second.failed.len()), (10, 2, 0));
    assert_eq!(raw_lines(&out).len(), 12);
}

#[tokio::test]
async fn a_dead_backend_stops_the_run_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write_dataset(dir.path(), "alpha", 20);
    let out = dir.path().join("out");
    let err = run_eval(&config(vec![a], &["direct"], &out), failing_factory(true), &NoProgress)
        .await
        .expect_err("dead backend");
    assert!(matches!(err, EvalError::BackendFailing { count: 5, .. }), "{err}");
    assert!(err.to_string().contains("connection refused"), "{err}");
    assert!(raw_lines(&out).is_empty());
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary written even though the run stopped");
    assert!(summary.contains("(0 records)"), "{summary}");
}

#[test]
fn the_run_future_can_be_spawned() {
    fn assert_send<T: Send>(_: &T) {}
    let cfg = config(vec![], &["direct"], std::path::Path::new("/nonexistent"));
    let fut = run_eval(&cfg, factory(Duration::ZERO, false), &NoProgress);
    assert_send(&fut);
}

/// Two runs on one output directory: the second is refused while the first writes, so no job is
/// written twice; once the first is done, the second resumes with nothing left to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_on_the_same_directory_is_refused_while_the_first_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write_dataset(dir.path(), "alpha", 12);
    let out = dir.path().join("out");
    let cfg = config(vec![data], &["direct", "cot"], &out);
    let first = {
        let cfg = cfg.clone();
        tokio::spawn(async move { run_eval(&cfg, factory(Duration::from_millis(40), true), &NoProgress).await })
    };
    // Wait until the first run has written something, so it surely holds the directory.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read(out.join("results.jsonl")).map(|b| b.is_empty()).unwrap_or(true) {
        assert!(std::time::Instant::now() < deadline, "the first run wrote nothing");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = run_eval(&cfg, factory(Duration::ZERO, true), &NoProgress).await.expect_err("directory in use");
    assert!(matches!(err, EvalError::Busy { .. }), "{err}");
    assert!(err.to_string().contains("another run"), "{err}");

    let done = first.await.expect("join").expect("first run");
    assert_eq!(done.ran, 24);
    let again = run_eval(&cfg, factory(Duration::ZERO, true), &NoProgress).await.expect("free again");
    assert_eq!((again.resumed, again.ran), (24, 0));
    let lines = raw_lines(&out);
    let keys: HashSet<String> = lines.iter().map(|l| format!("{}/{}", l["id"], l["strategy"])).collect();
    assert_eq!((lines.len(), keys.len()), (24, 24), "every job once");
}

#[tokio::test]
async fn a_strategy_named_twice_runs_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write_dataset(dir.path(), "alpha", 3);
    let out = dir.path().join("out");
    let outcome =
        run_eval(&config(vec![data], &["direct", "direct"], &out), factory(Duration::ZERO, true), &NoProgress)
            .await
            .expect("run");
    assert_eq!((outcome.total, outcome.ran), (3, 3));
    assert_eq!(raw_lines(&out).len(), 3);
}

#[tokio::test]
async fn an_output_path_that_is_a_file_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write_dataset(dir.path(), "alpha", 2);
    let out = dir.path().join("taken");
    std::fs::write(&out, "not a directory").expect("write");
    let err =
        run_eval(&config(vec![data], &["direct"], &out), factory(Duration::ZERO, true), &NoProgress).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("is a file") && !msg.contains("disk"), "{msg}");
}

/// A time budget ends the run between questions: what started is finished and written, nothing more
/// starts, and the next run resumes with exactly the jobs left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_budget_stops_between_questions_and_the_next_run_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write_dataset(dir.path(), "alpha", 6);
    let out = dir.path().join("out");
    let mut cfg = config(vec![data], &["direct"], &out);
    cfg.concurrency = 1;
    // Each call takes 200 ms: the first job starts, the budget runs out while it (or the next) runs.
    cfg.time_budget = Some(Duration::from_millis(300));
    let first = run_eval(&cfg, factory(Duration::from_millis(200), false), &NoProgress).await.expect("run");
    assert!(first.ran >= 1 && first.not_started >= 1, "ran {} left {}", first.ran, first.not_started);
    assert_eq!(first.ran + first.not_started, 6);
    assert_eq!(raw_lines(&out).len(), first.ran, "every started job was written, whole");
    assert!(first.notes.iter().any(|n| n.contains("time budget")), "{:?}", first.notes);

    cfg.time_budget = None;
    let second = run_eval(&cfg, factory(Duration::ZERO, false), &NoProgress).await.expect("resume");
    assert_eq!((second.resumed, second.ran, second.not_started), (first.ran, first.not_started, 0));
    assert_eq!(raw_lines(&out).len(), 6);
}
