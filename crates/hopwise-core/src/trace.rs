//! The one trace type. Every strategy writes it through a [`Recorder`]; the CLI prints it, the server
//! streams its events live, the evaluator stores it next to each result.
//!
//! The JSON form is these types' serde form. Bump [`TRACE_SCHEMA_VERSION`] on breaking changes.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use crate::Passage;

pub const TRACE_SCHEMA_VERSION: u32 = 1;

/// Node ids are strings: `"1"`, `"2"` at the top level, `"2.1"` for the first child of node 2,
/// and `"Q"` for the sink (the user's question).
pub type NodeId = String;

/// The sink of every topology graph.
pub const SINK: &str = "Q";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Decision {
    /// Not resolved yet.
    #[default]
    Pending,
    /// Answered from the model's own knowledge, no retrieval.
    Known,
    /// Answered after retrieval.
    Retrieved,
    /// Split into a child graph whose answers produced this node's answer.
    Decomposed,
    /// No reliable answer; a best-effort one may be present.
    Unresolved,
}

impl Decision {
    /// The decision's name as the trace writes it.
    pub fn name(self) -> &'static str {
        match self {
            Decision::Pending => "pending",
            Decision::Known => "known",
            Decision::Retrieved => "retrieved",
            Decision::Decomposed => "decomposed",
            Decision::Unresolved => "unresolved",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NodeTrace {
    pub id: NodeId,
    pub question: String,
    /// The question after substituting the predecessors' answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten: Option<String>,
    /// Nodes whose answers this node uses.
    #[serde(default)]
    pub parents: Vec<NodeId>,
    /// The child graph this node was decomposed into, if any.
    #[serde(default)]
    pub children: Vec<NodeId>,
    /// The node this one was decomposed out of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decomposes: Option<NodeId>,
    #[serde(default)]
    pub depth: u32,
    #[serde(default)]
    pub decision: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(default)]
    pub passages: Vec<Passage>,
    /// The answer was forced by a budget or a failure rather than reached normally.
    #[serde(default)]
    pub best_effort: bool,
    /// Strategy-specific detail (ToQD's gate and readings, HGOT's thoughts and votes, the sentence
    /// loop's samples, …). Strategies write it only from their typed records (hopwise-reason's
    /// `details`); the published trace schema names the record type for each strategy.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub extra: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GraphEdge {
    pub from: NodeId,
    pub to: NodeId,
}

/// A deterministic correction applied to malformed model output, kept so a reader can see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Repair {
    /// Which step produced the output (`construct`, `decompose`, `formalize`, …).
    pub stage: String,
    /// The rule applied, e.g. `drop_cycle_edge`, `wire_sink_to_q`.
    pub rule: String,
    pub detail: String,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum EventKind {
    LlmCall {
        purpose: String,
        n: u32,
        prompt_tokens: u64,
        completion_tokens: u64,
        input_words: u64,
        output_words: u64,
        grammar: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Prompt tokens the backend served from its prefix cache.
        #[serde(default, skip_serializing_if = "is_zero")]
        cached_prompt_tokens: u64,
        /// Queueing, prompt and decoding time inside the backend, where it reports them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timing: Option<crate::CallTiming>,
    },
    Retrieval {
        query: String,
        k: usize,
        passage_ids: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A node was added or changed; carries the node's full current state.
    Node {
        node: NodeTrace,
    },
    Edge {
        from: NodeId,
        to: NodeId,
    },
    Repair {
        repair: Repair,
    },
    Note {
        message: String,
    },
    Final {
        answer: String,
        best_effort: bool,
    },
}

/// A timed event. Times are milliseconds since the trace started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Event {
    pub seq: u64,
    pub start_ms: u64,
    pub end_ms: u64,
    /// The graph node this event belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<NodeId>,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stats {
    pub llm_calls: u64,
    pub retrieval_rounds: u64,
    pub input_words: u64,
    pub output_words: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The part of `prompt_tokens` served from the backend's prefix cache.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    pub wall_ms: u64,
    /// NLI judgements made (HGOT, NLI-based uncertainty).
    #[serde(default)]
    pub nli_calls: u64,
    /// Sentences generated by the dynamic-retrieval loop (the paper's #steps).
    #[serde(default)]
    pub steps: u64,
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        self.llm_calls += other.llm_calls;
        self.retrieval_rounds += other.retrieval_rounds;
        self.input_words += other.input_words;
        self.output_words += other.output_words;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
        self.wall_ms += other.wall_ms;
        self.nli_calls += other.nli_calls;
        self.steps += other.steps;
    }
}

