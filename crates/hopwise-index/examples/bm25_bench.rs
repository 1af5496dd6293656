//! BM25 indexing and query speed over the pooled evaluation corpora.
//!
//! Indexes every `*_corpus.jsonl` in the data folder (`HOPWISE_DATA`) into a temporary directory,
//! then runs a top-5 query for every question of hotpotqa, 2wikimultihopqa and musique on one thread: one untimed warm-up pass, then `ROUNDS`
//! timed passes. Prints indexing passages/s, query latency p50/p99 and queries/s, the ratio against
//! tantivy's own query path (`search_reference`) in interleaved passes, plus recall@5 of
//! supporting-paragraph titles as a sanity check that the queries retrieve something sensible.
//!
//! `cargo run --release -p hopwise-index --example bm25_bench [-- --title-boost 1.2]`

use std::path::{Path, PathBuf};
use std::time::Instant;

use hopwise_index::{build_index, Bm25Retriever, IndexOptions, DEFAULT_TITLE_BOOST};

const ROUNDS: usize = 5;
const K: usize = 5;
const QA_FILES: [&str; 3] = ["hotpotqa", "2wikimultihopqa", "musique"];

struct Question {
    dataset: &'static str,
    text: String,
    supporting_titles: Vec<String>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let title_boost = parse_title_boost()?;
    let data =
        std::env::var_os("HOPWISE_DATA").map(PathBuf::from).ok_or("set HOPWISE_DATA to the evaluation data folder")?;
    let data = data.canonicalize()?;
    let mut corpora: Vec<PathBuf> = std::fs::read_dir(&data)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with("_corpus.jsonl")))
        .collect();
    corpora.sort();
    if corpora.is_empty() {
        return Err(format!("no *_corpus.jsonl in {}", data.display()).into());
    }
    let corpus_bytes: u64 = corpora.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    println!("corpora ({:.1} MB):", corpus_bytes as f64 / 1e6);
    for path in &corpora {
        println!("  {}", path.display());
    }

    let dir = tempfile::tempdir()?;
    let index_dir = dir.path().join("index");
    let opts = IndexOptions::default();
    let report = build_index(&corpora, &index_dir, &opts, &|_| {})?;
    println!(
        "indexing: {} documents -> {} passages in {:.2} s = {:.0} passages/s ({:.1} MB/s), {} writer thread(s), index {:.1} MB",
        report.documents,
        report.passages_indexed,
        report.seconds,
        report.passages_indexed as f64 / report.seconds,
        corpus_bytes as f64 / 1e6 / report.seconds,
        opts.writer_threads,
        dir_size(&index_dir) as f64 / 1e6,
    );
    if report.skipped_total > 0 || report.empty_documents > 0 {
        println!("  skipped {} lines, {} empty documents", report.skipped_total, report.empty_documents);
    }

    let retriever = Bm25Retriever::open(&index_dir)?.with_title_boost(title_boost);
    let questions = load_questions(&data)?;
    // Warm-up pass (page cache, allocator); its hits give recall.
    let mut hits_per_dataset = vec![(0usize, 0usize); QA_FILES.len()];
    for q in &questions {
        let passages = retriever.search(&q.text, K)?;
        let slot = QA_FILES.iter().position(|d| *d == q.dataset).unwrap_or(0);
        hits_per_dataset[slot].1 += 1;
        if passages.iter().any(|p| q.supporting_titles.contains(&p.title)) {
            hits_per_dataset[slot].0 += 1;
        }
    }
    let mut latencies_us: Vec<f64> = Vec::with_capacity(questions.len() * ROUNDS);
    let cpu_before = thread_cpu_seconds();
    let timed = Instant::now();
    for _ in 0..ROUNDS {
        for q in &questions {
            let start = Instant::now();
            let passages = retriever.search(&q.text, K)?;
            latencies_us.push(start.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(passages);
        }
    }
    let total_s = timed.elapsed().as_secs_f64();
    let cpu_s = thread_cpu_seconds().zip(cpu_before).map(|(after, before)| after - before);
    latencies_us.sort_by(f64::total_cmp);
    println!(
        "queries: {} questions x {ROUNDS} rounds, top-{K}, 1 thread, title boost {title_boost}: \
         p50 {:.0} us, p99 {:.0} us, mean {:.0} us, {:.0} queries/s",
        questions.len(),
        percentile(&latencies_us, 0.50),
        percentile(&latencies_us, 0.99),
        latencies_us.iter().sum::<f64>() / latencies_us.len() as f64,
        latencies_us.len() as f64 / total_s,
    );
    if let Some(cpu_s) = cpu_s {
        // On a busy machine wall-clock latency includes time the thread waited for a core.
        println!(
            "  on-CPU time of the query thread: {:.2} s of {:.2} s wall = {:.0} queries per CPU-second",
            cpu_s,
            total_s,
            latencies_us.len() as f64 / cpu_s
        );
    }
    compare_with_reference(&retriever, &questions)?;
    for (name, (hit, total)) in QA_FILES.iter().zip(&hits_per_dataset) {
        println!(
            "  {name}: {hit}/{total} questions with a supporting paragraph in the top {K} ({:.1}%)",
            100.0 * *hit as f64 / (*total).max(1) as f64
        );
    }
    Ok(())
}

