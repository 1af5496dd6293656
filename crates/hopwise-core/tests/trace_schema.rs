//! The check that runs on every trace in test builds (against the published docs/trace.schema.json)
//! accepts real traces and rejects broken ones. That the published file is what the types generate
//! is tested in hopwise-reason, which holds the strategies' detail types.

use hopwise_core::trace_schema::{check_trace, check_trace_json};
use hopwise_core::{Decision, NodeTrace, Passage, Recorder};

fn answered_trace() -> hopwise_core::Trace {
    let rec = Recorder::new("Which band?", "toqd");
    rec.upsert_node(NodeTrace {
        id: "1".into(),
        question: "Which band released Counterparts?".into(),
        decision: Decision::Retrieved,
        answer: Some("Rush".into()),
        passages: vec![Passage {
            id: "p1".into(),
            title: "Counterparts".into(),
            text: "Counterparts is an album by Rush.".into(),
            score: 1.5,
            doc_id: Some("d1".into()),
            offsets: Some((0, 33)),
        }],
        ..Default::default()
    });
    rec.add_edge("1", hopwise_core::trace::SINK);
    rec.note("a note");
    rec.finish("Rush", Some("because".into()))
}

#[test]
fn a_real_trace_validates() {
    let trace = answered_trace();
    assert_eq!(check_trace(&trace), Ok(()));
}

#[test]
fn broken_traces_do_not_validate() {
    let good = serde_json::to_value(answered_trace()).expect("serialise");
    let broken = |path: &[&str], value: Option<serde_json::Value>| {
        let mut v = good.clone();
        let (last, parents) = path.split_last().expect("non-empty path");
        let mut node = &mut v;
        for p in parents {
            node = match p.parse::<usize>() {
                Ok(i) => &mut node[i],
                Err(_) => &mut node[*p],
            };
        }
        match value {
            Some(x) => node[*last] = x,
            None => {
                node.as_object_mut().map(|o| o.remove(*last));
            }
        }
        v
    };
    let cases = [
        ("no question", broken(&["question"], None)),
        ("answer is a number", broken(&["answer"], Some(42.into()))),
        ("unknown decision", broken(&["nodes", "0", "decision"], Some("guessed".into()))),
        // serde writes a NaN score as null, which the schema (a number) rejects.
        ("null score", broken(&["nodes", "0", "passages", "0", "score"], Some(serde_json::Value::Null))),
        ("unknown event type", broken(&["events", "0", "type"], Some("teleport".into()))),
        ("negative token count", broken(&["stats", "prompt_tokens"], Some((-1).into()))),
    ];
    for (what, value) in cases {
        assert!(check_trace_json(&value).is_err(), "{what}: accepted");
    }
}

#[test]
#[should_panic(expected = "does not match docs/trace.schema.json")]
fn finishing_a_trace_that_does_not_validate_panics_in_test_builds() {
    let rec = Recorder::new("q", "direct");
    rec.upsert_node(NodeTrace {
        id: "Q".into(),
        decision: Decision::Known,
        passages: vec![Passage { id: "p".into(), score: f32::NAN, ..Default::default() }],
        ..Default::default()
    });
    rec.finish("a", None);
}