/// One question's record: the graph of nodes and edges the strategy built, every model call and
/// retrieval as a timed event, the repairs made to model output, the answer and the totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Trace {
    pub schema_version: u32,
    pub question: String,
    pub strategy: String,
    #[serde(default)]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriever: Option<String>,
    pub answer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// True when a budget or a failure forced the answer; `notes` says why.
    #[serde(default)]
    pub best_effort: bool,
    /// Ids of the passages the answer rests on (see [`supporting_passages`]), in first-seen order; the
    /// CLI and the page list these as the answer's citations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub support: Vec<String>,
    /// How sure the strategy is of the answer, in [0, 1]: the vote share of the winning answer among
    /// sampled answers (ToQD's summary, CoT-SC) or HGOT's citation-weighted CI. Absent where the
    /// strategy draws a single answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub notes: Vec<String>,
    pub nodes: Vec<NodeTrace>,
    pub edges: Vec<GraphEdge>,
    #[serde(default)]
    pub repairs: Vec<Repair>,
    pub events: Vec<Event>,
    pub stats: Stats,
    /// Strategy-specific detail about the whole question (HGOT's options and σ history, the sentence
    /// loop's configuration); typed like `NodeTrace::extra`.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub extra: serde_json::Value,
}

/// The passages an answer rests on: for every answered node, the passages it was given that contain
/// its answer (or, for a node answered after retrieval whose answer appears verbatim in none, its top
/// passage), then any passage containing the final answer. Yes/no answers are matched through their
/// nodes only. Ids, first-seen order, no repeats.
pub fn supporting_passages(trace: &Trace) -> Vec<String> {
    use crate::text::normalize_answer;
    let contains = |passage: &Passage, answer: &str| {
        let haystack = normalize_answer(&format!("{} {}", passage.title, passage.text));
        format!(" {haystack} ").contains(&format!(" {answer} "))
    };
    let meaningful = |answer: &str| {
        let a = normalize_answer(answer);
        (!a.is_empty() && a != "yes" && a != "no").then_some(a)
    };
    let mut out: Vec<String> = Vec::new();
    let mut push = |id: &str| {
        if !out.iter().any(|seen| seen == id) {
            out.push(id.to_string());
        }
    };
    for node in &trace.nodes {
        let Some(answer) = node.answer.as_deref().and_then(meaningful) else { continue };
        let matching: Vec<&Passage> = node.passages.iter().filter(|p| contains(p, &answer)).collect();
        if matching.is_empty() && node.decision == Decision::Retrieved {
            if let Some(top) = node.passages.first() {
                push(&top.id);
            }
        }
        matching.iter().for_each(|p| push(&p.id));
    }
    if let Some(answer) = meaningful(&trace.answer) {
        for passage in trace.nodes.iter().flat_map(|n| n.passages.iter()) {
            if contains(passage, &answer) {
                push(&passage.id);
            }
        }
    }
    out
}

impl Trace {
    /// What the confidence says, in words: every vote agreed, the answer held a majority of the
    /// (weighted) vote, or it only led a split vote. `None` without a confidence.
    pub fn confidence_in_words(&self) -> Option<&'static str> {
        self.confidence.map(|c| {
            if c >= 0.999 {
                "every vote agrees"
            } else if c > 0.5 {
                "a majority of the vote"
            } else {
                "leads a split vote"
            }
        })
    }

    /// Why the trace has no answer (its notes, else an empty reply), or `None` when it has one.
    pub fn missing_answer_reason(&self) -> Option<String> {
        if !self.answer.trim().is_empty() {
            return None;
        }
        Some(if self.notes.is_empty() {
            format!("the model replied with nothing ({} model calls)", self.stats.llm_calls)
        } else {
            self.notes.join("; ")
        })
    }

    /// The first backend failure recorded (a model call's or a search's error message): why a
    /// question without an answer has none.
    pub fn first_backend_failure(&self) -> Option<&str> {
        self.events.iter().find_map(|e| match &e.kind {
            EventKind::LlmCall { error: Some(m), .. } | EventKind::Retrieval { error: Some(m), .. } => Some(m.as_str()),
            _ => None,
        })
    }

    /// The purpose of every model call, in the order made ("decompose", "summary", ...).
    pub fn call_purposes(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::LlmCall { purpose, .. } => Some(purpose.clone()),
                _ => None,
            })
            .collect()
    }

    /// The passages named by [`Trace::support`].
    pub fn supporting(&self) -> Vec<&Passage> {
        let all = self.evidence();
        self.support.iter().filter_map(|id| all.iter().find(|p| &p.id == id).copied()).collect()
    }

    pub fn node(&self, id: &str) -> Option<&NodeTrace> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Every distinct passage the trace used as evidence, in first-seen order.
    pub fn evidence(&self) -> Vec<&Passage> {
        let mut seen = std::collections::HashSet::new();
        self.nodes.iter().flat_map(|n| n.passages.iter()).filter(|p| seen.insert(p.id.as_str())).collect()
    }
}

