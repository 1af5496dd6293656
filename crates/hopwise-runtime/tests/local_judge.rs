//! The LLM-as-NLI judge on the real Qwen2.5-Coder-0.5B model (it must be installed: `hopwise setup`):
//! several pairs in one grammar-constrained request come back with a label each. The labels a small
//! model picks are not asserted, only the protocol.

use std::sync::Arc;

use hopwise_core::{EventKind, Nli, Prompts, Recorder};
use hopwise_llama::{default_home, installed_model, LocalConfig, LocalLlm, TEST_MODEL};
use hopwise_reason::nli_judge::LlmNli;
use hopwise_reason::Meter;

#[tokio::test]
async fn a_batch_of_pairs_is_one_constrained_request_with_a_label_per_pair() {
    let home = default_home();
    let path = installed_model(TEST_MODEL, &home).unwrap_or_else(|| {
        panic!("{TEST_MODEL} is not installed under {}/models: run `hopwise setup`", home.display())
    });
    let llm = LocalLlm::load(path, LocalConfig { threads: Some(1), ..LocalConfig::default() }).expect("model loads");
    let rec = Recorder::new("q", "hgot");
    let judge = LlmNli::new(Arc::new(Meter::new(Arc::new(llm), rec.clone(), 10)), Arc::new(Prompts::default()));
    let pairs: Vec<(String, String)> = [
        ("Jaws is a 1975 film directed by Steven Spielberg.", "Steven Spielberg directed Jaws."),
        ("Jaws is a 1975 film directed by Steven Spielberg.", "Jaws was released in 1990."),
        ("Steven Spielberg was born in Cincinnati, Ohio.", "Spielberg was born in Ohio."),
    ]
    .iter()
    .map(|(p, h)| (p.to_string(), h.to_string()))
    .collect();
    let verdicts = judge.judge_all(&pairs).await;
    assert_eq!(verdicts.len(), 3);
    for (pair, verdict) in pairs.iter().zip(&verdicts) {
        assert!(verdict.is_ok(), "{pair:?}: {verdict:?}");
    }
    let trace = rec.snapshot();
    let calls: Vec<_> = trace.events.iter().filter(|e| matches!(e.kind, EventKind::LlmCall { .. })).collect();
    assert_eq!(calls.len(), 1, "one request for the three pairs");
    assert!(
        matches!(&calls[0].kind, EventKind::LlmCall { purpose, grammar: true, .. } if purpose == "nli_judge_batch"),
        "{:?}",
        calls[0].kind
    );
}
