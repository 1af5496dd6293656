//! Typesense (tested against 0.24.1) over its REST API: one collection with `title`, `text`,
//! `doc_id`, the content hash `h` (not indexed) and a `float[]` `embedding` field. Text search is
//! Typesense's own typo-tolerant ranking (not BM25). In 0.24 a vector query must have `q=*`, so the
//! hybrid mode fuses a text and a vector search on the client (see [`crate::RemoteRetriever`]).

use std::collections::HashMap;

use async_trait::async_trait;
use hopwise_core::Passage;
use reqwest::Method;
use serde_json::{json, Value};

use crate::error::{RemoteError, Result};
use crate::http::{encode, Body, Http, HttpOptions};
use crate::store::{RemoteDoc, RemoteStore};

const ENGINE: &str = "typesense";
/// Typesense's page-size ceiling.
const MAX_PER_PAGE: usize = 250;

#[derive(Debug, Clone)]
pub struct TypesenseConfig {
    pub url: String,
    pub api_key: String,
    pub collection: String,
    pub http: HttpOptions,
    /// HNSW search width: a vector query asks for `max(ef, k)` neighbours, which Typesense finds
    /// with at least that wide a candidate list, and keeps the closest `k`. Typesense 0.24 has no
    /// search-width parameter of its own, and searching with a width of `k` misses neighbours.
    pub ef: usize,
}

impl TypesenseConfig {
    pub fn new(url: impl Into<String>, api_key: impl Into<String>, collection: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            api_key: api_key.into(),
            collection: collection.into(),
            http: HttpOptions::default(),
            ef: 64,
        }
    }
}

pub struct TypesenseStore {
    http: Http,
    collection: String,
    ef: usize,
}

impl TypesenseStore {
    pub fn new(config: TypesenseConfig) -> Result<Self> {
        if config.collection.is_empty() {
            return Err(RemoteError::Config("the Typesense collection name is empty".into()));
        }
        let http = Http::new(ENGINE, &config.url, &[("X-TYPESENSE-API-KEY", config.api_key)], config.http)?;
        Ok(Self { http, collection: config.collection, ef: config.ef })
    }

    fn path(&self, rest: &str) -> String {
        format!("/collections/{}{rest}", encode(&self.collection))
    }

    /// One search through `multi_search` (a POST, so long vectors do not go into the URL).
    async fn search(&self, mut params: Value, what: &str) -> Result<Vec<Value>> {
        if let Some(map) = params.as_object_mut() {
            map.insert("collection".into(), json!(self.collection));
            map.insert("exclude_fields".into(), json!("embedding"));
        }
        let reply = self.http.json(Method::POST, "/multi_search", Some(json!({ "searches": [params] })), what).await?;
        let result = reply
            .get("results")
            .and_then(|r| r.get(0))
            .ok_or_else(|| self.http.malformed(what, "no `results[0]` in the reply"))?;
        if let Some(code) = result.get("code").and_then(Value::as_u64) {
            let message = result.get("error").and_then(Value::as_str).unwrap_or("").to_string();
            if code == 404 {
                return Err(RemoteError::MissingCollection { engine: ENGINE, collection: self.collection.clone() });
            }
            return Err(RemoteError::Status { engine: ENGINE, status: code as u16, what: what.into(), body: message });
        }
        Ok(result.get("hits").and_then(Value::as_array).cloned().unwrap_or_default())
    }

    fn passage(&self, hit: &Value, score: f32) -> Option<Passage> {
        let doc = hit.get("document")?;
        let s = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Passage {
            id: s("id")?,
            title: s("title").unwrap_or_default(),
            text: s("text").unwrap_or_default(),
            score,
            doc_id: s("doc_id").filter(|d| !d.is_empty()),
            offsets: None,
        })
    }
}

/// A Typesense filter value list; backticks quote ids with commas, spaces or brackets.
fn id_filter(ids: &[&String]) -> String {
    let quoted: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
    format!("id:[{}]", quoted.join(","))
}

