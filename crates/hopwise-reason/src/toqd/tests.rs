use std::sync::Arc;
use std::time::Duration;

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::{Decision, EventKind, Llm, Prompts, Recorder, Retriever, Trace};

use super::*;
use crate::ctx::Budget;
use crate::details::{
    self,
    toqd::{GateDecision, ToqdNode},
};
use crate::strategy::{build, run, StrategyOptions};

// Needles that identify each template in a prompt.
const DECOMPOSE: &str = "Break the question below";
const CRITIQUE: &str = "Review the candidates";
const CONSTRUCT: &str = "Describe which answers help";
const REWRITE: &str = "Rewrite the question below";
const SELF_VERIFY: &str = "from your own knowledge";
const WITH_CONTEXT: &str = "Using the passages, answer";
const DECOMPOSE_NODE: &str = "could not be answered yet";
const AGGREGATE: &str = "Using the facts, answer the question with a short";
const BEST_EFFORT: &str = "Give your best short answer";
const SUMMARY: &str = "Reply in exactly this form";

fn corpus() -> StaticRetriever {
    StaticRetriever::from_pairs(&[
        ("Neil Peart", "Neil Peart was the drummer of Rush and was inducted into the Modern Drummer Hall of Fame."),
        ("Counterparts", "Counterparts is an album and song by the Canadian rock band Rush."),
        ("Jaws", "Jaws is a 1975 film directed by Steven Spielberg."),
    ])
}

/// The bridge question: node 1 is known, node 2 needs retrieval after rewriting.
fn bridge_model() -> ScriptedLlm {
    bridge_model_summarising("Answer: Rush\nReason: Rush released Counterparts and Neil Peart drummed for it.")
}

fn bridge_model_summarising(summary: &str) -> ScriptedLlm {
    bridge_rules(ScriptedLlm::new(), summary)
}

/// [`bridge_model`] behind the rules `first` already has (the first matching rule answers).
fn bridge_model_after(first: ScriptedLlm) -> ScriptedLlm {
    bridge_rules(first, "Answer: Rush\nReason: Rush released Counterparts and Neil Peart drummed for it.")
}

fn bridge_rules(first: ScriptedLlm, summary: &str) -> ScriptedLlm {
    first
        .on(DECOMPOSE, "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?")
        .on(CRITIQUE, "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?")
        .on(CONSTRUCT, "1 -> 2\n2 -> Q")
        .on(REWRITE, "Who was the drummer of Rush?")
        .on_fn(SELF_VERIFY, |p, _| if p.contains("Counterparts") { "Rush".into() } else { "NO!".into() })
        .on(WITH_CONTEXT, "Neil Peart")
        .on(SUMMARY, summary)
}

/// A node's ToQD detail (the default when it recorded none).
fn detail(node: &hopwise_core::NodeTrace) -> ToqdNode {
    details::read(node).unwrap_or_default()
}

async fn ask(
    strategy: &str,
    options: StrategyOptions,
    llm: impl Llm + 'static,
    retriever: Option<StaticRetriever>,
    budget: Budget,
) -> Trace {
    let s = build(strategy, &options).expect("known strategy");
    let rec = Recorder::new("q", strategy);
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), rec)
        .with_retriever(retriever.map(|r| Arc::new(r) as Arc<dyn Retriever>))
        .with_budget(budget);
    run(s.as_ref(), &ctx, "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?")
        .await
        .expect("runs")
}

/// The paper's protocol: the `NO!` gate, each node searching with its own question, greedy readings
/// and summary, critique of any list.
fn paper() -> StrategyOptions {
    let mut o = node_evidence();
    o.set("gate", serde_json::json!("no"));
    o.set("evidence", serde_json::json!("node"));
    o.set("samples", serde_json::json!(1));
    o.set("critique_min", serde_json::json!(2));
    o.set("compare", serde_json::json!(false));
    o
}

/// Today's defaults, except that each node searches with its own question (the flow most tests
/// below follow step by step).
fn node_evidence() -> StrategyOptions {
    let mut o = StrategyOptions::default();
    o.set("evidence", serde_json::json!("node"));
    o.set("self_verify", serde_json::json!(true));
    o.set("max_expansions", serde_json::json!(6));
    o
}

fn with(mut o: StrategyOptions, key: &str, value: serde_json::Value) -> StrategyOptions {
    o.set(key, value);
    o
}

fn purposes(t: &Trace) -> Vec<String> {
    t.call_purposes()
}

#[tokio::test]
async fn bridge_question_resolves_known_then_retrieved() {
    let t = ask("toqd", paper(), bridge_model(), Some(corpus()), Budget::default()).await;
    assert_eq!(t.answer, "Rush");
    assert!(t.rationale.is_some());
    let n1 = t.node("1").expect("node 1");
    let n2 = t.node("2").expect("node 2");
    assert_eq!(n1.decision, Decision::Known);
    assert_eq!(n1.answer.as_deref(), Some("Rush"));
    assert_eq!(n2.decision, Decision::Retrieved);
    assert_eq!(n2.rewritten.as_deref(), Some("Who was the drummer of Rush?"));
    assert_eq!(n2.parents, vec!["1"]);
    assert_eq!(n2.passages.first().map(|p| p.title.as_str()), Some("Neil Peart"));
    assert!(t.edges.iter().any(|e| e.from == "1" && e.to == "2"));
    assert!(t.edges.iter().any(|e| e.from == "2" && e.to == "Q"));
    assert_eq!(
        purposes(&t),
        vec![
            "decompose",
            "critique",
            "construct",
            "self_verify",
            "rewrite",
            "self_verify",
            "self_verify_context",
            "summary"
        ]
    );
    assert_eq!(t.stats.llm_calls, 8);
    assert_eq!(t.stats.retrieval_rounds, 1);
    assert!(t.stats.input_words > 0 && t.stats.output_words > 0);
    assert!(!t.best_effort);
}

#[tokio::test]
async fn a_bare_yes_summary_to_a_which_question_falls_back_to_the_graph_answer() {
    let llm = bridge_model_summarising("Answer: Yes\nReason: Rush released Counterparts.");
    let t = ask("toqd", paper(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(t.answer, "Neil Peart", "the sink node's answer, not `Yes`");
    assert_eq!(t.rationale, None, "the reason of an unusable summary is not kept");
    assert!(t.repairs.iter().any(|r| r.stage == "summary" && r.rule == "summary_unanswered"), "{:?}", t.repairs);
}

#[tokio::test]
async fn a_yes_summary_to_a_yes_no_question_stands() {
    let llm = bridge_model_summarising("Answer: Yes\nReason: Rush released Counterparts.");
    let s = build("toqd", &node_evidence()).expect("known strategy");
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), Recorder::new("q", "toqd"))
        .with_retriever(Some(Arc::new(corpus()) as Arc<dyn Retriever>));
    let t = run(s.as_ref(), &ctx, "Did the band that released Counterparts have a Hall of Fame drummer?")
        .await
        .expect("runs");
    assert_eq!(t.answer, "Yes");
    assert!(t.repairs.iter().all(|r| r.rule != "summary_unanswered"));
}

#[tokio::test]
async fn siblings_that_differ_in_the_word_that_matters_are_both_kept() {
    let critiqued = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = critiqued.clone();
    let llm = bridge_model_after(
        ScriptedLlm::new()
            .on(
                DECOMPOSE,
                "1. What was the name of the club Leonard Francis played for?\n\
                 2. What was the nickname of the club Leonard Francis played for?",
            )
            .on_fn(CRITIQUE, move |prompt, _| {
                *seen.lock().expect("lock") = prompt.to_string();
                "1. What was the name of the club Leonard Francis played for?".into()
            }),
    );
    let t = ask("toqd", paper(), llm, Some(corpus()), Budget::default()).await;
    let prompt = critiqued.lock().expect("lock").clone();
    assert!(prompt.contains("2. What was the nickname of the club"), "{prompt}");
    assert!(!t.repairs.iter().any(|r| r.rule == "drop_restated_subquestion"));
}

