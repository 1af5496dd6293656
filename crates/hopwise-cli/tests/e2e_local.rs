//! End to end with the real in-process model: `hopwise ask` answers a question from the sample
//! corpus with ToQD through llama.cpp and the 0.5B Qwen model (1 thread). Assertions are on the
//! trace's structure and the evidence, not on the model's wording.
//!
//! Needs the model installed (`hopwise setup --fetch qwen2.5-0.5b`, which `scripts/test.sh` runs).

mod common;

use std::path::Path;
use std::sync::Mutex;

use common::{hopwise_command as hopwise, sample_index};
use hopwise_core::{Decision, EventKind, Trace};
use hopwise_reason::details::{
    self,
    hgot::{HgotNode, HgotTrace, SigmaEntry},
    sentence::{LoopGate, SentenceNode, SentenceTrace, StepDecision, StepGate},
    toqd::{GateDecision, ToqdNode},
};

/// Model tests run one at a time (1 inference thread each), even under `--test-threads 2`.
static MODEL: Mutex<()> = Mutex::new(());

const QUESTION: &str = "Which Canadian rock band released a song called \"Counterparts\" and had a drummer who was inducted into the Modern Drummer Hall of Fame?";

/// `hopwise ask QUESTION --strategy S --model qwen2.5-0.5b --json` plus `extra` flags; the trace.
fn ask_local(index: &Path, strategy: &str, extra: &[&str]) -> Trace {
    let out = hopwise()
        .args(["ask", QUESTION, "--strategy", strategy, "--model", "qwen2.5-0.5b", "--json"])
        .args(extra)
        .arg("--index")
        .arg(index)
        .output()
        .expect("ask");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not installed"), "the test model is missing; run `hopwise setup --fetch qwen2.5-0.5b`");
    // The assertions are on the trace, not the model's wording: a run whose small model gave no
    // answer still writes its whole trace and says why (exit 1).
    assert!(out.status.success() || stderr.contains("no answer could be produced"), "{stderr}");
    serde_json::from_slice(&out.stdout).expect("stdout is the trace")
}

fn evidence_is_from_the_sample(trace: &Trace) {
    for p in trace.evidence() {
        assert!(p.id.starts_with("hotpotqa-s") || p.id.starts_with("2wikimultihopqa-s"), "{}", p.id);
    }
}

/// The typed plan through the real model: the first call is the plan, constrained by its grammar,
/// and the plan recorded on `Q` is what the graph ran.
#[test]
fn toqd_with_the_local_model_over_the_sample_index() {
    let _one_model_at_a_time = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());
    // The graph path: with `answer_first` a sure reading of the question would skip it.
    let trace = ask_local(&index, "toqd", &["--opt", "answer_first=false"]);

    assert_eq!(trace.model, "local:qwen2.5-0.5b");
    assert!(trace.nodes.iter().all(|n| n.decision != Decision::Pending), "every node was resolved");
    // Every retrieval round is recorded, and the evidence comes from the sample corpus.
    let rounds = trace.events.iter().filter(|e| matches!(e.kind, EventKind::Retrieval { .. })).count() as u64;
    assert_eq!(rounds, trace.stats.retrieval_rounds);
    evidence_is_from_the_sample(&trace);
    // The local backend honours grammars, so the plan was constrained and reads without repair.
    let plan_used_grammar = trace
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::LlmCall { purpose, grammar: true, .. } if purpose == "plan"));
    assert!(plan_used_grammar);
    assert!(!trace.repairs.iter().any(|r| r.rule == "plan_unreadable"), "{:?}", trace.repairs);
    let q = trace.node("Q").expect("node Q");
    let detail: ToqdNode = details::read(q).expect("node Q's ToQD detail");
    let plan = detail.plan.expect("the plan on Q").plan;
    let top_level = trace.nodes.iter().filter(|n| n.id != "Q" && !n.id.contains('.')).count();
    assert_eq!(top_level, plan.steps.len(), "one node per step");
    assert!(trace.stats.prompt_tokens > 0 && trace.stats.completion_tokens > 0);
}

