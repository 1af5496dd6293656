//! A client for OpenAI-compatible `POST {base_url}/chat/completions` servers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hopwise_core::{BackendErrorKind, ChatRequest, ChatResponse, Error, Llm, Result};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::retry::{parse_retry_after, Backoff};
use crate::wire::{parse_response, WireRequest};

/// Responses larger than this are refused rather than buffered (a misbehaving server must not exhaust
/// memory).
const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// How much of an error body goes into an error message.
const SNIPPET_CHARS: usize = 200;

/// Configuration of one OpenAI-compatible backend, e.g. the `[llm.NAME]` table of `hopwise.toml`.
/// Every field has a default, so a table needs only `base_url` and `model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiConfig {
    /// The API root, e.g. `http://127.0.0.1:8080/v1` or `https://api.openai.com/v1` (a trailing slash is
    /// fine); requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model name sent with every request. llama.cpp's server accepts any value.
    pub model: String,
    /// Name of the environment variable holding the API key, sent as `Authorization: Bearer …`. Read once
    /// at construction; the key itself never appears in config files, logs or error messages.
    pub api_key_env: Option<String>,
    /// Prefix of the backend name in traces and errors (`{name}:{model}`); default `openai`.
    pub name: Option<String>,
    /// Limit for one HTTP attempt, from sending the request to the end of the response body.
    pub timeout_secs: f64,
    pub connect_timeout_secs: f64,
    /// Retries after the first attempt on 429, 5xx, connection errors and timeouts. An unreadable
    /// response is retried at most once; other 4xx never.
    pub max_retries: u32,
    /// Ceiling of the first retry's jittered delay; it doubles per retry up to `retry_max_ms`.
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    /// A server's `Retry-After` is honoured up to this many seconds.
    pub retry_after_max_secs: f64,
    /// Requests in flight to this backend at once, across all callers sharing this client.
    pub max_in_flight: usize,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Send `GenParams::grammar` as llama.cpp's `grammar` field. Off by default: other servers reject or
    /// ignore unknown fields, and the response reports `grammar_used` accordingly.
    pub send_grammar: bool,
    /// Send `GenParams::response_schema` as OpenAI's `response_format` (a JSON Schema the server
    /// constrains the output to). Off by default: servers without structured output reject it.
    pub send_response_format: bool,
    /// Alternatives per token asked for when a request wants logprobs (OpenAI allows up to 20).
    pub top_logprobs: u32,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: String::new(),
            api_key_env: None,
            name: None,
            timeout_secs: 120.0,
            connect_timeout_secs: 10.0,
            max_retries: 3,
            retry_base_ms: 500,
            retry_max_ms: 20_000,
            retry_after_max_secs: 60.0,
            max_in_flight: 4,
            headers: BTreeMap::new(),
            send_grammar: false,
            send_response_format: false,
            top_logprobs: 5,
        }
    }
}

impl OpenAiConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), model: model.into(), ..Self::default() }
    }
}

/// An OpenAI-compatible chat backend. Cheap to share behind an `Arc`; the concurrency limit is per
/// instance, so share one instance per server.
pub struct OpenAiLlm {
    name: String,
    config: OpenAiConfig,
    endpoint: Url,
    /// The endpoint without credentials or query, for messages.
    shown_endpoint: String,
    client: reqwest::Client,
    /// Kept only to scrub it from anything a server echoes back.
    api_key: Option<String>,
    limiter: Arc<Semaphore>,
    backoff: Backoff,
    /// Cleared once the server has refused `n > 1` (recent llama.cpp servers answer 400); from then on
    /// samples are requested one by one.
    native_n: AtomicBool,
}

impl std::fmt::Debug for OpenAiLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiLlm")
            .field("name", &self.name)
            .field("endpoint", &self.shown_endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// One failed HTTP attempt.
struct Failure {
    kind: BackendErrorKind,
    message: String,
    retry_after: Option<Duration>,
}

impl Failure {
    fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), retry_after: None }
    }
}

