//! The ask API: `POST /v1/ask` (trace as JSON, or live events with `Accept: text/event-stream`),
//! `GET /v1/ask/stream`, `GET /v1/strategies`, `GET /healthz`, `GET /metrics`, `GET /openapi.json`,
//! and the web page.

use std::convert::Infallible;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::Stream;
use hopwise_core::{Event, EventKind};
use hopwise_reason::strategy::STRATEGIES;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::error::{Result, ServeError};
use crate::redact::Redactor;
use crate::run::{self, AskRequest, Job};
use crate::state::AppState;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");

pub async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX_HTML)
}

pub async fn app_js() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], APP_JS)
}

pub async fn style_css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE_CSS)
}

pub async fn openapi() -> Result<Response> {
    Ok(([(header::CONTENT_TYPE, "application/json")], crate::openapi_doc::document()?).into_response())
}

pub async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let text = state.metrics().render(state.in_flight(), state.limits().max_concurrency);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
}

pub async fn strategies(State(state): State<AppState>) -> impl IntoResponse {
    let list: Vec<_> = STRATEGIES
        .iter()
        .map(|s| {
            let mut entry = s.describe();
            entry["model"] = json!(format!("hopwise-{}", s.name));
            entry
        })
        .collect();
    let runtime = state.runtime();
    Json(json!({"default": runtime.defaults().strategy, "has_retriever": runtime.has_retriever(), "strategies": list}))
}

fn wants_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|part| part.trim().starts_with("text/event-stream")))
}

pub async fn ask(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: std::result::Result<Json<AskRequest>, JsonRejection>,
) -> Result<Response> {
    let Json(req) = body?;
    if wants_events(&headers) {
        return event_stream(&state, req).map(IntoResponse::into_response);
    }
    let trace = run::ask(&state, req).await?;
    Ok(Json(trace).into_response())
}

/// Query of `GET /v1/ask/stream` (browsers' `EventSource` can only GET).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    question: String,
    #[serde(default)]
    strategy: Option<String>,
    #[serde(default)]
    no_retrieval: bool,
    #[serde(default)]
    k: Option<usize>,
}

pub async fn ask_stream(
    State(state): State<AppState>,
    query: std::result::Result<Query<StreamQuery>, QueryRejection>,
) -> Result<Response> {
    let Query(q) = query?;
    let req = AskRequest {
        question: q.question,
        strategy: q.strategy,
        no_retrieval: q.no_retrieval,
        k: q.k,
        ..Default::default()
    };
    event_stream(&state, req).map(IntoResponse::into_response)
}

/// The SSE name of a trace event: its `type` (`node`, `edge`, `llm_call`, `retrieval`, `repair`,
/// `note`, `final`).
fn event_name(kind: &EventKind) -> &'static str {
    match kind {
        EventKind::LlmCall { .. } => "llm_call",
        EventKind::Retrieval { .. } => "retrieval",
        EventKind::Node { .. } => "node",
        EventKind::Edge { .. } => "edge",
        EventKind::Repair { .. } => "repair",
        EventKind::Note { .. } => "note",
        EventKind::Final { .. } => "final",
    }
}

fn sse(name: &str, id: Option<u64>, data: &serde_json::Value) -> SseEvent {
    let event = SseEvent::default().event(name).data(data.to_string());
    match id {
        Some(id) => event.id(id.to_string()),
        None => event,
    }
}

struct StreamState {
    rx: UnboundedReceiver<Event>,
    /// `None` once the stream has ended.
    job: Option<Job>,
    /// Keeps backend messages out of the live events.
    redactor: Redactor,
}

/// Validates, takes a slot, starts the question and returns its events as SSE. Input errors and a
/// full server are answered as plain HTTP errors before the stream opens. The last event is `final`
/// (carrying the whole trace in `trace`) or `error`. If the client disconnects, the stream and with
/// it the job are dropped, which cancels the work.
fn event_stream(
    state: &AppState,
    req: AskRequest,
) -> Result<Sse<impl Stream<Item = std::result::Result<SseEvent, Infallible>>>> {
    let prepared = run::prepare(state, req)?;
    let permit = state.permit()?;
    let (tx, rx) = unbounded_channel();
    let job = run::spawn(state, prepared, permit, Some(tx));
    let start = StreamState { rx, job: Some(job), redactor: Redactor::default() };
    let stream = futures::stream::unfold(start, |mut st| async move {
        let job = st.job.as_mut()?;
        match st.rx.recv().await {
            Some(mut event) if !matches!(event.kind, EventKind::Final { .. }) => {
                st.redactor.event(&mut event);
                let data = serde_json::to_value(&event).unwrap_or_default();
                Some((Ok(sse(event_name(&event.kind), Some(event.seq), &data)), st))
            }
            Some(event) => {
                // The final event goes out with the closed trace, so a client needs nothing else.
                let outcome = job.await;
                st.job = None;
                let out = match outcome {
                    Ok(trace) => {
                        let mut data = serde_json::to_value(&event).unwrap_or_default();
                        data["trace"] = serde_json::to_value(&trace).unwrap_or_default();
                        sse("final", Some(event.seq), &data)
                    }
                    Err(e) => sse("error", None, &e.public_body()),
                };
                Some((Ok(out), st))
            }
            None => {
                // The task ended without a final event: timeout or an input error found late.
                let outcome = job.await;
                st.job = None;
                let err = match outcome {
                    Err(e) => e,
                    Ok(_) => ServeError::Internal("the event stream ended early".into()),
                };
                Some((Ok(sse("error", None, &err.public_body())), st))
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