/// Writes a [`Trace`] from many concurrent tasks and forwards each event to an optional live listener
/// (the server's event stream). Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<Trace>>,
    started: Instant,
    listener: Option<UnboundedSender<Event>>,
}

impl Recorder {
    pub fn new(question: &str, strategy: &str) -> Self {
        let trace = Trace {
            schema_version: TRACE_SCHEMA_VERSION,
            question: question.to_string(),
            strategy: strategy.to_string(),
            ..Default::default()
        };
        Self { inner: Arc::new(Mutex::new(trace)), started: Instant::now(), listener: None }
    }

    /// Send every event to `tx` as it is recorded. A closed receiver is ignored.
    pub fn with_listener(mut self, tx: UnboundedSender<Event>) -> Self {
        self.listener = Some(tx);
        self
    }

    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Trace> {
        // A panic while holding the lock cannot leave the trace half-written in a way that matters
        // more than losing it, so recover the guard instead of propagating the poison.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an event spanning `start_ms..now`.
    pub fn event(&self, node: Option<&str>, start_ms: u64, kind: EventKind) {
        let end_ms = self.now_ms();
        let event = {
            let mut t = self.lock();
            let event = Event { seq: t.events.len() as u64, start_ms, end_ms, node_id: node.map(str::to_string), kind };
            t.events.push(event.clone());
            event
        };
        if let Some(tx) = &self.listener {
            let _ = tx.send(event);
        }
    }

    pub fn strategy(&self) -> String {
        self.lock().strategy.clone()
    }

    pub fn set_meta(&self, model: &str, retriever: Option<&str>) {
        let mut t = self.lock();
        t.model = model.to_string();
        t.retriever = retriever.map(str::to_string);
    }

    /// Adds the node, or replaces the node with the same id, and emits its state.
    pub fn upsert_node(&self, node: NodeTrace) {
        {
            let mut t = self.lock();
            match t.nodes.iter_mut().find(|n| n.id == node.id) {
                Some(slot) => *slot = node.clone(),
                None => t.nodes.push(node.clone()),
            }
        }
        let now = self.now_ms();
        let id = node.id.clone();
        self.event(Some(&id), now, EventKind::Node { node });
    }

    /// Changes a node in place and emits its new state. Unknown ids are ignored.
    pub fn update_node(&self, id: &str, f: impl FnOnce(&mut NodeTrace)) {
        let updated = {
            let mut t = self.lock();
            t.nodes.iter_mut().find(|n| n.id == id).map(|n| {
                f(n);
                n.clone()
            })
        };
        if let Some(node) = updated {
            let now = self.now_ms();
            self.event(Some(id), now, EventKind::Node { node });
        }
    }

    pub fn node(&self, id: &str) -> Option<NodeTrace> {
        self.lock().nodes.iter().find(|n| n.id == id).cloned()
    }

    pub fn add_edge(&self, from: &str, to: &str) {
        {
            let mut t = self.lock();
            if t.edges.iter().any(|e| e.from == from && e.to == to) {
                return;
            }
            t.edges.push(GraphEdge { from: from.to_string(), to: to.to_string() });
        }
        let now = self.now_ms();
        self.event(None, now, EventKind::Edge { from: from.to_string(), to: to.to_string() });
    }

    pub fn remove_edge(&self, from: &str, to: &str) {
        self.lock().edges.retain(|e| !(e.from == from && e.to == to));
    }

    pub fn repair(&self, repair: Repair) {
        self.lock().repairs.push(repair.clone());
        let now = self.now_ms();
        self.event(None, now, EventKind::Repair { repair });
    }

    /// A note that makes the answer best-effort (budget exhausted, backend failed, …).
    pub fn best_effort(&self, why: impl Into<String>) {
        let why = why.into();
        {
            let mut t = self.lock();
            t.best_effort = true;
            t.notes.push(why.clone());
        }
        let now = self.now_ms();
        self.event(None, now, EventKind::Note { message: why });
    }

    pub fn note(&self, message: impl Into<String>) {
        let message = message.into();
        self.lock().notes.push(message.clone());
        let now = self.now_ms();
        self.event(None, now, EventKind::Note { message });
    }

    pub fn with_stats(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut self.lock().stats);
    }

