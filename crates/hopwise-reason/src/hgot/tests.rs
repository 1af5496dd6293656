//! End-to-end runs of `hgot` through `strategy::run` with a scripted model, the static retriever
//! and a word-overlap NLI, asserting on the trace.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::{ChatRequest, ChatResponse, Embedder, EventKind, Llm, Nli, Prompts, Recorder, Trace};
use serde_json::Value;

use super::citations::tests::WordNli;
use super::*;
use crate::ctx::Budget;
use crate::details::hgot::{EdgesFrom, HgotNode, HgotTrace, SigmaEntry, StopDetail, StopReason, StopRecord};
use crate::strategy::{build, run, StrategyOptions};

const QUESTION: &str = "Where was the director of Jaws born?";

fn corpus() -> StaticRetriever {
    StaticRetriever::from_pairs(&[
        ("Jaws (film)", "Jaws is a 1975 film directed by Steven Spielberg."),
        ("Steven Spielberg", "Steven Spielberg was born in Cincinnati, Ohio."),
        ("Sharks", "Sharks live in oceans and eat fish."),
    ])
}

/// `[n]` of the first prompt passage containing `keyword`, or a dangling `[9]`.
fn cite(prompt: &str, keyword: &str) -> String {
    prompt
        .lines()
        .filter(|l| l.starts_with('['))
        .find(|l| l.contains(keyword))
        .and_then(|l| l.split(']').next())
        .map(|n| format!("{n}]"))
        .unwrap_or_else(|| "[9]".into())
}

/// The text after the last `Question: ` in the prompt.
fn question_of(prompt: &str) -> &str {
    prompt.rsplit("Question: ").next().and_then(|s| s.lines().next()).unwrap_or("").trim()
}

const PROBE: &str = "Reason about the question from the passages";
const PLAN: &str = "Plan how to find the answer";
const REFLECT: &str = "Look at the steps again";
const FORMALIZE: &str = "Write the dependencies as arrows";
const REWRITE: &str = "Rewrite the search question";
const INFER: &str = "Answers to the sub-questions:";

/// The script of the main scenario: a two-step plan (2 depends on 1) under the question.
fn scenario(prompt: &str, i: u32) -> String {
    let q = question_of(prompt);
    if prompt.contains("Hypothesis:") {
        return "entail".into();
    }
    if prompt.contains(INFER) {
        return format!(
            "Rationale: Steven Spielberg directed Jaws {}. He was born in Cincinnati {}.\nAnswer: Cincinnati",
            cite(prompt, "directed"),
            cite(prompt, "Cincinnati")
        );
    }
    if prompt.contains(PROBE) {
        return match q {
            QUESTION => match i {
                0 | 1 => format!(
                    "Rationale: Jaws was directed by Steven Spielberg {}. Steven Spielberg was born in Cincinnati {}.\nAnswer: Cincinnati",
                    cite(prompt, "directed"),
                    cite(prompt, "Cincinnati")
                ),
                2 => "Rationale: Jaws was directed by Steven Spielberg.\nAnswer: Boston".into(),
                3 => "Answer: Cincinnati.".into(),
                _ => "Rationale: Spielberg likes boats [7].\nAnswer: Boston".into(),
            },
            "Who directed Jaws?" => format!(
                "Rationale: Jaws was directed by Steven Spielberg {}.\nAnswer: Steven Spielberg",
                cite(prompt, "directed")
            ),
            _ => format!(
                "Rationale: Steven Spielberg was born in Cincinnati {}.\nAnswer: Cincinnati",
                cite(prompt, "Cincinnati")
            ),
        };
    }
    if prompt.contains(PLAN) {
        return match q {
            QUESTION => "Step 1: Who directed Jaws?\nStep 2: Where was the director found in Step 1 born?\nStep 2 depends on Step 1."
                .into(),
            "Who directed Jaws?" => "Step 1: Who directed Jaws?".into(),
            _ => "I cannot plan this.".into(),
        };
    }
    if prompt.contains(REFLECT) {
        return "Step 2 depends on Step 1.".into();
    }
    if prompt.contains(FORMALIZE) {
        return "Step 1 -> Step 2".into();
    }
    if prompt.contains(REWRITE) {
        return "Where was Steven Spielberg born?".into();
    }
    "?".into()
}

