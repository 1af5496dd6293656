//! Streaming, batched import of passages into a remote store. Resumable: ids the store already holds
//! with the same content hash are skipped before embedding, and writes are upserts, so running an
//! import again after a kill neither duplicates nor loses passages.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use hopwise_core::{Embedder, Passage};
use hopwise_index::{chunk_document, ChunkOptions, CorpusItem, CorpusReader, Issue};
use serde::Serialize;

use crate::error::{RemoteError, Result};
use crate::store::{content_hash, embed_text, RemoteDoc, RemoteStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportOptions {
    /// Passages per embedding call and per write request.
    pub batch: usize,
    /// Skip passages the store already holds unchanged (a resumed import). Off: write everything.
    pub skip_unchanged: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self { batch: 64, skip_unchanged: true }
    }
}

/// Progress after each batch; `total` is known when the input is a slice, `bytes_*` for corpus files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportProgress {
    pub seen: u64,
    pub written: u64,
    pub skipped: u64,
    pub total: Option<u64>,
    pub bytes_read: u64,
    pub bytes_total: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportReport {
    pub engine: String,
    pub collection: String,
    pub passages_seen: u64,
    pub passages_written: u64,
    /// Already in the store with the same content (skipped without embedding).
    pub passages_unchanged: u64,
    /// Ids seen more than once in one batch; the last copy was kept.
    pub duplicate_ids: u64,
    pub documents: u64,
    pub issues: Vec<String>,
    pub embed_seconds: f64,
    pub write_seconds: f64,
    pub seconds: f64,
    /// Passages in the collection after the import (as the engine counts them).
    pub collection_count: u64,
}

/// Imports `passages` (already chunked) into `store`, embedding them with `embedder`.
pub async fn import_passages(
    store: &dyn RemoteStore,
    embedder: &dyn Embedder,
    passages: impl IntoIterator<Item = Passage>,
    opts: ImportOptions,
    progress: &(dyn Fn(ImportProgress) + Send + Sync),
) -> Result<ImportReport> {
    let iter = passages.into_iter();
    let total = match iter.size_hint() {
        (lo, Some(hi)) if lo == hi => Some(lo as u64),
        _ => None,
    };
    let mut importer = Importer::start(store, embedder, opts).await?;
    importer.progress.total = total;
    for p in iter {
        importer.push(p, progress).await?;
    }
    importer.finish(progress).await
}

/// Reads, chunks and imports corpus files (JSONL or text, as `hopwise index` reads them), streaming:
/// at most one batch of passages is in memory.
pub async fn import_corpus(
    store: &dyn RemoteStore,
    embedder: &dyn Embedder,
    inputs: &[PathBuf],
    chunking: ChunkOptions,
    opts: ImportOptions,
    progress: &(dyn Fn(ImportProgress) + Send + Sync),
) -> Result<ImportReport> {
    chunking.validate()?;
    let mut reader = CorpusReader::open(inputs)?;
    let mut importer = Importer::start(store, embedder, opts).await?;
    importer.progress.bytes_total = reader.bytes_total();
    let mut issues: Vec<Issue> = Vec::new();
    while let Some(item) = reader.next() {
        match item {
            CorpusItem::Document(doc) => {
                importer.report.documents += 1;
                for p in chunk_document(&doc, &chunking) {
                    importer.progress.bytes_read = reader.bytes_read();
                    importer.push(p, progress).await?;
                }
            }
            CorpusItem::Issue(issue) => issues.push(issue),
        }
    }
    importer.progress.bytes_read = reader.bytes_read();
    let mut report = importer.finish(progress).await?;
    report.issues = issues.iter().map(|i| i.to_string()).collect();
    Ok(report)
}

struct Importer<'a> {
    store: &'a dyn RemoteStore,
    embedder: &'a dyn Embedder,
    opts: ImportOptions,
    batch: Vec<Passage>,
    progress: ImportProgress,
    report: ImportReport,
    started: Instant,
}

