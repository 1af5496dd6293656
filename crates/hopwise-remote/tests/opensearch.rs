//! Against a real OpenSearch (k-NN plugin) or Elasticsearch 8 server named by `OPENSEARCH_URL`
//! (optional `OPENSEARCH_AUTH`: the `Authorization` header value). `scripts/servers.sh` installs no
//! such server, so without the variable these tests print `skipped` and pass.
//! Each run uses its own index name and drops it at the end.

use std::sync::Arc;

use async_trait::async_trait;
use hopwise_core::{Embedder, Passage, Retriever};
use hopwise_remote::{
    import_passages, ImportOptions, OpenSearchConfig, OpenSearchStore, RemoteError, RemoteRetriever, RemoteStore,
    SearchMode,
};

/// A deterministic bag-of-letters embedder: enough to check that k-NN returns the nearest passage.
struct Letters;

#[async_trait]
impl Embedder for Letters {
    fn model_id(&self) -> &str {
        "letters-16"
    }
    fn dim(&self) -> usize {
        16
    }
    async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = [0f32; 16];
                for b in t.to_lowercase().bytes().filter(u8::is_ascii_lowercase) {
                    v[usize::from(b - b'a') % 16] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

fn server(index: &str) -> Option<OpenSearchStore> {
    let Ok(url) = std::env::var("OPENSEARCH_URL") else {
        hopwise_core::test_skips::skipped(
            "OPENSEARCH_URL is not set (no OpenSearch/Elasticsearch server installs here)",
        );
        return None;
    };
    let config = OpenSearchConfig {
        url,
        authorization: std::env::var("OPENSEARCH_AUTH").ok(),
        index: format!("{index}-{}", std::process::id()),
        http: Default::default(),
        flavor: None,
    };
    Some(OpenSearchStore::new(config).expect("store"))
}

fn passages() -> Vec<Passage> {
    [
        ("rush", "Rush (band)", "Rush was a Canadian rock band formed in Toronto."),
        ("cake", "Sponge cake", "Whisk eggs, sugar and flour, then bake."),
        ("moon", "Moon", "The Moon orbits the Earth."),
    ]
    .iter()
    .map(|(id, t, x)| Passage { id: (*id).into(), title: (*t).into(), text: (*x).into(), ..Passage::default() })
    .collect()
}

#[tokio::test]
async fn opensearch_bm25_knn_upsert_delete_and_resume() {
    let Some(store) = server("hopwise-test") else { return };
    let store = Arc::new(store);
    let embedder = Arc::new(Letters);
    let report = import_passages(store.as_ref(), embedder.as_ref(), passages(), ImportOptions::default(), &|_| {})
        .await
        .expect("import");
    assert_eq!((report.passages_written, report.collection_count), (3, 3));
    // A second run writes nothing: every passage is held unchanged.
    let again = import_passages(store.as_ref(), embedder.as_ref(), passages(), ImportOptions::default(), &|_| {})
        .await
        .expect("re-import");
    assert_eq!((again.passages_written, again.passages_unchanged, again.collection_count), (0, 3, 3));

    let bm25 = RemoteRetriever::open(store.clone(), None, SearchMode::Text).await.expect("bm25 retriever");
    let hits = bm25.retrieve("Canadian rock band", 2).await.expect("bm25");
    assert_eq!(hits.first().map(|p| p.id.as_str()), Some("rush"));
    let knn = RemoteRetriever::open(store.clone(), Some(embedder.clone()), SearchMode::Vector).await.expect("knn");
    let hits = knn.retrieve("Sponge cake. Whisk eggs, sugar and flour, then bake.", 1).await.expect("knn");
    assert_eq!(hits.first().map(|p| p.id.as_str()), Some("cake"));
    let hybrid =
        RemoteRetriever::open(store.clone(), Some(embedder.clone()), SearchMode::Hybrid).await.expect("hybrid");
    assert!(!hybrid.retrieve("moon earth", 2).await.expect("hybrid").is_empty());

    assert_eq!(store.delete(&["moon".to_string(), "absent".to_string()]).await.expect("delete"), 1);
    assert_eq!(store.count().await.expect("count"), 2);
    let err = store.ensure_collection(384).await.expect_err("wrong dimension");
    assert!(matches!(err, RemoteError::DimensionMismatch { expected: 384, found: 16, .. }), "{err}");
    store.drop_collection().await.expect("drop");
}