fn options(v: Value) -> StrategyOptions {
    match v {
        Value::Object(map) => StrategyOptions(map),
        _ => StrategyOptions::default(),
    }
}

fn context(llm: &ScriptedLlm, nli: Option<Arc<dyn Nli>>) -> Ctx {
    Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), Recorder::new(QUESTION, "hgot"))
        .with_retriever(Some(Arc::new(corpus())))
        .with_nli(nli)
}

/// Runs the paper's flow (`hgot-paper`): most tests here check Algorithm 1 itself.
async fn answer_with(opts: Value, ctx: &Ctx) -> Trace {
    answer_as("hgot-paper", opts, ctx).await
}

async fn answer_as(strategy: &str, opts: Value, ctx: &Ctx) -> Trace {
    let strategy = build(strategy, &options(opts)).expect("valid options");
    run(strategy.as_ref(), ctx, QUESTION).await.expect("trace")
}

/// `hgot`: a Probe whose confidence reaches `stop_confidence` answers, and nothing is planned.
#[tokio::test]
async fn a_confident_probe_answers_without_a_plan() {
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_as("hgot", serde_json::json!({}), &ctx).await;
    assert_eq!(trace.answer, "Cincinnati");
    let record = stop(&trace, "Q");
    assert_eq!(record.reason, StopReason::Confident);
    let Some(StopDetail::Confidence { confidence, stop_confidence }) = record.detail else {
        panic!("the confidence and the threshold are recorded: {record:?}")
    };
    assert!(confidence >= stop_confidence && (stop_confidence - 0.5).abs() < 1e-9, "{confidence} {stop_confidence}");
    assert_eq!(trace.confidence, Some(confidence), "the answer's confidence is the trace's");
    assert!(!llm.calls().iter().any(|p| p.contains(PLAN)), "no plan was asked for");
    assert_eq!(trace.nodes.len(), 1);

    // Above the Probe's confidence, the same question is planned as the paper does.
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_as("hgot", serde_json::json!({"stop_confidence": 1.0}), &ctx).await;
    assert!(llm.calls().iter().any(|p| p.contains(PLAN)));
    assert!(node_detail(&trace, "Q").stop.is_none_or(|s| s.reason != StopReason::Confident));
}

/// `hgot`: a Probe whose samples all give one answer stops with confidence 1 whatever its
/// citations weigh, so they are not judged; judging them gives the same answer.
#[tokio::test]
async fn a_unanimous_probe_skips_its_judgements_and_answers_the_same() {
    let unanimous = |prompt: &str, i: u32| {
        if prompt.contains(PROBE) && question_of(prompt) == QUESTION {
            return format!(
                "Rationale: Steven Spielberg directed Jaws {}. He was born in Cincinnati {}.\nAnswer: Cincinnati",
                cite(prompt, "directed"),
                cite(prompt, "Cincinnati")
            );
        }
        scenario(prompt, i)
    };
    let run_with = |opts: Value| async move {
        let llm = ScriptedLlm::new().on_fn("", unanimous);
        let ctx = context(&llm, Some(Arc::new(WordNli)));
        answer_as("hgot", opts, &ctx).await
    };
    let skipped = run_with(serde_json::json!({})).await;
    let judged = run_with(serde_json::json!({"judge_unanimous": true})).await;
    assert_eq!((skipped.answer.as_str(), judged.answer.as_str()), ("Cincinnati", "Cincinnati"));
    assert_eq!((skipped.confidence, judged.confidence), (Some(1.0), Some(1.0)));
    assert_eq!(stop(&skipped, "Q").reason, StopReason::Confident);
    assert_eq!(skipped.stats.nli_calls, 0, "nothing was judged");
    assert!(judged.stats.nli_calls > 0, "the citations were judged when asked");
    let probe = node_detail(&skipped, "Q").probe.expect("the probe's record");
    assert_eq!(probe.unjudged_samples, 5, "the skip is counted");
    assert_eq!(node_detail(&judged, "Q").probe.expect("probe").unjudged_samples, 0);
    assert!(skipped.notes.iter().any(|n| n.contains("not judged")), "{:?}", skipped.notes);
}

