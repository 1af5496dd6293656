//! The engine's replay benchmark: continuous batching and the prefix cache on recorded traffic.
//!
//! ```text
//! engine_replay record --dataset $DATA/hotpotqa.jsonl --index DIR [--skip 0] [--limit 20] [--model M] [--threads T] --out W.jsonl
//! engine_replay replay --workload W.jsonl [--model M] [--threads T] [--concurrency 1,4]
//!                      [--backends queue,continuous,server] [--groups 5] [--questions N]
//! engine_replay lookup --workload W.jsonl [--model M] [--threads T] [--purposes a,b]
//! engine_replay traces EVAL_OUT_DIR
//! ```
//!
//! `record` answers the first questions of a dataset with ToQD over a BM25 index through the local
//! model and writes every model request with its start and end offsets. `replay` sends them again
//! (greedy) through the round engine, the continuous engine and llama.cpp's own server (xllamacpp
//! from `scripts/servers.sh install`, same GGUF and threads, `--parallel` = concurrency, one shared
//! KV cache of the same size, prompt cache on), alternating the backends over groups of questions so
//! that load from other processes falls on all of them alike. `lookup` compares decode speed with
//! and without prompt-lookup decoding on the recorded calls; `traces` splits the time of an
//! evaluation run's questions into queueing, prompt evaluation and decoding.

mod lookup;
mod record;
mod replay;
mod report;
mod traces;
mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use hopwise_core::Llm;
use hopwise_llama::{default_home, ensure_model, Concurrency, LocalConfig, LocalLlm};
use hopwise_models::{OpenAiConfig, OpenAiLlm};
use hopwise_remote::servers::{self, LlamaServer};

use report::Totals;
use workload::Call;

type Error = Box<dyn std::error::Error>;

/// Cells of every engine's KV cache.
const N_CTX: u32 = 4096;

struct Args {
    command: String,
    values: BTreeMap<String, String>,
    positional: Vec<String>,
}

