//! hopwise over HTTP.
//!
//! - `POST /v1/ask`: question, strategy, options -> the trace as JSON; with
//!   `Accept: text/event-stream` the trace's events stream as they happen (`node`, `edge`, `llm_call`,
//!   `retrieval`, `note`, `repair`, then `final` carrying the closed trace).
//! - `GET /v1/ask/stream?question=..&strategy=..`: the same events for `EventSource`.
//! - `POST /v1/chat/completions`, `GET /v1/models`: OpenAI-compatible; `model` names a strategy.
//! - `GET /v1/strategies`, `GET /healthz`, `GET /metrics` (Prometheus), `GET /openapi.json`.
//! - `GET /`: a page that draws the reasoning graph live.
//!
//! Questions run through the same strategy registry and `Ctx` as the CLI. Each holds one of
//! `max_concurrency` slots (503 + `Retry-After` when none is free) and is cut off after the timeout
//! (504); a client that disconnects cancels its question. A question left without an answer by a
//! failing backend is a 502; backend messages reach the server log, never the client.
//!
//! Slow and hostile clients: at most `max_connections` connections are open at once and at most
//! `max_connections_per_peer` from one address, a small reserve beyond them answers only `/healthz`,
//! headers and then the body must each arrive within `read_timeout`, and bodies are capped at
//! `max_body_bytes`. At startup the open-file limit is raised to fit the connections, or the
//! connection limit lowered to fit it (with a warning).

mod api;
mod descriptors;
pub mod error;
mod listen;
mod metrics;
mod middleware;
mod openai;
mod openapi_doc;
mod redact;
pub mod run;
mod state;

use std::future::Future;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

pub use error::{Result, ServeError};
pub use listen::HEALTH_RESERVE;
pub use metrics::{Metrics, ProcessUsage};
pub use run::AskRequest;
pub use state::{AppState, AppStateBuilder, Defaults, Limits};

/// Every route, with auth, logging, metrics and the body limit applied.
pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/v1/ask", post(api::ask))
        .route("/v1/ask/stream", get(api::ask_stream))
        .route("/v1/strategies", get(api::strategies))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/models", get(openai::models))
        .route("/metrics", get(api::metrics))
        .route("/openapi.json", get(api::openapi))
        // Layers run outside in: the token check first, then the body is read (within the limits).
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), middleware::read_body))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), middleware::auth));
    // The page and its assets hold no data; the page asks for the token itself when one is needed.
    let open = Router::new()
        .route("/healthz", get(api::healthz))
        .route("/", get(api::index))
        .route("/app.js", get(api::app_js))
        .route("/style.css", get(api::style_css));
    let max_body = state.limits().max_body_bytes;
    protected
        .merge(open)
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), middleware::observe))
        .fallback(|| async {
            ServeError::BadRequest {
                status: axum::http::StatusCode::NOT_FOUND,
                message: "no such endpoint; GET /openapi.json describes the API".into(),
            }
        })
        .method_not_allowed_fallback(|| async {
            ServeError::BadRequest {
                status: axum::http::StatusCode::METHOD_NOT_ALLOWED,
                message: "this endpoint does not take that method; GET /openapi.json describes the API".into(),
            }
        })
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// What a connection from the health-check reserve may ask: `/healthz`, and nothing else.
fn health_router(state: &AppState) -> Router {
    let retry_after_secs = state.limits().retry_after_secs;
    Router::new()
        .route("/healthz", get(api::healthz))
        .fallback(move || async move { ServeError::ConnectionsFull { retry_after_secs } })
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight requests finish.
/// Connections are limited to `max_connections` (`max_connections_per_peer` from one address), and
/// each must send its headers within `read_timeout` (see `listen`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    listen::serve(listener, router(state.clone()), health_router(&state), state, shutdown).await
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT: finishing in-flight requests"),
        _ = terminate => tracing::info!("SIGTERM: finishing in-flight requests"),
    }
}