#[tokio::test]
async fn sub_questions_that_restate_the_question_or_each_other_are_dropped() {
    let question = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";
    let critiqued = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = critiqued.clone();
    let llm = ScriptedLlm::new()
        .on(
            DECOMPOSE,
            &format!(
                "1. Which band released the song Counterparts?\n2. {question}\n3. Who was the drummer of that band?\n\
                 4. who was the drummer of THAT band"
            ),
        )
        .on_fn(CRITIQUE, move |prompt, _| {
            *seen.lock().expect("lock") = prompt.to_string();
            "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?".into()
        })
        .on(CONSTRUCT, "1 -> 2\n2 -> Q")
        .on(REWRITE, "Who was the drummer of Rush?")
        .on_fn(SELF_VERIFY, |p, _| if p.contains("Counterparts") { "Rush".into() } else { "NO!".into() })
        .on(WITH_CONTEXT, "Neil Peart")
        .on(SUMMARY, "Answer: Rush");
    let t = ask("toqd", paper(), llm, Some(corpus()), Budget::default()).await;
    let prompt = critiqued.lock().expect("lock").clone();
    assert!(prompt.contains("2. Who was the drummer of that band?"), "{prompt}");
    assert!(!prompt.contains("\n3. "), "two restatements dropped before the critique: {prompt}");
    let rules: Vec<&str> = t.repairs.iter().map(|r| r.rule.as_str()).collect();
    assert_eq!(rules.iter().filter(|r| **r == "drop_restated_subquestion").count(), 2, "{rules:?}");
    assert_eq!(t.answer, "Rush");
}

#[tokio::test]
async fn unanswerable_node_is_decomposed_into_a_child_graph() {
    let llm = ScriptedLlm::new()
        .on(DECOMPOSE_NODE, "1. Who is the drummer of Rush?\n2. Which hall of fame inducted him?")
        .on(DECOMPOSE, "1. Which band had a Hall of Fame drummer?")
        .on(CONSTRUCT, "1 -> 2\n2 -> Q")
        .on(REWRITE, "Which hall of fame inducted Neil Peart?")
        .on_fn(SELF_VERIFY, |p, _| if p.contains("drummer of Rush") { "Neil Peart".into() } else { "NO!".into() })
        .on_fn(WITH_CONTEXT, |p, _| {
            if p.contains("inducted Neil Peart") {
                "Modern Drummer Hall of Fame".into()
            } else {
                "NO!".into()
            }
        })
        .on(AGGREGATE, "Rush")
        .on(SUMMARY, "Answer: Rush");
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
    let n1 = t.node("1").expect("node 1");
    assert_eq!(n1.decision, Decision::Decomposed);
    assert_eq!(n1.children, vec!["1.1", "1.2"]);
    assert_eq!(n1.answer.as_deref(), Some("Rush"), "answered from its children");
    let c2 = t.node("1.2").expect("child 2");
    assert_eq!(c2.decomposes.as_deref(), Some("1"));
    assert_eq!(c2.depth, 1);
    assert_eq!(c2.decision, Decision::Retrieved);
    assert_eq!(t.node("1.1").map(|n| n.decision), Some(Decision::Known));
    assert!(t.edges.iter().any(|e| e.from == "1.1" && e.to == "1.2"));
    assert_eq!(t.answer, "Rush");
    assert_eq!(t.stats.retrieval_rounds, 2, "node 1 and child 1.2 retrieved");
}

#[tokio::test]
async fn exhausted_r_max_answers_best_effort() {
    let llm = ScriptedLlm::new()
        .on(DECOMPOSE_NODE, "1. Something else?")
        .on(DECOMPOSE, "1. Unknowable thing?")
        .on(BEST_EFFORT, "Probably Rush")
        .on(SUMMARY, "Answer: Rush");
    let budget = Budget { r_max: 0, ..Budget::default() };
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), budget).await;
    let n1 = t.node("1").expect("node 1");
    assert_eq!(n1.decision, Decision::Unresolved);
    assert!(n1.best_effort);
    assert_eq!(n1.answer.as_deref(), Some("Probably Rush"));
    assert!(t.notes.iter().any(|n| n.contains("r_max")));
    assert_eq!(
        purposes(&t).iter().filter(|p| *p == "decompose").count(),
        1,
        "only the top-level plan, no node expansion"
    );
}

#[tokio::test]
async fn independent_nodes_run_concurrently() {
    let llm = ScriptedLlm::new()
        .on(DECOMPOSE, "1. Who directed Jaws?\n2. Which band released Counterparts?")
        .on(CRITIQUE, "1. Who directed Jaws?\n2. Which band released Counterparts?")
        .on(CONSTRUCT, "1 -> Q\n2 -> Q")
        .on_fn(SELF_VERIFY, |p, _| if p.contains("Jaws") { "Steven Spielberg".into() } else { "Rush".into() })
        .on(SUMMARY, "Answer: both")
        .latency(Duration::from_millis(40));
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
    let span = |node: &str| {
        t.events
            .iter()
            .find(|e| e.node_id.as_deref() == Some(node) && matches!(e.kind, EventKind::LlmCall { .. }))
            .map(|e| (e.start_ms, e.end_ms))
            .expect("a call for the node")
    };
    let (s1, e1) = span("1");
    let (s2, e2) = span("2");
    assert!(s1 < e2 && s2 < e1, "calls of nodes 1 and 2 overlap: {s1}-{e1} vs {s2}-{e2}");
}

#[tokio::test]
async fn without_retrieval_no_goes_straight_to_decomposition() {
    let llm = ScriptedLlm::new()
        .on(DECOMPOSE_NODE, "1. Who drummed for Rush?")
        .on(DECOMPOSE, "1. Which band had a famous drummer?")
        .on_fn(SELF_VERIFY, |p, _| if p.contains("drummed for Rush") { "Neil Peart".into() } else { "NO!".into() })
        .on(AGGREGATE, "Rush")
        .on(SUMMARY, "Answer: Rush");
    let t = ask("toqd-noir", node_evidence(), llm, None, Budget::default()).await;
    assert_eq!(t.stats.retrieval_rounds, 0);
    assert_eq!(t.node("1").map(|n| n.decision), Some(Decision::Decomposed));
    assert_eq!(t.answer, "Rush");
}

#[tokio::test]
async fn ablation_switches_skip_their_steps() {
    let mut opts = node_evidence();
    for key in ["critique", "construct", "self_verify", "rewrite"] {
        opts.set(key, serde_json::Value::Bool(false));
    }
    let t = ask("toqd", opts, bridge_model(), Some(corpus()), Budget::default()).await;
    let p = purposes(&t);
    for skipped in ["critique", "construct", "self_verify", "rewrite"] {
        assert!(!p.contains(&skipped.to_string()), "{skipped} skipped: {p:?}");
    }
    // Without construct the two sub-questions form a chain; without self-verify both retrieve.
    assert!(t.edges.iter().any(|e| e.from == "1" && e.to == "2"));
    assert_eq!(t.stats.retrieval_rounds, 2);
}

#[tokio::test]
async fn a_failing_backend_gives_a_best_effort_trace_not_an_error() {
    struct Down;
    #[async_trait::async_trait]
    impl Llm for Down {
        fn name(&self) -> &str {
            "down"
        }
        async fn chat(&self, _: &hopwise_core::ChatRequest) -> hopwise_core::Result<hopwise_core::ChatResponse> {
            Err(hopwise_core::Error::backend("down", hopwise_core::BackendErrorKind::Connection, "connection refused"))
        }
    }
    let t = ask("toqd", node_evidence(), Down, Some(corpus()), Budget::default()).await;
    assert!(t.best_effort);
    assert!(t.notes.iter().any(|n| n.contains("connection refused")));
}

#[tokio::test]
async fn bad_input_is_rejected_clearly() {
    let s = build("toqd", &node_evidence()).expect("toqd");
    let ctx = Ctx::new(Arc::new(bridge_model()), Arc::new(Prompts::default()), Recorder::new("", "toqd"));
    assert!(matches!(run(s.as_ref(), &ctx, "  ").await, Err(crate::ReasonError::EmptyQuestion)));
    assert!(matches!(run(s.as_ref(), &ctx, "q?").await, Err(crate::ReasonError::NeedsRetriever(_))));
    let mut bad = node_evidence();
    bad.set("critiq", serde_json::Value::Bool(false));
    assert!(build("toqd", &bad).is_err(), "unknown option keys are rejected");
    assert!(build("nope", &node_evidence()).is_err());
}

#[tokio::test]
async fn bare_no_to_a_wh_question_and_run_on_subquestions_are_not_accepted() {
    let run_on =
        format!("1. Which band released Counterparts?\n2. {}", "That person is the band that released it. ".repeat(12));
    let llm = ScriptedLlm::new()
        .on(DECOMPOSE, &run_on)
        .on_fn(SELF_VERIFY, |_, _| "No".into())
        .on(WITH_CONTEXT, "Rush")
        .on(SUMMARY, "Answer: Rush");
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(t.nodes.iter().filter(|n| n.id != "Q").count(), 1, "the run-on item was dropped");
    assert!(t.repairs.iter().any(|r| r.rule == "drop_overlong_subquestion"));
    let n1 = t.node("1").expect("node 1");
    assert_eq!(n1.decision, Decision::Retrieved, "a bare `No` to a which-question is not an answer");
    assert_eq!(n1.answer.as_deref(), Some("Rush"));
}

