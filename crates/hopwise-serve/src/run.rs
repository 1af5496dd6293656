//! One question's life on the server: check the request and get its context from the runtime, as
//! the CLI does, run it as a task that owns its concurrency permit and its timeout, and cancel it
//! when the client goes away.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hopwise_core::{Event, Recorder, Trace};
use hopwise_reason::runtime::Request;
use hopwise_reason::strategy;
use hopwise_reason::ReasonError;
use serde::Deserialize;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;

use crate::error::{Result, ServeError};
use crate::redact;
use crate::state::AppState;

/// The body of `POST /v1/ask` (and the query of `GET /v1/ask/stream`). Its schema in the API document
/// is generated from this type, doc comments included.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskRequest {
    pub question: String,
    /// Default: the server's configured strategy.
    #[serde(default)]
    pub strategy: Option<String>,
    /// Strategy options laid over the configured ones, e.g. `{"critique": false}`.
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Run the strategy's retrieval-free (-noir) mode.
    #[serde(default)]
    pub no_retrieval: bool,
    /// Passages per retrieval round.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub k: Option<usize>,
    /// Graph expansions; lowers the server's budget, never raises it.
    #[serde(default)]
    pub r_max: Option<u32>,
    /// Decomposition depth; lowers the server's budget, never raises it.
    #[serde(default)]
    pub max_depth: Option<u32>,
    /// Model calls; lowers the server's budget, never raises it.
    #[serde(default)]
    pub max_llm_calls: Option<u64>,
    /// Seconds (more than 0) the question may take; after that it answers best-effort. Lowers the
    /// server's budget, never raises it.
    #[serde(default)]
    pub max_seconds: Option<f64>,
    /// Prompt plus completion tokens the question may use; after that it answers best-effort.
    #[serde(default)]
    pub max_tokens: Option<u64>,
}

pub use hopwise_reason::runtime::Prepared;

/// Checks the request through the runtime (exactly as `hopwise ask` does). The server's own rule:
/// a strategy that needs a retriever on a server without an index is the caller's error.
pub fn prepare(state: &AppState, req: AskRequest) -> Result<Prepared> {
    let request = Request {
        question: req.question,
        strategy: req.strategy,
        options: req.options,
        no_retrieval: req.no_retrieval,
        k: req.k,
        r_max: req.r_max,
        max_depth: req.max_depth,
        max_llm_calls: req.max_llm_calls,
        max_seconds: req.max_seconds,
        max_tokens: req.max_tokens,
        from_network: true,
    };
    state.runtime().prepare(request).map_err(|e| match e {
        ReasonError::NeedsRetriever(name) => ServeError::bad_request(format!(
            "strategy `{name}` needs a retriever and this server has no index; use a -noir strategy or `no_retrieval`"
        )),
        ReasonError::InvalidOption(m)
            if ["k = ", "max_seconds = ", "max_llm_calls = ", "max_tokens = "].iter().any(|p| m.starts_with(p)) =>
        {
            ServeError::BadRequest { status: axum::http::StatusCode::UNPROCESSABLE_ENTITY, message: m }
        }
        other => ServeError::from(other),
    })
}

/// A running question. Dropping it aborts the task (client gone): the model calls stop, the permit
/// and every buffer are released.
pub struct Job(JoinHandle<Result<Trace>>);

impl Drop for Job {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Future for Job {
    type Output = Result<Trace>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|joined| match joined {
            Ok(result) => result,
            Err(e) if e.is_cancelled() => Err(ServeError::Internal("the question was cancelled".into())),
            Err(e) => Err(ServeError::Internal(format!("the question's task failed: {e}"))),
        })
    }
}

/// Starts the question. `listener` receives every trace event as it is recorded.
pub fn spawn(
    state: &AppState,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
    listener: Option<UnboundedSender<Event>>,
) -> Job {
    let state = state.clone();
    Job(tokio::spawn(async move {
        let _permit = permit;
        let s = &state.0;
        let mut rec = Recorder::new(&prepared.question, &prepared.name);
        if let Some(tx) = listener {
            rec = rec.with_listener(tx);
        }
        let ctx = s.runtime.context_for(&prepared, rec);
        let timeout = s.limits.timeout;
        let outcome = tokio::time::timeout(timeout, strategy::run(prepared.strategy(), &ctx, &prepared.question)).await;
        // Count the work done even when the question timed out.
        s.metrics.record_work(&ctx.rec().stats());
        let outcome = match outcome {
            Ok(Ok(trace)) => answered_or_upstream_failure(trace),
            Ok(Err(e)) => Err(ServeError::from(e)),
            Err(_) => Err(ServeError::Timeout(timeout.as_secs().max(1))),
        };
        s.metrics.record_question(&prepared.name, outcome_label(&outcome));
        // The context (and with it the listener) is dropped here, which ends the event stream.
        drop(ctx);
        outcome
    }))
}

/// A trace with no answer is the backend's failure (502), not an empty answer (200). A trace with
/// an answer keeps it, and its backend messages go to the log only.
fn answered_or_upstream_failure(mut trace: Trace) -> Result<Trace> {
    if trace.answer.trim().is_empty() {
        if let Some(failure) = trace.first_backend_failure() {
            return Err(ServeError::Upstream(failure.to_string()));
        }
        // An empty answer is no answer, whatever the cause: a client must not read it as one.
        let why = trace.missing_answer_reason().unwrap_or_default();
        return Err(ServeError::Upstream(format!("no answer could be produced: {why}")));
    }
    if let Some(failure) = trace.first_backend_failure() {
        tracing::warn!(target: "hopwise_serve", "answered best-effort after a backend failure: {failure}");
    }
    redact::trace(&mut trace);
    Ok(trace)
}

fn outcome_label(outcome: &Result<Trace>) -> &'static str {
    match outcome {
        Ok(t) if t.best_effort => "best_effort",
        Ok(_) => "ok",
        Err(ServeError::Timeout(_)) => "timeout",
        Err(ServeError::Upstream(_)) => "upstream_error",
        Err(_) => "error",
    }
}

/// Runs a question to the end (no live events).
pub async fn ask(state: &AppState, req: AskRequest) -> Result<Trace> {
    let prepared = prepare(state, req)?;
    let permit = state.permit()?;
    spawn(state, prepared, permit, None).await
}
