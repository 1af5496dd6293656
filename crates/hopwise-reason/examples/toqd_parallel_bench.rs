//! ToQD wall time ÷ critical-path time under a backend with fixed latency.
//!
//! The critical path is the longest chain of model calls that must run one after another: the
//! planning calls, then the heaviest root-to-sink path through the topology graph (each node's
//! calls are sequential), then the summary. With perfect parallelism wall ≈ critical path, so the
//! ratio measures executor overhead and lost concurrency. Target: ≤ 1.2.
//!
//! Run: cargo run --release -p hopwise-reason --example toqd_parallel_bench [latency_ms]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::{EventKind, Prompts, Recorder, Retriever, Trace};
use hopwise_reason::strategy::{build, run, StrategyOptions};
use hopwise_reason::Ctx;

/// Longest chain of sequential model calls, counted from the trace.
fn critical_calls(trace: &Trace) -> u64 {
    let mut per_node: HashMap<&str, u64> = HashMap::new();
    let mut unattached = 0;
    for e in &trace.events {
        if let EventKind::LlmCall { .. } = e.kind {
            match e.node_id.as_deref() {
                Some(n) if n != "Q" => *per_node.entry(n).or_default() += 1,
                _ => unattached += 1, // planning and summary run before/after the graph
            }
        }
    }
    let mut memo: HashMap<String, u64> = HashMap::new();
    fn longest(id: &str, t: &Trace, per: &HashMap<&str, u64>, memo: &mut HashMap<String, u64>) -> u64 {
        if let Some(v) = memo.get(id) {
            return *v;
        }
        let own = per.get(id).copied().unwrap_or(0);
        let best = t.edges.iter().filter(|e| e.to == id).map(|e| longest(&e.from, t, per, memo)).max().unwrap_or(0);
        memo.insert(id.to_string(), own + best);
        own + best
    }
    unattached + longest("Q", trace, &per_node, &mut memo)
}

async fn one(latency: Duration, width: usize) -> (Duration, u64, Trace) {
    let subs: String = (1..=width).map(|i| format!("{i}. What is fact number {i}?\n")).collect();
    let edges: String = (1..=width).map(|i| format!("{i} -> Q\n")).collect();
    let llm = ScriptedLlm::new()
        .on("Break the question below", &subs)
        .on("Review the candidates", &subs)
        .on("Describe which answers help", &edges)
        .on("from your own knowledge", "NO!")
        .on("Using the passages, answer", "an answer")
        .on("Reply in exactly this form", "Answer: done")
        .latency(latency);
    let retriever = StaticRetriever::from_pairs(&[("Fact", "fact number one two three four five six")]);
    let strategy = build("toqd", &StrategyOptions::default()).expect("toqd is registered");
    let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), Recorder::new("q", "toqd"))
        .with_retriever(Some(Arc::new(retriever) as Arc<dyn Retriever>));
    let start = Instant::now();
    let trace = run(strategy.as_ref(), &ctx, "A question that needs several facts?").await.expect("runs");
    (start.elapsed(), critical_calls(&trace), trace)
}

#[tokio::main]
async fn main() {
    let latency_ms: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let latency = Duration::from_millis(latency_ms);
    println!("fixed backend latency: {latency_ms} ms per call");
    println!("{:>6} {:>10} {:>10} {:>14} {:>8}", "width", "llm_calls", "wall_ms", "critical_ms", "ratio");
    for width in [1, 2, 4, 6] {
        let (wall, critical, trace) = one(latency, width).await;
        let critical_ms = critical * latency_ms;
        println!(
            "{:>6} {:>10} {:>10} {:>14} {:>8.3}",
            width,
            trace.stats.llm_calls,
            wall.as_millis(),
            critical_ms,
            wall.as_millis() as f64 / critical_ms as f64
        );
    }
}
