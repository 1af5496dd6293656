//! OpenSearch (k-NN plugin, `knn_vector` with Lucene HNSW) and Elasticsearch 8 (`dense_vector`) over
//! REST: BM25 through a `multi_match` query over title and text, k-NN through each engine's own query
//! form. No such server installs on the development machines; the tests run against one when
//! `OPENSEARCH_URL` is set.

use std::collections::HashMap;

use async_trait::async_trait;
use hopwise_core::Passage;
use reqwest::Method;
use serde_json::{json, Value};

use crate::error::{RemoteError, Result};
use crate::http::{encode, Body, Http, HttpOptions};
use crate::store::{RemoteDoc, RemoteStore};

const ENGINE: &str = "opensearch";

/// Which dialect the server speaks (they differ in vector mappings and k-NN queries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    OpenSearch,
    Elasticsearch,
}

#[derive(Debug, Clone)]
pub struct OpenSearchConfig {
    pub url: String,
    /// Sent as `Authorization: <value>` (e.g. `Basic …` or `ApiKey …`); `None` for an open server.
    pub authorization: Option<String>,
    pub index: String,
    pub http: HttpOptions,
    /// `None`: ask the server (`GET /`) on first use.
    pub flavor: Option<Flavor>,
}

pub struct OpenSearchStore {
    http: Http,
    index: String,
    flavor: tokio::sync::OnceCell<Flavor>,
}

impl OpenSearchStore {
    pub fn new(config: OpenSearchConfig) -> Result<Self> {
        if config.index.is_empty()
            || config.index.starts_with(['_', '-', '+'])
            || config.index.to_lowercase() != config.index
        {
            return Err(RemoteError::Config(format!(
                "`{}` is not a valid index name (lowercase, not starting with _ - +)",
                config.index
            )));
        }
        let headers: Vec<(&str, String)> = config.authorization.iter().map(|a| ("Authorization", a.clone())).collect();
        let http = Http::new(ENGINE, &config.url, &headers, config.http)?;
        let flavor = tokio::sync::OnceCell::new_with(config.flavor);
        Ok(Self { http, index: config.index, flavor })
    }

    async fn flavor(&self) -> Result<Flavor> {
        self.flavor
            .get_or_try_init(|| async {
                let v = self.http.json(Method::GET, "/", None, "server info").await?;
                Ok(detect_flavor(&v))
            })
            .await
            .copied()
    }

    fn path(&self, rest: &str) -> String {
        format!("/{}{rest}", encode(&self.index))
    }

    async fn hits(&self, body: Value, what: &str) -> Result<Vec<Passage>> {
        let (status, text) =
            self.http.send(Method::POST, &self.path("/_search"), Some(&Body::Json(body)), what, &[404]).await?;
        if status == 404 {
            return Err(RemoteError::MissingCollection { engine: ENGINE, collection: self.index.clone() });
        }
        let v = self.http.parse(&text, what)?;
        Ok(parse_hits(&v))
    }

    async fn bulk(&self, body: String, what: &str) -> Result<Vec<Value>> {
        let v = {
            let (_, text) =
                self.http.send(Method::POST, "/_bulk?refresh=wait_for", Some(&Body::Ndjson(body)), what, &[]).await?;
            self.http.parse(&text, what)?
        };
        Ok(v.get("items").and_then(Value::as_array).cloned().unwrap_or_default())
    }
}

fn detect_flavor(info: &Value) -> Flavor {
    match info.pointer("/version/distribution").and_then(Value::as_str) {
        Some("opensearch") => Flavor::OpenSearch,
        _ => Flavor::Elasticsearch,
    }
}

fn parse_hits(v: &Value) -> Vec<Passage> {
    v.pointer("/hits/hits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|h| {
            let src = h.get("_source")?;
            let s = |k: &str| src.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Passage {
                id: h.get("_id")?.as_str()?.to_string(),
                title: s("title").unwrap_or_default(),
                text: s("text").unwrap_or_default(),
                score: h.get("_score").and_then(Value::as_f64).unwrap_or(0.0) as f32,
                doc_id: s("doc_id").filter(|d| !d.is_empty()),
                offsets: None,
            })
        })
        .collect()
}

