//! HGOT's cited-thought grammar on the real Qwen2.5-Coder-0.5B model (it must be installed:
//! `hopwise setup`): llama.cpp accepts the grammar, and every sampled thought reads back as
//! sentences that each cite passages of the prompt. What the model says is not asserted.

use std::sync::Arc;

use hopwise_core::{ChatRequest, GenParams, Passage, Prompts, Recorder};
use hopwise_llama::{default_home, installed_model, LocalConfig, LocalLlm, TEST_MODEL};
use hopwise_reason::protocol::citations::{cited_thought_grammar, parse_thought, split_statements};
use hopwise_reason::Ctx;

#[tokio::test]
async fn every_constrained_thought_states_something_before_each_marker() {
    let home = default_home();
    let path = installed_model(TEST_MODEL, &home).unwrap_or_else(|| {
        panic!("{TEST_MODEL} is not installed under {}/models: run `hopwise setup`", home.display())
    });
    let llm =
        Arc::new(LocalLlm::load(path, LocalConfig { threads: Some(1), ..LocalConfig::default() }).expect("loads"));
    let question = "Where was the director of Jaws born?";
    let ctx = Ctx::new(llm.clone(), Arc::new(Prompts::default()), Recorder::new(question, "hgot"));
    let passages: Vec<Passage> = [
        ("Jaws (film)", "Jaws is a 1975 American thriller film directed by Steven Spielberg."),
        ("Steven Spielberg", "Steven Spielberg was born in Cincinnati, Ohio, on December 18, 1946."),
        ("Sharks", "Sharks are fish that live in every ocean."),
    ]
    .iter()
    .enumerate()
    .map(|(i, (title, text))| Passage {
        id: format!("p{i}"),
        title: title.to_string(),
        text: text.to_string(),
        ..Default::default()
    })
    .collect();
    let prompt = ctx
        .render(
            "hgot_probe",
            &[("demonstrations", ""), ("passages", &ctx.format_passages(&passages)), ("question", question)],
        )
        .expect("renders");
    let params = GenParams {
        n: 3,
        temperature: 0.7,
        top_p: 1.0,
        max_tokens: 256,
        seed: Some(7),
        grammar: cited_thought_grammar(passages.len()),
        ..GenParams::default()
    };
    let reply =
        hopwise_core::Llm::chat(llm.as_ref(), &ChatRequest::new(vec![hopwise_core::ChatMessage::user(prompt)], params))
            .await
            .expect("the grammar is accepted");
    assert!(reply.grammar_used);
    assert_eq!(reply.choices.len(), 3);
    for choice in &reply.choices {
        let text = choice.text.trim_start();
        assert!(text.starts_with("Rationale: ") && !text.starts_with("Rationale: ["), "{text:?}");
        let statements = split_statements(&parse_thought(text).rationale);
        assert!(!statements.is_empty(), "{text:?}");
        for statement in &statements {
            assert!(!statement.citations.is_empty(), "{text:?}: {statement:?}");
            assert!(statement.citations.iter().all(|n| (1..=passages.len()).contains(n)), "{text:?}");
        }
    }
}
