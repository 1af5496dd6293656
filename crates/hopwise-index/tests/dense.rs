//! The dense index: persistence and reload, determinism, incremental updates, exact vs HNSW search,
//! refusal of a foreign embedder, damaged files, and the hybrid retriever over real indexes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use hopwise_core::{Embedder, Retriever};
use hopwise_index::{
    build_dense, build_index, Bm25Retriever, DenseOptions, DenseRetriever, Fusion, HybridRetriever, IndexError,
    IndexOptions,
};

/// A deterministic test embedder: hashed bag of words in 64 dimensions, counting the texts it embeds.
struct HashEmbedder {
    id: &'static str,
    texts: AtomicUsize,
}

impl HashEmbedder {
    fn new() -> Arc<Self> {
        Arc::new(Self { id: "test/hash-64", texts: AtomicUsize::new(0) })
    }
    fn embedded(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

const DIM: usize = 64;

fn hash_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIM];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in word.to_lowercase().bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
        v[(h % DIM as u64) as usize] += 1.0;
        v[((h >> 32) % DIM as u64) as usize] += 0.5;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / norm).collect()
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        self.id
    }
    fn dim(&self) -> usize {
        DIM
    }
    async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| hash_vector(t)).collect())
    }
}

fn write_corpus(dir: &Path, name: &str, docs: &[(&str, &str, &str)]) -> PathBuf {
    let path = dir.join(name);
    let lines: Vec<String> = docs
        .iter()
        .map(|(id, title, text)| serde_json::json!({"id": id, "title": title, "text": text}).to_string())
        .collect();
    std::fs::write(&path, lines.join("\n")).expect("write corpus");
    path
}

const DOCS: [(&str, &str, &str); 4] = [
    ("rush", "Rush (band)", "Rush was a Canadian rock band formed in Toronto; Neil Peart was its drummer."),
    ("peart", "Neil Peart", "Neil Peart was a drummer and lyricist, inducted into the Hall of Fame."),
    ("counterparts", "Counterparts (album)", "Counterparts is the fifteenth studio album by Rush, released in 1993."),
    ("toronto", "Toronto", "Toronto is the capital city of the province of Ontario in Canada."),
];

/// Many small synthetic documents, so the HNSW graph has something to do.
fn synthetic_docs(n: usize) -> Vec<(String, String, String)> {
    const WORDS: [&str; 24] = [
        "river", "mountain", "city", "band", "album", "drummer", "novel", "author", "film", "director", "king",
        "queen", "war", "treaty", "island", "bridge", "painter", "museum", "school", "church", "railway", "ship",
        "election", "senator",
    ];
    (0..n)
        .map(|i| {
            let words: Vec<&str> = (0..6).map(|j| WORDS[(i * 7 + j * 5 + i / 3) % WORDS.len()]).collect();
            (format!("d{i:04}"), format!("Doc {i}"), format!("{} number{i}", words.join(" ")))
        })
        .collect()
}

async fn index_with_dense(
    root: &Path,
    docs: &[(&str, &str, &str)],
    embedder: Arc<HashEmbedder>,
    opts: &DenseOptions,
) -> (PathBuf, hopwise_index::DenseReport) {
    let corpus = write_corpus(root, "corpus.jsonl", docs);
    let index = root.join("index");
    build_index(&[corpus], &index, &IndexOptions::default(), &|_| {}).expect("bm25 build");
    let report = build_dense(&index, embedder.as_ref(), opts, &|_| {}).await.expect("dense build");
    (index, report)
}

fn titles(ps: &[hopwise_core::Passage]) -> Vec<String> {
    ps.iter().map(|p| p.title.clone()).collect()
}

/// Whether this build has the HNSW graph (the `hnsw` feature); without it search is always exact.
const HNSW: bool = cfg!(feature = "hnsw");

#[tokio::test]
async fn a_persisted_dense_index_reloads_with_the_same_results() {
    let root = tempfile::tempdir().expect("tempdir");
    let embedder = HashEmbedder::new();
    let (index, report) = index_with_dense(root.path(), &DOCS, embedder.clone(), &DenseOptions::default()).await;
    assert_eq!((report.embedded, report.rows, report.ann), (4, 4, false));
    assert!(index.join("dense/vectors.f32").is_file() && index.join("dense/dense.json").is_file());

    let first = DenseRetriever::open(&index, embedder.clone()).expect("open");
    let hits = first.retrieve("Neil Peart drummer lyricist", 2).await.expect("retrieve");
    assert_eq!(hits[0].title, "Neil Peart", "{:?}", titles(&hits));
    assert!(hits[0].score > hits[1].score && hits[0].score <= 1.0 + 1e-5);
    assert_eq!(hits[0].doc_id.as_deref(), Some("peart"), "passages come back with their document id");
    drop(first);
    let again = DenseRetriever::open(&index, embedder).expect("reopen");
    assert_eq!(again.retrieve("Neil Peart drummer lyricist", 2).await.expect("retrieve"), hits);
}

