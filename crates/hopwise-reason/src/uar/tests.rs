use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{BackendErrorKind, NliVerdict, Prompts, Recorder, Retriever, Trace};
use serde_json::Value;

use hopwise_core::Error as CoreError;

use super::*;
use crate::details::{
    self,
    sentence::{SentenceNode, StepDecision, StepGate},
};
use crate::strategy::{build, run, StrategyOptions};
use crate::uncertainty::{degree_uncertainty, jaccard_matrix, Estimator};

/// Needles that identify each prompt.
const NEXT: &str = "Write only the next sentence.";
const SUBQUERY: &str = "Reply with the query only.";
const FLARE: &str = "or one search request";
const CONCLUDE: &str = "Give the final short answer";
/// Text every retrieved passage carries, so the script can tell prompts with passages apart.
const PASSAGE: &str = "EVIDENCE";

#[derive(Default)]
struct RecordingRetriever {
    queries: Mutex<Vec<String>>,
    fail: bool,
}

#[async_trait]
impl Retriever for RecordingRetriever {
    fn name(&self) -> &str {
        "recording"
    }
    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        if let Ok(mut q) = self.queries.lock() {
            q.push(query.to_string());
        }
        if self.fail {
            return Err(CoreError::backend("recording", BackendErrorKind::Connection, "index offline"));
        }
        Ok((0..k.min(2))
            .map(|i| Passage { id: format!("p{i}"), text: format!("{PASSAGE} {i} for {query}"), ..Default::default() })
            .collect())
    }
}

impl RecordingRetriever {
    fn queries(&self) -> Vec<String> {
        self.queries.lock().map(|q| q.clone()).unwrap_or_default()
    }
}

struct FailingNli;

#[async_trait]
impl Nli for FailingNli {
    fn name(&self) -> &str {
        "failing"
    }
    async fn judge(&self, _: &str, _: &str) -> hopwise_core::Result<NliVerdict> {
        Err(CoreError::backend("failing", BackendErrorKind::Server, "judge down"))
    }
}

fn options(v: Value) -> StrategyOptions {
    match v {
        Value::Object(map) => StrategyOptions(map),
        _ => StrategyOptions::default(),
    }
}

async fn answer(
    strategy: &str,
    opts: Value,
    llm: &ScriptedLlm,
    retriever: Arc<RecordingRetriever>,
    nli: Option<Arc<dyn Nli>>,
) -> Trace {
    let s = build(strategy, &options(opts)).expect("valid options");
    let ctx = Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), Recorder::new("Q?", strategy))
        .with_retriever(Some(retriever))
        .with_nli(nli);
    run(s.as_ref(), &ctx, "Where was the director of Film X born?").await.expect("trace")
}

/// Step `id`'s sentence-loop detail, read through the typed record.
fn step(trace: &Trace, id: &str) -> SentenceNode {
    let node = trace.node(id).unwrap_or_else(|| panic!("no node {id}"));
    details::read(node).unwrap_or_else(|| panic!("node {id} has no sentence detail: {}", node.extra))
}

/// What the uncertainty gate recorded on step `id`: samples, similarity source and `U`.
fn measured(trace: &Trace, id: &str) -> (Vec<String>, String, f64) {
    match step(trace, id).gate {
        StepGate::Uncertainty { samples, similarity_source, uncertainty, .. } => {
            (samples, similarity_source, uncertainty)
        }
        other => panic!("step {id} was not gated by uncertainty: {other:?}"),
    }
}

/// The first step's prompt has no sentences yet; the second one has.
fn first_step(prompt: &str) -> bool {
    prompt.contains("Steps so far:\n(none yet)")
}

fn distinct_sentence(i: u32) -> String {
    ["Alpha beta gamma.", "Delta epsilon zeta.", "Eta theta iota.", "Kappa lambda mu.", "Nu xi omicron."]
        [i as usize % 5]
        .to_string()
}

