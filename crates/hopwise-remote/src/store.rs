//! What every remote engine offers the importer and the retrievers: a collection of passages with
//! one embedding each, addressed by the passage id.

use std::collections::HashMap;

use async_trait::async_trait;
use hopwise_core::Passage;
use sha2::{Digest, Sha256};

use crate::error::{RemoteError, Result};

/// A passage ready to be written: its text, where it came from, its embedding, and a hash of what was
/// embedded (so a resumed import can skip what the engine already holds unchanged).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteDoc {
    pub id: String,
    pub title: String,
    pub text: String,
    pub doc_id: Option<String>,
    pub hash: String,
    pub embedding: Vec<f32>,
}

/// The text embedded for a passage. The same form as hopwise-index's dense index, so a remote engine
/// and the embedded retriever rank the same vectors.
pub fn embed_text(title: &str, text: &str) -> String {
    if title.is_empty() {
        text.to_string()
    } else {
        format!("{title}. {text}")
    }
}

/// Identifies what was embedded, and by which model.
pub fn content_hash(model_id: &str, title: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(model_id.as_bytes());
    h.update([0u8]);
    h.update(title.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    hex::encode(&h.finalize()[..12])
}

#[async_trait]
pub trait RemoteStore: Send + Sync {
    /// `typesense`, `milvus`, `opensearch`.
    fn engine(&self) -> &'static str;
    fn collection(&self) -> &str;
    /// Whether the server answers at all (a clear error when it does not).
    async fn health(&self) -> Result<()>;
    /// The vector dimension of the collection, or `None` when it does not exist.
    async fn collection_dim(&self) -> Result<Option<usize>>;
    /// Creates the collection for `dim`-d vectors, or checks that the existing one has that dimension
    /// (`DimensionMismatch` otherwise: its vectors would not be comparable).
    async fn ensure_collection(&self, dim: usize) -> Result<()>;
    async fn drop_collection(&self) -> Result<()>;
    /// The content hashes of those of `ids` the collection holds.
    async fn existing(&self, ids: &[String]) -> Result<HashMap<String, String>>;
    /// Writes `docs`, replacing any passage with the same id (never a second copy).
    async fn upsert(&self, docs: &[RemoteDoc]) -> Result<()>;
    /// Deletes passages by id; returns how many existed.
    async fn delete(&self, ids: &[String]) -> Result<u64>;
    /// Passages in the collection.
    async fn count(&self) -> Result<u64>;
    /// The `k` passages nearest to `vector` (cosine), best first; `score` is the cosine similarity.
    async fn search_vector(&self, vector: &[f32], k: usize) -> Result<Vec<Passage>>;
    /// Whether [`RemoteStore::search_text`] works (Milvus 2.3 has no text search).
    fn supports_text(&self) -> bool {
        false
    }
    /// The engine's own text ranking (BM25 for OpenSearch, Typesense's typo-tolerant ranking).
    async fn search_text(&self, _query: &str, _k: usize) -> Result<Vec<Passage>> {
        Err(RemoteError::Config(format!("{} has no text search; use --remote-mode vector", self.engine())))
    }
}
