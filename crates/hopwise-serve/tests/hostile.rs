//! Slow and hostile clients, and a misbehaving model server, against a real server on loopback:
//! slow headers (slowloris), slow bodies, more connections than allowed, token quirks, and an
//! OpenAI-compatible backend that fails (the scriptable mock from `hopwise_models::testing`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{builder, corpus, parse_sse, toqd_model, TestServer, QUESTION};
use hopwise_core::scripted::ScriptedLlm;
use hopwise_models::testing::{Fault, MockOpenAiServer};
use hopwise_models::{OpenAiConfig, OpenAiLlm};
use hopwise_serve::{AppState, Limits};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A fresh connection per request, so every probe goes through accept.
fn fresh_client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).pool_max_idle_per_host(0).build().expect("client")
}

fn limits(read_timeout: Duration, max_connections: usize) -> Limits {
    Limits { read_timeout, max_connections, ..Limits::default() }
}

/// A connection to `addr` from the loopback address `from` (all of 127.0.0.0/8 is loopback), so
/// one test can play several clients.
async fn connect_from(from: [u8; 4], addr: &str) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from((from, 0)))?;
    socket.connect(addr.parse().expect("a socket address")).await
}

/// A client whose connections come from the loopback address `from`.
fn client_from(from: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(0)
        .local_address(std::net::IpAddr::from(from))
        .build()
        .expect("client")
}

/// Reads until the server closes the connection (or resets it), or `deadline` passes. Returns what
/// was read, and whether the server closed it.
async fn read_until_closed(stream: &mut TcpStream, deadline: Instant) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (got, false),
        }
    }
}

