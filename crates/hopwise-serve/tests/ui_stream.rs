//! A chat UI reading the streamed answer: the Vercel AI SDK (`ai` with its OpenAI-compatible
//! provider, from npm, driven by tests/ui/chat.cjs) assembles the message the way its `useChat` hook
//! renders it. The graph's progress must arrive as a reasoning part shown apart from the answer,
//! before it, and the answer as the text part.
//!
//! Needs node and `ai`, `@ai-sdk/openai-compatible` in `$HOPWISE_HOME/node` (`.ci/run` installs
//! them); skipped with the reason printed when they are missing, except under CI, where it fails.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{builder, node_modules_or_skip, toqd_model, TestServer, QUESTION};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_ui_shows_the_graph_as_reasoning_apart_from_the_answer() {
    let packages = ["ai", "@ai-sdk/openai-compatible"];
    let Some(node_modules) = node_modules_or_skip("chat UI stream test", &packages, false) else { return };
    let server = TestServer::start(builder(toqd_model()).build()).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/chat.cjs");
    let run = tokio::process::Command::new("node")
        .arg(&script)
        .arg(&server.base)
        .arg("hopwise-toqd-paper")
        .arg(QUESTION)
        .env("NODE_PATH", &node_modules)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run).await.expect("the UI run finishes").expect("node");
    assert!(out.status.success(), "chat script failed: {}", String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    assert_eq!(result["errors"].as_array().map(Vec::len), Some(0), "{result}");

    let parts = result["parts"].as_array().expect("parts");
    let kinds: Vec<&str> = parts.iter().filter_map(|p| p["type"].as_str()).collect();
    assert_eq!(kinds, ["reasoning", "text"], "one reasoning part, then the answer: {result}");
    let reasoning = parts[0]["text"].as_str().unwrap_or_default();
    // The paper's flow on the scripted model: both nodes planned, node 1 known, node 2 searched.
    for line in [
        "1. Which band released the song Counterparts?\n",
        "1. Which band released the song Counterparts? → Rush (known)",
        "2. searching “Who was the drummer of Rush?”",
        "2. Who was the drummer of that band? → Neil Peart (from evidence)",
    ] {
        assert!(reasoning.contains(line), "the reasoning shows `{line}`: {reasoning}");
    }
    assert_eq!(parts[1]["text"], "Rush", "{result}");
    let tokens = result["usage"]["totalTokens"].as_u64().unwrap_or(0);
    assert!(tokens > 0, "the final chunk's usage reaches the UI: {result}");
}