/// The uncertainty gate: node 1's sampled closed-book answers agree (known, no retrieval); node 2's
/// disagree (U > θ), so it retrieves; the readings and the summary are voted, and the answer carries
/// the summary's vote share.
fn sampling_model() -> ScriptedLlm {
    sampling_model_after(ScriptedLlm::new())
}

/// [`sampling_model`] behind the rules `first` already has (the first matching rule answers).
fn sampling_model_after(first: ScriptedLlm) -> ScriptedLlm {
    first
        .on(DECOMPOSE, "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?")
        .on(CONSTRUCT, "1 -> 2\n2 -> Q")
        .on(REWRITE, "Who was the drummer of Rush?")
        .on_fn(SELF_VERIFY, |p, i| if p.contains("Counterparts") { "Rush".into() } else { format!("Drummer{i}") })
        .on(WITH_CONTEXT, "Neil Peart")
        .on_fn(SUMMARY, |_, i| if i < 4 { "Answer: Rush\nReason: facts.".into() } else { "Answer: Yes".into() })
}

#[tokio::test]
async fn the_uncertainty_gate_retrieves_only_where_samples_disagree() {
    let t = ask("toqd", node_evidence(), sampling_model(), Some(corpus()), Budget::default()).await;
    let n1 = t.node("1").expect("node 1");
    let n2 = t.node("2").expect("node 2");
    assert_eq!((n1.decision, n1.answer.as_deref()), (Decision::Known, Some("Rush")));
    let (d1, d2) = (detail(n1), detail(n2));
    let gate1 = d1.gate.expect("node 1 asked the gate");
    assert_eq!(gate1.decision, GateDecision::Known);
    assert_eq!(gate1.samples.len(), 5);
    assert_eq!(gate1.uncertainty, 0.0);
    assert_eq!(d1.confidence, Some(1.0));
    assert_eq!((n2.decision, n2.answer.as_deref()), (Decision::Retrieved, Some("Neil Peart")));
    let gate2 = d2.gate.expect("node 2 asked the gate");
    assert_eq!(gate2.decision, GateDecision::Retrieve);
    assert!(gate2.uncertainty > gate2.threshold, "{}", gate2.uncertainty);
    assert_eq!(d2.reading.and_then(|r| r.accepted), Some(true));
    assert_eq!(t.answer, "Rush");
    assert_eq!(t.confidence, Some(0.8), "4 of 5 summaries say Rush");
    // Two items: no critique. One request per gate decision, reading and summary.
    assert_eq!(
        purposes(&t),
        [
            "decompose",
            "construct",
            "uncertainty_samples",
            "rewrite",
            "uncertainty_samples",
            "self_verify_context",
            "summary"
        ]
    );
    assert_eq!(t.stats.retrieval_rounds, 1);
}

/// Samples that may answer `NO!` mostly decline, and a declining majority retrieves whatever `U`
/// is; the gate asks for best guesses instead, so their agreement is what decides.
#[tokio::test]
async fn the_uncertainty_gate_samples_answers_that_cannot_decline() {
    let llm = sampling_model_after(ScriptedLlm::new().on("reply exactly NO!", "NO!"));
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
    let n1 = t.node("1").expect("node 1");
    assert_eq!((n1.decision, n1.answer.as_deref()), (Decision::Known, Some("Rush")));
    let gate = detail(n1).gate.expect("node 1 asked the gate");
    assert!(gate.samples.iter().all(|s| s == "Rush"), "{:?}", gate.samples);
}

#[tokio::test]
async fn a_weak_vote_over_the_passages_sends_the_node_to_decomposition() {
    let llm = sampling_model_after(
        ScriptedLlm::new().on(DECOMPOSE_NODE, "1. Who played drums on Counterparts?").on_fn(WITH_CONTEXT, |p, i| {
            if p.contains("Question: Who was the drummer of Rush?") {
                format!("Name{i}")
            } else {
                "Neil Peart".into()
            }
        }),
    );
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
    let n2 = t.node("2").expect("node 2");
    assert_eq!(n2.decision, Decision::Decomposed);
    let reading = detail(n2).reading.expect("node 2 was read");
    assert_eq!(reading.accepted, Some(false));
    assert!(reading.confidence < 0.5, "{}", reading.confidence);
    assert!(t.node("2.1").is_some(), "the child graph was spliced in");
}

