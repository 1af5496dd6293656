//! Indexing throughput and query latency of Typesense and Milvus (real servers started here on
//! 127.0.0.1) against hopwise's embedded BM25 and dense retrievers, on the same HotpotQA passages and
//! questions, plus the per-query network overhead.
//!
//!     cargo run --release -p hopwise-remote --example remote_bench -- [--questions N] [--passes P]
//!
//! Embeddings are computed once up front (and cached), and both indexing and queries read them from
//! a table, so the figures measure the engines (and their HTTP round trips), not MiniLM. Needs
//! `scripts/servers.sh install` and all-MiniLM-L6-v2; an engine that is not installed is skipped.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use hopwise_core::{Embedder, Retriever};
use hopwise_remote::servers::{self, MilvusServer, TypesenseServer};
use hopwise_remote::{
    import_passages, ImportOptions, MilvusConfig, MilvusStore, RemoteRetriever, RemoteStore, SearchMode,
    TypesenseConfig, TypesenseStore,
};

const K: usize = 5;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// Latencies (ms) of every question, `passes` times, after one untimed warm-up pass.
async fn latency(r: &dyn Retriever, subset: &Subset, passes: usize) -> (f64, f64, f64) {
    for q in &subset.questions {
        let _ = r.retrieve(&q.text, K).await;
    }
    let mut times = Vec::new();
    let mut results = Vec::new();
    for pass in 0..passes {
        for q in &subset.questions {
            let t = Instant::now();
            let hits = r.retrieve(&q.text, K).await.unwrap_or_default();
            times.push(t.elapsed());
            if pass == 0 {
                results.push(hits);
            }
        }
    }
    times.sort();
    (pct(&times, 0.5), pct(&times, 0.99), recall_at(&results, &subset.questions, K))
}

/// p50 (ms) of a request that does no search work: the HTTP + loopback floor of one query.
async fn round_trip(store: &dyn RemoteStore, n: usize) -> f64 {
    let mut times = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let _ = store.health().await;
        times.push(t.elapsed());
    }
    times.sort();
    pct(&times, 0.5)
}

fn row(name: &str, index_s: Option<f64>, n: usize, lat: (f64, f64, f64), overhead: Option<f64>) {
    let rate = index_s.map(|s| format!("{:.0}", n as f64 / s)).unwrap_or_else(|| "—".into());
    let over = overhead.map(|o| format!("{o:.2}")).unwrap_or_else(|| "—".into());
    println!("| {name} | {rate} | {:.2} | {:.2} | {over} | {:.3} |", lat.0, lat.1, lat.2);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let questions = arg("--questions", 100);
    let passes = arg("--passes", 3);
    let Some(model) = minilm() else { return Ok(()) };
    let Some(subset) = hotpotqa_subset(questions) else {
        return Err(format!(
            "HotpotQA data not found in {:?} (set HOPWISE_DATA to the evaluation data folder)",
            data_dir()
        )
        .into());
    };
    let n = subset.passages.len();
    let embedder = table_embedder(&subset, model).await;
    println!(
        "corpus: {n} passages of the first {questions} HotpotQA questions; {} queries x {passes} passes, k={K}",
        subset.questions.len()
    );
    println!();
    println!("| retriever | indexing passages/s | query p50 ms | query p99 ms | HTTP round trip p50 ms | recall@5 |");
    println!("|---|---:|---:|---:|---:|---:|");

    // Embedded: BM25 (tantivy) and the exact dense scan, built from the same passages.
    let dir = tempfile::tempdir()?;
    let t = Instant::now();
    let (bm25, dense) = embedded_retrievers(&subset, embedder.clone(), dir.path()).await;
    let build_s = t.elapsed().as_secs_f64();
    row("embedded bm25 + dense (build both)", Some(build_s), n, latency(bm25.as_ref(), &subset, passes).await, None);
    row("embedded dense (exact)", None, n, latency(dense.as_ref(), &subset, passes).await, None);

    let opts = ImportOptions { batch: 64, ..ImportOptions::default() };
    if let Some(bin) = servers::require("typesense-server") {
        let server = TypesenseServer::start(&bin)?;
        let store =
            Arc::new(TypesenseStore::new(TypesenseConfig::new(server.url.clone(), server.api_key.clone(), "bench"))?);
        let t = Instant::now();
        import_passages(store.as_ref(), embedder.as_ref(), subset.passages.clone(), opts, &|_| {}).await?;
        let secs = t.elapsed().as_secs_f64();
        let rt = round_trip(store.as_ref(), 200).await;
        for (mode, label) in [
            (SearchMode::Vector, "typesense vector"),
            (SearchMode::Text, "typesense text"),
            (SearchMode::Hybrid, "typesense hybrid"),
        ] {
            let r = RemoteRetriever::open(store.clone(), Some(embedder.clone() as Arc<dyn Embedder>), mode).await?;
            let index_s = (mode == SearchMode::Vector).then_some(secs);
            row(label, index_s, n, latency(&r, &subset, passes).await, Some(rt));
        }
    }
    if let Some(bin) = servers::require("milvus-server") {
        let server = MilvusServer::start(&bin)?;
        let store = Arc::new(MilvusStore::new(MilvusConfig::new(server.url.clone(), "bench"))?);
        let t = Instant::now();
        import_passages(store.as_ref(), embedder.as_ref(), subset.passages.clone(), opts, &|_| {}).await?;
        let secs = t.elapsed().as_secs_f64();
        // Searches see rows once Milvus has them counted (its reads are eventually consistent).
        let started = Instant::now();
        while store.count().await.unwrap_or(0) < n as u64 && started.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let visible = started.elapsed().as_secs_f64();
        let rt = round_trip(store.as_ref(), 200).await;
        let r = RemoteRetriever::open(store.clone(), Some(embedder.clone() as Arc<dyn Embedder>), SearchMode::Vector)
            .await?;
        row(
            "milvus vector (HNSW, through the netns forwarder)",
            Some(secs),
            n,
            latency(&r, &subset, passes).await,
            Some(rt),
        );
        println!();
        println!(
            "milvus: all rows visible to count {visible:.1} s after the import returned; index {}",
            store.index_description().await.unwrap_or_default()
        );
    }
    Ok(())
}
