//! Helpers shared by the end-to-end tests that run the real binary (e2e_local, e2e_llama_server,
//! e2e_retrieval, e2e_remote).
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::Output;

use hopwise_core::scripted::ScriptedLlm;

pub fn home() -> PathBuf {
    std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/hopwise"))
}

/// The real binary with the user's hopwise settings removed from its environment, the test's data
/// directory and one inference thread.
pub fn hopwise_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hopwise"));
    for var in [
        "HOPWISE_CONFIG",
        "HOPWISE_LLM",
        "HOPWISE_BASE_URL",
        "HOPWISE_MODEL",
        "HOPWISE_INDEX",
        "HOPWISE_RETRIEVER",
        "HOPWISE_STRATEGY",
        "HOPWISE_REMOTE_MODE",
        "HOPWISE_REMOTE_COLLECTION",
        "HOPWISE_EMBED_PRECISION",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOPWISE_HOME", home()).env("HOPWISE_THREADS", "1");
    cmd
}

/// A BM25 index of the repository's sample corpus, built by the real binary in `dir/index`.
pub fn sample_index(dir: &Path) -> PathBuf {
    let index = dir.join("index");
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample/corpus.jsonl");
    let out = hopwise_command().args(["index", "--json", "--index"]).arg(&index).arg(&corpus).output().expect("index");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    index
}

pub fn minilm_installed() -> bool {
    let dir = home().join("models/all-minilm-l6-v2");
    let ok = ["model.safetensors", "tokenizer.json", "config.json"].iter().all(|f| dir.join(f).is_file());
    if !ok {
        let reason = format!(
            "all-MiniLM-L6-v2 is not installed in {}; run `hopwise setup --fetch all-minilm-l6-v2`",
            dir.display()
        );
        assert!(std::env::var_os("CI").is_none(), "CI: {reason}");
        hopwise_core::test_skips::skipped(&reason);
    }
    ok
}

pub async fn output(mut cmd: std::process::Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run hopwise")).await.expect("join")
}

pub fn ok_json(out: &Output, what: &str) -> serde_json::Value {
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})"))
}

pub fn write_jsonl(path: &Path, rows: &[serde_json::Value]) {
    let text: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    std::fs::write(path, text.join("\n")).expect("write jsonl");
}

/// A small corpus: three passages about Rush, a recipe and four unrelated facts.
pub const DOCS: [(&str, &str, &str); 8] = [
    ("rush", "Rush (band)", "Rush was a Canadian rock band formed in Toronto in 1968."),
    (
        "peart",
        "Neil Peart",
        "Neil Peart was the drummer and lyricist of Rush, inducted into the Modern Drummer Hall of Fame.",
    ),
    (
        "counterparts",
        "Counterparts (album)",
        "Counterparts is the fifteenth studio album by the Canadian rock band Rush.",
    ),
    ("toronto", "Toronto", "Toronto is the capital city of the province of Ontario."),
    ("cake", "Sponge cake", "To bake a sponge you whisk eggs, sugar and flour, then heat the batter in an oven."),
    ("moon", "Moon", "The Moon orbits the Earth and reflects sunlight."),
    ("contract", "Contract", "A contract is an agreement that a court will enforce."),
    ("river", "Danube", "The Danube flows through ten countries into the Black Sea."),
];

/// Answers the two questions the corpus supports (Rush, the sponge cake) when their passages are in
/// the prompt, and writes a HyDE passage.
pub fn scripted_model() -> ScriptedLlm {
    ScriptedLlm::new()
        .on_fn("Use the passages", |prompt, _| {
            if prompt.contains("fifteenth studio album by the Canadian rock band Rush") {
                "Answer: Rush".into()
            } else if prompt.contains("whisk eggs") {
                "Answer: whisk eggs, sugar and flour and bake".into()
            } else {
                "Answer: unknown".into()
            }
        })
        .on("Write a short passage", "A sponge cake is a dessert baked from eggs, sugar and flour.")
        .fallback("Answer: unknown")
}

/// Answers with the title of the first passage in the prompt (`[1] Title: text`), or with
/// `no_passages` to any other prompt: deterministic, right on some questions and wrong on others.
pub fn first_title_model(no_passages: &str) -> ScriptedLlm {
    ScriptedLlm::new()
        .on_fn("Use the passages", |prompt, _| {
            let title = prompt
                .lines()
                .find_map(|l| l.strip_prefix("[1] "))
                .and_then(|l| l.split(':').next())
                .unwrap_or("unknown")
                .to_string();
            format!("Answer: {title}")
        })
        .fallback(no_passages)
}
