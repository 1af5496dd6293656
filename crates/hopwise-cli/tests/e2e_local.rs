//! End to end with the real in-process model: `hopwise ask` answers a question from the sample
//! corpus with ToQD through llama.cpp and the 0.5B Qwen model (1 thread). Assertions are on the
//! trace's structure and the evidence, not on the model's wording.
//!
//! Needs the model installed (`hopwise setup --fetch qwen2.5-0.5b`, which `scripts/test.sh` runs).

use std::path::Path;

use hopwise_core::{Decision, EventKind, Trace};

fn hopwise() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hopwise"));
    cmd.env_remove("HOPWISE_CONFIG")
        .env_remove("HOPWISE_LLM")
        .env_remove("HOPWISE_BASE_URL")
        .env("HOPWISE_THREADS", "1");
    cmd
}

#[test]
fn toqd_with_the_local_model_over_the_sample_index() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = tmp.path().join("index");
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample/corpus.jsonl");
    let out = hopwise().args(["index", "--json", "--index"]).arg(&index).arg(&corpus).output().expect("index");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let out = hopwise()
        .args([
            "ask",
            "Which Canadian rock band released a song called \"Counterparts\" and had a drummer who was inducted into the Modern Drummer Hall of Fame?",
            "--model",
            "qwen2.5-0.5b",
            "--r-max",
            "1",
            "--json",
            "--index",
        ])
        .arg(&index)
        .output()
        .expect("ask");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("not installed"),
        "the test model is missing; run `hopwise setup --fetch qwen2.5-0.5b`: {stderr}"
    );
    assert!(out.status.success(), "{stderr}");
    let trace: Trace = serde_json::from_slice(&out.stdout).expect("stdout is the trace");

    assert_eq!(trace.model, "local:qwen2.5-0.5b");
    assert!(!trace.nodes.is_empty());
    assert!(trace.nodes.iter().all(|n| n.decision != Decision::Pending), "every node was resolved");
    // Every retrieval round is recorded, and the evidence comes from the sample corpus.
    let rounds = trace.events.iter().filter(|e| matches!(e.kind, EventKind::Retrieval { .. })).count() as u64;
    assert_eq!(rounds, trace.stats.retrieval_rounds);
    for p in trace.evidence() {
        assert!(p.id.starts_with("hotpotqa-s") || p.id.starts_with("2wikimultihopqa-s"), "{}", p.id);
    }
    // The local backend honours grammars, so planning output was constrained.
    let decompose_used_grammar = trace
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::LlmCall { purpose, grammar: true, .. } if purpose == "decompose"));
    assert!(decompose_used_grammar);
    assert!(trace.stats.prompt_tokens > 0 && trace.stats.completion_tokens > 0);
    assert!(trace.stats.llm_calls >= 3);
}
