//! One small HTTP layer for all engines: per-attempt timeout, bounded retries with jittered backoff
//! on connection errors, timeouts, 429 and 5xx, and errors that name the engine and the request.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::Method;
use serde_json::Value;

use crate::error::{RemoteError, Result};

/// Timeouts and retry bounds shared by every adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpOptions {
    /// Limit for one attempt, from sending the request to the end of the reply.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Retries after the first attempt (transient failures only).
    pub retries: u32,
    /// Ceiling of the first retry's delay; doubles per retry, capped at 5 s.
    pub retry_base: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retries: 3,
            retry_base: Duration::from_millis(200),
        }
    }
}

/// Replies larger than this are refused: a misbehaving server must not exhaust memory.
const MAX_REPLY_BYTES: usize = 256 * 1024 * 1024;
/// How much of an error body goes into a message.
const SNIPPET: usize = 300;

#[derive(Debug, Clone)]
pub(crate) struct Http {
    engine: &'static str,
    base: String,
    client: reqwest::Client,
    opts: HttpOptions,
}

/// A request body: its bytes and content type.
pub(crate) enum Body {
    Json(Value),
    Ndjson(String),
}

impl Http {
    pub fn new(engine: &'static str, base_url: &str, headers: &[(&str, String)], opts: HttpOptions) -> Result<Self> {
        let base = base_url.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(RemoteError::Config(format!("{engine} URL `{base_url}` must start with http:// or https://")));
        }
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| RemoteError::Config(format!("{engine}: header name `{name}`: {e}")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| RemoteError::Config(format!("{engine}: the value of header `{name}` is not valid")))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .default_headers(map)
            .timeout(opts.timeout)
            .connect_timeout(opts.connect_timeout)
            .build()
            .map_err(|e| RemoteError::Config(format!("{engine}: HTTP client: {e}")))?;
        Ok(Self { engine, base, client, opts })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends a request and returns the status and body of the first non-transient reply. Statuses in
    /// `pass` (besides 2xx) come back as `Ok` for the caller to interpret (e.g. 404 on a lookup).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Body>,
        what: &str,
        pass: &[u16],
    ) -> Result<(u16, String)> {
        let mut attempt = 0u32;
        loop {
            let result = self.attempt(method.clone(), path, body, what, pass).await;
            match result {
                Err(e) if e.is_transient() && attempt < self.opts.retries => {
                    let ceiling =
                        self.opts.retry_base.saturating_mul(1u32 << attempt.min(10)).min(Duration::from_secs(5));
                    tokio::time::sleep(jitter(ceiling)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn attempt(
        &self,
        method: Method,
        path: &str,
        body: Option<&Body>,
        what: &str,
        pass: &[u16],
    ) -> Result<(u16, String)> {
        let url = format!("{}{}", self.base, path);
        let mut request = self.client.request(method, &url);
        match body {
            Some(Body::Json(v)) => request = request.json(v),
            Some(Body::Ndjson(s)) => request = request.header(CONTENT_TYPE, "text/plain").body(s.clone()),
            None => {}
        }
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| self.transport(e))?;
        if bytes.len() > MAX_REPLY_BYTES {
            return Err(RemoteError::Malformed {
                engine: self.engine,
                what: what.into(),
                message: format!("reply of {} bytes exceeds the limit", bytes.len()),
            });
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if (200..300).contains(&status) || pass.contains(&status) {
            Ok((status, text))
        } else {
            Err(RemoteError::Status { engine: self.engine, status, what: what.into(), body: snippet(&text) })
        }
    }

    /// A JSON request whose 2xx reply is JSON.
    pub async fn json(&self, method: Method, path: &str, body: Option<Value>, what: &str) -> Result<Value> {
        let body = body.map(Body::Json);
        let (_, text) = self.send(method, path, body.as_ref(), what, &[]).await?;
        self.parse(&text, what)
    }

    pub fn parse(&self, text: &str, what: &str) -> Result<Value> {
        serde_json::from_str(text).map_err(|e| RemoteError::Malformed {
            engine: self.engine,
            what: what.into(),
            message: format!("{e}; reply starts with {:?}", snippet(text)),
        })
    }

    pub fn malformed(&self, what: &str, message: impl Into<String>) -> RemoteError {
        RemoteError::Malformed { engine: self.engine, what: what.into(), message: message.into() }
    }

    fn transport(&self, e: reqwest::Error) -> RemoteError {
        if e.is_timeout() {
            RemoteError::Timeout { engine: self.engine, url: self.base.clone(), secs: self.opts.timeout.as_secs_f64() }
        } else {
            // The innermost cause ("Connection refused") is what a user can act on.
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message = s.to_string();
                source = s.source();
            }
            RemoteError::Unreachable { engine: self.engine, url: self.base.clone(), message }
        }
    }
}

fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(SNIPPET) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// Uniform in `[0, ceiling]`, so clients that failed together do not come back together. The
/// sub-second clock is random enough for spreading retries and needs no RNG dependency.
fn jitter(ceiling: Duration) -> Duration {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    ceiling.mul_f64(f64::from(nanos % 1_000_000) / 1_000_000.0)
}

/// Percent-encodes one URL path segment or query value.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_reserved_characters() {
        assert_eq!(encode("a/1 b#c"), "a%2F1%20b%23c");
        assert_eq!(encode("é"), "%C3%A9");
    }

    #[test]
    fn rejects_urls_without_a_scheme() {
        assert!(matches!(Http::new("x", "localhost:1", &[], HttpOptions::default()), Err(RemoteError::Config(_))));
    }

    #[test]
    fn snippets_cut_on_char_boundaries() {
        let s = "é".repeat(400);
        assert!(snippet(&s).ends_with('…'));
    }
}
