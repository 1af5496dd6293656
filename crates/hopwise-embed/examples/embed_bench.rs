//! Throughput, query latency and accuracy of the in-process all-MiniLM-L6-v2 encoder, every
//! candidate in one run, interleaved (the order rotates every round) so that load from other jobs
//! hits them alike.
//!
//! cargo run --release -p hopwise-embed --example embed_bench -- [--candidates int8,f32]
//!     [--threads 1,2] [--rounds 3] [--n128 256] [--data DIR, default $HOPWISE_DATA]
//!
//! Workloads: `128-token` = HotpotQA passages of at least 128 tokens cut to exactly 128;
//! `mhr-evidence` = the MultiHop-RAG evidence sentences as the dense index embeds them
//! (`title. text`). Queries: HotpotQA questions embedded one at a time. Accuracy: cosine against
//! the sentence-transformers vectors of `tests/fixtures/reference.json`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use hopwise_embed::{ensure_embedder_model, MiniLmEmbedder, MiniLmOptions, Precision};

const FIXTURE: &str = include_str!("../tests/fixtures/reference.json");

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn list<T: std::str::FromStr>(value: &str) -> Result<Vec<T>, String> {
    value.split(',').map(|v| v.trim().parse().map_err(|_| format!("bad list item `{v}`"))).collect()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn jsonl(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines().map(|l| serde_json::from_str(l).map_err(|e| format!("{}: {e}", path.display()))).collect()
}

fn field(v: &serde_json::Value, name: &str) -> String {
    v[name].as_str().unwrap_or_default().to_string()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

struct Candidate {
    name: String,
    threads: usize,
    /// Truncates at 128 tokens, for the fixed-length workload.
    short: MiniLmEmbedder,
    /// Truncates at 256 tokens, as the index does.
    full: MiniLmEmbedder,
}

struct Workload {
    name: &'static str,
    texts: Vec<String>,
    tokens: usize,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let candidates: Vec<String> = list(&arg(&args, "--candidates").unwrap_or_else(|| "int8,f32".into()))?;
    let threads: Vec<usize> = list(&arg(&args, "--threads").unwrap_or_else(|| "1,2".into()))?;
    let rounds: usize = arg(&args, "--rounds").map(|s| s.parse()).transpose()?.unwrap_or(3);
    let n128: usize = arg(&args, "--n128").map(|s| s.parse()).transpose()?.unwrap_or(256);
    let data = arg(&args, "--data")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOPWISE_DATA").map(PathBuf::from))
        .ok_or("the evaluation data folder: pass --data DIR or set HOPWISE_DATA")?;

    let home = std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache").join("hopwise"));
    let dir = ensure_embedder_model(&home)?;
    let mut loaded = Vec::new();
    for name in &candidates {
        let precision = Precision::parse(name).ok_or_else(|| format!("unknown candidate `{name}` (int8, f32)"))?;
        for &t in &threads {
            let options = MiniLmOptions { threads: t, precision, ..MiniLmOptions::default() };
            let short = MiniLmEmbedder::load(&dir, MiniLmOptions { max_tokens: 128, ..options.clone() })?;
            let full = MiniLmEmbedder::load(&dir, options)?;
            loaded.push(Candidate { name: name.clone(), threads: t, short, full });
        }
    }
    let probe = &loaded.first().ok_or("no candidates")?.short;

    let passages: Vec<String> = jsonl(&data.join("hotpotqa_corpus.jsonl"))?
        .iter()
        .map(|v| format!("{}. {}", field(v, "title"), field(v, "text")))
        .filter(|t| probe.tokenize(t).map(|ids| ids.len() >= 128).unwrap_or(false))
        .take(n128)
        .collect();
    let evidence: Vec<String> = jsonl(&data.join("multihop_rag_corpus.jsonl"))?
        .iter()
        .map(|v| format!("{}. {}", field(v, "title"), field(v, "text")))
        .collect();
    let evidence_tokens: usize =
        evidence.iter().map(|t| loaded[0].full.tokenize(t).map(|ids| ids.len()).unwrap_or(0)).sum();
    let workloads = [
        Workload { name: "128-token", tokens: passages.len() * 128, texts: passages },
        Workload { name: "mhr-evidence", tokens: evidence_tokens, texts: evidence },
    ];
    let queries: Vec<String> =
        jsonl(&data.join("hotpotqa.jsonl"))?.iter().take(60).map(|v| field(v, "question")).collect();

    println!(
        "machine: {} cores; load average at start {}; {} rounds; candidates {candidates:?}; threads {threads:?}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        load_average(),
        rounds
    );
    for w in &workloads {
        println!(
            "workload {}: {} texts, {} tokens (mean {:.1})",
            w.name,
            w.texts.len(),
            w.tokens,
            w.tokens as f64 / w.texts.len() as f64
        );
    }

    // Accuracy once per candidate (it does not depend on threads).
    let fixture: serde_json::Value = serde_json::from_str(FIXTURE)?;
    let items = fixture["items"].as_array().ok_or("fixture has no items")?;
    let texts: Vec<String> = items.iter().map(|i| field(i, "text")).collect();
    for c in loaded.iter().filter(|c| c.threads == threads[0]) {
        let vectors = c.full.embed_blocking(&texts)?;
        let worst = items
            .iter()
            .zip(&vectors)
            .map(|(item, v)| {
                let reference: Vec<f32> = item["vector"]
                    .as_array()
                    .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(0.0) as f32).collect())
                    .unwrap_or_default();
                cosine(v, &reference)
            })
            .fold(1.0f32, f32::min);
        println!(
            "accuracy {}: min cosine vs sentence-transformers over {} fixture texts {worst:.6}",
            c.name,
            items.len()
        );
    }

    // rates[candidate][workload]: passages/s per round.
    let mut rates = vec![vec![Vec::new(); workloads.len()]; loaded.len()];
    let mut query_ms = vec![Vec::new(); loaded.len()];
    for c in &loaded {
        c.short.embed_blocking(&workloads[0].texts[..8.min(workloads[0].texts.len())])?;
    }
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..loaded.len()).collect();
        order.rotate_left(round % loaded.len().max(1));
        for &ci in &order {
            let c = &loaded[ci];
            for (wi, w) in workloads.iter().enumerate() {
                let model = if wi == 0 { &c.short } else { &c.full };
                let started = Instant::now();
                let out = model.embed_blocking(&w.texts)?;
                let secs = started.elapsed().as_secs_f64();
                assert_eq!(out.len(), w.texts.len());
                rates[ci][wi].push(w.texts.len() as f64 / secs);
            }
            for q in &queries {
                let started = Instant::now();
                c.full.embed_blocking(&[q.as_str()])?;
                query_ms[ci].push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
        println!("round {} done, load average {}", round + 1, load_average());
    }

    println!();
    println!("| candidate | threads | 128-token passages/s (median; min–max) | MultiHop-RAG evidence passages/s | query p50 ms | query p90 ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (ci, c) in loaded.iter().enumerate() {
        let cell = |wi: usize| {
            let mut v = rates[ci][wi].clone();
            let (lo, hi) = (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max));
            format!("{:.1} ({:.1}–{:.1})", median(&mut v), lo, hi)
        };
        let mut q = query_ms[ci].clone();
        q.sort_by(f64::total_cmp);
        let p90 = q[(q.len() * 9 / 10).min(q.len() - 1)];
        println!("| {} | {} | {} | {} | {:.2} | {:.2} |", c.name, c.threads, cell(0), cell(1), median(&mut q), p90);
    }
    println!("load average at end {}", load_average());
    Ok(())
}
