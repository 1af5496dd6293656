//! The OpenAI-compatible client against a real HTTP server on loopback (the mock from `testing`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{
    BackendErrorKind, ChatMessage, ChatRequest, ChatResponse, Completion, Error, GenParams, Llm, Usage,
};
use hopwise_models::testing::{Fault, MockOpenAiServer};
use hopwise_models::{CacheMode, CachedLlm, OpenAiConfig, OpenAiLlm};

/// Small retry delays so fault tests stay fast.
fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig {
        timeout_secs: 5.0,
        max_retries: 3,
        retry_base_ms: 10,
        retry_max_ms: 50,
        ..OpenAiConfig::new(base_url, "test-model")
    }
}

fn client(base_url: &str) -> OpenAiLlm {
    OpenAiLlm::new(config(base_url)).unwrap()
}

async fn serve(llm: ScriptedLlm) -> MockOpenAiServer {
    MockOpenAiServer::start(Arc::new(llm)).await.unwrap()
}

fn question(n: u32, seed: Option<u64>) -> ChatRequest {
    ChatRequest::new(
        vec![ChatMessage::system("Answer briefly."), ChatMessage::user("What is the capital of France?")],
        GenParams { n, seed, temperature: 0.7, max_tokens: 32, stop: vec!["\n\n".into()], ..GenParams::default() },
    )
}

fn kind(err: &Error) -> Option<BackendErrorKind> {
    err.backend_kind()
}

#[tokio::test]
async fn round_trip_with_n_samples_and_usage() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris {i}")).await;
    let llm = client(&server.base_url());
    assert_eq!(llm.name(), "openai:test-model");

    let response = llm.chat(&question(3, Some(7))).await.unwrap();
    let texts: Vec<&str> = response.choices.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["Paris 0", "Paris 1", "Paris 2"]);
    assert_eq!(response.choices[0].finish_reason.as_deref(), Some("stop"));
    // The scripted model counts words: 2 + 6 prompt words, 2 words per answer.
    assert_eq!(response.usage, Usage::new(8, 6));
    assert!(!response.grammar_used);

    let sent = &server.requests()[0].body;
    assert_eq!(server.request_count(), 1, "n samples must share one request");
    assert_eq!(sent["model"], "test-model");
    assert_eq!(sent["n"], 3);
    assert_eq!(sent["seed"], 7);
    assert_eq!(sent["max_tokens"], 32);
    assert_eq!(sent["stop"], serde_json::json!(["\n\n"]));
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(sent["messages"][1]["content"], "What is the capital of France?");
    assert!((sent["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6);
    for absent in ["grammar", "logprobs", "top_logprobs"] {
        assert!(sent.get(absent).is_none(), "{absent} sent: {sent}");
    }
    assert!(server.requests()[0].authorization.is_none());
}

#[tokio::test]
async fn single_sample_requests_omit_n_and_empty_stop() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    let llm = client(&format!("{}/", server.base_url()));
    let response = llm.chat(&ChatRequest::user("capital?")).await.unwrap();
    assert_eq!(response.text(), "Paris");
    let sent = &server.requests()[0].body;
    assert!(sent.get("n").is_none() && sent.get("stop").is_none() && sent.get("seed").is_none(), "{sent}");
}

#[tokio::test]
async fn servers_that_ignore_n_are_topped_up_to_n_choices() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris {i}")).await;
    server.ignore_n(true);
    let llm = client(&server.base_url());
    let response = llm.chat(&question(3, Some(7))).await.unwrap();
    assert_eq!(response.choices.len(), 3);
    assert_eq!(response.usage.prompt_tokens, 3 * 8, "usage of the top-up requests is added");
    let bodies: Vec<_> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["n"], 3);
    let mut top_up_seeds: Vec<u64> = bodies[1..].iter().map(|b| b["seed"].as_u64().unwrap()).collect();
    top_up_seeds.sort_unstable();
    assert_eq!(top_up_seeds, [8, 9], "top-up samples get distinct, reproducible seeds");
    assert!(bodies[1..].iter().all(|b| b.get("n").is_none()));
}