#[tokio::test]
async fn agreeing_samples_accept_without_retrieval() {
    let llm = ScriptedLlm::new().on_fn(NEXT, |p, _| {
        if first_step(p) {
            "Film X was directed by Jane Doe.".into()
        } else {
            "So the answer is: Lyon.".into()
        }
    });
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("uar", serde_json::json!({}), &llm, retriever.clone(), None).await;
    assert_eq!(trace.answer, "Lyon");
    assert_eq!(trace.stats.steps, 2);
    assert_eq!(trace.stats.retrieval_rounds, 0);
    assert!(retriever.queries().is_empty());
    assert_eq!(step(&trace, "1").decision, StepDecision::Accept);
    assert_eq!(Some(measured(&trace, "1").2), Some(0.0));
    assert_eq!(Some(measured(&trace, "1").0.len()), Some(5));
    assert_eq!(trace.node("2").map(|n| n.parents.clone()), Some(vec!["1".to_string()]));
    assert!(trace.edges.iter().any(|e| e.from == "2" && e.to == "Q"));
    assert!(!trace.best_effort);
    // One greedy call and ONE 5-sample request per step.
    let sample_calls: Vec<u32> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            hopwise_core::EventKind::LlmCall { purpose, n, .. } if purpose == "uncertainty_samples" => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(sample_calls, vec![5, 5]);
}

#[tokio::test]
async fn disagreeing_samples_retrieve_with_the_subquery() {
    let llm = ScriptedLlm::new().on(SUBQUERY, "Query: \"Who directed Film X?\"").on_fn(NEXT, |p, i| {
        if p.contains(PASSAGE) {
            "So the answer is: Lyon.".into()
        } else {
            distinct_sentence(i)
        }
    });
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("uar", serde_json::json!({}), &llm, retriever.clone(), None).await;
    assert_eq!(retriever.queries(), vec!["Who directed Film X?"]);
    assert_eq!(trace.answer, "Lyon");
    assert_eq!((trace.stats.steps, trace.stats.retrieval_rounds), (1, 1));
    let node = trace.node("1").expect("node 1");
    assert_eq!(node.decision, Decision::Retrieved);
    assert_eq!(node.passages.len(), 2);
    let step: SentenceNode = details::read(node).expect("a sentence step");
    assert_eq!(step.decision, StepDecision::Retrieve);
    assert_eq!(step.query.as_deref(), Some("Who directed Film X?"));
    assert_eq!(step.temporary, "Alpha beta gamma.");
    assert_eq!(step.sentence, "So the answer is: Lyon.");
    let StepGate::Uncertainty { estimator, threshold, uncertainty, similarity, .. } = step.gate else {
        panic!("uar records its uncertainty gate: {:?}", step.gate)
    };
    assert_eq!((estimator, threshold), (Estimator::DegJaccard, 0.4));
    assert!((uncertainty - 0.8).abs() < 1e-9, "five disjoint samples: (n-1)/n = 0.8, got {uncertainty}");
    assert_eq!(similarity.rows().len(), 5);
}

/// Samples whose `U` is known; the gate must retrieve exactly when `U > θ`.
#[tokio::test]
async fn retrieves_exactly_when_uncertainty_exceeds_the_threshold() {
    let texts = ["Paris is big.", "Paris is small.", "Paris is big.", "Lyon is big."];
    let u = degree_uncertainty(&jaccard_matrix(&texts));
    for (threshold, expect_retrieval) in [(u - 0.01, true), (u + 0.01, false), (0.0, true)] {
        let llm = ScriptedLlm::new()
            .on(SUBQUERY, "Which city?")
            .on_fn(NEXT, move |p, i| {
                if p.contains(PASSAGE) {
                    "So the answer is: Paris.".into()
                } else {
                    texts[i as usize].to_string()
                }
            })
            .on(CONCLUDE, "So the answer is: Paris.");
        let retriever = Arc::new(RecordingRetriever::default());
        let opts = serde_json::json!({ "samples": 4, "threshold": threshold, "max_steps": 1 });
        let trace = answer("uar", opts, &llm, retriever.clone(), None).await;
        let got = measured(&trace, "1").2;
        assert!((got - u).abs() < 1e-12);
        assert_eq!(trace.stats.retrieval_rounds == 1, expect_retrieval, "θ = {threshold}, U = {u}");
        assert_eq!(
            step(&trace, "1").decision,
            if expect_retrieval { StepDecision::Retrieve } else { StepDecision::Accept }
        );
    }
}