/// ToQD's default reads the question over its own passages after planning (for an `answer`
/// plan): five sampled readings on node Q; a sure vote answers with that call, an unsure one runs
/// the graph, and its readings vote at the end.
#[test]
fn toqd_reads_the_question_first_with_the_local_model() {
    let _one_model_at_a_time = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());
    let trace = ask_local(&index, "toqd", &[]);

    let purposes = trace.call_purposes();
    assert_eq!(purposes.first().map(String::as_str), Some("plan"), "{purposes:?}");
    let q = trace.node("Q").expect("node Q");
    assert!(!q.passages.is_empty(), "Q holds the question's passages");
    evidence_is_from_the_sample(&trace);
    let detail: ToqdNode = details::read(q).expect("node Q's ToQD detail");
    let plan = detail.plan.clone().expect("the plan on Q").plan;
    if plan.final_op.name() != "answer" {
        assert!(!purposes.iter().any(|p| p == "read_question"), "options are read per step: {purposes:?}");
        return;
    }
    assert_eq!(purposes.get(1).map(String::as_str), Some("read_question"), "{purposes:?}");
    let reading = detail.reading.expect("the question's reading");
    assert_eq!(reading.samples.len(), 5, "{reading:?}");
    if reading.accepted == Some(true) {
        assert_eq!(purposes.len(), 2, "a sure reading answers alone: {purposes:?}");
        assert_eq!(Some(trace.answer.as_str()), q.answer.as_deref());
        assert!(trace.confidence.is_some_and(|c| c >= 0.8), "{:?}", trace.confidence);
    } else {
        assert_eq!(detail.summary.map(|s| s.pooled_readings), Some(5), "{}", q.extra);
    }
}

/// The paper's flow through the real model: decompose, critique and construct are constrained by
/// their grammars, and each node ends known, retrieved, decomposed or best-effort.
#[test]
fn toqd_paper_with_the_local_model() {
    let _one_model_at_a_time = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());
    let trace = ask_local(&index, "toqd-paper", &["--r-max", "1"]);

    let purposes = trace.call_purposes();
    assert_eq!(purposes.first().map(String::as_str), Some("decompose"), "{purposes:?}");
    assert!(!purposes.iter().any(|p| p == "plan"), "{purposes:?}");
    let decompose_used_grammar = trace
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::LlmCall { purpose, grammar: true, .. } if purpose == "decompose"));
    assert!(decompose_used_grammar);
    for node in trace.nodes.iter().filter(|n| n.id != "Q") {
        assert!(node.decision != Decision::Pending, "{}", node.id);
        // A node searched exactly when it did not know the answer closed-book.
        let searched = trace
            .events
            .iter()
            .any(|e| e.node_id.as_deref() == Some(node.id.as_str()) && matches!(e.kind, EventKind::Retrieval { .. }));
        assert_eq!(searched, node.decision != Decision::Known, "{}: {:?}", node.id, node.decision);
    }
    let rounds = trace.events.iter().filter(|e| matches!(e.kind, EventKind::Retrieval { .. })).count() as u64;
    assert_eq!(rounds, trace.stats.retrieval_rounds);
    evidence_is_from_the_sample(&trace);
}

/// The uncertainty gate in front of each node: a node whose gate says known answers closed-book
/// and never searches on its own.
#[test]
fn toqd_node_gate_with_the_local_model() {
    let _one_model_at_a_time = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());
    let trace = ask_local(&index, "toqd", &["--opt", "answer_first=false", "--opt", "gate=uncertainty"]);

    let gated: Vec<_> =
        trace.nodes.iter().filter_map(|n| details::read::<ToqdNode>(n).and_then(|d| d.gate).map(|g| (n, g))).collect();
    assert!(!gated.is_empty(), "every node asks the gate first");
    for (node, gate) in gated {
        assert_eq!(gate.samples.len(), 5, "{gate:?}");
        assert!(gate.uncertainty.is_finite() && gate.uncertainty >= 0.0, "{gate:?}");
        if gate.decision == GateDecision::Known {
            assert_eq!(node.decision, Decision::Known, "{}", node.id);
            assert!(gate.uncertainty <= gate.threshold, "{gate:?}");
        }
    }
}

