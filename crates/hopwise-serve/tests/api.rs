//! Every endpoint over real HTTP on loopback, with a scripted model so the traces are exact.

mod common;

use std::time::{Duration, Instant};

use common::{builder, limits, metric, parse_sse, toqd_model, TestServer, QUESTION};
use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{Decision, Trace};
use hopwise_serve::Limits;
use reqwest::StatusCode;
use serde_json::{json, Value};

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client")
}

async fn default_server() -> TestServer {
    TestServer::start(builder(toqd_model()).build()).await
}

async fn error_of(resp: reqwest::Response) -> (StatusCode, String, String) {
    let status = resp.status();
    let body: Value = resp.json().await.expect("error bodies are JSON");
    let kind = body["error"]["type"].as_str().unwrap_or_default().to_string();
    let message = body["error"]["message"].as_str().unwrap_or_default().to_string();
    (status, kind, message)
}

async fn metrics_text(server: &TestServer) -> String {
    client().get(server.url("/metrics")).send().await.expect("metrics").text().await.expect("text")
}

#[tokio::test]
async fn ask_returns_the_trace_as_json() {
    let server = default_server().await;
    let resp = client()
        .post(server.url("/v1/ask"))
        // The paper's flow (closed-book gate first, each node searching on its own), so the nodes'
        // decisions below are the scripted model's.
        .json(&json!({"question": QUESTION, "strategy": "toqd-paper"}))
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status(), StatusCode::OK);
    let trace: Trace = resp.json().await.expect("a trace");
    assert_eq!(trace.answer, "Rush");
    assert_eq!(trace.strategy, "toqd-paper");
    assert_eq!(trace.node("1").map(|n| n.decision), Some(Decision::Known));
    assert_eq!(trace.node("2").map(|n| n.decision), Some(Decision::Retrieved));
    assert!(trace.node("2").is_some_and(|n| !n.passages.is_empty()));
    assert!(trace.stats.llm_calls > 0 && trace.stats.retrieval_rounds == 1);

    // The default strategy applies when none is named; options reach the strategy.
    let resp = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "options": {"max_steps": 3}}))
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status(), StatusCode::OK);
    let trace: Trace = resp.json().await.expect("a trace");
    assert_eq!(trace.strategy, "toqd");
    // no_retrieval selects the -noir variant.
    let resp = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "strategy": "toqd", "no_retrieval": true}))
        .send()
        .await
        .expect("ask");
    let trace: Trace = resp.json().await.expect("a trace");
    assert_eq!(trace.strategy, "toqd-noir");
    assert_eq!(trace.stats.retrieval_rounds, 0);
}

fn check_event_order(events: &[(String, Value)]) {
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.last(), Some(&"final"), "final comes last: {names:?}");
    assert_eq!(names.iter().filter(|n| **n == "final").count(), 1);
    let first_node = names.iter().position(|n| *n == "node").expect("node events");
    let first_edge = names.iter().position(|n| *n == "edge").expect("edge events");
    assert!(first_node < first_edge, "nodes are added before they are wired: {names:?}");
    assert!(names.contains(&"llm_call") && names.contains(&"retrieval"), "{names:?}");
    let seqs: Vec<u64> = events.iter().filter_map(|(_, d)| d["seq"].as_u64()).collect();
    assert_eq!(seqs.len(), events.len(), "every event has its seq");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "events arrive in recording order: {seqs:?}");
    // Node 2 is first pending, later retrieved.
    let states: Vec<&str> = events
        .iter()
        .filter(|(n, d)| n == "node" && d["node"]["id"] == "2")
        .filter_map(|(_, d)| d["node"]["decision"].as_str())
        .collect();
    assert_eq!(states.first(), Some(&"pending"), "{states:?}");
    assert_eq!(states.last(), Some(&"retrieved"), "{states:?}");
    let (_, last) = events.last().expect("events");
    assert_eq!(last["answer"], "Rush");
    let trace: Trace = serde_json::from_value(last["trace"].clone()).expect("final carries the trace");
    assert_eq!(trace.events.len(), events.len(), "the stream carried every recorded event");
}

#[tokio::test]
async fn post_with_accept_event_stream_streams_events_in_order() {
    let server = default_server().await;
    let resp = client()
        .post(server.url("/v1/ask"))
        .header("Accept", "text/event-stream")
        .json(&json!({"question": QUESTION, "strategy": "toqd-paper"}))
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()["content-type"].to_str().unwrap_or_default().starts_with("text/event-stream"));
    let body = resp.text().await.expect("body");
    check_event_order(&parse_sse(&body));
}

