//! Bearer-token check, the request-body read timeout, and the access log + request metrics.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
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

/// The credentials of an `Authorization: Bearer <token>` header. The scheme is case-insensitive
/// (RFC 9110, 11.1); surrounding whitespace is not part of the token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(token) = &state.0.token else { return next.run(req).await };
    let presented = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token);
    match presented {
        Some(p) if constant_time_eq(p.as_bytes(), token.as_bytes()) => next.run(req).await,
        _ => ServeError::Unauthorized.into_response(),
    }
}

/// Reads the whole request body within `read_timeout` and at most `max_body_bytes` of it, before the
/// handler runs: a client that sends its body a byte at a time gets 408 instead of holding a
/// connection and a task for as long as it likes. Runs after the token check, so an unauthorised
/// client never gets a body buffered.
pub async fn read_body(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limits = state.limits();
    let (parts, body) = req.into_parts();
    let read = axum::body::to_bytes(body, limits.max_body_bytes);
    let bytes = match tokio::time::timeout(limits.read_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            let too_large =
                std::error::Error::source(&e).is_some_and(|cause| cause.is::<http_body_util::LengthLimitError>());
            let (status, message) = if too_large {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body is larger than {} bytes", limits.max_body_bytes),
                )
            } else {
                (StatusCode::BAD_REQUEST, "the request body could not be read".to_string())
            };
            return ServeError::BadRequest { status, message }.into_response();
        }
        Err(_) => {
            let message = format!("the request body did not arrive within {} s", limits.read_timeout.as_secs_f64());
            return ServeError::BadRequest { status: StatusCode::REQUEST_TIMEOUT, message }.into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
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
    use super::{bearer_token, constant_time_eq};

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer t0k", "bearer t0k", "BEARER t0k", "  Bearer   t0k  "] {
            assert_eq!(bearer_token(value), Some("t0k"), "{value:?}");
        }
        assert_eq!(bearer_token("Basic t0k"), None);
        assert_eq!(bearer_token("Bearert0k"), None);
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret1"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
