//! `hopwise gate-eval` end to end: the real binary against a real HTTP server speaking the OpenAI
//! protocol (scripted replies), a dataset file with gold single-hop steps.

mod common;

use std::sync::Arc;

use common::{hopwise_command, output, write_jsonl};
use hopwise_core::scripted::ScriptedLlm;
use hopwise_models::testing::MockOpenAiServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_eval_scores_each_gate_against_the_closed_book_oracle() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("wiki.jsonl");
    write_jsonl(
        &data,
        &[serde_json::json!({"id": "a", "question": "Which film's director was born first?", "answers": ["Jaws"],
            "meta": {"evidences": [["Jaws", "director", "Steven Spielberg"], ["Alien", "director", "Ridley Scott"],
                                   ["Heat", "director", "Michael Mann"]]}})],
    );
    // Knows Jaws and says so; knows Alien but declines under the NO! protocol; guesses Heat wrongly and
    // inconsistently, and does not decline it.
    let model = ScriptedLlm::new().on_fn("director of", |prompt, i| {
        let no_protocol = prompt.contains("reply exactly NO!");
        if prompt.contains("Jaws") {
            "Steven Spielberg".into()
        } else if prompt.contains("Alien") {
            if no_protocol {
                "NO!".into()
            } else {
                "Ridley Scott".into()
            }
        } else {
            format!("Person {i}")
        }
    });
    let server = MockOpenAiServer::start(Arc::new(model)).await.expect("mock server");
    let out_dir = tmp.path().join("gate");
    let mut cmd = hopwise_command();
    cmd.args(["--base-url", &server.base_url(), "--model", "scripted", "gate-eval", "--samples", "4", "--no-cache"])
        .arg("--dataset")
        .arg(&data)
        .arg("--out")
        .arg(&out_dir);
    let out = output(cmd).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server.request_count(), 9, "per item: a greedy best guess, a greedy NO! reply, one request of samples");

    let records: Vec<serde_json::Value> = std::fs::read_to_string(out_dir.join("gate.jsonl"))
        .expect("gate.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(records.len(), 3);
    let by = |q: &str| records.iter().find(|r| r["question"].as_str().unwrap_or("").contains(q)).expect("record");
    let right = |q: &str| by(q)["greedy"]["cover_em"].as_f64() == Some(1.0);
    assert!(right("Jaws") && right("Alien") && !right("Heat"), "the oracle is the best guess");
    assert_eq!((by("Jaws")["said_no"].as_bool(), by("Alien")["said_no"].as_bool()), (Some(false), Some(true)));
    assert!(by("Heat")["uncertainty"]["deg-jaccard"].as_f64().expect("U") > 0.4);
    assert_eq!(by("Jaws")["uncertainty"]["deg-jaccard"].as_f64(), Some(0.0));
    assert_eq!(by("Alien")["uncertainty"]["deg-jaccard"].as_f64(), Some(0.0), "samples cannot decline");

    // NO! retrieves for Alien (known) and keeps Heat (wrong); the uncertainty gate does the opposite.
    let report = std::fs::read_to_string(out_dir.join("gate.md")).expect("gate.md");
    assert!(report.contains("| NO! (self-verify) | 0.33 | 0.00 | 0.00 | 0.50 |"), "{report}");
    assert!(report.contains("| deg-jaccard (θ = 0.4) | 0.33 | 1.00 | 1.00 | 1.00 |"), "{report}");
}

