//! End to end through the OpenAI-compatible backend against a real llama.cpp server: xllamacpp
//! (from the server venv, `scripts/servers.sh install`) serves the packaged 0.5B GGUF on 127.0.0.1
//! with 1 thread, and `hopwise ask --strategy toqd --base-url …` answers a sample question through
//! it. Assertions are on protocol and trace structure, never on the model's wording. Skipped when
//! the venv or the model is missing; under CI that is a failure.

mod common;

use std::process::Command;

use common::{home, hopwise_command as hopwise, sample_index};
use hopwise_core::{Decision, EventKind, Trace};
use hopwise_remote::servers::{self, LlamaServer};

const QUESTION: &str = "Which Canadian rock band released a song called \"Counterparts\" and had a drummer who was inducted into the Modern Drummer Hall of Fame?";

fn missing(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "CI: {why}");
    eprintln!("skipped: {why}");
}

#[test]
fn toqd_through_a_real_llama_cpp_server() {
    let Some(python) = servers::require("python") else { return };
    let importable = Command::new(&python).args(["-c", "import xllamacpp"]).output().map(|o| o.status.success());
    if importable.ok() != Some(true) {
        return missing("xllamacpp is not installed in the server venv; run `scripts/servers.sh install`");
    }
    let Some(model) = hopwise_llama::installed_model("qwen2.5-0.5b", &home()) else {
        return missing("qwen2.5-0.5b is not installed; run `hopwise setup --fetch qwen2.5-0.5b`");
    };
    let server = LlamaServer::start(&python, &model, 1, 4096).expect("start the llama.cpp server");
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = sample_index(tmp.path());

    let out = hopwise()
        // The planning path (`answer_first` could settle the question with one reading).
        .args(["ask", QUESTION, "--strategy", "toqd", "--json", "--r-max", "1", "--opt", "answer_first=false"])
        .args(["--base-url", &server.base_url, "--model", "qwen2.5-0.5b"])
        .arg("--index")
        .arg(&index)
        .output()
        .expect("ask");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nserver log:\n{}", server.log_tail());
    let trace: Trace = serde_json::from_slice(&out.stdout).expect("stdout is the trace");

    // The OpenAI-compatible backend, not the in-process one, answered.
    assert!(!trace.model.starts_with("local:"), "{}", trace.model);
    assert!(trace.model.contains("qwen2.5-0.5b"), "{}", trace.model);
    assert!(!trace.nodes.is_empty());
    assert!(trace.nodes.iter().all(|n| n.decision != Decision::Pending), "every node was resolved");
    let calls: Vec<_> = trace.events.iter().filter(|e| matches!(e.kind, EventKind::LlmCall { .. })).collect();
    assert_eq!(calls.len() as u64, trace.stats.llm_calls);
    assert!(trace.stats.llm_calls >= 3, "plan, answer and at least one node: {}", trace.stats.llm_calls);
    assert!(
        calls.iter().any(|e| matches!(&e.kind, EventKind::LlmCall { purpose, .. } if purpose == "plan")),
        "ToQD planned through the server"
    );
    // Token usage comes from the server's `usage` field.
    assert!(trace.stats.prompt_tokens > 0 && trace.stats.completion_tokens > 0, "{:?}", trace.stats);
    let rounds = trace.events.iter().filter(|e| matches!(e.kind, EventKind::Retrieval { .. })).count() as u64;
    assert_eq!(rounds, trace.stats.retrieval_rounds);
    for p in trace.evidence() {
        assert!(p.id.starts_with("hotpotqa-s") || p.id.starts_with("2wikimultihopqa-s"), "{}", p.id);
    }
}