impl OpenAiLlm {
    /// Builds the client, reading the API key from the environment variable named by `api_key_env`.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let api_key = match config.api_key_env.as_deref() {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.trim().is_empty() => Some(key.trim().to_string()),
                Ok(_) => return Err(Error::Config(format!("environment variable `{var}` (api_key_env) is empty"))),
                Err(_) => return Err(Error::Config(format!("environment variable `{var}` (api_key_env) is not set"))),
            },
        };
        Self::with_api_key(config, api_key)
    }

    /// Builds the client with an explicit key (or none), ignoring `api_key_env`.
    pub fn with_api_key(config: OpenAiConfig, api_key: Option<String>) -> Result<Self> {
        if config.model.trim().is_empty() {
            return Err(Error::Config("openai backend: `model` must be set".into()));
        }
        let endpoint = endpoint_url(&config.base_url, "chat/completions")?;
        let shown_endpoint = shown_url(&endpoint);
        let timeout = positive_secs(config.timeout_secs, "timeout_secs")?;
        let connect_timeout = positive_secs(config.connect_timeout_secs, "connect_timeout_secs")?;
        let retry_after_cap = positive_secs(config.retry_after_max_secs, "retry_after_max_secs")?;
        if config.max_in_flight == 0 || config.max_in_flight > Semaphore::MAX_PERMITS {
            return Err(Error::Config(format!(
                "openai backend: `max_in_flight` must be between 1 and {}",
                Semaphore::MAX_PERMITS
            )));
        }

        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::Config(format!("openai backend: invalid header name `{name}`")))?;
            let header_value = HeaderValue::from_str(value)
                .map_err(|_| Error::Config(format!("openai backend: invalid value for header `{name}`")))?;
            headers.insert(header_name, header_value);
        }
        if let Some(key) = &api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| Error::Config("the API key contains characters not allowed in a header".into()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(timeout)
            .connect_timeout(connect_timeout)
            .build()
            .map_err(|e| Error::Config(format!("openai backend: cannot build the HTTP client: {e}")))?;

        let name = format!("{}:{}", config.name.as_deref().unwrap_or("openai"), config.model);
        Ok(Self {
            name,
            endpoint,
            shown_endpoint,
            client,
            api_key,
            limiter: Arc::new(Semaphore::new(config.max_in_flight)),
            backoff: Backoff {
                base: Duration::from_millis(config.retry_base_ms),
                cap: Duration::from_millis(config.retry_max_ms.max(config.retry_base_ms)),
                retry_after_cap,
            },
            native_n: AtomicBool::new(true),
            config,
        })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Asks `GET {base_url}/models` for the served model ids: a cheap check that the server is up and
    /// the key is accepted, for a clear message before a long run.
    pub async fn list_models(&self) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct Models {
            data: Vec<Model>,
        }
        #[derive(Deserialize)]
        struct Model {
            id: String,
        }
        let url = endpoint_url(&self.config.base_url, "models")?;
        let shown = shown_url(&url);
        let fail = |kind, message: String| self.error(kind, format!("GET {shown}: {message}"));
        let response = self.client.get(url.clone()).send().await.map_err(|e| {
            let f = transport_failure(&e);
            fail(f.kind, f.message)
        })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| {
            let f = transport_failure(&e);
            fail(f.kind, f.message)
        })?;
        if !status.is_success() {
            return Err(fail(status_kind(status), format!("HTTP {status}: {}", snippet(&body))));
        }
        let models: Models = serde_json::from_slice(&body)
            .map_err(|_| fail(BackendErrorKind::Malformed, format!("not a model list: {}", snippet(&body))))?;
        Ok(models.data.into_iter().map(|m| m.id).collect())
    }

    fn error(&self, kind: BackendErrorKind, message: String) -> Error {
        let message = match &self.api_key {
            Some(key) => hopwise_core::text::redact_secrets(&message, &[key.as_str()]),
            None => message,
        };
        Error::backend(self.name.clone(), kind, message)
    }

    fn body(&self, request: &ChatRequest, n: Option<u32>, seed: Option<u64>) -> Result<Vec<u8>> {
        let params = &request.params;
        let wire = WireRequest {
            model: &self.config.model,
            messages: &request.messages,
            temperature: params.temperature,
            top_p: params.top_p,
            max_tokens: params.max_tokens,
            stop: &params.stop,
            seed,
            n,
            logprobs: params.logprobs,
            top_logprobs: params.logprobs.then_some(self.config.top_logprobs),
            grammar: self.grammar(request),
            response_format: self.response_format(request),
        };
        Ok(serde_json::to_vec(&wire)?)
    }

    fn response_format(&self, request: &ChatRequest) -> Option<serde_json::Value> {
        let schema = request.params.response_schema.as_ref().filter(|_| self.config.send_response_format)?;
        Some(serde_json::json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}))
    }

    fn grammar<'a>(&self, request: &'a ChatRequest) -> Option<&'a str> {
        if self.config.send_grammar {
            request.params.grammar.as_deref()
        } else {
            None
        }
    }

    /// Sends one request body, retrying transient failures.
    async fn send(&self, body: Vec<u8>) -> Result<ChatResponse> {
        let mut malformed_retried = false;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let outcome = {
                let _permit = self
                    .limiter
                    .acquire()
                    .await
                    .map_err(|_| self.error(BackendErrorKind::Connection, "client is shutting down".into()))?;
                self.attempt(body.clone()).await
            };
            let failure = match outcome {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            let retryable =
                failure.kind.is_transient() || (failure.kind == BackendErrorKind::Malformed && !malformed_retried);
            if failure.kind == BackendErrorKind::Malformed {
                malformed_retried = true;
            }
            if !retryable || attempt > self.config.max_retries {
                let tries = if attempt == 1 { "1 attempt".to_string() } else { format!("{attempt} attempts") };
                return Err(self.error(
                    failure.kind,
                    format!("POST {} failed after {tries}: {}", self.shown_endpoint, failure.message),
                ));
            }
            let delay = self.backoff.delay(attempt - 1, failure.retry_after);
            tracing::warn!(
                backend = %self.name,
                kind = ?failure.kind,
                attempt,
                delay_ms = delay.as_millis() as u64,
                "retrying after: {}",
                self.error(failure.kind, failure.message)
            );
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(&self, body: Vec<u8>) -> std::result::Result<ChatResponse, Failure> {
        let mut response = self
            .client
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| transport_failure(&e))?;
        let status = response.status();
        let retry_after = response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| transport_failure(&e))? {
            if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(Failure::new(
                    BackendErrorKind::Malformed,
                    format!("response larger than {} MiB", MAX_RESPONSE_BYTES / (1024 * 1024)),
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(Failure {
                kind: failure_kind(status, &bytes),
                message: format!("HTTP {status}: {}", snippet(&bytes)),
                retry_after,
            });
        }
        parse_response(&bytes)
            .map_err(|reason| Failure::new(BackendErrorKind::Malformed, format!("{reason}; body: {}", snippet(&bytes))))
    }

    /// Samples `from..to` requested one at a time (concurrently, within the in-flight limit). Sample `i`
    /// gets seed `seed + i`, so seeded samples differ from each other yet stay reproducible.
    async fn sample_separately(&self, request: &ChatRequest, from: u32, to: u32) -> Result<ChatResponse> {
        let seed = request.params.seed;
        let calls = (from..to).map(|i| {
            let body = self.body(request, None, seed.map(|s| s.wrapping_add(u64::from(i))));
            async move { self.send(body?).await }
        });
        let responses = futures::future::try_join_all(calls).await?;
        let mut merged = ChatResponse::default();
        for response in responses {
            merged.choices.extend(response.choices.into_iter().take(1));
            merged.usage.prompt_tokens += response.usage.prompt_tokens;
            merged.usage.completion_tokens += response.usage.completion_tokens;
            merged.usage.cached_prompt_tokens += response.usage.cached_prompt_tokens;
        }
        Ok(merged)
    }
}

#[async_trait]
impl Llm for OpenAiLlm {
    fn name(&self) -> &str {
        &self.name
    }

    /// The server's endpoint (without credentials), the model, and the request options that reach the
    /// server: the same model name on two servers is two identities.
    fn identity(&self) -> String {
        format!(
            "openai endpoint={} model={} grammar={} top_logprobs={}",
            self.shown_endpoint, self.config.model, self.config.send_grammar, self.config.top_logprobs
        )
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let n = request.params.n.max(1);
        let mut response = if n == 1 || !self.native_n.load(Ordering::Relaxed) {
            self.sample_separately(request, 0, n).await?
        } else {
            match self.send(self.body(request, Some(n), request.params.seed)?).await {
                Ok(response) => response,
                Err(refused) if refused.backend_kind() == Some(BackendErrorKind::Rejected) => {
                    // Possibly a server that refuses `n > 1`: if single samples work, remember that.
                    let single = self.sample_separately(request, 0, n).await.map_err(|e| {
                        if e.backend_kind() == Some(BackendErrorKind::Rejected) {
                            refused
                        } else {
                            e
                        }
                    })?;
                    self.native_n.store(false, Ordering::Relaxed);
                    tracing::warn!(backend = %self.name, "server refused n > 1; requesting samples one by one");
                    single
                }
                Err(e) => return Err(e),
            }
        };
        // Servers that ignore `n` (older llama.cpp) return fewer choices: top up so callers get `n`.
        let got = u32::try_from(response.choices.len()).unwrap_or(u32::MAX);
        if got < n {
            let extra = self.sample_separately(request, got, n).await?;
            response.choices.extend(extra.choices);
            response.usage.prompt_tokens += extra.usage.prompt_tokens;
            response.usage.completion_tokens += extra.usage.completion_tokens;
            response.usage.cached_prompt_tokens += extra.usage.cached_prompt_tokens;
        }
        response.choices.truncate(n as usize);
        response.grammar_used = self.grammar(request).is_some() || self.response_format(request).is_some();
        Ok(response)
    }
}

/// `{base_url}/{path}`: the path is appended to the base URL's path, and the base URL's query (some
/// gateways want `?api-version=…`) is kept, so `http://h/v1?x=1` posts to `http://h/v1/chat/completions?x=1`.
fn endpoint_url(base_url: &str, path: &str) -> Result<Url> {
    let invalid =
        |why: String| Error::Config(format!("openai backend: invalid base_url `{}`: {why}", redact_url(base_url)));
    let mut url = Url::parse(base_url.trim()).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Config(format!(
            "openai backend: base_url `{}` must start with http:// or https://",
            redact_url(base_url)
        )));
    }
    url.set_fragment(None);
    let base_path = url.path().trim_end_matches('/').to_string();
    url.set_path(&base_path);
    url.path_segments_mut()
        .map_err(|()| invalid("it cannot have a path".into()))?
        .pop_if_empty()
        .extend(path.split('/'));
    Ok(url)
}

