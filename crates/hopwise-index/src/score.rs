//! Term-at-a-time BM25 over tantivy's postings: the scoring behind [`Bm25Retriever::search`].
//!
//! tantivy answers a pure-`Should` query with one term scorer per (term, field) clause merged by a
//! buffered union. On passage corpora (short documents, ten-odd query terms, top 5) most of that
//! time is fixed cost per clause: building and moving large scorer structs, explanation strings and
//! a union horizon per query. Here each posting list is read block by block straight into a
//! per-segment score array, as a score-accumulating engine such as bm25s does, with tantivy's own
//! `Bm25Weight` (same k1, b, idf and field-norm table), so scores equal tantivy's up to float
//! summation order. `Bm25Retriever::search_reference` keeps tantivy's query path; the tests and
//! `bm25_bench` compare the two.
//!
//! [`Bm25Retriever::search`]: crate::Bm25Retriever::search

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Mutex;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, TermInfo};
use tantivy::query::Bm25Weight;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocId, DocSet, Searcher, SegmentReader, TantivyError, Term, TERMINATED};

/// Reusable per-segment score arrays: one query allocates nothing once the pool is warm, and only
/// the documents a query touched are reset afterwards.
#[derive(Debug, Default)]
pub(crate) struct ScratchPool(Mutex<Vec<Vec<f32>>>);

impl ScratchPool {
    fn take(&self, len: usize) -> Vec<f32> {
        let mut buffer = self.0.lock().ok().and_then(|mut pool| pool.pop()).unwrap_or_default();
        if buffer.len() < len {
            buffer.resize(len, 0.0);
        }
        buffer
    }

    fn give_back(&self, buffer: Vec<f32>) {
        if let Ok(mut pool) = self.0.lock() {
            pool.push(buffer);
        }
    }
}

/// One field to search and the factor its matches are multiplied by.
pub(crate) struct WeightedField {
    pub field: Field,
    pub boost: f32,
}

/// The top `k` documents for the sum over `fields` and `terms` of each term's BM25 score in that
/// field (times the field's boost), best first, ties by address. Deleted documents are skipped.
pub(crate) fn top_k(
    searcher: &Searcher,
    fields: &[WeightedField],
    terms: &[String],
    k: usize,
    scratch: &ScratchPool,
) -> tantivy::Result<Vec<(f32, DocAddress)>> {
    let clauses = clause_weights(searcher, fields, terms)?;
    if clauses.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    let mut best: BinaryHeap<Hit> = BinaryHeap::with_capacity(k + 1);
    for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
        let mut scores = scratch.take(segment.max_doc() as usize);
        let mut touched: Vec<DocId> = Vec::new();
        let result =
            SegmentSearch { segment, segment_ord, clauses: &clauses, k, scores: &mut scores, touched: &mut touched }
                .run();
        if let Ok(docs) = &result {
            for &doc in docs {
                let hit = Hit { score: scores[doc as usize], address: DocAddress::new(segment_ord as u32, doc) };
                if best.len() < k {
                    best.push(hit);
                } else if best.peek().is_some_and(|worst| hit < *worst) {
                    best.pop();
                    best.push(hit);
                }
            }
        }
        for &doc in &touched {
            scores[doc as usize] = 0.0;
        }
        scratch.give_back(scores);
        result?;
    }
    Ok(best.into_sorted_vec().into_iter().map(|hit| (hit.score, hit.address)).collect())
}

/// A (field, term) clause with its searcher-wide BM25 weight.
struct Clause {
    term: Term,
    /// Where the term's postings are in each segment (by segment ordinal), if it has them.
    infos: Vec<Option<TermInfo>>,
    weight: Bm25Weight,
    boost: f32,
    /// No document can get more than this from the clause.
    bound: f32,
}

impl Clause {
    fn score(&self, fieldnorms: &FieldNormReader, doc: DocId, freq: u32) -> f32 {
        self.boost * self.weight.score(fieldnorms.fieldnorm_id(doc), freq)
    }
}

