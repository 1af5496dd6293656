//! Retrieval for hopwise: corpus readers, chunking, and a BM25 index on tantivy.
//!
//! - [`corpus`]: streams documents out of JSONL (`{"id","title","text"}`, extra fields ignored) and
//!   plain-text / Markdown files and folders, reporting bad lines as `file:line: reason`.
//! - [`chunk`]: splits long documents into overlapping token windows; passages keep their document
//!   id and byte offsets.
//! - [`build_index`]: reads, chunks and indexes; incremental (a document indexed again replaces its
//!   old passages).
//! - [`Bm25Retriever`]: implements [`hopwise_core::Retriever`] over a built index.
//!
//! - [`dense`]: an embedding index next to the BM25 one (exact search for small corpora, HNSW above),
//!   built incrementally from the BM25 passages, and [`DenseRetriever`].
//! - [`fusion`]: reciprocal-rank and weighted-score fusion, and [`HybridRetriever`] (BM25 + dense).
//! - [`rewrite`]: query-side wrappers (HyDE, multi-query, sub-questions) and per-question
//!   de-duplication, each itself a `Retriever`.
//!
//! Each retrieval backend is its own `Retriever`; the index directory layout ([`layout`]) leaves
//! room for more backends next to the BM25 one.

pub mod bm25;
pub mod build;
pub mod chunk;
pub mod corpus;
pub mod dense;
pub mod error;
pub mod fusion;
pub mod layout;
pub mod progress;
mod read_only;
pub mod rewrite;
mod score;

pub use bm25::{Bm25Retriever, DEFAULT_TITLE_BOOST};
pub use build::{build_index, IndexOptions, IndexPhase, IndexProgress, IndexReport};
pub use chunk::{chunk_document, ChunkOptions};
pub use corpus::{CorpusItem, CorpusReader, Document, Issue, IssueKind};
pub use dense::{build_dense, dense_model_id, DenseOptions, DenseProgress, DenseReport, DenseRetriever};
pub use error::{IndexError, Result};
pub use fusion::{Fusion, HybridRetriever};
pub use layout::IndexMeta;
pub use progress::IndexProgressBar;
pub use rewrite::{DedupRetriever, RewriteMethod, RewriteRetriever};
