//! Searching a built index with BM25.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use hopwise_core::{Passage, Retriever};
use sha2::{Digest, Sha256};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocAddress, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::error::Result;
use crate::layout::{self, analyzer, corrupt, Fields, IndexMeta};
use crate::score::{self, ScratchPool, WeightedField};

/// Weight of a query term found in the title relative to one found in the text. The title is its
/// own (short, so strongly length-normalised) field, so a title match already scores well without
/// a boost; a boost lets a title word drown the rest of the query.
pub const DEFAULT_TITLE_BOOST: f32 = 1.0;

/// Distinct query terms beyond this many are ignored, so a pasted document cannot build a huge query.
const MAX_QUERY_TERMS: usize = 256;

/// BM25 (k1 = 1.2, b = 0.75, tantivy's) over the title and text of the passages in an index built by
/// [`build_index`](crate::build_index).
///
/// Queries are plain text, never query syntax: they go through the same analyzer as the documents
/// and every distinct term becomes an optional clause, so no user input can make parsing fail. A
/// query with no searchable terms (empty, only punctuation or stop words) finds nothing.
pub struct Bm25Retriever {
    dir: PathBuf,
    reader: IndexReader,
    fields: Fields,
    meta: IndexMeta,
    title_boost: f32,
    scratch: ScratchPool,
    /// Built once: a clone shares the stop-word set instead of rebuilding it per query.
    analyzer: TextAnalyzer,
}

