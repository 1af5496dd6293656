use std::sync::Arc;

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::{Decision, EventKind, Llm, Prompts, Recorder, Retriever, Trace};

use crate::ctx::{Budget, Ctx};
use crate::details::{self, toqd::ToqdNode};
use crate::protocol::plan::FinalOp;
use crate::strategy::{build, run, StrategyOptions};

// Needles that identify each template in a prompt (the first matching rule answers, so the summary,
// which also says "Using the facts", is listed before the aggregate).
const PLAN: &str = "Plan how to answer the question";
const READ: &str = "Using the passages, answer the question";
const RECALL: &str = "If you are unsure, give your best guess";
const SELF_VERIFY: &str = "If you are not sure you know the answer";
const SUMMARY: &str = "Reply in exactly this form";
const DECOMPOSE: &str = "Break the question below";
const CRITIQUE: &str = "Review the candidates";
const CONSTRUCT: &str = "Describe which answers help";
const REWRITE: &str = "Rewrite the question below";
const DECOMPOSE_NODE: &str = "could not be answered yet";
const AGGREGATE: &str = "Using the facts, answer the question";

fn corpus() -> StaticRetriever {
    StaticRetriever::from_pairs(&[
        ("Kessler Bridge", "Kessler Bridge opened on 4 May 1931."),
        ("Amberline Bridge", "Amberline Bridge opened in 1958."),
        ("The Glass Orchard", "The Glass Orchard is a novel by Mara Quill."),
    ])
}

async fn ask(strategy: &str, options: StrategyOptions, llm: impl Llm + 'static, question: &str) -> Trace {
    ask_with(strategy, options, llm, Some(corpus()), Budget::default(), question).await
}

async fn ask_with(
    strategy: &str,
    options: StrategyOptions,
    llm: impl Llm + 'static,
    retriever: Option<StaticRetriever>,
    budget: Budget,
    question: &str,
) -> Trace {
    let s = build(strategy, &options).expect("known strategy");
    let rec = Recorder::new(question, strategy);
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), rec)
        .with_retriever(retriever.map(|r| Arc::new(r) as Arc<dyn Retriever>))
        .with_budget(budget);
    run(s.as_ref(), &ctx, question).await.expect("runs")
}

fn options(pairs: &[(&str, serde_json::Value)]) -> StrategyOptions {
    let mut o = StrategyOptions::default();
    for (k, v) in pairs {
        o.set(k, v.clone());
    }
    o
}

fn purposes(t: &Trace) -> Vec<String> {
    t.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LlmCall { purpose, .. } => Some(purpose.clone()),
            _ => None,
        })
        .collect()
}

fn sink_detail(t: &Trace) -> ToqdNode {
    t.nodes.iter().find(|n| n.id == "Q").and_then(details::read).unwrap_or_default()
}

/// A comparison plan, written for `question` with its options `a` and `b`: each option's date is
/// its own step.
fn compare_plan(a: &str, b: &str, step_a: &str, step_b: &str) -> String {
    format!(
        r#"{{"op":"compare","pick":"latest","steps":[{{"question":"{step_a}","answer_type":"date"}},{{"question":"{step_b}","answer_type":"date"}}],"options":[{{"option":"{a}","step":1}},{{"option":"{b}","step":2}}]}}"#
    )
}

/// A model that plans `plan` and reads each option step's date from what it asks about.
fn comparing_model(plan: String) -> ScriptedLlm {
    ScriptedLlm::new().on(PLAN, &plan).on_fn(READ, |prompt, _| {
        let asked = prompt.rsplit("Question:").next().unwrap_or_default();
        if asked.contains("Kessler") {
            "1931-05-04".into()
        } else if asked.contains("Amberline") {
            "1958".into()
        } else {
            "NO!".into()
        }
    })
}