#[tokio::test]
async fn an_index_built_twice_gives_the_same_results_exact_and_hnsw() {
    let docs = synthetic_docs(400);
    let docs: Vec<(&str, &str, &str)> = docs.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    for threshold in [10_000, 0] {
        let opts = DenseOptions { exact_threshold: threshold, ..DenseOptions::default() };
        let (a, b) = (tempfile::tempdir().expect("a"), tempfile::tempdir().expect("b"));
        let (ia, ra) = index_with_dense(a.path(), &docs, HashEmbedder::new(), &opts).await;
        let (ib, _) = index_with_dense(b.path(), &docs, HashEmbedder::new(), &opts).await;
        assert_eq!(ra.ann, threshold == 0 && HNSW);
        for file in ["entries.jsonl", "vectors.f32"] {
            let (fa, fb) = (std::fs::read(ia.join("dense").join(file)), std::fs::read(ib.join("dense").join(file)));
            assert_eq!(fa.expect("a file"), fb.expect("b file"), "{file} differs between builds");
        }
        let (da, db) = (
            DenseRetriever::open(&ia, HashEmbedder::new()).expect("open a"),
            DenseRetriever::open(&ib, HashEmbedder::new()).expect("open b"),
        );
        assert_eq!(da.uses_ann(), threshold == 0 && HNSW);
        for q in ["river mountain band", "novel author film", "king queen war treaty", "number17 ship"] {
            let (x, y) = (da.retrieve(q, 10).await.expect("a"), db.retrieve(q, 10).await.expect("b"));
            assert_eq!(x, y, "query {q:?}, threshold {threshold}");
            assert_eq!(x.len(), 10);
        }
    }
}

#[tokio::test]
async fn updates_embed_only_new_and_changed_passages_and_drop_replaced_ones() {
    let root = tempfile::tempdir().expect("tempdir");
    let embedder = HashEmbedder::new();
    let (index, first) = index_with_dense(root.path(), &DOCS[..3], embedder.clone(), &DenseOptions::default()).await;
    assert_eq!((first.embedded, first.reused, first.removed), (3, 0, 0));

    // An unchanged rebuild embeds nothing.
    let again = build_dense(&index, embedder.as_ref(), &DenseOptions::default(), &|_| {}).await.expect("noop");
    assert_eq!((again.embedded, again.reused, again.removed), (0, 3, 0));
    assert_eq!(embedder.embedded(), 3);

    // Change `peart`, add `toronto`; BM25 replaces peart's passage, the dense build follows.
    let update = write_corpus(
        root.path(),
        "update.jsonl",
        &[("peart", "Neil Peart", "Peart also wrote travel books about cycling."), DOCS[3]],
    );
    build_index(&[update], &index, &IndexOptions::default(), &|_| {}).expect("bm25 update");
    let progress = std::sync::Mutex::new(Vec::new());
    let second =
        build_dense(&index, embedder.as_ref(), &DenseOptions::default(), &|p| progress.lock().expect("lock").push(p))
            .await
            .expect("dense update");
    assert_eq!((second.embedded, second.reused, second.rows), (2, 2, 4), "{second:?}");
    assert_eq!(embedder.embedded(), 5, "only the changed and the new passage were embedded");
    assert_eq!(progress.lock().expect("lock").last().map(|p| (p.embedded, p.to_embed)), Some((2, 2)));

    let dense = DenseRetriever::open(&index, embedder.clone()).expect("open");
    let hits = dense.retrieve("travel books about cycling", 1).await.expect("retrieve");
    assert_eq!(hits[0].text, "Peart also wrote travel books about cycling.");
    let old = dense.retrieve("drummer and lyricist inducted Hall of Fame", 4).await.expect("retrieve");
    assert!(old.iter().all(|p| !p.text.contains("lyricist")), "the replaced text is gone: {old:?}");
}

#[tokio::test]
async fn passages_removed_from_the_index_leave_the_dense_index() {
    let root = tempfile::tempdir().expect("tempdir");
    let embedder = HashEmbedder::new();
    let long = "word ".repeat(600);
    let docs = [("long", "Long", long.as_str()), DOCS[0]];
    let (index, first) = index_with_dense(root.path(), &docs, embedder.clone(), &DenseOptions::default()).await;
    assert!(first.rows >= 3, "the long document is chunked: {first:?}");
    // The long document shrinks to one passage: its other chunks disappear from both indexes.
    let update = write_corpus(root.path(), "update.jsonl", &[("long", "Long", "now short")]);
    build_index(&[update], &index, &IndexOptions::default(), &|_| {}).expect("bm25 update");
    let second = build_dense(&index, embedder.as_ref(), &DenseOptions::default(), &|_| {}).await.expect("update");
    assert_eq!(second.rows, 2);
    assert_eq!(second.removed, first.rows - 1, "{second:?}");
    assert_eq!(second.reused, 1);
}