/// Weights from statistics over all segments, as tantivy's `Searcher` computes them, so a multi-
/// segment index scores like a merged one. Terms absent from a field are left out; the rest come
/// sorted by their bound, highest first.
fn clause_weights(searcher: &Searcher, fields: &[WeightedField], terms: &[String]) -> tantivy::Result<Vec<Clause>> {
    let total_docs: u64 = searcher.segment_readers().iter().map(|s| u64::from(s.max_doc())).sum();
    if total_docs == 0 {
        return Ok(Vec::new());
    }
    let mut clauses = Vec::with_capacity(fields.len() * terms.len());
    for weighted in fields {
        let mut total_tokens = 0u64;
        for segment in searcher.segment_readers() {
            total_tokens += segment.inverted_index(weighted.field)?.total_num_tokens();
        }
        let average_fieldnorm = total_tokens as f32 / total_docs as f32;
        for text in terms {
            let term = Term::from_field_text(weighted.field, text);
            let mut infos = Vec::with_capacity(searcher.segment_readers().len());
            for segment in searcher.segment_readers() {
                infos.push(segment.inverted_index(weighted.field)?.get_term_info(&term)?);
            }
            let doc_freq: u64 = infos.iter().flatten().map(|info| u64::from(info.doc_freq)).sum();
            if doc_freq > 0 {
                let weight = Bm25Weight::for_one_term_without_explain(doc_freq, total_docs, average_fieldnorm);
                let bound = weighted.boost * weight.max_score();
                clauses.push(Clause { term, infos, weight, boost: weighted.boost, bound });
            }
        }
    }
    clauses.sort_by(|a, b| b.bound.total_cmp(&a.bound));
    Ok(clauses)
}

/// How many documents the k-th best score is taken over while clauses still run exhaustively.
const THRESHOLD_SAMPLE: usize = 256;

/// One segment's share of a query, scored with the MaxScore idea (Turtle & Flood, 1995): clauses
/// run in order of their bound, each over its whole posting list, until the bounds of the clauses
/// left add up to less than the current k-th best score. From then on no document not yet seen
/// can reach the top k, so the remaining clauses only look up the candidates that still can, by
/// seeking in their posting lists. The common, low-weight terms, whose lists are the longest, are
/// the ones this skips; the result is exact.
struct SegmentSearch<'a> {
    segment: &'a SegmentReader,
    segment_ord: usize,
    clauses: &'a [Clause],
    k: usize,
    scores: &'a mut [f32],
    /// Every document given a score, so the caller can reset exactly those.
    touched: &'a mut Vec<DocId>,
}

