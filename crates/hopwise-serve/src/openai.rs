//! The OpenAI-compatible face: `POST /v1/chat/completions` where `model` names a strategy
//! (`hopwise-toqd`, or just `toqd`), and `GET /v1/models`. The last user message is the question,
//! the reply is the answer, and the whole trace rides along in the extension field `hopwise_trace`.
//! With `stream: true` the answer is sent as `chat.completion.chunk` events ending in `data: [DONE]`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hopwise_core::progress::ProgressLines;
use hopwise_core::Trace;
use hopwise_reason::strategy::STRATEGIES;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{Result, ServeError};
use crate::run::{self, AskRequest};
use crate::state::AppState;

const PREFIX: &str = "hopwise-";

/// The fields hopwise reads; any other OpenAI parameter (temperature, max_tokens, …) is accepted
/// and ignored, because the strategy decides how it samples.
#[derive(Debug, Deserialize)]
pub struct ChatCompletionRequest {
    model: String,
    messages: Vec<Message>,
    #[serde(default)]
    stream: bool,
    /// hopwise extension: strategy options, as in `/v1/ask`.
    #[serde(default)]
    hopwise_options: serde_json::Map<String, Value>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Content,
}

/// A message's content: a string, or a list of parts of which the text ones count.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
    #[default]
    Null,
}

impl Content {
    fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            Content::Null => String::new(),
        }
    }
}

/// `hopwise-toqd` -> `toqd`; a bare strategy name is accepted too.
fn strategy_for(model: &str) -> Option<&'static str> {
    let name = model.strip_prefix(PREFIX).unwrap_or(model);
    STRATEGIES.iter().map(|s| s.name).find(|n| *n == name)
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn completion_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("chatcmpl-hw{:x}{:08x}", NEXT.fetch_add(1, Ordering::Relaxed), nanos)
}

fn usage(trace: &Trace) -> Value {
    let s = &trace.stats;
    json!({"prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens, "total_tokens": s.prompt_tokens + s.completion_tokens})
}

pub async fn models() -> impl IntoResponse {
    let created = now_secs();
    let data: Vec<Value> = STRATEGIES
        .iter()
        .map(|s| json!({"id": format!("{PREFIX}{}", s.name), "object": "model", "created": created, "owned_by": "hopwise"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

pub async fn chat_completions(
    State(state): State<AppState>,
    body: std::result::Result<Json<ChatCompletionRequest>, JsonRejection>,
) -> Result<Response> {
    let Json(req) = body?;
    let strategy = strategy_for(&req.model).ok_or_else(|| ServeError::ModelNotFound(req.model.clone()))?;
    let question = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .map(|m| m.content.text())
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ServeError::bad_request("`messages` has no user message with text; it holds the question"))?;
    let ask = AskRequest {
        question,
        strategy: Some(strategy.to_string()),
        options: req.hopwise_options,
        ..Default::default()
    };
    let model = format!("{PREFIX}{strategy}");
    if req.stream {
        return stream(&state, ask, model).map(IntoResponse::into_response);
    }
    let trace = run::ask(&state, ask).await?;
    Ok(Json(json!({
        "id": completion_id(),
        "object": "chat.completion",
        "created": now_secs(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": trace.answer},
            "finish_reason": "stop",
            "logprobs": null
        }],
        "usage": usage(&trace),
        "hopwise_trace": trace,
    }))
    .into_response())
}

fn chunk(id: &str, created: u64, model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]
    })
}

/// Splits the answer into word-sized pieces (keeping the spaces) so clients see real chunks.
fn pieces(answer: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in answer.chars() {
        current.push(ch);
        if ch.is_whitespace() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The role chunk goes out at once (the client knows it was accepted); the answer follows when the
/// strategy is done. Errors after the stream opened are sent as an `error` object, as OpenAI does.
fn stream(
    state: &AppState,
    ask: AskRequest,
    model: String,
) -> Result<Sse<impl futures::Stream<Item = std::result::Result<SseEvent, Infallible>>>> {
    let prepared = run::prepare(state, ask)?;
    let permit = state.permit()?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let job = run::spawn(state, prepared, permit, Some(tx));
    let id = completion_id();
    let created = now_secs();
    let head = chunk(&id, created, &model, json!({"role": "assistant", "content": ""}), None);
    let first = futures::stream::once(async move { head });
    // The graph's progress, one reasoning chunk per line, until the question's recorder closes the
    // channel; chat UIs show `reasoning_content` (and the newer `reasoning`) apart from the answer.
    let (reasoning_id, reasoning_model) = (id.clone(), model.clone());
    let reasoning = futures::stream::unfold((rx, ProgressLines::new()), move |(mut rx, mut lines)| {
        let (id, model) = (reasoning_id.clone(), reasoning_model.clone());
        async move {
            while let Some(event) = rx.recv().await {
                if let Some(line) = lines.line(&event) {
                    let text = format!("{line}\n");
                    let delta = json!({"reasoning_content": text, "reasoning": text});
                    return Some((chunk(&id, created, &model, delta, None), (rx, lines)));
                }
            }
            None
        }
    });
    let rest = futures::stream::once(async move {
        let mut events = Vec::new();
        match job.await {
            Ok(trace) => {
                for piece in pieces(&trace.answer) {
                    events.push(chunk(&id, created, &model, json!({"content": piece}), None));
                }
                let mut last = chunk(&id, created, &model, json!({}), Some("stop"));
                last["usage"] = usage(&trace);
                last["hopwise_trace"] = serde_json::to_value(&trace).unwrap_or_default();
                events.push(last);
            }
            Err(e) => events.push(e.public_body()),
        }
        futures::stream::iter(events)
    });
    use futures::StreamExt;
    let events = first
        .chain(reasoning)
        .chain(rest.flatten())
        .map(|v| SseEvent::default().data(v.to_string()))
        .chain(futures::stream::once(async { SseEvent::default().data("[DONE]") }))
        .map(Ok);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_map_to_strategies() {
        assert_eq!(strategy_for("hopwise-toqd"), Some("toqd"));
        assert_eq!(strategy_for("cot"), Some("cot"));
        assert_eq!(strategy_for("gpt-4o"), None);
        assert_eq!(pieces("Rush is a band").concat(), "Rush is a band");
        assert_eq!(pieces("Rush is").len(), 2);
    }
}
