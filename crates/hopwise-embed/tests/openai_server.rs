//! OpenAiEmbedder against a real HTTP server on loopback that serves MiniLmEmbedder's vectors.

mod common;

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use common::{cosine, embedder};
use hopwise_core::{BackendErrorKind, Embedder};
use hopwise_embed::{OpenAiEmbedder, OpenAiEmbedderConfig};
use serde_json::{json, Value};

#[derive(Clone)]
struct ServerState {
    /// When set, requests must carry `Authorization: Bearer <key>`.
    key: Option<String>,
    /// Answer every request with this status instead of embeddings.
    fail_with: Option<StatusCode>,
}

async fn embeddings(
    State(state): State<ServerState>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if let Some(status) = state.fail_with {
        return (status, Json(json!({"error": {"message": "scripted failure"}})));
    }
    if let Some(key) = &state.key {
        let sent = headers.get("authorization").and_then(|v| v.to_str().ok());
        if sent != Some(format!("Bearer {key}").as_str()) {
            return (StatusCode::UNAUTHORIZED, Json(json!({"error": {"message": "bad key"}})));
        }
    }
    let texts: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect(),
        _ => return (StatusCode::BAD_REQUEST, Json(json!({"error": {"message": "no input"}}))),
    };
    let vectors = match embedder().embed(&texts).await {
        Ok(v) => v,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": e.to_string()}}))),
    };
    // Listed in reverse, as a server may: the client must order by `index`.
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .rev()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    (StatusCode::OK, Json(json!({"object": "list", "model": body["model"], "data": data})))
}

async fn serve(state: ServerState) -> String {
    let app = Router::new().route("/v1/embeddings", post(embeddings)).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn remote_vectors_match_local_ones_in_order_across_batches() {
    let key_var = "HOPWISE_TEST_EMBED_KEY";
    std::env::set_var(key_var, "sekrit");
    let base = serve(ServerState { key: Some("sekrit".into()), fail_with: None }).await;
    let mut config = OpenAiEmbedderConfig::new(base, "all-minilm-l6-v2");
    config.api_key_env = Some(key_var.into());
    config.batch_size = 2;
    let remote = OpenAiEmbedder::connect(config).await.expect("connect probes the dimension");
    assert_eq!((remote.dim(), remote.model_id()), (384, "all-minilm-l6-v2"));

    let texts: Vec<String> =
        ["Who directed Jaws?", "Bread rises because of yeast.", "The Nile flows north.", ""].map(String::from).to_vec();
    let got = remote.embed(&texts).await.expect("remote embed");
    let want = embedder().embed(&texts).await.expect("local embed");
    assert_eq!(got.len(), texts.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(cosine(g, w) > 0.99999);
    }
}

#[tokio::test]
async fn http_failures_map_to_backend_error_kinds() {
    let base = serve(ServerState { key: Some("right".into()), fail_with: None }).await;
    let mut config = OpenAiEmbedderConfig::new(base.clone(), "m");
    config.dim = Some(384);
    let no_key = OpenAiEmbedder::new(config).expect("build");
    let err = no_key.embed(&["x".to_string()]).await.expect_err("401");
    assert_eq!(err.backend_kind(), Some(BackendErrorKind::Rejected));

    let down = serve(ServerState { key: None, fail_with: Some(StatusCode::SERVICE_UNAVAILABLE) }).await;
    let mut config = OpenAiEmbedderConfig::new(down, "m");
    config.dim = Some(384);
    let err = OpenAiEmbedder::new(config).expect("build").embed(&["x".to_string()]).await.expect_err("503");
    assert_eq!(err.backend_kind(), Some(BackendErrorKind::Server));

    // Nothing listens on port 9 of loopback (discard); a short timeout keeps the test quick either way.
    let mut config = OpenAiEmbedderConfig::new("http://127.0.0.1:9/v1", "m");
    config.dim = Some(384);
    config.timeout = Duration::from_secs(5);
    let err = OpenAiEmbedder::new(config).expect("build").embed(&["x".to_string()]).await.expect_err("refused");
    assert!(matches!(err.backend_kind(), Some(BackendErrorKind::Connection | BackendErrorKind::Timeout)));

    let mut config = OpenAiEmbedderConfig::new(base, "m");
    config.api_key_env = Some("HOPWISE_TEST_EMBED_KEY_UNSET".into());
    assert!(OpenAiEmbedder::connect(config).await.is_err(), "a named but unset key variable is a config error");
}