impl SegmentSearch<'_> {
    /// The live documents that may be in the top k (a superset of it).
    fn run(mut self) -> tantivy::Result<Vec<DocId>> {
        // rest[i]: the most the clauses from i on can add to a document's score.
        let mut rest = vec![0.0f32; self.clauses.len() + 1];
        for i in (0..self.clauses.len()).rev() {
            rest[i] = rest[i + 1] + self.clauses[i].bound;
        }
        let alive = self.segment.alive_bitset();
        let is_alive = |doc: DocId| alive.is_none_or(|bits| bits.is_alive(doc));
        let mut live_scores = Vec::new();
        let mut threshold = f32::NEG_INFINITY;
        let mut exhaustive = 0;
        while exhaustive < self.clauses.len() {
            self.accumulate(&self.clauses[exhaustive])?;
            exhaustive += 1;
            if exhaustive < self.clauses.len() && self.touched.len() >= self.k {
                // Any subset of the documents gives a lower bound on the k-th best score; the first
                // ones touched (they have the rarest terms) are a cheap one that is usually tight.
                let sample = &self.touched[..self.touched.len().min(THRESHOLD_SAMPLE)];
                threshold =
                    kth_best(sample.iter().copied().filter(|&d| is_alive(d)), self.scores, self.k, &mut live_scores);
                if rest[exhaustive] < threshold {
                    break;
                }
            }
        }
        let mut candidates: Vec<DocId> = self
            .touched
            .iter()
            .copied()
            .filter(|&doc| is_alive(doc) && self.scores[doc as usize] + rest[exhaustive] >= threshold)
            .collect();
        if exhaustive == self.clauses.len() {
            return Ok(candidates);
        }
        candidates.sort_unstable();
        for (i, clause) in self.clauses.iter().enumerate().skip(exhaustive) {
            self.look_up(clause, &candidates)?;
            threshold = kth_best(candidates.iter().copied(), self.scores, self.k, &mut live_scores);
            candidates.retain(|&doc| self.scores[doc as usize] + rest[i + 1] >= threshold);
        }
        Ok(candidates)
    }

    /// Adds `clause`'s score to every document with its term, block by block.
    fn accumulate(&mut self, clause: &Clause) -> tantivy::Result<()> {
        let Some(Some(info)) = clause.infos.get(self.segment_ord) else {
            return Ok(());
        };
        let inverted = self.segment.inverted_index(clause.term.field())?;
        let fieldnorms = self.segment.get_fieldnorms_reader(clause.term.field())?;
        let mut postings = inverted
            .read_block_postings_from_terminfo(info, IndexRecordOption::WithFreqs)
            .map_err(TantivyError::from)?;
        loop {
            let docs = postings.docs();
            if docs.is_empty() {
                return Ok(());
            }
            for (&doc, &freq) in docs.iter().zip(postings.freqs()) {
                let slot = &mut self.scores[doc as usize];
                if *slot == 0.0 {
                    self.touched.push(doc);
                }
                *slot += clause.score(&fieldnorms, doc, freq);
            }
            postings.advance();
        }
    }

    /// Adds `clause`'s score to those of `candidates` (sorted, distinct) that have its term.
    fn look_up(&mut self, clause: &Clause, candidates: &[DocId]) -> tantivy::Result<()> {
        let Some(Some(info)) = clause.infos.get(self.segment_ord) else {
            return Ok(());
        };
        let inverted = self.segment.inverted_index(clause.term.field())?;
        let fieldnorms = self.segment.get_fieldnorms_reader(clause.term.field())?;
        let mut postings =
            inverted.read_postings_from_terminfo(info, IndexRecordOption::WithFreqs).map_err(TantivyError::from)?;
        let mut current = postings.doc();
        for &doc in candidates {
            if current < doc {
                current = postings.seek(doc);
            }
            if current == TERMINATED {
                break;
            }
            if current == doc {
                self.scores[doc as usize] += clause.score(&fieldnorms, doc, postings.term_freq());
            }
        }
        Ok(())
    }
}

/// The k-th highest score among `docs` (negative infinity if there are fewer), in one pass that
/// keeps the k best seen in `best` (ascending), so most documents cost one comparison.
fn kth_best(docs: impl Iterator<Item = DocId>, scores: &[f32], k: usize, best: &mut Vec<f32>) -> f32 {
    best.clear();
    if k == 0 {
        return f32::NEG_INFINITY;
    }
    for doc in docs {
        let score = scores[doc as usize];
        if best.len() == k {
            if score <= best[0] {
                continue;
            }
            best.remove(0);
        }
        let at = best.partition_point(|&b| b < score);
        best.insert(at, score);
    }
    if best.len() == k {
        best[0]
    } else {
        f32::NEG_INFINITY
    }
}

/// A scored document, ordered so that the *worst* hit is the greatest: the heap's top is the one
/// to evict, and `into_sorted_vec` lists the best first. Ties go to the lower address, as in
/// tantivy's `TopDocs`.
#[derive(Clone, Copy)]
struct Hit {
    score: f32,
    address: DocAddress,
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> Ordering {
        other.score.total_cmp(&self.score).then_with(|| self.address.cmp(&other.address))
    }
}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Hit {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Hit {}
