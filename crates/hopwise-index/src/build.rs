//! Building and updating the BM25 index from corpus files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use hopwise_core::Passage;
use serde::{Deserialize, Serialize};
use tantivy::collector::Count;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;
use tantivy::{doc, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::chunk::{chunk_document, ChunkOptions};
use crate::corpus::{CorpusItem, CorpusReader, Issue, IssueKind};
use crate::error::{IndexError, Result};
use crate::layout::{self, Fields};

/// tantivy refuses less than this per writer thread.
const MIN_HEAP_PER_THREAD: usize = 15_000_000;

/// How to build an index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexOptions {
    pub chunking: ChunkOptions,
    /// Memory the index writer may buffer before flushing a segment, over all its threads.
    pub writer_heap_bytes: usize,
    /// Indexing threads. One (the default) makes the segment layout, and so the order of equally
    /// scored results, the same on every build of the same input.
    pub writer_threads: usize,
    /// At most this many skipped lines and warnings are listed in the report (all are counted).
    pub max_listed_issues: usize,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            chunking: ChunkOptions::default(),
            writer_heap_bytes: 128_000_000,
            writer_threads: 1,
            max_listed_issues: 50,
        }
    }
}

impl IndexOptions {
    pub fn validate(&self) -> Result<()> {
        self.chunking.validate()?;
        if self.writer_threads == 0 {
            return Err(IndexError::InvalidOptions("at least one writer thread is needed".into()));
        }
        if self.writer_heap_bytes / self.writer_threads < MIN_HEAP_PER_THREAD {
            return Err(IndexError::InvalidOptions(format!(
                "the writer needs at least {MIN_HEAP_PER_THREAD} bytes of heap per thread"
            )));
        }
        Ok(())
    }
}

/// Where a build is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexPhase {
    Reading,
    Committing,
    Done,
}

/// A snapshot passed to the progress callback: every few hundred documents, on each new file, and
/// on each phase change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexProgress {
    pub phase: IndexPhase,
    pub bytes_read: u64,
    pub bytes_total: u64,
    pub documents: u64,
    pub passages: u64,
    pub current_file: Option<PathBuf>,
}

/// What a build did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexReport {
    pub index_dir: PathBuf,
    /// Documents read and indexed (not counting skipped ones).
    pub documents: u64,
    /// Passages added by this build.
    pub passages_indexed: u64,
    /// Passages removed because their document was indexed again (by this or an earlier build).
    pub passages_replaced: u64,
    /// Passages in the index after this build.
    pub passages_total: u64,
    /// Documents skipped because they had no text.
    pub empty_documents: u64,
    /// Lines and files skipped, with `file:line: reason` (the first `max_listed_issues`).
    pub skipped: Vec<Issue>,
    pub skipped_total: u64,
    /// Content kept with a caveat (lossily decoded text, changed chunking), listed like `skipped`.
    pub warnings: Vec<Issue>,
    pub warnings_total: u64,
    pub seconds: f64,
}

/// How often (in documents) progress is reported while reading.
const PROGRESS_EVERY: u64 = 256;

