//! Against real Typesense and Milvus servers started here on 127.0.0.1 (installed by
//! `scripts/servers.sh install`; without them these tests are skipped, under `CI` they fail).
//!
//! Corpus: the first `QUESTIONS` HotpotQA questions of the repository's sample (`data/sample`, or of
//! `$HOPWISE_DATA/hotpotqa.jsonl` when set) and their paragraphs (supporting + distractors,
//! //! de-duplicated by title; ~10 per question), not the full corpus, whose embedding would dominate
//! the test run. Embeddings are computed once and cached.
//!
//! Agreement: on recall@5 of supporting paragraphs, each engine's vector search must be within
//! `VECTOR_TOLERANCE` of the embedded exact dense retriever (same vectors; the engines search HNSW
//! graphs, which may miss a neighbour). Typesense's text ranking is not BM25 (it requires every query
//! word and drops words until it has candidates, without IDF weighting), and does markedly worse on
//! long questions; its text recall is only held to a floor, `TEXT_FLOOR`, and reported.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use hopwise_core::{Embedder, Retriever};
use hopwise_remote::servers::{self, MilvusServer, TypesenseServer};
use hopwise_remote::{
    import_passages, HttpOptions, ImportOptions, MilvusConfig, MilvusStore, RemoteError, RemoteRetriever, RemoteStore,
    SearchMode, TypesenseConfig, TypesenseStore,
};
use tokio::sync::OnceCell;

const QUESTIONS: usize = 40;
const K: usize = 5;
const VECTOR_TOLERANCE: f64 = 0.02;
const TEXT_FLOOR: f64 = 0.45;

struct Fixture {
    subset: Subset,
    embedder: Arc<TableEmbedder>,
    bm25_recall: f64,
    dense_recall: f64,
}

static FIXTURE: OnceCell<Option<Arc<Fixture>>> = OnceCell::const_new();

/// The subset, its embeddings and the embedded retrievers' recall, once per test run.
async fn fixture() -> Option<Arc<Fixture>> {
    FIXTURE
        .get_or_init(|| async {
            let model = minilm()?;
            let Some(subset) = hotpotqa_subset(QUESTIONS) else {
                assert!(std::env::var_os("CI").is_none(), "HotpotQA data missing: {:?} and data/sample", data_dir());
                hopwise_core::test_skips::skipped(&format!("HotpotQA data missing: {:?} and data/sample", data_dir()));
                return None;
            };
            let embedder = table_embedder(&subset, model).await;
            let dir = tempfile::tempdir().expect("tempdir");
            let (bm25, dense) = embedded_retrievers(&subset, embedder.clone(), dir.path()).await;
            let bm25_recall = recall_at(&run_queries(bm25.as_ref(), &subset.questions, K).await, &subset.questions, K);
            let dense_recall = recall_at(&run_queries(dense.as_ref(), &subset.questions, K).await, &subset.questions, K);
            eprintln!(
                "embedded on {} passages / {} questions: bm25 recall@5 {bm25_recall:.3}, dense recall@5 {dense_recall:.3}",
                subset.passages.len(),
                subset.questions.len()
            );
            Some(Arc::new(Fixture { subset, embedder, bm25_recall, dense_recall }))
        })
        .await
        .clone()
}

fn quick_http() -> HttpOptions {
    HttpOptions {
        timeout: Duration::from_secs(20),
        retries: 2,
        retry_base: Duration::from_millis(100),
        ..HttpOptions::default()
    }
}

fn typesense_store(server: &TypesenseServer, collection: &str) -> Arc<TypesenseStore> {
    Arc::new(
        TypesenseStore::new(TypesenseConfig {
            http: quick_http(),
            ..TypesenseConfig::new(server.url.clone(), server.api_key.clone(), collection)
        })
        .expect("typesense store"),
    )
}