#[tokio::test]
async fn the_both_gate_retrieves_on_no_without_sampling() {
    // The greedy self-verification (sample 0 of a one-sample request) says NO!; samples would agree.
    let llm =
        sampling_model_after(
            ScriptedLlm::new().on_fn(SELF_VERIFY, |_, i| if i == 0 { "NO!".into() } else { "Rush".into() }),
        );
    let opts = with(node_evidence(), "gate", serde_json::json!("both"));
    let t = ask("toqd", opts, llm, Some(corpus()), Budget::default()).await;
    let n1 = t.node("1").expect("node 1");
    assert_eq!(n1.decision, Decision::Retrieved);
    let node_1_calls: Vec<String> = t
        .events
        .iter()
        .filter(|e| e.node_id.as_deref() == Some("1"))
        .filter_map(|e| match &e.kind {
            EventKind::LlmCall { purpose, .. } => Some(purpose.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(node_1_calls, ["self_verify", "self_verify_context"], "NO! retrieves at once");
}

#[tokio::test]
async fn a_rewrite_that_restates_the_main_question_is_not_used() {
    let question = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";
    let llm = sampling_model_after(ScriptedLlm::new().on(REWRITE, question));
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
    let n2 = t.node("2").expect("node 2");
    assert_eq!(n2.rewritten.as_deref(), Some("Who was the drummer of that band? (Rush)"));
    assert!(t.repairs.iter().any(|r| r.rule == "rewrite_restated_question"), "{:?}", t.repairs);
}

#[tokio::test]
async fn a_rewrite_that_is_a_statement_or_a_bare_answer_is_not_used() {
    for rewrite in ["In 1975, Rush had a drummer", "Rush"] {
        let llm = sampling_model_after(ScriptedLlm::new().on(REWRITE, rewrite));
        let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
        let n2 = t.node("2").expect("node 2");
        assert_eq!(n2.rewritten.as_deref(), Some("Who was the drummer of that band? (Rush)"), "{rewrite}");
        assert!(t.repairs.iter().any(|r| r.rule == "rewrite_not_a_question"), "{rewrite}: {:?}", t.repairs);
    }
}

#[tokio::test]
async fn the_defaults_read_the_question_passages_without_a_closed_book_gate_or_child_graphs() {
    // Node 2's readings decline everywhere: with the defaults it is answered best-effort from its
    // own search, not decomposed, and no node asks the model closed-book first.
    let llm = bridge_model_after(
        ScriptedLlm::new()
            .on_fn(WITH_CONTEXT, |p, _| if p.contains("Which band released") { "Rush".into() } else { "NO!".into() })
            .on(BEST_EFFORT, "Neil Peart"),
    );
    let t = ask("toqd", StrategyOptions::default(), llm, Some(corpus()), Budget::default()).await;
    let p = purposes(&t);
    assert!(!p.iter().any(|x| x == "self_verify" || x == "uncertainty_samples"), "{p:?}");
    assert!(!p.iter().any(|x| x == "decompose" && p.iter().filter(|y| *y == "decompose").count() > 1), "{p:?}");
    assert_eq!(t.node("1").map(|n| n.decision), Some(Decision::Retrieved));
    let n2 = t.node("2").expect("node 2");
    assert_eq!(n2.decision, Decision::Unresolved);
    assert_eq!(n2.answer.as_deref(), Some("Neil Peart"));
    assert_eq!(t.stats.retrieval_rounds, 2, "the question's search and node 2's own");
    assert!(t.notes.iter().any(|n| n.contains("max_expansions")), "{:?}", t.notes);
}

/// The facts section of a summary prompt (between "Facts gathered" and the question).
fn summary_facts(prompt: &str) -> &str {
    prompt.split("Facts gathered").nth(1).and_then(|s| s.split("Question:").next()).unwrap_or_default()
}

#[tokio::test]
async fn a_best_effort_guess_is_not_a_fact_for_the_summary() {
    // Node 2's passages do not answer it, so its best-effort guess stays on the node but is kept
    // out of the facts the summary reads; node 1's settled answer is there.
    let llm = bridge_model_after(
        ScriptedLlm::new()
            .on_fn(WITH_CONTEXT, |p, _| if p.contains("Which band released") { "Rush".into() } else { "NO!".into() })
            .on(BEST_EFFORT, "Geddy Lee")
            .on_fn(SUMMARY, |p, _| {
                let facts = summary_facts(p);
                match (facts.contains("Rush"), facts.contains("Geddy Lee")) {
                    (true, false) => "Answer: Rush".into(),
                    _ => "Answer: wrong facts".into(),
                }
            }),
    );
    let t = ask("toqd", StrategyOptions::default(), llm, Some(corpus()), Budget::default()).await;
    let n2 = t.node("2").expect("node 2");
    assert!(n2.best_effort && n2.answer.as_deref() == Some("Geddy Lee"), "{n2:?}");
    assert_eq!(t.answer, "Rush");
}

#[tokio::test]
async fn best_effort_guesses_are_the_summarys_facts_when_no_node_settled() {
    // No node's passages answer it: the guesses are all the graph has, so the summary reads them.
    let llm = bridge_model_after(
        ScriptedLlm::new()
            .on(WITH_CONTEXT, "NO!")
            .on_fn(BEST_EFFORT, |p, _| if p.contains("Which band released") { "Rush".into() } else { "Neil Peart".into() })
            .on_fn(SUMMARY, |p, _| {
                let facts = summary_facts(p);
                match (facts.contains("Rush"), facts.contains("Neil Peart")) {
                    (true, true) => "Answer: Rush".into(),
                    _ => "Answer: wrong facts".into(),
                }
            }),
    );
    let t = ask("toqd", StrategyOptions::default(), llm, Some(corpus()), Budget::default()).await;
    let guessed = ["1", "2"].map(|id| t.node(id).is_some_and(|n| n.best_effort));
    assert_eq!(guessed, [true, true], "{:?}", t.nodes);
    assert_eq!(t.answer, "Rush");
}

#[tokio::test]
async fn a_leaf_that_lost_the_entity_searches_with_the_questions_names() {
    let llm = sampling_model_after(
        ScriptedLlm::new()
            .on(DECOMPOSE, "1. Who was the drummer?\n2. Which band released the song Counterparts?")
            .on(CONSTRUCT, "1 -> Q\n2 -> Q"),
    );
    let t = ask("toqd", node_evidence(), llm, Some(corpus()), Budget::default()).await;
    let queries: Vec<&str> = t
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Retrieval { query, .. } => Some(query.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        queries.iter().any(|q| q.starts_with("Who was the drummer? ") && q.contains("Counterparts")),
        "{queries:?}"
    );
    assert!(t.repairs.iter().any(|r| r.rule == "query_keeps_entities"));
}

#[tokio::test]
async fn the_summary_asks_for_the_thing_itself_unless_the_question_is_yes_no() {
    let llm = sampling_model();
    let _ = ask("toqd", node_evidence(), llm.clone(), Some(corpus()), Budget::default()).await;
    let summary = llm.calls().into_iter().find(|p| p.contains(SUMMARY)).expect("summary prompt");
    assert!(summary.contains("name, date, number") && !summary.contains("yes or no"), "{summary}");

    let llm = sampling_model();
    let s = build("toqd", &node_evidence()).expect("toqd");
    let ctx = Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), Recorder::new("q", "toqd"))
        .with_retriever(Some(Arc::new(corpus()) as Arc<dyn Retriever>));
    let _ = run(s.as_ref(), &ctx, "Did the band that released Counterparts have a Hall of Fame drummer?").await;
    let summary = llm.calls().into_iter().find(|p| p.contains(SUMMARY)).expect("summary prompt");
    assert!(summary.contains("with yes or no"), "{summary}");
}

#[tokio::test]
async fn gate_options_are_validated() {
    for (key, value) in [
        ("samples", serde_json::json!(0)),
        ("read_temperature", serde_json::json!(0.0)),
        ("min_confidence", serde_json::json!(1.5)),
        ("uncertainty", serde_json::json!("numsets")),
        ("gate", serde_json::json!("sometimes")),
    ] {
        let opts = with(node_evidence(), key, value.clone());
        assert!(build("toqd", &opts).is_err(), "{key} = {value} must be refused");
    }
    // One sample is fine with the NO! gate (the paper's greedy protocol), not with a sampling gate.
    assert!(build("toqd", &with(paper(), "samples", serde_json::json!(1))).is_ok());
    assert!(build("toqd", &with(node_evidence(), "samples", serde_json::json!(1))).is_err());
}

/// Time and token budgets stop further model calls; the question still gets the best answer found
/// so far, marked best-effort, and the trace says which budget ran out.
#[tokio::test]
async fn time_and_token_budgets_end_the_question_best_effort() {
    let slow = paper_model_with_latency(Duration::from_millis(150));
    let budget = Budget { max_seconds: Some(0.5), ..Budget::default() };
    let t = ask("toqd", paper(), slow, Some(corpus()), budget).await;
    assert!(t.best_effort, "{:?}", t.notes);
    assert!(t.notes.iter().any(|n| n.contains("max_seconds")), "{:?}", t.notes);
    assert!(t.stats.llm_calls < 8, "the full run makes 8 calls; the budget stopped it at {}", t.stats.llm_calls);
    assert!(t.stats.wall_ms < 2_000);

    let budget = Budget { max_tokens: Some(60), ..Budget::default() };
    let t = ask("toqd", paper(), bridge_model(), Some(corpus()), budget).await;
    assert!(t.best_effort && t.notes.iter().any(|n| n.contains("max_tokens")), "{:?}", t.notes);
    assert!(t.stats.prompt_tokens + t.stats.completion_tokens < 60 + 200, "stopped soon after 60 tokens");
}

fn paper_model_with_latency(latency: Duration) -> ScriptedLlm {
    bridge_model().latency(latency)
}

/// `evidence = question`: one search with the main question; a node that needs evidence reads those
/// passages and searches on its own only when they leave it unanswered.
fn question_evidence() -> StrategyOptions {
    with(with(paper(), "evidence", serde_json::json!("question")), "answer_first", serde_json::json!(false))
}

/// `answer_first`: the question is read over its passages (five samples) before any plan.
fn answer_first() -> StrategyOptions {
    let o = with(paper(), "evidence", serde_json::json!("question"));
    with(o, "samples", serde_json::json!(5))
}

const MAIN_QUESTION: &str = "Which Canadian rock band released Counterparts";

#[tokio::test]
async fn a_sure_reading_of_the_question_answers_it_with_one_call() {
    let llm = bridge_model_after(ScriptedLlm::new().on(WITH_CONTEXT, "Rush"));
    let t = ask("toqd", answer_first(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(t.answer, "Rush");
    assert_eq!(purposes(&t), vec!["read_question"], "no plan, no nodes");
    assert_eq!(t.stats.retrieval_rounds, 1);
    assert_eq!(t.confidence, Some(1.0));
    let q = t.node("Q").expect("node Q");
    assert_eq!(q.decision, Decision::Retrieved);
    assert_eq!(q.answer.as_deref(), Some("Rush"));
    assert!(!q.passages.is_empty());
    assert_eq!(detail(q).reading.and_then(|r| r.accepted), Some(true));
}

#[tokio::test]
async fn an_unsure_reading_plans_and_its_readings_vote_with_the_summary() {
    // The question's readings: three say Rush, two decline (share 0.6, under 0.8). The summaries:
    // two say Genesis, three hedge. Pooled, Rush (3 of 10) beats Genesis (2 of 10).
    let llm = bridge_model_after(
        ScriptedLlm::new()
            .on_fn(WITH_CONTEXT, |prompt, i| {
                if prompt.contains(MAIN_QUESTION) {
                    if i < 3 { "Rush" } else { "NO!" }.into()
                } else {
                    "Neil Peart".into()
                }
            })
            .on_fn(SUMMARY, |_, i| if i < 2 { "Answer: Genesis" } else { "Answer: NO!" }.into()),
    );
    // Off, the agreement of the three that answered does not settle the question.
    let opts = with(answer_first(), "answer_first_agree", serde_json::json!(0));
    let t = ask("toqd", opts, llm, Some(corpus()), Budget::default()).await;
    let p = purposes(&t);
    assert_eq!(p.first().map(String::as_str), Some("read_question"), "{p:?}");
    assert!(p.contains(&"decompose".to_string()) && p.contains(&"summary".to_string()), "{p:?}");
    assert_eq!(t.answer, "Rush");
    assert_eq!(t.confidence, Some(0.3));
    let q = t.node("Q").expect("node Q");
    let d = detail(q);
    assert_eq!(d.reading.and_then(|r| r.accepted), Some(false));
    assert_eq!(d.summary.map(|s| s.pooled_readings), Some(5));
    assert_eq!(q.parents, vec!["2"], "the graph's sink edges still reach Q");
}

/// The question's readings: two say Rush, the next two say `third` and `fourth`, one declines
/// (unsure, and not unanimous). No node is known and no node's passages answer it, so every node
/// guesses; the summaries follow the guesses.
fn unsettled_graph_model(third: &'static str, fourth: &'static str) -> ScriptedLlm {
    bridge_model_after(
        ScriptedLlm::new()
            .on_fn(WITH_CONTEXT, move |prompt, i| {
                if !prompt.contains(MAIN_QUESTION) {
                    return "NO!".into();
                }
                match i {
                    0 | 1 => "Rush".into(),
                    2 => third.into(),
                    3 => fourth.into(),
                    _ => "NO!".into(),
                }
            })
            .on(SELF_VERIFY, "NO!")
            .on(BEST_EFFORT, "Genesis")
            .on(SUMMARY, "Answer: Genesis"),
    )
}

#[tokio::test]
async fn with_no_node_settled_agreeing_readings_of_the_question_outweigh_the_guesses() {
    let t = ask("toqd", answer_first(), unsettled_graph_model("Genesis", "NO!"), Some(corpus()), Budget::default()).await;
    let guessed = ["1", "2"].map(|id| t.node(id).is_some_and(|n| n.best_effort));
    assert_eq!(guessed, [true, true], "{:?}", t.nodes);
    assert_eq!(t.answer, "Rush");
    assert_eq!(t.confidence, Some(0.4), "two of five readings");
    assert!(!purposes(&t).contains(&"summary".to_string()), "no summary: {:?}", purposes(&t));
    assert!(t.repairs.iter().any(|r| r.rule == "question_reading_over_guesses" && r.detail.contains("2 of 5")), "{:?}", t.repairs);

    // A tied plurality is no agreement: the summary decides as before.
    let t = ask("toqd", answer_first(), unsettled_graph_model("Genesis", "Genesis"), Some(corpus()), Budget::default()).await;
    assert!(purposes(&t).contains(&"summary".to_string()), "{:?}", purposes(&t));
    assert!(t.repairs.iter().all(|r| r.rule != "question_reading_over_guesses"), "{:?}", t.repairs);
}

#[tokio::test]
async fn a_graph_that_left_one_node_to_a_guess_yields_to_agreeing_readings_of_the_question() {
    // Node 1 settles from what the model knows; node 2 finds nothing and guesses. The summary
    // would follow the guess (Genesis); two of the question's readings agree on Rush.
    let llm = bridge_model_after(
        ScriptedLlm::new()
            .on_fn(WITH_CONTEXT, |prompt, i| match i {
                0 | 1 if prompt.contains(MAIN_QUESTION) => "Rush".into(),
                2 if prompt.contains(MAIN_QUESTION) => "Genesis".into(),
                _ => "NO!".into(),
            })
            .on_fn(SELF_VERIFY, |p, _| if p.contains("Counterparts") { "Rush".into() } else { "NO!".into() })
            .on(BEST_EFFORT, "Genesis")
            .on(SUMMARY, "Answer: Genesis"),
    );
    let t = ask("toqd", answer_first(), llm, Some(corpus()), Budget::default()).await;
    let guessed = ["1", "2"].map(|id| t.node(id).is_some_and(|n| n.best_effort));
    assert_eq!(guessed, [false, true], "{:?}", t.nodes);
    assert_eq!(t.answer, "Rush");
    assert!(!purposes(&t).contains(&"summary".to_string()), "no summary: {:?}", purposes(&t));
    assert!(t.repairs.iter().any(|r| r.rule == "question_reading_over_guesses"), "{:?}", t.repairs);
}

#[tokio::test]
async fn readings_that_answer_and_agree_settle_the_question_whatever_abstained() {
    // Two samples say Rush, three reply NO!: a share of 0.4, but no sample disagrees.
    let llm = bridge_model_after(ScriptedLlm::new().on_fn(WITH_CONTEXT, |prompt, i| {
        if prompt.contains(MAIN_QUESTION) && i < 2 { "Rush" } else { "NO!" }.into()
    }));
    let t = ask("toqd", answer_first(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(t.answer, "Rush");
    assert_eq!(purposes(&t), vec!["read_question"], "no plan");
    assert_eq!(t.confidence, Some(0.4), "the share is what it is");
    assert!(t.notes.iter().any(|n| n.contains("agree on `Rush`")), "{:?}", t.notes);
    assert_eq!(detail(t.node("Q").expect("node Q")).reading.and_then(|r| r.accepted), Some(true));
}

#[tokio::test]
async fn agreeing_readings_do_not_settle_a_choice_of_two() {
    // Two options agree by chance half the time: the dates (here, none found) and the summary decide.
    let llm = split_model()
        .on_fn(WITH_CONTEXT, |prompt, i| {
            let asked = prompt.rsplit("Question: ").next().unwrap_or("");
            if asked.contains("is longer") && i < 2 { "Alpha" } else { "NO!" }.into()
        })
        .on(SUMMARY, "Answer: Beta");
    let t = ask_question("Which film is longer, Alpha or Beta?", StrategyOptions::default(), llm).await;
    assert!(purposes(&t).contains(&"summary".to_string()), "{:?}", purposes(&t));
    let llm = ScriptedLlm::new().on_fn(WITH_CONTEXT, |_, i| if i < 2 { "Yes" } else { "NO!" }.into()).on(SUMMARY, "Answer: No");
    let t = ask_question("Are Alpha and Beta both films?", StrategyOptions::default(), llm).await;
    assert!(purposes(&t).contains(&"summary".to_string()), "yes/no: {:?}", purposes(&t));

    // Three of five name Alpha (in a sentence) and both nodes only guess: a majority answers, as
    // the option it names.
    let llm = split_model()
        .on_fn(WITH_CONTEXT, |prompt, i| {
            let asked = prompt.rsplit("Question: ").next().unwrap_or("");
            if asked.contains("is longer") && i < 3 { "Alpha is the longer film" } else { "NO!" }.into()
        })
        .on(DECOMPOSE, "1. How long is Alpha?\n2. How long is Beta?")
        .on(CRITIQUE, "1. How long is Alpha?\n2. How long is Beta?")
        .on(CONSTRUCT, "1 -> Q\n2 -> Q")
        .on(SELF_VERIFY, "NO!")
        .on(BEST_EFFORT, "Beta")
        .on(SUMMARY, "Answer: Beta");
    let t = ask_question("Which film is longer, Alpha or Beta?", StrategyOptions::default(), llm).await;
    assert_eq!(t.answer, "Alpha", "{:?} {:?}", purposes(&t), t.repairs);
    assert!(!purposes(&t).contains(&"summary".to_string()), "{:?}", purposes(&t));
    assert!(t.repairs.iter().any(|r| r.rule == "question_reading_over_guesses" && r.detail.contains("3 of 5")));
}

#[tokio::test]
async fn answer_first_is_off_for_the_paper_flow_and_checked() {
    let llm = bridge_model_after(ScriptedLlm::new().on(WITH_CONTEXT, "Rush"));
    let off = with(answer_first(), "answer_first", serde_json::json!(false));
    let t = ask("toqd", off, llm, Some(corpus()), Budget::default()).await;
    assert!(!purposes(&t).contains(&"read_question".to_string()));
    assert!(purposes(&t).contains(&"decompose".to_string()));
    assert!(build("toqd", &with(answer_first(), "answer_first_confidence", serde_json::json!(1.2))).is_err());
}

#[tokio::test]
async fn the_question_passages_answer_a_node_without_a_search_of_its_own() {
    let summary_prompt = Arc::new(std::sync::Mutex::new(String::new()));
    let kept = summary_prompt.clone();
    let llm = bridge_model_after(ScriptedLlm::new().on_fn(SUMMARY, move |prompt, _| {
        *kept.lock().expect("not poisoned") = prompt.to_string();
        "Answer: Rush\nReason: Rush released it.".into()
    }));
    let t = ask("toqd", question_evidence(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(t.answer, "Rush");
    assert_eq!(t.stats.retrieval_rounds, 1, "only the question's search");
    let n2 = t.node("2").expect("node 2");
    assert_eq!(n2.decision, Decision::Retrieved);
    assert_eq!(n2.answer.as_deref(), Some("Neil Peart"));
    let sink = t.node("Q").expect("the sink node carries the question's passages");
    assert!(!sink.passages.is_empty());
    assert_eq!(sink.passages, n2.passages, "node 2 read the question's passages");
    assert_eq!(sink.parents, vec!["2"]);
    assert_eq!(sink.answer.as_deref(), Some("Rush"));
    let p = purposes(&t);
    assert!(p.contains(&"read_question_passages".to_string()));
    assert!(!p.contains(&"self_verify_context".to_string()), "no reading of a node search: {p:?}");
    let summary_prompt = summary_prompt.lock().expect("not poisoned").clone();
    assert!(summary_prompt.contains("\nPassages:\n[1]"), "the summary reads the passages too: {summary_prompt}");
    assert!(summary_prompt.contains("Neil Peart was the drummer of Rush"));
}

#[tokio::test]
async fn a_node_the_question_passages_leave_unanswered_searches_on_its_own() {
    let readings = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = readings.clone();
    let llm = bridge_model_after(ScriptedLlm::new().on_fn(WITH_CONTEXT, move |_, _| {
        // The first reading (the question's passages) declines; the node's own search answers.
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            "NO!".into()
        } else {
            "Neil Peart".into()
        }
    }));
    let t = ask("toqd", question_evidence(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(readings.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(t.stats.retrieval_rounds, 2, "the question's search and node 2's");
    let n2 = t.node("2").expect("node 2");
    assert_eq!(n2.decision, Decision::Retrieved);
    assert_eq!(n2.answer.as_deref(), Some("Neil Peart"));
    let p = purposes(&t);
    let first = p.iter().position(|x| x == "read_question_passages").expect("read the question's passages");
    let second = p.iter().position(|x| x == "self_verify_context").expect("read its own search");
    assert!(first < second);
}

#[tokio::test]
async fn max_node_searches_caps_the_searches_after_the_question_passages() {
    let llm = || {
        ScriptedLlm::new()
            .on(DECOMPOSE, "1. First unknowable thing?\n2. Second unknowable thing?")
            .on(CONSTRUCT, "1 -> Q\n2 -> Q")
            .on(SELF_VERIFY, "NO!")
            .on(WITH_CONTEXT, "NO!")
            .on(BEST_EFFORT, "a guess")
            .on(SUMMARY, "Answer: a guess")
    };
    let opts = with(question_evidence(), "max_expansions", serde_json::json!(0));
    let t = ask("toqd", opts.clone(), llm(), Some(corpus()), Budget::default()).await;
    assert_eq!(t.stats.retrieval_rounds, 2, "the question's search and one node's (default max_node_searches = 1)");
    assert!(t.notes.iter().any(|n| n.contains("max_node_searches")), "notes: {:?}", t.notes);
    let q_passages = t.node("Q").expect("Q").passages.clone();
    let capped = ["1", "2"].iter().filter_map(|id| t.node(id)).filter(|n| n.passages == q_passages).count();
    assert_eq!(capped, 1, "the node past the cap answers from the question's passages");
    assert_eq!(purposes(&t).iter().filter(|p| *p == "best_effort").count(), 2);

    let t =
        ask("toqd", with(opts, "max_node_searches", serde_json::json!(2)), llm(), Some(corpus()), Budget::default())
            .await;
    assert_eq!(t.stats.retrieval_rounds, 3);
}

#[tokio::test]
async fn max_expansions_caps_the_nodes_decomposed_per_question() {
    // Two independent nodes that nothing answers: with max_expansions = 1 only one is decomposed.
    let llm = ScriptedLlm::new()
        .on(DECOMPOSE_NODE, "1. Something narrower?")
        .on(DECOMPOSE, "1. First unknowable thing?\n2. Second unknowable thing?")
        .on(CONSTRUCT, "1 -> Q\n2 -> Q")
        .on(SELF_VERIFY, "NO!")
        .on(WITH_CONTEXT, "NO!")
        .on(BEST_EFFORT, "a guess")
        .on(AGGREGATE, "a guess")
        .on(SUMMARY, "Answer: a guess");
    let opts = with(paper(), "max_expansions", serde_json::json!(1));
    let t = ask("toqd", opts, llm, Some(corpus()), Budget::default()).await;
    let decomposed =
        ["1", "2"].iter().filter(|id| t.node(id).map(|n| n.decision) == Some(Decision::Decomposed)).count();
    assert_eq!(decomposed, 1);
    assert!(t.notes.iter().any(|n| n.contains("max_expansions")), "notes: {:?}", t.notes);
}

// ---------------------------------------------------------------- comparisons of two options

const COMPARE_SPLIT: &str = "Write the question that finds that date";
const LATER: &str = "Which film has the director who died later, Alpha or Beta?";

fn film_corpus() -> StaticRetriever {
    StaticRetriever::from_pairs(&[
        ("Alpha", "Alpha is a 1950 film directed by Ann Roe, who died on 3 May 1970."),
        ("Beta", "Beta is a 1948 film directed by Carl Moe, who died in 1961."),
    ])
}

/// The option a compare-split prompt asks about: the text after its last `Option:`.
fn split_option(prompt: &str) -> String {
    prompt.rsplit("Option: ").next().unwrap_or("").lines().next().unwrap_or("").trim().to_string()
}

async fn ask_question(question: &str, options: StrategyOptions, llm: ScriptedLlm) -> Trace {
    let s = build("toqd", &options).expect("known strategy");
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), Recorder::new("q", "toqd"))
        .with_retriever(Some(Arc::new(film_corpus()) as Arc<dyn Retriever>));
    run(s.as_ref(), &ctx, question).await.expect("runs")
}

/// "Are Alpha and Beta both films?": each subject's node reads its passages; `beta` is Beta's reply.
fn both_model(beta: &'static str) -> ScriptedLlm {
    ScriptedLlm::new()
        .on_fn(WITH_CONTEXT, move |prompt, _| {
            let asked = prompt.rsplit("Question: ").next().unwrap_or("");
            if asked.contains("Alpha and Beta") {
                "Yes".into()
            } else if asked.contains("Alpha") {
                "Yes, Alpha is a 1990 film.".into()
            } else {
                beta.into()
            }
        })
        .on(SUMMARY, "Answer: Yes")
}

#[tokio::test]
async fn a_both_question_is_asked_of_each_subject_alone() {
    let split = || with(StrategyOptions::default(), "split_both", serde_json::json!(true));
    let t = ask_question("Are Alpha and Beta both films?", split(), both_model("No, Beta is a novel.")).await;
    assert_eq!(t.answer, "no", "{:?}", t.repairs);
    let p = purposes(&t);
    for absent in ["read_question", "decompose", "summary"] {
        assert!(!p.contains(&absent.to_string()), "{absent} in {p:?}");
    }
    let asked: Vec<String> = ["1", "2"].iter().filter_map(|id| t.node(id).map(|n| n.question.clone())).collect();
    assert_eq!(asked, ["Is Alpha films?", "Is Beta films?"]);
    assert_eq!(t.rationale.as_deref(), Some("Alpha: yes; Beta: no."));
    assert!(t.repairs.iter().any(|r| r.rule == "both_one_at_a_time"), "{:?}", t.repairs);

    let t = ask_question("Are Alpha and Beta both films?", split(), both_model("Yes")).await;
    assert_eq!(t.answer, "yes");
    assert_eq!(t.confidence, Some(1.0));

    // Off (the default), the question is read whole, and the model's "Yes" answers it.
    let t = ask_question("Are Alpha and Beta both films?", StrategyOptions::default(), both_model("No, Beta is a novel.")).await;
    assert_eq!(t.answer, "Yes");
    assert_eq!(purposes(&t), vec!["read_question"]);
}

fn split_model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on_fn(COMPARE_SPLIT, |prompt, _| format!("When did the director of {} die?", split_option(prompt)))
}

#[tokio::test]
async fn a_dated_comparison_is_decided_by_the_dates_its_option_nodes_find() {
    let llm = split_model().on_fn(WITH_CONTEXT, |prompt, _| {
        let asked = prompt.rsplit("Question: ").next().unwrap_or("");
        if asked.contains("Alpha") { "Ann Roe died on 3 May 1970." } else { "1961" }.into()
    });
    let t = ask_question(LATER, StrategyOptions::default(), llm).await;
    assert_eq!(t.answer, "Alpha", "1970 is later than 1961");
    let p = purposes(&t);
    assert_eq!(p.iter().filter(|x| *x == "compare_split").count(), 1, "Beta's question mirrors Alpha's: {p:?}");
    for absent in ["read_question", "decompose", "summary"] {
        assert!(!p.contains(&absent.to_string()), "{absent} in {p:?}");
    }
    assert_eq!(t.node("1").and_then(|n| n.answer.clone()).as_deref(), Some("Ann Roe died on 3 May 1970"));
    let q = t.node("Q").expect("node Q");
    assert_eq!(q.parents.len(), 2, "both option nodes reach Q");
    let c = detail(q).comparison.expect("comparison recorded");
    assert_eq!(c.dates, vec![Some("1970-05-03".to_string()), Some("1961".to_string())]);
    assert_eq!(c.chosen.as_deref(), Some("Alpha"));
    assert_eq!(t.confidence, Some(1.0));
    assert!(t.rationale.as_deref().is_some_and(|r| r.contains("later")), "{:?}", t.rationale);
}

#[tokio::test]
async fn a_lifespan_comparison_is_decided_by_the_birth_and_death_dates() {
    // The model's own arithmetic is not asked for: each option node finds two dates.
    let llm = ScriptedLlm::new()
        .on_fn(COMPARE_SPLIT, |prompt, _| format!("What were the birth and death dates of {}?", split_option(prompt)))
        .on_fn(WITH_CONTEXT, |prompt, _| {
            let asked = prompt.rsplit("Question: ").next().unwrap_or("");
            if asked.contains("Alpha") { "4 June 1901 – 2 March 1950" } else { "1910 – 1990" }.into()
        });
    let t = ask_question("Who lived to an older age, Alpha or Beta?", StrategyOptions::default(), llm).await;
    assert_eq!(t.answer, "Beta", "about 80 years against 48");
    let c = detail(t.node("Q").expect("node Q")).comparison.expect("comparison recorded");
    assert_eq!(c.direction, crate::toqd::Direction::LongerLife);
    assert_eq!(c.dates[0].as_deref(), Some("1901-06-04/1950-03-02 (48 years)"));
    assert!(t.rationale.as_deref().is_some_and(|r| r.contains("lived longer than")), "{:?}", t.rationale);
    assert!(!purposes(&t).contains(&"summary".to_string()));
}

#[tokio::test]
async fn a_lifespan_split_that_asks_for_one_date_is_not_used() {
    let llm = ScriptedLlm::new()
        .on(COMPARE_SPLIT, "How long did Alpha live?")
        .on(DECOMPOSE, "1. When was Alpha born?")
        .on(CONSTRUCT, "1 -> Q")
        .on(WITH_CONTEXT, "1901")
        .on(SUMMARY, "Answer: Alpha");
    let t = ask_question("Which film has the director who lived longer, Alpha or Beta?", StrategyOptions::default(), llm).await;
    assert_eq!(t.repairs.iter().filter(|r| r.rule == "compare_split_unusable").count(), 2, "{:?}", t.repairs);
    assert_eq!(t.answer, "Alpha");
    assert!(purposes(&t).contains(&"decompose".to_string()), "a director's dates: planned as usual");
}

#[tokio::test]
async fn a_lifespan_of_the_options_themselves_is_asked_without_the_model() {
    let llm = ScriptedLlm::new().on(COMPARE_SPLIT, "When did Alpha die?").on_fn(WITH_CONTEXT, |prompt, _| {
        let asked = prompt.rsplit("Question: ").next().unwrap_or("");
        if asked.contains("Alpha") { "1901 – 1950" } else { "1910 – 1990" }.into()
    });
    let t = ask_question("Who lived longer, Alpha or Beta?", StrategyOptions::default(), llm).await;
    assert!(t.repairs.iter().any(|r| r.rule == "lifespan_question"), "{:?}", t.repairs);
    assert_eq!(t.node("2").map(|n| n.question.clone()).as_deref(), Some("What were the birth and death dates of Beta?"));
    assert_eq!(t.answer, "Beta");
}

#[tokio::test]
async fn options_that_open_the_question_are_compared_too() {
    // "Was A or B …?" is a choice between A and B, not a yes/no question.
    let llm = split_model().on_fn(WITH_CONTEXT, |prompt, _| {
        let asked = prompt.rsplit("Question: ").next().unwrap_or("");
        if asked.contains("Alpha") { "1970" } else { "1961" }.into()
    });
    let t = ask_question("Did Alpha or Beta die first?", StrategyOptions::default(), llm).await;
    assert_eq!(t.answer, "Beta", "1961 is earlier than 1970");
}

#[tokio::test]
async fn an_undecided_comparison_is_summarised_and_only_the_options_vote() {
    // The nodes find directors, not dates; three summaries name a director, two name Beta.
    let llm = split_model().on(WITH_CONTEXT, "Carl Moe").on_fn(SUMMARY, |_, i| {
        if i < 3 { "Answer: Carl Moe" } else { "Answer: Beta\nReason: Carl Moe died later." }.into()
    });
    let t = ask_question(LATER, StrategyOptions::default(), llm).await;
    assert_eq!(t.answer, "Beta");
    let d = detail(t.node("Q").expect("node Q"));
    assert_eq!(d.comparison.and_then(|c| c.chosen), None);
    let summary = d.summary.expect("summarised");
    assert_eq!(summary.restricted_to, vec!["Alpha".to_string(), "Beta".to_string()]);
    assert_eq!(t.rationale.as_deref(), Some("Carl Moe died later."));
}

#[tokio::test]
async fn a_split_about_the_wrong_option_tries_the_other_one() {
    // Asked for Alpha, the model writes about Beta; asked for Beta, it writes a usable question,
    // which Alpha's node mirrors. Options whose title ends in `?` keep it.
    let llm =
        ScriptedLlm::new().on(COMPARE_SPLIT, "When did the director of Beta? die?").on_fn(WITH_CONTEXT, |prompt, _| {
            if prompt.rsplit("Question: ").next().unwrap_or("").contains("Alpha") { "1970" } else { "1961" }.into()
        });
    let t =
        ask_question("Which film has the director who died later, Alpha or Beta??", StrategyOptions::default(), llm)
            .await;
    assert_eq!(t.repairs.iter().filter(|r| r.rule == "compare_split_unusable").count(), 1, "{:?}", t.repairs);
    assert_eq!(t.node("1").map(|n| n.question.clone()).as_deref(), Some("When did the director of Alpha die?"));
    assert_eq!(t.node("2").map(|n| n.question.clone()).as_deref(), Some("When did the director of Beta? die?"));
    assert_eq!(t.answer, "Alpha");
}

#[tokio::test]
async fn a_split_that_loses_its_option_plans_the_question_as_usual() {
    let llm = ScriptedLlm::new()
        .on(COMPARE_SPLIT, "When did he die?")
        .on(DECOMPOSE, "1. Who directed Alpha?\n2. Who directed Beta?")
        .on(CONSTRUCT, "1 -> Q\n2 -> Q")
        .on(WITH_CONTEXT, "Ann Roe")
        .on(SUMMARY, "Answer: Alpha");
    let t = ask_question(LATER, StrategyOptions::default(), llm).await;
    assert_eq!(t.answer, "Alpha");
    assert!(t.repairs.iter().any(|r| r.rule == "compare_split_unusable"), "{:?}", t.repairs);
    assert!(purposes(&t).contains(&"decompose".to_string()));
}

#[tokio::test]
async fn comparisons_plan_like_any_question_with_compare_off() {
    let llm = split_model()
        .on(DECOMPOSE, "1. Who directed Alpha?\n2. Who directed Beta?")
        .on(CONSTRUCT, "1 -> Q\n2 -> Q")
        .on(WITH_CONTEXT, "Ann Roe")
        .on(SUMMARY, "Answer: Ann Roe");
    let off = with(StrategyOptions::default(), "compare", serde_json::json!(false));
    let t = ask_question(LATER, off, llm).await;
    assert!(!purposes(&t).contains(&"compare_split".to_string()));
    assert_eq!(t.answer, "Ann Roe", "no restriction to the options either");
}

#[tokio::test]
async fn a_when_node_that_found_a_name_searches_with_it() {
    // Beta's node first reads the director's name (no date): that reading does not answer "when",
    // and the node's own search adds the name to its query; the next reading finds the year.
    let beta_readings = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = beta_readings.clone();
    let llm = ScriptedLlm::new()
        .on_fn(COMPARE_SPLIT, |prompt, _| format!("When was the director of {} born?", split_option(prompt)))
        .on_fn(WITH_CONTEXT, move |prompt, i| {
            let asked = prompt.rsplit("Question: ").next().unwrap_or("");
            if asked.contains("Alpha") {
                return "1921".into();
            }
            // Which of Beta's requests this is: sample 0 opens a request.
            let request = if i == 0 {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
            } else {
                seen.load(std::sync::atomic::Ordering::SeqCst)
            };
            if request == 1 { "Carl Moe" } else { "1901" }.into()
        });
    let t =
        ask_question("Which film has the director who was born first, Alpha or Beta?", StrategyOptions::default(), llm)
            .await;
    let repair = t.repairs.iter().find(|r| r.rule == "query_follows_lead").expect("the search followed the name");
    assert!(repair.detail.contains("Carl Moe"), "{}", repair.detail);
    assert_eq!(t.node("2").and_then(|n| n.answer.clone()).as_deref(), Some("1901"));
    assert_eq!(t.answer, "Beta", "1901 is earlier than 1921");
}

/// `question_gate`: the gate asks about the question itself before any search.
fn question_gate() -> StrategyOptions {
    with(StrategyOptions::default(), "question_gate", serde_json::json!(true))
}

#[tokio::test]
async fn a_question_the_model_knows_closed_book_is_answered_without_a_search() {
    // Every best guess about the main question names Rush; nothing else would answer it.
    let llm = ScriptedLlm::new().on_fn(SELF_VERIFY, |p, _| {
        if p.contains("Hall of Fame drummer") { "Rush".into() } else { "unexpected".into() }
    });
    let t = ask("toqd", question_gate(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(t.answer, "Rush");
    assert_eq!(purposes(&t), ["uncertainty_samples"], "one request of samples, nothing else");
    assert_eq!(t.stats.retrieval_rounds, 0);
    let q = t.node("Q").expect("node Q");
    assert_eq!(q.decision, Decision::Known);
    let gate = detail(q).gate.expect("the gate's record on Q");
    assert_eq!((gate.decision, gate.samples.len(), gate.uncertainty), (GateDecision::Known, 5, 0.0));
    assert_eq!(t.confidence, Some(1.0));
}

#[tokio::test]
async fn an_unsure_question_gate_goes_on_to_the_search() {
    // The best guesses about the main question disagree; the passages settle it.
    let llm = bridge_model_after(
        ScriptedLlm::new()
            .on_fn(SELF_VERIFY, |p, i| if p.contains("Hall of Fame drummer") { format!("Band{i}") } else { "NO!".into() })
            .on_fn(WITH_CONTEXT, |p, _| if p.contains("Hall of Fame drummer") { "Rush".into() } else { "NO!".into() }),
    );
    let t = ask("toqd", question_gate(), llm, Some(corpus()), Budget::default()).await;
    assert_eq!(t.answer, "Rush");
    assert_eq!(purposes(&t)[..2], ["uncertainty_samples", "read_question"]);
    assert_eq!(t.stats.retrieval_rounds, 1);
    let q = t.node("Q").expect("node Q");
    assert_eq!(q.decision, Decision::Retrieved);
    assert!(!q.passages.is_empty(), "the question's passages are kept on Q");
    let gate = detail(q).gate.expect("the gate's record on Q");
    assert_eq!(gate.decision, GateDecision::Retrieve);
    assert!(gate.uncertainty > gate.threshold);
}

const KIND: &str = "the name of a person, a place";
const PLACE_QUESTION: &str = "What is the place of birth of the director of film Jaws?";

/// "Where was the director of Jaws born?": the question's readings name the director; the graph
/// finds him; the birthplace node's passages do not answer it, so it guesses; the guess and the
/// summary are sentences.
fn birthplace_model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on_fn(KIND, |p, _| if p.contains("Spielberg") { "person" } else { "place" }.into())
        .on(DECOMPOSE, "1. Who directed the film Jaws?\n2. Where was that director born?")
        .on(CRITIQUE, "1. Who directed the film Jaws?\n2. Where was that director born?")
        .on(CONSTRUCT, "1 -> 2\n2 -> Q")
        .on(REWRITE, "Where was Steven Spielberg born?")
        .on_fn(WITH_CONTEXT, |p, _| {
            if p.contains("Where was Steven Spielberg born") {
                "NO!".into()
            } else {
                "Steven Spielberg".into()
            }
        })
        .on(BEST_EFFORT, "Steven Spielberg was born in Cincinnati, Ohio on December 18, 1946.")
        .on(SUMMARY, "Answer: Steven Spielberg was born in Cincinnati, Ohio.")
}

fn jaws_corpus() -> StaticRetriever {
    StaticRetriever::from_pairs(&[
        ("Jaws", "Jaws is a 1975 film directed by Steven Spielberg."),
        ("Spielberg filmography", "Steven Spielberg (born December 18, 1946) is an American film director."),
    ])
}

async fn ask_where(options: &StrategyOptions) -> Trace {
    let s = build("toqd", options).expect("toqd");
    let ctx = Ctx::new(Arc::new(birthplace_model()), Arc::new(Prompts::default()), Recorder::new("q", "toqd"))
        .with_retriever(Some(Arc::new(jaws_corpus()) as Arc<dyn Retriever>));
    run(s.as_ref(), &ctx, PLACE_QUESTION).await.expect("runs")
}

#[tokio::test]
async fn a_person_is_no_answer_to_a_question_that_asks_where() {
    let t = ask_where(&answer_first()).await;
    assert_eq!(t.answer, "Cincinnati, Ohio", "{:?}", t.repairs);
    let q = t.node("Q").expect("node Q");
    assert_eq!(detail(q).reading.and_then(|r| r.accepted), Some(false), "the director's name did not settle it");
    assert!(
        t.repairs.iter().any(|r| r.rule == "answer_names_a_person" && r.stage == "read:Q" && r.detail.contains("Steven Spielberg")),
        "{:?}",
        t.repairs
    );
    // Node 1 asks who, so its answer is not labelled; node 2's guess, a sentence, reads as its place.
    assert_eq!(t.node("1").and_then(|n| n.answer.clone()).as_deref(), Some("Steven Spielberg"));
    assert_eq!(t.node("2").and_then(|n| n.answer.clone()).as_deref(), Some("Cincinnati, Ohio"));
    assert!(purposes(&t).contains(&"answer_kind".to_string()));
    // The person led one search with the question; its reading named him again, so the graph ran.
    // That search was the question's one node search: node 2 found no answer and did not search.
    let lead = t.repairs.iter().find(|r| r.rule == "query_follows_lead").expect("the lead was followed");
    assert_eq!(lead.stage, "retrieve:Q");
    assert_eq!(t.stats.retrieval_rounds, 2, "the question's search and the lead's");
    assert!(t.notes.iter().any(|n| n.contains("node 2: max_node_searches reached")), "{:?}", t.notes);

    // Off, the question's unanimous reading answers with one call.
    let t = ask_where(&with(answer_first(), "answer_kind", serde_json::json!(false))).await;
    assert_eq!(t.answer, "Steven Spielberg");
    assert_eq!(purposes(&t), vec!["read_question"]);
}

#[tokio::test]
async fn the_person_a_where_reading_names_leads_a_search_that_can_settle_the_question() {
    // The director's own page shares no word with the question: only the search with his name finds it.
    let corpus = StaticRetriever::from_pairs(&[
        ("Jaws", "Jaws is a 1975 film directed by Steven Spielberg."),
        ("Steven Spielberg", "Spielberg was born in Cincinnati, Ohio."),
    ]);
    let llm = ScriptedLlm::new()
        .on_fn(KIND, |p, _| if p.contains("Spielberg") { "person" } else { "place" }.into())
        .on_fn(WITH_CONTEXT, |p, _| {
            if p.contains("Cincinnati") { "Steven Spielberg was born in Cincinnati, Ohio." } else { "Steven Spielberg" }.into()
        });
    let s = build("toqd", &answer_first()).expect("toqd");
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), Recorder::new("q", "toqd"))
        .with_retriever(Some(Arc::new(corpus) as Arc<dyn Retriever>));
    let t = run(s.as_ref(), &ctx, PLACE_QUESTION).await.expect("runs");
    assert_eq!(t.answer, "Cincinnati, Ohio");
    assert_eq!(purposes(&t), vec!["read_question", "answer_kind", "read_question_lead", "answer_kind"]);
    assert_eq!(t.stats.retrieval_rounds, 2);
    let q = t.node("Q").expect("node Q");
    assert!(q.passages.iter().any(|p| p.title == "Steven Spielberg"), "the lead's passages are on Q");
    assert_eq!(q.decision, Decision::Retrieved);
}

#[tokio::test]
async fn a_date_is_never_labelled_a_person() {
    // The labeller would call anything a person; a reading with a digit is not sent to it.
    let llm = ScriptedLlm::new().on(KIND, "person").on(WITH_CONTEXT, "29 January 1943");
    let s = build("toqd", &answer_first()).expect("toqd");
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), Recorder::new("q", "toqd"))
        .with_retriever(Some(Arc::new(jaws_corpus()) as Arc<dyn Retriever>));
    let t = run(s.as_ref(), &ctx, PLACE_QUESTION).await.expect("runs");
    assert_eq!(purposes(&t), vec!["read_question"], "{:?}", t.repairs);
    assert_eq!(t.answer, "29 January 1943");
}

#[test]
fn a_list_cut_off_at_the_token_cap_loses_its_unfinished_item() {
    let items: Vec<String> = ["Which band released Counterparts?", "Which Canadian rock band released a song and had a"]
        .map(String::from)
        .to_vec();
    assert_eq!(super::cut_off_item(&items, true), Some(items[1].as_str()));
    assert_eq!(super::cut_off_item(&items, false), None, "a list that ended by itself keeps its items");
    assert_eq!(super::cut_off_item(&items[..1], true), None, "a finished question stays");
    assert_eq!(super::cut_off_item(&[], true), None);
}
