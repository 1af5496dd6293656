//! One question's life on the server: validate the request, build the strategy and context the same
//! way the CLI does (the strategy registry and `Ctx`), run it as a task that owns its concurrency
//! permit and its timeout, and cancel it when the client goes away.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hopwise_core::{Event, Recorder, Trace};
use hopwise_reason::strategy::{self, Strategy};
use hopwise_reason::{Budget, Ctx};
use serde::Deserialize;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;

use crate::error::{Result, ServeError};
use crate::redact;
use crate::state::AppState;

/// The body of `POST /v1/ask` (and the query of `GET /v1/ask/stream`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskRequest {
    pub question: String,
    /// Default: the server's configured strategy.
    #[serde(default)]
    pub strategy: Option<String>,
    /// Strategy options laid over the configured ones, e.g. `{"critique": false}`.
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Run the strategy's retrieval-free mode.
    #[serde(default)]
    pub no_retrieval: bool,
    /// Passages per retrieval round (1..=100).
    #[serde(default)]
    pub k: Option<usize>,
    /// Budgets: lower the server's, never raise them.
    #[serde(default)]
    pub r_max: Option<u32>,
    #[serde(default)]
    pub max_depth: Option<u32>,
    #[serde(default)]
    pub max_llm_calls: Option<u64>,
}

/// A validated request, ready to run: every input error has been reported before any work starts.
pub struct Prepared {
    pub name: String,
    pub question: String,
    strategy: Box<dyn Strategy>,
    budget: Budget,
    k: usize,
}

pub fn prepare(state: &AppState, req: AskRequest) -> Result<Prepared> {
    let question = req.question.trim().to_string();
    if question.is_empty() {
        return Err(ServeError::bad_request("the question is empty"));
    }
    let s = &state.0;
    let requested =
        req.strategy.as_deref().map(str::trim).filter(|n| !n.is_empty()).unwrap_or(s.defaults.strategy.as_str());
    let name = strategy::resolve(requested, req.no_retrieval)?;
    let mut options = s.defaults.options.get(&name).cloned().unwrap_or_default();
    for (k, v) in req.options {
        options.set(&k, v);
    }
    let strategy = strategy::build(&name, &options)?;
    if strategy.needs_retriever() && s.retriever.is_none() {
        return Err(ServeError::bad_request(format!(
            "strategy `{name}` needs a retriever and this server has no index; use a -noir strategy or `no_retrieval`"
        )));
    }
    let k = req.k.unwrap_or(s.defaults.k);
    if !(1..=100).contains(&k) {
        return Err(ServeError::BadRequest {
            status: axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            message: format!("k = {k} must be between 1 and 100"),
        });
    }
    let ceiling = &s.defaults.budget;
    let budget = Budget {
        r_max: req.r_max.map_or(ceiling.r_max, |r| r.min(ceiling.r_max)),
        max_depth: req.max_depth.map_or(ceiling.max_depth, |d| d.min(ceiling.max_depth)),
        max_llm_calls: req.max_llm_calls.map_or(ceiling.max_llm_calls, |c| c.min(ceiling.max_llm_calls)),
    };
    Ok(Prepared { name, question, strategy, budget, k })
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
        let ctx = Ctx::new(s.llm.clone(), s.prompts.clone(), rec)
            .with_retriever(s.retriever.clone())
            .with_budget(prepared.budget.clone())
            .with_k(prepared.k);
        let timeout = s.limits.timeout;
        let outcome =
            tokio::time::timeout(timeout, strategy::run(prepared.strategy.as_ref(), &ctx, &prepared.question)).await;
        // Count the work done even when the question timed out.
        s.metrics.record_work(&ctx.rec.stats());
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

/// A trace with no answer because a backend failed is the backend's failure (502), not an empty
/// answer (200). A trace with an answer keeps it, and its backend messages go to the log only.
fn answered_or_upstream_failure(mut trace: Trace) -> Result<Trace> {
    if trace.answer.trim().is_empty() {
        if let Some(failure) = redact::first_backend_failure(&trace) {
            return Err(ServeError::Upstream(failure.to_string()));
        }
    }
    if let Some(failure) = redact::first_backend_failure(&trace) {
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