/// `hgot`: after INFER, the graph's answer replaces the Probe's only when it is at least as
/// confident; `hgot-paper` always takes the graph's.
#[tokio::test]
async fn the_probe_answer_is_kept_over_a_less_confident_graph() {
    // INFER's thoughts disagree and cite nothing, so its vote is weak.
    let unsure_infer = |prompt: &str, i: u32| {
        if prompt.contains(INFER) && !prompt.contains("Hypothesis:") {
            return if i.is_multiple_of(2) { "Answer: Boston".into() } else { "Answer: Dayton".into() };
        }
        scenario(prompt, i)
    };
    let run_with = |strategy: &'static str, opts: Value| async move {
        let llm = ScriptedLlm::new().on_fn("", unsure_infer);
        let ctx = context(&llm, Some(Arc::new(WordNli)));
        answer_as(strategy, opts, &ctx).await
    };
    let product = run_with("hgot", serde_json::json!({"stop_confidence": 1.0})).await;
    assert_eq!(product.answer, "Cincinnati");
    let kept = node_detail(&product, "Q").kept.expect("the decision is recorded");
    assert_eq!(kept.kept, "probe");
    assert!(kept.probe_confidence > kept.infer_confidence, "{kept:?}");

    let paper = run_with("hgot-paper", serde_json::json!({})).await;
    assert_ne!(paper.answer, "Cincinnati", "the paper answers from the graph");
    assert!(node_detail(&paper, "Q").kept.is_none());
}

/// Entails when the hypothesis's last word occurs in the premise: a judge of the answer alone.
struct LastWordNli;

#[async_trait]
impl Nli for LastWordNli {
    fn name(&self) -> &str {
        "last-word"
    }
    async fn judge(&self, premise: &str, hypothesis: &str) -> hopwise_core::Result<hopwise_core::NliVerdict> {
        let last = hypothesis.split_whitespace().last().unwrap_or("").trim_matches(|c: char| !c.is_alphanumeric());
        let entailed = !last.is_empty() && premise.contains(last);
        let label = if entailed { hopwise_core::NliLabel::Entailment } else { hopwise_core::NliLabel::Neutral };
        Ok(hopwise_core::NliVerdict::certain(label))
    }
}

/// `answer_claim`: Probe thoughts whose rationales are bare markers weigh by whether the passages
/// they cite support their answer; without it they all weigh `alpha` and the plain majority wins.
#[tokio::test]
async fn bare_marker_rationales_are_scored_on_their_answer() {
    let bare = |prompt: &str, i: u32| {
        if prompt.contains(PROBE) && question_of(prompt) == QUESTION {
            return match i {
                0 | 1 => format!("Rationale: {}\nAnswer: Cincinnati", cite(prompt, "Cincinnati")),
                _ => format!("Rationale: {}\nAnswer: Boston", cite(prompt, "directed")),
            };
        }
        scenario(prompt, i)
    };
    let run_with = |opts: Value| async move {
        let llm = ScriptedLlm::new().on_fn("", bare);
        let ctx = context(&llm, Some(Arc::new(LastWordNli)));
        answer_as("hgot", opts, &ctx).await
    };
    let plain = run_with(serde_json::json!({})).await;
    assert_eq!(plain.answer, "Boston", "every thought weighs alpha: three of five win");
    assert_eq!(plain.stats.nli_calls, 0, "no statement, nothing to judge");

    let claimed = run_with(serde_json::json!({"answer_claim": true})).await;
    assert_eq!(claimed.answer, "Cincinnati", "the thoughts whose passage supports their answer weigh more");
    assert!(claimed.stats.nli_calls > 0);
    let probe = node_detail(&claimed, "Q").probe.expect("the probe's record");
    let claim = &probe.samples[0].statements[0];
    assert_eq!(claim.claim, format!("The answer to the question \"{QUESTION}\" is Cincinnati."));
    assert!(claim.supported && probe.samples[0].rho > probe.samples[2].rho, "{probe:?}");
    assert!(!probe.samples[2].statements[0].supported);

    let templates = |opts: Value| crate::strategy::templates(build("hgot", &options(opts)).expect("builds").as_ref());
    assert!(templates(serde_json::json!({"answer_claim": true})).contains(&"hgot_answer_claim"));
    assert!(!templates(serde_json::json!({})).contains(&"hgot_answer_claim"), "off: not in the fingerprint");
}