/// A URL fit for messages: no user, password, query or fragment.
fn shown_url(url: &Url) -> String {
    let mut shown = url.clone();
    // Both fail only for URLs that cannot have credentials, which then have none to hide.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// A base URL as it may appear in messages and logs: without user, password, query or fragment
/// (which may hold credentials). An unparseable one loses everything up to its last `@`, and its query.
pub fn redact_url(base_url: &str) -> String {
    let trimmed = base_url.trim();
    if let Some(url) = Url::parse(trimmed).ok().filter(Url::has_host) {
        return shown_url(&url);
    }
    let without_query = trimmed.split(['?', '#']).next().unwrap_or("");
    match without_query.rsplit_once('@') {
        Some((_, host)) => format!("…@{host}"),
        None => without_query.to_string(),
    }
}

fn positive_secs(secs: f64, field: &str) -> Result<Duration> {
    if secs.is_finite() && secs > 0.0 && secs < 1e9 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(Error::Config(format!("openai backend: `{field}` must be a positive number of seconds")))
    }
}

/// The kind of a non-2xx answer. A prompt longer than the context window is `Unsupported` rather than
/// `Rejected`, so callers can tell "shorten the prompt" from "fix the request"; servers word it
/// differently (llama.cpp: "exceeds the available context size"; OpenAI and vLLM: "maximum context
/// length").
fn failure_kind(status: StatusCode, body: &[u8]) -> BackendErrorKind {
    let kind = status_kind(status);
    if kind == BackendErrorKind::Rejected {
        let text = String::from_utf8_lossy(body).to_lowercase();
        let too_long = text.contains("context_length_exceeded")
            || text.contains("maximum context length")
            || (text.contains("context") && text.contains("exceed"));
        if too_long {
            return BackendErrorKind::Unsupported;
        }
    }
    kind
}

