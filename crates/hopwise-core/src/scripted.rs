//! A scripted model for tests and benchmarks: answers by matching the prompt against rules, with an
//! optional fixed latency. Deterministic, so tests can assert on exact traces.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::{ChatRequest, ChatResponse, Completion, Llm, Result, Usage};

type Responder = Arc<dyn Fn(&str, u32) -> String + Send + Sync>;

struct Rule {
    needle: String,
    respond: Responder,
}

/// Rules are tried in order; the first whose needle occurs in the prompt (all messages joined)
/// answers. `{i}` in a fixed reply is replaced by the sample index, so `n` samples can differ.
///
/// A request that asks for `logprobs` gets one token per whitespace-separated word of the reply,
/// each with probability 1 unless [`ScriptedLlm::token_probability`] names the word.
#[derive(Clone, Default)]
pub struct ScriptedLlm {
    rules: Arc<Vec<Rule>>,
    fallback: String,
    latency: Duration,
    calls: Arc<Mutex<Vec<String>>>,
    probabilities: Arc<Vec<(String, f32)>>,
    no_probabilities: bool,
}

impl ScriptedLlm {
    pub fn new() -> Self {
        Self { fallback: "NO!".into(), ..Default::default() }
    }

    /// Reply `reply` to any prompt containing `needle`.
    pub fn on(self, needle: &str, reply: &str) -> Self {
        let reply = reply.to_string();
        self.on_fn(needle, move |_, i| reply.replace("{i}", &i.to_string()))
    }

    /// Reply with `f(prompt, sample_index)` to any prompt containing `needle`.
    pub fn on_fn(mut self, needle: &str, f: impl Fn(&str, u32) -> String + Send + Sync + 'static) -> Self {
        let mut rules: Vec<Rule> = match Arc::try_unwrap(self.rules) {
            Ok(v) => v,
            Err(shared) => {
                shared.iter().map(|r| Rule { needle: r.needle.clone(), respond: r.respond.clone() }).collect()
            }
        };
        rules.push(Rule { needle: needle.to_string(), respond: Arc::new(f) });
        self.rules = Arc::new(rules);
        self
    }

    pub fn fallback(mut self, reply: &str) -> Self {
        self.fallback = reply.to_string();
        self
    }

    /// The word `word` (punctuation included) is generated with probability `p` wherever it occurs.
    pub fn token_probability(mut self, word: &str, p: f32) -> Self {
        let mut table = self.probabilities.as_ref().clone();
        table.push((word.to_string(), p));
        self.probabilities = Arc::new(table);
        self
    }

    /// Reports no token probabilities, as a server without `logprobs` support does.
    pub fn without_probabilities(mut self) -> Self {
        self.no_probabilities = true;
        self
    }

    /// The reply's words as tokens with their scripted log-probabilities.
    fn token_logprobs(&self, text: &str) -> Vec<(String, f32)> {
        text.split_inclusive(char::is_whitespace)
            .map(|piece| {
                let word = piece.trim();
                let p = self.probabilities.iter().find(|(w, _)| w == word).map_or(1.0, |(_, p)| *p);
                (piece.to_string(), p.ln())
            })
            .collect()
    }

    /// Every call sleeps this long (simulates a remote backend).
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Prompts seen so far, in call order.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl Llm for ScriptedLlm {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let prompt: String = request.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
        if let Ok(mut c) = self.calls.lock() {
            c.push(prompt.clone());
        }
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let rule = self.rules.iter().find(|r| prompt.contains(&r.needle));
        let choices = (0..request.params.n.max(1))
            .map(|i| {
                let text = match rule {
                    Some(r) => (r.respond)(&prompt, i),
                    None => self.fallback.clone(),
                };
                let token_logprobs = if request.params.logprobs && !self.no_probabilities {
                    self.token_logprobs(&text)
                } else {
                    Vec::new()
                };
                Completion { text, token_logprobs, ..Default::default() }
            })
            .collect::<Vec<_>>();
        let usage = Usage::new(
            crate::text::word_count(&prompt),
            choices.iter().map(|c| crate::text::word_count(&c.text)).sum(),
        );
        Ok(ChatResponse { choices, usage, ..ChatResponse::default() })
    }
}

/// An in-memory retriever for tests: ranks fixed passages by how many query words they share.
#[derive(Clone, Default)]
pub struct StaticRetriever {
    passages: Arc<Vec<crate::Passage>>,
}

impl StaticRetriever {
    pub fn new(passages: Vec<crate::Passage>) -> Self {
        Self { passages: Arc::new(passages) }
    }

    /// Convenience: passages from `(title, text)` pairs, ids `p0`, `p1`, ….
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::new(
            pairs
                .iter()
                .enumerate()
                .map(|(i, (title, text))| crate::Passage {
                    id: format!("p{i}"),
                    title: title.to_string(),
                    text: text.to_string(),
                    ..Default::default()
                })
                .collect(),
        )
    }
}

#[async_trait]
impl crate::Retriever for StaticRetriever {
    fn name(&self) -> &str {
        "static"
    }

    async fn retrieve(&self, query: &str, k: usize) -> Result<Vec<crate::Passage>> {
        let words = |s: &str| -> std::collections::HashSet<String> {
            crate::text::normalize_answer(s).split_whitespace().map(str::to_string).collect()
        };
        let q = words(query);
        let mut scored: Vec<(usize, crate::Passage)> = self
            .passages
            .iter()
            .map(|p| (words(&format!("{} {}", p.title, p.text)).intersection(&q).count(), p.clone()))
            .filter(|(s, _)| *s > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
        Ok(scored
            .into_iter()
            .take(k)
            .map(|(s, mut p)| {
                p.score = s as f32;
                p
            })
            .collect())
    }
}