#[tokio::test]
async fn servers_that_refuse_n_get_single_samples_from_then_on() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris {i}")).await;
    server.reject_n(true);
    let llm = client(&server.base_url());
    let response = llm.chat(&question(3, None)).await.unwrap();
    assert_eq!(response.choices.len(), 3);
    assert_eq!(server.request_count(), 1 + 3);
    let response = llm.chat(&question(2, None)).await.unwrap();
    assert_eq!(response.choices.len(), 2);
    assert_eq!(server.request_count(), 4 + 2, "the refusal is remembered");
}

#[tokio::test]
async fn api_key_is_sent_as_bearer_from_the_named_env_var_and_never_shown() {
    const VAR: &str = "HOPWISE_MODELS_TEST_API_KEY";
    const KEY: &str = "sk-test-a1b2c3d4e5";
    std::env::set_var(VAR, KEY);
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    server.require_api_key(KEY);
    let llm = OpenAiLlm::new(OpenAiConfig { api_key_env: Some(VAR.into()), ..config(&server.base_url()) }).unwrap();
    assert_eq!(llm.chat(&question(1, None)).await.unwrap().text(), "Paris");
    assert_eq!(server.requests()[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert!(!format!("{llm:?}").contains(KEY));

    // A wrong key: 401 is not retried, and the message names the status but not the key.
    let other = serve(ScriptedLlm::new()).await;
    other.require_api_key("sk-other");
    let llm = OpenAiLlm::new(OpenAiConfig { api_key_env: Some(VAR.into()), ..config(&other.base_url()) }).unwrap();
    let err = llm.chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Rejected));
    assert_eq!(other.request_count(), 1);
    let message = err.to_string();
    assert!(message.contains("401") && message.contains(&other.base_url()), "{message}");
    assert!(!message.contains(KEY), "{message}");

    // A server that echoes the key back in an error body: the key is scrubbed from our message.
    let echo = MockOpenAiServer::start(Arc::new(FailingLlm(format!("bad credentials {KEY}")))).await.unwrap();
    let llm =
        OpenAiLlm::new(OpenAiConfig { api_key_env: Some(VAR.into()), max_retries: 0, ..config(&echo.base_url()) })
            .unwrap();
    let message = llm.chat(&question(1, None)).await.unwrap_err().to_string();
    assert!(message.contains("bad credentials <redacted>"), "{message}");
    assert!(!message.contains(KEY), "{message}");
}

/// A model that always fails with the given message (the mock turns it into a 500).
struct FailingLlm(String);

#[async_trait]
impl Llm for FailingLlm {
    fn name(&self) -> &str {
        "failing"
    }
    async fn chat(&self, _: &ChatRequest) -> hopwise_core::Result<ChatResponse> {
        Err(Error::backend("failing", BackendErrorKind::Server, self.0.clone()))
    }
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    server.fail_next(2, 500);
    let response = client(&server.base_url()).chat(&question(1, None)).await.unwrap();
    assert_eq!(response.text(), "Paris");
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn persistent_server_errors_give_up_after_max_retries_with_a_clear_message() {
    let server = serve(ScriptedLlm::new()).await;
    server.fail_next(10, 503);
    let err = client(&server.base_url()).chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Server));
    assert_eq!(server.request_count(), 4, "1 attempt + 3 retries");
    let message = err.to_string();
    for part in ["openai:test-model", "503", "injected fault", "4 attempts", "/v1/chat/completions"] {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
}