#[tokio::test]
async fn step_limit_ends_the_loop_with_a_best_effort_answer() {
    let llm = ScriptedLlm::new().on(NEXT, "Film X is a film.").on(CONCLUDE, "So the answer is: Rome.");
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("uar", serde_json::json!({ "max_steps": 3 }), &llm, retriever, None).await;
    assert_eq!(trace.stats.steps, 3);
    assert_eq!(trace.answer, "Rome");
    assert!(trace.best_effort);
    assert_eq!(trace.nodes.len(), 3);
    assert_eq!(trace.rationale.as_deref(), Some("Film X is a film. Film X is a film. Film X is a film."));
}

#[tokio::test]
async fn all_empty_samples_count_as_maximal_uncertainty() {
    let llm = ScriptedLlm::new().on(SUBQUERY, "Who directed Film X?").on_fn(NEXT, |p, _| {
        if p.contains(PASSAGE) {
            "So the answer is: Lyon.".into()
        } else {
            "   ".into()
        }
    });
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("uar", serde_json::json!({}), &llm, retriever, None).await;
    assert_eq!(measured(&trace, "1").1, "degenerate-samples");
    assert_eq!(Some(measured(&trace, "1").2), Some(0.8));
    assert_eq!(step(&trace, "1").decision, StepDecision::Retrieve);
    assert_eq!(trace.answer, "Lyon");
}

#[tokio::test]
async fn nli_similarity_uses_the_judge() {
    // The samples share few words, but the judge says they all mean the same: no retrieval.
    let llm = ScriptedLlm::new().on("Premise:", "entail").on_fn(NEXT, |p, i| {
        if first_step(p) {
            distinct_sentence(i)
        } else {
            "So the answer is: Lyon.".into()
        }
    });
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("uar", serde_json::json!({ "uncertainty": "deg-nli" }), &llm, retriever, None).await;
    assert_eq!(measured(&trace, "1").1, "nli");
    assert_eq!(Some(measured(&trace, "1").2), Some(0.0));
    assert_eq!(trace.stats.retrieval_rounds, 0);
    assert_eq!(trace.stats.nli_calls, 20, "5 distinct samples, 20 ordered pairs; step 2 agrees textually");
    let judge_calls = llm.calls().iter().filter(|c| c.contains("Premise:")).count();
    assert_eq!(judge_calls, 20);
    assert_eq!(judge_events(&trace), 20, "every judgement is an llm_call event of the question");
    assert_eq!(trace.stats.llm_calls, llm.calls().len() as u64, "judge calls count as the question's calls");
    assert_eq!(trace.answer, "Lyon");
}

fn judge_events(trace: &Trace) -> usize {
    trace
        .events
        .iter()
        .filter(|e| matches!(&e.kind, hopwise_core::EventKind::LlmCall { purpose, .. } if purpose == "nli_judge"))
        .count()
}