/// Uncertainty-gated retrieval through the real model: every sentence carries its samples, their
/// similarity matrix and U, and it retrieved exactly when U passed the threshold.
#[test]
fn uar_with_the_local_model_gates_retrieval_on_uncertainty() {
    let _one_model_at_a_time = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());
    let trace = ask_local(&index, "uar", &["--opt", "samples=3", "--opt", "max_steps=3"]);

    assert_eq!(trace.strategy, "uar");
    assert!(!trace.nodes.is_empty() && trace.nodes.len() <= 3, "one node per sentence, at most max_steps");
    assert_eq!(trace.stats.steps, trace.nodes.len() as u64);
    let config: SentenceTrace = serde_json::from_value(trace.extra.clone()).expect("the loop's configuration");
    let LoopGate::Uncertainty { threshold, .. } = config.gate else {
        panic!("uar gates on uncertainty: {:?}", config.gate)
    };
    let mut retrieved = 0;
    for node in &trace.nodes {
        let step: SentenceNode = details::read(node).unwrap_or_else(|| panic!("node {}: {}", node.id, node.extra));
        let StepGate::Uncertainty { samples, similarity, uncertainty: u, .. } = &step.gate else {
            panic!("node {}: not gated by uncertainty", node.id)
        };
        assert_eq!(samples.len(), 3, "node {}: {}", node.id, node.extra);
        let rows = similarity.rows();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|row| row.len() == 3));
        let retrieves = step.decision == StepDecision::Retrieve;
        assert_eq!(retrieves, *u > threshold, "node {}: U = {u}, θ = {threshold}", node.id);
        if retrieves {
            retrieved += 1;
            assert_eq!(node.decision, Decision::Retrieved);
            assert!(step.query.as_deref().is_some_and(|q| !q.trim().is_empty()));
        }
    }
    assert_eq!(trace.stats.retrieval_rounds, retrieved);
    evidence_is_from_the_sample(&trace);
    // The n samples of a step come from one shared-prompt request.
    assert!(trace
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::LlmCall { purpose, n: 3, .. } if purpose == "uncertainty_samples")));
}

/// HGOT through the real model: a question node with its probe (samples with ρ, votes and CI), a
/// plan whose steps are nodes of layer 1, and passage scores recorded per stage.
#[test]
fn hgot_with_the_local_model_records_hierarchy_votes_and_passage_scores() {
    let _one_model_at_a_time = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());
    let opts = ["samples=2", "max_depth=1", "max_steps=2", "max_nli_calls=8"];
    let flags: Vec<&str> = opts.iter().flat_map(|o| ["--opt", o]).collect();
    let trace = ask_local(&index, "hgot", &flags);

    assert_eq!(trace.strategy, "hgot");
    let root = trace.node("Q").expect("the question is node Q");
    let root_detail: HgotNode = details::read(root).unwrap_or_else(|| panic!("node Q: {}", root.extra));
    let probe = root_detail.probe.expect("the probe's samples and vote");
    assert_eq!(probe.samples.len(), 2, "{}", root.extra);
    for s in &probe.samples {
        assert!((0.2 - 1e-9..=1.0 + 1e-9).contains(&s.rho), "ρ = α + β·REC + γ·PREC in [0.2, 1]: {}", s.rho);
    }
    assert!((0.0..=1.0).contains(&probe.confidence), "{}", probe.confidence);
    // The vote table counts the samples that gave an answer; a small model's samples may give
    // none, and which ones do varies with how concurrent requests were batched.
    let answered = probe.samples.iter().filter(|s| !hopwise_core::text::normalize_answer(&s.answer).is_empty()).count();
    assert_eq!(probe.votes.is_empty(), answered == 0, "{}", root.extra);
    // Steps hang below the question at layer 1 and name it as the node they decompose.
    for step in trace.nodes.iter().filter(|n| n.id != "Q") {
        let detail: HgotNode = details::read(step).unwrap_or_else(|| panic!("node {}: {}", step.id, step.extra));
        assert_eq!(detail.layer, Some(1), "{}", step.id);
        assert_eq!(step.decomposes.as_deref(), Some("Q"));
    }
    let recorded: HgotTrace = serde_json::from_value(trace.extra.clone()).expect("HGOT's trace detail");
    for h in &recorded.sigma_history {
        let (SigmaEntry::Update { sigma, .. } | SigmaEntry::Retrieved { sigma, .. }) = h;
        assert!(sigma.is_finite() && *sigma >= 0.0, "{h:?}");
    }
    assert!(trace.stats.nli_calls <= 8, "the NLI budget holds");
    evidence_is_from_the_sample(&trace);
}

