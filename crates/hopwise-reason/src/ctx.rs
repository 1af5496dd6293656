//! The per-question context. Strategies reach every backend through it: model calls go through the
//! question's [`Meter`], retrieval rounds through [`Ctx::retrieve`], so each is timed, counted and
//! written to the trace.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use hopwise_core::{
    ChatMessage, ChatRequest, ChatResponse, Embedder, EventKind, GenParams, Llm, MeteredModel, Nli, Passage, Prompts,
    Recorder, Retriever,
};
use serde::{Deserialize, Serialize};

use crate::error::{ReasonError, Result};
use crate::meter::Meter;
use crate::nli_judge::LlmNli;

/// Limits on one question's work. Exceeding one never fails the question: the strategy answers
/// best-effort from what it has and the trace says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Graph expansions (node decompositions) allowed per question (ToQD's `r_max`).
    pub r_max: u32,
    /// Deepest nesting of child graphs / HGOT layers.
    pub max_depth: u32,
    /// Model calls allowed per question.
    pub max_llm_calls: u64,
    /// Wall-clock seconds allowed per question; no model call starts after that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
    /// Prompt plus completion tokens allowed per question; no model call starts once they are spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

impl Default for Budget {
    fn default() -> Self {
        Self { r_max: 6, max_depth: 3, max_llm_calls: 200, max_seconds: None, max_tokens: None }
    }
}

impl Budget {
    /// The tighter of two budgets, field by field (a request may lower the server's, never raise it).
    pub fn min(&self, other: &Budget) -> Budget {
        let tighter_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let tighter_u = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Budget {
            r_max: self.r_max.min(other.r_max),
            max_depth: self.max_depth.min(other.max_depth),
            max_llm_calls: self.max_llm_calls.min(other.max_llm_calls),
            max_seconds: tighter_f(self.max_seconds, other.max_seconds),
            max_tokens: tighter_u(self.max_tokens, other.max_tokens),
        }
    }
}

/// Everything a strategy needs to answer one question. The fields are private: the model is reached
/// only through [`Ctx::chat`] and friends (or, for helpers acting on the question's behalf, through
/// [`Ctx::model`]), so every call is metered.
pub struct Ctx {
    model: Arc<Meter>,
    retriever: Option<Arc<dyn Retriever>>,
    /// A configured NLI backend; without one, [`Ctx::nli`] judges with the question's model.
    nli: Option<Arc<dyn Nli>>,
    /// The LLM judge made for this question on first use (its pair cache lives with the question).
    judge: OnceLock<Arc<dyn Nli>>,
    embedder: Option<Arc<dyn Embedder>>,
    prompts: Arc<Prompts>,
    rec: Recorder,
    budget: Budget,
    /// Passages per retrieval round.
    k: usize,
    /// Sampling defaults for single-answer calls.
    params: GenParams,
    expansions: AtomicU32,
    /// Templates rendered so far (checked against the strategy table by tests).
    rendered: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl Ctx {
    pub fn new(llm: Arc<dyn Llm>, prompts: Arc<Prompts>, rec: Recorder) -> Self {
        rec.set_meta(llm.name(), None);
        let budget = Budget::default();
        Self {
            model: Arc::new(Meter::new(llm, rec.clone(), budget.max_llm_calls)),
            retriever: None,
            nli: None,
            judge: OnceLock::new(),
            embedder: None,
            prompts,
            rec,
            budget,
            k: 5,
            params: GenParams::default(),
            expansions: AtomicU32::new(0),
            rendered: std::sync::Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    pub fn with_retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.rec.set_meta(self.model.name(), retriever.as_ref().map(|r| r.name()));
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
        self.model.set_max_llm_calls(budget.max_llm_calls);
        self.model.set_limits(budget.max_seconds, budget.max_tokens);
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

    /// The question's metered model, for helpers that call it on the question's behalf (a query
    /// rewriting retriever, an NLI judge).
    pub fn model(&self) -> Arc<dyn MeteredModel> {
        self.model.clone()
    }

    /// The question's trace recorder.
    pub fn rec(&self) -> &Recorder {
        &self.rec
    }

    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Passages per retrieval round.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Sampling defaults for single-answer calls.
    pub fn params(&self) -> &GenParams {
        &self.params
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    /// The NLI to judge with: the configured one, else an LLM judge over this question's model
    /// (made once per question, so its pair cache lives exactly as long as the question).
    pub fn nli(&self) -> Arc<dyn Nli> {
        if let Some(nli) = &self.nli {
            return nli.clone();
        }
        self.judge.get_or_init(|| Arc::new(LlmNli::new(self.model(), self.prompts.clone()))).clone()
    }

    /// Fills a prompt template.
    pub fn render(&self, template: &str, vars: &[(&str, &str)]) -> Result<String> {
        self.rendered.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(template.to_string());
        Ok(self.prompts.render(template, vars)?)
    }

    /// What counts as `NO!` besides the sentinel: the `unanswered_phrases` list when a strategy's
    /// `hedges` option is on (read like a template, so the strategy table must list it), nothing
    /// when it is off.
    pub fn hedges(&self, on: bool) -> crate::protocol::Hedges {
        if !on {
            return crate::protocol::Hedges::none();
        }
        let name = crate::protocol::Hedges::TEMPLATE;
        self.rendered.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(name.to_string());
        crate::protocol::Hedges::from_prompts(&self.prompts)
    }

    /// Passages for a prompt, one `passage_line` each, numbered from 1 (the numbers citations refer
    /// to); `no_passages` for none.
    pub fn format_passages(&self, passages: &[Passage]) -> String {
        if passages.is_empty() {
            return self.fragment("no_passages", &[]);
        }
        let lines: Vec<String> = passages
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let number = (i + 1).to_string();
                if p.title.is_empty() {
                    self.fragment("passage_line_untitled", &[("number", &number), ("text", p.text.trim())])
                } else {
                    self.fragment(
                        "passage_line",
                        &[("number", &number), ("title", p.title.trim()), ("text", p.text.trim())],
                    )
                }
            })
            .collect();
        lines.join("\n")
    }

    /// Question/answer pairs for a prompt, one `dialog_turn` each; `nothing_yet` for none.
    pub fn format_dialog(&self, pairs: &[(String, String)]) -> String {
        if pairs.is_empty() {
            return self.nothing_yet();
        }
        let turns: Vec<String> =
            pairs.iter().map(|(q, a)| self.fragment("dialog_turn", &[("question", q), ("answer", a)])).collect();
        turns.join("\n")
    }

    /// What a prompt shows where nothing has been found or written yet.
    pub fn nothing_yet(&self) -> String {
        self.fragment("nothing_yet", &[])
    }

    /// A shared fragment, filled. Every placeholder a fragment may use is given here, and overrides
    /// are checked against them when loaded, so filling cannot fail.
    fn fragment(&self, name: &str, vars: &[(&str, &str)]) -> String {
        self.render(name, vars).unwrap_or_default()
    }

    /// The names of the templates this context has rendered.
    pub fn rendered_templates(&self) -> Vec<String> {
        self.rendered.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().cloned().collect()
    }

    /// Sends one user prompt (after the configured system message) through the meter.
    /// `purpose` names the step (`decompose`, `self_verify`, …) in the trace.
    pub async fn chat(
        &self,
        purpose: &str,
        node: Option<&str>,
        prompt: String,
        params: GenParams,
    ) -> Result<ChatResponse> {
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = self.prompts.template("system").filter(|s| !s.trim().is_empty()) {
            messages.push(ChatMessage::system(system));
        }
        messages.push(ChatMessage::user(prompt));
        Ok(self.model.send(purpose, node, ChatRequest::new(messages, params)).await?)
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
        take_one(&self.expansions, self.budget.r_max)
    }

    /// LLM calls left before `max_llm_calls`.
    pub fn llm_calls_left(&self) -> u64 {
        self.model.calls_left()
    }
}

/// Counts one more use of `counter` unless `max` are used already; false then. Safe under the
/// concurrent node tasks of one question.
pub(crate) fn take_one(counter: &AtomicU32, max: u32) -> bool {
    counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| (used < max).then_some(used + 1)).is_ok()
}

/// The fragments every strategy may render into its prompts (passage lines, dialog turns, the
/// placeholder for nothing yet), besides its own templates.
pub const SHARED_FRAGMENTS: &[&str] =
    &["passage_line", "passage_line_untitled", "no_passages", "dialog_turn", "nothing_yet"];

#[cfg(test)]
mod budget_tests {
    use super::Budget;