fn status_kind(status: StatusCode) -> BackendErrorKind {
    match status.as_u16() {
        429 => BackendErrorKind::RateLimited,
        408 => BackendErrorKind::Timeout,
        s if s >= 500 => BackendErrorKind::Server,
        _ => BackendErrorKind::Rejected,
    }
}

fn transport_failure(error: &reqwest::Error) -> Failure {
    let kind = if error.is_timeout() { BackendErrorKind::Timeout } else { BackendErrorKind::Connection };
    // The chain of causes says what actually happened ("Connection refused", "operation timed out").
    let mut message = if error.is_timeout() { "timed out".to_string() } else { "connection failed".to_string() };
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        // reqwest's own Display may include the URL; the request URL is reported separately, cleaned.
        if !text.contains("://") && !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    Failure::new(kind, message)
}

/// The start of a body, on one line, for error messages. Control characters (terminal escape
/// sequences included) become U+FFFD: a server's error body must not drive the user's terminal.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    if one_line.is_empty() {
        return "(empty body)".into();
    }
    match one_line.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_tolerates_trailing_slashes_and_rejects_other_schemes() {
        assert_eq!(
            endpoint_url("http://127.0.0.1:8080/v1/", "chat/completions").unwrap().as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(endpoint_url("http://h/v1", "chat/completions").unwrap().as_str(), "http://h/v1/chat/completions");
        assert!(matches!(endpoint_url("ftp://h/v1", "models"), Err(Error::Config(_))));
        assert!(matches!(endpoint_url("not a url", "models"), Err(Error::Config(_))));
    }

    #[test]
    fn shown_urls_carry_no_credentials() {
        let url = Url::parse("https://user:secret@host/v1/chat/completions?key=secret2").unwrap();
        let shown = shown_url(&url);
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("host/v1/chat/completions"));
        let err = endpoint_url("http://user:secret@[bad/v1", "models").unwrap_err().to_string();
        assert!(!err.contains("secret"), "{err}");
        for raw in ["http://u:pw-secret@h:1/v1?key=secret2", "http://u:pw-secret@[bad/v1?key=secret2", " u:secret@h "] {
            let shown = redact_url(raw);
            assert!(!shown.contains("secret"), "{raw} -> {shown}");
        }
        assert_eq!(redact_url("http://h:1/v1"), "http://h:1/v1");
    }

    #[test]
    fn a_query_in_the_base_url_stays_a_query() {
        let url = endpoint_url("http://h:1/v1?api-version=2024-06-01#frag", "chat/completions").unwrap();
        assert_eq!(url.as_str(), "http://h:1/v1/chat/completions?api-version=2024-06-01");
        let root = endpoint_url("http://h:1/?k=v", "models").unwrap();
        assert_eq!(root.as_str(), "http://h:1/models?k=v");
        assert_eq!(endpoint_url("http://h:1/v1//", "models").unwrap().as_str(), "http://h:1/v1/models");
    }

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(status_kind(StatusCode::TOO_MANY_REQUESTS), BackendErrorKind::RateLimited);
        assert_eq!(status_kind(StatusCode::BAD_GATEWAY), BackendErrorKind::Server);
        assert_eq!(status_kind(StatusCode::REQUEST_TIMEOUT), BackendErrorKind::Timeout);
        assert_eq!(status_kind(StatusCode::UNAUTHORIZED), BackendErrorKind::Rejected);
        assert_eq!(status_kind(StatusCode::BAD_REQUEST), BackendErrorKind::Rejected);
    }

    #[test]
    fn context_overflow_is_unsupported_not_rejected() {
        let llama = br#"{"error":{"code":400,"message":"request (3031 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error"}}"#;
        let openai = br#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#;
        for body in [&llama[..], &openai[..]] {
            assert_eq!(failure_kind(StatusCode::BAD_REQUEST, body), BackendErrorKind::Unsupported);
        }
        let other = br#"{"error":{"message":"Expected 'messages' to be an array"}}"#;
        assert_eq!(failure_kind(StatusCode::BAD_REQUEST, other), BackendErrorKind::Rejected);
        assert_eq!(failure_kind(StatusCode::BAD_GATEWAY, llama), BackendErrorKind::Server);
    }

    /// A long key echoed by a proxy straddles the snippet's cut: what survives of it is redacted too.
    #[test]
    fn a_key_cut_by_the_snippet_is_still_redacted() {
        let key = format!("sk-proj-{}", "Ab3".repeat(53));
        let llm = OpenAiLlm::with_api_key(OpenAiConfig::new("http://127.0.0.1:9/v1", "m"), Some(key.clone()))
            .expect("client");
        let body = format!("{{\"error\": \"invalid key {key}\"}}");
        let shown = llm.error(BackendErrorKind::Rejected, format!("HTTP 401: {}", snippet(body.as_bytes())));
        let text = shown.to_string();
        assert!(text.contains("<redacted>"), "{text}");
        for piece in key.as_bytes().windows(hopwise_core::text::MIN_SECRET_PIECE) {
            let piece = std::str::from_utf8(piece).expect("ascii key");
            assert!(!text.contains(piece), "a piece of the key leaked: {text}");
        }
    }

    #[test]
    fn snippets_are_short_single_lines() {
        assert_eq!(snippet(b"  a\n b  "), "a b");
        assert_eq!(snippet(b""), "(empty body)");
        let long = "é".repeat(500);
        let s = snippet(long.as_bytes());
        assert_eq!(s.chars().count(), SNIPPET_CHARS + 1);
        assert_eq!(snippet(&[0xff, 0xfe, b'x']), "\u{fffd}\u{fffd}x");
        assert_eq!(snippet(b"\x1b[31mred\x1b[0m \x07bell"), "\u{fffd}[31mred\u{fffd}[0m \u{fffd}bell");
    }

    #[test]
    fn config_is_validated() {
        let ok = OpenAiConfig::new("http://127.0.0.1:1/v1", "m");
        assert!(OpenAiLlm::with_api_key(ok.clone(), None).is_ok());
        for bad in [
            OpenAiConfig { model: " ".into(), ..ok.clone() },
            OpenAiConfig { timeout_secs: 0.0, ..ok.clone() },
            OpenAiConfig { timeout_secs: f64::NAN, ..ok.clone() },
            OpenAiConfig { max_in_flight: 0, ..ok.clone() },
            OpenAiConfig { max_in_flight: usize::MAX, ..ok.clone() },
            OpenAiConfig { headers: [("bad header".to_string(), "v".to_string())].into(), ..ok.clone() },
            OpenAiConfig { api_key_env: Some("HOPWISE_TEST_SURELY_UNSET_VAR".into()), ..ok.clone() },
        ] {
            assert!(matches!(OpenAiLlm::new(bad), Err(Error::Config(_))));
        }
    }

    #[test]
    fn config_reads_from_toml_with_defaults() {
        let config: OpenAiConfig =
            toml::from_str("base_url = \"http://x/v1\"\nmodel = \"qwen\"\napi_key_env = \"KEY\"\nmax_in_flight = 8")
                .unwrap();
        assert_eq!(config.model, "qwen");
        assert_eq!(config.max_in_flight, 8);
        assert_eq!(config.max_retries, OpenAiConfig::default().max_retries);
        assert!(toml::from_str::<OpenAiConfig>("model = \"m\"\nmodle = 1").is_err());
    }

    #[test]
    fn config_nests_in_a_kind_tagged_table() {
        // How the CLI's `[llm.NAME] kind = "openai" …` tables can deserialize into this config.
        #[derive(Debug, Deserialize)]
        #[serde(tag = "kind", rename_all = "lowercase")]
        enum LlmConfig {
            Openai(OpenAiConfig),
        }
        let table = "kind = \"openai\"\nbase_url = \"http://x/v1\"\nmodel = \"m\"\napi_key_env = \"K\"";
        let LlmConfig::Openai(config) = toml::from_str::<LlmConfig>(table).unwrap();
        assert_eq!(config.api_key_env.as_deref(), Some("K"));
        assert!(toml::from_str::<LlmConfig>(&format!("{table}\ntimeout = 3")).is_err());
    }

    #[test]
    fn debug_output_hides_the_key() {
        let llm =
            OpenAiLlm::with_api_key(OpenAiConfig::new("http://h/v1", "m"), Some("sk-very-secret".into())).unwrap();
        assert!(!format!("{llm:?}").contains("sk-very-secret"));
    }
}