#[tokio::test]
async fn nli_judge_calls_are_stopped_by_max_llm_calls() {
    // Step 1 makes 2 calls (temporary sentence, samples), then asks the judge for 20 pairs; with 12
    // calls allowed only 10 judgements get through, the estimate falls back to Jaccard, and the
    // sub-query the fallback asks for is refused.
    let llm = ScriptedLlm::new().on("Premise:", "entail").on_fn(NEXT, |_, i| distinct_sentence(i));
    let s = build("uar", &options(serde_json::json!({ "uncertainty": "deg-nli" }))).expect("valid");
    let ctx = Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), Recorder::new("Q?", "uar"))
        .with_retriever(Some(Arc::new(RecordingRetriever::default())))
        .with_budget(crate::ctx::Budget { max_llm_calls: 12, ..Default::default() });
    let trace = run(s.as_ref(), &ctx, "Where was the director of Film X born?").await.expect("trace");
    assert_eq!(trace.stats.llm_calls, 12);
    assert_eq!(llm.calls().len(), 12, "no call reached the backend past the budget");
    assert_eq!(judge_events(&trace), 10);
    assert!(trace.notes.iter().any(|n| n.contains("fell back to Jaccard") && n.contains("max_llm_calls = 12")));
    assert!(trace.best_effort);
}

#[tokio::test]
async fn semantic_sets_count_classes_from_the_judge() {
    // Samples 0,1 mean the same, as do 2,3; sample 4 stands alone: three sets > θ = 2.
    let llm = ScriptedLlm::new()
        .on_fn("Premise:", |p, _| {
            let group = |s: &str| {
                if s.contains("Alpha") || s.contains("Delta") {
                    0
                } else if s.contains("Eta") || s.contains("Kappa") {
                    1
                } else {
                    2
                }
            };
            let a = p.split("Premise:").nth(1).and_then(|r| r.lines().next()).unwrap_or("");
            let b = p.split("Hypothesis:").nth(1).and_then(|r| r.lines().next()).unwrap_or("");
            if group(a) == group(b) {
                "entail".into()
            } else {
                "neutral".into()
            }
        })
        .on(SUBQUERY, "Who directed Film X?")
        .on_fn(NEXT, |p, i| if p.contains(PASSAGE) { "So the answer is: Lyon.".into() } else { distinct_sentence(i) });
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("uar", serde_json::json!({ "uncertainty": "numsets" }), &llm, retriever, None).await;
    assert_eq!(Some(measured(&trace, "1").2), Some(3.0));
    assert_eq!(step(&trace, "1").decision, StepDecision::Retrieve);
    assert_eq!(trace.stats.retrieval_rounds, 1);
}

#[tokio::test]
async fn nli_failure_falls_back_to_jaccard_and_says_so() {
    let llm = ScriptedLlm::new().on(SUBQUERY, "Who directed Film X?").on_fn(NEXT, |p, i| {
        if p.contains(PASSAGE) {
            "So the answer is: Lyon.".into()
        } else {
            distinct_sentence(i)
        }
    });
    let retriever = Arc::new(RecordingRetriever::default());
    let nli: Arc<dyn Nli> = Arc::new(FailingNli);
    let trace = answer("uar", serde_json::json!({ "uncertainty": "deg-nli" }), &llm, retriever, Some(nli)).await;
    assert_eq!(measured(&trace, "1").1, "jaccard-fallback");
    assert!(
        trace.notes.iter().any(|n| n.contains("fell back to Jaccard") && n.contains("judge down")),
        "{:?}",
        trace.notes
    );
    assert_eq!(Some(measured(&trace, "1").2), Some(0.8));
    assert_eq!(step(&trace, "1").decision, StepDecision::Retrieve);
    assert_eq!(trace.answer, "Lyon");
}

#[tokio::test]
async fn failed_retrieval_keeps_the_temporary_sentence() {
    let llm = ScriptedLlm::new().on(SUBQUERY, "Who directed Film X?").on_fn(NEXT, |p, i| {
        if first_step(p) {
            distinct_sentence(i)
        } else {
            "So the answer is: Lyon.".into()
        }
    });
    let retriever = Arc::new(RecordingRetriever { fail: true, ..Default::default() });
    let trace = answer("uar", serde_json::json!({}), &llm, retriever, None).await;
    assert!(trace.notes.iter().any(|n| n.contains("retrieval failed")));
    assert_eq!(trace.node("1").and_then(|n| n.answer.clone()).as_deref(), Some("Alpha beta gamma."));
    assert_eq!(trace.answer, "Lyon");
}

