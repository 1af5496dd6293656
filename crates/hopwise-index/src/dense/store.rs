//! Reading and writing the files of `DIR/dense/`.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::DenseOptions;
use crate::error::{IndexError, Result};
use crate::layout::corrupt;

pub const DENSE_SUBDIR: &str = "dense";
pub(crate) const META_FILE: &str = "dense.json";
const ENTRIES_FILE: &str = "entries.jsonl";
const VECTORS_FILE: &str = "vectors.f32";
/// Bumped when the files change in a way older readers cannot handle.
pub(crate) const DENSE_VERSION: u32 = 1;

/// Contents of `dense.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseMeta {
    pub version: u32,
    /// The embedder's [`model_id`](hopwise_core::Embedder::model_id); queries must use the same one.
    pub model_id: String,
    pub dim: usize,
    pub rows: usize,
    pub options: DenseOptions,
    /// Basename of the HNSW dump, when the index has one (above the exact-search threshold).
    pub hnsw: Option<String>,
}

/// One row: a passage id and the hash of the text that was embedded for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub id: String,
    pub hash: String,
}

/// The rows of a dense index in memory: entries sorted by id, vectors row-major.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rows {
    pub entries: Vec<Entry>,
    pub vectors: Vec<f32>,
}

impl Rows {
    pub fn vector(&self, row: usize, dim: usize) -> &[f32] {
        &self.vectors[row * dim..(row + 1) * dim]
    }
}

pub(crate) fn dense_dir(index_dir: &Path) -> PathBuf {
    index_dir.join(DENSE_SUBDIR)
}

pub(crate) fn read_meta(index_dir: &Path) -> Result<Option<DenseMeta>> {
    let path = dense_dir(index_dir).join(META_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(IndexError::io(&path, err)),
    };
    let meta: DenseMeta =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(index_dir, format!("{}: {e}", path.display())))?;
    if meta.version != DENSE_VERSION {
        return Err(corrupt(
            index_dir,
            format!("dense index version {} (this hopwise reads {DENSE_VERSION}); rebuild with --dense", meta.version),
        ));
    }
    Ok(Some(meta))
}

/// Reads the rows of the dense index, checking that the files agree with `meta`.
pub(crate) fn read_rows(index_dir: &Path, meta: &DenseMeta) -> Result<Rows> {
    let dir = dense_dir(index_dir);
    let entries_path = dir.join(ENTRIES_FILE);
    let file = std::fs::File::open(&entries_path).map_err(|e| IndexError::io(&entries_path, e))?;
    let mut entries = Vec::with_capacity(meta.rows);
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| IndexError::io(&entries_path, e))?;
        let entry: Entry = serde_json::from_str(&line)
            .map_err(|e| corrupt(index_dir, format!("{}:{}: {e}", entries_path.display(), n + 1)))?;
        entries.push(entry);
    }
    let vectors_path = dir.join(VECTORS_FILE);
    let mut bytes = Vec::new();
    std::fs::File::open(&vectors_path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| IndexError::io(&vectors_path, e))?;
    if entries.len() != meta.rows || bytes.len() != meta.rows * meta.dim * 4 {
        return Err(corrupt(
            index_dir,
            format!(
                "dense index files disagree: {} entries and {} vector bytes for {} rows of dimension {}",
                entries.len(),
                bytes.len(),
                meta.rows,
                meta.dim
            ),
        ));
    }
    let vectors = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok(Rows { entries, vectors })
}

/// Writes `meta` and `rows` (and, through `write_extra`, the graph) into a fresh folder, then swaps
/// it in for `DIR/dense/`, so a failed build leaves the previous dense index as it was.
pub(crate) fn write_all(
    index_dir: &Path,
    meta: &DenseMeta,
    rows: &Rows,
    write_extra: impl FnOnce(&Path) -> Result<Option<String>>,
) -> Result<DenseMeta> {
    let final_dir = dense_dir(index_dir);
    let new_dir = index_dir.join(format!("{DENSE_SUBDIR}.new"));
    let old_dir = index_dir.join(format!("{DENSE_SUBDIR}.old"));
    for stale in [&new_dir, &old_dir] {
        if stale.exists() {
            std::fs::remove_dir_all(stale).map_err(|e| IndexError::io(stale, e))?;
        }
    }
    std::fs::create_dir_all(&new_dir).map_err(|e| IndexError::io(&new_dir, e))?;

    let entries_path = new_dir.join(ENTRIES_FILE);
    let mut out = BufWriter::new(std::fs::File::create(&entries_path).map_err(|e| IndexError::io(&entries_path, e))?);
    for entry in &rows.entries {
        let line = serde_json::to_string(entry).map_err(|e| IndexError::InvalidOptions(e.to_string()))?;
        writeln!(out, "{line}").map_err(|e| IndexError::io(&entries_path, e))?;
    }
    out.into_inner().map_err(|e| IndexError::io(&entries_path, e.into_error()))?.sync_all().ok();

    let vectors_path = new_dir.join(VECTORS_FILE);
    let mut out = BufWriter::new(std::fs::File::create(&vectors_path).map_err(|e| IndexError::io(&vectors_path, e))?);
    for x in &rows.vectors {
        out.write_all(&x.to_le_bytes()).map_err(|e| IndexError::io(&vectors_path, e))?;
    }
    out.into_inner().map_err(|e| IndexError::io(&vectors_path, e.into_error()))?.sync_all().ok();

    let mut meta = meta.clone();
    meta.hnsw = write_extra(&new_dir)?;
    let meta_path = new_dir.join(META_FILE);
    let json = serde_json::to_vec_pretty(&meta).map_err(|e| IndexError::InvalidOptions(e.to_string()))?;
    std::fs::write(&meta_path, json).map_err(|e| IndexError::io(&meta_path, e))?;

    if final_dir.exists() {
        std::fs::rename(&final_dir, &old_dir).map_err(|e| IndexError::io(&final_dir, e))?;
    }
    std::fs::rename(&new_dir, &final_dir).map_err(|e| IndexError::io(&new_dir, e))?;
    if old_dir.exists() {
        // Best effort: a leftover `.old` folder is removed by the next build.
        let _ = std::fs::remove_dir_all(&old_dir);
    }
    Ok(meta)
}
