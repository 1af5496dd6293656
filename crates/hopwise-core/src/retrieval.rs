//! Retrieval contracts: lexical, dense, hybrid and remote engines all answer `retrieve(query, k)`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::Result;

/// A retrieved passage. `id` is stable across runs (it is what citations and evaluation refer to);
/// `doc_id` and `offsets` point back into the source document when the passage is a chunk of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Passage {
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub text: String,
    #[serde(default)]
    pub score: f32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    /// Byte offsets of this chunk in its source document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offsets: Option<(usize, usize)>,
}

#[async_trait]
pub trait Retriever: Send + Sync {
    fn name(&self) -> &str;

    /// The top `k` passages for `query`, best first.
    async fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Passage>>;
}

#[async_trait]
impl<T: Retriever + ?Sized> Retriever for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Passage>> {
        (**self).retrieve(query, k).await
    }
}

/// Sentence embeddings (dense retrieval, HGOT's STOP test and demonstration selection).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Identifies the model so an index built with one embedder refuses queries from another.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    /// One L2-normalised vector per input text.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
}

/// How a query is rewritten by the model before retrieval (`query_rewrite` in configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RewriteMethod {
    /// The query plus a passage the model writes as if it answered it (Gao et al., HyDE).
    Hyde,
    /// The query plus the model's rephrasings of it.
    MultiQuery,
    /// The simpler questions the model breaks the query into.
    SubQuestion,
}

impl RewriteMethod {
    pub const ALL: [RewriteMethod; 3] = [Self::Hyde, Self::MultiQuery, Self::SubQuestion];

    pub fn name(self) -> &'static str {
        match self {
            Self::Hyde => "hyde",
            Self::MultiQuery => "multi-query",
            Self::SubQuestion => "sub-question",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The prompt template that asks for the rewrite.
    pub fn template(self) -> &'static str {
        match self {
            Self::Hyde => "rq_hyde",
            Self::MultiQuery => "rq_multi_query",
            Self::SubQuestion => "rq_sub_question",
        }
    }
}
