//! Soak test of `hopwise serve`: the real binary over a scripted OpenAI-compatible backend on
//! loopback (the mock of `hopwise_models::testing`, with a fixed latency), under a bounded mixed load
//! for a fixed time: questions (JSON and SSE, three strategies), OpenAI chat completions (plain and
//! streamed), clients that disconnect mid-stream, bad requests (malformed JSON, unknown strategy, empty
//! question, wrong token, oversized body, unknown path), slow-header clients, and a two-second backend
//! outage every minute. Prints requests served, outcomes and errors by type, the server's RSS and
//! open file descriptors at the start and the end, panics in its log, and its exit status after
//! SIGTERM.
//!
//!   cargo build --release -p hopwise --example soak
//!   target/release/examples/soak [--binary target/release/hopwise] [--minutes 10] [--clients 8] [--latency-ms 20]
//!
//! Linux only (the server reports its memory and descriptors from /proc on /metrics). Exits 1 if the
//! server panicked, failed to stop cleanly, or answered a request in a way the load did not expect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hopwise_core::scripted::ScriptedLlm;
use hopwise_models::testing::{Fault, MockOpenAiServer};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "soak-token";
const QUESTION: &str = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";

struct Args {
    binary: PathBuf,
    minutes: f64,
    clients: usize,
    latency_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(Path::parent).map(|dir| dir.join("hopwise")))
        .unwrap_or_else(|| PathBuf::from("hopwise"));
    let mut a = Args { binary: sibling, minutes: 10.0, clients: 8, latency_ms: 20 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--binary" => a.binary = PathBuf::from(&value),
            "--minutes" => a.minutes = value.parse().map_err(|e| bad(&e))?,
            "--clients" => a.clients = value.parse().map_err(|e| bad(&e))?,
            "--latency-ms" => a.latency_ms = value.parse().map_err(|e| bad(&e))?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

/// ToQD over two known sub-questions, and the baselines' answer forms.
fn model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on("Break the question below", "1. Which band released Counterparts?\n2. Who was the drummer of that band?")
        .on("Review the candidates", "1. Which band released Counterparts?\n2. Who was the drummer of that band?")
        .on("Describe which answers help", "1 -> 2\n2 -> Q")
        .on("Rewrite the question below", "Who was the drummer of Rush?")
        .on_fn(
            "from your own knowledge",
            |p, _| if p.contains("drummer") { "Neil Peart".into() } else { "Rush".into() },
        )
        .on("Reply in exactly this form", "Answer: Rush\nReason: Rush released Counterparts; Neil Peart drummed.")
        .on("step by step", "Rush released Counterparts.\nAnswer: Rush")
        .fallback("Answer: Rush")
}

