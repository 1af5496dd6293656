//! Retrieval evaluation over a real BM25 index (ToQD's Table 3 protocol): builds the index from a
//! corpus JSONL if missing, then scores query-rewriting methods against the gold evidence.
//! `native` needs no model; the others need an OpenAI-compatible server.
//! `HOPWISE_RETRIEVER=dense|hybrid` searches the index's dense part instead (all-MiniLM-L6-v2 from
//! `$HOPWISE_HOME`; build it with `hopwise index --dense` or the `retrieval_bench` example of
//! hopwise-index); the CLI equivalent is `hopwise retrieval-eval --retriever ...`.
//!
//! cargo run --release -p hopwise-eval --example retrieval_bm25 -- \
//!     <corpus.jsonl> <questions.jsonl> <index dir> <limit> <methods,comma,separated> [k] [base_url model]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{Llm, Prompts, Retriever};
use hopwise_eval::retrieval_eval::render_retrieval_markdown;
use hopwise_eval::{load_dataset, retrieval_eval, QueryMethod, RetrievalEvalConfig};
use hopwise_index::{build_index, Bm25Retriever, IndexOptions};
use hopwise_models::{OpenAiConfig, OpenAiLlm};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!(
            "usage: retrieval_bm25 <corpus.jsonl> <questions.jsonl> <index dir> <limit> <methods> [k] [base_url model]"
        );
        std::process::exit(2);
    }
    let corpus = PathBuf::from(&args[1]);
    let index_dir = PathBuf::from(&args[3]);
    let limit: usize = args[4].parse()?;
    let methods = args[5].split(',').map(|m| QueryMethod::parse(m.trim())).collect::<Result<Vec<_>, _>>()?;
    let k: usize = args.get(6).map_or(Ok(10), |s| s.parse())?;
    if !index_dir.join("meta.json").exists() && !index_dir.exists() {
        let started = Instant::now();
        let report = build_index(&[corpus], &index_dir, &IndexOptions::default(), &|_| {})?;
        println!("indexed {} documents in {:.1} s", report.documents, started.elapsed().as_secs_f64());
    }
    let bm25: Arc<dyn Retriever> = Arc::new(Bm25Retriever::open(&index_dir)?);
    let kind = std::env::var("HOPWISE_RETRIEVER").unwrap_or_else(|_| "bm25".into());
    let retriever: Arc<dyn Retriever> = match kind.as_str() {
        "bm25" => bm25,
        "dense" | "hybrid" => {
            let home = std::env::var_os("HOPWISE_HOME").map(PathBuf::from).ok_or("set HOPWISE_HOME")?;
            let dir = hopwise_embed::ensure_embedder_model(&home)?;
            let embedder = Arc::new(hopwise_embed::MiniLmEmbedder::load(&dir, Default::default())?);
            let dense: Arc<dyn Retriever> = Arc::new(hopwise_index::DenseRetriever::open(&index_dir, embedder)?);
            if kind == "dense" {
                dense
            } else {
                Arc::new(hopwise_index::HybridRetriever::new(bm25, dense))
            }
        }
        other => return Err(format!("unknown HOPWISE_RETRIEVER={other}").into()),
    };
    println!("retriever: {kind}");
    let llm: Arc<dyn Llm> = match (args.get(7), args.get(8)) {
        (Some(url), Some(model)) => Arc::new(OpenAiLlm::new(OpenAiConfig::new(url.clone(), model.clone()))?),
        _ => Arc::new(ScriptedLlm::new().fallback("")), // only `native` is meaningful without a model
    };
    let mut examples = load_dataset(&PathBuf::from(&args[2]))?.examples;
    examples.truncate(limit);
    let config = RetrievalEvalConfig { methods, k, concurrency: 1 };
    let started = Instant::now();
    let runtime = hopwise_reason::Runtime::new(llm, Arc::new(Prompts::default())).with_retriever(Some(retriever));
    let report = retrieval_eval(&examples, Arc::new(runtime), &config).await?;
    println!("{}", render_retrieval_markdown(&report));
    println!("wall {:.1} s for {} examples", started.elapsed().as_secs_f64(), examples.len());
    Ok(())
}