    #[test]
    fn a_request_budget_can_only_lower_the_servers() {
        let server = Budget { max_llm_calls: 50, max_seconds: Some(60.0), ..Budget::default() };
        let request =
            Budget { max_llm_calls: 500, max_seconds: Some(10.0), max_tokens: Some(5_000), ..Budget::default() };
        let merged = request.min(&server);
        assert_eq!(merged.max_llm_calls, 50);
        assert_eq!(merged.max_seconds, Some(10.0));
        assert_eq!(merged.max_tokens, Some(5_000), "a limit the server does not set can be added");
        assert_eq!(Budget::default().min(&server).max_seconds, Some(60.0));
    }
}

#[cfg(test)]
mod fragment_tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use hopwise_core::scripted::ScriptedLlm;
    use hopwise_core::{Passage, Prompts, Recorder};

    use super::Ctx;

    fn ctx(prompts: Prompts) -> Ctx {
        Ctx::new(Arc::new(ScriptedLlm::new()), Arc::new(prompts), Recorder::new("q", "test"))
    }

    fn passage(title: &str, text: &str) -> Passage {
        Passage { id: "p".into(), title: title.into(), text: text.into(), ..Default::default() }
    }

    /// The built-in fragments give these exact texts; an override replaces them.
    #[test]
    fn passages_and_dialogs_are_written_from_the_fragments() {
        let c = ctx(Prompts::default());
        let passages = [passage(" Jaws ", " A film. "), passage("", "No title.")];
        assert_eq!(c.format_passages(&passages), "[1] Jaws: A film.\n[2] No title.");
        assert_eq!(c.format_passages(&[]), "(none)");
        let dialog = [("Who?".to_string(), "Ann".to_string()), ("When?".to_string(), "1990".to_string())];
        assert_eq!(c.format_dialog(&dialog), "Q: Who?\nA: Ann\nQ: When?\nA: 1990");
        assert_eq!(c.format_dialog(&[]), "(none yet)");
        assert_eq!(
            c.rendered_templates(),
            ["dialog_turn", "no_passages", "nothing_yet", "passage_line", "passage_line_untitled"]
        );
        let o = BTreeMap::from([
            ("passage_line".to_string(), "({number}) {title} — {text}".to_string()),
            ("nothing_yet".to_string(), "(noch nichts)".to_string()),
        ]);
        let c = ctx(Prompts::default().with_overrides(&o).expect("valid overrides"));
        assert_eq!(c.format_passages(&passages[..1]), "(1) Jaws — A film.");
        assert_eq!(c.format_dialog(&[]), "(noch nichts)");
    }
}
