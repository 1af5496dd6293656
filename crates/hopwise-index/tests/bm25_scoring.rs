//! `Bm25Retriever::search` (term at a time, with MaxScore pruning) against tantivy's own query path
//! (`search_reference`) on the repository's sample corpus: same scores, same passages, also on an
//! index with several segments and deleted passages.

use std::fs;
use std::path::{Path, PathBuf};

use hopwise_index::{build_index, Bm25Retriever, IndexOptions};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample").join(name)
}

fn questions() -> Vec<String> {
    let text = fs::read_to_string(sample("questions.jsonl")).expect("sample questions");
    let mut questions: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json")["question"].as_str().expect("text").into())
        .collect();
    // Single rare terms, a stop-word-only query and one made of the commonest words.
    questions.extend(["Porcaro".into(), "the of and".into(), "American film born album band".into()]);
    questions
}

fn files_with_extension(dir: &Path, extension: &str) -> usize {
    fs::read_dir(dir)
        .expect("index dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == extension))
        .count()
}

/// Builds the sample index, then re-indexes every third document with new text, which deletes
/// their old passages and adds a second segment.
fn index_with_segments_and_deletions(dir: &Path) {
    let corpus = sample("corpus.jsonl");
    build_index(std::slice::from_ref(&corpus), dir, &IndexOptions::default(), &|_| {}).expect("build");
    let changed: String = fs::read_to_string(&corpus)
        .expect("corpus")
        .lines()
        .enumerate()
        .filter(|(i, _)| i % 3 == 0)
        .map(|(_, line)| {
            let mut record: serde_json::Value = serde_json::from_str(line).expect("json");
            let text = record["text"].as_str().unwrap_or_default().to_string();
            record["text"] = format!("{text} Revised: a drummer, a band and an album.").into();
            format!("{record}\n")
        })
        .collect();
    let update = dir.with_extension("update.jsonl");
    fs::write(&update, changed).expect("write update");
    build_index(&[update], dir, &IndexOptions::default(), &|_| {}).expect("update");
    let bm25 = dir.join("bm25");
    assert!(files_with_extension(&bm25, "idx") >= 2, "the update should add a segment");
    assert!(files_with_extension(&bm25, "del") >= 1, "the update should delete passages");
}

/// The two paths agree on every score; passage ids agree except among passages tied with the
/// last one kept (which of those makes the cut may differ).
fn assert_same_ranking(retriever: &Bm25Retriever, query: &str, k: usize) {
    let fast = retriever.search(query, k).expect("search");
    let reference = retriever.search_reference(query, k).expect("reference search");
    let scores = |ps: &[hopwise_core::Passage]| ps.iter().map(|p| p.score).collect::<Vec<_>>();
    assert_eq!(fast.len(), reference.len(), "{query:?} k={k}: {:?} vs {:?}", scores(&fast), scores(&reference));
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-4 * b.abs().max(1.0);
    for (a, b) in fast.iter().zip(&reference) {
        assert!(close(a.score, b.score), "{query:?} k={k}: {:?} vs {:?}", scores(&fast), scores(&reference));
    }
    if let Some(last) = reference.last().map(|p| p.score) {
        let clear = |ps: &[hopwise_core::Passage]| {
            ps.iter().filter(|p| !close(p.score, last)).map(|p| p.id.clone()).collect::<Vec<_>>()
        };
        assert_eq!(clear(&fast), clear(&reference), "{query:?} k={k}");
    }
}

#[test]
fn term_at_a_time_scoring_matches_tantivys_query_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = dir.path().join("index");
    build_index(&[sample("corpus.jsonl")], &index, &IndexOptions::default(), &|_| {}).expect("build");
    let retriever = Bm25Retriever::open(&index).expect("open");
    let mut found = 0;
    for question in questions() {
        for k in [1, 5, 50] {
            assert_same_ranking(&retriever, &question, k);
        }
        found += usize::from(!retriever.search(&question, 5).expect("search").is_empty());
    }
    assert!(found >= 60, "the sample questions should find passages ({found})");
    // A k far beyond the index size returns every match instead of reserving room for k.
    let all = retriever.search("drummer", usize::MAX).expect("huge k");
    assert_eq!(all.len(), retriever.search_reference("drummer", usize::MAX).expect("huge k").len());
    assert!(!all.is_empty() && all.len() as u64 <= retriever.len());
}

#[test]
fn scoring_matches_with_a_title_boost_several_segments_and_deleted_passages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = dir.path().join("index");
    index_with_segments_and_deletions(&index);
    for boost in [1.0, 2.5] {
        let retriever = Bm25Retriever::open(&index).expect("open").with_title_boost(boost);
        for question in questions() {
            for k in [1, 5, 50] {
                assert_same_ranking(&retriever, &question, k);
            }
        }
    }
    // A replaced passage is never returned: every hit carries the revised text if its document
    // was re-indexed.
    let retriever = Bm25Retriever::open(&index).expect("open");
    let hits = retriever.search("drummer band album revised", 50).expect("search");
    assert!(hits.iter().any(|p| p.text.contains("Revised:")));
    let revised: Vec<_> = hits.iter().filter(|p| p.text.contains("Revised:")).map(|p| p.id.clone()).collect();
    for id in &revised {
        assert_eq!(hits.iter().filter(|p| &p.id == id).count(), 1, "{id} returned twice");
    }
}