#[tokio::test]
async fn eccentricity_with_nli_similarity_and_defaults() {
    let s = DynamicRetrieval::uar(&UarOptions { uncertainty: Estimator::Ecc, ..Default::default() }).expect("valid");
    let g = s.uncertainty_gate().expect("gate");
    assert_eq!((g.samples, g.threshold, g.similarity), (10, 2.0, Similarity::Jaccard));
    let llm =
        ScriptedLlm::new().on("Premise:", "contradict").on(SUBQUERY, "Who directed Film X?").on_fn(NEXT, |p, i| {
            if p.contains(PASSAGE) {
                "So the answer is: Lyon.".into()
            } else {
                format!("Sample {i} differs")
            }
        });
    let retriever = Arc::new(RecordingRetriever::default());
    let opts = serde_json::json!({ "uncertainty": "ecc", "similarity": "nli" });
    let trace = answer("uar", opts, &llm, retriever, None).await;
    let u = measured(&trace, "1").2;
    assert!((u - 3.0).abs() < 1e-6, "ten mutually contradicting samples: √9 = 3, got {u}");
    assert_eq!(step(&trace, "1").decision, StepDecision::Retrieve);
}

#[tokio::test]
async fn always_retrieve_uses_the_temporary_sentence_or_the_subquery() {
    let script = || {
        ScriptedLlm::new().on(SUBQUERY, "Who directed Film X?").on_fn(NEXT, |p, _| {
            if p.contains(PASSAGE) && !first_step(p) {
                "So the answer is: Lyon.".into()
            } else if p.contains(PASSAGE) {
                "Film X was directed by Jane Doe.".into()
            } else {
                "Film X was directed by someone.".into()
            }
        })
    };
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("always-retrieve", serde_json::json!({}), &script(), retriever.clone(), None).await;
    assert_eq!(retriever.queries()[0], "Film X was directed by someone.");
    assert_eq!((trace.stats.steps, trace.stats.retrieval_rounds), (2, 2));
    assert_eq!(trace.answer, "Lyon");

    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("always-retrieve-subquery", serde_json::json!({}), &script(), retriever.clone(), None).await;
    assert_eq!(retriever.queries(), vec!["Who directed Film X?", "Who directed Film X?"]);
    assert_eq!(trace.stats.retrieval_rounds, 2);
    assert!(matches!(step(&trace, "2").gate, StepGate::Always { query_source: QuerySource::Subquery }));

    let retriever = Arc::new(RecordingRetriever::default());
    let opts = serde_json::json!({ "query": "subquery", "initial_retrieval": true });
    let trace = answer("always-retrieve", opts, &script(), retriever.clone(), None).await;
    assert_eq!(retriever.queries()[0], "Where was the director of Film X born?", "initial retrieval uses Q");
    assert_eq!(trace.stats.retrieval_rounds, 3);
}

#[tokio::test]
async fn flare_instruct_searches_when_the_model_asks() {
    let llm = ScriptedLlm::new()
        .on_fn(FLARE, |p, _| {
            if first_step(p) {
                "Film X was directed by [Search(Who directed Film X?)]".into()
            } else {
                "So the answer is: Lyon.".into()
            }
        })
        .on(NEXT, "Film X was directed by Jane Doe.");
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("flare-instruct", serde_json::json!({}), &llm, retriever.clone(), None).await;
    assert_eq!(retriever.queries(), vec!["Who directed Film X?"]);
    assert_eq!(trace.node("1").and_then(|n| n.answer.clone()).as_deref(), Some("Film X was directed by Jane Doe."));
    assert_eq!((trace.stats.steps, trace.stats.retrieval_rounds), (2, 1));
    assert_eq!(step(&trace, "2").decision, StepDecision::Accept);
    assert_eq!(trace.answer, "Lyon");
}