/// One slowloris client: starts a request and sends one more header byte every 200 ms, never
/// finishing. Returns how long the server let it live, or `None` if it was still open at `give_up`.
async fn slow_headers(from: [u8; 4], addr: String, give_up: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut stream = connect_from(from, &addr).await.ok()?;
    if stream.write_all(b"GET /v1/strategies HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.is_err() {
        return Some(started.elapsed());
    }
    let mut buf = [0u8; 256];
    while started.elapsed() < give_up {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => return Some(started.elapsed()),
                // A 408 or 400 before the close is fine too; keep reading to the close.
                Ok(_) => {}
            },
            () = tokio::time::sleep(Duration::from_millis(200)) => {
                if stream.write_all(b"a").await.is_err() {
                    return Some(started.elapsed());
                }
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_clients_are_cut_off_and_healthz_stays_responsive() {
    const SLOW_CLIENTS: usize = 300;
    let read_timeout = Duration::from_secs(2);
    let server = TestServer::start(builder(toqd_model()).limits(limits(read_timeout, 512)).build()).await;
    let addr = server.base.trim_start_matches("http://").to_string();

    // Spread over 30 addresses, each under the per-peer cap: the connection limit is what they test.
    let slow: Vec<_> = (0..SLOW_CLIENTS)
        .map(|i| tokio::spawn(slow_headers([127, 0, 1, (i % 30) as u8 + 1], addr.clone(), Duration::from_secs(20))))
        .collect();
    // Let them all connect and start dripping before probing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let client = fresh_client();
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let resp = client.get(server.url("/healthz")).send().await.expect("healthz answers while under attack");
        assert_eq!(resp.status(), StatusCode::OK);
        slowest = slowest.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Generous: an idle loopback server answers in a millisecond; a busy shared machine may take longer.
    assert!(slowest < Duration::from_secs(5), "slowest /healthz under attack: {slowest:?}");

    let mut lifetimes = Vec::new();
    for handle in slow {
        lifetimes.push(handle.await.expect("slow client task"));
    }
    let still_open = lifetimes.iter().filter(|l| l.is_none()).count();
    assert_eq!(still_open, 0, "{still_open} of {SLOW_CLIENTS} slow-header connections were still open after 20 s");
    let longest = lifetimes.iter().flatten().max().copied().unwrap_or_default();
    assert!(longest < read_timeout + Duration::from_secs(8), "a slow client lived {longest:?}");
    eprintln!("slowloris: {SLOW_CLIENTS} clients cut off after at most {longest:?}; slowest /healthz {slowest:?}");
}

#[tokio::test]
async fn connections_over_the_limit_get_503_and_idle_ones_time_out() {
    let server = TestServer::start(builder(toqd_model()).limits(limits(Duration::from_millis(1500), 4)).build()).await;
    let addr = server.base.trim_start_matches("http://").to_string();
    // The four slots and the health-check reserve, each from its own address (under the per-peer cap).
    let mut idle = Vec::new();
    for i in 0..4 + hopwise_serve::HEALTH_RESERVE {
        idle.push(connect_from([127, 0, 2, i as u8 + 1], &addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut over = TcpStream::connect(&addr).await.expect("the kernel still accepts");
    let (reply, closed) = read_until_closed(&mut over, Instant::now() + Duration::from_secs(5)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(closed && reply.starts_with("HTTP/1.1 503"), "closed {closed}, reply {reply:?}");

    // The idle connections never sent a header: the server closes them after the read timeout.
    for stream in &mut idle {
        let (_, closed) = read_until_closed(stream, Instant::now() + Duration::from_secs(10)).await;
        assert!(closed, "an idle connection outlived the read timeout");
    }
    let resp = fresh_client().get(server.url("/metrics")).send().await.expect("room again");
    let text = resp.text().await.expect("text");
    assert!(common::metric(&text, "hopwise_rejected_connections_total").unwrap_or(0.0) >= 1.0, "{text}");
}

#[tokio::test]
async fn one_address_cannot_hold_every_connection() {
    let limits = Limits { max_connections_per_peer: 3, ..limits(Duration::from_secs(5), 16) };
    let server = TestServer::start(builder(toqd_model()).limits(limits).build()).await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from([127, 0, 0, 7], &addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fourth = connect_from([127, 0, 0, 7], &addr).await.expect("the kernel still accepts");
    let (reply, closed) = read_until_closed(&mut fourth, Instant::now() + Duration::from_secs(5)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(closed && reply.starts_with("HTTP/1.1 503"), "closed {closed}, reply {reply:?}");
    // Another address is served while the first holds its share.
    let resp = client_from([127, 0, 0, 8]).get(server.url("/v1/strategies")).send().await.expect("served");
    assert_eq!(resp.status(), StatusCode::OK);
    // The share comes back when a connection closes.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let resp = client_from([127, 0, 0, 7]).get(server.url("/healthz")).send().await.expect("room again");
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test]
async fn healthz_answers_when_every_connection_is_taken() {
    let limits = Limits { max_connections_per_peer: 4, ..limits(Duration::from_secs(5), 4) };
    let server = TestServer::start(builder(toqd_model()).limits(limits).build()).await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut held = Vec::new();
    for i in 0..4 {
        held.push(connect_from([127, 0, 0, 10 + i], &addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let checker = client_from([127, 0, 0, 20]);
    let resp = checker.get(server.url("/healthz")).send().await.expect("the reserve answers");
    assert_eq!(resp.status(), StatusCode::OK);
    // The reserve answers nothing else, and says when to come back.
    let resp = checker.get(server.url("/v1/strategies")).send().await.expect("answered");
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(resp.headers().contains_key("retry-after"));
    let body: Value = resp.json().await.expect("json error body");
    assert_eq!(body["error"]["type"], "overloaded", "{body}");
}

#[tokio::test]
async fn a_body_that_never_finishes_gets_408() {
    let server = TestServer::start(builder(toqd_model()).limits(limits(Duration::from_millis(800), 64)).build()).await;
    let mut stream = TcpStream::connect(server.base.trim_start_matches("http://")).await.expect("connect");
    let head = "POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(b"{\"question\": ").await.expect("part of the body");
    let started = Instant::now();
    let (reply, _) = read_until_closed(&mut stream, Instant::now() + Duration::from_secs(10)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(started.elapsed() < Duration::from_secs(9), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_token_read_with_a_newline_and_any_scheme_case_are_accepted() {
    let server = TestServer::start(builder(toqd_model()).token(Some("s3cret-token\n".into())).build()).await;
    let ask = json!({"question": QUESTION, "strategy": "cot"});
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let resp = fresh_client()
            .post(server.url("/v1/ask"))
            .header("authorization", format!("{scheme} s3cret-token"))
            .json(&ask)
            .send()
            .await
            .expect("ask");
        assert_eq!(resp.status(), StatusCode::OK, "{scheme}");
    }
    let resp = fresh_client().post(server.url("/v1/ask")).bearer_auth("s3cret-toke").json(&ask).send().await;
    assert_eq!(resp.expect("ask").status(), StatusCode::UNAUTHORIZED);
}

/// A server whose model is an OpenAI-compatible backend behind the mock, with fast retries.
async fn over_http(mock: &MockOpenAiServer) -> TestServer {
    let config = OpenAiConfig {
        timeout_secs: 2.0,
        max_retries: 1,
        retry_base_ms: 5,
        retry_max_ms: 10,
        ..OpenAiConfig::new(mock.base_url(), "m")
    };
    let llm = OpenAiLlm::new(config).expect("client");
    TestServer::start(AppState::builder(Arc::new(llm)).retriever(Some(corpus())).build()).await
}

fn assert_no_internals(text: &str, mock: &MockOpenAiServer) {
    let port = mock.addr().port().to_string();
    for leak in [port.as_str(), "injected fault", "chat/completions", "127.0.0.1"] {
        assert!(!text.contains(leak), "the client saw `{leak}`: {text}");
    }
}

#[tokio::test]
async fn a_failing_model_backend_is_a_502_without_its_internals() {
    let mock = MockOpenAiServer::start(Arc::new(ScriptedLlm::new().fallback("Rush"))).await.expect("mock");
    mock.fail_always(Fault::Status { status: 500, retry_after: None });
    let server = over_http(&mock).await;
    let client = fresh_client();

    let resp = client.post(server.url("/v1/ask")).json(&json!({"question": QUESTION, "strategy": "cot"})).send();
    let resp = resp.await.expect("ask");
    assert_eq!(resp.status(), StatusCode::BAD_GATEWAY);
    let body = resp.text().await.expect("body");
    let value: Value = serde_json::from_str(&body).expect("JSON error");
    assert_eq!(value["error"]["type"], "upstream_error");
    assert_no_internals(&body, &mock);

    let chat = json!({"model": "hopwise-cot", "messages": [{"role": "user", "content": QUESTION}]});
    let resp = client.post(server.url("/v1/chat/completions")).json(&chat).send().await.expect("chat");
    assert_eq!(resp.status(), StatusCode::BAD_GATEWAY);
    let body = resp.text().await.expect("body");
    assert_no_internals(&body, &mock);

    let resp = client
        .post(server.url("/v1/ask"))
        .header("accept", "text/event-stream")
        .json(&json!({"question": QUESTION, "strategy": "toqd"}))
        .send()
        .await
        .expect("stream");
    let body = resp.text().await.expect("events");
    let events = parse_sse(&body);
    let (last, data) = events.last().expect("events");
    assert_eq!((last.as_str(), data["error"]["type"].as_str()), ("error", Some("upstream_error")), "{body}");
    assert!(events.iter().any(|(name, _)| name == "llm_call"), "the failed calls are still reported");
    assert_no_internals(&body, &mock);

    // Healed, the same server answers.
    mock.heal();
    let resp = client.post(server.url("/v1/ask")).json(&json!({"question": QUESTION, "strategy": "cot"})).send();
    assert_eq!(resp.await.expect("ask").status(), StatusCode::OK);
}

#[tokio::test]
async fn a_hanging_or_garbage_backend_is_a_502_too() {
    for fault in [Fault::Hang, Fault::Garbage, Fault::Status { status: 429, retry_after: Some("0".into()) }] {
        let mock = MockOpenAiServer::start(Arc::new(ScriptedLlm::new().fallback("Rush"))).await.expect("mock");
        mock.fail_always(fault.clone());
        let server = over_http(&mock).await;
        let resp = fresh_client()
            .post(server.url("/v1/ask"))
            .json(&json!({"question": QUESTION, "strategy": "direct"}))
            .send()
            .await
            .expect("ask");
        assert_eq!(resp.status(), StatusCode::BAD_GATEWAY, "{fault:?}");
        assert_no_internals(&resp.text().await.expect("body"), &mock);
        mock.shutdown().await;
    }
}
