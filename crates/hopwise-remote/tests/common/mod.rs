//! Shared by the real-server tests and the benchmark: a fixed HotpotQA subset, embeddings computed
//! once (and cached on disk), the embedded BM25/dense retrievers over the same passages, recall@k.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use hopwise_core::{Embedder, Passage, Retriever};
use hopwise_embed::{embedder_model_dir, MiniLmEmbedder, MiniLmOptions};
use hopwise_index::{build_dense, build_index, chunk_document, ChunkOptions, DenseOptions, Document, IndexOptions};
use hopwise_remote::embed_text;
use serde_json::Value;

/// The evaluation data folder `$HOPWISE_DATA` (holding `hotpotqa.jsonl` and `hotpotqa_corpus.jsonl`),
/// when set; without it the repository's sample (`data/sample`) is used.
pub fn data_dir() -> Option<PathBuf> {
    std::env::var_os("HOPWISE_DATA").map(PathBuf::from)
}

pub struct Question {
    pub text: String,
    /// Titles of the supporting paragraphs.
    pub gold: HashSet<String>,
}

/// The first `n` HotpotQA questions and, as the corpus, their paragraphs (supporting + distractors,
/// 10 per question, de-duplicated by title) with the ids `hotpotqa_corpus.jsonl` gives them.
pub struct Subset {
    pub questions: Vec<Question>,
    pub passages: Vec<Passage>,
}

pub fn hotpotqa_subset(n: usize) -> Option<Subset> {
    let Some(dir) = data_dir().filter(|d| d.join("hotpotqa.jsonl").is_file()) else {
        return sample_subset(n);
    };
    let qs = std::fs::read_to_string(dir.join("hotpotqa.jsonl")).ok()?;
    let corpus = std::fs::read_to_string(dir.join("hotpotqa_corpus.jsonl")).ok()?;
    let mut id_of: HashMap<String, String> = HashMap::new();
    for line in corpus.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        if let (Some(id), Some(title)) = (v["id"].as_str(), v["title"].as_str()) {
            id_of.entry(title.to_string()).or_insert_with(|| id.to_string());
        }
    }
    let mut questions = Vec::new();
    let mut seen = HashSet::new();
    let mut passages = Vec::new();
    for line in qs.lines().take(n) {
        let v: Value = serde_json::from_str(line).ok()?;
        let mut gold = HashSet::new();
        for p in v["paragraphs"].as_array()? {
            let title = p["title"].as_str()?.to_string();
            if p["supporting"].as_bool() == Some(true) {
                gold.insert(title.clone());
            }
            if seen.insert(title.clone()) {
                let id = id_of.get(&title).cloned().unwrap_or_else(|| format!("title:{title}"));
                let doc = Document { id, title, text: p["text"].as_str()?.to_string(), location: String::new() };
                passages.extend(chunk_document(&doc, &ChunkOptions::default()));
            }
        }
        questions.push(Question { text: v["question"].as_str()?.to_string(), gold });
    }
    Some(Subset { questions, passages })
}

/// Without `$HOPWISE_DATA`: the repository's sample, which holds the
/// paragraphs of its 40 HotpotQA questions (`hotpotqa-s*`) and their supporting titles.
fn sample_subset(n: usize) -> Option<Subset> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/sample");
    let qs = std::fs::read_to_string(dir.join("questions.jsonl")).ok()?;
    let corpus = std::fs::read_to_string(dir.join("corpus.jsonl")).ok()?;
    let mut passages = Vec::new();
    for line in corpus.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        let (Some(id), Some(title), Some(text)) = (v["id"].as_str(), v["title"].as_str(), v["text"].as_str()) else {
            continue;
        };
        if id.starts_with("hotpotqa-s") {
            let doc = Document { id: id.into(), title: title.into(), text: text.into(), location: String::new() };
            passages.extend(chunk_document(&doc, &ChunkOptions::default()));
        }
    }
    let questions = qs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["dataset"] == "hotpotqa")
        .take(n)
        .filter_map(|v| {
            let gold =
                v["supporting_titles"].as_array()?.iter().filter_map(|t| t.as_str().map(str::to_string)).collect();
            Some(Question { text: v["question"].as_str()?.to_string(), gold })
        })
        .collect();
    Some(Subset { questions, passages })
}

/// Mean over questions of the share of supporting titles among the top-`k` passages' titles.
pub fn recall_at(results: &[Vec<Passage>], questions: &[Question], k: usize) -> f64 {
    let mut sum = 0.0;
    for (hits, q) in results.iter().zip(questions) {
        let titles: HashSet<&str> = hits.iter().take(k).map(|p| p.title.as_str()).collect();
        let found = q.gold.iter().filter(|g| titles.contains(g.as_str())).count();
        sum += found as f64 / q.gold.len().max(1) as f64;
    }
    sum / questions.len().max(1) as f64
}