#[tokio::test]
async fn get_stream_serves_the_same_events() {
    let server = default_server().await;
    let resp = client()
        .get(server.url("/v1/ask/stream"))
        .query(&[("question", QUESTION), ("strategy", "toqd-paper")])
        .send()
        .await
        .expect("stream");
    assert_eq!(resp.status(), StatusCode::OK);
    check_event_order(&parse_sse(&resp.text().await.expect("body")));
    // Input errors are plain HTTP errors, before any stream opens.
    let resp = client().get(server.url("/v1/ask/stream")).query(&[("question", " ")]).send().await.expect("stream");
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = client().get(server.url("/v1/ask/stream")).send().await.expect("stream");
    let (status, _, message) = error_of(resp).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("question"), "{message}");
}

#[tokio::test]
async fn catalog_endpoints() {
    let server = default_server().await;
    let health: Value = client().get(server.url("/healthz")).send().await.expect("healthz").json().await.expect("json");
    assert_eq!(health["status"], "ok");
    let s: Value =
        client().get(server.url("/v1/strategies")).send().await.expect("strategies").json().await.expect("json");
    assert_eq!(s["default"], "toqd");
    assert_eq!(s["has_retriever"], true);
    let names: Vec<&str> =
        s["strategies"].as_array().expect("list").iter().filter_map(|x| x["name"].as_str()).collect();
    assert!(names.contains(&"toqd") && names.contains(&"hgot") && names.contains(&"uar"), "{names:?}");
    let toqd = s["strategies"].as_array().expect("list").iter().find(|x| x["name"] == "toqd").expect("toqd");
    assert_eq!(toqd["options"]["samples"], 5, "each entry lists its options at their defaults");
    assert_eq!(toqd["model"], "hopwise-toqd");
    let m: Value = client().get(server.url("/v1/models")).send().await.expect("models").json().await.expect("json");
    assert_eq!(m["object"], "list");
    assert!(m["data"].as_array().expect("data").iter().any(|x| x["id"] == "hopwise-toqd"));
    let page = client().get(server.url("/")).send().await.expect("page");
    assert!(page.headers()["content-type"].to_str().unwrap_or_default().starts_with("text/html"));
    let html = page.text().await.expect("html");
    assert!(html.contains("<svg id=\"graph\"") && html.contains("/app.js"));
    let js = client().get(server.url("/app.js")).send().await.expect("js").text().await.expect("text");
    assert!(js.contains("text/event-stream"));
    let resp = client().get(server.url("/nope")).send().await.expect("404");
    let (status, kind, _) = error_of(resp).await;
    assert_eq!((status, kind.as_str()), (StatusCode::NOT_FOUND, "not_found"));
    // A known path with the wrong method answers with the same error body, not an empty one.
    let resp = client().get(server.url("/v1/ask")).send().await.expect("405");
    let (status, kind, message) = error_of(resp).await;
    assert_eq!((status, kind.as_str()), (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"), "{message}");
}

#[tokio::test]
async fn openapi_describes_every_path() {
    let server = default_server().await;
    let doc: Value =
        client().get(server.url("/openapi.json")).send().await.expect("openapi").json().await.expect("valid JSON");
    assert!(doc["openapi"].as_str().unwrap_or_default().starts_with("3."));
    for path in [
        "/v1/ask",
        "/v1/ask/stream",
        "/v1/strategies",
        "/v1/chat/completions",
        "/v1/models",
        "/healthz",
        "/metrics",
        "/openapi.json",
        "/",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} is described");
    }
    // Every $ref points at something that exists.
    let text = doc.to_string();
    for piece in text.split("\"$ref\":\"#/").skip(1) {
        let target = piece.split('"').next().unwrap_or_default();
        let mut node = &doc;
        for part in target.split('/') {
            node = &node[part];
        }
        assert!(!node.is_null(), "dangling $ref {target}");
    }
}

#[tokio::test]
async fn bearer_token_guards_everything_but_healthz() {
    let server = TestServer::start(builder(toqd_model()).token(Some("s3cret-token".into())).build()).await;
    let ask = json!({"question": QUESTION, "strategy": "cot"});
    let resp = client().post(server.url("/v1/ask")).json(&ask).send().await.expect("ask");
    let (status, kind, _) = error_of(resp).await;
    assert_eq!((status, kind.as_str()), (StatusCode::UNAUTHORIZED, "authentication_error"));
    let resp = client().post(server.url("/v1/ask")).bearer_auth("wrong-token!").json(&ask).send().await.expect("ask");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    for path in ["/metrics", "/v1/strategies", "/v1/models", "/openapi.json"] {
        assert_eq!(
            client().get(server.url(path)).send().await.expect("get").status(),
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    assert_eq!(client().get(server.url("/healthz")).send().await.expect("get").status(), StatusCode::OK);
    assert_eq!(client().get(server.url("/")).send().await.expect("get").status(), StatusCode::OK);
    let resp = client().post(server.url("/v1/ask")).bearer_auth("s3cret-token").json(&ask).send().await.expect("ask");
    assert_eq!(resp.status(), StatusCode::OK);
    let trace: Trace = resp.json().await.expect("trace");
    assert_eq!(trace.answer, "Rush");
    // 401s are counted too.
    let text = client()
        .get(server.url("/metrics"))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .expect("m")
        .text()
        .await
        .expect("t");
    assert!(text.contains("hopwise_http_requests_total{route=\"/v1/ask\",status=\"401\"} 2"), "{text}");
}

#[tokio::test]
async fn bad_input_gets_clear_errors() {
    let server =
        TestServer::start(builder(toqd_model()).limits(limits(4, Duration::from_secs(30), 1024)).build()).await;
    let post = |body: String| {
        client().post(server.url("/v1/ask")).header("content-type", "application/json").body(body).send()
    };

    let (status, _, message) = error_of(post("{\"question\": ".into()).await.expect("send")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.to_lowercase().contains("json"), "{message}");

    let (status, _, message) = error_of(post("{\"question\": 3}".into()).await.expect("send")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("question"), "{message}");

    let (status, _, message) =
        error_of(post("{\"question\": \"q\", \"stratgy\": \"toqd\"}".into()).await.expect("send")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("stratgy"), "typos are named: {message}");

    let (status, _, message) = error_of(post("{\"question\": \"   \"}".into()).await.expect("send")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("empty"), "{message}");

    let (status, kind, message) =
        error_of(post(json!({"question": "q", "strategy": "nope"}).to_string()).await.expect("send")).await;
    assert_eq!((status, kind.as_str()), (StatusCode::BAD_REQUEST, "unknown_strategy"));
    assert!(message.contains("nope") && message.contains("/v1/strategies"), "{message}");

    let (status, _, message) = error_of(
        post(json!({"question": "q", "strategy": "cot", "options": {"nope": 1}}).to_string()).await.expect("send"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("nope"), "{message}");

    let (status, _, _) = error_of(post(json!({"question": "q", "k": 0}).to_string()).await.expect("send")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // A zero budget is refused like a zero time limit, naming the field.
    for field in ["max_seconds", "max_llm_calls", "max_tokens"] {
        let (status, _, message) =
            error_of(post(json!({"question": "q", field: 0}).to_string()).await.expect("send")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {message}");
        assert!(message.contains(field), "{message}");
    }

    // Over the body limit.
    let big = json!({"question": "x".repeat(4096)}).to_string();
    let (status, kind, _) = error_of(post(big).await.expect("send")).await;
    assert_eq!((status, kind.as_str()), (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"));

    // No content type.
    let resp = client().post(server.url("/v1/ask")).body("{\"question\": \"q\"}").send().await.expect("send");
    assert_eq!(error_of(resp).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    // A strategy that needs an index on a server without one.
    let bare = TestServer::start(hopwise_serve::AppState::builder(std::sync::Arc::new(toqd_model())).build()).await;
    let resp = client()
        .post(bare.url("/v1/ask"))
        .json(&json!({"question": "q", "strategy": "rtr"}))
        .send()
        .await
        .expect("send");
    let (status, _, message) = error_of(resp).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("retriever"), "{message}");
}

/// No request field names a file on the server: every option the strategy table declares a path is
/// refused with 422 on both endpoints before anything is opened.
#[tokio::test]
async fn options_that_name_server_files_are_refused() {
    let server = default_server().await;
    let mut refused = 0;
    for spec in hopwise_reason::strategy::STRATEGIES {
        for option in spec.path_options {
            for path in ["/dev/zero", "/etc/shadow", "/nonexistent"] {
                let body = json!({"question": "q", "strategy": spec.name, "options": {*option: path}});
                let resp = client().post(server.url("/v1/ask")).json(&body).send().await.expect("send");
                let (status, _, message) = error_of(resp).await;
                assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{}: {option}: {message}", spec.name);
                assert!(message.contains(option) && !message.contains(path), "{message}");

                let chat = json!({
                    "model": format!("hopwise-{}", spec.name),
                    "messages": [{"role": "user", "content": "q"}],
                    "hopwise_options": {*option: path},
                });
                let resp = client().post(server.url("/v1/chat/completions")).json(&chat).send().await.expect("send");
                let (status, _, message) = error_of(resp).await;
                assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "chat: {}: {option}: {message}", spec.name);
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "the strategy table declares at least one path option");
    let health = client().get(server.url("/healthz")).send().await.expect("healthz");
    assert!(health.status().is_success());
}

/// An empty model reply is no answer: a 502 the client can tell from an answer, on both endpoints.
#[tokio::test]
async fn an_empty_model_reply_is_an_upstream_error_not_an_answer() {
    let server = TestServer::start(builder(ScriptedLlm::new().fallback("")).build()).await;
    let resp = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "strategy": "direct"}))
        .send()
        .await
        .expect("ask");
    let (status, kind, _) = error_of(resp).await;
    assert_eq!((status, kind.as_str()), (StatusCode::BAD_GATEWAY, "upstream_error"));
    let chat = json!({"model": "hopwise-direct", "messages": [{"role": "user", "content": QUESTION}]});
    let resp = client().post(server.url("/v1/chat/completions")).json(&chat).send().await.expect("chat");
    assert_eq!(resp.status(), StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn metrics_count_requests_and_work() {
    let server = default_server().await;
    let before = metrics_text(&server).await;
    assert_eq!(metric(&before, "hopwise_llm_calls_total "), Some(0.0));
    let trace: Trace = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "strategy": "toqd-paper"}))
        .send()
        .await
        .expect("ask")
        .json()
        .await
        .expect("trace");
    let after = metrics_text(&server).await;
    assert_eq!(metric(&after, "hopwise_llm_calls_total "), Some(trace.stats.llm_calls as f64), "{after}");
    assert_eq!(metric(&after, "hopwise_retrieval_rounds_total "), Some(1.0));
    assert_eq!(metric(&after, "hopwise_prompt_tokens_total "), Some(trace.stats.prompt_tokens as f64));
    assert!(after.contains("hopwise_http_requests_total{route=\"/v1/ask\",status=\"200\"} 1"), "{after}");
    assert!(after.contains("hopwise_http_request_duration_seconds_count{route=\"/v1/ask\"} 1"), "{after}");
    assert!(after.contains("hopwise_questions_total{strategy=\"toqd-paper\",outcome=\"ok\"} 1"), "{after}");
    assert_eq!(metric(&after, "hopwise_in_flight "), Some(0.0));
}

async fn wait_in_flight(server: &TestServer, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if metric(&metrics_text(server).await, "hopwise_in_flight ") == Some(n) {
            return;
        }
        assert!(Instant::now() < deadline, "in_flight never reached {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn full_server_answers_503_with_retry_after() {
    let llm = toqd_model().latency(Duration::from_millis(150));
    let server = TestServer::start(builder(llm).limits(limits(1, Duration::from_secs(30), 65536)).build()).await;
    let url = server.url("/v1/ask");
    let held = tokio::spawn(async move {
        client().post(url).json(&json!({"question": QUESTION, "strategy": "toqd"})).send().await
    });
    wait_in_flight(&server, 1.0).await;
    let resp = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "strategy": "cot"}))
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "2");
    let (_, kind, _) = error_of(resp).await;
    assert_eq!(kind, "overloaded");
    // The held request still finishes normally, and then there is room again.
    let resp = held.await.expect("join").expect("held request");
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "strategy": "cot"}))
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(metric(&metrics_text(&server).await, "hopwise_rejected_busy_total "), Some(1.0));
}