/// Imports the fixture's passages into `store`, calling `kill` (once) when `after` passages have
/// been seen, and returns the error the import must then end with.
async fn import_until_killed(
    store: &dyn RemoteStore,
    f: &Fixture,
    opts: ImportOptions,
    after: u64,
    kill: impl FnOnce() + Send,
) -> RemoteError {
    let kill = std::sync::Mutex::new(Some(kill));
    let result = import_passages(store, f.embedder.as_ref(), f.subset.passages.clone(), opts, &|p| {
        if p.seen >= after {
            if let Some(kill) = kill.lock().ok().and_then(|mut k| k.take()) {
                kill();
            }
        }
    })
    .await;
    result.expect_err("the import must fail when the server dies")
}

fn milvus_store(url: &str, collection: &str) -> Arc<MilvusStore> {
    Arc::new(
        MilvusStore::new(MilvusConfig { http: quick_http(), ..MilvusConfig::new(url, collection) })
            .expect("milvus store"),
    )
}

/// Waits until the engine counts `n` passages (Milvus counts are eventually consistent).
async fn wait_count(store: &dyn RemoteStore, n: u64) -> u64 {
    let started = std::time::Instant::now();
    loop {
        let c = store.count().await.expect("count");
        if c == n || started.elapsed() > Duration::from_secs(30) {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn recall(store: Arc<dyn RemoteStore>, embedder: Arc<TableEmbedder>, mode: SearchMode, f: &Fixture) -> f64 {
    let r = RemoteRetriever::open(store, Some(embedder as Arc<dyn Embedder>), mode).await.expect("open retriever");
    let results = run_queries(&r as &dyn Retriever, &f.subset.questions, K).await;
    if mode == SearchMode::Vector {
        assert!(results.iter().all(|h| h.len() == K), "{} returned fewer than {K} hits", r.name());
    } else {
        // A text engine may find fewer than k passages sharing words with a question, not none.
        let empty = results.iter().filter(|h| h.is_empty()).count();
        assert!(empty * 10 <= results.len(), "{} found nothing for {empty} questions", r.name());
    }
    recall_at(&results, &f.subset.questions, K)
}

#[tokio::test]
async fn typesense_indexes_hotpotqa_and_agrees_with_the_embedded_retrievers() {
    let Some(bin) = servers::require("typesense-server") else { return };
    let Some(f) = fixture().await else { return };
    let server = TypesenseServer::start(&bin).expect("start typesense");
    let store = typesense_store(&server, "hotpot");
    let n = f.subset.passages.len() as u64;
    let report = import_passages(
        store.as_ref(),
        f.embedder.as_ref(),
        f.subset.passages.clone(),
        ImportOptions::default(),
        &|_| {},
    )
    .await
    .expect("import");
    assert_eq!(report.passages_written, n);
    assert_eq!(report.collection_count, n);

    let vector = recall(store.clone(), f.embedder.clone(), SearchMode::Vector, &f).await;
    let text = recall(store.clone(), f.embedder.clone(), SearchMode::Text, &f).await;
    let hybrid = recall(store.clone(), f.embedder.clone(), SearchMode::Hybrid, &f).await;
    eprintln!(
        "typesense recall@5: vector {vector:.3} text {text:.3} hybrid {hybrid:.3} (dense {:.3}, bm25 {:.3})",
        f.dense_recall, f.bm25_recall
    );
    assert!((vector - f.dense_recall).abs() <= VECTOR_TOLERANCE, "vector {vector} vs dense {}", f.dense_recall);
    assert!(text >= TEXT_FLOOR, "text {text} (bm25 {})", f.bm25_recall);
    assert!(hybrid >= TEXT_FLOOR, "hybrid {hybrid}");

    // Delete and replace by id.
    let victim = f.subset.passages[0].id.clone();
    assert_eq!(store.delete(std::slice::from_ref(&victim)).await.expect("delete"), 1);
    assert_eq!(store.count().await.expect("count"), n - 1);
    assert_eq!(store.delete(std::slice::from_ref(&victim)).await.expect("delete again"), 0);
    // A re-import restores exactly the deleted passage (the rest are unchanged and skipped).
    let again = import_passages(
        store.as_ref(),
        f.embedder.as_ref(),
        f.subset.passages.clone(),
        ImportOptions::default(),
        &|_| {},
    )
    .await
    .expect("re-import");
    assert_eq!((again.passages_written, again.passages_unchanged, again.collection_count), (1, n - 1, n));
    // Changed text replaces the passage in place.
    let mut changed = f.subset.passages[1].clone();
    changed.text = format!("{} (revised)", changed.text);
    import_passages(store.as_ref(), f.embedder.as_ref(), vec![changed.clone()], ImportOptions::default(), &|_| {})
        .await
        .expect("replace");
    assert_eq!(store.count().await.expect("count"), n);
    let held = store.existing(std::slice::from_ref(&changed.id)).await.expect("existing");
    let model = f.embedder.model_id().to_string();
    assert_eq!(held.get(&changed.id), Some(&hopwise_remote::content_hash(&model, &changed.title, &changed.text)));
}

#[tokio::test]
async fn typesense_killed_mid_import_resumes_without_duplicates_or_loss() {
    let Some(bin) = servers::require("typesense-server") else { return };
    let Some(f) = fixture().await else { return };
    let mut server = TypesenseServer::start(&bin).expect("start typesense");
    let store = typesense_store(&server, "resume");
    let n = f.subset.passages.len() as u64;
    let opts = ImportOptions { batch: 16, ..ImportOptions::default() };

    // The server dies (SIGKILL) after the third batch; the import must fail with a clear error.
    let err = import_until_killed(store.as_ref(), &f, opts, 48, || server.kill()).await;
    assert!(matches!(err, RemoteError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains("unreachable"), "{err}");

    server.restart().expect("restart typesense on the same data");
    let before = store.count().await.expect("count after restart");
    assert!(before >= 48 && before < n, "{before} passages survived the crash");
    let report = import_passages(store.as_ref(), f.embedder.as_ref(), f.subset.passages.clone(), opts, &|_| {})
        .await
        .expect("resume");
    assert_eq!(report.passages_unchanged, before, "the resume re-embedded passages already stored");
    assert_eq!(report.passages_written, n - before);
    assert_eq!(report.collection_count, n, "duplicates or losses after resume");
    let ids: Vec<String> = f.subset.passages.iter().map(|p| p.id.clone()).collect();
    assert_eq!(store.existing(&ids).await.expect("existing").len() as u64, n);
}

#[tokio::test]
async fn typesense_refuses_a_collection_with_the_wrong_dimension() {
    let Some(bin) = servers::require("typesense-server") else { return };
    let server = TypesenseServer::start(&bin).expect("start typesense");
    let store = typesense_store(&server, "small");
    store.ensure_collection(8).await.expect("create an 8-d collection");
    let err = store.ensure_collection(384).await.expect_err("384-d vectors into an 8-d collection");
    assert!(matches!(err, RemoteError::DimensionMismatch { expected: 384, found: 8, .. }), "{err}");
    assert!(err.to_string().contains("8-d"), "{err}");
    let missing = typesense_store(&server, "nope");
    let err = RemoteRetriever::open(missing, None, SearchMode::Text).await.err().expect("missing collection");
    assert!(matches!(err, RemoteError::MissingCollection { .. }), "{err}");
}

/// Milvus is slow and memory-hungry to start, so one test covers it end to end on one server: the
/// importer aborted midway and resumed, recall, delete/replace, wrong dimension, and the server
/// SIGKILLed mid-import, restarted on the same data, and the import resumed.
#[tokio::test]
async fn milvus_indexes_hotpotqa_agrees_with_dense_and_survives_faults() {
    let Some(bin) = servers::require("milvus-server") else { return };
    let Some(f) = fixture().await else { return };
    let mut server = MilvusServer::start(&bin).expect("start milvus");
    let n = f.subset.passages.len() as u64;
    let opts = ImportOptions { batch: 32, ..ImportOptions::default() };

    // Killed mid-import (the importing task is aborted after two batches), then resumed.
    let store = milvus_store(&server.url, "hotpot");
    let passages = f.subset.passages.clone();
    let (s2, e2) = (store.clone(), f.embedder.clone());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let tx = std::sync::Mutex::new(Some(tx));
    let task = tokio::spawn(async move {
        import_passages(s2.as_ref(), e2.as_ref(), passages, opts, &|p| {
            if p.seen >= 64 {
                if let Some(tx) = tx.lock().ok().and_then(|mut g| g.take()) {
                    let _ = tx.send(());
                }
            }
        })
        .await
    });
    let _ = rx.await;
    task.abort();
    let _ = task.await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let partial = store.count().await.expect("count");
    assert!(partial >= 64 && partial < n, "{partial} of {n} after the abort");
    let report = import_passages(store.as_ref(), f.embedder.as_ref(), f.subset.passages.clone(), opts, &|_| {})
        .await
        .expect("resume");
    assert!(report.passages_unchanged >= 64, "{report:?}");
    assert_eq!(wait_count(store.as_ref(), n).await, n, "duplicates or losses after resume");
    eprintln!("milvus index: {}", store.index_description().await.unwrap_or_default());

    let vector = recall(store.clone(), f.embedder.clone(), SearchMode::Vector, &f).await;
    eprintln!("milvus recall@5: vector {vector:.3} (dense {:.3})", f.dense_recall);
    assert!((vector - f.dense_recall).abs() <= VECTOR_TOLERANCE, "vector {vector} vs dense {}", f.dense_recall);
    let err = RemoteRetriever::open(store.clone(), Some(f.embedder.clone() as Arc<dyn Embedder>), SearchMode::Hybrid)
        .await
        .err()
        .expect("milvus has no text search");
    assert!(err.to_string().contains("no text search"), "{err}");

    // Delete and replace by id.
    let ids: Vec<String> = f.subset.passages.iter().take(3).map(|p| p.id.clone()).collect();
    assert_eq!(store.delete(&ids).await.expect("delete"), 3);
    assert_eq!(wait_count(store.as_ref(), n - 3).await, n - 3);
    let again = import_passages(store.as_ref(), f.embedder.as_ref(), f.subset.passages.clone(), opts, &|_| {})
        .await
        .expect("re-import");
    assert_eq!(again.passages_written, 3);
    assert_eq!(wait_count(store.as_ref(), n).await, n);

    // Wrong dimension.
    let small = milvus_store(&server.url, "small");
    small.ensure_collection(8).await.expect("8-d collection");
    let err = small.ensure_collection(384).await.expect_err("dimension mismatch");
    assert!(matches!(err, RemoteError::DimensionMismatch { expected: 384, found: 8, .. }), "{err}");
    let err = RemoteRetriever::open(small, Some(f.embedder.clone() as Arc<dyn Embedder>), SearchMode::Vector)
        .await
        .err()
        .expect("retriever over an 8-d collection");
    assert!(matches!(err, RemoteError::DimensionMismatch { .. }), "{err}");

    // The server crashes (SIGKILL) mid-import, comes back on the same data, and the import resumes.
    let crash = milvus_store(&server.url, "crash");
    let err = import_until_killed(crash.as_ref(), &f, opts, 96, || server.kill()).await;
    assert!(err.is_transient(), "{err}");
    server.restart().expect("restart milvus on the same data");
    let crash = milvus_store(&server.url, "crash");
    // After a restart Milvus loads the collection again before it answers queries on it.
    crash.ensure_collection(f.embedder.dim()).await.expect("the collection loads again");
    let survived = crash.count().await.expect("count after restart");
    assert!(survived <= n, "{survived}");
    let report = import_passages(crash.as_ref(), f.embedder.as_ref(), f.subset.passages.clone(), opts, &|_| {})
        .await
        .expect("resume after the crash");
    assert_eq!(report.passages_unchanged + report.passages_written, n, "{report:?}");
    assert_eq!(wait_count(crash.as_ref(), n).await, n, "duplicates or losses after the crash ({survived} survived)");
    let ids: Vec<String> = f.subset.passages.iter().map(|p| p.id.clone()).collect();
    assert_eq!(crash.existing(&ids).await.expect("existing").len() as u64, n);
    eprintln!(
        "milvus crash: {survived} of {n} passages survived the SIGKILL; the resume wrote {}",
        report.passages_written
    );
}