/// The peers through the real model, each with a small budget: every retrieval round is recorded
/// with evidence from the sample corpus and every call is counted. The model's wording is not
/// asserted: a run without an answer still writes its trace (and exits 1).
#[test]
fn the_peers_with_the_local_model() {
    let _one_model_at_a_time = MODEL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());
    for (strategy, option, calls_range, min_rounds) in [
        ("ircot", "max_steps=2", 1..=3, 1),
        ("iter-retgen", "iterations=2", 2..=2, 2),
        ("search-agent", "max_searches=2", 1..=4, 0),
        ("flare-direct", "max_steps=2", 1..=5, 1),
    ] {
        let out = hopwise()
            .args(["ask", QUESTION, "--strategy", strategy, "--model", "qwen2.5-0.5b", "--json", "--opt", option])
            .arg("--index")
            .arg(&index)
            .output()
            .expect("ask");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() || stderr.contains("no answer could be produced"), "{strategy}: {stderr}");
        let trace: Trace = serde_json::from_slice(&out.stdout).expect("stdout is the trace");
        assert_eq!(trace.strategy, strategy);
        assert_eq!(trace.model, "local:qwen2.5-0.5b");
        let calls = trace.events.iter().filter(|e| matches!(e.kind, EventKind::LlmCall { .. })).count() as u64;
        assert_eq!(calls, trace.stats.llm_calls, "{strategy}");
        assert!(calls_range.contains(&calls), "{strategy}: {calls} calls");
        let rounds = trace.events.iter().filter(|e| matches!(e.kind, EventKind::Retrieval { .. })).count() as u64;
        assert_eq!(rounds, trace.stats.retrieval_rounds, "{strategy}");
        assert!(rounds >= min_rounds, "{strategy}: {rounds} searches");
        evidence_is_from_the_sample(&trace);
        if strategy == "search-agent" {
            let constrained = trace.events.iter().any(
                |e| matches!(&e.kind, EventKind::LlmCall { purpose, grammar: true, .. } if purpose == "agent_turn"),
            );
            assert!(constrained, "the agent's turns are constrained by the tag grammar on the local engine");
        }
        if strategy == "flare-direct" {
            // The local engine reports every token's probability, so each step was gated by them.
            let steps: Vec<_> = trace.nodes.iter().filter_map(|n| n.extra.get("tokens")).collect();
            assert!(!steps.is_empty(), "no step recorded its token probabilities: {:?}", trace.nodes);
            let lists: Vec<&Vec<serde_json::Value>> =
                steps.iter().map(|t| t.as_array().expect("a list of [token, probability]")).collect();
            assert!(lists.iter().any(|tokens| !tokens.is_empty()), "no step has token probabilities: {lists:?}");
            for token in lists.iter().copied().flatten() {
                assert!(token[1].as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)), "{token:?}");
            }
        }
    }
}
