//! The language-model contract.
//!
//! One method, `chat`, because every strategy needs the same thing: messages in, `n` completions out.
//! `n` is part of the request (not a loop in the caller) so a backend can share one prompt evaluation
//! across samples: the OpenAI API takes `n`, the in-process runtime decodes several sequences from one
//! evaluated prompt. That is where self-consistency and uncertainty estimation win or lose on cost.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: Role::System, content: content.into() }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: Role::User, content: content.into() }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: content.into() }
    }
}

/// Sampling parameters. Defaults follow ToQD: temperature 0.1, top_p 0.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenParams {
    pub temperature: f32,
    pub top_p: f32,
    pub max_tokens: u32,
    pub stop: Vec<String>,
    pub seed: Option<u64>,
    /// Number of completions wanted for the same prompt.
    pub n: u32,
    /// A GBNF grammar constraining the output, where the backend supports it.
    /// Backends that cannot honour it ignore it and report `grammar_used = false`.
    pub grammar: Option<String>,
    /// The output's JSON Schema, for servers that constrain output with a response format (the
    /// same structure as `grammar`, which backends taking GBNF use instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<serde_json::Value>,
    /// Ask for per-token log-probabilities where the backend offers them.
    pub logprobs: bool,
    /// Prompt-lookup decoding (drafts copied from the prompt, verified in one batched step) where the
    /// backend supports it: `None` leaves it to the backend's default, `Some(false)` turns it off for a
    /// call whose output does not copy from its prompt. Outputs are the same either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_lookup: Option<bool>,
}

impl Default for GenParams {
    fn default() -> Self {
        Self {
            temperature: 0.1,
            top_p: 0.1,
            max_tokens: 256,
            stop: Vec::new(),
            seed: None,
            n: 1,
            grammar: None,
            response_schema: None,
            logprobs: false,
            prompt_lookup: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub params: GenParams,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>, params: GenParams) -> Self {
        Self { messages, params }
    }

    /// A single user turn with default parameters.
    pub fn user(prompt: impl Into<String>) -> Self {
        Self { messages: vec![ChatMessage::user(prompt)], params: GenParams::default() }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the backend's prefix cache instead of being evaluated again
    /// (included in `prompt_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self { prompt_tokens, completion_tokens, cached_prompt_tokens: 0 }
    }
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Where one call's time went inside the backend, in milliseconds: waiting for the model, evaluating
/// the prompt, generating. Backends that cannot tell leave it out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CallTiming {
    pub queue_ms: u64,
    pub prompt_ms: u64,
    pub decode_ms: u64,
}

/// One sampled completion. When a request asks for `logprobs` and the backend reports them,
/// `top_logprobs` holds the candidate tokens for the first generated token with their
/// log-probabilities (used by the NLI judge), and `token_logprobs` every generated token with the
/// log-probability it was chosen at (used by FLARE's confidence gate).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_logprobs: Vec<(String, f32)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_logprobs: Vec<(String, f32)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub choices: Vec<Completion>,
    pub usage: Usage,
    #[serde(default)]
    pub grammar_used: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<CallTiming>,
}

impl ChatResponse {
    /// The first completion's text, or an empty string when the backend returned none.
    pub fn text(&self) -> &str {
        self.choices.first().map(|c| c.text.as_str()).unwrap_or("")
    }
}

/// A chat model. Implementations must be safe to call concurrently from parallel graph nodes.
#[async_trait]
pub trait Llm: Send + Sync {
    /// A short name for traces and errors, e.g. `openai:gpt-4o-mini` or `local:qwen2.5-1.5b`.
    fn name(&self) -> &str;

    /// Everything about this backend that can change its reply to the same request: backend kind,
    /// server address, model, the model file's identity, sampler settings. Call caches and evaluation
    /// fingerprints key on it, so two servers that share a model name never share results.
    /// Defaults to [`Llm::name`], which suffices only for backends whose name says all of that.
    fn identity(&self) -> String {
        self.name().to_string()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse>;
}

/// A model as one question sees it. Every call goes into that question's trace and stats and counts
/// against its budgets, whoever makes it: the strategy, the NLI judge, the query rewriter. Helpers
/// that call the model on a question's behalf take this rather than a bare [`Llm`], so no call can
/// bypass the meter.
#[async_trait]
pub trait MeteredModel: Send + Sync {
    /// The backend's name, for traces and messages.
    fn name(&self) -> &str;

    /// Sends `request` as the step `purpose` (`decompose`, `nli_judge`, `query_rewrite`, …) of graph
    /// node `node`. Fails with [`Error::Budget`](crate::Error::Budget) once the question's call budget
    /// is spent, and at once after the backend failed in a way that will not heal within the question.
    async fn send(&self, purpose: &str, node: Option<&str>, request: ChatRequest) -> Result<ChatResponse>;
}

#[async_trait]
impl<T: Llm + ?Sized> Llm for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn identity(&self) -> String {
        (**self).identity()
    }
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        (**self).chat(request).await
    }
}
