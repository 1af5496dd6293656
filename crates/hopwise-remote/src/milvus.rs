//! Milvus (tested against 2.3.5 standalone) over its RESTful v1 API (`/v1/vector/...`). Dense only:
//! Milvus before 2.5 has no text search.
//!
//! What the v1 API allows and how this adapter lives with it:
//! - `collections/create` is a quick create: an auto-generated Int64 primary key `id`, a `vector`
//!   field, dynamic fields on, and an index chosen by the server (AUTOINDEX; 2.3.5 builds HNSW with
//!   M=18, efConstruction=240 and the COSINE metric asked for). The index type cannot be chosen here.
//! - The passage id, title, text, doc id and content hash go into dynamic fields (`pid`, …).
//! - With server-made keys there is no upsert by passage id, so a write first looks up the keys of
//!   the passages it replaces (`pid in [...]`), deletes them, then inserts: a re-run never leaves two
//!   copies, and a run killed between delete and insert loses nothing a re-run does not restore.
//! - Reads are eventually consistent (the collection's default, Bounded): rows inserted in the last
//!   moments may not be seen by that lookup yet. The importer keeps one copy per id within a batch;
//!   the same id in two batches less than about a second apart, or a resume started within a second
//!   of a kill, could still write a second copy (the tests wait 2 s, well past the visibility lag).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hopwise_core::Passage;
use reqwest::Method;
use serde_json::{json, Value};

use crate::error::{RemoteError, Result};
use crate::http::{encode, Http, HttpOptions};
use crate::store::{RemoteDoc, RemoteStore};

const ENGINE: &str = "milvus";
/// Milvus caps `offset + limit` of a query at this.
const MAX_QUERY: usize = 16_384;
/// Milvus's "collection not found" code.
const NOT_FOUND: i64 = 100;

#[derive(Debug, Clone)]
pub struct MilvusConfig {
    pub url: String,
    /// `user:password` or an API token, sent as a bearer token; `None` for an open server.
    pub token: Option<String>,
    pub collection: String,
    pub http: HttpOptions,
    /// HNSW search width sent with each search (`params.ef`); at least `k`.
    pub ef: usize,
    /// How long to wait for a new collection to load before giving up.
    pub load_timeout: Duration,
}

impl MilvusConfig {
    pub fn new(url: impl Into<String>, collection: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            token: None,
            collection: collection.into(),
            http: HttpOptions::default(),
            ef: 64,
            load_timeout: Duration::from_secs(60),
        }
    }
}

pub struct MilvusStore {
    http: Http,
    config: MilvusConfig,
}

impl MilvusStore {
    pub fn new(config: MilvusConfig) -> Result<Self> {
        if config.collection.is_empty() {
            return Err(RemoteError::Config("the Milvus collection name is empty".into()));
        }
        let headers: Vec<(&str, String)> =
            config.token.iter().map(|t| ("Authorization", format!("Bearer {t}"))).collect();
        let http = Http::new(ENGINE, &config.url, &headers, config.http.clone())?;
        Ok(Self { http, config })
    }

    /// A v1 call: Milvus answers 200 with `{"code": 200, "data": …}` or `{"code": N, "message": …}`.
    async fn call(&self, method: Method, path: &str, body: Option<Value>, what: &str) -> Result<Value> {
        let reply = self.http.json(method, &format!("/v1/vector{path}"), body, what).await?;
        let code = reply.get("code").and_then(Value::as_i64).ok_or_else(|| self.http.malformed(what, "no `code`"))?;
        if code == 200 {
            return Ok(reply.get("data").cloned().unwrap_or(Value::Null));
        }
        let message = reply.get("message").and_then(Value::as_str).unwrap_or("").to_string();
        if code == NOT_FOUND {
            return Err(RemoteError::MissingCollection { engine: ENGINE, collection: self.config.collection.clone() });
        }
        Err(RemoteError::Engine { engine: ENGINE, what: what.into(), message: format!("code {code}: {message}") })
    }

