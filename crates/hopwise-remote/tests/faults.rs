//! Transport faults that need no real engine: nothing listening, a server that accepts and never
//! answers, back-pressure (429) and 5xx answered with bounded retries, and 4xx not retried.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hopwise_core::BackendErrorKind;
use hopwise_remote::servers::free_port;
use hopwise_remote::{
    import_passages, HttpOptions, ImportOptions, MilvusConfig, MilvusStore, OpenSearchConfig, OpenSearchStore,
    RemoteError, RemoteStore, TypesenseConfig, TypesenseStore,
};

fn opts(timeout_ms: u64, retries: u32) -> HttpOptions {
    HttpOptions {
        timeout: Duration::from_millis(timeout_ms),
        connect_timeout: Duration::from_millis(500),
        retries,
        retry_base: Duration::from_millis(20),
    }
}

fn typesense(url: &str, http: HttpOptions) -> TypesenseStore {
    TypesenseStore::new(TypesenseConfig { http, ..TypesenseConfig::new(url, "k", "c") }).expect("store")
}

/// Answers each connection with the next canned reply (the last one repeats); counts connections.
fn canned(replies: Vec<(u16, &'static str)>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let (status, body) = replies[n.min(replies.len() - 1)];
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, hits)
}

#[tokio::test]
async fn an_engine_that_is_down_gives_a_clear_error_after_bounded_retries() {
    let port = free_port().expect("port");
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let err = typesense(&url, opts(500, 2)).health().await.expect_err("nothing listens");
    assert!(matches!(err, RemoteError::Unreachable { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("typesense") && msg.contains(&url) && msg.contains("unreachable"), "{msg}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let milvus =
        MilvusStore::new(MilvusConfig { http: opts(500, 1), ..MilvusConfig::new(url.clone(), "c") }).expect("store");
    let err = milvus.health().await.expect_err("nothing listens");
    assert_eq!(err.kind(), BackendErrorKind::Connection);
    assert!(err.to_string().starts_with("milvus at"), "{err}");
    // Converted to the shared error type, it keeps the kind (so callers degrade rather than stop).
    let shared: hopwise_core::Error = err.into();
    assert_eq!(shared.backend_kind(), Some(BackendErrorKind::Connection));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_after_each_retry() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(s); // read nothing, answer nothing
        }
    });
    let started = Instant::now();
    let err = typesense(&url, opts(300, 2)).health().await.expect_err("no reply");
    let took = started.elapsed();
    assert!(matches!(err, RemoteError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("did not answer within 0.3 s"), "{err}");
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "1 attempt + 2 retries");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn back_pressure_and_server_errors_are_retried_then_succeed() {
    let (url, hits) = canned(vec![(429, "{}"), (503, "{}"), (200, r#"{"ok":true}"#)]);
    typesense(&url, opts(2000, 3)).health().await.expect("third attempt succeeds");
    assert_eq!(hits.load(Ordering::SeqCst), 3);

    let (url, hits) = canned(vec![(503, "busy")]);
    let err = typesense(&url, opts(2000, 2)).health().await.expect_err("always 503");
    assert!(matches!(err, RemoteError::Status { status: 503, .. }), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 3, "retries are bounded");
}

#[tokio::test]
async fn client_errors_are_not_retried_and_garbage_is_an_error_not_a_panic() {
    let (url, hits) =
        canned(vec![(401, r#"{"message":"Forbidden - a valid `x-typesense-api-key` header must be sent."}"#)]);
    let err = typesense(&url, opts(2000, 3)).count().await.expect_err("401");
    assert!(matches!(err, RemoteError::Status { status: 401, .. }), "{err}");
    assert!(err.to_string().contains("x-typesense-api-key"), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    let (url, _) = canned(vec![(200, "<html>not json")]);
    let err = typesense(&url, opts(2000, 0)).count().await.expect_err("garbage");
    assert!(matches!(err, RemoteError::Malformed { .. }), "{err}");
    let (url, _) = canned(vec![(200, r#"{"code": 200, "data": [{"count(*)": "many"}]}"#)]);
    let milvus = MilvusStore::new(MilvusConfig { http: opts(2000, 0), ..MilvusConfig::new(url, "c") }).expect("store");
    assert!(matches!(milvus.count().await, Err(RemoteError::Malformed { .. })));
    let (url, _) = canned(vec![(200, r#"{"code": 1100, "message": "collection not loaded"}"#)]);
    let milvus = MilvusStore::new(MilvusConfig { http: opts(2000, 0), ..MilvusConfig::new(url, "c") }).expect("store");
    let err = milvus.search_vector(&[0.1, 0.2], 3).await.expect_err("engine error");
    assert!(err.to_string().contains("code 1100: collection not loaded"), "{err}");
}

struct Two;

#[async_trait::async_trait]
impl hopwise_core::Embedder for Two {
    fn model_id(&self) -> &str {
        "two"
    }
    fn dim(&self) -> usize {
        2
    }
    async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|_| vec![0.6, 0.8]).collect())
    }
}

/// OpenSearch replies as a real server sends them (no server installs here), in the order an import
/// asks: server info, mapping (404: no index yet), index creation, `_mget`, `_bulk` with a
/// per-document error, which must surface as an import error naming the engine's reason.
#[tokio::test]
async fn opensearch_bulk_errors_surface_from_recorded_replies() {
    let (url, hits) = canned(vec![
        (200, r#"{"name":"n","version":{"distribution":"opensearch","number":"2.11.0"}}"#),
        (404, r#"{"error":{"type":"index_not_found_exception"},"status":404}"#),
        (200, r#"{"acknowledged":true,"index":"docs"}"#),
        (200, r#"{"docs":[{"_index":"docs","_id":"a","found":false}]}"#),
        (
            200,
            r#"{"took":3,"errors":true,"items":[{"index":{"_index":"docs","_id":"a","status":400,"error":{"type":"mapper_parsing_exception","reason":"failed to parse field [embedding]"}}}]}"#,
        ),
    ]);
    let store = OpenSearchStore::new(OpenSearchConfig {
        url,
        authorization: None,
        index: "docs".into(),
        http: opts(2000, 0),
        flavor: None,
    })
    .expect("store");
    let passage = hopwise_core::Passage { id: "a".into(), title: "T".into(), text: "x".into(), ..Default::default() };
    let err =
        import_passages(&store, &Two, vec![passage], ImportOptions::default(), &|_| {}).await.expect_err("bulk error");
    assert!(matches!(err, RemoteError::Import { failed: 1, total: 1, .. }), "{err}");
    assert!(err.to_string().contains("failed to parse field [embedding]"), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 5);
}
