//! Embeddings from any server speaking OpenAI's `POST /v1/embeddings` (OpenAI, llama.cpp's server,
//! vLLM, text-embeddings-inference, ...).

use std::time::Duration;

use async_trait::async_trait;
use hopwise_core::{BackendErrorKind, Error};
use serde::{Deserialize, Serialize};

use crate::kernels::l2_normalize;

/// Where and how to reach the server.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedderConfig {
    /// Up to and including `/v1`, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// The `model` field of each request; also this embedder's `model_id`.
    pub model: String,
    /// Name of the environment variable holding the API key; `None` sends no `Authorization` header.
    pub api_key_env: Option<String>,
    /// The vector size; `None` asks the server once in [`OpenAiEmbedder::connect`].
    pub dim: Option<usize>,
    /// Texts per request.
    pub batch_size: usize,
    /// Per request.
    pub timeout: Duration,
}

impl OpenAiEmbedderConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            dim: None,
            batch_size: 64,
            timeout: Duration::from_secs(60),
        }
    }
}

/// An [`hopwise_core::Embedder`] backed by a remote `/v1/embeddings` endpoint. Returned vectors are
/// re-normalised, since not every server normalises.
pub struct OpenAiEmbedder {
    config: OpenAiEmbedderConfig,
    dim: usize,
    endpoint: String,
    api_key: Option<String>,
    client: reqwest::Client,
}

#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    index: Option<usize>,
}

const BACKEND: &str = "openai-embeddings";

fn failure(kind: BackendErrorKind, message: impl Into<String>) -> Error {
    Error::backend(BACKEND, kind, message)
}

impl OpenAiEmbedder {
    /// Builds the client without contacting the server; `config.dim` must be set.
    pub fn new(config: OpenAiEmbedderConfig) -> hopwise_core::Result<Self> {
        let dim = config.dim.ok_or_else(|| {
            Error::Config("openai embedder: `dim` unknown; set it or use OpenAiEmbedder::connect".into())
        })?;
        Self::build(config, dim)
    }

    /// Builds the client and, if `config.dim` is unset, learns the vector size from one request.
    pub async fn connect(config: OpenAiEmbedderConfig) -> hopwise_core::Result<Self> {
        let mut embedder = Self::build(config, 0)?;
        match embedder.config.dim {
            Some(dim) => embedder.dim = dim,
            None => {
                let probe = embedder.request(&["dimension probe".to_string()]).await?;
                embedder.dim = probe.first().map(Vec::len).unwrap_or(0);
                if embedder.dim == 0 {
                    return Err(failure(BackendErrorKind::Malformed, "server returned an empty embedding"));
                }
            }
        }
        Ok(embedder)
    }

    fn build(config: OpenAiEmbedderConfig, dim: usize) -> hopwise_core::Result<Self> {
        if config.batch_size == 0 {
            return Err(Error::Config("openai embedder: batch_size must be at least 1".into()));
        }
        let api_key = match &config.api_key_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.is_empty() => Some(key),
                _ => return Err(Error::Config(format!("openai embedder: environment variable {var} is not set"))),
            },
        };
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| Error::Config(format!("openai embedder: http client: {e}")))?;
        let endpoint = format!("{}/embeddings", config.base_url.trim_end_matches('/'));
        Ok(Self { config, dim, endpoint, api_key, client })
    }

    /// One request for `texts` (at most `batch_size`): vectors in input order, normalised.
    async fn request(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        let body = EmbeddingRequest { model: &self.config.model, input: texts, encoding_format: "float" };
        let mut req = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let response = req.send().await.map_err(|e| {
            let kind = if e.is_timeout() { BackendErrorKind::Timeout } else { BackendErrorKind::Connection };
            failure(kind, format!("{}: {e}", self.endpoint))
        })?;
        let status = response.status();
        if !status.is_success() {
            let kind = match status.as_u16() {
                429 => BackendErrorKind::RateLimited,
                500..=599 => BackendErrorKind::Server,
                _ => BackendErrorKind::Rejected,
            };
            let text = response.text().await.unwrap_or_default();
            let snippet: String = text.chars().take(300).collect();
            return Err(failure(kind, format!("{}: HTTP {status}: {snippet}", self.endpoint)));
        }
        let bytes = response.bytes().await.map_err(|e| {
            let kind = if e.is_timeout() { BackendErrorKind::Timeout } else { BackendErrorKind::Connection };
            failure(kind, e.to_string())
        })?;
        let parsed: EmbeddingResponse = serde_json::from_slice(&bytes)
            .map_err(|e| failure(BackendErrorKind::Malformed, format!("response is not an embeddings list: {e}")))?;
        order_and_check(parsed.data, texts.len())
    }
}

/// Puts items in input order (by `index` when given, else as listed) and checks the count and that all
/// vectors have one length with finite values.
fn order_and_check(items: Vec<EmbeddingItem>, expected: usize) -> hopwise_core::Result<Vec<Vec<f32>>> {
    if items.len() != expected {
        return Err(failure(BackendErrorKind::Malformed, format!("{} embeddings for {expected} inputs", items.len())));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in items.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        match slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(item.embedding),
            _ => return Err(failure(BackendErrorKind::Malformed, format!("bad or repeated embedding index {index}"))),
        }
    }
    let mut vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    let width = vectors.first().map(Vec::len).unwrap_or(0);
    if vectors.iter().any(|v| v.len() != width || v.iter().any(|x| !x.is_finite())) {
        return Err(failure(BackendErrorKind::Malformed, "embeddings differ in length or hold non-finite values"));
    }
    vectors.iter_mut().for_each(|v| l2_normalize(v));
    Ok(vectors)
}

#[async_trait]
impl hopwise_core::Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.config.model
    }

    fn dim(&self) -> usize {
        self.dim
    }

    async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.config.batch_size) {
            let vectors = self.request(chunk).await?;
            if let Some(v) = vectors.iter().find(|v| v.len() != self.dim) {
                return Err(failure(
                    BackendErrorKind::Malformed,
                    format!("embedding of length {} from a model configured as {}-d", v.len(), self.dim),
                ));
            }
            out.extend(vectors);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(embedding: Vec<f32>, index: Option<usize>) -> EmbeddingItem {
        EmbeddingItem { embedding, index }
    }

    #[test]
    fn items_are_reordered_by_index_and_normalised() {
        let got = order_and_check(vec![item(vec![0.0, 2.0], Some(1)), item(vec![3.0, 4.0], Some(0))], 2).unwrap();
        assert_eq!(got, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    }

    #[test]
    fn wrong_counts_indices_and_widths_are_malformed() {
        let malformed = |r: hopwise_core::Result<Vec<Vec<f32>>>| matches!(r, Err(e) if e.backend_kind() == Some(BackendErrorKind::Malformed));
        assert!(malformed(order_and_check(vec![item(vec![1.0], None)], 2)));
        assert!(malformed(order_and_check(vec![item(vec![1.0], Some(0)), item(vec![1.0], Some(0))], 2)));
        assert!(malformed(order_and_check(vec![item(vec![1.0], Some(0)), item(vec![1.0], Some(5))], 2)));
        assert!(malformed(order_and_check(vec![item(vec![1.0], None), item(vec![1.0, 2.0], None)], 2)));
        assert!(malformed(order_and_check(vec![item(vec![f32::NAN], None)], 1)));
    }
}
