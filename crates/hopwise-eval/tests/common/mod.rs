//! Shared fixtures for the runner tests: small datasets, a scripted model and a tiny retriever.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{Passage, Prompts, Recorder, Retriever};
use hopwise_eval::{CtxFactory, EvalConfig, Job};
use hopwise_reason::Ctx;

/// The number in "… number 12: …", used by the scripted model and the retriever.
pub fn number_in(text: &str) -> Option<usize> {
    let rest = &text[text.find("number ")? + 7..];
    rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
}

/// Writes a normalised JSONL dataset of `n` questions; example i's answer is `city{i}` and its gold
/// evidence is the paragraph titled `T{i}`. Types alternate bridge / comparison.
pub fn write_dataset(dir: &Path, name: &str, n: usize) -> PathBuf {
    let path = dir.join(format!("{name}.jsonl"));
    let lines: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({
                "id": format!("{name}-{i}"),
                "question": format!("Which city is number {i}: in {name}?"),
                "answers": [format!("city{i}")],
                "type": if i % 2 == 0 { "bridge" } else { "comparison" },
                "paragraphs": [{"title": format!("T{i}"), "text": format!("Fact number {i}: city{i}."), "supporting": true}],
            })
            .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").expect("write dataset");
    path
}

/// Knows the answer when the question's number is not a multiple of 3; with passages in the prompt
/// it reads the answer from them.
pub fn model(latency: Duration) -> ScriptedLlm {
    ScriptedLlm::new().latency(latency).fallback("Answer: unknown").on_fn("Question:", |prompt, _| {
        if let Some(start) = prompt.find("Fact number ") {
            if let Some(i) = number_in(&prompt[start..]) {
                return format!("Answer: city{i}");
            }
        }
        match number_in(prompt.rsplit("Question:").next().unwrap_or("")) {
            Some(i) if i % 3 != 0 => format!("Reasoning.\nAnswer: city{i}"),
            _ => "Answer: nowhere".to_string(),
        }
    })
}

/// Returns a distractor first, then the matching fact (so MRR is 0.5).
pub struct TinyRetriever;

#[async_trait]
impl Retriever for TinyRetriever {
    fn name(&self) -> &str {
        "tiny"
    }
    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        let mut out =
            vec![Passage { id: "d".into(), title: "Distractor".into(), text: "Nothing.".into(), ..Default::default() }];
        if let Some(i) = number_in(query) {
            out.push(Passage {
                id: format!("p{i}"),
                title: format!("T{i}"),
                text: format!("Fact number {i}: city{i}."),
                ..Default::default()
            });
        }
        out.truncate(k);
        Ok(out)
    }
}

pub fn factory(latency: Duration, with_retriever: bool) -> Arc<dyn CtxFactory> {
    let llm = model(latency);
    let retriever: Option<Arc<dyn Retriever>> = with_retriever.then(|| Arc::new(TinyRetriever) as Arc<dyn Retriever>);
    Arc::new(move |_job: &Job, rec: Recorder| -> hopwise_eval::Result<Ctx> {
        Ok(Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), rec).with_retriever(retriever.clone()))
    })
}

pub fn config(datasets: Vec<PathBuf>, strategies: &[&str], out: &Path) -> EvalConfig {
    let mut c = EvalConfig::new(datasets, strategies.iter().map(|s| s.to_string()).collect(), out.to_path_buf());
    c.model = "scripted".into();
    c.retriever = Some("tiny".into());
    c.concurrency = 4;
    c.plots = false;
    c
}

/// Raw results lines, each parsed as JSON (fails the test on a bad line).
pub fn raw_lines(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("results.jsonl")).expect("results");
    assert!(text.is_empty() || text.ends_with('\n'), "no partial last line");
    text.lines().map(|l| serde_json::from_str(l).expect("every line is JSON")).collect()
}
