//! Overhead of the HTTP client and of the call cache, measured against the mock server on loopback
//! with a zero-latency scripted model (so the figures are client + HTTP + JSON cost, not inference).
//!
//! `cargo run --release -p hopwise-models --example bench_client [CALLS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{ChatMessage, ChatRequest, GenParams, Llm};
use hopwise_models::testing::MockOpenAiServer;
use hopwise_models::{CacheMode, CachedLlm, OpenAiConfig, OpenAiLlm};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

fn request(i: usize) -> ChatRequest {
    let prompt = format!(
        "Question {i}: which river flows through the city where the author was born? {}",
        "context ".repeat(200)
    );
    ChatRequest::new(vec![ChatMessage::user(prompt)], GenParams { max_tokens: 64, ..GenParams::default() })
}

async fn sequential(llm: &dyn Llm, calls: usize, offset: usize) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(calls);
    for i in 0..calls {
        let started = Instant::now();
        if let Err(e) = llm.chat(&request(offset + i)).await {
            eprintln!("call failed: {e}");
            std::process::exit(1);
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    latencies
}

fn report(label: &str, latencies: &[Duration]) {
    println!(
        "{label:<44} p50 {:>8.1} µs   p99 {:>8.1} µs   ({} calls)",
        percentile(latencies, 0.5).as_secs_f64() * 1e6,
        percentile(latencies, 0.99).as_secs_f64() * 1e6,
        latencies.len()
    );
}

#[tokio::main]
async fn main() {
    let calls: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let server = match MockOpenAiServer::start(Arc::new(ScriptedLlm::new().fallback("The Thames."))).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot start the mock server: {e}");
            std::process::exit(1);
        }
    };
    let config = OpenAiConfig { max_in_flight: 8, ..OpenAiConfig::new(server.base_url(), "bench") };
    let llm = match OpenAiLlm::new(config) {
        Ok(llm) => Arc::new(llm),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!(
        "hopwise-models client overhead, {} worker threads, prompt ~1.5 KB",
        tokio::runtime::Handle::current().metrics().num_workers()
    );

    sequential(llm.as_ref(), 100, 0).await; // warm-up: connection pool, allocator
    report("HTTP round trip, sequential", &sequential(llm.as_ref(), calls, 100).await);

    let started = Instant::now();
    let batch = (0..calls).map(|i| {
        let llm = llm.clone();
        async move { llm.chat(&request(i)).await }
    });
    let results = futures::future::join_all(batch).await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    let elapsed = started.elapsed();
    println!(
        "{:<44} {:>8.0} calls/s ({calls} calls, {failed} failed, peak in flight {})",
        "HTTP throughput, max_in_flight = 8",
        calls as f64 / elapsed.as_secs_f64(),
        server.peak_in_flight()
    );

    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let cached = CachedLlm::new(ScriptedLlm::new().fallback("The Thames."), dir.path(), CacheMode::ReadWrite);
    report("cache miss (scripted model + fsync'd write)", &sequential(&cached, calls.min(500), 0).await);
    report("cache hit (read + parse + verify)", &sequential(&cached, calls.min(500), 0).await);
}