/// Serves precomputed vectors for known texts and embeds anything else with the real model, so
/// every engine and the embedded dense index see bit-identical vectors without embedding twice.
pub struct TableEmbedder {
    inner: Arc<MiniLmEmbedder>,
    table: HashMap<String, Vec<f32>>,
}

#[async_trait]
impl Embedder for TableEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        let missing: Vec<String> = texts.iter().filter(|t| !self.table.contains_key(*t)).cloned().collect();
        let mut fresh: HashMap<String, Vec<f32>> = HashMap::new();
        if !missing.is_empty() {
            let vs = self.inner.embed(&missing).await?;
            fresh = missing.into_iter().zip(vs).collect();
        }
        Ok(texts.iter().map(|t| self.table.get(t).or_else(|| fresh.get(t)).cloned().unwrap_or_default()).collect())
    }
}

fn home() -> PathBuf {
    std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/hopwise"))
}

/// MiniLM with one thread, or `None` (printed) when it is not installed; under `CI` that fails.
pub fn minilm() -> Option<Arc<MiniLmEmbedder>> {
    let dir = embedder_model_dir(&home());
    if !dir.join("model.safetensors").is_file() {
        let why = format!("all-MiniLM-L6-v2 is not installed in {}", dir.display());
        if std::env::var_os("CI").is_some() {
            panic!("{why} (CI is set)");
        }
        hopwise_core::test_skips::skipped(&why);
        return None;
    }
    let opts = MiniLmOptions { threads: 1, ..MiniLmOptions::default() };
    Some(Arc::new(MiniLmEmbedder::load(&dir, opts).expect("load MiniLM")))
}

/// Embeds every passage and query of `subset` once; cached under `$HOPWISE_HOME/cache/remote-tests`
/// keyed by model and texts, so reruns skip the ~16 passages/s embedding.
pub async fn table_embedder(subset: &Subset, model: Arc<MiniLmEmbedder>) -> Arc<TableEmbedder> {
    let mut texts: Vec<String> = subset.passages.iter().map(|p| embed_text(&p.title, &p.text)).collect();
    texts.extend(subset.questions.iter().map(|q| q.text.clone()));
    let key = hopwise_remote::content_hash(model.model_id(), &texts.len().to_string(), &texts.join("\u{1}"));
    let cache = home().join("cache/remote-tests").join(format!("emb-{key}.json"));
    let cached: Option<Vec<Vec<f32>>> = std::fs::read(&cache)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|v: &Vec<Vec<f32>>| v.len() == texts.len());
    let vectors = match cached {
        Some(v) => v,
        None => {
            let t = std::time::Instant::now();
            let v = model.embed(&texts).await.expect("embed the subset");
            eprintln!("embedded {} texts in {:.1} s", texts.len(), t.elapsed().as_secs_f64());
            if let Some(parent) = cache.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let _ = std::fs::write(&cache, serde_json::to_vec(&v).unwrap_or_default());
            v
        }
    };
    Arc::new(TableEmbedder { inner: model, table: texts.into_iter().zip(vectors).collect() })
}

/// The embedded BM25 and (exact) dense retrievers over the subset, built in `dir`.
pub async fn embedded_retrievers(
    subset: &Subset,
    embedder: Arc<TableEmbedder>,
    dir: &Path,
) -> (Arc<dyn Retriever>, Arc<dyn Retriever>) {
    let corpus = dir.join("corpus.jsonl");
    let mut lines = String::new();
    // One document per passage with the passage's id, so chunking yields the same passages again.
    for p in &subset.passages {
        lines.push_str(&serde_json::json!({"id": p.id, "title": p.title, "text": p.text}).to_string());
        lines.push('\n');
    }
    std::fs::write(&corpus, lines).expect("write corpus");
    let index = dir.join("index");
    build_index(&[corpus], &index, &IndexOptions::default(), &|_| {}).expect("bm25 index");
    build_dense(&index, embedder.as_ref(), &DenseOptions::default(), &|_| {}).await.expect("dense index");
    let bm25: Arc<dyn Retriever> = Arc::new(hopwise_index::Bm25Retriever::open(&index).expect("open bm25"));
    let dense: Arc<dyn Retriever> =
        Arc::new(hopwise_index::DenseRetriever::open(&index, embedder.clone()).expect("open dense"));
    (bm25, dense)
}

pub async fn run_queries(r: &dyn Retriever, questions: &[Question], k: usize) -> Vec<Vec<Passage>> {
    let mut out = Vec::new();
    for q in questions {
        out.push(r.retrieve(&q.text, k).await.expect("retrieve"));
    }
    out
}