/// The STOP decision recorded on node `node`.
fn stop(trace: &Trace, node: &str) -> StopRecord {
    node_detail(trace, node).stop.unwrap_or_else(|| panic!("node {node} recorded no STOP decision"))
}

/// HGOT's trace-level detail.
fn trace_detail(trace: &Trace) -> HgotTrace {
    serde_json::from_value(trace.extra.clone()).expect("HGOT's trace detail")
}

/// A node's HGOT detail.
fn node_detail(trace: &Trace, node: &str) -> HgotNode {
    let n = trace.node(node).unwrap_or_else(|| panic!("node {node}"));
    details::read(n).unwrap_or_else(|| panic!("node {node} has no HGOT detail: {}", n.extra))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn rules(trace: &Trace) -> Vec<&str> {
    trace.repairs.iter().map(|r| r.rule.as_str()).collect()
}

#[tokio::test]
async fn end_to_end_hierarchy_votes_and_passage_scores() {
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_with(serde_json::json!({}), &ctx).await;

    assert_eq!(trace.answer, "Cincinnati");
    assert!(!trace.best_effort, "{:?}", trace.notes);
    assert!(trace.rationale.as_deref().is_some_and(|r| r.contains('[')));

    // The hierarchy: Q (layer 0) planned steps 1 and 2 (layer 1); 2 depends on 1 and feeds Q.
    let ids: Vec<&str> = trace.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, vec!["Q", "1", "2"]);
    let root = trace.node("Q").expect("root");
    assert_eq!(
        (root.depth, root.decision, root.children.clone()),
        (0, Decision::Decomposed, vec!["1".into(), "2".into()])
    );
    let (one, two) = (trace.node("1").expect("1"), trace.node("2").expect("2"));
    assert_eq!((one.depth, one.decomposes.as_deref()), (1, Some("Q")));
    assert_eq!(two.parents, vec!["1".to_string()]);
    assert_eq!(two.rewritten.as_deref(), Some("Where was Steven Spielberg born?"));
    let edges: Vec<(&str, &str)> = trace.edges.iter().map(|e| (e.from.as_str(), e.to.as_str())).collect();
    assert_eq!(edges, vec![("1", "2"), ("2", "Q")]);
    let (q, d1, d2) = (node_detail(&trace, "Q"), node_detail(&trace, "1"), node_detail(&trace, "2"));
    assert_eq!(d2.layer, Some(1));
    let plan = q.plan.as_ref().expect("Q planned");
    assert_eq!(plan.edges_from, Some(EdgesFrom::Formalize));
    assert_eq!(plan.edges, Some(vec![(1, 2)]));

    // STOP: step 1's one-step plan repeats its question (Jaccard 1 ≥ 0.6); step 2 planned nothing.
    let stop1 = d1.stop.as_ref().expect("1 stopped");
    assert_eq!(stop1.reason, StopReason::SingleStep);
    assert!(matches!(&stop1.detail, Some(StopDetail::Similarity(t)) if t.method == "jaccard"), "{stop1:?}");
    assert_eq!((one.decision, one.answer.as_deref()), (Decision::Retrieved, Some("Steven Spielberg")));
    assert_eq!(d2.stop.as_ref().map(|s| s.reason), Some(StopReason::NoSteps));
    assert!(trace.notes.iter().any(|n| n.starts_with("STOP similarity: jaccard")));

    // The root's probe, by hand: samples 0 and 1 fully cited (ρ = 0.2 + 0.4 + 0.4 = 1), sample 2
    // uncited, 3 without rationale, 4 citing a passage that does not exist (ρ = 0.2 each).
    let probe = q.probe.as_ref().expect("Q probed");
    let rho: Vec<f64> = probe.samples.iter().map(|s| s.rho).collect();
    assert!(rho.iter().zip([1.0, 1.0, 0.2, 0.2, 0.2]).all(|(a, b)| close(*a, b)), "{rho:?}");
    assert_eq!(probe.samples[0].rec, 1.0);
    assert_eq!(probe.samples[4].statements[0].dangling, vec![7]);
    assert_eq!(probe.votes[0].normalized, "cincinnati");
    assert!(close(probe.votes[0].weight, 2.2));
    assert!(close(probe.votes[1].weight, 0.4));
    let ci = probe.confidence;
    assert!(close(ci, 2.2 / 2.6));
    assert_eq!(d1.probe.as_ref().map(|p| p.confidence), Some(1.0), "unanimous");
    assert!(rules(&trace).contains(&"dangling_citation"));
    assert!(rules(&trace).contains(&"no_steps"));

    // σ history: the root retrieved p1 (2 shared words) then p0 (1) → σ0 = 1, 0.5; both are cited
    // by both good thoughts → ν̄ = 1; σ1 = 0.2·σ0 + 0.55 + 0.25·CI.
    let recorded = trace_detail(&trace);
    let entry = |node: &str, stage: &str, passage: &str| {
        recorded.sigma_history.iter().find_map(|h| match h {
            SigmaEntry::Update { node: n, stage: s, passage: p, sigma, .. }
            | SigmaEntry::Retrieved { node: n, stage: s, passage: p, sigma, .. }
                if n == node && s == stage && p == passage =>
            {
                Some(*sigma)
            }
            _ => None,
        })
    };
    assert_eq!(entry("Q", "retrieved", "p1"), Some(1.0));
    assert_eq!(entry("Q", "retrieved", "p0"), Some(0.5));
    assert!(close(entry("Q", "probe", "p1").unwrap_or(0.0), 0.2 + 0.55 + 0.25 * ci));
    assert!(close(entry("Q", "probe", "p0").unwrap_or(0.0), 0.1 + 0.55 + 0.25 * ci));
    assert!(entry("Q", "infer", "p1").is_some(), "infer updates the passages it used");
    assert!(entry("Q", "retrieved", "p2").is_none(), "the shark passage shares no word with the question");
    let ranked = q.infer.as_ref().and_then(|i| i.ranked.clone()).expect("infer ranked the passages");
    assert_eq!(ranked.len(), 2, "two distinct passages were collected under Q");
    assert!(ranked[0].sigma >= ranked[1].sigma);

    // Stats: judgements are cached across nodes (the steps' claims repeat the root's).
    assert_eq!(trace.stats.nli_calls, 4);
    assert_eq!(recorded.nli_calls, 4);
    assert_eq!(trace.stats.retrieval_rounds, 3);
    // probe, plan, reflect, formalize (Q); probe, plan (1); rewrite, probe, plan (2); infer (Q).
    assert_eq!(trace.stats.llm_calls, 10);
    let sampled: Vec<u32> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LlmCall { purpose, n, .. } if purpose == "probe" || purpose == "infer" => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(sampled, vec![5, 5, 5, 5], "m samples in one request per Probe/Infer");
}

