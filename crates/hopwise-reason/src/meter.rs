//! The per-question model handle: the only path from a question to its model backend.
//!
//! Every call, whoever makes it (the strategy, the NLI judge, the query rewriter), is counted against
//! `max_llm_calls`, stopped early once the backend has failed for good within the question (the
//! fail-fast breaker), and recorded into the question's trace and stats by [`Meter::record`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use hopwise_core::text::word_count;
use hopwise_core::{
    BackendErrorKind, ChatRequest, ChatResponse, Error, EventKind, Llm, MeteredModel, Recorder, Result,
};

/// One question's metered view of a model backend. Cheap to share (`Arc`).
pub struct Meter {
    llm: Arc<dyn Llm>,
    rec: Recorder,
    max_llm_calls: AtomicU64,
    /// Wall time and tokens the question may spend (`Budget::max_seconds`, `max_tokens`).
    limits: std::sync::Mutex<(Option<f64>, Option<u64>)>,
    llm_calls: AtomicU64,
    /// Set when the backend failed in a way that will not heal within this question (unreachable,
    /// rejected, persistently failing after its own retries): later calls fail fast.
    backend_down: OnceLock<String>,
}

impl Meter {
    pub fn new(llm: Arc<dyn Llm>, rec: Recorder, max_llm_calls: u64) -> Self {
        Self {
            llm,
            rec,
            max_llm_calls: AtomicU64::new(max_llm_calls),
            limits: std::sync::Mutex::new((None, None)),
            llm_calls: AtomicU64::new(0),
            backend_down: OnceLock::new(),
        }
    }

    pub(crate) fn set_max_llm_calls(&self, max: u64) {
        self.max_llm_calls.store(max, Ordering::SeqCst);
    }

    /// Seconds (since the question started) and prompt + completion tokens after which no call starts.
    pub(crate) fn set_limits(&self, max_seconds: Option<f64>, max_tokens: Option<u64>) {
        *self.limits.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = (max_seconds, max_tokens);
    }

    /// The time or token budget that is spent, if one is.
    fn spent(&self) -> Option<String> {
        let (max_seconds, max_tokens) = *self.limits.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(max) = max_seconds.filter(|max| self.rec.now_ms() as f64 >= max * 1000.0) {
            return Some(format!("max_seconds = {max} reached"));
        }
        let stats = self.rec.stats();
        max_tokens
            .filter(|max| stats.prompt_tokens + stats.completion_tokens >= *max)
            .map(|max| format!("max_tokens = {max} reached"))
    }

    /// Model calls left before `max_llm_calls`.
    pub fn calls_left(&self) -> u64 {
        self.max_llm_calls.load(Ordering::SeqCst).saturating_sub(self.llm_calls.load(Ordering::SeqCst))
    }

    /// The one place a model call is written into the trace: the stats it adds and its `llm_call`
    /// event, spanning `start_ms` to now.
    fn record(
        &self,
        purpose: &str,
        node: Option<&str>,
        request: &ChatRequest,
        start_ms: u64,
        result: &Result<ChatResponse>,
    ) {
        let input_words: u64 = request.messages.iter().map(|m| word_count(&m.content)).sum();
        let (prompt_tokens, completion_tokens, output_words, grammar, error) = match result {
            Ok(resp) => (
                resp.usage.prompt_tokens,
                resp.usage.completion_tokens,
                resp.choices.iter().map(|c| word_count(&c.text)).sum(),
                resp.grammar_used,
                None,
            ),
            Err(e) => (0, 0, 0, false, Some(e.to_string())),
        };
        let (cached_prompt_tokens, timing) =
            result.as_ref().map_or((0, None), |resp| (resp.usage.cached_prompt_tokens, resp.timing));
        // A failed call counts as a call; the words it never produced and the tokens it was never
        // billed for do not count.
        let answered = result.is_ok();
        self.rec.with_stats(|s| {
            s.llm_calls += 1;
            if answered {
                s.input_words += input_words;
                s.output_words += output_words;
                s.prompt_tokens += prompt_tokens;
                s.completion_tokens += completion_tokens;
                s.cached_prompt_tokens += cached_prompt_tokens;
            }
        });
        let kind = EventKind::LlmCall {
            purpose: purpose.to_string(),
            n: request.params.n,
            prompt_tokens,
            completion_tokens,
            input_words,
            output_words,
            grammar,
            error,
            cached_prompt_tokens,
            timing,
        };
        self.rec.event(node, start_ms, kind);
    }

    /// Trips the breaker on failures that retrying within this question will not cure. A malformed
    /// reply or an unsupported request is about that one request, so it does not.
    fn note_failure(&self, e: &Error) {
        if e.backend_kind().is_some_and(|k| k != BackendErrorKind::Malformed && k != BackendErrorKind::Unsupported) {
            let _ = self.backend_down.set(e.to_string());
        }
    }
}

/// Longest model reply a question keeps, in bytes. A reply is copied into several places of a trace
/// (node answers, details, live events), so one unbounded reply would make an unbounded trace.
pub const MAX_REPLY_BYTES: usize = 64 * 1024;

