//! BM25 vs dense (all-MiniLM-L6-v2) vs hybrid on the shared QA corpora: recall@5 of supporting
//! paragraphs, and the speed figures (embedding passages/s, index build time and size, query
//! latency p50/p99 per retriever, HNSW recall@10 against exact search).
//!
//! ```text
//! cargo run --release -p hopwise-index --example retrieval_bench -- \
//!     [--data DIR, default $HOPWISE_DATA] [--datasets hotpotqa,2wikimultihopqa,musique] [--root /tmp/hw-retrieval] \
//!     [--questions N] [--threads T] [--precision int8|f32]
//! ```
//! Indexes persist under `--root/<dataset>/`, so a second run embeds nothing (dense builds are
//! incremental) and measures queries only; delete the folder to measure embedding again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use hopwise_core::{Embedder, Retriever};
use hopwise_embed::{ensure_embedder_model, MiniLmEmbedder, MiniLmOptions, Precision};
use hopwise_index::{
    build_dense, build_index, Bm25Retriever, DenseOptions, DenseRetriever, HybridRetriever, IndexOptions,
};

struct Args {
    data: PathBuf,
    datasets: Vec<String>,
    root: PathBuf,
    questions: usize,
    threads: usize,
    /// The embedder's arithmetic; use a separate `--root` per precision (an index keeps one).
    precision: Precision,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        data: std::env::var_os("HOPWISE_DATA").map(PathBuf::from).unwrap_or_default(),
        datasets: vec!["hotpotqa".into(), "2wikimultihopqa".into(), "musique".into()],
        root: std::env::temp_dir().join("hw-retrieval"),
        questions: usize::MAX,
        threads: 1,
        precision: Precision::default(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--data" => args.data = PathBuf::from(value()?),
            "--datasets" => args.datasets = value()?.split(',').map(str::to_string).collect(),
            "--root" => args.root = PathBuf::from(value()?),
            "--questions" => args.questions = value()?.parse().map_err(|e| format!("--questions: {e}"))?,
            "--threads" => args.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--precision" => {
                let v = value()?;
                args.precision = Precision::parse(&v).ok_or_else(|| format!("--precision {v}: int8 or f32"))?;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.data.as_os_str().is_empty() {
        return Err("the evaluation data folder: pass --data DIR or set HOPWISE_DATA".into());
    }
    Ok(args)
}

struct Question {
    text: String,
    supporting: Vec<String>,
}

fn norm(title: &str) -> String {
    title.trim().to_lowercase()
}

fn read_questions(path: &Path, limit: usize) -> Result<Vec<Question>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for line in std::fs::read_to_string(path)?.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let mut supporting: Vec<String> = v["paragraphs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["supporting"].as_bool() == Some(true))
            .filter_map(|p| p["title"].as_str().map(norm))
            .collect();
        supporting.sort();
        supporting.dedup();
        if let (Some(q), false) = (v["question"].as_str(), supporting.is_empty()) {
            out.push(Question { text: q.to_string(), supporting });
        }
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn percentile(sorted_us: &[f64], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    sorted_us[((sorted_us.len() - 1) as f64 * p).round() as usize]
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.metadata()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let home = std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/hopwise"));
    let model_dir = ensure_embedder_model(&home)?;
    let minilm = MiniLmEmbedder::load(
        &model_dir,
        MiniLmOptions { threads: args.threads, precision: args.precision, ..MiniLmOptions::default() },
    )?;
    let embedder: Arc<dyn Embedder> = Arc::new(minilm);
    println!("embedder {} ({} threads); machine: shared 2-core VM", embedder.model_id(), args.threads);

    for name in &args.datasets {
        let corpus = args.data.join(format!("{name}_corpus.jsonl"));
        let questions = read_questions(&args.data.join(format!("{name}.jsonl")), args.questions)?;
        let index = args.root.join(name);
        println!("\n## {name}: {} questions with supporting paragraphs", questions.len());

        let started = Instant::now();
        let bm25_report = build_index(&[corpus], &index, &IndexOptions::default(), &|_| {})?;
        let bm25_seconds = started.elapsed().as_secs_f64();
        let dense_report = build_dense(&index, embedder.as_ref(), &DenseOptions::default(), &|p| {
            if p.embedded % 1024 == 0 && p.to_embed > 0 {
                eprintln!("  embedding {}/{}", p.embedded, p.to_embed);
            }
        })
        .await?;
        println!(
            "build: BM25 {} passages in {:.2} s ({} new), index {:.1} MB; dense embedded {} ({} reused) in {:.1} s{}, dense/ {:.1} MB",
            bm25_report.passages_total,
            bm25_seconds,
            bm25_report.passages_indexed,
            dir_size(&index.join("bm25")) as f64 / 1e6,
            dense_report.embedded,
            dense_report.reused,
            dense_report.embed_seconds,
            if dense_report.embedded > 0 {
                format!(" = {:.1} passages/s", dense_report.embedded as f64 / dense_report.embed_seconds)
            } else {
                String::new()
            },
            dir_size(&index.join("dense")) as f64 / 1e6,
        );

        let bm25: Arc<dyn Retriever> = Arc::new(Bm25Retriever::open(&index)?);
        let dense_retriever = Arc::new(DenseRetriever::open(&index, embedder.clone())?);
        let dense: Arc<dyn Retriever> = dense_retriever.clone();
        let hybrid: Arc<dyn Retriever> = Arc::new(HybridRetriever::new(bm25.clone(), dense.clone()));

        // Query vectors once, for the vector-search-only timings and the HNSW comparison.
        let texts: Vec<String> = questions.iter().map(|q| q.text.clone()).collect();
        let t = Instant::now();
        let query_vectors = embedder.embed(&texts).await?;
        println!(
            "query embedding: {} questions in {:.1} s ({:.1} ms each, batched)",
            texts.len(),
            t.elapsed().as_secs_f64(),
            t.elapsed().as_secs_f64() * 1e3 / texts.len().max(1) as f64
        );

        println!(
            "| retriever | recall@5 (supporting paragraphs) | any supporting in top 5 | p50 ms | p99 ms | queries/s |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for (label, r) in [("bm25", &bm25), ("dense", &dense), ("hybrid", &hybrid)] {
            let (mut recall, mut any) = (0.0, 0usize);
            let mut lat = Vec::with_capacity(questions.len());
            let all = Instant::now();
            for q in &questions {
                let t = Instant::now();
                let hits = r.retrieve(&q.text, 5).await?;
                lat.push(t.elapsed().as_secs_f64() * 1e6);
                let titles: Vec<String> = hits.iter().map(|p| norm(&p.title)).collect();
                let found = q.supporting.iter().filter(|s| titles.contains(s)).count();
                recall += found as f64 / q.supporting.len() as f64;
                any += usize::from(found > 0);
            }
            let secs = all.elapsed().as_secs_f64();
            lat.sort_by(f64::total_cmp);
            let n = questions.len().max(1) as f64;
            println!(
                "| {label} | {:.3} | {:.3} | {:.2} | {:.2} | {:.1} |",
                recall / n,
                any as f64 / n,
                percentile(&lat, 0.5) / 1e3,
                percentile(&lat, 0.99) / 1e3,
                questions.len() as f64 / secs
            );
        }

        // Vector search alone (query already embedded): exact scan vs HNSW, and HNSW's recall@10.
        let ann_index = args.root.join(format!("{name}-hnsw"));
        if !ann_index.exists() {
            copy_dir(&index, &ann_index)?;
        }
        let opts = DenseOptions { exact_threshold: 0, ..DenseOptions::default() };
        let t = Instant::now();
        let r = build_dense(&ann_index, embedder.as_ref(), &opts, &|_| {}).await?;
        let graph_seconds = t.elapsed().as_secs_f64();
        let ann = DenseRetriever::open(&ann_index, embedder.clone())?;
        assert!(ann.uses_ann() && r.embedded == 0);
        let (mut exact_us, mut ann_us) = (Vec::new(), Vec::new());
        let (mut found, mut total) = (0usize, 0usize);
        for v in &query_vectors {
            let t = Instant::now();
            let exact = dense_retriever.search_exact(v, 10);
            exact_us.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            let approx = ann.search_ann(v, 10);
            ann_us.push(t.elapsed().as_secs_f64() * 1e6);
            total += exact.len();
            found += exact.iter().filter(|(id, _)| approx.iter().any(|(a, _)| a == id)).count();
        }
        exact_us.sort_by(f64::total_cmp);
        ann_us.sort_by(f64::total_cmp);
        println!(
            "vector search, top 10 over {} rows: exact p50 {:.0} us / p99 {:.0} us; HNSW (M=16, ef_c=200, ef=128) p50 {:.0} us / p99 {:.0} us, recall@10 vs exact {:.4}; graph built in {:.1} s, dense/ with graph {:.1} MB",
            dense_retriever.len(),
            percentile(&exact_us, 0.5),
            percentile(&exact_us, 0.99),
            percentile(&ann_us, 0.5),
            percentile(&ann_us, 0.99),
            found as f64 / total.max(1) as f64,
            graph_seconds,
            dir_size(&ann_index.join("dense")) as f64 / 1e6,
        );
    }
    Ok(())
}