fn vector_mapping(flavor: Flavor, dim: usize) -> Value {
    match flavor {
        Flavor::OpenSearch => json!({
            "type": "knn_vector",
            "dimension": dim,
            "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": "lucene"}
        }),
        Flavor::Elasticsearch => json!({"type": "dense_vector", "dims": dim, "index": true, "similarity": "cosine"}),
    }
}

fn knn_query(flavor: Flavor, vector: &[f32], k: usize) -> Value {
    match flavor {
        Flavor::OpenSearch => json!({
            "size": k,
            "query": {"knn": {"embedding": {"vector": vector, "k": k}}},
            "_source": {"excludes": ["embedding"]},
        }),
        Flavor::Elasticsearch => json!({
            "size": k,
            "knn": {"field": "embedding", "query_vector": vector, "k": k, "num_candidates": (k * 10).max(100)},
            "_source": {"excludes": ["embedding"]},
        }),
    }
}

#[async_trait]
impl RemoteStore for OpenSearchStore {
    fn engine(&self) -> &'static str {
        ENGINE
    }

    fn collection(&self) -> &str {
        &self.index
    }

    async fn health(&self) -> Result<()> {
        self.flavor().await.map(|_| ())
    }

    async fn collection_dim(&self) -> Result<Option<usize>> {
        let what = "read mapping";
        let (status, text) = self.http.send(Method::GET, &self.path("/_mapping"), None, what, &[404]).await?;
        if status == 404 {
            return Ok(None);
        }
        let v = self.http.parse(&text, what)?;
        let field = v.get(&self.index).and_then(|i| i.pointer("/mappings/properties/embedding"));
        let dim = field.and_then(|f| f.get("dimension").or_else(|| f.get("dims"))).and_then(Value::as_u64);
        dim.map(|d| Some(d as usize)).ok_or_else(|| RemoteError::Engine {
            engine: ENGINE,
            what: what.into(),
            message: format!("index `{}` has no `embedding` vector field; it was not made by hopwise", self.index),
        })
    }

    async fn ensure_collection(&self, dim: usize) -> Result<()> {
        if let Some(found) = self.collection_dim().await? {
            return RemoteError::check_dim(ENGINE, &self.index, dim, found);
        }
        let flavor = self.flavor().await?;
        let mut body = json!({
            "mappings": {"properties": {
                "title": {"type": "text"},
                "text": {"type": "text"},
                "doc_id": {"type": "keyword"},
                "h": {"type": "keyword", "index": false},
                "embedding": vector_mapping(flavor, dim),
            }}
        });
        if flavor == Flavor::OpenSearch {
            body["settings"] = json!({"index": {"knn": true}});
        }
        self.http.send(Method::PUT, &self.path(""), Some(&Body::Json(body)), "create index", &[]).await?;
        Ok(())
    }

    async fn drop_collection(&self) -> Result<()> {
        self.http.send(Method::DELETE, &self.path(""), None, "drop index", &[404]).await?;
        Ok(())
    }

    async fn existing(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        let mut held = HashMap::new();
        for chunk in ids.chunks(500) {
            let body = Body::Json(json!({ "ids": chunk }));
            let what = "look up ids";
            let (status, text) =
                self.http.send(Method::POST, &self.path("/_mget?_source=h"), Some(&body), what, &[404]).await?;
            if status == 404 {
                break;
            }
            let v = self.http.parse(&text, what)?;
            for doc in v.get("docs").and_then(Value::as_array).into_iter().flatten() {
                if doc.get("found").and_then(Value::as_bool) == Some(true) {
                    if let Some(id) = doc.get("_id").and_then(Value::as_str) {
                        let h = doc.pointer("/_source/h").and_then(Value::as_str).unwrap_or("");
                        held.insert(id.to_string(), h.to_string());
                    }
                }
            }
        }
        Ok(held)
    }

    async fn upsert(&self, docs: &[RemoteDoc]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let mut body = String::new();
        for d in docs {
            body.push_str(&json!({"index": {"_index": self.index, "_id": d.id}}).to_string());
            body.push('\n');
            let doc = json!({
                "title": d.title, "text": d.text, "doc_id": d.doc_id.clone().unwrap_or_default(),
                "h": d.hash, "embedding": d.embedding,
            });
            body.push_str(&doc.to_string());
            body.push('\n');
        }
        let items = self.bulk(body, "bulk index").await?;
        let errors: Vec<&Value> = items.iter().filter_map(|i| i.pointer("/index/error")).collect();
        if let Some(first) = errors.first() {
            return Err(RemoteError::Import {
                engine: ENGINE,
                failed: errors.len(),
                total: docs.len(),
                first: first.to_string(),
            });
        }
        if items.len() != docs.len() {
            return Err(self
                .http
                .malformed("bulk index", format!("{} results for {} documents", items.len(), docs.len())));
        }
        Ok(())
    }

    async fn delete(&self, ids: &[String]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut body = String::new();
        for id in ids {
            body.push_str(&json!({"delete": {"_index": self.index, "_id": id}}).to_string());
            body.push('\n');
        }
        let items = self.bulk(body, "bulk delete").await?;
        Ok(items.iter().filter(|i| i.pointer("/delete/result").and_then(Value::as_str) == Some("deleted")).count()
            as u64)
    }

    async fn count(&self) -> Result<u64> {
        let what = "count";
        let (status, text) = self.http.send(Method::GET, &self.path("/_count"), None, what, &[404]).await?;
        if status == 404 {
            return Err(RemoteError::MissingCollection { engine: ENGINE, collection: self.index.clone() });
        }
        let v = self.http.parse(&text, what)?;
        v.get("count").and_then(Value::as_u64).ok_or_else(|| self.http.malformed(what, "no count"))
    }

    async fn search_vector(&self, vector: &[f32], k: usize) -> Result<Vec<Passage>> {
        let flavor = self.flavor().await?;
        self.hits(knn_query(flavor, vector, k.max(1)), "k-NN search").await
    }

    fn supports_text(&self) -> bool {
        true
    }

    async fn search_text(&self, query: &str, k: usize) -> Result<Vec<Passage>> {
        let body = json!({
            "size": k.max(1),
            "query": {"multi_match": {"query": query, "fields": ["title", "text"]}},
            "_source": {"excludes": ["embedding"]},
        });
        self.hits(body, "BM25 search").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_dialect() {
        assert_eq!(detect_flavor(&json!({"version": {"distribution": "opensearch"}})), Flavor::OpenSearch);
        assert_eq!(detect_flavor(&json!({"version": {"number": "8.13.0"}})), Flavor::Elasticsearch);
    }

    #[test]
    fn knn_queries_differ_by_dialect() {
        let os = knn_query(Flavor::OpenSearch, &[0.5], 3);
        assert_eq!(os.pointer("/query/knn/embedding/k"), Some(&json!(3)));
        let es = knn_query(Flavor::Elasticsearch, &[0.5], 3);
        assert_eq!(es.pointer("/knn/num_candidates"), Some(&json!(100)));
    }

    #[test]
    fn hits_without_ids_or_sources_are_skipped() {
        let v = json!({"hits": {"hits": [
            {"_id": "a", "_score": 2.0, "_source": {"title": "T", "text": "x"}},
            {"_score": 1.0, "_source": {}},
            {"_id": "b"}
        ]}});
        let hits = parse_hits(&v);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, "a");
    }

    #[test]
    fn rejects_bad_index_names() {
        let cfg = |index: &str| OpenSearchConfig {
            url: "http://127.0.0.1:9200".into(),
            authorization: None,
            index: index.into(),
            http: HttpOptions::default(),
            flavor: None,
        };
        assert!(OpenSearchStore::new(cfg("Upper")).is_err());
        assert!(OpenSearchStore::new(cfg("_x")).is_err());
        assert!(OpenSearchStore::new(cfg("hopwise")).is_ok());
    }
}
