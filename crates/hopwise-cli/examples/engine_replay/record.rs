//! `record`: answers questions with ToQD through the local model, capturing every model request.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use hopwise_core::{ChatRequest, ChatResponse, Llm, Prompts, Recorder, Role};
use hopwise_index::Bm25Retriever;
use hopwise_reason::strategy::{build, run};
use hopwise_reason::{Ctx, StrategyOptions};

use crate::workload::{self, Call};

/// Passes requests to the model and notes each with its offsets from the question's start.
struct RecordingLlm {
    inner: Arc<dyn Llm>,
    prompts: Arc<Prompts>,
    question: usize,
    started: Instant,
    calls: Mutex<Vec<Call>>,
}

#[async_trait]
impl Llm for RecordingLlm {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn chat(&self, request: &ChatRequest) -> hopwise_core::Result<ChatResponse> {
        let start_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let response = self.inner.chat(request).await?;
        let end_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let user = request.messages.iter().rev().find(|m| m.role == Role::User).map_or("", |m| m.content.as_str());
        let call = Call {
            question: self.question,
            index: 0,
            purpose: workload::purpose_of(&self.prompts, user),
            start_ms,
            end_ms,
            request: request.clone(),
            prompt_tokens: response.usage.prompt_tokens,
            cached_prompt_tokens: response.usage.cached_prompt_tokens,
            completion_tokens: response.usage.completion_tokens,
            text: response.text().to_string(),
            timing: response.timing,
        };
        self.calls.lock().map_err(|_| hopwise_core::Error::Config("recorder lock poisoned".into()))?.push(call);
        Ok(response)
    }
}

pub struct RecordArgs {
    pub dataset: PathBuf,
    pub index: PathBuf,
    /// Dataset records passed over before the first recorded question.
    pub skip: usize,
    pub limit: usize,
    pub out: PathBuf,
}

pub async fn record(llm: Arc<dyn Llm>, args: RecordArgs) -> Result<(), Box<dyn std::error::Error>> {
    let questions = read_questions(&args.dataset, args.skip, args.limit)?;
    let retriever: Arc<dyn hopwise_core::Retriever> = Arc::new(Bm25Retriever::open(&args.index)?);
    let prompts = Arc::new(Prompts::default());
    let strategy = build("toqd", &StrategyOptions::default())?;
    let mut all = Vec::new();
    println!("| # | calls | prompt tokens | cached | share | seconds | answer |\n|---:|---:|---:|---:|---:|---:|---|");
    for (index, question) in questions.iter().enumerate() {
        let recording = Arc::new(RecordingLlm {
            inner: llm.clone(),
            prompts: prompts.clone(),
            question: args.skip + index,
            started: Instant::now(),
            calls: Mutex::new(Vec::new()),
        });
        let ctx = Ctx::new(recording.clone(), prompts.clone(), Recorder::new(question, "toqd"))
            .with_retriever(Some(retriever.clone()))
            .with_k(5);
        let trace = run(strategy.as_ref(), &ctx, question).await?;
        let mut calls = std::mem::take(&mut *recording.calls.lock().map_err(|_| "recorder lock poisoned")?);
        calls.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        for (order, call) in calls.iter_mut().enumerate() {
            call.index = order;
        }
        let stats = &trace.stats;
        println!(
            "| {} | {} | {} | {} | {:.1}% | {:.1} | {} |",
            args.skip + index,
            stats.llm_calls,
            stats.prompt_tokens,
            stats.cached_prompt_tokens,
            100.0 * stats.cached_prompt_tokens as f64 / stats.prompt_tokens.max(1) as f64,
            stats.wall_ms as f64 / 1000.0,
            trace.answer.replace('|', "/")
        );
        all.extend(calls);
        // Written after every question, so an interrupted recording keeps what it has.
        workload::write(&args.out, &all)?;
    }
    let prompt: u64 = all.iter().map(|c| c.prompt_tokens).sum();
    let cached: u64 = all.iter().map(|c| c.cached_prompt_tokens).sum();
    println!(
        "\n{} calls over {} questions; prompt tokens {prompt}, served from the prefix cache {cached} ({:.1}%); written to {}",
        all.len(),
        questions.len(),
        100.0 * cached as f64 / prompt.max(1) as f64,
        args.out.display()
    );
    Ok(())
}

/// The `question` field of `limit` records of a JSONL dataset, after the first `skip`.
fn read_questions(
    path: &std::path::Path,
    skip: usize,
    limit: usize,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut questions = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()).skip(skip).take(limit) {
        let value: serde_json::Value = serde_json::from_str(line)?;
        let question = value["question"].as_str().ok_or_else(|| format!("a record without `question`: {line:.80}"))?;
        questions.push(question.to_string());
    }
    Ok(questions)
}
