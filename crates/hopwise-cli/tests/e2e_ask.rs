//! End to end through the real path: the `hopwise` binary indexes a real corpus with the real BM25
//! index, then answers a HotPotQA question with ToQD through a real HTTP server speaking the OpenAI
//! protocol (scripted answers, so the assertions are deterministic). The scripted model answers
//! from context only when the retrieved passages really contain the evidence.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{Decision, Trace};
use hopwise_models::testing::MockOpenAiServer;

fn hopwise() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hopwise"));
    // Keep the test independent of the developer's config and data directory.
    cmd.env_remove("HOPWISE_CONFIG").env_remove("HOPWISE_LLM").env_remove("HOPWISE_MODEL").env_remove("HOPWISE_INDEX");
    cmd
}

/// A file of the repository's sample data (`data/sample`, with its sources and licenses).
fn sample_data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample").join(file)
}

async fn output(mut cmd: std::process::Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run hopwise")).await.expect("join")
}

fn build_index(dir: &Path) {
    let out = hopwise()
        .args(["index", "--json", "--index"])
        .arg(dir)
        .arg(sample_data("corpus.jsonl"))
        .output()
        .expect("run hopwise index");
    assert!(out.status.success(), "index failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("index report is JSON");
    let paragraphs =
        std::fs::read_to_string(sample_data("corpus.jsonl")).expect("sample corpus").lines().count() as u64;
    assert!(
        report["passages_total"].as_u64().unwrap_or(0) >= paragraphs,
        "one passage or more per paragraph: {report}"
    );
}

const QUESTION: &str = "Which Canadian rock band released a song called \"Counterparts\" and had a drummer who was inducted into the Modern Drummer Hall of Fame?";

/// The plan of [`QUESTION`]: which band, then whether its drummer is in the hall of fame.
const PLAN: &str = r##"{"op":"answer","answer_type":"organisation","steps":[{"question":"Which band released the song Nobody's Hero on the album Counterparts?","answer_type":"organisation"},{"question":"Was the drummer of #1 inducted into the Modern Drummer Hall of Fame?","answer_type":"yes_no"}]}"##;

fn toqd_model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on("Plan how to answer the question", PLAN)
        .on("Break the question below", "1. Which band released the song Nobody's Hero on the album Counterparts?\n2. Was the drummer of that band inducted into the Modern Drummer Hall of Fame?")
        .on("Review the candidates", "1. Which band released the song Nobody's Hero on the album Counterparts?\n2. Was the drummer of that band inducted into the Modern Drummer Hall of Fame?")
        .on("Describe which answers help", "1 -> 2\n2 -> Q")
        .on("Rewrite the question below", "Was the drummer of Rush, Neil Peart, inducted into the Modern Drummer Hall of Fame?")
        .on("from your own knowledge", "NO!")
        // Answer from context only if the retrieved passages hold the evidence.
        .on_fn("Using the passages, answer", |prompt, _| {
            // Each step is answered only when the passages it was shown hold its evidence.
            let asked = prompt.rsplit("Question:").next().unwrap_or_default();
            if asked.contains("Which band released") && prompt.contains("Rush") {
                "Rush".into()
            } else if asked.contains("Was the drummer") && prompt.contains("Neil Peart:") && prompt.contains("Modern Drummer") {
                "yes".into()
            } else {
                "NO!".into()
            }
        })
        .on("Reply in exactly this form", "Answer: Rush\nReason: Rush released Counterparts; its drummer Neil Peart is in the hall of fame.")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toqd_answers_a_hotpotqa_question_over_http_and_bm25() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = tmp.path().join("index");
    build_index(&index);

    let server = MockOpenAiServer::start(Arc::new(toqd_model())).await.expect("mock server");
    let mut cmd = hopwise();
    // The graph path: a sure reading of the question would answer it before any node runs.
    cmd.args(["ask", QUESTION, "--json", "--base-url", &server.base_url(), "--model", "scripted"])
        .args(["--opt", "answer_first=false", "--index"])
        .arg(&index);
    let out = output(cmd).await;
    assert!(out.status.success(), "ask failed: {}", String::from_utf8_lossy(&out.stderr));
    let trace: Trace = serde_json::from_slice(&out.stdout).expect("stdout is exactly the trace");

    assert_eq!(trace.answer, "Rush");
    assert_eq!(trace.strategy, "toqd");
    let n1 = trace.node("1").expect("node 1");
    let n2 = trace.node("2").expect("node 2");
    assert_eq!(n1.decision, Decision::Retrieved, "node 1: {}", serde_json::to_string(&trace).unwrap_or_default());
    let titles = |n: &hopwise_core::NodeTrace| n.passages.iter().map(|p| p.title.clone()).collect::<Vec<_>>();
    assert_eq!(n2.decision, Decision::Retrieved, "node 2 evidence: {:?}, rewritten {:?}", titles(n2), n2.rewritten);
    assert_eq!(n2.answer.as_deref(), Some("yes"));
    assert!(
        n2.rewritten.as_deref().is_some_and(|q| q.contains("Rush")),
        "node 1's answer fills #1: {:?}",
        n2.rewritten
    );
    // The real index found the supporting paragraphs: with the question, or with node 2's own search.
    let evidence: Vec<&str> = trace.evidence().iter().map(|p| p.title.as_str()).collect();
    assert!(evidence.contains(&"Neil Peart"), "evidence: {evidence:?}");
    assert!((1..=2).contains(&trace.stats.retrieval_rounds), "{}", trace.stats.retrieval_rounds);
    assert_eq!(trace.stats.llm_calls as usize, server.request_count());
    assert!(trace.stats.prompt_tokens > 0, "usage comes back over HTTP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readable_output_shows_the_graph() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let index = tmp.path().join("index");
    build_index(&index);
    let server = MockOpenAiServer::start(Arc::new(toqd_model())).await.expect("mock server");
    let mut cmd = hopwise();
    cmd.args(["ask", QUESTION, "--base-url", &server.base_url(), "--opt", "answer_first=false", "--index"]).arg(&index);
    let out = output(cmd).await;
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Answer:   Rush"), "{text}");
    assert!(text.contains("retrieved -> yes"), "{text}");
    assert!(text.contains("evidence: "), "{text}");
    assert!(text.contains("Q  <- 2"), "{text}");

    // The same graph for a drawing tool.
    for (format, head, edge) in
        [("mermaid", "flowchart TD", "n2 --> nQ"), ("dot", "digraph hopwise {", "\"2\" -> \"Q\";")]
    {
        let mut cmd = hopwise();
        cmd.args(["ask", QUESTION, "--graph", format, "--base-url", &server.base_url(), "--opt", "answer_first=false"])
            .arg("--index")
            .arg(&index);
        let out = output(cmd).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with(head) && text.contains(edge) && text.contains("Rush"), "{text}");
        if format == "mermaid" {
            // The question's quotes and apostrophes are in the labels: Mermaid itself must parse them.
            mermaid_parses(&text, tmp.path());
        }
    }
}