#[tokio::test]
async fn alpha_only_reduces_to_self_consistency() {
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_with(serde_json::json!({ "alpha": 1.0, "beta": 0.0, "gamma": 0.0, "max_depth": 0 }), &ctx).await;
    let probe = node_detail(&trace, "Q").probe.expect("the probe's vote");
    assert_eq!(probe.votes[0].weight, 3.0);
    assert_eq!(probe.votes[1].weight, 2.0);
    assert!(close(probe.confidence, 0.6));
    assert_eq!(stop(&trace, "Q").reason, StopReason::MaxDepth);
    assert_eq!(trace.nodes.len(), 1, "max_depth 0 answers from the probe alone");
    assert_eq!(trace.stats.llm_calls, 1);
}

#[tokio::test]
async fn independent_steps_run_concurrently() {
    let llm = ScriptedLlm::new()
        .on_fn(PLAN, |_, _| "Step 1: Who directed Jaws?\nStep 2: Who is Steven Spielberg?\nNo dependencies.".into())
        .on(REFLECT, "No dependencies.")
        .on_fn("", scenario)
        .latency(Duration::from_millis(40));
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_with(serde_json::json!({ "max_depth": 1, "samples": 2 }), &ctx).await;
    let probe_span = |node: &str| {
        trace
            .events
            .iter()
            .find(|e| {
                e.node_id.as_deref() == Some(node)
                    && matches!(&e.kind, EventKind::LlmCall { purpose, .. } if purpose == "probe")
            })
            .map(|e| (e.start_ms, e.end_ms))
            .unwrap_or_else(|| panic!("probe of {node}"))
    };
    let ((s1, e1), (s2, e2)) = (probe_span("1"), probe_span("2"));
    assert!(s1 < e2 && s2 < e1, "independent steps overlap: {s1}..{e1} and {s2}..{e2}");
    assert!(
        !trace.events.iter().any(|e| matches!(&e.kind, EventKind::LlmCall { purpose, .. } if purpose == "formalize")),
        "an explicit \"no dependencies\" needs no formalising"
    );
    assert!(trace.edges.iter().all(|e| e.to == "Q"), "both steps feed the question");
    assert!(trace.node("2").is_some_and(|n| n.rewritten.is_none() && n.parents.is_empty()));
}