#[tokio::test]
async fn rate_limits_honour_retry_after_up_to_the_cap() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    server.rate_limit_next(1, 0.4);
    let llm = OpenAiLlm::new(OpenAiConfig { retry_base_ms: 1, retry_max_ms: 1, ..config(&server.base_url()) }).unwrap();
    let started = Instant::now();
    assert_eq!(llm.chat(&question(1, None)).await.unwrap().text(), "Paris");
    assert!(started.elapsed() >= Duration::from_millis(400), "Retry-After ignored: {:?}", started.elapsed());
    assert_eq!(server.request_count(), 2);

    // A server asking for 30 s is waited on only up to retry_after_max_secs.
    server.rate_limit_next(1, 30.0);
    let llm = OpenAiLlm::new(OpenAiConfig { retry_after_max_secs: 0.05, ..config(&server.base_url()) }).unwrap();
    let started = Instant::now();
    assert_eq!(llm.chat(&question(1, None)).await.unwrap().text(), "Paris");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn exhausted_rate_limits_are_reported_as_such() {
    let server = serve(ScriptedLlm::new()).await;
    server.rate_limit_next(5, 0.0);
    let llm = OpenAiLlm::new(OpenAiConfig { max_retries: 1, ..config(&server.base_url()) }).unwrap();
    let err = llm.chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::RateLimited));
    assert!(err.to_string().contains("429"), "{err}");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn other_client_errors_are_not_retried() {
    let server = serve(ScriptedLlm::new()).await;
    server.fail_next(1, 400);
    let err = client(&server.base_url()).chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Rejected));
    assert!(err.to_string().contains("400") && err.to_string().contains("1 attempt"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn garbage_bodies_are_malformed_and_retried_once_at_most() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    server.garbage_next(1);
    assert_eq!(client(&server.base_url()).chat(&question(1, None)).await.unwrap().text(), "Paris");
    assert_eq!(server.request_count(), 2);

    let server = serve(ScriptedLlm::new()).await;
    server.garbage_next(10);
    let err = client(&server.base_url()).chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Malformed));
    assert_eq!(server.request_count(), 2, "garbage is retried once, not max_retries times");
    let message = err.to_string();
    assert!(message.contains("not a chat-completion") && message.contains("502 Bad Gateway"), "{message}");

    let server = serve(ScriptedLlm::new()).await;
    server.push_fault(Fault::NoChoices);
    server.push_fault(Fault::NoChoices);
    let err = client(&server.base_url()).chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Malformed));
    assert!(err.to_string().contains("no `choices`"), "{err}");
}

#[tokio::test]
async fn a_server_that_is_down_gives_a_connection_error_quickly() {
    // Bind and release a port so nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let started = Instant::now();
    let err = client(&base_url).chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Connection));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let message = err.to_string();
    assert!(message.contains(&format!("127.0.0.1:{port}/v1/chat/completions")), "{message}");
    assert!(message.contains("4 attempts"), "{message}");
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    server.set_delay(Duration::from_secs(3));
    let llm = OpenAiLlm::new(OpenAiConfig { timeout_secs: 0.3, max_retries: 1, ..config(&server.base_url()) }).unwrap();
    let started = Instant::now();
    let err = llm.chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Timeout));
    assert!(started.elapsed() < Duration::from_millis(2_500), "took {:?}", started.elapsed());
    assert!(err.to_string().contains("timed out"), "{err}");
    assert_eq!(server.request_count(), 2, "a timeout is retried");
}

#[tokio::test]
async fn the_in_flight_limit_holds_under_concurrent_callers() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    server.set_delay(Duration::from_millis(150));
    let llm = OpenAiLlm::new(OpenAiConfig { max_in_flight: 2, ..config(&server.base_url()) }).unwrap();
    let request = question(1, None);
    let calls = (0..6).map(|_| llm.chat(&request));
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(|r| r.as_ref().is_ok_and(|r| r.text() == "Paris")));
    assert_eq!(server.request_count(), 6);
    assert_eq!(server.peak_in_flight(), 2, "limit exceeded, or calls did not run concurrently at all");
}

/// A model that reports first-token alternatives, as a logprobs-capable server does.
struct JudgeLlm;

