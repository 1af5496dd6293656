//! Helpers shared by the end-to-end tests that run the real binary with the sentence embedder
//! (e2e_retrieval, e2e_remote).
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::Output;

pub fn home() -> PathBuf {
    std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/hopwise"))
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
        eprintln!("skipped: {reason}");
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
