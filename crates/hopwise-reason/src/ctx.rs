//! The per-question context. Strategies reach every backend through it, so every model call and
//! retrieval round is timed, counted and written to the trace in one place (the call meter).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use hopwise_core::text::word_count;
use hopwise_core::{
    BackendErrorKind, ChatMessage, ChatRequest, ChatResponse, Embedder, Error, EventKind, GenParams, Llm, Nli, Passage,
    Prompts, Recorder, Retriever,
};
use serde::{Deserialize, Serialize};

use crate::error::{ReasonError, Result};

/// Limits on one question's work. Exceeding one never fails the question: the strategy answers
/// best-effort from what it has and the trace says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Graph expansions (node decompositions) allowed per question (ToQD's `r_max`).
    pub r_max: u32,
    /// Deepest nesting of child graphs / HGOT layers.
    pub max_depth: u32,
    /// Model calls allowed per question.
    pub max_llm_calls: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self { r_max: 6, max_depth: 3, max_llm_calls: 200 }
    }
}

/// Everything a strategy needs to answer one question.
pub struct Ctx {
    pub llm: Arc<dyn Llm>,
    pub retriever: Option<Arc<dyn Retriever>>,
    pub nli: Option<Arc<dyn Nli>>,
    pub embedder: Option<Arc<dyn Embedder>>,
    pub prompts: Arc<Prompts>,
    pub rec: Recorder,
    pub budget: Budget,
    /// Passages per retrieval round.
    pub k: usize,
    /// Sampling defaults for single-answer calls.
    pub params: GenParams,
    expansions: AtomicU32,
    llm_calls: AtomicU64,
    /// Set when the model backend failed in a way that will not heal within this question
    /// (unreachable, rejected, persistently failing after its own retries): later calls fail fast.
    backend_down: std::sync::OnceLock<String>,
}

impl Ctx {
    pub fn new(llm: Arc<dyn Llm>, prompts: Arc<Prompts>, rec: Recorder) -> Self {
        rec.set_meta(llm.name(), None);
        Self {
            llm,
            retriever: None,
            nli: None,
            embedder: None,
            prompts,
            rec,
            budget: Budget::default(),
            k: 5,
            params: GenParams::default(),
            expansions: AtomicU32::new(0),
            llm_calls: AtomicU64::new(0),
            backend_down: std::sync::OnceLock::new(),
        }
    }