impl Args {
    fn parse() -> Result<Self, Error> {
        let mut raw = std::env::args().skip(1);
        let command = raw.next().ok_or("usage: engine_replay record|replay|lookup|traces ...")?;
        let (mut values, mut positional) = (BTreeMap::new(), Vec::new());
        while let Some(arg) = raw.next() {
            match arg.strip_prefix("--") {
                Some(key) => {
                    let value = raw.next().ok_or_else(|| format!("--{key} needs a value"))?;
                    values.insert(key.to_string(), value);
                }
                None => positional.push(arg),
            }
        }
        Ok(Self { command, values, positional })
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    fn path(&self, key: &str) -> Result<PathBuf, Error> {
        Ok(PathBuf::from(self.get(key).ok_or_else(|| format!("--{key} is required"))?))
    }

    fn number(&self, key: &str, default: usize) -> Result<usize, Error> {
        Ok(self.get(key).map(str::parse).transpose().map_err(|e| format!("--{key}: {e}"))?.unwrap_or(default))
    }

    fn list(&self, key: &str, default: &str) -> Vec<String> {
        self.get(key).unwrap_or(default).split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn local(model: &std::path::Path, threads: usize, concurrency: Concurrency) -> Result<Arc<LocalLlm>, Error> {
    let config = LocalConfig { threads: Some(threads), n_ctx: N_CTX, concurrency, ..LocalConfig::default() };
    Ok(Arc::new(LocalLlm::load(model, config)?))
}

/// The workload's questions, each a start-ordered list of its calls.
fn by_question(calls: Vec<Call>, limit: usize) -> Vec<Vec<Call>> {
    let mut questions: BTreeMap<usize, Vec<Call>> = BTreeMap::new();
    for call in calls {
        questions.entry(call.question).or_default().push(call);
    }
    questions
        .into_values()
        .take(limit)
        .map(|mut calls| {
            calls.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
            calls
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = Args::parse()?;
    if args.command == "traces" {
        let dir = args.positional.first().ok_or("usage: engine_replay traces EVAL_OUT_DIR")?;
        return traces::traces(std::path::Path::new(dir));
    }
    let model_name = args.get("model").unwrap_or(hopwise_llama::TEST_MODEL).to_string();
    let threads = args.number("threads", 2)?;
    let model = ensure_model(&model_name, &default_home(), &mut |_| {})?;
    println!("model {model_name}, {threads} threads, {N_CTX} KV cells; load average at start {}\n", load_average());
    match args.command.as_str() {
        "record" => {
            let llm = local(&model, threads, Concurrency::Continuous)?;
            let record_args = record::RecordArgs {
                dataset: args.path("dataset")?,
                index: args.path("index")?,
                skip: args.number("skip", 0)?,
                limit: args.number("limit", 20)?,
                out: args.path("out")?,
            };
            record::record(llm, record_args).await?;
        }
        "replay" => {
            let questions =
                by_question(workload::read(&args.path("workload")?)?, args.number("questions", usize::MAX)?);
            let concurrencies: Vec<usize> =
                args.list("concurrency", "1,4").iter().map(|c| c.parse()).collect::<Result<_, _>>()?;
            let backends = args.list("backends", "queue,continuous,server");
            let groups = args.number("groups", 5)?.clamp(1, questions.len().max(1));
            for concurrency in concurrencies {
                replay_at(&model, threads, &questions, concurrency, &backends, groups).await?;
            }
        }
        "lookup" => {
            let purposes = args.list("purposes", "toqd_critique,toqd_rewrite");
            let calls: Vec<Call> = workload::read(&args.path("workload")?)?
                .into_iter()
                .filter(|call| purposes.contains(&call.purpose))
                .collect();
            let llm = local(&model, threads, Concurrency::Continuous)?;
            lookup::lookup(&llm, &calls).await?;
        }
        other => return Err(format!("unknown command `{other}`").into()),
    }
    println!("\nload average at end {}", load_average());
    Ok(())
}

/// Replays all questions through every backend at one concurrency, backends alternating by group.
async fn replay_at(
    model: &std::path::Path,
    threads: usize,
    questions: &[Vec<Call>],
    concurrency: usize,
    backends: &[String],
    groups: usize,
) -> Result<(), Error> {
    // Fresh engines per concurrency, so no cache carries over from the previous one.
    let mut llms: Vec<(String, Arc<dyn Llm>)> = Vec::new();
    let mut server = None;
    for backend in backends {
        let llm: Arc<dyn Llm> = match backend.as_str() {
            "queue" => local(model, threads, Concurrency::Queue)?,
            "continuous" => local(model, threads, Concurrency::Continuous)?,
            "server" => {
                let python =
                    servers::require("python").ok_or("xllamacpp's venv is missing: scripts/servers.sh install")?;
                let started = LlamaServer::start_parallel(&python, model, threads, N_CTX as usize, concurrency)?;
                let config = OpenAiConfig {
                    send_grammar: true,
                    max_in_flight: 64,
                    timeout_secs: 3600.0,
                    max_retries: 0,
                    ..OpenAiConfig::new(started.base_url.clone(), "local")
                };
                server = Some(started);
                Arc::new(OpenAiLlm::new(config)?)
            }
            other => return Err(format!("unknown backend `{other}`").into()),
        };
        llms.push((backend.clone(), llm));
    }
    let mut totals: Vec<Totals> = vec![Totals::default(); llms.len()];
    let per_group = questions.len().div_ceil(groups);
    for (group, chunk) in questions.chunks(per_group.max(1)).enumerate() {
        for turn in 0..llms.len() {
            let which = (group + turn) % llms.len();
            let (name, llm) = &llms[which];
            let (wall, outcomes) = replay::replay(llm.clone(), chunk, concurrency).await;
            eprintln!(
                "concurrency {concurrency}, group {group}, {name}: {} calls in {:.1} s (load {})",
                outcomes.len(),
                wall.as_secs_f64(),
                load_average()
            );
            totals[which].add(wall, outcomes);
        }
    }
    println!(
        "### concurrency {concurrency} ({} questions, {} calls)\n",
        questions.len(),
        questions.iter().map(Vec::len).sum::<usize>()
    );
    println!("{}", report::HEADER);
    for ((name, _), total) in llms.iter().zip(&totals) {
        println!("{}", total.row(name));
    }
    let reference = llms.iter().position(|(name, _)| name == "continuous");
    if let Some(reference) = reference {
        println!();
        for (index, (name, _)) in llms.iter().enumerate() {
            let base = &totals[reference];
            let total = &totals[index];
            if index != reference {
                println!(
                    "continuous vs {name}: throughput {:.2}x, p50 latency {:.2}x; outputs differing from continuous: {} of {}",
                    (base.outcomes.len() as f64 / base.wall.as_secs_f64()) / (total.outcomes.len() as f64 / total.wall.as_secs_f64()),
                    base.latency(50.0) / total.latency(50.0),
                    total.differing(base),
                    total.outcomes.len()
                );
            }
        }
    }
    println!();
    drop(server);
    Ok(())
}