#[tokio::test]
async fn slow_questions_time_out_with_504() {
    let llm = toqd_model().latency(Duration::from_millis(400));
    let server = TestServer::start(builder(llm).limits(limits(2, Duration::from_millis(300), 65536)).build()).await;
    let started = Instant::now();
    let resp = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "strategy": "toqd"}))
        .send()
        .await
        .expect("ask");
    let (status, kind, _) = error_of(resp).await;
    assert_eq!((status, kind.as_str()), (StatusCode::GATEWAY_TIMEOUT, "timeout"));
    assert!(started.elapsed() < Duration::from_secs(3));
    // On a stream, the timeout is the last event.
    let body = client()
        .post(server.url("/v1/ask"))
        .header("accept", "text/event-stream")
        .json(&json!({"question": QUESTION, "strategy": "toqd"}))
        .send()
        .await
        .expect("ask")
        .text()
        .await
        .expect("body");
    let events = parse_sse(&body);
    let (name, data) = events.last().expect("events");
    assert_eq!(name, "error");
    assert_eq!(data["error"]["type"], "timeout");
    wait_in_flight(&server, 0.0).await;
    assert!(metrics_text(&server).await.contains("outcome=\"timeout\"} 2"));
}

#[tokio::test]
async fn client_disconnect_cancels_the_work() {
    let llm = toqd_model().latency(Duration::from_millis(200));
    let calls = llm.clone();
    let server = TestServer::start(builder(llm).build()).await;
    let mut resp = client()
        .post(server.url("/v1/ask"))
        .header("accept", "text/event-stream")
        .json(&json!({"question": QUESTION, "strategy": "toqd"}))
        .send()
        .await
        .expect("ask");
    let first = resp.chunk().await.expect("read").expect("a first event");
    assert!(!first.is_empty());
    wait_in_flight(&server, 1.0).await;
    drop(resp);
    // The slot comes back long before the question could have finished, and no more model calls start.
    wait_in_flight(&server, 0.0).await;
    let made = calls.calls().len();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(calls.calls().len(), made, "no model calls after the client left");
    assert!(made < 8, "the question was cut short ({made} calls)");
}