/// Reads `inputs` (JSONL files, text/Markdown files, folders of them), chunks the documents and
/// adds their passages to the BM25 index in `dir`, creating it if needed. A document whose id is
/// already in the index replaces all passages of the old version. Bad lines and files are skipped
/// and listed in the report; the build fails only if an input does not exist, `dir` is not usable
/// as an index directory, or the index cannot be written. Nothing is visible to searchers until the
/// final commit, so an interrupted build leaves the previous index intact.
pub fn build_index(
    inputs: &[PathBuf],
    dir: &Path,
    opts: &IndexOptions,
    progress: &dyn Fn(IndexProgress),
) -> Result<IndexReport> {
    let started = Instant::now();
    opts.validate()?;
    if inputs.is_empty() {
        return Err(IndexError::InvalidOptions("no input files or folders given".into()));
    }
    // Open the inputs first, so a mistyped path does not leave an empty index behind.
    let mut corpus = CorpusReader::open(inputs)?;
    let opened = layout::open_or_create(dir, opts.chunking)?;
    let fields = opened.fields;
    let mut report = IndexReport {
        index_dir: dir.to_path_buf(),
        documents: 0,
        passages_indexed: 0,
        passages_replaced: 0,
        passages_total: 0,
        empty_documents: 0,
        skipped: Vec::new(),
        skipped_total: 0,
        warnings: Vec::new(),
        warnings_total: 0,
        seconds: 0.0,
    };

    let bm25_dir = dir.join(layout::BM25_SUBDIR);
    let reader = opened
        .index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(|err| layout::open_failure(dir, &bm25_dir, err))?;
    let before: Searcher = reader.searcher();
    let had_passages = before.num_docs() > 0;
    if had_passages && opened.meta.chunking != opts.chunking {
        record(
            &mut report,
            opts,
            Issue {
                location: dir.display().to_string(),
                kind: IssueKind::Notice,
                message: format!(
                    "the index holds passages chunked with window {} / overlap {}; new ones use window {} / overlap {}",
                    opened.meta.chunking.window_tokens,
                    opened.meta.chunking.overlap_tokens,
                    opts.chunking.window_tokens,
                    opts.chunking.overlap_tokens
                ),
            },
        );
    }

    let mut writer: IndexWriter<TantivyDocument> = opened
        .index
        .writer_with_num_threads(opts.writer_threads, opts.writer_heap_bytes)
        .map_err(|err| layout::open_failure(dir, &bm25_dir, err))?;
    // Passages added per document id during this build, to count in-build replacements (ids only:
    // a few dozen bytes per document, not the text).
    let mut added: HashMap<String, u64> = HashMap::new();
    let snapshot = |corpus: &CorpusReader, report: &IndexReport, phase| IndexProgress {
        phase,
        bytes_read: corpus.bytes_read(),
        bytes_total: corpus.bytes_total(),
        documents: report.documents,
        passages: report.passages_indexed,
        current_file: corpus.current_file().map(Path::to_path_buf),
    };
    progress(snapshot(&corpus, &report, IndexPhase::Reading));
    let mut last_file: Option<PathBuf> = None;

    while let Some(item) = corpus.next() {
        let doc = match item {
            CorpusItem::Document(doc) => doc,
            CorpusItem::Issue(issue) => {
                record(&mut report, opts, issue);
                continue;
            }
        };
        let doc_term = Term::from_field_text(fields.doc_id, &doc.id);
        let replaced = match added.get(&doc.id) {
            Some(&count) => count,
            None if had_passages => count_term(&before, doc_term.clone())?,
            None => 0,
        };
        if replaced > 0 || added.contains_key(&doc.id) {
            writer.delete_term(doc_term);
        }
        report.passages_replaced += replaced;
        let passages = chunk_document(&doc, &opts.chunking);
        for passage in &passages {
            writer.add_document(passage_doc(&fields, passage, &doc.id))?;
        }
        added.insert(doc.id, passages.len() as u64);
        report.documents += 1;
        report.passages_indexed += passages.len() as u64;

        let file_changed = corpus.current_file() != last_file.as_deref();
        if file_changed || report.documents.is_multiple_of(PROGRESS_EVERY) {
            last_file = corpus.current_file().map(Path::to_path_buf);
            progress(snapshot(&corpus, &report, IndexPhase::Reading));
        }
    }

    progress(snapshot(&corpus, &report, IndexPhase::Committing));
    writer.commit()?;
    writer.wait_merging_threads()?;
    reader.reload()?;
    report.passages_total = reader.searcher().num_docs();

    let mut meta = opened.meta;
    meta.passages = report.passages_total;
    meta.chunking = opts.chunking;
    meta.updated_unix_s =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    meta.write(dir)?;

    report.seconds = started.elapsed().as_secs_f64();
    progress(snapshot(&corpus, &report, IndexPhase::Done));
    Ok(report)
}

/// Live (not deleted) passages whose `field` holds exactly `term`.
fn count_term(searcher: &Searcher, term: Term) -> Result<u64> {
    let query = TermQuery::new(term, IndexRecordOption::Basic);
    Ok(searcher.search(&query, &Count)? as u64)
}

fn passage_doc(fields: &Fields, passage: &Passage, doc_id: &str) -> TantivyDocument {
    let (start, end) = passage.offsets.unwrap_or((0, passage.text.len()));
    doc!(
        fields.id => passage.id.as_str(),
        fields.doc_id => doc_id,
        fields.title => passage.title.as_str(),
        fields.text => passage.text.as_str(),
        fields.start => start as u64,
        fields.end => end as u64,
    )
}

fn record(report: &mut IndexReport, opts: &IndexOptions, issue: Issue) {
    match issue.kind {
        IssueKind::EmptyDocument => report.empty_documents += 1,
        IssueKind::Malformed | IssueKind::Unreadable => {
            report.skipped_total += 1;
            if report.skipped.len() < opts.max_listed_issues {
                report.skipped.push(issue);
            }
        }
        IssueKind::InvalidUtf8 | IssueKind::Notice => {
            report.warnings_total += 1;
            if report.warnings.len() < opts.max_listed_issues {
                report.warnings.push(issue);
            }
        }
    }
}
