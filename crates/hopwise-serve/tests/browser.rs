//! The web page in headless Chromium (Debian `chromium`, driven by `playwright-core` from npm through
//! tests/browser/page.cjs): ask a question, see the graph's nodes and the answer appear, open a node's
//! details, and save a screenshot next to the test binaries (`$CARGO_TARGET_TMPDIR/hopwise-page.png`).
//!
//! Needs node, /usr/bin/chromium and playwright-core in `$HOPWISE_HOME/node` (`.ci/run` installs
//! them). Without them the test is skipped with the reason printed, except under CI (`CI` set), where
//! it fails.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{builder, node_modules_or_skip, toqd_model, TestServer, QUESTION};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_draws_the_graph_live_and_shows_node_details() {
    let Some(node_modules) = node_modules_or_skip("browser test", &["playwright-core"], true) else { return };
    // Slow enough that the graph visibly builds before the answer arrives.
    let server = TestServer::start(builder(toqd_model().latency(Duration::from_millis(150))).build()).await;
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hopwise-page.png");
    let _ = std::fs::remove_file(&shot);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/page.cjs");
    let run = tokio::process::Command::new("node")
        .arg(&script)
        .arg(&server.base)
        .arg(&shot)
        .arg(QUESTION)
        .env("NODE_PATH", &node_modules)
        .kill_on_drop(true)
        .output();
    let out =
        tokio::time::timeout(Duration::from_secs(120), run).await.expect("the browser run finishes").expect("run node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "page script failed: {stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");

    assert_eq!(result["answerHiddenAtFirstNode"], true, "nodes appear before the answer: {result}");
    let nodes = result["nodes"].as_array().expect("nodes");
    let decision =
        |id: &str| nodes.iter().find(|n| n["id"] == id).and_then(|n| n["decision"].as_str()).map(str::to_string);
    // The paper's flow: node 1 is known closed-book, node 2 answers NO! and searches.
    assert_eq!(decision("1").as_deref(), Some("known"), "{result}");
    assert_eq!(decision("2").as_deref(), Some("retrieved"), "{result}");
    assert_eq!(decision("Q").as_deref(), Some("sink"), "{result}");
    assert!(result["edges"].as_u64().unwrap_or(0) >= 2, "{result}");
    assert!(result["answer"].as_str().unwrap_or_default().starts_with("Rush"), "{result}");
    let detail = &result["detail"];
    assert_eq!(detail["id"], "2");
    assert_eq!(detail["question"], "Who was the drummer of that band?");
    assert_eq!(detail["rewritten"], "Who was the drummer of Rush?");
    assert_eq!(detail["answer"], "Neil Peart");
    assert!(detail["decision"].as_str().unwrap_or_default().starts_with("retrieved"));
    let passages = detail["passages"].as_array().expect("passages");
    assert!(passages.iter().any(|p| p.as_str().unwrap_or_default().contains("Neil Peart")), "{result}");
    // The sources are the passages the answer rests on: the one naming node 2's answer, not every
    // passage retrieved.
    let citations = result["citations"].as_array().expect("citations");
    assert!(citations.iter().any(|c| c.as_str().unwrap_or_default().contains("Neil Peart")), "{result}");
    assert!(citations.len() < passages.len() + 1, "{result}");
    assert!(result["stats"].as_str().unwrap_or_default().contains("LLM calls"), "{result}");
    assert_eq!(result["errors"].as_array().map(Vec::len), Some(0), "no script errors on the page: {result}");
    assert!(shot.is_file(), "screenshot saved");
    eprintln!("screenshot: {}", shot.display());
}
