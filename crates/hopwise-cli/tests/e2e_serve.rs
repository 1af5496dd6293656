//! `hopwise serve` end to end: the real binary, a real BM25 index built by `hopwise index`, a real
//! HTTP model server speaking the OpenAI protocol (scripted answers), questions over HTTP, then
//! SIGTERM while a question is in flight: it is answered, and the server exits cleanly.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{Decision, Trace};
use hopwise_models::testing::MockOpenAiServer;
use serde_json::json;

const QUESTION: &str = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";
const TOKEN: &str = "e2e-serve-token-7f3a";

fn hopwise() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hopwise"));
    cmd.env_remove("HOPWISE_CONFIG").env_remove("HOPWISE_LLM").env_remove("HOPWISE_MODEL").env_remove("HOPWISE_INDEX");
    cmd
}

fn model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on(
            "Break the question below",
            "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?",
        )
        .on(
            "Review the candidates",
            "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?",
        )
        .on("Describe which answers help", "1 -> 2\n2 -> Q")
        .on("Rewrite the question below", "Who was the drummer of Rush?")
        .on_fn("from your own knowledge", |p, _| {
            if p.contains("Counterparts?") && !p.contains("drummer of") {
                "Rush".into()
            } else {
                "NO!".into()
            }
        })
        // Answer from context only when the real index found the evidence.
        .on_fn("Using the passages, answer", |p, _| {
            // The question itself is not settled by one reading (so ToQD plans); its steps are.
            if p.contains("Neil Peart was the drummer") && !p.contains(QUESTION) {
                "Neil Peart".into()
            } else {
                "NO!".into()
            }
        })
        .on(
            "Reply in exactly this form",
            "Answer: Rush\nReason: Rush released Counterparts; Neil Peart was its drummer.",
        )
}

fn build_index(dir: &Path) {
    let corpus = dir.join("corpus.jsonl");
    let docs = [
        json!({"id": "peart", "title": "Neil Peart", "text": "Neil Peart was the drummer of Rush and was inducted into the Modern Drummer Hall of Fame."}),
        json!({"id": "counterparts", "title": "Counterparts (album)", "text": "Counterparts is the fifteenth studio album by the Canadian rock band Rush."}),
        json!({"id": "jaws", "title": "Jaws", "text": "Jaws is a 1975 thriller film directed by Steven Spielberg."}),
        json!({"id": "police", "title": "Stewart Copeland", "text": "Stewart Copeland is the drummer of The Police."}),
    ];
    let lines: Vec<String> = docs.iter().map(|d| d.to_string()).collect();
    std::fs::write(&corpus, lines.join("\n")).expect("write corpus");
    let out =
        hopwise().args(["index", "--json", "--index"]).arg(dir.join("index")).arg(&corpus).output().expect("run index");
    assert!(out.status.success(), "index failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// Kills the server if the test fails before it stops it.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_healthy(client: &reqwest::Client, base: &str, server: &mut Server) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        if let Ok(Some(status)) = server.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = server.0.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("hopwise serve exited early ({status}): {err}");
        }
        assert!(Instant::now() < deadline, "hopwise serve did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_over_http_and_stops_cleanly_on_sigterm() {
    let tmp = tempfile::tempdir().expect("tempdir");
    build_index(tmp.path());
    let mock = MockOpenAiServer::start(Arc::new(model())).await.expect("mock model server");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = hopwise()
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--base-url", &mock.base_url(), "--model", "scripted"])
        .args(["--token-env", "HW_E2E_SERVE_TOKEN", "--max-concurrency", "2", "--timeout-secs", "60", "--index"])
        .arg(tmp.path().join("index"))
        .env("HW_E2E_SERVE_TOKEN", TOKEN)
        .env("HOPWISE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hopwise serve");
    let mut server = Server(child);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
    wait_healthy(&client, &base, &mut server).await;

    let unauthorised =
        client.post(format!("{base}/v1/ask")).json(&json!({"question": QUESTION})).send().await.expect("ask");
    assert_eq!(unauthorised.status(), reqwest::StatusCode::UNAUTHORIZED);

    let resp = client
        .post(format!("{base}/v1/ask"))
        .bearer_auth(TOKEN)
        // The paper's flow (closed-book gate first, each node searching on its own).
        .json(&json!({"question": QUESTION, "strategy": "toqd-paper", "options": {"critique": false}}))
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let trace: Trace = resp.json().await.expect("trace");
    assert_eq!(trace.answer, "Rush");
    assert_eq!(trace.node("1").map(|n| n.decision), Some(Decision::Known));
    let n2 = trace.node("2").expect("node 2");
    assert_eq!(n2.decision, Decision::Retrieved);
    assert_eq!(n2.answer.as_deref(), Some("Neil Peart"));
    assert!(n2.passages.iter().any(|p| p.title == "Neil Peart"), "the real index found the evidence");
    assert_eq!(trace.stats.llm_calls as usize, mock.request_count(), "every model call went over HTTP");

    // SIGTERM while a question is in flight: it is still answered, then the process exits 0.
    mock.set_delay(Duration::from_millis(300));
    let in_flight = {
        let client = client.clone();
        let url = format!("{base}/v1/ask");
        tokio::spawn(async move {
            client.post(url).bearer_auth(TOKEN).json(&json!({"question": QUESTION, "strategy": "toqd"})).send().await
        })
    };
    let before = mock.request_count();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mock.request_count() == before {
        assert!(Instant::now() < deadline, "the second question never reached the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = server.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(killed.success());
    let resp = in_flight.await.expect("join").expect("the in-flight question is answered after SIGTERM");
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let trace: Trace = resp.json().await.expect("trace");
    assert_eq!(trace.answer, "Rush");

    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = server.0.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "hopwise serve did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut log = String::new();
    if let Some(mut e) = server.0.stderr.take() {
        let _ = e.read_to_string(&mut log);
    }
    assert!(status.success(), "clean exit after SIGTERM: {status}; log: {log}");
    assert!(log.contains("SIGTERM") && log.contains("stopped"), "{log}");
    assert!(log.contains("route=/v1/ask") && log.contains("status=401"), "access log: {log}");
    assert!(!log.contains(TOKEN), "the token never reaches the log");
}

#[test]
fn serve_refuses_bad_settings_before_listening() {
    let cases: [(&[&str], &str); 4] = [
        (&["--token-env", "HW_E2E_SURELY_UNSET_TOKEN"], "HW_E2E_SURELY_UNSET_TOKEN"),
        (&["--bind", "localhost"], "serve.bind"),
        (&["--max-concurrency", "0"], "max_concurrency"),
        (&["--strategy", "nope"], "unknown strategy"),
    ];
    for (args, expected) in cases {
        let out = hopwise()
            .args(["serve", "--no-retrieval", "--base-url", "http://127.0.0.1:9/v1"])
            .args(args)
            .env_remove("HW_E2E_SURELY_UNSET_TOKEN")
            .output()
            .expect("run hopwise serve");
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error: ") && err.contains(expected), "{args:?}: {err}");
    }
}
