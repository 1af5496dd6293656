//! Fault injection through the real binary: `ask`, `eval` and `serve` against a misbehaving
//! OpenAI-compatible server (the scriptable mock of `hopwise_models::testing`: hangs, empty replies,
//! escape sequences, error statuses) and against hostile inputs (devices, FIFOs, broken UTF-8,
//! absurd numbers, credentials in URLs, two runs on one folder). Every command must end by itself,
//! with a clear message and the documented exit status: 0 answered, 1 anything else, 2 bad usage.
//! (Two servers with one model name giving two answers, never mixed, is `e2e_eval`.)

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{hopwise_command, write_jsonl};
use hopwise_core::scripted::ScriptedLlm;
use hopwise_models::testing::{Fault, MockOpenAiServer};
use serde_json::json;

/// Runs `cmd` to its end, or kills it after `limit` and fails the test: every command here must end
/// by itself.
async fn finish_within(mut cmd: Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn hopwise");
        let deadline = Instant::now() + limit;
        while child.try_wait().expect("poll").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("still running after {limit:?}: {what}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().expect("output")
    })
    .await
    .expect("join")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ask(base_url: &str) -> Command {
    let mut cmd = hopwise_command();
    cmd.args(["ask", "Which band recorded Counterparts?", "--strategy", "direct", "--base-url", base_url]);
    cmd
}

