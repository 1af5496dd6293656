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
    // Knows Jaws (consistently), declines Alien, guesses Heat wrongly and inconsistently.
    let model = ScriptedLlm::new()
        .on("director of Jaws", "Steven Spielberg")
        .on("director of Alien", "NO!")
        .on("director of Heat", "Person {i}");
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
    assert_eq!(server.request_count(), 6, "per item: one greedy call, one request for the samples");

    let records: Vec<serde_json::Value> = std::fs::read_to_string(out_dir.join("gate.jsonl"))
        .expect("gate.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(records.len(), 3);
    let by = |q: &str| records.iter().find(|r| r["question"].as_str().unwrap_or("").contains(q)).expect("record");
    assert_eq!((by("Jaws")["correct"].as_bool(), by("Jaws")["said_no"].as_bool()), (Some(true), Some(false)));
    assert_eq!(by("Alien")["said_no"], true);
    assert_eq!(by("Heat")["correct"], false);
    assert!(by("Heat")["uncertainty"]["deg-jaccard"].as_f64().expect("U") > 0.4);
    assert_eq!(by("Jaws")["uncertainty"]["deg-jaccard"].as_f64(), Some(0.0));

    // NO! catches 1 of the 2 wrong answers; the uncertainty gate catches both and keeps Jaws.
    let report = std::fs::read_to_string(out_dir.join("gate.md")).expect("gate.md");
    assert!(report.contains("| NO! (self-verify) | 0.33 | 1.00 | 0.50 | 0.50 |"), "{report}");
    assert!(report.contains("| deg-jaccard (θ = 0.4) | 0.67 | 1.00 | 1.00 | 1.00 |"), "{report}");
}
