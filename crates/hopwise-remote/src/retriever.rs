//! [`RemoteRetriever`]: a `Retriever` over any [`RemoteStore`], in text, vector or hybrid mode.

use std::sync::Arc;

use async_trait::async_trait;
use hopwise_core::{Embedder, Passage, Retriever};
use hopwise_index::fusion::{reciprocal_rank_fusion, RRF_K};

use crate::error::{RemoteError, Result};
use crate::store::RemoteStore;

/// How a query is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// The engine's text ranking.
    Text,
    /// Nearest neighbours of the query's embedding.
    Vector,
    /// Both, fused by reciprocal rank (on the client: Typesense 0.24 cannot mix them in one query).
    Hybrid,
}

impl SearchMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "text" | "bm25" => Some(Self::Text),
            "vector" | "dense" => Some(Self::Vector),
            "hybrid" => Some(Self::Hybrid),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Vector => "vector",
            Self::Hybrid => "hybrid",
        }
    }
}

pub struct RemoteRetriever {
    store: Arc<dyn RemoteStore>,
    embedder: Option<Arc<dyn Embedder>>,
    mode: SearchMode,
    name: String,
    /// Candidates per list before hybrid fusion, as a multiple of `k`.
    depth_factor: usize,
}

impl RemoteRetriever {
    /// Checks that the collection exists and that its vectors have the embedder's dimension, so a
    /// mismatch is an error at start, not a stream of failed queries.
    pub async fn open(
        store: Arc<dyn RemoteStore>,
        embedder: Option<Arc<dyn Embedder>>,
        mode: SearchMode,
    ) -> Result<Self> {
        let needs_vectors = mode != SearchMode::Text;
        if needs_vectors && embedder.is_none() {
            return Err(RemoteError::Config(format!("{} {} search needs an embedder", store.engine(), mode.as_str())));
        }
        if mode != SearchMode::Vector && !store.supports_text() {
            return Err(RemoteError::Config(format!(
                "{} has no text search; choose the vector mode for it",
                store.engine()
            )));
        }
        store.health().await?;
        match store.collection_dim().await? {
            None => {
                return Err(RemoteError::MissingCollection {
                    engine: store.engine(),
                    collection: store.collection().to_string(),
                })
            }
            Some(found) => {
                if let (true, Some(e)) = (needs_vectors, &embedder) {
                    RemoteError::check_dim(store.engine(), store.collection(), e.dim(), found)?;
                }
            }
        }
        let name = format!("{}:{}:{}", store.engine(), store.collection(), mode.as_str());
        Ok(Self { store, embedder, mode, name, depth_factor: 4 })
    }

    pub fn store(&self) -> &Arc<dyn RemoteStore> {
        &self.store
    }

    async fn embed(&self, query: &str) -> Result<Vec<f32>> {
        let Some(e) = &self.embedder else {
            return Err(RemoteError::Config("no embedder".into()));
        };
        let mut v = e.embed(&[query.to_string()]).await.map_err(RemoteError::Embed)?;
        v.pop().ok_or_else(|| {
            RemoteError::Embed(hopwise_core::Error::InvalidInput("the embedder returned no vector".into()))
        })
    }

    /// Retrieval with this crate's error type (the `Retriever` impl converts it).
    pub async fn search(&self, query: &str, k: usize) -> Result<Vec<Passage>> {
        if k == 0 || query.trim().is_empty() {
            return Ok(Vec::new());
        }
        match self.mode {
            SearchMode::Text => self.store.search_text(query, k).await,
            SearchMode::Vector => {
                let v = self.embed(query).await?;
                self.store.search_vector(&v, k).await
            }
            SearchMode::Hybrid => {
                let depth = k.saturating_mul(self.depth_factor);
                let v = self.embed(query).await?;
                let (text, dense) =
                    tokio::join!(self.store.search_text(query, depth), self.store.search_vector(&v, depth));
                Ok(reciprocal_rank_fusion(&[text?, dense?], RRF_K, k))
            }
        }
    }
}

#[async_trait]
impl Retriever for RemoteRetriever {
    fn name(&self) -> &str {
        &self.name
    }

    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        Ok(self.search(query, k).await?)
    }
}
