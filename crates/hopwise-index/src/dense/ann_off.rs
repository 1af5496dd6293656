//! Stand-in for the HNSW graph when hopwise-index is built without its `hnsw` feature: no graph is
//! built, and a graph found on disk is ignored, so every search is exact (always correct, linear in
//! the corpus). The feature is off by default because `hnsw_rs` changes the features of shared
//! low-level crates, which makes cargo rebuild llama.cpp for the whole workspace.

use std::path::Path;

use super::store::Rows;
use super::DenseOptions;
use crate::error::Result;

/// Whether this build can create and search HNSW graphs.
pub(crate) const AVAILABLE: bool = false;

/// Uninhabited: without the feature no graph ever exists.
pub(crate) enum Ann {}

impl Ann {
    pub fn build(_rows: &Rows, _dim: usize, _opts: &DenseOptions) -> Option<Self> {
        None
    }

    pub fn dump(&self, _dir: &Path) -> Result<String> {
        match *self {}
    }

    /// A graph written by an `hnsw` build is left unused: exact search over the same rows.
    pub fn load(_index_dir: &Path, _dense_dir: &Path, _basename: &str, _rows: usize) -> Result<Option<Self>> {
        Ok(None)
    }

    pub fn search(&self, _query: &[f32], _k: usize, _ef: usize) -> Vec<(usize, f32)> {
        match *self {}
    }
}