async fn mock(llm: ScriptedLlm) -> MockOpenAiServer {
    MockOpenAiServer::start(Arc::new(llm)).await.expect("mock server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_is_bounded_by_the_configured_timeout_even_with_base_url() {
    let server = mock(ScriptedLlm::new().fallback("Rush")).await;
    server.fail_always(Fault::Hang);
    let tmp = tempfile::tempdir().expect("tempdir");
    // The backend's settings come from the file; --base-url only says where the server is.
    let config = tmp.path().join("hopwise.toml");
    let file = "llm = \"srv\"\n[llms.srv]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
                timeout_secs = 1.0\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 20\n";
    std::fs::write(&config, file).expect("config");
    let mut cmd = ask(&server.base_url());
    cmd.arg("--config").arg(&config);
    let started = Instant::now();
    let out = finish_within(cmd, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
    assert_eq!(server.request_count(), 2, "one attempt and one retry");
    eprintln!("hanging server, timeout 1 s x 2 attempts: ask ended after {:?}", started.elapsed());

    // The same bound from flags alone.
    let before = server.request_count();
    let mut cmd = ask(&server.base_url());
    cmd.args(["--llm-timeout-secs", "0.5", "--llm-max-retries", "0"]);
    let out = finish_within(cmd, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(server.request_count() - before, 1, "no retry");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_reply_is_no_answer_and_exits_1() {
    let server = mock(ScriptedLlm::new().fallback("Rush")).await;
    server.fail_always(Fault::EmptyReply);
    let out = finish_within(ask(&server.base_url()), Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(1), "stdout {}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr(&out).contains("no answer"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_from_the_model_or_the_server_never_reach_the_terminal() {
    let evil = "\u{1b}]0;pwned\u{7}Rush\u{1b}[2J\u{9b}1m";
    let server = mock(ScriptedLlm::new().fallback(evil)).await;
    let out = finish_within(ask(&server.base_url()), Duration::from_secs(60)).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout.contains("Rush") && stdout.contains("\\u{1b}"), "{stdout}");
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\u{7}') && !stdout.contains('\u{9b}'), "{stdout:?}");

    server.fail_always(Fault::Raw { status: 400, body: format!("bad request {evil}") });
    let out = finish_within(ask(&server.base_url()), Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("bad request") && !err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_a_base_url_are_never_printed() {
    let down = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    for url in
        [format!("http://alice:pw-hunter2@127.0.0.1:{down}/v1?key=sk-secret"), "http://alice:pw-hunter2@[::1/v1".into()]
    {
        let mut cmd = ask(&url);
        cmd.args(["--llm-max-retries", "0"]);
        let out = finish_within(cmd, Duration::from_secs(60)).await;
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(!err.contains("hunter2") && !err.contains("sk-secret") && !err.contains("alice"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_numbers_are_refused_with_a_message_not_a_panic() {
    let huge = "2305843009213693952";
    let mut by_flag = hopwise_command();
    by_flag.args(["serve", "--bind", "127.0.0.1:0", "--no-retrieval", "--base-url", "http://127.0.0.1:9/v1"]);
    by_flag.args(["--max-concurrency", huge]);
    let mut by_env = hopwise_command();
    by_env.args(["serve", "--bind", "127.0.0.1:0", "--no-retrieval", "--base-url", "http://127.0.0.1:9/v1"]);
    by_env.env("HOPWISE_SERVE_MAX_CONCURRENCY", huge);
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("hopwise.toml");
    std::fs::write(&config, format!("[serve]\nmax_concurrency = {huge}\n")).expect("config");
    let mut by_file = hopwise_command();
    by_file.args(["serve", "--bind", "127.0.0.1:0", "--no-retrieval", "--base-url", "http://127.0.0.1:9/v1"]);
    by_file.arg("--config").arg(&config);
    for cmd in [by_flag, by_env, by_file] {
        let out = finish_within(cmd, Duration::from_secs(30)).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("max_concurrency") && !err.contains("panicked"), "{err}");
    }
}

fn eval(home: &Path, server: &str, dataset: &Path, out: &Path, strategies: &str) -> Command {
    let mut cmd = hopwise_command();
    cmd.env("HOPWISE_HOME", home)
        .args(["eval", "--json", "--context", "--base-url", server, "--strategy", strategies])
        .arg("--dataset")
        .arg(dataset)
        .arg("--out")
        .arg(out);
    cmd
}

fn questions(n: usize) -> Vec<serde_json::Value> {
    (0..n)
        .map(|i| {
            json!({"id": format!("q{i}"), "question": format!("Question number {i}?"), "answers": ["Rush"],
                   "paragraphs": [{"title": "Rush", "text": "Rush is a band.", "supporting": true}]})
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_refuses_devices_and_fifos_and_skips_bad_lines() {
    let server = mock(ScriptedLlm::new().fallback("Answer: Rush")).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let fifo = tmp.path().join("pipe.jsonl");
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    for dataset in [Path::new("/dev/zero"), fifo.as_path()] {
        let out = finish_within(
            eval(tmp.path(), &server.base_url(), dataset, &tmp.path().join("o1"), "direct"),
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("not a regular file"), "{}", stderr(&out));
    }

    // One line of broken UTF-8 costs that line, not the dataset.
    let mixed = tmp.path().join("mixed.jsonl");
    let mut bytes = Vec::new();
    for (i, row) in questions(3).iter().enumerate() {
        let mut line = row.to_string().into_bytes();
        if i == 1 {
            let at = line.iter().position(|&b| b == b'?').expect("a question mark");
            line[at] = 0xff;
        }
        bytes.extend(line);
        bytes.push(b'\n');
    }
    std::fs::write(&mixed, bytes).expect("write");
    let out_dir = tmp.path().join("o2");
    let out =
        finish_within(eval(tmp.path(), &server.base_url(), &mixed, &out_dir, "direct"), Duration::from_secs(60)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!((summary["ran"].as_u64(), summary["skipped"].as_u64()), (Some(2), Some(1)), "{summary}");
    assert!(stderr(&out).contains("mixed.jsonl:2") && stderr(&out).contains("UTF-8"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_messages_say_what_is_wrong_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data.jsonl");
    write_jsonl(&data, &questions(2));
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").expect("write");
    let out =
        finish_within(eval(tmp.path(), "http://127.0.0.1:9/v1", &data, &file, "direct"), Duration::from_secs(30)).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("is a file") && !err.contains("disk"), "{err}");

    let missing = tmp.path().join("missing.jsonl");
    let out = finish_within(
        eval(tmp.path(), "http://127.0.0.1:9/v1", &missing, &tmp.path().join("o"), "direct"),
        Duration::from_secs(30),
    )
    .await;
    let err = stderr(&out);
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
}

/// A failed job is named with its reason on stderr and in `--json`, not only counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_says_why_each_failed_job_failed() {
    let server = mock(ScriptedLlm::new().fallback("Answer: Rush")).await;
    server.fail_always(Fault::Status { status: 400, retry_after: None });
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data.jsonl");
    write_jsonl(&data, &questions(2));
    let out = finish_within(
        eval(tmp.path(), &server.base_url(), &data, &tmp.path().join("o"), "direct"),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    for id in ["q0", "q1"] {
        let line = err
            .lines()
            .find(|l| l.starts_with("error: ") && l.contains(&format!(" {id} direct: ")))
            .unwrap_or_default();
        assert!(line.contains("400"), "{id} is named with its reason: {err}");
    }
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json report");
    assert_eq!(report["failed"], 2, "{report}");
    let failures = report["failures"].as_array().cloned().unwrap_or_default();
    assert_eq!(failures.len(), 2, "{report}");
    assert!(
        failures.iter().all(|f| f["strategy"] == "direct" && f["error"].as_str().is_some_and(|e| e.contains("400"))),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_runs_a_repeated_strategy_once_and_one_writer_per_folder() {
    let server = mock(ScriptedLlm::new().fallback("Answer: Rush")).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data.jsonl");
    write_jsonl(&data, &questions(4));
    let out_dir = tmp.path().join("twice");
    let out =
        finish_within(eval(tmp.path(), &server.base_url(), &data, &out_dir, "direct,direct"), Duration::from_secs(60))
            .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = std::fs::read_to_string(out_dir.join("results.jsonl")).expect("results");
    assert_eq!(lines.lines().count(), 4, "{lines}");

    // A slow server keeps the first run busy while the second starts on the same folder.
    server.set_delay(Duration::from_millis(300));
    let shared = tmp.path().join("shared");
    let mut first = eval(tmp.path(), &server.base_url(), &data, &shared, "direct");
    first.arg("--no-cache");
    let first = tokio::task::spawn_blocking(move || first.output().expect("first run"));
    let results = shared.join("results.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&results).map(|m| m.len() == 0).unwrap_or(true) {
        assert!(Instant::now() < deadline, "the first run wrote nothing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut second = eval(tmp.path(), &server.base_url(), &data, &shared, "direct");
    second.arg("--no-cache");
    let out = finish_within(second, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("another run"), "{}", stderr(&out));
    let first = first.await.expect("join");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let text = std::fs::read_to_string(&results).expect("results");
    assert_eq!(text.lines().count(), 4, "each job once: {text}");
}

/// `hopwise serve` on a free port; killed when dropped.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_502_for_a_failing_backend_and_accepts_a_token_with_a_newline() {
    let backend = mock(ScriptedLlm::new().fallback("Rush")).await;
    backend.fail_always(Fault::Status { status: 500, retry_after: None });
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut cmd = hopwise_command();
    cmd.args(["serve", "--no-retrieval", "--strategy", "direct", "--token-env", "E2E_FAULTS_TOKEN"])
        .args(["--bind", &format!("127.0.0.1:{port}"), "--base-url", &backend.base_url(), "--llm-max-retries", "0"])
        .env("E2E_FAULTS_TOKEN", "tok-with-newline\n")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut server = Serve(cmd.spawn().expect("serve"));
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(server.0.try_wait().expect("poll").is_none(), "serve exited early");
        assert!(Instant::now() < deadline, "serve did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ask = json!({"question": "Which band recorded Counterparts?"});
    let resp = client
        .post(format!("{base}/v1/ask"))
        .header("authorization", "BEARER tok-with-newline")
        .json(&ask)
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status().as_u16(), 502);
    let body = resp.text().await.expect("body");
    assert!(body.contains("upstream_error"), "{body}");
    let backend_port = backend.addr().port().to_string();
    assert!(!body.contains(&backend_port) && !body.contains("injected fault"), "{body}");

    backend.heal();
    let resp = client.post(format!("{base}/v1/ask")).bearer_auth("tok-with-newline").json(&ask).send().await;
    let resp = resp.expect("ask");
    assert_eq!(resp.status().as_u16(), 200);
    let trace: serde_json::Value = resp.json().await.expect("trace");
    assert_eq!(trace["answer"], "Rush");
    drop(server);
}
