//! Bearer-token check and the access log + request metrics.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ServeError;
use crate::state::AppState;

/// Equal-length comparison whose time does not depend on where the inputs differ. The length itself
/// may leak; it says nothing useful about a random token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(token) = &state.0.token else { return next.run(req).await };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    match presented {
        Some(p) if constant_time_eq(p.as_bytes(), token.as_bytes()) => next.run(req).await,
        _ => ServeError::Unauthorized.into_response(),
    }
}

/// One structured log line and one metrics sample per request. Only the method, the route template
/// (never the query, which may hold a question) and the outcome are logged: no headers, so neither
/// the bearer token nor any API key can reach the log.
pub async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let method = req.method().clone();
    let response = next.run(req).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    state.metrics().record_request(&route, status, elapsed);
    tracing::info!(
        target: "hopwise_serve::access",
        method = %method,
        route = %route,
        status,
        latency_ms = elapsed.as_secs_f64() * 1000.0,
        in_flight = state.in_flight(),
        "request"
    );
    response
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret1"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
