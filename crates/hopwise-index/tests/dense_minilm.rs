//! The dense index with the real all-MiniLM-L6-v2 embedder: a paraphrase with no shared content
//! word finds its passage, and hybrid retrieval keeps it. Skips (with the reason printed) when the
//! model is not installed, except under CI (env `CI` set), where that is a failure.

use std::path::PathBuf;
use std::sync::Arc;

use hopwise_core::{Embedder, Retriever};
use hopwise_embed::{
    embedder_model_dir, verify_embedder_model, MiniLmEmbedder, MiniLmOptions, Precision, MINILM_INT8_MODEL_ID,
    MINILM_MODEL_ID,
};
use hopwise_index::{
    build_dense, build_index, dense_model_id, Bm25Retriever, DenseOptions, DenseRetriever, HybridRetriever, IndexError,
    IndexOptions,
};

fn minilm() -> Option<MiniLmEmbedder> {
    minilm_with(Precision::Int8)
}

fn minilm_with(precision: Precision) -> Option<MiniLmEmbedder> {
    let home = std::env::var_os("HOPWISE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/hopwise")))?;
    let dir = embedder_model_dir(&home);
    if let Err(e) = verify_embedder_model(&dir) {
        let reason = format!("all-MiniLM-L6-v2 not installed ({e}); run `hopwise setup --fetch all-minilm-l6-v2`");
        assert!(std::env::var_os("CI").is_none(), "CI: {reason}");
        hopwise_core::test_skips::skipped(&reason);
        return None;
    }
    let options = MiniLmOptions { threads: 1, precision, ..MiniLmOptions::default() };
    Some(MiniLmEmbedder::load(&dir, options).expect("load MiniLM"))
}

#[tokio::test]
async fn minilm_dense_and_hybrid_retrieval_find_a_paraphrase() {
    let Some(embedder) = minilm() else { return };
    let embedder: Arc<dyn Embedder> = Arc::new(embedder);
    assert_eq!(embedder.model_id(), MINILM_INT8_MODEL_ID);
    let root = tempfile::tempdir().expect("tempdir");
    let corpus = root.path().join("c.jsonl");
    let docs = [
        ("car", "Cars", "An automobile is a wheeled motor vehicle used for transportation."),
        ("cake", "Baking", "To bake a sponge you whisk eggs, sugar and flour, then heat it in an oven."),
        ("moon", "Moon", "The Moon orbits the Earth and reflects sunlight."),
        ("law", "Contract law", "A contract is an agreement that is enforceable by a court."),
    ];
    let lines: Vec<String> =
        docs.iter().map(|(id, t, x)| serde_json::json!({"id": id, "title": t, "text": x}).to_string()).collect();
    std::fs::write(&corpus, lines.join("\n")).expect("corpus");
    let index = root.path().join("index");
    build_index(&[corpus], &index, &IndexOptions::default(), &|_| {}).expect("bm25");
    let report = build_dense(&index, embedder.as_ref(), &DenseOptions::default(), &|_| {}).await.expect("dense");
    assert_eq!(report.embedded, 4);

    let dense: Arc<dyn Retriever> = Arc::new(DenseRetriever::open(&index, embedder.clone()).expect("open"));
    // No content word in common with the passage: BM25 cannot find it, the embedding can.
    let query = "how do I make a dessert?";
    let hits = dense.retrieve(query, 1).await.expect("dense");
    assert_eq!(hits[0].id.split('#').next(), Some("cake"), "{hits:?}");
    let bm25: Arc<dyn Retriever> = Arc::new(Bm25Retriever::open(&index).expect("bm25"));
    assert!(bm25.retrieve(query, 4).await.expect("bm25").iter().all(|p| p.doc_id.as_deref() != Some("cake")));
    let hybrid = HybridRetriever::new(bm25, dense);
    let hits = hybrid.retrieve(query, 2).await.expect("hybrid");
    assert!(hits.iter().any(|p| p.doc_id.as_deref() == Some("cake")), "{hits:?}");
}

#[tokio::test]
async fn int8_and_f32_vectors_never_share_an_index() {
    let (Some(int8), Some(f32)) = (minilm_with(Precision::Int8), minilm_with(Precision::F32)) else { return };
    let (int8, f32): (Arc<dyn Embedder>, Arc<dyn Embedder>) = (Arc::new(int8), Arc::new(f32));
    let root = tempfile::tempdir().expect("tempdir");
    let corpus = root.path().join("c.jsonl");
    let line = serde_json::json!({"id": "moon", "title": "Moon", "text": "The Moon orbits the Earth."});
    std::fs::write(&corpus, line.to_string()).expect("corpus");
    for (built, other, built_id) in [(&f32, &int8, MINILM_MODEL_ID), (&int8, &f32, MINILM_INT8_MODEL_ID)] {
        let index = root.path().join(format!("index-{}", built_id.len()));
        build_index(std::slice::from_ref(&corpus), &index, &IndexOptions::default(), &|_| {}).expect("bm25");
        build_dense(&index, built.as_ref(), &DenseOptions::default(), &|_| {}).await.expect("dense");
        assert_eq!(dense_model_id(&index).expect("meta").as_deref(), Some(built_id));

        let err = DenseRetriever::open(&index, other.clone()).expect_err("queries from the other precision");
        assert!(matches!(err, IndexError::EmbedderMismatch { .. }), "{err}");
        assert!(err.to_string().contains(built_id) && err.to_string().contains(other.model_id()), "{err}");
        let err = build_dense(&index, other.as_ref(), &DenseOptions::default(), &|_| {}).await.expect_err("update");
        assert!(matches!(err, IndexError::EmbedderMismatch { .. }), "{err}");

        let same = DenseRetriever::open(&index, built.clone()).expect("same precision opens");
        assert_eq!(
            same.retrieve("What orbits the Earth?", 1).await.expect("search")[0].id.split('#').next(),
            Some("moon")
        );
    }
}