    pub fn with_retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.rec.set_meta(self.llm.name(), retriever.as_ref().map(|r| r.name()));
        self.retriever = retriever;
        self
    }

    pub fn with_nli(mut self, nli: Option<Arc<dyn Nli>>) -> Self {
        self.nli = nli;
        self
    }

    pub fn with_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.embedder = embedder;
        self
    }

    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    pub fn with_k(mut self, k: usize) -> Self {
        self.k = k.max(1);
        self
    }

    pub fn with_params(mut self, params: GenParams) -> Self {
        self.params = params;
        self
    }

    /// Fills a prompt template.
    pub fn render(&self, template: &str, vars: &[(&str, &str)]) -> Result<String> {
        Ok(self.prompts.render(template, vars)?)
    }

    /// Sends one user prompt (after the configured system message) and meters the call.
    /// `purpose` names the step (`decompose`, `self_verify`, …) in the trace.
    pub async fn chat(
        &self,
        purpose: &str,
        node: Option<&str>,
        prompt: String,
        params: GenParams,
    ) -> Result<ChatResponse> {
        if let Some(why) = self.backend_down.get() {
            return Err(
                Error::backend(self.llm.name(), BackendErrorKind::Connection, format!("not retried: {why}")).into()
            );
        }
        let used = self.llm_calls.fetch_add(1, Ordering::SeqCst);
        if used >= self.budget.max_llm_calls {
            return Err(Error::Budget(format!("max_llm_calls = {} reached", self.budget.max_llm_calls)).into());
        }
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = self.prompts.template("system").filter(|s| !s.trim().is_empty()) {
            messages.push(ChatMessage::system(system));
        }
        messages.push(ChatMessage::user(prompt));
        let request = ChatRequest::new(messages, params);
        let input_words: u64 = request.messages.iter().map(|m| word_count(&m.content)).sum();
        let start = self.rec.now_ms();
        let result = self.llm.chat(&request).await;
        let (kind, out) = match result {
            Ok(resp) => {
                let output_words: u64 = resp.choices.iter().map(|c| word_count(&c.text)).sum();
                self.rec.with_stats(|s| {
                    s.llm_calls += 1;
                    s.input_words += input_words;
                    s.output_words += output_words;
                    s.prompt_tokens += resp.usage.prompt_tokens;
                    s.completion_tokens += resp.usage.completion_tokens;
                    s.cached_prompt_tokens += resp.usage.cached_prompt_tokens;
                });
                let kind = EventKind::LlmCall {
                    purpose: purpose.to_string(),
                    n: request.params.n,
                    prompt_tokens: resp.usage.prompt_tokens,
                    completion_tokens: resp.usage.completion_tokens,
                    input_words,
                    output_words,
                    grammar: resp.grammar_used,
                    error: None,
                    cached_prompt_tokens: resp.usage.cached_prompt_tokens,
                    timing: resp.timing,
                };
                (kind, Ok(resp))
            }
            Err(e) => {
                if e.backend_kind()
                    .is_some_and(|k| k != BackendErrorKind::Malformed && k != BackendErrorKind::Unsupported)
                {
                    let _ = self.backend_down.set(e.to_string());
                }
                self.rec.with_stats(|s| s.llm_calls += 1);
                let kind = EventKind::LlmCall {
                    purpose: purpose.to_string(),
                    n: request.params.n,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    input_words,
                    output_words: 0,
                    grammar: false,
                    error: Some(e.to_string()),
                    cached_prompt_tokens: 0,
                    timing: None,
                };
                (kind, Err(ReasonError::from(e)))
            }
        };
        self.rec.event(node, start, kind);
        out
    }

    /// Renders `template`, sends it with the default parameters, and returns the trimmed reply.
    pub async fn complete(
        &self,
        purpose: &str,
        node: Option<&str>,
        template: &str,
        vars: &[(&str, &str)],
    ) -> Result<String> {
        self.complete_with(purpose, node, template, vars, self.params.clone()).await
    }

    pub async fn complete_with(
        &self,
        purpose: &str,
        node: Option<&str>,
        template: &str,
        vars: &[(&str, &str)],
        params: GenParams,
    ) -> Result<String> {
        let prompt = self.render(template, vars)?;
        let resp = self.chat(purpose, node, prompt, params).await?;
        Ok(resp.text().trim().to_string())
    }

    /// One retrieval round, metered. Errors if no retriever is configured.
    pub async fn retrieve(&self, node: Option<&str>, query: &str, k: usize) -> Result<Vec<Passage>> {
        let retriever = self.retriever.as_ref().ok_or_else(|| ReasonError::NeedsRetriever(self.rec.strategy()))?;
        let start = self.rec.now_ms();
        let result = retriever.retrieve(query, k).await;
        self.rec.with_stats(|s| s.retrieval_rounds += 1);
        let (ids, error) = match &result {
            Ok(ps) => (ps.iter().map(|p| p.id.clone()).collect(), None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        self.rec.event(node, start, EventKind::Retrieval { query: query.to_string(), k, passage_ids: ids, error });
        Ok(result?)
    }

    pub fn has_retriever(&self) -> bool {
        self.retriever.is_some()
    }

    /// Takes one graph expansion from the `r_max` budget; false when none is left.
    pub fn try_expand(&self) -> bool {
        self.expansions
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| (used < self.budget.r_max).then_some(used + 1))
            .is_ok()
    }

    /// LLM calls left before `max_llm_calls`.
    pub fn llm_calls_left(&self) -> u64 {
        self.budget.max_llm_calls.saturating_sub(self.llm_calls.load(Ordering::SeqCst))
    }
}

/// Formats passages for a prompt as `[1] Title: text` lines (the numbering citations refer to).
pub fn format_passages(passages: &[Passage]) -> String {
    if passages.is_empty() {
        return "(none)".to_string();
    }
    passages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if p.title.is_empty() {
                format!("[{}] {}", i + 1, p.text.trim())
            } else {
                format!("[{}] {}: {}", i + 1, p.title.trim(), p.text.trim())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Formats question/answer pairs as a dialog for prompts.
pub fn format_dialog(pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return "(none yet)".to_string();
    }
    pairs.iter().map(|(q, a)| format!("Q: {q}\nA: {a}")).collect::<Vec<_>>().join("\n")
}