/// flare-direct: the question is searched first; a sentence with a token below θ is searched for with
/// its unlikely tokens masked and regenerated; a confident sentence is kept as it is.
#[tokio::test]
async fn flare_direct_searches_for_an_unlikely_sentence_with_its_unlikely_tokens_masked() {
    let llm = ScriptedLlm::new()
        .on_fn(NEXT, |p, _| {
            if first_step(p) && !p.contains("for Film X was directed") {
                "Film X was directed by Jane Roe.".into()
            } else if first_step(p) {
                "Film X was directed by Jane Doe.".into()
            } else {
                "So the answer is: Lyon.".into()
            }
        })
        .token_probability("Roe.", 0.2);
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("flare-direct", serde_json::json!({}), &llm, retriever.clone(), None).await;
    // The question first (FLARE's first query is the input), then the masked look-ahead sentence.
    assert_eq!(retriever.queries(), vec!["Where was the director of Film X born?", "Film X was directed by Jane"]);
    let first = step(&trace, "1");
    assert_eq!(first.decision, StepDecision::Retrieve);
    assert_eq!(
        (first.temporary.as_str(), first.sentence.as_str()),
        ("Film X was directed by Jane Roe.", "Film X was directed by Jane Doe.")
    );
    match first.gate {
        StepGate::Confidence { lowest_probability, theta, tokens } => {
            assert!((lowest_probability.expect("tokens") - 0.2).abs() < 1e-6 && (theta - 0.8).abs() < 1e-9);
            assert_eq!(tokens.len(), 7, "{tokens:?}");
        }
        other => panic!("not the confidence gate: {other:?}"),
    }
    assert_eq!(step(&trace, "2").decision, StepDecision::Accept, "a sure sentence is kept");
    assert_eq!((trace.stats.steps, trace.stats.retrieval_rounds), (2, 2));
    assert_eq!(trace.answer, "Lyon");

    // With θ below every token's probability nothing but the question is searched.
    let retriever = Arc::new(RecordingRetriever::default());
    let trace = answer("flare-direct", serde_json::json!({"theta": 0.1}), &llm, retriever.clone(), None).await;
    assert_eq!(retriever.queries(), vec!["Where was the director of Film X born?"]);
    assert_eq!(step(&trace, "1").decision, StepDecision::Accept);
}

#[tokio::test]
async fn flare_direct_without_token_probabilities_stops_or_falls_back_as_told() {
    let llm = ScriptedLlm::new()
        .on_fn(FLARE, |p, _| {
            if first_step(p) {
                "Film X was directed by Jane Doe.".into()
            } else {
                "So the answer is: Lyon.".into()
            }
        })
        .on(NEXT, "Film X was directed by Jane Doe.")
        .without_probabilities();
    let s = build("flare-direct", &StrategyOptions::default()).expect("valid");
    let ctx = Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), Recorder::new("Q?", "flare-direct"))
        .with_retriever(Some(Arc::new(RecordingRetriever::default())));
    let err = run(s.as_ref(), &ctx, "Q?").await.expect_err("no probabilities is an error");
    assert!(err.to_string().contains("without_probabilities") && err.to_string().contains("flare-instruct"), "{err}");

    let opts = serde_json::json!({"without_probabilities": "flare-instruct"});
    let trace = answer("flare-direct", opts, &llm, Arc::new(RecordingRetriever::default()), None).await;
    assert!(trace.notes.iter().any(|n| n.contains("running flare-instruct instead")), "{:?}", trace.notes);
    assert!(matches!(step(&trace, "1").gate, StepGate::Flare { .. }));
    assert_eq!(trace.answer, "Lyon");
}