/// Cuts each reply of `resp` to [`MAX_REPLY_BYTES`] (at a character boundary), marking the cut;
/// true when one was cut.
fn bound_replies(resp: &mut ChatResponse) -> bool {
    let mut cut_any = false;
    for choice in &mut resp.choices {
        if choice.text.len() <= MAX_REPLY_BYTES {
            continue;
        }
        let mut cut = MAX_REPLY_BYTES;
        while !choice.text.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = choice.text.len() - cut;
        choice.text.truncate(cut);
        choice.text.push_str(&format!(" [… {dropped} more bytes cut]"));
        cut_any = true;
    }
    cut_any
}

#[async_trait]
impl MeteredModel for Meter {
    fn name(&self) -> &str {
        self.llm.name()
    }

    async fn send(&self, purpose: &str, node: Option<&str>, request: ChatRequest) -> Result<ChatResponse> {
        if let Some(why) = self.backend_down.get() {
            return Err(Error::backend(self.llm.name(), BackendErrorKind::Connection, format!("not retried: {why}")));
        }
        if let Some(why) = self.spent() {
            return Err(Error::Budget(why));
        }
        let max = self.max_llm_calls.load(Ordering::SeqCst);
        if self.llm_calls.fetch_add(1, Ordering::SeqCst) >= max {
            return Err(Error::Budget(format!("max_llm_calls = {max} reached")));
        }
        let start = self.rec.now_ms();
        let mut result = self.llm.chat(&request).await;
        match &mut result {
            Ok(resp) => {
                if bound_replies(resp) {
                    self.rec.note(format!("a `{purpose}` reply over {MAX_REPLY_BYTES} bytes was cut"));
                }
            }
            Err(e) => self.note_failure(e),
        }
        self.record(purpose, node, &request, start, &result);
        result
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;

    #[tokio::test]
    async fn an_oversized_reply_is_cut_and_the_cut_is_marked() {
        let rec = Recorder::new("q", "test");
        let huge = "é".repeat(MAX_REPLY_BYTES);
        let meter = Meter::new(Arc::new(ScriptedLlm::new().fallback(&huge)), rec.clone(), 2);
        let resp = meter.send("answer", None, ChatRequest::user("hello")).await.expect("a reply");
        let text = resp.text();
        assert!(text.len() < MAX_REPLY_BYTES + 64, "{}", text.len());
        assert!(
            text.ends_with(&format!("[… {} more bytes cut]", huge.len() - MAX_REPLY_BYTES)),
            "{}",
            &text[text.len() - 40..]
        );
        assert!(rec.snapshot().notes.iter().any(|n| n.contains("was cut")));
        let small = Meter::new(Arc::new(ScriptedLlm::new().fallback("Paris")), rec, 2);
        assert_eq!(small.send("answer", None, ChatRequest::user("hi")).await.expect("reply").text(), "Paris");
    }

    #[tokio::test]
    async fn counts_records_and_stops_at_the_budget() {
        let rec = Recorder::new("q", "test");
        let meter = Meter::new(Arc::new(ScriptedLlm::new().fallback("two words")), rec.clone(), 2);
        for _ in 0..2 {
            meter.send("step", Some("1"), ChatRequest::user("hello there")).await.expect("within budget");
        }
        let err = meter.send("step", None, ChatRequest::user("again")).await.expect_err("budget spent");
        assert!(matches!(err, Error::Budget(_)), "{err}");
        let stats = rec.stats();
        assert_eq!((stats.llm_calls, stats.input_words, stats.output_words), (2, 4, 4));
        let trace = rec.snapshot();
        assert_eq!(trace.events.len(), 2, "the refused call reached no backend and is not an event");
        assert_eq!(trace.events[0].node_id.as_deref(), Some("1"));
        assert_eq!(meter.calls_left(), 0);
    }

    /// A backend that served part of the prompt from its prefix cache and reports its timing.
    struct CachingLlm;

    #[async_trait]
    impl Llm for CachingLlm {
        fn name(&self) -> &str {
            "caching"
        }
        async fn chat(&self, _: &ChatRequest) -> Result<ChatResponse> {
            Ok(ChatResponse {
                choices: vec![hopwise_core::Completion { text: "Paris".into(), ..Default::default() }],
                usage: hopwise_core::Usage { prompt_tokens: 40, completion_tokens: 1, cached_prompt_tokens: 32 },
                grammar_used: false,
                timing: Some(hopwise_core::CallTiming { queue_ms: 3, prompt_ms: 20, decode_ms: 7 }),
            })
        }
    }

    #[tokio::test]
    async fn cached_prompt_tokens_and_timing_reach_the_stats_and_the_event() {
        let rec = Recorder::new("q", "test");
        let meter = Meter::new(Arc::new(CachingLlm), rec.clone(), 5);
        for _ in 0..2 {
            meter.send("step", None, ChatRequest::user("capital of France?")).await.expect("answer");
        }
        let stats = rec.stats();
        assert_eq!((stats.prompt_tokens, stats.cached_prompt_tokens), (80, 64));
        let trace = rec.snapshot();
        match &trace.events[0].kind {
            EventKind::LlmCall { cached_prompt_tokens, timing, .. } => {
                assert_eq!(*cached_prompt_tokens, 32);
                assert_eq!(timing.map(|t| (t.queue_ms, t.prompt_ms, t.decode_ms)), Some((3, 20, 7)));
            }
            other => panic!("not a model call: {other:?}"),
        }
    }
}