    async fn describe(&self) -> Result<Option<Value>> {
        let path = format!("/collections/describe?collectionName={}", encode(&self.config.collection));
        match self.call(Method::GET, &path, None, "describe collection").await {
            Ok(v) => Ok(Some(v)),
            Err(RemoteError::MissingCollection { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The index the server built on the vector field, as it describes it (for reports).
    pub async fn index_description(&self) -> Result<String> {
        let v = self.describe().await?.unwrap_or(Value::Null);
        Ok(v.get("indexes").map(Value::to_string).unwrap_or_else(|| "none".into()))
    }

    async fn wait_loaded(&self) -> Result<()> {
        let started = Instant::now();
        loop {
            let state = self.describe().await?;
            let load = state.as_ref().and_then(|v| v.get("load")).and_then(Value::as_str).unwrap_or("");
            if load == "LoadStateLoaded" {
                return Ok(());
            }
            if started.elapsed() > self.config.load_timeout {
                return Err(RemoteError::Timeout {
                    engine: ENGINE,
                    url: format!(
                        "{} (loading collection `{}`, state {load:?})",
                        self.http.base(),
                        self.config.collection
                    ),
                    secs: self.config.load_timeout.as_secs_f64(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Server keys and content hashes of the passages with these ids.
    async fn keys(&self, ids: &[String]) -> Result<Vec<(Value, String, String)>> {
        let mut out = Vec::new();
        // Each chunk's rows fit a query page even if a passage were stored twice.
        for chunk in ids.chunks(MAX_QUERY / 4) {
            let list: Vec<String> = chunk.iter().map(|id| quote(id)).collect();
            let body = json!({
                "collectionName": self.config.collection,
                "filter": format!("pid in [{}]", list.join(",")),
                "outputFields": ["id", "pid", "h"],
                "limit": (chunk.len() * 4).min(MAX_QUERY),
            });
            let rows = self.call(Method::POST, "/query", Some(body), "look up ids").await?;
            for row in rows.as_array().into_iter().flatten() {
                let key = row.get("id").cloned();
                let pid = row.get("pid").and_then(Value::as_str);
                if let (Some(key), Some(pid)) = (key, pid) {
                    let h = row.get("h").and_then(Value::as_str).unwrap_or("").to_string();
                    out.push((key, pid.to_string(), h));
                }
            }
        }
        Ok(out)
    }

    async fn delete_keys(&self, keys: Vec<Value>) -> Result<()> {
        for chunk in keys.chunks(1000) {
            // Keys come back as strings (they exceed 2^53); the delete wants numbers.
            let numbers: Vec<Value> = chunk
                .iter()
                .map(|k| match k {
                    Value::String(s) => s
                        .parse::<i64>()
                        .map(Value::from)
                        .map_err(|_| self.http.malformed("delete", format!("key {s:?}"))),
                    Value::Number(_) => Ok(k.clone()),
                    other => Err(self.http.malformed("delete", format!("key {other}"))),
                })
                .collect::<Result<_>>()?;
            let body = json!({ "collectionName": self.config.collection, "id": numbers });
            self.call(Method::POST, "/delete", Some(body), "delete").await?;
        }
        Ok(())
    }
}

/// A string literal in a Milvus boolean expression.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The dimension in a field type such as `FloatVector(384)`.
fn vector_dim(describe: &Value) -> Option<usize> {
    describe.get("fields")?.as_array()?.iter().find_map(|f| {
        let t = f.get("type")?.as_str()?;
        t.strip_prefix("FloatVector(")?.strip_suffix(')')?.parse().ok()
    })
}

#[async_trait]
impl RemoteStore for MilvusStore {
    fn engine(&self) -> &'static str {
        ENGINE
    }

    fn collection(&self) -> &str {
        &self.config.collection
    }

    async fn health(&self) -> Result<()> {
        self.call(Method::GET, "/collections", None, "health check").await.map(|_| ())
    }

    async fn collection_dim(&self) -> Result<Option<usize>> {
        match self.describe().await? {
            None => Ok(None),
            Some(v) => vector_dim(&v).map(Some).ok_or_else(|| RemoteError::Engine {
                engine: ENGINE,
                what: "describe collection".into(),
                message: format!(
                    "collection `{}` has no float vector field; it was not made by hopwise",
                    self.config.collection
                ),
            }),
        }
    }

    async fn ensure_collection(&self, dim: usize) -> Result<()> {
        if let Some(found) = self.collection_dim().await? {
            RemoteError::check_dim(ENGINE, &self.config.collection, dim, found)?;
            return self.wait_loaded().await;
        }
        let body = json!({
            "collectionName": self.config.collection,
            "dimension": dim,
            "metricType": "COSINE",
            "primaryField": "id",
            "vectorField": "vector",
        });
        self.call(Method::POST, "/collections/create", Some(body), "create collection").await?;
        self.wait_loaded().await
    }

    async fn drop_collection(&self) -> Result<()> {
        let body = json!({ "collectionName": self.config.collection });
        match self.call(Method::POST, "/collections/drop", Some(body), "drop collection").await {
            Ok(_) | Err(RemoteError::MissingCollection { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn existing(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        Ok(self.keys(ids).await?.into_iter().map(|(_, pid, h)| (pid, h)).collect())
    }

    async fn upsert(&self, docs: &[RemoteDoc]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
        let old: Vec<Value> = self.keys(&ids).await?.into_iter().map(|(k, _, _)| k).collect();
        self.delete_keys(old).await?;
        let rows: Vec<Value> = docs
            .iter()
            .map(|d| {
                json!({
                    "vector": d.embedding,
                    "pid": d.id,
                    "title": d.title,
                    "text": d.text,
                    "doc_id": d.doc_id.clone().unwrap_or_default(),
                    "h": d.hash,
                })
            })
            .collect();
        let body = json!({ "collectionName": self.config.collection, "data": rows });
        let data = self.call(Method::POST, "/insert", Some(body), "insert").await?;
        let inserted = data.get("insertCount").and_then(Value::as_u64).unwrap_or(0);
        if inserted as usize != docs.len() {
            return Err(RemoteError::Import {
                engine: ENGINE,
                failed: docs.len().saturating_sub(inserted as usize),
                total: docs.len(),
                first: format!("the server reports {inserted} rows inserted"),
            });
        }
        Ok(())
    }

    async fn delete(&self, ids: &[String]) -> Result<u64> {
        let keys: Vec<Value> = self.keys(ids).await?.into_iter().map(|(k, _, _)| k).collect();
        let n = keys.len() as u64;
        self.delete_keys(keys).await?;
        Ok(n)
    }

    async fn count(&self) -> Result<u64> {
        let body = json!({
            "collectionName": self.config.collection,
            "filter": "id >= 0",
            "outputFields": ["count(*)"],
            "limit": 0,
        });
        let what = "count";
        let data = self.call(Method::POST, "/query", Some(body), what).await?;
        let v =
            data.get(0).and_then(|r| r.get("count(*)")).ok_or_else(|| self.http.malformed(what, data.to_string()))?;
        match v {
            Value::String(s) => s.parse().map_err(|_| self.http.malformed(what, format!("count {s:?}"))),
            Value::Number(n) => n.as_u64().ok_or_else(|| self.http.malformed(what, format!("count {n}"))),
            other => Err(self.http.malformed(what, format!("count {other}"))),
        }
    }

    async fn search_vector(&self, vector: &[f32], k: usize) -> Result<Vec<Passage>> {
        let k = k.clamp(1, MAX_QUERY);
        let body = json!({
            "collectionName": self.config.collection,
            "vector": vector,
            "limit": k,
            "outputFields": ["pid", "title", "text", "doc_id"],
            "params": { "ef": self.config.ef.max(k) },
        });
        let data = self.call(Method::POST, "/search", Some(body), "vector search").await?;
        Ok(data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|row| {
                let s = |k: &str| row.get(k).and_then(Value::as_str).map(str::to_string);
                Some(Passage {
                    id: s("pid")?,
                    title: s("title").unwrap_or_default(),
                    text: s("text").unwrap_or_default(),
                    // With the COSINE metric Milvus's "distance" is the similarity.
                    score: row.get("distance").and_then(Value::as_f64).unwrap_or(0.0) as f32,
                    doc_id: s("doc_id").filter(|d| !d.is_empty()),
                    offsets: None,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escape_quotes_and_backslashes() {
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn reads_the_vector_dimension() {
        let v = json!({"fields": [{"name": "id", "type": "Int64"}, {"name": "vector", "type": "FloatVector(384)"}]});
        assert_eq!(vector_dim(&v), Some(384));
        assert_eq!(vector_dim(&json!({"fields": []})), None);
        assert_eq!(vector_dim(&json!("junk")), None);
    }
}