impl Bm25Retriever {
    /// Opens the index in `dir`. A missing or unreadable index gives an error naming `dir` and the
    /// `hopwise index` command that builds one.
    pub fn open(dir: &Path) -> Result<Self> {
        let opened = layout::open(dir)?;
        let reader = opened
            .index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|err: tantivy::TantivyError| layout::open_failure(dir, &dir.join(layout::BM25_SUBDIR), err))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            reader,
            fields: opened.fields,
            meta: opened.meta,
            title_boost: DEFAULT_TITLE_BOOST,
            scratch: ScratchPool::default(),
            analyzer: analyzer(),
        })
    }

    /// Sets how much more a title match counts than a text match (1.0 = the same).
    pub fn with_title_boost(mut self, boost: f32) -> Self {
        self.title_boost = if boost.is_finite() && boost > 0.0 { boost } else { 1.0 };
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The metadata read when the index was opened.
    pub fn meta(&self) -> &IndexMeta {
        &self.meta
    }

    /// Passages in the index as of the last [`open`](Self::open) or [`reload`](Self::reload).
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Picks up a build that finished after this retriever was opened.
    pub fn reload(&self) -> Result<()> {
        Ok(self.reader.reload()?)
    }

    /// The top `k` passages for `query`, best first (ties broken by passage id).
    ///
    /// Scored term at a time over tantivy's postings (`score.rs`), which on passage corpora is
    /// faster than tantivy's own union of term scorers and gives the same scores.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<Passage>> {
        let terms = query_terms(&mut self.analyzer.clone(), query);
        if k == 0 || terms.is_empty() {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        // A caller's k (an API field, say) can be anything; no more than every passage can come back.
        let k = k.min(usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX));
        let fields = [
            WeightedField { field: self.fields.text, boost: 1.0 },
            WeightedField { field: self.fields.title, boost: self.title_boost },
        ];
        let hits = score::top_k(&searcher, &fields, &terms, k, &self.scratch)?;
        self.passages(&searcher, hits)
    }

    /// The same ranking as [`search`](Self::search) through tantivy's own query path: one optional
    /// term query per (term, field), run as a union. Kept as the reference the faster path is tested
    /// and benchmarked against (`bm25_bench`).
    pub fn search_reference(&self, query: &str, k: usize) -> Result<Vec<Passage>> {
        let terms = query_terms(&mut self.analyzer.clone(), query);
        if k == 0 || terms.is_empty() {
            return Ok(Vec::new());
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(terms.len() * 2);
        for term in &terms {
            let in_text = TermQuery::new(Term::from_field_text(self.fields.text, term), IndexRecordOption::WithFreqs);
            let in_title = TermQuery::new(Term::from_field_text(self.fields.title, term), IndexRecordOption::WithFreqs);
            clauses.push((Occur::Should, Box::new(in_text)));
            // A boost wraps the term query, so only add the wrapper when it changes the score.
            if self.title_boost == 1.0 {
                clauses.push((Occur::Should, Box::new(in_title)));
            } else {
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(in_title), self.title_boost))));
            }
        }
        let searcher = self.reader.searcher();
        let k = k.min(usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX)).max(1);
        let hits = searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(k))?;
        self.passages(&searcher, hits)
    }

    fn passages(&self, searcher: &Searcher, hits: Vec<(f32, DocAddress)>) -> Result<Vec<Passage>> {
        let mut passages =
            hits.into_iter().map(|(score, address)| self.load(searcher, address, score)).collect::<Result<Vec<_>>>()?;
        passages.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        Ok(passages)
    }

    /// What identifies this index's contents wherever it lies: the passage count and an
    /// order-independent digest of every live passage's id, title and text, plus the title boost.
    /// Evaluation runs record it instead of the index's path, so a committed run resumes on another
    /// machine that built the same corpus. Reads every stored passage once.
    pub fn content_identity(&self) -> Result<String> {
        let searcher = self.reader.searcher();
        let mut digest: u64 = 0;
        let mut count: u64 = 0;
        for (ordinal, segment) in searcher.segment_readers().iter().enumerate() {
            for doc_id in segment.doc_ids_alive() {
                let passage = self.load(&searcher, DocAddress::new(ordinal as u32, doc_id), 0.0)?;
                let mut hasher = Sha256::new();
                for part in [&passage.id, &passage.title, &passage.text] {
                    hasher.update(part.as_bytes());
                    hasher.update([0]);
                }
                let bytes = hasher.finalize();
                let mut word = [0u8; 8];
                word.copy_from_slice(&bytes[..8]);
                digest = digest.wrapping_add(u64::from_le_bytes(word));
                count += 1;
            }
        }
        Ok(format!("bm25 passages={count} digest={digest:016x} title_boost={}", self.title_boost))
    }

    /// The passage with this id, if the index has it (score 0).
    pub fn passage(&self, id: &str) -> Result<Option<Passage>> {
        let searcher = self.reader.searcher();
        let query = TermQuery::new(Term::from_field_text(self.fields.id, id), IndexRecordOption::Basic);
        let hits = searcher.search(&query, &TopDocs::with_limit(1))?;
        hits.first().map(|&(_, address)| self.load(&searcher, address, 0.0)).transpose()
    }

    fn load(&self, searcher: &Searcher, address: DocAddress, score: f32) -> Result<Passage> {
        let doc: TantivyDocument = searcher.doc(address)?;
        let text_of = |field| doc.get_first(field).and_then(|v| v.as_str()).map(str::to_string);
        let number_of = |field| doc.get_first(field).and_then(|v| v.as_u64()).and_then(|n| usize::try_from(n).ok());
        let id = text_of(self.fields.id).ok_or_else(|| corrupt(&self.dir, "a stored passage has no id"))?;
        let offsets = number_of(self.fields.start).zip(number_of(self.fields.end));
        Ok(Passage {
            id,
            title: text_of(self.fields.title).unwrap_or_default(),
            text: text_of(self.fields.text).unwrap_or_default(),
            score,
            doc_id: text_of(self.fields.doc_id),
            offsets,
        })
    }
}

/// The distinct analyzed terms of a query, in order of first appearance.
fn query_terms(analyzer: &mut TextAnalyzer, query: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(query);
    let mut terms: Vec<String> = Vec::new();
    while stream.advance() && terms.len() < MAX_QUERY_TERMS {
        let text = &stream.token().text;
        if !terms.iter().any(|t| t == text) {
            terms.push(text.clone());
        }
    }
    terms
}

#[async_trait]
impl Retriever for Bm25Retriever {
    fn name(&self) -> &str {
        "bm25"
    }

    /// Searches on the calling task: a BM25 query over a local, memory-mapped index is short
    /// enough that handing it to a blocking thread would cost more than it saves.
    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        Ok(self.search(query, k)?)
    }
}

impl std::fmt::Debug for Bm25Retriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Retriever").field("dir", &self.dir).field("passages", &self.meta.passages).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_syntax_is_just_text() {
        assert_eq!(
            query_terms(&mut analyzer(), "title:\"Foo\" AND (bar OR -baz)^2 *"),
            ["titl", "foo", "bar", "baz", "2"]
        );
        assert!(query_terms(&mut analyzer(), "  ?!  the of ").is_empty());
    }

    #[test]
    fn repeated_terms_are_counted_once() {
        assert_eq!(query_terms(&mut analyzer(), "Rush rush RUSH"), ["rush"]);
    }
}