#[async_trait]
impl RemoteStore for TypesenseStore {
    fn engine(&self) -> &'static str {
        ENGINE
    }

    fn collection(&self) -> &str {
        &self.collection
    }

    async fn health(&self) -> Result<()> {
        let reply = self.http.json(Method::GET, "/health", None, "health check").await?;
        if reply.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok(())
        } else {
            Err(RemoteError::Engine { engine: ENGINE, what: "health check".into(), message: reply.to_string() })
        }
    }

    async fn collection_dim(&self) -> Result<Option<usize>> {
        let what = "describe collection";
        let (status, text) = self.http.send(Method::GET, &self.path(""), None, what, &[404]).await?;
        if status == 404 {
            return Ok(None);
        }
        let v = self.http.parse(&text, what)?;
        let fields = v.get("fields").and_then(Value::as_array).ok_or_else(|| self.http.malformed(what, "no fields"))?;
        let dim = fields
            .iter()
            .find(|f| f.get("name").and_then(Value::as_str) == Some("embedding"))
            .and_then(|f| f.get("num_dim").and_then(Value::as_u64));
        match dim {
            Some(d) => Ok(Some(d as usize)),
            None => Err(RemoteError::Engine {
                engine: ENGINE,
                what: what.into(),
                message: format!(
                    "collection `{}` has no `embedding` vector field; it was not made by hopwise",
                    self.collection
                ),
            }),
        }
    }

    async fn ensure_collection(&self, dim: usize) -> Result<()> {
        if let Some(found) = self.collection_dim().await? {
            return RemoteError::check_dim(ENGINE, &self.collection, dim, found);
        }
        let schema = json!({
            "name": self.collection,
            "fields": [
                {"name": "title", "type": "string"},
                {"name": "text", "type": "string"},
                {"name": "doc_id", "type": "string", "optional": true, "index": false},
                {"name": "h", "type": "string", "optional": true, "index": false},
                {"name": "embedding", "type": "float[]", "num_dim": dim},
            ]
        });
        let body = Body::Json(schema);
        let (status, _) =
            self.http.send(Method::POST, "/collections", Some(&body), "create collection", &[409]).await?;
        if status == 409 {
            // Created concurrently by another importer: check it instead.
            if let Some(found) = self.collection_dim().await? {
                return RemoteError::check_dim(ENGINE, &self.collection, dim, found);
            }
        }
        Ok(())
    }

    async fn drop_collection(&self) -> Result<()> {
        self.http.send(Method::DELETE, &self.path(""), None, "drop collection", &[404]).await?;
        Ok(())
    }

    async fn existing(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        let mut held = HashMap::new();
        // A backtick cannot be quoted in a filter: look those ids up one by one.
        let (plain, odd): (Vec<&String>, Vec<&String>) = ids.iter().partition(|id| !id.contains('`'));
        for chunk in plain.chunks(MAX_PER_PAGE) {
            let params = json!({
                "q": "*",
                "filter_by": id_filter(chunk),
                "include_fields": "id,h",
                "per_page": chunk.len(),
            });
            for hit in self.search(params, "look up ids").await? {
                let doc = hit.get("document");
                let id = doc.and_then(|d| d.get("id")).and_then(Value::as_str);
                let h = doc.and_then(|d| d.get("h")).and_then(Value::as_str).unwrap_or("");
                if let Some(id) = id {
                    held.insert(id.to_string(), h.to_string());
                }
            }
        }
        for id in odd {
            let path = self.path(&format!("/documents/{}", encode(id)));
            let (status, text) = self.http.send(Method::GET, &path, None, "get document", &[404]).await?;
            if status != 404 {
                let v = self.http.parse(&text, "get document")?;
                held.insert(id.clone(), v.get("h").and_then(Value::as_str).unwrap_or("").to_string());
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
            let line = json!({
                "id": d.id,
                "title": d.title,
                "text": d.text,
                "doc_id": d.doc_id.clone().unwrap_or_default(),
                "h": d.hash,
                "embedding": d.embedding,
            });
            body.push_str(&line.to_string());
            body.push('\n');
        }
        let what = "import documents";
        let path = self.path("/documents/import?action=upsert");
        let (_, text) = self.http.send(Method::POST, &path, Some(&Body::Ndjson(body)), what, &[]).await?;
        // One JSON line per document, in order; a failed document does not fail the request.
        let mut failed = 0;
        let mut first = String::new();
        let mut lines = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            lines += 1;
            let v = self.http.parse(line, what)?;
            if v.get("success").and_then(Value::as_bool) != Some(true) {
                failed += 1;
                if first.is_empty() {
                    first = v.get("error").and_then(Value::as_str).unwrap_or("unknown error").to_string();
                }
            }
        }
        if lines != docs.len() {
            return Err(self.http.malformed(what, format!("{lines} result lines for {} documents", docs.len())));
        }
        if failed > 0 {
            return Err(RemoteError::Import { engine: ENGINE, failed, total: docs.len(), first });
        }
        Ok(())
    }

    async fn delete(&self, ids: &[String]) -> Result<u64> {
        let mut deleted = 0;
        for id in ids {
            let path = self.path(&format!("/documents/{}", encode(id)));
            let (status, _) = self.http.send(Method::DELETE, &path, None, "delete document", &[404]).await?;
            if status != 404 {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    async fn count(&self) -> Result<u64> {
        let what = "count documents";
        let (status, text) = self.http.send(Method::GET, &self.path(""), None, what, &[404]).await?;
        if status == 404 {
            return Err(RemoteError::MissingCollection { engine: ENGINE, collection: self.collection.clone() });
        }
        let v = self.http.parse(&text, what)?;
        v.get("num_documents").and_then(Value::as_u64).ok_or_else(|| self.http.malformed(what, "no num_documents"))
    }

    async fn search_vector(&self, vector: &[f32], k: usize) -> Result<Vec<Passage>> {
        let k = k.clamp(1, MAX_PER_PAGE);
        let numbers: Vec<String> = vector.iter().map(|x| format!("{x}")).collect();
        let params = json!({
            "q": "*",
            "vector_query": format!("embedding:([{}], k:{})", numbers.join(","), self.ef.max(k)),
            "per_page": k,
        });
        let hits = self.search(params, "vector search").await?;
        Ok(hits
            .iter()
            .filter_map(|h| {
                // Typesense reports cosine distance; hopwise scores are similarities.
                let d = h.get("vector_distance").and_then(Value::as_f64).unwrap_or(1.0) as f32;
                self.passage(h, 1.0 - d)
            })
            .collect())
    }

    fn supports_text(&self) -> bool {
        true
    }

    async fn search_text(&self, query: &str, k: usize) -> Result<Vec<Passage>> {
        let k = k.clamp(1, MAX_PER_PAGE);
        let params = json!({
            "q": keywords(query),
            "query_by": "title,text",
            "per_page": k,
            // Typesense demands every query word and drops words one by one until it has
            // `drop_tokens_threshold` hits, ranking fuller matches first. Questions are long, so ask
            // it to keep dropping until a full page of candidates: with the defaults a long question
            // matches only the few passages that hold nearly all its words.
            "drop_tokens_threshold": MAX_PER_PAGE,
            "typo_tokens_threshold": k,
            "prefix": false,
        });
        let hits = self.search(params, "text search").await?;
        let n = hits.len();
        Ok(hits
            .iter()
            .enumerate()
            // `text_match` is an opaque packed integer; the rank is the meaningful score.
            .filter_map(|(rank, h)| self.passage(h, (n - rank) as f32 / n as f32))
            .collect())
    }
}

/// Words Typesense would otherwise require to match (it has no stop-word list in 0.24), dropped
/// from questions along with punctuation. A query of only such words is sent as it is.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "by", "did", "do", "does", "for", "from", "her", "his", "how",
    "in", "into", "is", "it", "its", "of", "on", "or", "than", "that", "the", "their", "this", "to", "was", "were",
    "what", "when", "where", "which", "who", "whom", "whose", "with",
];

fn keywords(query: &str) -> String {
    let words: Vec<&str> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(&w.to_lowercase().as_str()))
        .collect();
    if words.is_empty() {
        query.trim().to_string()
    } else {
        words.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_drop_stop_words_and_punctuation() {
        assert_eq!(keywords("Which band released \"Counterparts\"?"), "band released Counterparts");
        assert_eq!(keywords("Who was it?"), "Who was it?");
    }

    #[test]
    fn id_filters_quote_every_id() {
        let a = "a, b".to_string();
        let b = "c]".to_string();
        assert_eq!(id_filter(&[&a, &b]), "id:[`a, b`,`c]`]");
    }
}