#[tokio::test]
async fn bad_plans_are_repaired_and_recorded() {
    // Step 1 claims to depend on the later Step 2; the reflection is unreadable; the formal edge
    // points backwards; nothing panics and both steps are still searched.
    let llm = ScriptedLlm::new()
        .on(PLAN, "Step 1: Who directed Jaws?\nStep 2: Who is Steven Spielberg?\nStep 1 depends on Step 2.")
        .on(REFLECT, "Hmm, hard to say.")
        .on(FORMALIZE, "Step 2 -> Step 1\nStep 1 -> Step 1")
        .on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_with(serde_json::json!({ "max_depth": 1 }), &ctx).await;
    let r = rules(&trace);
    for rule in ["unreadable_dependencies", "drop_forward_dependency", "drop_self_dependency"] {
        assert!(r.contains(&rule), "{rule} missing from {r:?}");
    }
    assert_eq!(node_detail(&trace, "Q").plan.and_then(|p| p.edges), Some(vec![]));
    assert!(trace.node("1").is_some_and(|n| n.answer.is_some()) && trace.node("2").is_some_and(|n| n.answer.is_some()));

    // Unparseable dependency text everywhere (and no formalising): independent steps, recorded.
    let llm = ScriptedLlm::new()
        .on(PLAN, "Step 1: Who directed Jaws?\nStep 2: Who is Steven Spielberg?\nThe second needs the first.")
        .on(REFLECT, "The second needs the first.")
        .on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_with(serde_json::json!({ "max_depth": 1, "formalize": false }), &ctx).await;
    assert!(rules(&trace).contains(&"no_dependencies_read"), "{:?}", rules(&trace));
    assert_eq!(trace.answer, "Cincinnati");
}