/// With `--items questions` and a reader's results, the report and the plot trace the gate end to
/// end: where it retrieves, the reader's answer counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_eval_sweeps_the_gate_in_front_of_a_reader() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("hotpot.jsonl");
    write_jsonl(
        &data,
        &[
            serde_json::json!({"id": "known", "question": "Who directed Jaws?", "answers": ["Steven Spielberg"],
                "meta": {"evidences": [["Jaws", "director", "Steven Spielberg"]]}}),
            serde_json::json!({"id": "unknown", "question": "Who directed Heat?", "answers": ["Michael Mann"]}),
        ],
    );
    let reader = tmp.path().join("rtr.jsonl");
    let read = |id: &str, question: &str, prediction: &str, right: bool| {
        let score = f64::from(u8::from(right));
        let record = hopwise_eval::results::ResultRecord {
            dataset: "hotpot".into(),
            id: id.into(),
            strategy: "rtr".into(),
            question: question.into(),
            qtype: None,
            task: Default::default(),
            prediction: prediction.into(),
            gold: Vec::new(),
            metrics: hopwise_eval::results::RecordMetrics { cover_em: score, f1: score, ..Default::default() },
            confidence: None,
            retrieval: None,
            stats: hopwise_core::Stats { llm_calls: 1, retrieval_rounds: 1, ..Default::default() },
            seconds: 1.0,
            best_effort: false,
            error: None,
            trace: None,
        };
        serde_json::to_value(record).expect("record")
    };
    // A results file ends each record with a newline (a last line without one is a partial write).
    let lines = [
        read("known", "Who directed Jaws?", "Spielberg", false),
        read("unknown", "Who directed Heat?", "Michael Mann", true),
    ];
    std::fs::write(&reader, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("write results");
    let model = ScriptedLlm::new().on("Who directed Jaws?", "Steven Spielberg").on("Who directed Heat?", "Person {i}");
    let server = MockOpenAiServer::start(Arc::new(model)).await.expect("mock server");
    let out_dir = tmp.path().join("gate");
    let mut cmd = hopwise_command();
    cmd.args(["--base-url", &server.base_url(), "--model", "scripted", "gate-eval", "--samples", "4", "--no-cache"])
        .args(["--items", "questions"])
        .arg("--dataset")
        .arg(&data)
        .arg("--reader")
        .arg(&reader)
        .arg("--out")
        .arg(&out_dir);
    let out = output(cmd).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(out_dir.join("gate.md")).expect("gate.md");
    assert!(report.contains("2 items;"), "the questions, not the evidence steps: {report}");
    // Always retrieving gets Heat only; the gate at 0.4 keeps Jaws closed-book and reads Heat.
    assert!(report.contains("| always | – | 1.00 | 1.00 | 50.0 | 50.0 | +0.0 |"), "{report}");
    assert!(report.contains("| deg-jaccard | 0.000 | 0.50 | 1.50 | 100.0 | 100.0 | +50.0 |"), "{report}");
    assert!(report.contains("- deg-jaccard: 0.50 rounds"), "{report}");
    if out_dir.join("gate-hotpot.svg").exists() {
        let svg = std::fs::read_to_string(out_dir.join("gate-hotpot.svg")).expect("svg");
        assert!(svg.contains("deg-jaccard"), "the sweep is plotted");
    } else {
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no TrueType font"),
            "only a missing font skips the plot"
        );
    }

    // The same report from the records alone: no model call.
    let asked = server.request_count();
    let again_dir = tmp.path().join("again");
    let mut again = hopwise_command();
    again
        .args(["--base-url", &server.base_url(), "--model", "scripted", "gate-eval", "--no-cache"])
        .arg("--records")
        .arg(out_dir.join("gate.jsonl"))
        .arg("--reader")
        .arg(&reader)
        .arg("--out")
        .arg(&again_dir);
    let out = output(again).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server.request_count(), asked, "recomputed without the model");
    let recomputed = std::fs::read_to_string(again_dir.join("gate.md")).expect("gate.md");
    let tables = |r: &str| r.split_once("### ").map(|(_, t)| t.to_string()).unwrap_or_default();
    assert_eq!(tables(&recomputed), tables(&report), "the same tables");

    let mut missing = hopwise_command();
    missing
        .args(["--base-url", &server.base_url(), "--model", "scripted", "gate-eval", "--no-cache"])
        .arg("--dataset")
        .arg(&data)
        .args(["--reader", "/nonexistent/results.jsonl"])
        .arg("--out")
        .arg(&out_dir);
    let out = output(missing).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such results file"));
}