/// (RSS in MiB, peak RSS in MiB, open file descriptors) of the server, from its `/metrics`.
async fn usage(client: &reqwest::Client, base: &str) -> Result<(f64, f64, f64), String> {
    let text = client
        .get(format!("{base}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| format!("/metrics: {e}"))?
        .text()
        .await
        .map_err(|e| format!("/metrics: {e}"))?;
    let gauge = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .ok_or_else(|| format!("/metrics has no {name} (not Linux?)"))
    };
    let mib = 1024.0 * 1024.0;
    Ok((
        gauge("process_resident_memory_bytes")? / mib,
        gauge("process_resident_memory_peak_bytes")? / mib,
        gauge("process_open_fds")?,
    ))
}

#[derive(Default)]
struct Tally {
    /// outcome -> count, e.g. `ask 200`, `chat-stream 200`, `bad-json 400 invalid_request_error`.
    outcomes: Mutex<BTreeMap<String, u64>>,
    /// Outcomes the load did not expect (a 500, a transport error on a normal request, …).
    unexpected: Mutex<BTreeMap<String, u64>>,
    requests: AtomicU64,
}

impl Tally {
    fn add(&self, outcome: String, expected: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let map = if expected { &self.outcomes } else { &self.unexpected };
        *map.lock().unwrap_or_else(|p| p.into_inner()).entry(outcome).or_default() += 1;
    }
}

/// `STATUS TYPE` of an error body, or `STATUS` alone.
async fn describe(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    match body["error"]["type"].as_str() {
        Some(kind) => (status, format!("{status} {kind}")),
        None => (status, status.to_string()),
    }
}

/// One request of the mix; `n` picks which. Busy servers (503) and outages (502) are expected.
async fn one(client: &reqwest::Client, base: &str, addr: &str, n: u64, tally: &Tally) {
    let strategy = ["direct", "cot", "toqd-noir"][(n % 3) as usize];
    let ask = json!({"question": QUESTION, "strategy": strategy});
    let post = |path: &str| client.post(format!("{base}{path}")).bearer_auth(TOKEN);
    let normal = |status: u16| matches!(status, 200 | 502 | 503);
    match n % 12 {
        0..=2 => match post("/v1/ask").json(&ask).send().await {
            Ok(resp) => {
                let (status, what) = describe(resp).await;
                tally.add(format!("ask {what}"), normal(status));
            }
            Err(e) => tally.add(format!("ask transport: {e}"), false),
        },
        3 | 4 => match post("/v1/ask").header("accept", "text/event-stream").json(&ask).send().await {
            Ok(resp) if resp.status().is_success() => {
                let body = resp.text().await.unwrap_or_default();
                let last = body.rsplit("event: ").find(|b| !b.trim().is_empty()).unwrap_or("");
                let name = last.lines().next().unwrap_or("").trim().to_string();
                let error = last.contains("upstream_error");
                let label = if error { "stream error upstream_error".to_string() } else { format!("stream {name}") };
                tally.add(label, name == "final" || error);
            }
            Ok(resp) => {
                let (status, what) = describe(resp).await;
                tally.add(format!("stream {what}"), normal(status));
            }
            Err(e) => tally.add(format!("stream transport: {e}"), false),
        },
        5 => {
            let chat = json!({"model": format!("hopwise-{strategy}"), "stream": n % 24 == 5,
                              "messages": [{"role": "user", "content": QUESTION}]});
            match post("/v1/chat/completions").json(&chat).send().await {
                Ok(resp) => {
                    let streamed = resp
                        .headers()
                        .get("content-type")
                        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
                    if streamed {
                        let body = resp.text().await.unwrap_or_default();
                        tally.add("chat-stream 200".into(), body.trim_end().ends_with("data: [DONE]"));
                    } else {
                        let (status, what) = describe(resp).await;
                        tally.add(format!("chat {what}"), normal(status));
                    }
                }
                Err(e) => tally.add(format!("chat transport: {e}"), false),
            }
        }
        6 => {
            // Disconnect after the first chunk of a stream: the server must cancel the question.
            match post("/v1/ask").header("accept", "text/event-stream").json(&ask).send().await {
                Ok(mut resp) => {
                    let _ = resp.chunk().await;
                    drop(resp);
                    tally.add("disconnect mid-stream".into(), true);
                }
                Err(e) => tally.add(format!("disconnect transport: {e}"), false),
            }
        }
        7 => {
            let bad = [
                (post("/v1/ask").header("content-type", "application/json").body("{\"question\": "), "bad-json", 400),
                (post("/v1/ask").json(&json!({"question": "Q?", "strategy": "nope"})), "unknown-strategy", 400),
                (post("/v1/ask").json(&json!({"question": "  "})), "empty-question", 400),
                (client.post(format!("{base}/v1/ask")).bearer_auth("wrong").json(&ask), "wrong-token", 401),
                (post("/v1/ask").json(&json!({"question": "x".repeat(70_000)})), "oversized", 413),
                (post("/v1/nope"), "unknown-path", 404),
            ];
            let (request, name, want) = bad.into_iter().nth((n / 12 % 6) as usize).expect("six kinds");
            match request.send().await {
                Ok(resp) => {
                    let (status, what) = describe(resp).await;
                    tally.add(format!("{name} {what}"), status == want);
                }
                Err(e) => tally.add(format!("{name} transport: {e}"), false),
            }
        }
        8 if n % 48 == 8 => {
            // Slow headers: the server closes the connection after its read timeout.
            let started = Instant::now();
            let closed = async {
                let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.ok()?;
                let mut buf = [0u8; 64];
                loop {
                    match tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
                        Ok(Ok(_)) => {}
                        Err(_) => return None,
                    }
                }
            }
            .await;
            tally.add("slow headers cut off".into(), closed.is_some());
        }
        _ => match client.get(format!("{base}/healthz")).send().await {
            Ok(resp) => tally.add(format!("healthz {}", resp.status().as_u16()), resp.status().is_success()),
            Err(e) => tally.add(format!("healthz transport: {e}"), false),
        },
    }
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
    match run(args).await {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(args: Args) -> Result<bool, String> {
    let backend = MockOpenAiServer::start(Arc::new(model())).await.map_err(|e| format!("mock server: {e}"))?;
    backend.set_delay(Duration::from_millis(args.latency_ms));
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let log_path = std::env::temp_dir().join(format!("hopwise-soak-{port}.log"));
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let mut server = Server(
        Command::new(&args.binary)
            .args(["serve", "--no-retrieval", "--strategy", "direct", "--token-env", "SOAK_TOKEN"])
            .args(["--bind", &format!("127.0.0.1:{port}"), "--base-url", &backend.base_url()])
            .args(["--max-concurrency", "8", "--read-timeout-secs", "5", "--llm-max-retries", "0"])
            .env("SOAK_TOKEN", TOKEN)
            .env("HOPWISE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", args.binary.display()))?,
    );
    let pid = server.0.id();
    let base = format!("http://127.0.0.1:{port}");
    let addr = format!("127.0.0.1:{port}");
    // Idle pooled connections are dropped before the server's read timeout would close them: reusing
    // one the server is closing at that moment fails, as with any keep-alive server.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_idle_timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;
    let up = Instant::now();
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        if up.elapsed() > Duration::from_secs(60) || server.0.try_wait().map_err(|e| e.to_string())?.is_some() {
            return Err("the server did not come up".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start = usage(&client, &base).await?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.minutes * 60.0);
    let tally = Arc::new(Tally::default());

    // A two-second backend outage at the start of every minute.
    let outages = {
        async {
            let mut minute = 1u64;
            while Instant::now() + Duration::from_secs(2) < deadline {
                let at = started + Duration::from_secs(60 * minute);
                if at > deadline {
                    break;
                }
                tokio::time::sleep_until(at.into()).await;
                let calls = backend.request_count();
                backend.fail_always(Fault::Status { status: 500, retry_after: None });
                tokio::time::sleep(Duration::from_secs(2)).await;
                backend.heal();
                eprintln!(
                    "outage {minute} at {:.0} s: {} backend calls failed",
                    at.duration_since(started).as_secs_f64(),
                    backend.request_count() - calls
                );
                minute += 1;
            }
        }
    };
    let clients: Vec<_> = (0..args.clients)
        .map(|c| {
            let (client, base, addr, tally) = (client.clone(), base.clone(), addr.clone(), tally.clone());
            tokio::spawn(async move {
                let mut n = c as u64 * 7919;
                while Instant::now() < deadline {
                    one(&client, &base, &addr, n, &tally).await;
                    n += 1;
                }
            })
        })
        .collect();
    outages.await;
    for c in clients {
        c.await.map_err(|e| format!("a client task failed: {e}"))?;
    }
    let ran = started.elapsed();
    // Measured once idle connections have been closed (the read timeout is 5 s) and our pool is gone.
    drop(client);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let scrape = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())?;
    let end = usage(&scrape, &base).await?;

    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let stop = Instant::now();
    let status = loop {
        if let Some(status) = server.0.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if stop.elapsed() > Duration::from_secs(30) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log_text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let panics = log_text.matches("panicked").count();

    let requests = tally.requests.load(Ordering::Relaxed);
    println!(
        "soak: {:.1} min, {} clients, backend latency {} ms, binary {}",
        ran.as_secs_f64() / 60.0,
        args.clients,
        args.latency_ms,
        args.binary.display()
    );
    println!(
        "requests: {requests} ({:.1}/s); backend calls: {}",
        requests as f64 / ran.as_secs_f64(),
        backend.request_count()
    );
    println!("outcomes:");
    for (what, n) in tally.outcomes.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        println!("  {n:>8}  {what}");
    }
    let unexpected = tally.unexpected.lock().unwrap_or_else(|p| p.into_inner()).clone();
    println!("unexpected: {}", if unexpected.is_empty() { "none".to_string() } else { String::new() });
    for (what, n) in &unexpected {
        println!("  {n:>8}  {what}");
    }
    println!("server RSS: {:.1} MiB at start, {:.1} MiB at end (peak {:.1} MiB)", start.0, end.0, end.1);
    println!("server open file descriptors: {:.0} at start, {:.0} at end", start.2, end.2);
    println!("panics in the server log: {panics} ({})", log_path.display());
    let clean = matches!(status, Some(s) if s.success());
    println!(
        "SIGTERM: {}",
        match status {
            Some(s) => format!("exited with {s}"),
            None => "still running after 30 s".into(),
        }
    );
    Ok(panics == 0 && clean && unexpected.is_empty())
}