#[tokio::test]
async fn a_comparison_is_decided_in_code_from_the_option_values() {
    let q = "Which bridge opened later, Kessler Bridge or Amberline Bridge?";
    let plan = compare_plan(
        "Kessler Bridge",
        "Amberline Bridge",
        "When did Kessler Bridge open?",
        "When did Amberline Bridge open?",
    );
    let t = ask("toqd", StrategyOptions::default(), comparing_model(plan), q).await;
    assert_eq!(t.answer, "Amberline Bridge");
    assert_eq!(purposes(&t), ["plan", "read", "read"], "no summary: the dates decided");
    let decision = sink_detail(&t).decision.expect("recorded");
    assert_eq!(decision.op, "compare");
    assert_eq!(decision.found, [Some("1931-05-04".to_string()), Some("1958".to_string())]);
    assert_eq!(t.stats.retrieval_rounds, 1, "the question's passages held both dates");
}

#[tokio::test]
async fn the_same_question_in_another_language_gets_the_same_executed_plan() {
    // Nothing in the code reads question words: the model states the plan, code runs it.
    let english = "Which bridge opened later, Kessler Bridge or Amberline Bridge?";
    let german = "Welche Brücke wurde später eröffnet, Kessler Bridge oder Amberline Bridge?";
    let french = "Quel pont a ouvert plus tard, Kessler Bridge ou Amberline Bridge ?";
    let mut executed = Vec::new();
    for (question, step_a, step_b) in [
        (english, "When did Kessler Bridge open?", "When did Amberline Bridge open?"),
        (german, "Wann wurde Kessler Bridge eröffnet?", "Wann wurde Amberline Bridge eröffnet?"),
        (french, "Quand Kessler Bridge a-t-il ouvert ?", "Quand Amberline Bridge a-t-il ouvert ?"),
    ] {
        let plan = compare_plan("Kessler Bridge", "Amberline Bridge", step_a, step_b);
        let t = ask("toqd", StrategyOptions::default(), comparing_model(plan), question).await;
        let plan = sink_detail(&t).plan.expect("recorded").plan;
        executed.push((plan.final_op.clone(), plan.needs.clone(), purposes(&t), t.answer.clone()));
    }
    assert_eq!(executed[0], executed[1]);
    assert_eq!(executed[0], executed[2]);
    assert!(matches!(executed[0].0, FinalOp::Compare { .. }));
}

#[tokio::test]
async fn a_chain_fills_each_step_with_the_answer_before_it() {
    let q = "In which city was the author of The Glass Orchard born?";
    let plan = r##"{"op":"answer","answer_type":"place","steps":[{"question":"Who wrote The Glass Orchard?","answer_type":"person"},{"question":"In which city was #1 born?","answer_type":"place"}]}"##;
    let llm = ScriptedLlm::new()
        .on(PLAN, plan)
        .on(SUMMARY, "Answer: Lisbon\nReason: Mara Quill was born in Lisbon.")
        .on_fn(READ, |prompt, i| {
            let asked = prompt.rsplit("Question:").next().unwrap_or_default();
            if asked.contains("Who wrote") {
                "Mara Quill".into()
            } else if asked.contains("Mara Quill") {
                "Lisbon".into()
            } else if i < 2 {
                // The question's own readings disagree: the graph runs.
                format!("City {i}")
            } else {
                "NO!".into()
            }
        });
    let t = ask("toqd", StrategyOptions::default(), llm, q).await;
    assert_eq!(t.answer, "Lisbon");
    let node2 = t.nodes.iter().find(|n| n.id == "2").expect("node 2");
    assert_eq!(node2.rewritten.as_deref(), Some("In which city was Mara Quill born?"));
    assert_eq!(node2.parents, ["1"]);
    assert_eq!(purposes(&t), ["plan", "read_question", "read", "read", "summary"]);
}

#[tokio::test]
async fn a_sure_reading_of_the_question_answers_it_before_the_graph() {
    let q = "Who wrote The Glass Orchard?";
    let plan = r#"{"op":"answer","answer_type":"person","steps":[{"question":"Who wrote The Glass Orchard?","answer_type":"person"}]}"#;
    let llm = ScriptedLlm::new().on(PLAN, plan).on(READ, "Mara Quill");
    let t = ask("toqd", StrategyOptions::default(), llm, q).await;
    assert_eq!(t.answer, "Mara Quill");
    assert_eq!(purposes(&t), ["plan", "read_question"]);
    assert_eq!(t.confidence, Some(1.0));
}