#[tokio::test]
async fn a_thousand_rapid_requests_over_the_limit() {
    let llm = toqd_model().latency(Duration::from_millis(20));
    // One client with 100 connections: the per-address cap is lifted, as behind a reverse proxy.
    let limits = Limits { max_connections_per_peer: 512, ..limits(4, Duration::from_secs(30), 65536) };
    let server = TestServer::start(builder(llm).limits(limits).build()).await;
    use futures::StreamExt;
    let c = client();
    let url = server.url("/v1/ask");
    // 100 at a time keeps the file descriptors of client and server (one process) under common limits.
    let statuses: Vec<_> = futures::stream::iter(0..1000)
        .map(|_| {
            let c = c.clone();
            let url = url.clone();
            async move {
                c.post(url).json(&json!({"question": QUESTION, "strategy": "cot"})).send().await.map(|r| r.status())
            }
        })
        .buffer_unordered(100)
        .collect()
        .await;
    let (mut ok, mut busy) = (0, 0);
    for status in statuses {
        match status.expect("every request gets an answer") {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => busy += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(ok + busy, 1000);
    assert!(ok >= 4 && busy > 0, "ok {ok}, busy {busy}");
    wait_in_flight(&server, 0.0).await;
    let text = metrics_text(&server).await;
    assert_eq!(metric(&text, "hopwise_rejected_busy_total "), Some(busy as f64));
    // Still healthy afterwards.
    let resp = client()
        .post(server.url("/v1/ask"))
        .json(&json!({"question": QUESTION, "strategy": "cot"}))
        .send()
        .await
        .expect("ask");
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_requests() {
    let llm = toqd_model().latency(Duration::from_millis(100));
    let mut server = TestServer::start(builder(llm).build()).await;
    let url = server.url("/v1/ask");
    let in_flight = tokio::spawn(async move {
        client().post(url).json(&json!({"question": QUESTION, "strategy": "toqd"})).send().await
    });
    wait_in_flight(&server, 1.0).await;
    server.begin_shutdown();
    let resp = in_flight.await.expect("join").expect("the in-flight request is answered");
    assert_eq!(resp.status(), StatusCode::OK);
    let trace: Trace = resp.json().await.expect("trace");
    assert_eq!(trace.answer, "Rush");
    let handle = server.handle.take().expect("handle");
    let served = tokio::time::timeout(Duration::from_secs(10), handle).await.expect("the server stops").expect("join");
    assert!(served.is_ok());
    assert!(client().get(server.url("/healthz")).send().await.is_err(), "no longer listening");
}
