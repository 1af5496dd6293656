//! Embedding throughput of the in-process all-MiniLM-L6-v2 encoder.
//!
//! cargo run --release -p hopwise-embed --example embed_bench -- [--threads 2] [--n 2000]
//!     [--batch-tokens 4096] [--corpus ../shared/data/hotpotqa_corpus.jsonl]
//!
//! Embeds the `text` of the first `n` paragraphs of the corpus (one warm-up pass over 64 first), then
//! times single short queries.

use std::path::PathBuf;
use std::time::Instant;

use hopwise_embed::{ensure_embedder_model, MiniLmEmbedder, MiniLmOptions};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = arg(&args, "--threads").map(|s| s.parse()).transpose()?.unwrap_or(2);
    let n: usize = arg(&args, "--n").map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let batch_tokens: usize = arg(&args, "--batch-tokens").map(|s| s.parse()).transpose()?.unwrap_or(4096);
    let corpus = PathBuf::from(arg(&args, "--corpus").unwrap_or_else(|| "../shared/data/hotpotqa_corpus.jsonl".into()));

    let home = std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache").join("hopwise"));
    let dir = ensure_embedder_model(&home)?;
    let embedder = MiniLmEmbedder::load(&dir, MiniLmOptions { threads, batch_tokens, ..MiniLmOptions::default() })?;

    let text = std::fs::read_to_string(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
    let mut passages = Vec::with_capacity(n);
    for line in text.lines().take(n) {
        let value: serde_json::Value = serde_json::from_str(line)?;
        passages.push(value["text"].as_str().unwrap_or_default().to_string());
    }
    let tokens: usize = passages.iter().map(|p| embedder.tokenize(p).map(|t| t.len()).unwrap_or(0)).sum();

    embedder.embed_blocking(&passages[..passages.len().min(64)])?;
    let start = Instant::now();
    let vectors = embedder.embed_blocking(&passages)?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} passages, {tokens} tokens (mean {:.1}, truncated at 256), threads {threads}, batch_tokens {batch_tokens}",
        vectors.len(),
        tokens as f64 / passages.len().max(1) as f64
    );
    println!("{secs:.2} s: {:.1} passages/s, {:.0} tokens/s", passages.len() as f64 / secs, tokens as f64 / secs);

    let query = ["Which band did the drummer of Toto play with before?"];
    let mut times: Vec<f64> = (0..30)
        .map(|_| {
            let t = Instant::now();
            let _ = embedder.embed_blocking(&query);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "single query ({} tokens): p50 {:.2} ms, p90 {:.2} ms",
        embedder.tokenize(query[0])?.len(),
        times[15],
        times[27]
    );
    Ok(())
}
