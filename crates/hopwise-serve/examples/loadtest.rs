//! Load test on loopback: an in-process server over a scripted model with a fixed latency, hammered
//! by N requests from C concurrent clients, for each C. Prints requests/s, p50/p99 latency, 503s
//! (against the server's concurrency limit), server overhead per request (latency minus the model's
//! fixed time) and the process RSS before, after each run, at the peak, and at the end. Repeating a
//! client count (`--clients 64,64,64`) shows whether memory keeps growing.
//!
//!   cargo run --release -p hopwise-serve --example loadtest -- \
//!       [--requests 2000] [--clients 1,8,64] [--latency-ms 10] [--max-concurrency 32] [--strategy cot]
//!
//! Client and server share the process (and the machine's cores), so the figures are a floor for
//! what the server alone sustains.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hopwise_core::scripted::ScriptedLlm;
use hopwise_serve::{AppState, Limits, ProcessUsage};

struct Args {
    requests: usize,
    clients: Vec<usize>,
    latency_ms: u64,
    max_concurrency: usize,
    strategy: String,
}

fn parse_args() -> Result<Args, String> {
    let mut a =
        Args { requests: 2000, clients: vec![1, 8, 64], latency_ms: 10, max_concurrency: 32, strategy: "cot".into() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--requests" => a.requests = value.parse().map_err(bad)?,
            "--clients" => {
                a.clients = value.split(',').map(|c| c.trim().parse()).collect::<Result<_, _>>().map_err(bad)?
            }
            "--latency-ms" => a.latency_ms = value.parse().map_err(bad)?,
            "--max-concurrency" => a.max_concurrency = value.parse().map_err(bad)?,
            "--strategy" => a.strategy = value,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

/// (current, peak) resident set size in MiB, from /proc (Linux); NaN elsewhere.
fn rss_mib() -> (f64, f64) {
    ProcessUsage::read().map_or((f64::NAN, f64::NAN), |u| (u.rss_mib(), u.peak_rss_mib()))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(args).await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let latency = Duration::from_millis(args.latency_ms);
    let llm = ScriptedLlm::new()
        .on("step by step", "Rush released Counterparts.\nAnswer: Rush")
        .fallback("Rush")
        .latency(latency);
    let state = AppState::builder(Arc::new(llm))
        // Every client is on this host: the per-address connection cap would measure itself.
        .limits(Limits { max_concurrency: args.max_concurrency, max_connections_per_peer: 4096, ..Limits::default() })
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(hopwise_serve::serve(listener, state.clone(), async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    let body =
        serde_json::json!({"question": "Which Canadian rock band released Counterparts?", "strategy": args.strategy});
    // One question to learn how many model calls a request makes (the fixed model time).
    let probe: serde_json::Value =
        client.post(format!("{base}/v1/ask")).json(&body).send().await?.error_for_status()?.json().await?;
    let calls = probe["stats"]["llm_calls"].as_u64().unwrap_or(1);
    let model_time = latency * calls as u32;

    let (rss_before, _) = rss_mib();
    println!(
        "loadtest: {} requests per run, strategy {} ({calls} model call(s) x {} ms = {:.1} ms model time), server limit {} concurrent",
        args.requests,
        args.strategy,
        args.latency_ms,
        model_time.as_secs_f64() * 1000.0,
        args.max_concurrency
    );
    println!("RSS before: {rss_before:.1} MiB");
    println!("| clients | req/s | p50 ms | p99 ms | overhead p50 ms | 200 | 503 | other | RSS after MiB |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &clients in &args.clients {
        let clients = clients.max(1);
        let per_client = args.requests.div_ceil(clients);
        let started = Instant::now();
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                let client = client.clone();
                let url = format!("{base}/v1/ask");
                let body = body.clone();
                tokio::spawn(async move {
                    let mut out = Vec::with_capacity(per_client);
                    for _ in 0..per_client {
                        let t = Instant::now();
                        let status = match client.post(&url).json(&body).send().await {
                            Ok(r) => {
                                let s = r.status().as_u16();
                                let _ = r.bytes().await;
                                s
                            }
                            Err(_) => 0,
                        };
                        out.push((status, t.elapsed()));
                    }
                    out
                })
            })
            .collect();
        let mut results = Vec::new();
        for w in workers {
            results.extend(w.await?);
        }
        let elapsed = started.elapsed();
        let mut ok: Vec<Duration> = results.iter().filter(|(s, _)| *s == 200).map(|(_, d)| *d).collect();
        ok.sort();
        let busy = results.iter().filter(|(s, _)| *s == 503).count();
        let other = results.len() - ok.len() - busy;
        let p50 = percentile(&ok, 0.5);
        let p99 = percentile(&ok, 0.99);
        let (rss, _) = rss_mib();
        println!(
            "| {clients} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {busy} | {other} | {rss:.1} |",
            results.len() as f64 / elapsed.as_secs_f64(),
            p50.as_secs_f64() * 1000.0,
            p99.as_secs_f64() * 1000.0,
            (p50.saturating_sub(model_time)).as_secs_f64() * 1000.0,
            ok.len(),
        );
    }
    let (_, peak) = rss_mib();
    // Let idle connections and finished tasks go, then look again.
    drop(client);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (after, _) = rss_mib();
    println!("RSS peak: {peak:.1} MiB, after: {after:.1} MiB (client and server in one process)");
    let _ = stop.send(());
    let _ = server.await;
    Ok(())
}
