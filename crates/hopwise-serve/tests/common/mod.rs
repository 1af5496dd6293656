//! A real server on a loopback port over a scripted model and an in-memory corpus.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
use hopwise_core::Retriever;
use hopwise_serve::{AppState, AppStateBuilder, Limits};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const QUESTION: &str = "Which Canadian rock band released Counterparts and had a Hall of Fame drummer?";

/// ToQD on the bridge question: node 1 known, node 2 retrieved after rewriting.
pub fn toqd_model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on(
            "Break the question below",
            "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?",
        )
        .on(
            "Review the candidates",
            "1. Which band released the song Counterparts?\n2. Who was the drummer of that band?",
        )
        .on("Describe which answers help", "1 -> 2\n2 -> Q")
        .on("Rewrite the question below", "Who was the drummer of Rush?")
        .on_fn("from your own knowledge", |p, _| if p.contains("Counterparts") { "Rush".into() } else { "NO!".into() })
        // The question itself is not settled by one reading (so ToQD plans); its steps are.
        .on_fn(
            "Using the passages, answer",
            |p, _| if p.contains(QUESTION) { "NO!".into() } else { "Neil Peart".into() },
        )
        .on(
            "Reply in exactly this form",
            "Answer: Rush\nReason: Rush released Counterparts and Neil Peart drummed for it.",
        )
        .on("step by step", "Rush released Counterparts.\nAnswer: Rush")
        .fallback("Rush")
}

pub fn corpus() -> Arc<dyn Retriever> {
    Arc::new(StaticRetriever::from_pairs(&[
        ("Neil Peart", "Neil Peart was the drummer of Rush and was inducted into the Modern Drummer Hall of Fame."),
        ("Counterparts", "Counterparts is an album and song by the Canadian rock band Rush."),
        ("Jaws", "Jaws is a 1975 film directed by Steven Spielberg."),
    ]))
}

pub fn builder(llm: ScriptedLlm) -> AppStateBuilder {
    AppState::builder(Arc::new(llm)).retriever(Some(corpus()))
}

pub fn limits(max_concurrency: usize, timeout: Duration, max_body_bytes: usize) -> Limits {
    Limits { max_concurrency, timeout, max_body_bytes, retry_after_secs: 2, ..Limits::default() }
}

pub struct TestServer {
    pub base: String,
    pub state: AppState,
    shutdown: Option<oneshot::Sender<()>>,
    pub handle: Option<JoinHandle<hopwise_serve::Result<()>>>,
}

impl TestServer {
    pub async fn start(state: AppState) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(hopwise_serve::serve(listener, state.clone(), async move {
            let _ = rx.await;
        }));
        Self { base: format!("http://{addr}"), state, shutdown: Some(tx), handle: Some(handle) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Starts the graceful shutdown.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(h) = &self.handle {
            h.abort();
        }
    }
}

/// `(event name, data as JSON)` for every event of an SSE body.
pub fn parse_sse(body: &str) -> Vec<(String, serde_json::Value)> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|block| {
            let mut name = "message".to_string();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = n.trim().to_string();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            if data.is_empty() {
                return None;
            }
            let joined = data.join("\n");
            let value = serde_json::from_str(&joined).unwrap_or(serde_json::Value::String(joined));
            Some((name, value))
        })
        .collect()
}

/// The value of an un-labelled metric line, or of the first line starting with `prefix`.
pub fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

fn home() -> std::path::PathBuf {
    std::env::var_os("HOPWISE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache").join("hopwise")))
        .unwrap_or_else(|| std::path::PathBuf::from(".hopwise"))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// `$HOPWISE_HOME/node/node_modules` when node and the npm `packages` (and, with `chromium`,
/// /usr/bin/chromium or `$CHROMIUM`) are there, as `.ci/run` installs them. Otherwise `None` with the
/// reason printed, so the test returns early, except under CI (`CI` set), where it panics.
pub fn node_modules_or_skip(test: &str, packages: &[&str], chromium: bool) -> Option<std::path::PathBuf> {
    let node_modules = home().join("node").join("node_modules");
    let browser = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let reason = if !on_path("node") {
        Some("node is not installed (apt-get install nodejs)".to_string())
    } else if chromium && !std::path::Path::new(&browser).is_file() {
        Some(format!("{browser} is missing (apt-get install chromium)"))
    } else {
        packages.iter().find(|p| !node_modules.join(p).is_dir()).map(|p| {
            format!(
                "{p} is not in {} (npm install --prefix {} {p})",
                node_modules.display(),
                node_modules.parent().map(|d| d.display().to_string()).unwrap_or_default()
            )
        })
    };
    match reason {
        None => Some(node_modules),
        Some(reason) if std::env::var_os("CI").is_some() => panic!("{test} cannot run under CI: {reason}"),
        Some(reason) => {
            hopwise_core::test_skips::skipped(&format!("{test}: {reason}"));
            None
        }
    }
}
