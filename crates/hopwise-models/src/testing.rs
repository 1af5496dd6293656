//! Test support: [`MockOpenAiServer`], a real HTTP server on loopback that speaks the OpenAI
//! chat-completions protocol by delegating to any [`Llm`] (typically
//! [`hopwise_core::scripted::ScriptedLlm`]), with faults that tests can inject: error statuses, rate
//! limits with `Retry-After`, garbage bodies, empty replies, slow responses, requests that are never
//! answered (hang), bodies sent a byte at a time (drip), and the quirks of real servers around `n`.
//! Faults are queued one per request, or made sticky for every request until [`MockOpenAiServer::heal`].
//! Each server answers from its own model, so two servers on two addresses give two sets of answers.
//!
//! Public (not `cfg(test)`) so the tests of other crates and of the server can use it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hopwise_core::{ChatMessage, ChatRequest, GenParams, Llm};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A fault served instead of a normal answer, one per request, in the order queued.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer with this status and a JSON error body, plus `Retry-After` when given.
    Status { status: u16, retry_after: Option<String> },
    /// 200 with an HTML body, as a misconfigured proxy would send.
    Garbage,
    /// This status with this body as `text/plain`, byte for byte (escape sequences included).
    Raw { status: u16, body: String },
    /// 200 with valid JSON that has no `choices`.
    NoChoices,
    /// 200 with one choice whose content is empty.
    EmptyReply,
    /// Never answers: the request stays open until the client gives up or the server stops.
    Hang,
    /// 200 with a valid answer (`"dripped"`) whose body is sent one byte per `interval`.
    Drip { interval: Duration },
}

/// How the mock imitates particular servers.
#[derive(Debug, Clone, Default)]
struct Behaviour {
    delay: Duration,
    /// Return one choice whatever `n` asks (older llama.cpp servers).
    ignore_n: bool,
    /// Answer 400 to `n > 1` (recent llama.cpp servers).
    reject_n: bool,
    /// Answer 401 unless `Authorization: Bearer <key>` matches.
    required_key: Option<String>,
}

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// The request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The query string without `?`, if any.
    pub query: Option<String>,
    pub authorization: Option<String>,
    /// The JSON body, or `Value::Null` when it was not JSON.
    pub body: serde_json::Value,
}

struct MockState {
    llm: Arc<dyn Llm>,
    faults: Mutex<VecDeque<Fault>>,
    /// Served to every request (after the queued ones) until healed.
    sticky: Mutex<Option<Fault>>,
    /// Requests to paths the mock does not serve.
    misrouted: Mutex<Vec<String>>,
    /// Flips to `true` when the server stops, releasing hanging requests.
    closing: tokio::sync::watch::Receiver<bool>,
    behaviour: Mutex<Behaviour>,
    received: Mutex<Vec<ReceivedRequest>>,
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
}

/// Tests must not be derailed by a panic in another test's thread poisoning a lock.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running mock server. Shuts down on [`MockOpenAiServer::shutdown`] or when dropped.
pub struct MockOpenAiServer {
    addr: SocketAddr,
    state: Arc<MockState>,
    closing: tokio::sync::watch::Sender<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl MockOpenAiServer {
    /// Starts serving on `127.0.0.1` at a free port. Needs a running tokio runtime.
    pub async fn start(llm: Arc<dyn Llm>) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (closing, closing_rx) = tokio::sync::watch::channel(false);
        let state = Arc::new(MockState {
            llm,
            faults: Mutex::new(VecDeque::new()),
            sticky: Mutex::new(None),
            misrouted: Mutex::new(Vec::new()),
            closing: closing_rx,
            behaviour: Mutex::new(Behaviour::default()),
            received: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
            .fallback(misrouted)
            .with_state(state.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!("mock OpenAI server stopped: {e}");
            }
        });
        Ok(Self { addr, state, closing, stop: Some(stop), task: Some(task) })
    }

    /// `http://127.0.0.1:PORT/v1`, the value for `OpenAiConfig::base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `fault` for the next request that has no earlier fault queued.
    pub fn push_fault(&self, fault: Fault) {
        lock(&self.state.faults).push_back(fault);
    }