impl<'a> Importer<'a> {
    async fn start(store: &'a dyn RemoteStore, embedder: &'a dyn Embedder, opts: ImportOptions) -> Result<Self> {
        if opts.batch == 0 {
            return Err(RemoteError::Config("the import batch size must be at least 1".into()));
        }
        store.health().await?;
        // Before any embedding work: a wrong-dimension collection fails here.
        store.ensure_collection(embedder.dim()).await?;
        let report = ImportReport {
            engine: store.engine().into(),
            collection: store.collection().into(),
            ..ImportReport::default()
        };
        Ok(Self {
            store,
            embedder,
            opts,
            batch: Vec::with_capacity(opts.batch),
            progress: ImportProgress::default(),
            report,
            started: Instant::now(),
        })
    }

    async fn push(&mut self, p: Passage, progress: &(dyn Fn(ImportProgress) + Send + Sync)) -> Result<()> {
        self.batch.push(p);
        if self.batch.len() >= self.opts.batch {
            self.flush(progress).await?;
        }
        Ok(())
    }

    async fn flush(&mut self, progress: &(dyn Fn(ImportProgress) + Send + Sync)) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let seen = batch.len() as u64;
        // One copy per id (the last), so a write never carries two versions of a passage.
        let mut last: HashMap<String, usize> = HashMap::new();
        for (i, p) in batch.iter().enumerate() {
            last.insert(p.id.clone(), i);
        }
        self.report.duplicate_ids += seen - last.len() as u64;
        let model = self.embedder.model_id().to_string();
        let mut fresh: Vec<(Passage, String)> = batch
            .into_iter()
            .enumerate()
            .filter(|(i, p)| last.get(&p.id) == Some(i))
            .map(|(_, p)| {
                let hash = content_hash(&model, &p.title, &p.text);
                (p, hash)
            })
            .collect();
        let before = fresh.len();
        if self.opts.skip_unchanged {
            let ids: Vec<String> = fresh.iter().map(|(p, _)| p.id.clone()).collect();
            let held = self.store.existing(&ids).await?;
            fresh.retain(|(p, hash)| held.get(&p.id) != Some(hash));
        }
        let unchanged = (before - fresh.len()) as u64;
        if !fresh.is_empty() {
            let texts: Vec<String> = fresh.iter().map(|(p, _)| embed_text(&p.title, &p.text)).collect();
            let t = Instant::now();
            let vectors = self.embedder.embed(&texts).await.map_err(RemoteError::Embed)?;
            self.report.embed_seconds += t.elapsed().as_secs_f64();
            if vectors.len() != fresh.len() {
                return Err(RemoteError::Embed(hopwise_core::Error::InvalidInput(format!(
                    "the embedder returned {} vectors for {} texts",
                    vectors.len(),
                    fresh.len()
                ))));
            }
            let docs: Vec<RemoteDoc> = fresh
                .into_iter()
                .zip(vectors)
                .map(|((p, hash), embedding)| RemoteDoc {
                    id: p.id,
                    title: p.title,
                    text: p.text,
                    doc_id: p.doc_id,
                    hash,
                    embedding,
                })
                .collect();
            let t = Instant::now();
            self.store.upsert(&docs).await?;
            self.report.write_seconds += t.elapsed().as_secs_f64();
            self.report.passages_written += docs.len() as u64;
            self.progress.written += docs.len() as u64;
        }
        self.report.passages_seen += seen;
        self.report.passages_unchanged += unchanged;
        self.progress.seen += seen;
        self.progress.skipped += unchanged;
        progress(self.progress);
        Ok(())
    }

    async fn finish(mut self, progress: &(dyn Fn(ImportProgress) + Send + Sync)) -> Result<ImportReport> {
        self.flush(progress).await?;
        self.report.collection_count = self.store.count().await?;
        self.report.seconds = self.started.elapsed().as_secs_f64();
        Ok(self.report)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;

    /// An in-memory store, to check the importer's bookkeeping without a server.
    #[derive(Default)]
    struct Memory {
        docs: Mutex<HashMap<String, RemoteDoc>>,
        writes: Mutex<usize>,
        dim: Mutex<Option<usize>>,
    }

    #[async_trait]
    impl RemoteStore for Memory {
        fn engine(&self) -> &'static str {
            "memory"
        }
        fn collection(&self) -> &str {
            "c"
        }
        async fn health(&self) -> Result<()> {
            Ok(())
        }
        async fn collection_dim(&self) -> Result<Option<usize>> {
            Ok(*self.dim.lock().unwrap_or_else(|e| e.into_inner()))
        }
        async fn ensure_collection(&self, dim: usize) -> Result<()> {
            let mut d = self.dim.lock().unwrap_or_else(|e| e.into_inner());
            match *d {
                Some(found) if found != dim => Err(RemoteError::DimensionMismatch {
                    engine: "memory",
                    collection: "c".into(),
                    expected: dim,
                    found,
                }),
                _ => {
                    *d = Some(dim);
                    Ok(())
                }
            }
        }
        async fn drop_collection(&self) -> Result<()> {
            Ok(())
        }
        async fn existing(&self, ids: &[String]) -> Result<HashMap<String, String>> {
            let docs = self.docs.lock().unwrap_or_else(|e| e.into_inner());
            Ok(ids.iter().filter_map(|id| docs.get(id).map(|d| (id.clone(), d.hash.clone()))).collect())
        }
        async fn upsert(&self, docs: &[RemoteDoc]) -> Result<()> {
            *self.writes.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            let mut held = self.docs.lock().unwrap_or_else(|e| e.into_inner());
            for d in docs {
                held.insert(d.id.clone(), d.clone());
            }
            Ok(())
        }
        async fn delete(&self, ids: &[String]) -> Result<u64> {
            let mut held = self.docs.lock().unwrap_or_else(|e| e.into_inner());
            Ok(ids.iter().filter(|id| held.remove(*id).is_some()).count() as u64)
        }
        async fn count(&self) -> Result<u64> {
            Ok(self.docs.lock().unwrap_or_else(|e| e.into_inner()).len() as u64)
        }
        async fn search_vector(&self, _: &[f32], _: usize) -> Result<Vec<Passage>> {
            Ok(Vec::new())
        }
    }

    struct Len;

    #[async_trait]
    impl Embedder for Len {
        fn model_id(&self) -> &str {
            "len"
        }
        fn dim(&self) -> usize {
            2
        }
        async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    fn p(id: &str, text: &str) -> Passage {
        Passage { id: id.into(), title: "T".into(), text: text.into(), ..Passage::default() }
    }

    #[tokio::test]
    async fn batches_skip_unchanged_keep_the_last_duplicate_and_report_progress() {
        let store = Memory::default();
        let calls = Mutex::new(Vec::new());
        let opts = ImportOptions { batch: 2, ..ImportOptions::default() };
        let input = vec![p("a", "1"), p("b", "2"), p("c", "3"), p("c", "33"), p("d", "4")];
        let r = import_passages(&store, &Len, input.clone(), opts, &|pr| calls.lock().unwrap().push(pr.seen))
            .await
            .unwrap();
        assert_eq!((r.passages_seen, r.passages_written, r.duplicate_ids, r.collection_count), (5, 4, 1, 4));
        assert_eq!(*calls.lock().unwrap(), vec![2, 4, 5]);
        assert_eq!(store.docs.lock().unwrap()["c"].text, "33", "the last copy of an id wins");

        // A re-run writes only what changed.
        let writes_before = *store.writes.lock().unwrap();
        let mut changed = input.clone();
        changed[0].text = "11".into();
        let r = import_passages(&store, &Len, changed, opts, &|_| {}).await.unwrap();
        assert_eq!((r.passages_written, r.passages_unchanged, r.collection_count), (1, 3, 4), "only a changed");
        assert_eq!(*store.writes.lock().unwrap() - writes_before, 1, "unchanged batches are not written");

        // A wrong dimension stops before any embedding.
        let other = Memory::default();
        other.ensure_collection(8).await.unwrap();
        let err = import_passages(&other, &Len, vec![p("x", "y")], opts, &|_| {}).await.unwrap_err();
        assert!(matches!(err, RemoteError::DimensionMismatch { expected: 2, found: 8, .. }));
        assert!(matches!(
            import_passages(&store, &Len, Vec::new(), ImportOptions { batch: 0, ..opts }, &|_| {}).await,
            Err(RemoteError::Config(_))
        ));
    }
}
