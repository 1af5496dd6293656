//! `replay`: sends a recorded workload to a backend again, keeping each question's order: a call
//! is sent once every call of its question that had ended before it started (in the recording) has
//! ended again. Questions run `concurrency` at a time. Requests are made greedy, so every backend
//! computes the same outputs and their costs compare.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hopwise_core::{ChatRequest, Llm};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::workload::Call;

/// What one replayed call cost and returned.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub question: usize,
    pub index: usize,
    pub latency: Duration,
    pub prompt_tokens: u64,
    pub cached_prompt_tokens: u64,
    pub completion_tokens: u64,
    pub text: Result<String, String>,
}

pub fn greedy(request: &ChatRequest) -> ChatRequest {
    let mut request = request.clone();
    request.params.temperature = 0.0;
    request
}

async fn one(llm: Arc<dyn Llm>, call: Call) -> Outcome {
    let started = Instant::now();
    let result = llm.chat(&greedy(&call.request)).await;
    let latency = started.elapsed();
    let (prompt_tokens, cached_prompt_tokens, completion_tokens) = result
        .as_ref()
        .map_or((0, 0, 0), |r| (r.usage.prompt_tokens, r.usage.cached_prompt_tokens, r.usage.completion_tokens));
    Outcome {
        question: call.question,
        index: call.index,
        latency,
        prompt_tokens,
        cached_prompt_tokens,
        completion_tokens,
        text: result.map(|r| r.text().to_string()).map_err(|e| e.to_string()),
    }
}

/// One question's calls (in start order), each sent when its predecessors are done.
async fn question(llm: Arc<dyn Llm>, calls: Vec<Call>) -> Vec<Outcome> {
    let mut in_flight = JoinSet::new();
    let mut done = vec![false; calls.len()];
    let mut outcomes = Vec::with_capacity(calls.len());
    for (position, call) in calls.iter().enumerate() {
        while (0..position).any(|earlier| !done[earlier] && call.depends_on(&calls[earlier])) {
            let Some(Ok((finished, outcome))) = in_flight.join_next().await else { break };
            done[finished] = true;
            outcomes.push(outcome);
        }
        let (llm, call) = (llm.clone(), call.clone());
        in_flight.spawn(async move { (position, one(llm, call).await) });
    }
    while let Some(joined) = in_flight.join_next().await {
        if let Ok((finished, outcome)) = joined {
            done[finished] = true;
            outcomes.push(outcome);
        }
    }
    outcomes
}

/// Replays `questions` (each a start-ordered list of calls), `concurrency` questions at a time.
/// Returns the wall time and every call's outcome.
pub async fn replay(llm: Arc<dyn Llm>, questions: &[Vec<Call>], concurrency: usize) -> (Duration, Vec<Outcome>) {
    let started = Instant::now();
    let slots = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut running = JoinSet::new();
    for calls in questions {
        let (llm, calls, slots) = (llm.clone(), calls.clone(), slots.clone());
        running.spawn(async move {
            let _slot = slots.acquire_owned().await;
            question(llm, calls).await
        });
    }
    let mut outcomes = Vec::new();
    while let Some(joined) = running.join_next().await {
        outcomes.extend(joined.unwrap_or_default());
    }
    (started.elapsed(), outcomes)
}