#[tokio::test]
async fn the_llm_judge_is_used_without_an_nli_backend() {
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, None);
    let trace = answer_with(serde_json::json!({ "max_depth": 0 }), &ctx).await;
    let judge_calls = trace
        .events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::LlmCall { purpose, .. } if purpose == "nli_judge"))
        .count() as u64;
    assert_eq!(judge_calls, 2, "two distinct (premise, claim) pairs");
    assert_eq!(trace.stats.nli_calls, 2);
    assert!(trace_detail(&trace).nli.starts_with("llm-judge:"));
}

#[tokio::test]
async fn no_expansion_budget_answers_from_the_probe() {
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli))).with_budget(Budget { r_max: 0, ..Budget::default() });
    let trace = answer_with(serde_json::json!({}), &ctx).await;
    assert_eq!(stop(&trace, "Q").reason, StopReason::RMax);
    assert_eq!((trace.stats.llm_calls, trace.nodes.len()), (1, 1));
    assert_eq!(trace.answer, "Cincinnati");
}

#[tokio::test]
async fn a_budget_cut_degrades_to_the_probe_answer() {
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli))).with_budget(Budget { max_llm_calls: 2, ..Budget::default() });
    let trace = answer_with(serde_json::json!({}), &ctx).await;
    assert_eq!(trace.answer, "Cincinnati", "the probe's vote stands");
    assert!(trace.best_effort);
    assert_eq!(stop(&trace, "Q").reason, StopReason::PlanFailed);
}

struct FixedEmbedder;

#[async_trait]
impl Embedder for FixedEmbedder {
    fn model_id(&self) -> &str {
        "fixed"
    }
    fn dim(&self) -> usize {
        2
    }
    /// Questions about Jaws point one way, everything else the other.
    async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| if t.contains("Jaws") { vec![1.0, 0.0] } else { vec![0.0, 1.0] }).collect())
    }
}

#[tokio::test]
async fn stop_uses_the_embedder_when_there_is_one() {
    // The root plans a single step that embeds exactly like the question: STOP at once.
    let llm =
        ScriptedLlm::new().on(PLAN, "Step 1: Who was the director of Jaws, and where was he born?").on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli))).with_embedder(Some(Arc::new(FixedEmbedder)));
    let trace = answer_with(serde_json::json!({}), &ctx).await;
    assert_eq!(stop(&trace, "Q").reason, StopReason::SingleStep);
    let Some(StopDetail::Similarity(test)) = stop(&trace, "Q").detail else { panic!("no similarity test recorded") };
    assert_eq!(test.method, "embedding:fixed");
    assert_eq!(test.similarity, 1.0);
    assert!(trace.notes.iter().any(|n| n.starts_with("STOP similarity: embedding:fixed")));
    assert_eq!(trace.nodes.len(), 1);
}

#[tokio::test]
async fn demonstrations_are_selected_into_the_prompts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pool.jsonl");
    let pool = [
        r#"{"question": "Where was the director of Alien born?", "rationale": "Ridley Scott directed Alien [1].", "answer": "South Shields", "steps": ["Who directed Alien?", "Where was he born?"]}"#,
        r#"{"question": "Is Paris in France?", "rationale": "Paris is in France [1].", "answer": "yes"}"#,
    ]
    .join("\n");
    std::fs::write(&path, pool).expect("write pool");
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let opts = serde_json::json!({ "demonstrations": path, "demo_count": 1, "max_depth": 1 });
    let trace = answer_with(opts, &ctx).await;
    let calls = llm.calls();
    let probe = calls.iter().find(|c| c.contains(PROBE)).expect("probe prompt");
    assert!(probe.contains("Solved examples:") && probe.contains("director of Alien"), "nearest example shown");
    assert!(!probe.contains("Is Paris in France?"), "only demo_count examples");
    let plan = calls.iter().find(|c| c.contains(PLAN)).expect("plan prompt");
    assert!(plan.contains("Step 2: Where was he born?"));
    assert!(trace.notes.iter().any(|n| n.contains("word overlap")), "no embedder: lexical kNN, noted");
    assert_eq!(trace_detail(&trace).demonstrations.map(|d| d.pool), Some(2));

    assert!(build("hgot", &options(serde_json::json!({ "demonstrations": dir.path().join("missing.jsonl") }))).is_err());
    assert!(build("hgot", &options(serde_json::json!({ "samples": 0 }))).is_err());
}

