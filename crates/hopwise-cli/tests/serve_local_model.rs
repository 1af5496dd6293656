//! `hopwise serve`'s server over the real in-process model (Qwen2.5-Coder-0.5B, one thread): a client
//! that disconnects in the middle of a generation stops the model's work, not just the question task.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hopwise_core::Prompts;
use hopwise_llama::{default_home, installed_model, EngineStats, LocalConfig, LocalLlm, TEST_MODEL};
use hopwise_serve::AppState;
use serde_json::json;

/// The engine's counters once `done` holds; panics with the last ones after `limit`.
async fn wait_for(llm: &LocalLlm, limit: Duration, done: impl Fn(&EngineStats) -> bool) -> EngineStats {
    llm.wait_for_stats(limit, done)
        .await
        .unwrap_or_else(|last| panic!("engine did not get there in {limit:?}: {last:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_stops_the_generation_and_frees_its_cells() {
    let home = default_home();
    let path = installed_model(TEST_MODEL, &home)
        .unwrap_or_else(|| panic!("{TEST_MODEL} is not installed under {}/models", home.display()));
    // No prefix cache: once the request is gone, nothing may be left in the KV cache.
    let config = LocalConfig { threads: Some(1), prefix_cache: false, ..LocalConfig::default() };
    let llm = Arc::new(LocalLlm::load(path, config).expect("load the test model"));
    // A prompt that keeps the model generating for a while.
    let overrides = BTreeMap::from([(
        "direct".to_string(),
        "Write a long story about a lighthouse keeper and his cat. Do not stop early. Then answer: {question}"
            .to_string(),
    )]);
    let prompts = Prompts::default().with_overrides(&overrides).expect("override");
    let state = AppState::builder(llm.clone()).prompts(Arc::new(prompts)).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(hopwise_serve::serve(listener, state, async move {
        let _ = stopped.await;
    }));

    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/ask"))
        .header("accept", "text/event-stream")
        .json(&json!({"question": "Who directed Jaws?", "strategy": "direct"}))
        .send()
        .await
        .expect("ask");
    assert!(resp.status().is_success());
    let generating = wait_for(&llm, Duration::from_secs(120), |s| s.running == 1 && s.steps >= 10).await;
    drop(resp);

    let after = wait_for(&llm, Duration::from_secs(10), |s| s.running == 0).await;
    assert_eq!((after.cancelled, after.completed), (1, 0), "{after:?}");
    assert_eq!((after.live_sequences, after.kv_cells_used), (0, 0), "its cells were freed: {after:?}");
    assert!(after.steps < generating.steps + 50, "stopped soon after the disconnect: {generating:?} then {after:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.stats().steps, after.steps, "no model work after the client left");
    let _ = stop.send(());
    let _ = server.await;
}
