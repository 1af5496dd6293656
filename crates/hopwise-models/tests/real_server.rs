//! The client against a real OpenAI-compatible server, when one is named by `HOPWISE_OPENAI_TEST_URL`
//! (e.g. llama.cpp's server: `http://127.0.0.1:8080/v1`; optional `HOPWISE_OPENAI_TEST_MODEL`). Without
//! it the test reports itself skipped. Asserts protocol and structure only, never model facts.

use hopwise_core::{ChatMessage, ChatRequest, GenParams, Llm};
use hopwise_models::{OpenAiConfig, OpenAiLlm};

fn real_server() -> Option<OpenAiConfig> {
    let Ok(base_url) = std::env::var("HOPWISE_OPENAI_TEST_URL") else {
        eprintln!("skipped: HOPWISE_OPENAI_TEST_URL is not set");
        return None;
    };
    let model = std::env::var("HOPWISE_OPENAI_TEST_MODEL").unwrap_or_else(|_| "default".into());
    Some(OpenAiConfig { timeout_secs: 120.0, max_retries: 1, retry_base_ms: 100, ..OpenAiConfig::new(base_url, model) })
}

#[tokio::test]
async fn real_server_answers_with_samples_usage_and_logprobs() {
    let Some(config) = real_server() else { return };
    let llm = OpenAiLlm::new(config.clone()).unwrap();
    assert!(!llm.list_models().await.unwrap().is_empty());

    let request = ChatRequest::new(
        vec![ChatMessage::user("Reply with one word: hello")],
        GenParams { n: 2, seed: Some(3), max_tokens: 8, temperature: 0.8, top_p: 0.95, ..GenParams::default() },
    );
    let response = llm.chat(&request).await.unwrap();
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
    let constrained = OpenAiLlm::new(OpenAiConfig { send_grammar: true, ..config }).unwrap();
    let response = constrained.chat(&request).await.unwrap();
    assert!(response.grammar_used);
    assert!(["yes", "no"].contains(&response.text()), "grammar not applied: {:?}", response.text());
    let first = &response.choices[0].top_logprobs;
    assert!(!first.is_empty(), "no logprobs came back");
    assert!(first.iter().all(|(_, lp)| *lp <= 0.0));
}
