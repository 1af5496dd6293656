//! The dense (embedding) index, stored next to the BM25 index in `DIR/dense/`.
//!
//! ```text
//! DIR/dense/dense.json         metadata: embedder model id and dimension, row count, search settings
//! DIR/dense/entries.jsonl      one {"id","hash"} per row, rows sorted by passage id
//! DIR/dense/vectors.f32        row-major little-endian f32 vectors, one per entry
//! DIR/dense/hnsw.hnsw.graph    the HNSW graph (hnsw_rs dump), only above the exact-search threshold
//! DIR/dense/hnsw.hnsw.data
//! ```
//!
//! The passage texts stay in the BM25 store; the dense index keeps ids and vectors only. A build
//! ([`build_dense`]) walks the passages of the BM25 index, embeds those whose id is new or whose text
//! changed (a content hash per row), drops rows whose passage is gone, and rewrites the folder. Rows
//! are sorted by passage id and the HNSW graph is built serially in that order (its level generator
//! is seeded), so the same input always gives the same index and the same results.
//!
//! The graph needs the `hnsw` feature (off by default, see `ann_off.rs`); without it every search is
//! exact.

#[cfg(feature = "hnsw")]
mod ann;
#[cfg(not(feature = "hnsw"))]
#[path = "ann_off.rs"]
mod ann;
mod build;
mod retriever;
mod store;

pub use build::{build_dense, DenseProgress, DenseReport};
pub use retriever::DenseRetriever;
pub use store::{DenseMeta, DENSE_SUBDIR};

use serde::{Deserialize, Serialize};

use crate::error::{IndexError, Result};

/// How a dense index is built and searched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseOptions {
    /// Up to this many rows, search is exact (brute-force cosine) and no graph is built: on a few
    /// tens of thousands of 384-d vectors a full scan is cheap and has recall 1.
    pub exact_threshold: usize,
    /// HNSW links per node (M).
    pub max_connections: usize,
    /// Candidate list size while building the graph.
    pub ef_construction: usize,
    /// Candidate list size while searching (at least `k` is used).
    pub ef_search: usize,
    /// Passages per embedding call.
    pub batch: usize,
}

impl Default for DenseOptions {
    fn default() -> Self {
        Self { exact_threshold: 20_000, max_connections: 16, ef_construction: 200, ef_search: 128, batch: 256 }
    }
}

impl DenseOptions {
    pub fn validate(&self) -> Result<()> {
        if !(2..=255).contains(&self.max_connections) {
            return Err(IndexError::InvalidOptions("HNSW max_connections must be between 2 and 255".into()));
        }
        if self.ef_construction == 0 || self.ef_search == 0 || self.batch == 0 {
            return Err(IndexError::InvalidOptions("ef_construction, ef_search and batch must be positive".into()));
        }
        Ok(())
    }
}

/// The embedder identity (model id) the dense index in `index_dir` was built with, or `None` when
/// there is no dense index yet. Lets a caller load the matching embedder (e.g. the same precision)
/// before opening or updating the index.
pub fn dense_model_id(index_dir: &std::path::Path) -> Result<Option<String>> {
    Ok(store::read_meta(index_dir)?.map(|meta| meta.model_id))
}

/// Row scores for a unit-length query: the cosine similarity (dot product of unit vectors).
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scales `v` to unit length (left as is when it is all zeros or not finite).
pub(crate) fn normalise(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm.is_finite() && norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}