    pub fn stats(&self) -> Stats {
        self.lock().stats.clone()
    }

    pub fn set_extra(&self, extra: serde_json::Value) {
        self.lock().extra = extra;
    }

    /// Records how sure the strategy is of its final answer (see [`Trace::confidence`]).
    pub fn set_confidence(&self, confidence: f64) {
        self.lock().confidence = confidence.is_finite().then_some(confidence.clamp(0.0, 1.0));
    }

    /// Closes the trace: sets the answer, its supporting passages, wall time, and emits the final event.
    ///
    /// A node still pending is marked unresolved, with a note naming it: a closed trace never
    /// holds a pending node. Only a strategy that stopped early (a best-effort trace) may leave one;
    /// test builds fail on any other.
    pub fn finish(&self, answer: &str, rationale: Option<String>) -> Trace {
        let wall_ms = self.now_ms();
        let pending = self.close_pending_nodes();
        if !pending.is_empty() {
            #[cfg(feature = "trace-check")]
            assert!(self.lock().best_effort, "the strategy finished with pending nodes {pending:?}");
            self.note(format!(
                "node(s) {} were still pending when the strategy finished; marked unresolved",
                pending.join(", ")
            ));
        }
        let best_effort = {
            let mut t = self.lock();
            t.answer = answer.to_string();
            t.rationale = rationale;
            t.stats.wall_ms = wall_ms;
            t.support = supporting_passages(&t);
            t.best_effort
        };
        self.event(None, wall_ms, EventKind::Final { answer: answer.to_string(), best_effort });
        let trace = self.snapshot();
        #[cfg(feature = "trace-check")]
        crate::trace_schema::enforce(&trace);
        trace
    }

    /// Marks every pending node unresolved and best-effort, emitting each one's new state; returns
    /// their ids.
    fn close_pending_nodes(&self) -> Vec<NodeId> {
        let pending: Vec<NodeId> =
            self.lock().nodes.iter().filter(|n| n.decision == Decision::Pending).map(|n| n.id.clone()).collect();
        for id in &pending {
            self.update_node(id, |n| {
                n.decision = Decision::Unresolved;
                n.best_effort = true;
            });
        }
        pending
    }

