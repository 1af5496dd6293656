//! Searching the dense index.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use hopwise_core::{Embedder, Passage, Retriever};

use super::ann::Ann;
use super::store::{self, dense_dir, DenseMeta, Rows};
use super::{dot, normalise};
use crate::error::{IndexError, Result};
use crate::Bm25Retriever;

/// Cosine-similarity search over the dense index of an index directory, exact up to the build's
/// threshold and through the HNSW graph above it. Passage texts come from the BM25 store next to it.
pub struct DenseRetriever {
    dir: PathBuf,
    embedder: Arc<dyn Embedder>,
    meta: DenseMeta,
    rows: Rows,
    ann: Option<Ann>,
    store: Bm25Retriever,
    ef_search: usize,
}

impl DenseRetriever {
    /// Opens the dense index in `dir/dense/`. Refuses an index built with another embedder (model id
    /// or dimension differ): its vectors are not comparable with this embedder's queries.
    pub fn open(dir: &Path, embedder: Arc<dyn Embedder>) -> Result<Self> {
        let store = Bm25Retriever::open(dir)?;
        let meta = store::read_meta(dir)?.ok_or_else(|| IndexError::MissingDense { dir: dir.to_path_buf() })?;
        if meta.model_id != embedder.model_id() || meta.dim != embedder.dim() {
            return Err(IndexError::EmbedderMismatch {
                dir: dir.to_path_buf(),
                index_model: format!("{} ({}-d)", meta.model_id, meta.dim),
                query_model: format!("{} ({}-d)", embedder.model_id(), embedder.dim()),
            });
        }
        let rows = store::read_rows(dir, &meta)?;
        let ann = match &meta.hnsw {
            Some(basename) => Ann::load(dir, &dense_dir(dir), basename, meta.rows)?,
            None => None,
        };
        let ef_search = meta.options.ef_search;
        Ok(Self { dir: dir.to_path_buf(), embedder, meta, rows, ann, store, ef_search })
    }

    /// Sets the HNSW search width (ignored by exact search).
    pub fn with_ef_search(mut self, ef: usize) -> Self {
        self.ef_search = ef.max(1);
        self
    }

    pub fn meta(&self) -> &DenseMeta {
        &self.meta
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether searches go through the HNSW graph.
    pub fn uses_ann(&self) -> bool {
        self.ann.is_some()
    }

    pub fn len(&self) -> usize {
        self.rows.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.entries.is_empty()
    }

    /// The `k` rows most similar to `query` by full scan: `(passage id, cosine)`, best first, ties
    /// broken by id (rows are sorted by id, so by row).
    pub fn search_exact(&self, query: &[f32], k: usize) -> Vec<(String, f32)> {
        let dim = self.meta.dim;
        let mut scored: Vec<(usize, f32)> =
            (0..self.rows.entries.len()).map(|row| (row, dot(self.rows.vector(row, dim), query))).collect();
        let k = k.min(scored.len());
        if k == 0 {
            return Vec::new();
        }
        let by_score = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        scored.select_nth_unstable_by(k - 1, by_score);
        scored.truncate(k);
        scored.sort_by(by_score);
        scored.into_iter().map(|(row, s)| (self.rows.entries[row].id.clone(), s)).collect()
    }

    /// The `k` nearest rows through the HNSW graph, or exactly when the index has none.
    pub fn search_ann(&self, query: &[f32], k: usize) -> Vec<(String, f32)> {
        let Some(ann) = &self.ann else { return self.search_exact(query, k) };
        let mut hits = ann.search(query, k, self.ef_search);
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.into_iter().filter_map(|(row, s)| self.rows.entries.get(row).map(|e| (e.id.clone(), s))).collect()
    }

    /// Embeds `query` as a unit vector.
    pub async fn embed_query(&self, query: &str) -> hopwise_core::Result<Vec<f32>> {
        let mut out = self.embedder.embed(&[query.to_string()]).await?;
        let mut v = out.pop().unwrap_or_default();
        if v.len() != self.meta.dim {
            return Err(hopwise_core::Error::backend(
                "dense",
                hopwise_core::BackendErrorKind::Unsupported,
                format!("the embedder returned a {}-d vector for a {}-d index", v.len(), self.meta.dim),
            ));
        }
        normalise(&mut v);
        Ok(v)
    }

    /// Turns `(id, score)` hits into passages from the BM25 store.
    pub fn passages(&self, hits: Vec<(String, f32)>) -> Result<Vec<Passage>> {
        let mut out = Vec::with_capacity(hits.len());
        for (id, score) in hits {
            // A passage deleted from BM25 after the dense build is skipped, not an error.
            if let Some(mut p) = self.store.passage(&id)? {
                p.score = score;
                out.push(p);
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl Retriever for DenseRetriever {
    fn name(&self) -> &str {
        "dense"
    }

    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        if k == 0 || query.trim().is_empty() || self.is_empty() {
            return Ok(Vec::new());
        }
        let v = self.embed_query(query).await?;
        let hits = if self.ann.is_some() { self.search_ann(&v, k) } else { self.search_exact(&v, k) };
        Ok(self.passages(hits)?)
    }
}

impl std::fmt::Debug for DenseRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseRetriever")
            .field("dir", &self.dir)
            .field("model", &self.meta.model_id)
            .field("rows", &self.meta.rows)
            .field("ann", &self.ann.is_some())
            .finish()
    }
}
