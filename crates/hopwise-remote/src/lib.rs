//! Retrieval on remote engines, for corpora that outgrow one machine: Typesense (text, vector,
//! hybrid), Milvus (vector) and OpenSearch/Elasticsearch (BM25, k-NN), each over its REST API with
//! bounded retries and clear errors.
//!
//! - [`RemoteStore`]: what an engine offers (collection with a fixed vector dimension, upsert and
//!   delete by passage id, count, vector and text search); one implementation per engine.
//! - [`import_passages`] / [`import_corpus`]: streaming, batched, resumable import.
//! - [`RemoteRetriever`]: `hopwise_core::Retriever` over any store, in text, vector or hybrid mode.
//! - [`servers`]: start/stop helpers for the real servers in tests.

pub mod error;
mod http;
pub mod import;
pub mod milvus;
pub mod opensearch;
pub mod retriever;
pub mod servers;
pub mod store;
pub mod typesense;

pub use error::{RemoteError, Result};
pub use http::HttpOptions;
pub use import::{import_corpus, import_passages, ImportOptions, ImportProgress, ImportReport};
pub use milvus::{MilvusConfig, MilvusStore};
pub use opensearch::{Flavor, OpenSearchConfig, OpenSearchStore};
pub use retriever::{RemoteRetriever, SearchMode};
pub use store::{content_hash, embed_text, RemoteDoc, RemoteStore};
pub use typesense::{TypesenseConfig, TypesenseStore};