/// `search` against tantivy's own query path (`search_reference`) in this process: `ROUNDS` pairs of
/// passes, the two alternating so machine noise hits both alike. Also counts questions whose top-k
/// scores differ (they should not, beyond float summation order).
fn compare_with_reference(retriever: &Bm25Retriever, questions: &[Question]) -> Result<(), Box<dyn std::error::Error>> {
    let mut differing = 0;
    for q in questions {
        let fast: Vec<f32> = retriever.search(&q.text, K)?.iter().map(|p| p.score).collect();
        let reference: Vec<f32> = retriever.search_reference(&q.text, K)?.iter().map(|p| p.score).collect();
        let same = fast.len() == reference.len()
            && fast.iter().zip(&reference).all(|(a, b)| (a - b).abs() <= 1e-4 * b.abs().max(1.0));
        differing += usize::from(!same);
    }
    let (mut fast_cpu, mut reference_cpu) = (0.0, 0.0);
    for _ in 0..ROUNDS {
        for (reference, total) in [(false, &mut fast_cpu), (true, &mut reference_cpu)] {
            let before = thread_cpu_seconds().unwrap_or(0.0);
            for q in questions {
                let passages =
                    if reference { retriever.search_reference(&q.text, K)? } else { retriever.search(&q.text, K)? };
                std::hint::black_box(passages);
            }
            *total += thread_cpu_seconds().unwrap_or(0.0) - before;
        }
    }
    let queries = (questions.len() * ROUNDS) as f64;
    if fast_cpu > 0.0 && reference_cpu > 0.0 {
        println!(
            "  vs tantivy's own union query, interleaved: {:.0} vs {:.0} queries per CPU-second = {:.2}x; \
             top-{K} scores differ on {differing} of {} questions",
            queries / fast_cpu,
            queries / reference_cpu,
            reference_cpu / fast_cpu,
            questions.len()
        );
    }
    Ok(())
}

fn parse_title_boost() -> Result<f32, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().position(|a| a == "--title-boost") {
        Some(i) => Ok(args.get(i + 1).ok_or("--title-boost needs a value")?.parse()?),
        None => Ok(DEFAULT_TITLE_BOOST),
    }
}

fn load_questions(data: &Path) -> Result<Vec<Question>, Box<dyn std::error::Error>> {
    let mut questions = Vec::new();
    for dataset in QA_FILES {
        let text = std::fs::read_to_string(data.join(format!("{dataset}.jsonl")))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line)?;
            let supporting_titles = v["paragraphs"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["supporting"].as_bool() == Some(true))
                        .filter_map(|p| p["title"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let text = v["question"].as_str().ok_or("question without text")?.to_string();
            questions.push(Question { dataset, text, supporting_titles });
        }
    }
    Ok(questions)
}

/// Time this thread has spent on a CPU (Linux `schedstat`, nanoseconds); `None` elsewhere.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: f64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(nanos / 1e9)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn dir_size(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}