#[async_trait]
impl Llm for JudgeLlm {
    fn name(&self) -> &str {
        "judge"
    }
    async fn chat(&self, _: &ChatRequest) -> hopwise_core::Result<ChatResponse> {
        Ok(ChatResponse {
            choices: vec![Completion {
                text: "entail".into(),
                finish_reason: Some("stop".into()),
                top_logprobs: vec![("entail".into(), -0.25), ("neutral".into(), -1.5), ("contradict".into(), -3.0)],
                token_logprobs: Vec::new(),
            }],
            usage: Usage::new(5, 1),
            grammar_used: false,
            timing: None,
        })
    }
}

/// A model whose backend served part of each prompt from its prefix cache.
struct PrefixCachedLlm;

#[async_trait]
impl Llm for PrefixCachedLlm {
    fn name(&self) -> &str {
        "prefix-cached"
    }
    async fn chat(&self, _: &ChatRequest) -> hopwise_core::Result<ChatResponse> {
        Ok(ChatResponse {
            choices: vec![Completion { text: "Paris".into(), ..Completion::default() }],
            usage: Usage { prompt_tokens: 40, completion_tokens: 1, cached_prompt_tokens: 32 },
            ..ChatResponse::default()
        })
    }
}

#[tokio::test]
async fn cached_prompt_tokens_are_read_from_the_server_usage() {
    let server = MockOpenAiServer::start(Arc::new(PrefixCachedLlm)).await.unwrap();
    let response = client(&server.base_url()).chat(&question(1, None)).await.unwrap();
    assert_eq!(response.usage, Usage { prompt_tokens: 40, completion_tokens: 1, cached_prompt_tokens: 32 });
    // Samples requested one by one add up, cached tokens included.
    server.reject_n(true);
    let response = client(&server.base_url()).chat(&question(2, Some(1))).await.unwrap();
    assert_eq!(response.usage.cached_prompt_tokens, 64);
}

#[tokio::test]
async fn logprobs_are_requested_and_read() {
    let server = MockOpenAiServer::start(Arc::new(JudgeLlm)).await.unwrap();
    let llm = client(&server.base_url());
    let request =
        ChatRequest::new(vec![ChatMessage::user("p / h")], GenParams { logprobs: true, ..GenParams::default() });
    let response = llm.chat(&request).await.unwrap();
    assert_eq!(
        response.choices[0].top_logprobs,
        vec![("entail".to_string(), -0.25), ("neutral".to_string(), -1.5), ("contradict".to_string(), -3.0)]
    );
    let sent = &server.requests()[0].body;
    assert_eq!(sent["logprobs"], true);
    assert_eq!(sent["top_logprobs"], 5);
}

#[tokio::test]
async fn grammar_is_sent_only_when_enabled() {
    let server = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    let mut request = question(1, None);
    request.params.grammar = Some("root ::= \"Paris\"".into());

    let response = client(&server.base_url()).chat(&request).await.unwrap();
    assert!(!response.grammar_used);
    assert!(server.requests()[0].body.get("grammar").is_none());

    let llm = OpenAiLlm::new(OpenAiConfig { send_grammar: true, ..config(&server.base_url()) }).unwrap();
    let response = llm.chat(&request).await.unwrap();
    assert!(response.grammar_used);
    assert_eq!(server.requests()[1].body["grammar"], "root ::= \"Paris\"");
}

#[tokio::test]
async fn a_response_schema_is_sent_as_the_response_format_only_when_enabled() {
    let server = serve(ScriptedLlm::new().on("capital", "{\"city\":\"Paris\"}")).await;
    let mut request = question(1, None);
    let schema = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}});
    request.params.response_schema = Some(schema.clone());

    let response = client(&server.base_url()).chat(&request).await.unwrap();
    assert!(!response.grammar_used);
    assert!(server.requests()[0].body.get("response_format").is_none());

    let llm = OpenAiLlm::new(OpenAiConfig { send_response_format: true, ..config(&server.base_url()) }).unwrap();
    let response = llm.chat(&request).await.unwrap();
    assert!(response.grammar_used, "the output was constrained");
    let sent = &server.requests()[1].body["response_format"];
    assert_eq!(sent["type"], "json_schema");
    assert_eq!(sent["json_schema"]["schema"], schema);
}