/// A reader that is unsure (one of five samples answers) on its first request and sure after.
fn unsure_then_sure(answer: &'static str) -> impl Fn(&str, u32) -> String + Send + Sync + 'static {
    let requests = std::sync::atomic::AtomicUsize::new(0);
    move |_, i| {
        let request = if i == 0 {
            requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        } else {
            requests.load(std::sync::atomic::Ordering::SeqCst) - 1
        };
        if request > 0 || i == 0 {
            answer.to_string()
        } else {
            "NO!".to_string()
        }
    }
}

#[tokio::test]
async fn an_unsure_node_searches_once_with_its_own_question() {
    let q = "Who wrote The Glass Orchard?";
    let plan = r#"{"op":"answer","answer_type":"person","steps":[{"question":"Which writer published The Glass Orchard?","answer_type":"person"}]}"#;
    let opts = || options(&[("answer_first", serde_json::json!(false))]);
    let llm = ScriptedLlm::new()
        .on(PLAN, plan)
        .on(SUMMARY, "Answer: Mara Quill\nReason: the passage says so.")
        .on_fn(READ, unsure_then_sure("Mara Quill"));
    let t = ask("toqd", opts(), llm, q).await;
    assert_eq!(t.stats.retrieval_rounds, 2, "the question's search and the node's own");
    let node = t.nodes.iter().find(|n| n.id == "1").expect("node 1");
    assert_eq!(node.decision, Decision::Retrieved);
    assert!(!node.best_effort);

    // With no node search left, the node keeps its leading reading as a best effort.
    let llm = ScriptedLlm::new().on(PLAN, plan).on(SUMMARY, "Answer: Mara Quill\nReason: r").on_fn(READ, |_, i| {
        if i == 0 {
            "Mara Quill".into()
        } else {
            "NO!".into()
        }
    });
    let mut opts = opts();
    opts.set("max_node_searches", serde_json::json!(0));
    let t = ask("toqd", opts, llm, q).await;
    assert_eq!(t.stats.retrieval_rounds, 1);
    let node = t.nodes.iter().find(|n| n.id == "1").expect("node 1");
    assert!(node.best_effort && node.answer.as_deref() == Some("Mara Quill"));
}

#[tokio::test]
async fn all_and_select_read_yes_or_no_per_option() {
    let q = "Are Kessler Bridge and Amberline Bridge both suspension bridges?";
    let plan = r#"{"op":"all","steps":[{"question":"Is Kessler Bridge a suspension bridge?","answer_type":"yes_no"},{"question":"Is Amberline Bridge a suspension bridge?","answer_type":"yes_no"}],"options":[{"option":"Kessler Bridge","step":1},{"option":"Amberline Bridge","step":2}]}"#;
    let llm = ScriptedLlm::new().on(PLAN, plan).on_fn(READ, |p, _| {
        if p.rsplit("Question:").next().unwrap_or_default().contains("Kessler") {
            "yes".into()
        } else {
            "no".into()
        }
    });
    let t = ask("toqd", StrategyOptions::default(), llm, q).await;
    assert_eq!(t.answer, "no");
    assert!(!purposes(&t).contains(&"summary".to_string()));

    let q = "Which bridge is a suspension bridge, Kessler Bridge or Amberline Bridge?";
    let plan = plan.replace("\"all\"", "\"select\"");
    let llm = ScriptedLlm::new().on(PLAN, &plan).on_fn(READ, |p, _| {
        if p.rsplit("Question:").next().unwrap_or_default().contains("Kessler") {
            "no".into()
        } else {
            "Yes.".into()
        }
    });
    let t = ask("toqd", StrategyOptions::default(), llm, q).await;
    assert_eq!(t.answer, "Amberline Bridge");
}

#[tokio::test]
async fn undecided_options_fall_back_to_a_summary_that_names_one_of_them() {
    let q = "Which bridge opened later, Kessler Bridge or Amberline Bridge?";
    let plan = compare_plan(
        "Kessler Bridge",
        "Amberline Bridge",
        "When did Kessler Bridge open?",
        "When did Amberline Bridge open?",
    );
    let llm = ScriptedLlm::new().on(PLAN, &plan).on(READ, "NO!").on_fn(SUMMARY, |_, i| {
        if i < 3 {
            "Answer: the Amberline Bridge, in 1958\nReason: r".into()
        } else {
            "Answer: 1958\nReason: r".into()
        }
    });
    let t = ask("toqd", StrategyOptions::default(), llm, q).await;
    assert_eq!(t.answer, "Amberline Bridge", "only readings naming an option vote, as that option");
    let decision = sink_detail(&t).decision.expect("recorded");
    assert_eq!(decision.chosen, None);
    assert_eq!(sink_detail(&t).summary.expect("summary").restricted_to, ["Kessler Bridge", "Amberline Bridge"]);
}

#[tokio::test]
async fn an_unreadable_plan_answers_the_question_as_one_step() {
    let q = "Who wrote The Glass Orchard?";
    let llm = ScriptedLlm::new()
        .on(PLAN, "I think we should look it up.")
        .on(SUMMARY, "Answer: Mara Quill\nReason: r")
        .on_fn(READ, |_, i| if i % 2 == 0 { "Mara Quill".into() } else { "Ann Lee".into() });
    let t = ask("toqd", StrategyOptions::default(), llm, q).await;
    assert!(t.repairs.iter().any(|r| r.rule == "plan_unreadable"));
    assert_eq!(t.nodes.iter().find(|n| n.id == "1").map(|n| n.question.as_str()), Some(q));
    assert_eq!(t.answer, "Mara Quill");
}

#[tokio::test]
async fn toqd_noir_answers_nodes_closed_book() {
    let q = "Which bridge opened later, Kessler Bridge or Amberline Bridge?";
    let plan = compare_plan(
        "Kessler Bridge",
        "Amberline Bridge",
        "When did Kessler Bridge open?",
        "When did Amberline Bridge open?",
    );
    let llm = ScriptedLlm::new().on(PLAN, &plan).on_fn(RECALL, |p, _| {
        if p.rsplit("Question:").next().unwrap_or_default().contains("Kessler") {
            "1931".into()
        } else {
            "1958-01".into()
        }
    });
    let t = ask_with("toqd-noir", StrategyOptions::default(), llm, None, Budget::default(), q).await;
    assert_eq!(t.answer, "Amberline Bridge");
    assert_eq!(t.stats.retrieval_rounds, 0);
    assert!(t.nodes.iter().filter(|n| n.id != "Q").all(|n| n.decision == Decision::Known));
}

#[tokio::test]
async fn the_gate_answers_a_node_the_model_knows_without_reading() {
    let q = "Who wrote The Glass Orchard?";
    let plan = r#"{"op":"answer","answer_type":"person","steps":[{"question":"Who wrote The Glass Orchard?","answer_type":"person"}]}"#;
    let llm =
        ScriptedLlm::new().on(PLAN, plan).on(SELF_VERIFY, "Mara Quill").on(SUMMARY, "Answer: Mara Quill\nReason: r");
    let opts = options(&[("answer_first", serde_json::json!(false)), ("gate", serde_json::json!("no"))]);
    let t = ask("toqd", opts, llm, q).await;
    let node = t.nodes.iter().find(|n| n.id == "1").expect("node 1");
    assert_eq!(node.decision, Decision::Known);
    assert_eq!(purposes(&t), ["plan", "self_verify", "summary"]);
}

#[tokio::test]
async fn bad_options_are_refused() {
    for (key, value) in [
        ("samples", serde_json::json!(0)),
        ("min_confidence", serde_json::json!(1.5)),
        ("max_steps", serde_json::json!(9)),
        ("gate", serde_json::json!("maybe")),
        ("no_such_option", serde_json::json!(true)),
    ] {
        assert!(build("toqd", &options(&[(key, value.clone())])).is_err(), "{key} = {value}");
    }
    assert!(build("toqd-paper", &options(&[("max_subquestions", serde_json::json!(0))])).is_err());
    assert!(build("toqd-paper", &options(&[("answer_first", serde_json::json!(true))])).is_err(), "not a paper switch");
}

// ------------------------------------------------------------------------------------------------
// The paper's preset

fn paper_model() -> ScriptedLlm {
    paper_model_summarising("Answer: Lisbon\nReason: r")
}

fn paper_model_summarising(summary: &'static str) -> ScriptedLlm {
    ScriptedLlm::new()
        .on(DECOMPOSE_NODE, "1. Who is Mara Quill's mother?")
        .on(DECOMPOSE, "1. Who wrote The Glass Orchard?\n2. Where was that writer born?")
        .on(CRITIQUE, "1. Who wrote The Glass Orchard?\n2. Where was that writer born?")
        .on(CONSTRUCT, "1 -> 2\n2 -> Q")
        .on_fn(REWRITE, |p, _| {
            let asked = p.split("\nQuestion: ").nth(1).unwrap_or_default().lines().next().unwrap_or_default();
            asked.replace("that writer", "Mara Quill")
        })
        .on_fn(SELF_VERIFY, |p, _| {
            let asked = p.rsplit("Question:").next().unwrap_or_default();
            if asked.contains("Who wrote") {
                "Mara Quill".into()
            } else if asked.contains("mother") {
                "Ana Quill".into()
            } else {
                "NO!".into()
            }
        })
        .on(READ, "NO!")
        .on(SUMMARY, summary)
        .on(AGGREGATE, "Lisbon")
}

#[tokio::test]
async fn the_paper_preset_runs_no_retrieve_no_decompose() {
    let q = "In which city was the author of The Glass Orchard born?";
    let t = ask("toqd-paper", StrategyOptions::default(), paper_model(), q).await;
    let node = |id: &str| t.nodes.iter().find(|n| n.id == id).cloned().expect(id);
    assert_eq!(node("1").decision, Decision::Known, "known closed-book: no search");
    assert_eq!(node("2").rewritten.as_deref(), Some("Where was Mara Quill born?"));
    assert_eq!(node("2").decision, Decision::Decomposed, "NO! closed-book, NO! over the passages");
    assert_eq!(node("2").children, ["2.1"]);
    assert_eq!(node("2.1").decision, Decision::Known);
    assert_eq!(node("2").answer.as_deref(), Some("Lisbon"), "from its child's answer");
    assert_eq!(t.stats.retrieval_rounds, 1, "only node 2 searched");
    assert_eq!(t.answer, "Lisbon");
    let calls = purposes(&t);
    for step in
        ["decompose", "critique", "construct", "rewrite", "self_verify", "self_verify_context", "aggregate", "summary"]
    {
        assert!(calls.contains(&step.to_string()), "{step}: {calls:?}");
    }
    assert!(!calls.contains(&"plan".to_string()), "no typed plan in the paper's flow");
}

#[tokio::test]
async fn without_retrieval_the_paper_preset_decomposes_on_the_first_no() {
    let q = "In which city was the author of The Glass Orchard born?";
    let t = ask_with("toqd-noir-paper", StrategyOptions::default(), paper_model(), None, Budget::default(), q).await;
    assert_eq!(t.stats.retrieval_rounds, 0);
    let node2 = t.nodes.iter().find(|n| n.id == "2").expect("node 2");
    assert_eq!(node2.decision, Decision::Decomposed);
    assert!(!purposes(&t).contains(&"self_verify_context".to_string()));
}

#[tokio::test]
async fn the_papers_ablations_switch_its_steps_off() {
    let q = "In which city was the author of The Glass Orchard born?";
    let opts = options(&[
        ("critique", serde_json::json!(false)),
        ("construct", serde_json::json!(false)),
        ("rewrite", serde_json::json!(false)),
        ("self_verify", serde_json::json!(false)),
    ]);
    let budget = Budget { r_max: 0, ..Budget::default() };
    let t = ask_with(
        "toqd-paper",
        opts,
        paper_model().on("Give your best short answer", "Lisbon"),
        Some(corpus()),
        budget,
        q,
    )
    .await;
    let calls = purposes(&t);
    for step in ["critique", "construct", "rewrite", "self_verify"] {
        assert!(!calls.contains(&step.to_string()), "{step}: {calls:?}");
    }
    assert_eq!(t.stats.retrieval_rounds, 2, "without self-verify every node searches");
    let node2 = t.nodes.iter().find(|n| n.id == "2").expect("node 2");
    assert_eq!(node2.parents, ["1"], "without construct: a chain in list order");
    assert!(node2.best_effort, "r_max = 0: no child graph, a best-effort answer");
}

/// When no node answers and no summary reading has the plan's answer type, the summary's own answer
/// is given, marked best-effort; a summary that declines still leaves the question unanswered.
#[tokio::test]
async fn a_summary_of_the_wrong_type_is_a_best_effort_answer_when_nothing_else_answered() {
    let q = "When did Kessler Bridge open?";
    let plan = r#"{"op":"answer","answer_type":"date","steps":[{"question":"When did Kessler Bridge open?","answer_type":"date"}]}"#;
    let model = |summary: &str| ScriptedLlm::new().on(PLAN, plan).on(SUMMARY, summary).on(READ, "NO!").fallback("NO!");
    let t = ask("toqd", StrategyOptions::default(), model("Answer: the spring after the war\nReason: r"), q).await;
    assert_eq!(t.answer, "the spring after the war");
    assert!(t.best_effort && t.notes.iter().any(|n| n.contains("expected answer type")), "{:?}", t.notes);

    let t = ask("toqd", StrategyOptions::default(), model("Answer: NO!\nReason: r"), q).await;
    assert_eq!(t.answer, "", "a summary that declines gives no answer");
}

/// A summary that gives no answer falls back on the last node's answer, and `Q` says so: it is
/// unresolved and best-effort, never left pending (in both presets).
#[tokio::test]
async fn a_summary_without_an_answer_leaves_q_unresolved_with_the_last_nodes_answer() {
    let q = "In which city was the author of The Glass Orchard born?";
    let plan = r##"{"op":"answer","answer_type":"place","steps":[{"question":"Who wrote The Glass Orchard?","answer_type":"person"},{"question":"In which city was #1 born?","answer_type":"place"}]}"##;
    let llm = ScriptedLlm::new().on(PLAN, plan).on(SUMMARY, "Answer: NO!\nReason: r").on_fn(READ, |prompt, _| {
        let asked = prompt.rsplit("Question:").next().unwrap_or_default();
        if asked.contains("Who wrote") {
            "Mara Quill".into()
        } else if asked.contains("Mara Quill") {
            "Lisbon".into()
        } else {
            "NO!".into()
        }
    });
    let paper = paper_model_summarising("Answer: NO!\nReason: r");
    for t in [
        ask("toqd", StrategyOptions::default(), llm, q).await,
        ask("toqd-paper", StrategyOptions::default(), paper, q).await,
    ] {
        assert_eq!(t.answer, "Lisbon", "{}", t.strategy);
        assert!(t.repairs.iter().any(|r| r.rule == "summary_unanswered"), "{}: {:?}", t.strategy, t.repairs);
        let sink = t.node("Q").expect("Q");
        assert_eq!((sink.decision, sink.best_effort), (Decision::Unresolved, true), "{}", t.strategy);
        assert_eq!(sink.answer.as_deref(), Some("Lisbon"));
        assert!(t.nodes.iter().all(|n| n.decision != Decision::Pending), "{}: {:?}", t.strategy, t.nodes);
    }
}