    pub fn snapshot(&self) -> Trace {
        self.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_answer_says_why_from_the_notes_or_the_empty_reply() {
        let mut t = Trace { answer: "Rush".into(), ..Trace::default() };
        assert_eq!(t.missing_answer_reason(), None);
        t.answer = "  ".into();
        t.stats.llm_calls = 2;
        assert_eq!(t.missing_answer_reason().as_deref(), Some("the model replied with nothing (2 model calls)"));
        t.notes = vec!["budget spent".into(), "no thought gave an answer".into()];
        assert_eq!(t.missing_answer_reason().as_deref(), Some("budget spent; no thought gave an answer"));
    }

    #[test]
    fn the_confidence_is_said_in_words() {
        let at = |c: Option<f64>| Trace { confidence: c, ..Trace::default() }.confidence_in_words();
        assert_eq!(at(None), None);
        assert_eq!(at(Some(1.0)), Some("every vote agrees"));
        assert_eq!(at(Some(0.6)), Some("a majority of the vote"));
        assert_eq!(at(Some(0.5)), Some("leads a split vote"), "half is no majority");
        assert_eq!(at(Some(0.2)), Some("leads a split vote"));
    }

    /// A strategy that stopped early may leave nodes it never reached; the closed trace marks them
    /// unresolved and names them, so no reader sees a pending node in a finished trace.
    #[test]
    fn finishing_marks_nodes_still_pending_unresolved() {
        let rec = Recorder::new("Who?", "toqd");
        rec.upsert_node(NodeTrace { id: "1".into(), question: "a".into(), ..Default::default() });
        rec.upsert_node(NodeTrace { id: "2".into(), question: "b".into(), ..Default::default() });
        rec.update_node("1", |n| n.decision = Decision::Known);
        rec.best_effort("the strategy stopped early");
        let trace = rec.finish("", None);
        assert_eq!(trace.node("1").map(|n| (n.decision, n.best_effort)), Some((Decision::Known, false)));
        assert_eq!(trace.node("2").map(|n| (n.decision, n.best_effort)), Some((Decision::Unresolved, true)));
        assert!(trace.notes.iter().any(|n| n.contains("node(s) 2 were still pending")), "{:?}", trace.notes);
        let last_of_2 = trace.events.iter().rev().find_map(|e| match &e.kind {
            EventKind::Node { node } if node.id == "2" => Some(node.decision),
            _ => None,
        });
        assert_eq!(last_of_2, Some(Decision::Unresolved), "a live view sees the change");
    }

    /// Anywhere else a pending node is a strategy's bug, which test builds refuse.
    #[test]
    #[should_panic(expected = "pending nodes")]
    fn a_pending_node_in_a_trace_that_is_not_best_effort_fails_test_builds() {
        let rec = Recorder::new("Who?", "toqd");
        rec.upsert_node(NodeTrace { id: "1".into(), question: "a".into(), ..Default::default() });
        rec.finish("yes", None);
    }

    #[test]
    fn trace_round_trips_through_json() {
        let rec = Recorder::new("Who?", "toqd");
        rec.upsert_node(NodeTrace { id: "1".into(), question: "a".into(), ..Default::default() });
        rec.add_edge("1", SINK);
        rec.add_edge("1", SINK);
        rec.update_node("1", |n| n.decision = Decision::Known);
        let trace = rec.finish("yes", None);
        assert_eq!(trace.edges.len(), 1, "duplicate edges are ignored");
        assert_eq!(trace.node("1").map(|n| n.decision), Some(Decision::Known));
        let json = serde_json::to_string(&trace).expect("serialise");
        let back: Trace = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, trace);
        assert!(matches!(back.events.last().map(|e| &e.kind), Some(EventKind::Final { .. })));
    }

    #[test]
    fn support_names_the_passages_that_hold_the_answers() {
        let passage = |id: &str, text: &str| Passage {
            id: id.into(),
            title: String::new(),
            text: text.into(),
            ..Default::default()
        };
        let rec = Recorder::new("Which band?", "toqd");
        rec.upsert_node(NodeTrace {
            id: "1".into(),
            answer: Some("Rush".into()),
            decision: Decision::Retrieved,
            passages: vec![
                passage("a", "Counterparts is by Rush."),
                passage("b", "Rushmore is a film."),
                passage("c", "x"),
            ],
            ..Default::default()
        });
        rec.upsert_node(NodeTrace {
            id: "2".into(),
            answer: Some("Neil Peart".into()),
            decision: Decision::Retrieved,
            passages: vec![passage("d", "A drummer."), passage("a", "Counterparts is by Rush.")],
            ..Default::default()
        });
        rec.upsert_node(NodeTrace {
            id: "3".into(),
            answer: Some("Yes".into()),
            decision: Decision::Known,
            passages: vec![passage("e", "yes")],
            ..Default::default()
        });
        let trace = rec.finish("Rush", None);
        // "Rushmore" is not "Rush"; node 2's answer is in none of its passages, so its top one counts;
        // a yes/no answer matches nothing by itself.
        assert_eq!(trace.support, ["a", "d"]);
        assert_eq!(trace.supporting().iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["a", "d"]);
    }

    #[test]
    fn listener_sees_events_in_order() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let rec = Recorder::new("q", "s").with_listener(tx);
        rec.note("one");
        rec.note("two");
        let a = rx.try_recv().expect("first");
        let b = rx.try_recv().expect("second");
        assert!(a.seq < b.seq);
    }
}