#[tokio::test]
async fn list_models_reports_the_served_model_or_a_clear_error() {
    let server = serve(ScriptedLlm::new()).await;
    assert_eq!(client(&server.base_url()).list_models().await.unwrap(), ["scripted"]);
    let health = reqwest::get(format!("http://{}/health", server.addr())).await.unwrap();
    assert!(health.status().is_success());
    server.shutdown().await;

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = client(&format!("http://127.0.0.1:{port}/v1")).list_models().await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Connection));
    assert!(err.to_string().contains("/v1/models"), "{err}");
}

#[tokio::test]
async fn a_stopped_mock_refuses_connections() {
    let server = serve(ScriptedLlm::new()).await;
    let base_url = server.base_url();
    let llm = OpenAiLlm::new(OpenAiConfig { max_retries: 0, ..config(&base_url) }).unwrap();
    llm.chat(&question(1, None)).await.unwrap();
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let fresh = OpenAiLlm::new(OpenAiConfig { max_retries: 0, ..config(&base_url) }).unwrap();
    let err = fresh.chat(&question(1, None)).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Connection), "{err}");
}

#[tokio::test]
async fn cached_http_calls_replay_offline() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(ScriptedLlm::new().on("capital", "Paris {i}")).await;
    let recording = CachedLlm::new(client(&server.base_url()), dir.path(), CacheMode::ReadWrite);
    let first = recording.chat(&question(2, Some(1))).await.unwrap();
    let second = recording.chat(&question(2, Some(1))).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(server.request_count(), 1, "the second call is served from disk");
    let base_url = server.base_url();
    server.shutdown().await;

    // Server gone: replay still answers what was recorded, and refuses what was not.
    let replay = CachedLlm::new(client(&base_url), dir.path(), CacheMode::ReadOnly);
    assert_eq!(replay.chat(&question(2, Some(1))).await.unwrap(), first);
    let err = replay.chat(&question(2, Some(2))).await.unwrap_err();
    assert_eq!(kind(&err), Some(BackendErrorKind::Unsupported));
    assert_eq!(replay.stats().hits, 1);
    assert_eq!(replay.stats().misses, 1);
}

/// Two servers that serve the same model name but answer differently never share cache entries: each
/// client gets its own server's answer, and both servers are asked.
#[tokio::test]
async fn the_cache_keeps_two_servers_with_one_model_name_apart() {
    let dir = tempfile::tempdir().unwrap();
    let first = serve(ScriptedLlm::new().on("capital", "Paris")).await;
    let second = serve(ScriptedLlm::new().on("capital", "Lyon")).await;
    let via_first = CachedLlm::new(client(&first.base_url()), dir.path(), CacheMode::ReadWrite);
    let via_second = CachedLlm::new(client(&second.base_url()), dir.path(), CacheMode::ReadWrite);
    assert_eq!(via_first.name(), via_second.name(), "same model name on both");
    assert_ne!(via_first.identity(), via_second.identity());

    assert_eq!(via_first.chat(&question(1, Some(1))).await.unwrap().text(), "Paris");
    assert_eq!(via_second.chat(&question(1, Some(1))).await.unwrap().text(), "Lyon");
    assert_eq!((first.request_count(), second.request_count()), (1, 1), "no answer was replayed across servers");
    // Each still hits its own entry.
    assert_eq!(via_first.chat(&question(1, Some(1))).await.unwrap().text(), "Paris");
    assert_eq!(first.request_count(), 1);
}

#[tokio::test]
async fn a_base_url_with_a_query_posts_to_the_chat_endpoint_and_keeps_the_query() {
    let server = serve(ScriptedLlm::new().fallback("Paris")).await;
    let llm = client(&format!("{}?api-version=2024-06-01", server.base_url()));
    let answer = llm.chat(&question(1, None)).await.expect("answered");
    assert_eq!(answer.text(), "Paris");
    assert!(server.misrouted().is_empty(), "requests went elsewhere: {:?}", server.misrouted());
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.query.as_deref(), Some("api-version=2024-06-01"));
}