#[tokio::test]
async fn llm_budget_exhaustion_degrades_to_best_effort() {
    let llm = ScriptedLlm::new().on(NEXT, "Film X is a film.");
    let s = build("uar", &StrategyOptions::default()).expect("valid");
    let budget = crate::ctx::Budget { max_llm_calls: 3, ..Default::default() };
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), Recorder::new("Q?", "uar"))
        .with_retriever(Some(Arc::new(RecordingRetriever::default())))
        .with_budget(budget);
    let trace = run(s.as_ref(), &ctx, "Q?").await.expect("trace");
    assert!(trace.best_effort);
    assert!(trace.notes.iter().any(|n| n.contains("max_llm_calls")), "{:?}", trace.notes);
    assert_eq!(trace.answer, "Film X is a film.");
}

#[test]
fn bad_options_are_clear_errors() {
    let bad = |name: &str, v: Value, needle: &str| match build(name, &options(v.clone())) {
        Err(ReasonError::InvalidOption(m)) => assert!(m.contains(needle), "{v}: {m}"),
        Err(e) => panic!("{v}: unexpected error {e}"),
        Ok(_) => panic!("{v}: accepted"),
    };
    bad("uar", serde_json::json!({ "samples": 1 }), "at least 2 samples");
    bad("uar", serde_json::json!({ "samples": 0 }), "at least 2 samples");
    bad("uar", serde_json::json!({ "samples": 64 }), "at most 20");
    bad("uar", serde_json::json!({ "threshold": -0.1 }), "≥ 0");
    bad("uar", serde_json::json!({ "threshold": 0.8 }), "could never exceed");
    bad("uar", serde_json::json!({ "uncertainty": "ecc", "samples": 5 }), "could never exceed");
    bad("uar", serde_json::json!({ "uncertainty": "numsets", "samples": 2 }), "could never exceed");
    bad("uar", serde_json::json!({ "uncertainty": "deg-cosine" }), "unknown variant");
    bad("uar", serde_json::json!({ "uncertainty": "deg-jaccard", "similarity": "nli" }), "eigv and ecc only");
    bad("uar", serde_json::json!({ "thresold": 0.3 }), "unknown field");
    bad("uar", serde_json::json!({ "max_steps": 0 }), "max_steps");
    bad("uar", serde_json::json!({ "sample_temperature": 0.0 }), "sample_temperature");
    bad("always-retrieve", serde_json::json!({ "query": "title" }), "unknown variant");
    bad("always-retrieve-subquery", serde_json::json!({ "query": "sentence" }), "sub-query");
    bad("flare-instruct", serde_json::json!({ "samples": 5 }), "unknown field");
    bad("flare-direct", serde_json::json!({ "theta": 1.5 }), "theta");
    bad("flare-direct", serde_json::json!({ "beta": -0.1 }), "beta");
    bad("flare-direct", serde_json::json!({ "without_probabilities": "guess" }), "unknown variant");
    for name in ["uar", "always-retrieve", "always-retrieve-subquery", "flare-instruct", "flare-direct"] {
        let s = build(name, &StrategyOptions::default()).expect("defaults are valid");
        assert_eq!(s.name(), name);
        assert!(crate::strategy::spec(s.name()).is_ok_and(|row| row.needs_retriever));
        assert!(crate::strategy::spec(name).is_ok());
    }
    for est in Estimator::ALL {
        let s = build("uar", &options(serde_json::json!({ "uncertainty": est }))).expect("default threshold fits");
        let g = s.as_ref().name();
        assert_eq!(g, "uar");
    }
}