#[cfg(feature = "hnsw")]
#[tokio::test]
async fn hnsw_agrees_with_exact_search_on_a_small_set() {
    let docs = synthetic_docs(1500);
    let docs: Vec<(&str, &str, &str)> = docs.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    let root = tempfile::tempdir().expect("tempdir");
    let opts = DenseOptions { exact_threshold: 0, ..DenseOptions::default() };
    let (index, report) = index_with_dense(root.path(), &docs, HashEmbedder::new(), &opts).await;
    assert!(report.ann);
    let dense = DenseRetriever::open(&index, HashEmbedder::new()).expect("open");
    let (mut found, mut total) = (0usize, 0usize);
    for i in 0..100 {
        let q = hash_vector(&format!("{} number{}", docs[i * 13].2, i));
        let exact = dense.search_exact(&q, 10);
        let ann = dense.search_ann(&q, 10);
        assert_eq!(ann.len(), 10);
        // Synthetic texts tie often; an ANN hit scoring at least the exact 10th score is a true top-10 hit.
        let tenth = exact.last().map_or(f32::INFINITY, |(_, s)| *s);
        total += exact.len();
        found += ann.iter().filter(|(_, s)| *s >= tenth - 1e-5).count();
    }
    let recall = found as f64 / total as f64;
    assert!(recall >= 0.9, "HNSW recall@10 vs exact = {recall:.3}");
}

#[tokio::test]
async fn a_different_embedder_is_refused_for_queries_and_updates() {
    let root = tempfile::tempdir().expect("tempdir");
    let (index, _) = index_with_dense(root.path(), &DOCS, HashEmbedder::new(), &DenseOptions::default()).await;
    let other = Arc::new(HashEmbedder { id: "other/model", texts: AtomicUsize::new(0) });
    let err = DenseRetriever::open(&index, other.clone()).expect_err("foreign embedder");
    assert!(matches!(err, IndexError::EmbedderMismatch { .. }), "{err}");
    assert!(err.to_string().contains("test/hash-64") && err.to_string().contains("other/model"), "{err}");
    let err = build_dense(&index, other.as_ref(), &DenseOptions::default(), &|_| {}).await.expect_err("update");
    assert!(matches!(err, IndexError::EmbedderMismatch { .. }), "{err}");
}

#[tokio::test]
async fn missing_and_damaged_dense_indexes_are_clear_errors() {
    let root = tempfile::tempdir().expect("tempdir");
    let corpus = write_corpus(root.path(), "c.jsonl", &DOCS);
    let index = root.path().join("index");
    build_index(&[corpus], &index, &IndexOptions::default(), &|_| {}).expect("bm25");
    let err = DenseRetriever::open(&index, HashEmbedder::new()).expect_err("no dense");
    assert!(matches!(err, IndexError::MissingDense { .. }) && err.to_string().contains("--dense"), "{err}");

    let opts = DenseOptions { exact_threshold: 0, ..DenseOptions::default() };
    build_dense(&index, HashEmbedder::new().as_ref(), &opts, &|_| {}).await.expect("dense");
    if HNSW {
        let graph = std::fs::read_dir(index.join("dense"))
            .expect("dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.to_string_lossy().ends_with(".hnsw.graph"))
            .expect("graph file");
        std::fs::write(&graph, b"garbage").expect("damage graph");
        let err = DenseRetriever::open(&index, HashEmbedder::new()).expect_err("damaged graph");
        assert!(matches!(err, IndexError::CorruptIndex { .. }), "{err}");
    }

    std::fs::write(index.join("dense/vectors.f32"), [0u8; 10]).expect("damage vectors");
    let err = DenseRetriever::open(&index, HashEmbedder::new()).expect_err("damaged vectors");
    assert!(matches!(err, IndexError::CorruptIndex { .. }), "{err}");
}

#[tokio::test]
async fn hybrid_fuses_bm25_and_dense() {
    let root = tempfile::tempdir().expect("tempdir");
    let embedder = HashEmbedder::new();
    let (index, _) = index_with_dense(root.path(), &DOCS, embedder.clone(), &DenseOptions::default()).await;
    let bm25: Arc<dyn Retriever> = Arc::new(Bm25Retriever::open(&index).expect("bm25"));
    let dense: Arc<dyn Retriever> = Arc::new(DenseRetriever::open(&index, embedder).expect("dense"));
    let query = "Counterparts album 1993";
    let b = bm25.retrieve(query, 4).await.expect("bm25");
    let d = dense.retrieve(query, 4).await.expect("dense");
    for fusion in [Fusion::default(), Fusion::Weighted { weights: [0.5, 0.5] }] {
        let hybrid = HybridRetriever::new(bm25.clone(), dense.clone()).with_fusion(fusion);
        let h = hybrid.retrieve(query, 2).await.expect("hybrid");
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].title, "Counterparts (album)", "{fusion:?}: {:?}", titles(&h));
        assert_eq!(h, fusion.fuse(&[b.clone(), d.clone()], 2)[..], "hybrid = fusion of the two lists");
        assert_eq!(hybrid.name(), "hybrid");
    }
}
