//! Against a real llama.cpp server: xllamacpp (from the server venv, `scripts/servers.sh install`)
//! serves the packaged 0.5B GGUF on 127.0.0.1 with 1 thread. The OpenAI-compatible client asks for
//! samples, usage, logprobs and a grammar; then `hopwise ask --strategy toqd --base-url …` answers a
//! sample question through it. Assertions are on protocol and trace structure, never on the model's
//! wording. Skipped when the venv or the model is missing; under CI that is a failure.
//! `HOPWISE_OPENAI_TEST_URL` (and `HOPWISE_OPENAI_TEST_MODEL`) point the client test at another
//! OpenAI-compatible server instead.

mod common;

use std::process::Command;

use common::{home, hopwise_command as hopwise, sample_index};
use hopwise_core::{ChatMessage, ChatRequest, Decision, EventKind, GenParams, Llm, Trace};
use hopwise_models::{OpenAiConfig, OpenAiLlm};
use hopwise_remote::servers::{self, LlamaServer};

const QUESTION: &str = "Which Canadian rock band released a song called \"Counterparts\" and had a drummer who was inducted into the Modern Drummer Hall of Fame?";

fn missing(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "CI: {why}");
    hopwise_core::test_skips::skipped(why);
}

/// The llama.cpp server with the 0.5B model, or why it cannot start here.
fn llama_server() -> Option<LlamaServer> {
    let python = servers::require("python")?;
    let importable = Command::new(&python).args(["-c", "import xllamacpp"]).output().map(|o| o.status.success());
    if importable.ok() != Some(true) {
        missing("xllamacpp is not installed in the server venv; run `scripts/servers.sh install`");
        return None;
    }
    let Some(model) = hopwise_llama::installed_model("qwen2.5-0.5b", &home()) else {
        missing("qwen2.5-0.5b is not installed; run `hopwise setup --fetch qwen2.5-0.5b`");
        return None;
    };
    Some(LlamaServer::start(&python, &model, 1, 4096).expect("start the llama.cpp server"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_gets_samples_usage_logprobs_and_grammar_from_a_real_server() {
    let (_server, base_url, model) = match std::env::var("HOPWISE_OPENAI_TEST_URL") {
        Ok(url) => (None, url, std::env::var("HOPWISE_OPENAI_TEST_MODEL").unwrap_or_else(|_| "default".into())),
        Err(_) => {
            let Some(server) = tokio::task::spawn_blocking(llama_server).await.expect("join") else { return };
            let url = server.base_url.clone();
            (Some(server), url, "qwen2.5-0.5b".to_string())
        }
    };
    let config =
        OpenAiConfig { timeout_secs: 120.0, max_retries: 1, retry_base_ms: 100, ..OpenAiConfig::new(base_url, model) };
    let llm = OpenAiLlm::new(config.clone()).expect("client");
    assert!(!llm.list_models().await.expect("models").is_empty());

    let request = ChatRequest::new(
        vec![ChatMessage::user("Reply with one word: hello")],
        GenParams { n: 2, seed: Some(3), max_tokens: 8, temperature: 0.8, top_p: 0.95, ..GenParams::default() },
    );
    let response = llm.chat(&request).await.expect("two samples");
    assert_eq!(response.choices.len(), 2);
    assert!(response.usage.prompt_tokens > 0 && response.usage.completion_tokens > 0, "{:?}", response.usage);
    assert!(response.choices.iter().all(|c| c.finish_reason.is_some()));

    let request = ChatRequest::new(
        vec![ChatMessage::user("Is the sky blue? Answer yes or no.")],
        GenParams {
            max_tokens: 4,
            logprobs: true,
            grammar: Some("root ::= \"yes\" | \"no\"".into()),
            ..GenParams::default()
        },
    );
    let constrained = OpenAiLlm::new(OpenAiConfig { send_grammar: true, ..config }).expect("client");
    let response = constrained.chat(&request).await.expect("a constrained reply");
    assert!(response.grammar_used);
    assert!(["yes", "no"].contains(&response.text()), "grammar not applied: {:?}", response.text());
    let first = &response.choices[0].top_logprobs;
    assert!(!first.is_empty(), "no logprobs came back");
    assert!(first.iter().all(|(_, lp)| *lp <= 0.0));
    // Every generated token's own log-probability, which flare-direct's gate reads.
    let tokens = &response.choices[0].token_logprobs;
    assert!(!tokens.is_empty() && tokens.iter().all(|(_, lp)| *lp <= 0.0), "{tokens:?}");
}

#[test]
fn toqd_through_a_real_llama_cpp_server() {
    let Some(server) = llama_server() else { return };
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

    // flare-direct reads the server's `logprobs`: its step records token probabilities.
    let out = hopwise()
        .args(["ask", QUESTION, "--strategy", "flare-direct", "--json", "--opt", "max_steps=1"])
        .args(["--base-url", &server.base_url, "--model", "qwen2.5-0.5b"])
        .arg("--index")
        .arg(&index)
        .output()
        .expect("ask");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("reported none"), "the server's logprobs were not read: {stderr}");
    let trace: Trace = serde_json::from_slice(&out.stdout).expect("stdout is the trace");
    let step = trace.node("1").expect("one sentence step");
    assert!(step.extra.get("tokens").and_then(|t| t.as_array()).is_some(), "{}", step.extra);
}