#[tokio::test]
async fn credentials_in_the_base_url_never_reach_error_messages() {
    let server = serve(ScriptedLlm::new().fallback("x")).await;
    server.fail_always(Fault::Status { status: 500, retry_after: None });
    let base = server.base_url().replace("http://", "http://alice:pw-hunter2@") + "?key=sk-query-secret";
    let llm = OpenAiLlm::new(OpenAiConfig { max_retries: 0, ..config(&base) }).unwrap();
    let err = llm.chat(&question(1, None)).await.expect_err("500").to_string();
    assert!(!err.contains("hunter2") && !err.contains("sk-query-secret") && !err.contains("alice"), "{err}");
    assert!(llm.identity().contains(&server.addr().to_string()) && !llm.identity().contains("hunter2"));
}

#[tokio::test]
async fn escape_sequences_in_error_bodies_are_neutralised() {
    let server = serve(ScriptedLlm::new().fallback("x")).await;
    server.push_fault(Fault::Raw { status: 400, body: "\u{1b}]0;pwned\u{7}\u{1b}[2J boom\u{9b}31m".into() });
    let llm = client(&server.base_url());
    let err = llm.chat(&question(1, None)).await.expect_err("400").to_string();
    assert!(err.contains("boom"), "{err}");
    assert!(!err.chars().any(|c| c.is_control()), "{err:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_costs_one_timeout_per_attempt() {
    let server = serve(ScriptedLlm::new().fallback("x")).await;
    server.fail_always(Fault::Hang);
    let llm = OpenAiLlm::new(OpenAiConfig { timeout_secs: 0.3, max_retries: 1, ..config(&server.base_url()) }).unwrap();
    let started = Instant::now();
    let err = llm.chat(&question(1, None)).await.expect_err("no answer");
    assert_eq!(kind(&err), Some(BackendErrorKind::Timeout), "{err}");
    assert_eq!(server.request_count(), 2, "one attempt and one retry");
    // Two 0.3 s attempts plus a backoff of at most 50 ms; generous for a busy machine.
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    server.shutdown().await;
}

#[tokio::test]
async fn a_body_dripped_slower_than_the_timeout_is_cut_off() {
    let server = serve(ScriptedLlm::new().fallback("x")).await;
    server.fail_always(Fault::Drip { interval: Duration::from_millis(100) });
    let llm = OpenAiLlm::new(OpenAiConfig { timeout_secs: 0.5, max_retries: 0, ..config(&server.base_url()) }).unwrap();
    let err = llm.chat(&question(1, None)).await.expect_err("the body takes about 10 s");
    assert_eq!(kind(&err), Some(BackendErrorKind::Timeout), "{err}");

    // The same drip, fast enough, is a normal answer.
    server.fail_always(Fault::Drip { interval: Duration::from_millis(1) });
    let llm = OpenAiLlm::new(OpenAiConfig { timeout_secs: 5.0, ..config(&server.base_url()) }).unwrap();
    assert_eq!(llm.chat(&question(1, None)).await.expect("dripped").text(), "dripped");
    server.heal();
    assert_eq!(llm.chat(&question(1, None)).await.expect("healed").text(), "x");
}

#[tokio::test]
async fn a_response_over_the_size_limit_is_refused_not_buffered() {
    let server = serve(ScriptedLlm::new().fallback("x")).await;
    server.push_fault(Fault::Raw { status: 200, body: "x".repeat(33 * 1024 * 1024) });
    let llm = OpenAiLlm::new(OpenAiConfig { max_retries: 0, ..config(&server.base_url()) }).unwrap();
    let err = llm.chat(&question(1, None)).await.expect_err("too large");
    assert_eq!(kind(&err), Some(BackendErrorKind::Malformed), "{err}");
    assert!(err.to_string().contains("larger than 32 MiB"), "{err}");
}