#[test]
fn every_option_on_renders_exactly_the_listed_templates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pool.jsonl");
    std::fs::write(&path, r#"{"question": "Is Paris in France?", "rationale": "It is [1].", "answer": "yes"}"#)
        .expect("write pool");
    let all = serde_json::json!({ "demonstrations": path, "batch_judgements": true, "answer_claim": true });
    let strategy = build("hgot", &options(all)).expect("builds");
    let mut rendered = crate::strategy::templates(strategy.as_ref());
    let mut listed = TEMPLATES.to_vec();
    rendered.sort_unstable();
    listed.sort_unstable();
    assert_eq!(rendered, listed, "TEMPLATES is the union of what the options render");
    let plain = crate::strategy::templates(build("hgot", &options(serde_json::json!({}))).expect("builds").as_ref());
    assert!(plain.len() < listed.len(), "options off: a narrower list");
}

#[tokio::test]
async fn separate_sampling_sends_one_request_per_sample() {
    let llm = ScriptedLlm::new().on_fn("", scenario);
    let ctx = context(&llm, Some(Arc::new(WordNli)));
    let trace = answer_with(serde_json::json!({ "max_depth": 0, "shared_sampling": false }), &ctx).await;
    let probes: Vec<u32> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LlmCall { purpose, n, .. } if purpose == "probe" => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(probes, vec![1, 1, 1, 1, 1]);
    // Same samples (the script answers by sample index 0 each time), so all five agree.
    assert_eq!(node_detail(&trace, "Q").probe.map(|p| p.confidence), Some(1.0));
    assert_eq!(trace.answer, "Cincinnati");
}

/// A scripted model that keeps, for each Probe and Infer request, its passage count and grammar.
struct ThoughtGrammars {
    inner: ScriptedLlm,
    seen: std::sync::Mutex<Vec<(usize, Option<String>)>>,
}

#[async_trait]
impl Llm for ThoughtGrammars {
    fn name(&self) -> &str {
        "thought-grammars"
    }

    async fn chat(&self, request: &ChatRequest) -> hopwise_core::Result<ChatResponse> {
        let prompt: String = request.messages.iter().map(|m| m.content.as_str()).collect();
        if prompt.contains(PROBE) {
            let passages = prompt.lines().filter(|l| l.starts_with('[')).count();
            self.seen.lock().expect("lock").push((passages, request.params.grammar.clone()));
        }
        self.inner.chat(request).await
    }
}

#[tokio::test]
async fn cited_grammar_constrains_every_thought_to_the_prompts_passages() {
    for on in [true, false] {
        let llm = Arc::new(ThoughtGrammars {
            inner: ScriptedLlm::new().on_fn("", scenario),
            seen: std::sync::Mutex::new(Vec::new()),
        });
        let ctx = Ctx::new(llm.clone(), Arc::new(Prompts::default()), Recorder::new(QUESTION, "hgot"))
            .with_retriever(Some(Arc::new(corpus())))
            .with_nli(Some(Arc::new(WordNli)));
        let trace = answer_with(serde_json::json!({ "cited_grammar": on, "max_depth": 1 }), &ctx).await;
        assert_eq!(trace.answer, "Cincinnati");
        let seen = llm.seen.lock().expect("lock").clone();
        assert!(seen.len() >= 2, "the probes and the infer: {seen:?}");
        for (passages, grammar) in seen {
            let expected = if on { crate::protocol::citations::cited_thought_grammar(passages) } else { None };
            assert!(passages > 0);
            assert_eq!(grammar, expected, "cited_grammar = {on}, {passages} passages");
        }
    }
}