/// Parses `diagram` with Mermaid's own parser (its browser bundle in headless Chromium, through
/// `tests/mermaid/parse.cjs`). Needs node, /usr/bin/chromium, and playwright-core and mermaid in
/// `$HOPWISE_HOME/node` (`.ci/run` installs them); without them it prints why and returns, except
/// under CI, where it fails.
fn mermaid_parses(diagram: &str, tmp: &Path) {
    let home = std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/hopwise"));
    let modules = home.join("node/node_modules");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let node = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    let missing = [
        (!node).then(|| "node is missing".to_string()),
        (!Path::new(&chromium).is_file()).then(|| format!("{chromium} is missing")),
        (!modules.join("playwright-core").is_dir())
            .then(|| format!("playwright-core is missing in {}", modules.display())),
        (!modules.join("mermaid").is_dir()).then(|| format!("mermaid is missing in {}", modules.display())),
    ];
    if let Some(why) = missing.into_iter().flatten().next() {
        assert!(std::env::var_os("CI").is_none(), "the Mermaid check cannot run under CI: {why}");
        hopwise_core::test_skips::skipped(&format!("the Mermaid parse check ({why})"));
        return;
    }
    let file = tmp.join("graph.mmd");
    std::fs::write(&file, diagram).expect("write the diagram");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mermaid/parse.cjs");
    let out = std::process::Command::new("node")
        .arg(&script)
        .arg(&file)
        .env("NODE_PATH", &modules)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run node");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "Mermaid does not parse the graph: {report}{}\n{diagram}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_give_clear_errors_and_nonzero_exits() {
    let tmp = tempfile::tempdir().expect("tempdir");

    // Missing index.
    let out = output({
        let mut c = hopwise();
        c.args(["ask", "Who?", "--base-url", "http://127.0.0.1:9/v1", "--index"]).arg(tmp.path().join("nope"));
        c
    })
    .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope") && err.contains("hopwise index"), "{err}");

    // Empty question and unknown strategy.
    for args in [vec!["ask", "  "], vec!["ask", "Who?", "--strategy", "nope"]] {
        let out = output({
            let mut c = hopwise();
            c.args(&args);
            c
        })
        .await;
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    }

    // A model server that is down: no panic, a clear message, a non-zero exit.
    let index = tmp.path().join("index");
    build_index(&index);
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let out = output({
        let mut c = hopwise();
        c.args(["ask", QUESTION, "--base-url", &format!("http://127.0.0.1:{down}/v1"), "--index"]).arg(&index);
        c
    })
    .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no answer") && err.to_lowercase().contains("connect"), "{err}");
    assert!(!err.contains("panicked"));

    // A server answering 500 and garbage: handled, never a panic.
    let server = MockOpenAiServer::start(Arc::new(toqd_model())).await.expect("mock server");
    server.fail_next(100, 500);
    let out = output({
        let mut c = hopwise();
        c.args(["ask", QUESTION, "--base-url", &server.base_url(), "--index"]).arg(&index);
        c
    })
    .await;
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}