    /// The next `count` requests get `status` with a JSON error body.
    pub fn fail_next(&self, count: usize, status: u16) {
        for _ in 0..count {
            self.push_fault(Fault::Status { status, retry_after: None });
        }
    }

    /// The next `count` requests get 429 with `Retry-After: retry_after_secs`.
    pub fn rate_limit_next(&self, count: usize, retry_after_secs: f64) {
        for _ in 0..count {
            self.push_fault(Fault::Status { status: 429, retry_after: Some(retry_after_secs.to_string()) });
        }
    }

    /// The next `count` requests get a 200 whose body is not JSON.
    pub fn garbage_next(&self, count: usize) {
        for _ in 0..count {
            self.push_fault(Fault::Garbage);
        }
    }

    /// Every request from now on gets `fault` (after any queued ones), until [`Self::heal`].
    pub fn fail_always(&self, fault: Fault) {
        *lock(&self.state.sticky) = Some(fault);
    }

    /// Ends [`Self::fail_always`]; queued faults stay queued.
    pub fn heal(&self) {
        *lock(&self.state.sticky) = None;
    }

    /// Paths (with their query) of requests to endpoints the mock does not serve.
    pub fn misrouted(&self) -> Vec<String> {
        lock(&self.state.misrouted).clone()
    }

    /// Every request waits this long before it is answered (faults included).
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.state.behaviour).delay = delay;
    }

    /// Answer with one choice whatever `n` asks, like older llama.cpp servers.
    pub fn ignore_n(&self, on: bool) {
        lock(&self.state.behaviour).ignore_n = on;
    }

    /// Refuse `n > 1` with 400, like recent llama.cpp servers.
    pub fn reject_n(&self, on: bool) {
        lock(&self.state.behaviour).reject_n = on;
    }

    /// Answer 401 unless the request carries `Authorization: Bearer <key>`.
    pub fn require_api_key(&self, key: impl Into<String>) {
        lock(&self.state.behaviour).required_key = Some(key.into());
    }

    /// Requests to `/v1/chat/completions` so far, faulty ones included.
    pub fn request_count(&self) -> usize {
        lock(&self.state.received).len()
    }

    /// Every chat request received so far, in arrival order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.state.received).clone()
    }

    /// The most chat requests that were being handled at the same moment.
    pub fn peak_in_flight(&self) -> usize {
        self.state.peak_in_flight.load(Ordering::SeqCst)
    }

    /// Stops accepting connections and waits (up to 5 s) for requests in progress to finish.
    pub async fn shutdown(mut self) {
        let _ = self.closing.send(true);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(Duration::from_secs(5), &mut task).await.is_err() {
                task.abort();
            }
        }
    }
}

impl Drop for MockOpenAiServer {
    fn drop(&mut self) {
        let _ = self.closing.send(true);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Counts a request as in flight for as long as it lives, however the handler ends.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(state: &'a MockState) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(&state.in_flight)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The request fields the mock understands; others are accepted and ignored, as real servers do.
#[derive(Deserialize)]
struct IncomingRequest {
    messages: Vec<ChatMessage>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    max_tokens: Option<u32>,
    stop: Option<Stop>,
    seed: Option<u64>,
    n: Option<u32>,
    grammar: Option<String>,
    /// OpenAI's structured output; its `json_schema.schema` reaches the scripted model as
    /// `response_schema`.
    response_format: Option<serde_json::Value>,
    logprobs: Option<bool>,
    model: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

fn error_response(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": {"message": message, "type": "mock_error"}}))).into_response()
}

async fn misrouted(State(state): State<Arc<MockState>>, uri: Uri) -> Response {
    lock(&state.misrouted).push(uri.to_string());
    error_response(StatusCode::NOT_FOUND, "no such endpoint")
}

/// Waits until the server stops.
async fn hang(state: &MockState) {
    let mut closing = state.closing.clone();
    let _ = closing.wait_for(|closing| *closing).await;
}

/// A valid one-choice answer sent one byte per `interval`.
fn drip(interval: Duration) -> Response {
    let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "dripped"}, "finish_reason": "stop"}]})
        .to_string()
        .into_bytes();
    let stream = futures::stream::unfold((body, 0usize), move |(body, at)| async move {
        if at >= body.len() {
            return None;
        }
        tokio::time::sleep(interval).await;
        let byte = Bytes::copy_from_slice(&body[at..=at]);
        Some((Ok::<_, std::convert::Infallible>(byte), (body, at + 1)))
    });
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from_stream(stream)).into_response()
}

