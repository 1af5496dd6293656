//! Building and updating the dense index from the passages of the BM25 index.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use hopwise_core::Embedder;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tantivy::collector::DocSetCollector;
use tantivy::query::AllQuery;
use tantivy::schema::Value;
use tantivy::TantivyDocument;

use super::ann::Ann;
use super::store::{self, DenseMeta, Entry, Rows, DENSE_VERSION};
use super::{normalise, DenseOptions};
use crate::error::{IndexError, Result};
use crate::layout::{self, corrupt};

/// What a dense build did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseReport {
    pub model_id: String,
    /// Passages embedded by this build (new ids and ids whose text changed).
    pub embedded: u64,
    /// Rows kept from the previous build without embedding again.
    pub reused: u64,
    /// Rows of the previous build dropped: their passage is gone, or its text changed (re-embedded).
    pub removed: u64,
    pub rows: u64,
    /// Whether searches use the HNSW graph (false: exact search).
    pub ann: bool,
    pub embed_seconds: f64,
    pub graph_seconds: f64,
    pub seconds: f64,
}

/// Progress of the embedding step: passages embedded so far out of those that need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseProgress {
    pub embedded: u64,
    pub to_embed: u64,
}

/// The text embedded for a passage: title and text, as a reader sees them.
pub(crate) fn embed_text(title: &str, text: &str) -> String {
    if title.is_empty() {
        text.to_string()
    } else {
        format!("{title}. {text}")
    }
}

fn content_hash(model_id: &str, text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(model_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(text.as_bytes());
    hex::encode(&hasher.finalize()[..12])
}

/// Embeds the passages of the BM25 index in `index_dir` that the dense index does not have yet (or
/// whose text changed), drops rows of passages that are gone, and rewrites `index_dir/dense/`.
/// An existing dense index made with another embedder is refused (rebuild it in a new directory or
/// delete `dense/`), so vectors of two models never share an index.
pub async fn build_dense(
    index_dir: &Path,
    embedder: &dyn Embedder,
    opts: &DenseOptions,
    progress: &(dyn Fn(DenseProgress) + Sync),
) -> Result<DenseReport> {
    let started = Instant::now();
    opts.validate()?;
    let model_id = embedder.model_id().to_string();
    let dim = embedder.dim();
    let previous = store::read_meta(index_dir)?;
    if let Some(prev) = &previous {
        if prev.model_id != model_id || prev.dim != dim {
            return Err(IndexError::EmbedderMismatch {
                dir: index_dir.to_path_buf(),
                index_model: format!("{} ({}-d)", prev.model_id, prev.dim),
                query_model: format!("{model_id} ({dim}-d)"),
            });
        }
    }
    let old_rows = match &previous {
        Some(meta) => store::read_rows(index_dir, meta)?,
        None => Rows::default(),
    };
    let old: HashMap<&str, usize> = old_rows.entries.iter().enumerate().map(|(row, e)| (e.id.as_str(), row)).collect();

    // Every live passage of the BM25 index: id, hash of its embedding text, and the text itself
    // only when it must be embedded (so an update holds the texts of new passages only).
    let reusable = |id: &str, hash: &str| old.get(id).filter(|&&row| old_rows.entries[row].hash == hash).copied();
    let passages = live_passages(index_dir, &model_id, &|id, hash| reusable(id, hash).is_none())?;
    let mut todo: Vec<(usize, String)> = Vec::new();
    let mut entries: Vec<Entry> = Vec::with_capacity(passages.len());
    let mut source: Vec<Option<usize>> = Vec::with_capacity(passages.len());
    for (row, (id, hash, text)) in passages.into_iter().enumerate() {
        match text {
            Some(text) => {
                todo.push((row, text));
                source.push(None);
            }
            None => source.push(reusable(&id, &hash)),
        }
        entries.push(Entry { id, hash });
    }
    let reused = source.iter().filter(|s| s.is_some()).count() as u64;
    let removed = old_rows.entries.len() as u64 - reused;

    let mut vectors = vec![0f32; entries.len() * dim];
    for (row, from) in source.iter().enumerate() {
        if let Some(old_row) = from {
            vectors[row * dim..(row + 1) * dim].copy_from_slice(old_rows.vector(*old_row, dim));
        }
    }
    drop(old);
    drop(old_rows);

    let embed_started = Instant::now();
    let to_embed = todo.len() as u64;
    progress(DenseProgress { embedded: 0, to_embed });
    let mut embedded = 0u64;
    for batch in todo.chunks(opts.batch) {
        let texts: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
        let out = embedder.embed(&texts).await.map_err(|e| IndexError::Embedding(e.to_string()))?;
        if out.len() != texts.len() {
            return Err(IndexError::Embedding(format!("{} vectors for {} texts", out.len(), texts.len())));
        }
        for ((row, _), mut v) in batch.iter().zip(out) {
            if v.len() != dim {
                return Err(IndexError::Embedding(format!("a {}-d vector from a {dim}-d embedder", v.len())));
            }
            normalise(&mut v);
            vectors[row * dim..(row + 1) * dim].copy_from_slice(&v);
        }
        embedded += batch.len() as u64;
        progress(DenseProgress { embedded, to_embed });
    }
    let embed_seconds = embed_started.elapsed().as_secs_f64();

    let rows = Rows { entries, vectors };
    let ann = super::ann::AVAILABLE && rows.entries.len() > opts.exact_threshold;
    let meta = DenseMeta {
        version: DENSE_VERSION,
        model_id: model_id.clone(),
        dim,
        rows: rows.entries.len(),
        options: opts.clone(),
        hnsw: None,
    };
    let graph_started = Instant::now();
    let changed = embedded > 0 || removed > 0 || previous.as_ref().is_none_or(|p| p.options != *opts);
    if changed {
        store::write_all(index_dir, &meta, &rows, |dir| match if ann { Ann::build(&rows, dim, opts) } else { None } {
            Some(graph) => graph.dump(dir).map(Some),
            None => Ok(None),
        })?;
    }
    Ok(DenseReport {
        model_id,
        embedded,
        reused,
        removed,
        rows: rows.entries.len() as u64,
        ann,
        embed_seconds,
        graph_seconds: graph_started.elapsed().as_secs_f64(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `(id, hash, embedding text)` of every live passage, sorted by id; the text only where `needs_text`.
type Live = (String, String, Option<String>);
fn live_passages(index_dir: &Path, model_id: &str, needs_text: &dyn Fn(&str, &str) -> bool) -> Result<Vec<Live>> {
    let opened = layout::open(index_dir)?;
    let reader = opened.index.reader()?;
    let searcher = reader.searcher();
    let mut addresses: Vec<_> = searcher.search(&AllQuery, &DocSetCollector)?.into_iter().collect();
    addresses.sort();
    let fields = opened.fields;
    let mut out = Vec::with_capacity(addresses.len());
    for address in addresses {
        let doc: TantivyDocument = searcher.doc(address)?;
        let text_of = |field| doc.get_first(field).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let id = text_of(fields.id);
        if id.is_empty() {
            return Err(corrupt(index_dir, "a stored passage has no id"));
        }
        let text = embed_text(&text_of(fields.title), &text_of(fields.text));
        let hash = content_hash(model_id, &text);
        let text = needs_text(&id, &hash).then_some(text);
        out.push((id, hash, text));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}
