//! The server and the CLI answer through one runtime: for the same question and configuration
//! (query rewriting, de-duplication and the embedder on) `hopwise ask --json` and `POST /v1/ask` on
//! `hopwise serve` write the same trace, timing aside. The model is scripted behind a real HTTP
//! server; the index is a real BM25 index; the embedder is the real all-MiniLM-L6-v2.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{hopwise_command, minilm_installed, ok_json, output, write_jsonl};
use hopwise_core::scripted::ScriptedLlm;
use hopwise_models::testing::MockOpenAiServer;
use serde_json::{json, Value};

const QUESTION: &str = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";

/// The paper's HGOT (it always plans) with one-step plans, so its STOP test compares embeddings.
fn model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on("Write a short passage", "Counterparts is an album by the Canadian rock band Rush.")
        .on("Premise:", "entail")
        .on("Plan how to find the answer", "Step 1: Which Canadian rock band released the album Counterparts?")
        .on("Reply in exactly this form", "Rationale: Counterparts is an album by Rush [1].\nAnswer: Rush")
}

fn write_config(dir: &Path, index: &Path) -> std::path::PathBuf {
    let config = dir.join("hopwise.toml");
    let text = format!(
        "index = {index:?}\nstrategy = \"hgot-paper\"\nquery_rewrite = \"hyde\"\ndedup = true\nk = 2\n\n\
         [strategies.hgot-paper]\nsamples = 2\nmax_depth = 1\nself_reflect = false\nformalize = false\nstop_cosine = 0.99\n"
    );
    std::fs::write(&config, text).expect("write config");
    config
}

fn build_index(dir: &Path) -> std::path::PathBuf {
    let corpus = dir.join("corpus.jsonl");
    write_jsonl(
        &corpus,
        &[
            json!({"id": "counterparts", "title": "Counterparts (album)", "text": "Counterparts is the fifteenth studio album by the Canadian rock band Rush."}),
            json!({"id": "peart", "title": "Neil Peart", "text": "Neil Peart was the drummer of Rush, inducted into the Modern Drummer Hall of Fame."}),
            json!({"id": "jaws", "title": "Jaws", "text": "Jaws is a 1975 thriller film directed by Steven Spielberg."}),
        ],
    );
    let index = dir.join("index");
    let out = hopwise_command().args(["index", "--json", "--index"]).arg(&index).arg(&corpus).output().expect("index");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    index
}

/// The trace without what depends on the clock.
fn timeless(mut trace: Value) -> Value {
    trace["stats"]["wall_ms"] = json!(0);
    if let Some(events) = trace["events"].as_array_mut() {
        for e in events {
            e["start_ms"] = json!(0);
            e["end_ms"] = json!(0);
        }
    }
    trace
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_ask_write_the_same_trace() {
    if !minilm_installed() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = write_config(tmp.path(), &build_index(tmp.path()));
    let mock = MockOpenAiServer::start(Arc::new(model())).await.expect("mock model server");
    let backend = ["--base-url".to_string(), mock.base_url(), "--model".into(), "scripted".into()];

    let mut ask = hopwise_command();
    ask.arg("--config").arg(&config).args(&backend).args(["ask", "--json", QUESTION]);
    let cli = ok_json(&output(ask).await, "hopwise ask");

    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let mut serve = hopwise_command();
    serve.arg("--config").arg(&config).args(&backend).args(["serve", "--bind", &format!("127.0.0.1:{port}")]);
    let _server = Server(serve.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start hopwise serve"));
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !client.get(format!("{base}/healthz")).send().await.is_ok_and(|r| r.status().is_success()) {
        assert!(Instant::now() < deadline, "hopwise serve did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let response =
        client.post(format!("{base}/v1/ask")).json(&json!({"question": QUESTION})).send().await.expect("ask");
    assert!(response.status().is_success(), "{}", response.text().await.unwrap_or_default());
    let served: Value = response.json().await.expect("trace JSON");

    assert_eq!(cli["answer"], "Rush");
    assert_eq!(cli["retriever"], "dedup+hyde+bm25", "query rewriting and de-duplication are on");
    let similarity = cli["extra"]["stop_similarity"].as_str().unwrap_or_default();
    assert!(similarity.starts_with("embedding:"), "the STOP test used the embedder: {similarity:?}");
    let purposes: Vec<&str> =
        cli["events"].as_array().into_iter().flatten().filter_map(|e| e["purpose"].as_str()).collect();
    assert!(purposes.contains(&"query_rewrite") && purposes.contains(&"nli_judge"), "{purposes:?}");
    assert_eq!(timeless(served), timeless(cli));
}