async fn chat_completions(State(state): State<Arc<MockState>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let _in_flight = InFlight::enter(&state);
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let body_json: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    lock(&state.received).push(ReceivedRequest {
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        authorization: authorization.clone(),
        body: body_json,
    });

    let behaviour = lock(&state.behaviour).clone();
    if !behaviour.delay.is_zero() {
        tokio::time::sleep(behaviour.delay).await;
    }
    if let Some(key) = &behaviour.required_key {
        if authorization.as_deref() != Some(format!("Bearer {key}").as_str()) {
            return error_response(StatusCode::UNAUTHORIZED, "invalid API key");
        }
    }
    let queued = lock(&state.faults).pop_front();
    let fault = queued.or_else(|| lock(&state.sticky).clone());
    match fault {
        Some(Fault::Status { status, retry_after }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = error_response(status, "injected fault");
            if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Some(Fault::Raw { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, [(header::CONTENT_TYPE, "text/plain")], body).into_response();
        }
        Some(Fault::Garbage) => {
            return (StatusCode::OK, [(header::CONTENT_TYPE, "text/html")], "<html><body>502 Bad Gateway</body>")
                .into_response();
        }
        Some(Fault::NoChoices) => return Json(json!({"object": "chat.completion", "data": []})).into_response(),
        Some(Fault::EmptyReply) => {
            return Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}))
                .into_response()
        }
        Some(Fault::Hang) => {
            hang(&state).await;
            return error_response(StatusCode::SERVICE_UNAVAILABLE, "the mock server is stopping");
        }
        Some(Fault::Drip { interval }) => return drip(interval),
        None => {}
    }

    let incoming: IncomingRequest = match serde_json::from_slice(&body) {
        Ok(incoming) => incoming,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &format!("invalid request: {e}")),
    };
    let defaults = GenParams::default();
    let n = incoming.n.unwrap_or(1).max(1);
    if n > 1 && behaviour.reject_n {
        return error_response(StatusCode::BAD_REQUEST, "Only one completion choice is allowed");
    }
    let params = GenParams {
        temperature: incoming.temperature.unwrap_or(defaults.temperature),
        top_p: incoming.top_p.unwrap_or(defaults.top_p),
        max_tokens: incoming.max_tokens.unwrap_or(defaults.max_tokens),
        stop: match incoming.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        },
        seed: incoming.seed,
        n: if behaviour.ignore_n { 1 } else { n },
        grammar: incoming.grammar,
        response_schema: incoming.response_format.and_then(|f| f.pointer("/json_schema/schema").cloned()),
        logprobs: incoming.logprobs.unwrap_or(false),
        prompt_lookup: None,
    };
    let want_logprobs = params.logprobs;
    let request = ChatRequest::new(incoming.messages, params);
    let response = match state.llm.chat(&request).await {
        Ok(response) => response,
        Err(e) => return error_response(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let choices: Vec<serde_json::Value> = response
        .choices
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let logprobs = (want_logprobs && !c.top_logprobs.is_empty()).then(|| {
                let top: Vec<_> =
                    c.top_logprobs.iter().map(|(token, logprob)| json!({"token": token, "logprob": logprob})).collect();
                json!({"content": [{"token": c.top_logprobs[0].0, "logprob": c.top_logprobs[0].1, "top_logprobs": top}]})
            });
            json!({
                "index": index,
                "message": {"role": "assistant", "content": c.text},
                "finish_reason": c.finish_reason.as_deref().unwrap_or("stop"),
                "logprobs": logprobs,
            })
        })
        .collect();
    let usage = &response.usage;
    Json(json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": incoming.model.unwrap_or_else(|| state.llm.name().to_string()),
        "choices": choices,
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
        },
    }))
    .into_response()
}

async fn models(State(state): State<Arc<MockState>>) -> Json<serde_json::Value> {
    Json(json!({"object": "list", "data": [{"id": state.llm.name(), "object": "model", "owned_by": "hopwise"}]}))
}