#[test]
fn parses_sentences_markers_and_search_requests() {
    assert_eq!(first_sentence("\n  Next sentence: Paris is in France. It is big.\nMore"), "Paris is in France.");
    assert_eq!(first_sentence("- J. R. R. Tolkien wrote it. Yes."), "J. R. R. Tolkien wrote it.");
    assert_eq!(first_sentence("\"So the answer is: Lyon.\""), "So the answer is: Lyon.");
    assert_eq!(first_sentence("   \n \n"), "");
    assert_eq!(first_sentence("Next sentence:\n\nParis is in France."), "Paris is in France.");
    assert_eq!(first_sentence("1. Paris is in France."), "Paris is in France.");
    assert_eq!(first_sentence("1984 was the year. Then"), "1984 was the year.");
    assert_eq!(first_sentence("Step 2: Lyon is big."), "Lyon is big.");
    assert_eq!(first_sentence("Steps so far: none"), "Steps so far: none");
    assert_eq!(first_sentence("Ünïcode first. second"), "Ünïcode first.");

    assert_eq!(marked_answer("So the answer is: Lyon."), Some("Lyon".into()));
    assert_eq!(marked_answer("so THE ANSWER IS **Washington, D.C.**"), Some("Washington, D.C".into()));
    assert_eq!(marked_answer("Answer: yes"), Some("yes".into()));
    assert_eq!(marked_answer("Thus, the answer is \"1984\"."), Some("1984".into()));
    assert_eq!(marked_answer("So the answer is: ."), None);
    assert_eq!(marked_answer("Film X was directed by Jane Doe."), None);

    assert_eq!(parse_search_request("X was [Search(Who directed X?)] ok"), Some("Who directed X?".into()));
    assert_eq!(parse_search_request("[search(\"When did Y die?\")]"), Some("When did Y die?".into()));
    assert_eq!(parse_search_request("[Search(Who is Z?"), Some("Who is Z?".into()));
    assert_eq!(parse_search_request("[Search()]"), None);
    assert_eq!(parse_search_request("no request here"), None);
}

/// A backend that ignores `n` and always returns one choice.
struct OneChoice(ScriptedLlm);

#[async_trait]
impl hopwise_core::Llm for OneChoice {
    fn name(&self) -> &str {
        "one-choice"
    }
    async fn chat(&self, request: &hopwise_core::ChatRequest) -> hopwise_core::Result<hopwise_core::ChatResponse> {
        let mut single = request.clone();
        single.params.n = 1;
        self.0.chat(&single).await
    }
}

#[tokio::test]
async fn a_backend_that_ignores_n_is_asked_for_the_rest() {
    let script = ScriptedLlm::new().on(NEXT, "So the answer is: Lyon.");
    let ctx = Ctx::new(Arc::new(OneChoice(script.clone())), Arc::new(Prompts::default()), Recorder::new("Q?", "uar"))
        .with_retriever(Some(Arc::new(RecordingRetriever::default())));
    let s = build("uar", &StrategyOptions::default()).expect("valid");
    let trace = run(s.as_ref(), &ctx, "Q?").await.expect("trace");
    assert_eq!(Some(measured(&trace, "1").0.len()), Some(5));
    // One temporary sentence plus five one-choice sample requests.
    assert_eq!(script.calls().len(), 6);
    assert_eq!(trace.answer, "Lyon");
}

#[tokio::test]
async fn an_empty_temporary_sentence_gives_way_to_the_agreeing_samples() {
    // Choice 0 is empty: so is the near-greedy call (n = 1) and one of the five samples; the other
    // four agree (U = 8/25 ≤ 0.4), so the step accepts their sentence.
    let llm = ScriptedLlm::new().on_fn(NEXT, |p, i| {
        let sentence = if first_step(p) { "Film X was directed by Jane Doe." } else { "So the answer is: Lyon." };
        if i == 0 {
            String::new()
        } else {
            sentence.to_string()
        }
    });
    let retriever = Arc::new(RecordingRetriever { fail: true, ..Default::default() });
    let opts = serde_json::json!({ "initial_retrieval": true });
    let trace = answer("uar", opts, &llm, retriever.clone(), None).await;
    assert_eq!(trace.node("1").and_then(|n| n.answer.clone()).as_deref(), Some("Film X was directed by Jane Doe."));
    assert_eq!(step(&trace, "1").temporary, "");
    assert_eq!(step(&trace, "1").decision, StepDecision::Accept);
    assert!(trace.notes.iter().any(|n| n.contains("initial retrieval failed")), "{:?}", trace.notes);
    assert_eq!(retriever.queries().len(), 1);
    assert_eq!(trace.answer, "Lyon");
}
