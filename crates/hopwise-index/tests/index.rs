//! Building, updating and searching real indexes.

use std::fs;
use std::path::{Path, PathBuf};

use hopwise_core::Retriever;
use hopwise_index::{build_index, Bm25Retriever, ChunkOptions, IndexError, IndexOptions, IndexPhase, IndexReport};

fn build(inputs: &[PathBuf], dir: &Path) -> IndexReport {
    build_index(inputs, dir, &IndexOptions::default(), &|_| {}).expect("build index")
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).expect("write");
}

fn record(id: &str, title: &str, text: &str) -> String {
    serde_json::json!({"id": id, "title": title, "text": text}).to_string()
}

/// `count` distinct filler words, so a document gets long enough to be chunked.
fn filler(prefix: &str, count: usize) -> String {
    (0..count).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>().join(" ")
}

#[test]
fn bad_lines_are_reported_and_the_rest_is_indexed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("c.jsonl");
    let lines = [
        record("a", "Alpha", "aardvarks live in africa"),
        "{not json".to_string(),
        record("b", "Beta", ""),
        record("c", "Gamma", "giraffes are tall"),
    ];
    write(&corpus, &lines.join("\n"));
    let index_dir = dir.path().join("idx");

    let report = build(std::slice::from_ref(&corpus), &index_dir);

    assert_eq!(report.documents, 2);
    assert_eq!(report.passages_indexed, 2);
    assert_eq!(report.passages_total, 2);
    assert_eq!(report.empty_documents, 1);
    assert_eq!(report.skipped_total, 1);
    assert_eq!(report.skipped[0].location, format!("{}:2", corpus.display()));
    let retriever = Bm25Retriever::open(&index_dir).expect("open");
    let hits = retriever.search("Which animals are tall?", 5).expect("search");
    assert_eq!(hits.first().map(|p| p.id.as_str()), Some("c"));
}

#[test]
fn reindexing_the_same_ids_replaces_their_passages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index_dir = dir.path().join("idx");
    let v1 = dir.path().join("v1.jsonl");
    let long_text = format!("zebra stripes {}", filler("old", 600));
    write(
        &v1,
        &[
            record("short", "Short", "the quokka smiles"),
            record("long", "Long", &long_text),
            record("keep", "Keep", "kept intact"),
        ]
        .join("\n"),
    );
    let first = build(std::slice::from_ref(&v1), &index_dir);
    let long_chunks = first.passages_indexed - 2;
    assert!(long_chunks >= 3, "the long document is chunked ({long_chunks} passages)");
    assert_eq!(first.passages_replaced, 0);

    let v2 = dir.path().join("v2.jsonl");
    write(&v2, &[record("short", "Short", "the wombat frowns"), record("long", "Long", "now brief")].join("\n"));
    let second = build(std::slice::from_ref(&v2), &index_dir);

    assert_eq!(second.passages_indexed, 2);
    assert_eq!(second.passages_replaced, 1 + long_chunks);
    assert_eq!(second.passages_total, 3, "short, long and keep, once each");
    let retriever = Bm25Retriever::open(&index_dir).expect("open");
    assert_eq!(retriever.len(), 3);
    assert!(retriever.search("quokka", 5).expect("search").is_empty(), "old text is gone");
    assert!(retriever.search("old17 zebra", 5).expect("search").is_empty(), "old chunks are gone");
    assert_eq!(ids(&retriever.search("wombat", 5).expect("search")), ["short"]);
    assert!(retriever.passage("long#1").expect("lookup").is_none());
    assert_eq!(retriever.passage("keep").expect("lookup").map(|p| p.text), Some("kept intact".to_string()));

    // The same input again changes nothing but counts as replacement.
    let third = build(std::slice::from_ref(&v2), &index_dir);
    assert_eq!((third.passages_indexed, third.passages_replaced, third.passages_total), (2, 2, 3));
}

#[test]
fn a_duplicate_id_within_one_build_keeps_the_last_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("c.jsonl");
    write(&corpus, &[record("x", "X", "first version ocelot"), record("x", "X", "second version lynx")].join("\n"));
    let report = build(std::slice::from_ref(&corpus), &dir.path().join("idx"));
    assert_eq!((report.passages_indexed, report.passages_replaced, report.passages_total), (2, 1, 1));
    let retriever = Bm25Retriever::open(&dir.path().join("idx")).expect("open");
    assert!(retriever.search("ocelot", 3).expect("search").is_empty());
    assert_eq!(ids(&retriever.search("lynx", 3).expect("search")), ["x"]);
}

#[test]
fn text_folders_are_chunked_with_offsets_into_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = dir.path().join("docs");
    fs::create_dir_all(docs.join("sub")).expect("mkdir");
    let long = format!("# Field guide\n\n{} The pangolin is scaly. {}", filler("pre", 300), filler("post", 300));
    write(&docs.join("sub/guide.md"), &long);
    write(&docs.join("note.txt"), "A short note about capybaras.");
    let index_dir = dir.path().join("idx");
    let opts = IndexOptions { chunking: ChunkOptions { window_tokens: 128, overlap_tokens: 16 }, ..Default::default() };
    let progress = std::cell::RefCell::new(Vec::new());
    let report =
        build_index(std::slice::from_ref(&docs), &index_dir, &opts, &|p| progress.borrow_mut().push(p)).expect("build");

    assert_eq!(report.documents, 2);
    assert!(report.passages_indexed > 4);
    let progress = progress.into_inner();
    assert_eq!(progress.first().map(|p| p.phase), Some(IndexPhase::Reading));
    let last = progress.last().expect("progress was reported");
    assert_eq!(last.phase, IndexPhase::Done);
    assert_eq!(last.bytes_read, last.bytes_total);
    assert_eq!(last.passages, report.passages_indexed);

    let retriever = Bm25Retriever::open(&index_dir).expect("open");
    let hit = retriever.search("scaly pangolins", 1).expect("search").remove(0);
    let doc_id = format!("{}/sub/guide.md", docs.display());
    assert_eq!(hit.doc_id.as_deref(), Some(doc_id.as_str()));
    assert_eq!(hit.title, "Field guide");
    assert!(hit.id.starts_with(&format!("{doc_id}#")), "{}", hit.id);
    let (start, end) = hit.offsets.expect("offsets");
    assert_eq!(&long[start..end], hit.text);
    assert_eq!(retriever.meta().chunking, opts.chunking);
}

#[test]
fn queries_with_search_syntax_or_nothing_searchable_never_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("c.jsonl");
    write(&corpus, &[record("a", "Title: AND", "plus + minus - colon: quote \" caret ^ star *")].join("\n"));
    let index_dir = dir.path().join("idx");
    build(&[corpus], &index_dir);
    let retriever = Bm25Retriever::open(&index_dir).expect("open");
    let weird = [
        "title:(",
        "\"unterminated",
        "a^b~2 *? [1 TO 5]",
        "AND OR NOT",
        "-",
        "plus +minus",
        "\\",
        "😀🚀",
        "{}",
        "field:value:value",
        "\u{0}\u{1f}",
    ];
    for query in weird {
        retriever.search(query, 5).unwrap_or_else(|err| panic!("{query:?}: {err}"));
    }
    assert_eq!(ids(&retriever.search("caret: star^", 5).expect("search")), ["a"]);
    for nothing in ["", "   ", "?!...", "the of and"] {
        assert!(retriever.search(nothing, 5).expect("search").is_empty(), "{nothing:?}");
    }
    assert!(retriever.search("caret", 0).expect("search").is_empty());
    let huge = "caret ".repeat(100_000);
    assert_eq!(ids(&retriever.search(&huge, 5).expect("search")), ["a"]);
}

#[test]
fn a_missing_or_broken_index_gives_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-index");
    let err = Bm25Retriever::open(&missing).expect_err("missing index");
    assert!(matches!(err, IndexError::MissingIndex { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&missing.display().to_string()) && message.contains("hopwise index"), "{message}");

    // An empty directory is not an index either.
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).expect("mkdir");
    assert!(matches!(Bm25Retriever::open(&empty), Err(IndexError::MissingIndex { .. })));

    // Garbage metadata, and metadata without the index files.
    let broken = dir.path().join("broken");
    fs::create_dir(&broken).expect("mkdir");
    write(&broken.join("hopwise-index.json"), "{ this is not json");
    let err = Bm25Retriever::open(&broken).expect_err("corrupt metadata");
    assert!(matches!(err, IndexError::CorruptIndex { .. }), "{err:?}");
    assert!(err.to_string().contains("hopwise index"), "{err}");

    let corpus = dir.path().join("c.jsonl");
    write(&corpus, &record("a", "A", "text"));
    let built = dir.path().join("built");
    build(std::slice::from_ref(&corpus), &built);
    fs::remove_dir_all(built.join("bm25")).expect("rm");
    let err = Bm25Retriever::open(&built).expect_err("no index files");
    assert!(matches!(err, IndexError::CorruptIndex { .. }), "{err:?}");

    // A newer schema version is refused by name, not misread.
    let future = dir.path().join("future");
    build(std::slice::from_ref(&corpus), &future);
    let meta_path = future.join("hopwise-index.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&meta_path).expect("read")).expect("json");
    meta["schema_version"] = serde_json::json!(99);
    write(&meta_path, &meta.to_string());
    let err = Bm25Retriever::open(&future).expect_err("future schema");
    assert!(matches!(err, IndexError::IncompatibleIndex { found: 99, .. }), "{err:?}");
}

/// A device or a pipe given as a corpus is refused before anything is read: `/dev/zero` would fill
/// memory and a FIFO would block forever.
#[test]
fn devices_and_pipes_are_refused_as_corpus_inputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    for input in [PathBuf::from("/dev/zero"), fifo] {
        let err = build_index(std::slice::from_ref(&input), &dir.path().join("idx"), &IndexOptions::default(), &|_| {})
            .expect_err("refused");
        assert!(matches!(&err, IndexError::NotARegularFile { path } if *path == input), "{err:?}");
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}

#[test]
fn building_into_a_foreign_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("c.jsonl");
    write(&corpus, &record("a", "A", "text"));
    let foreign = dir.path().join("home");
    fs::create_dir(&foreign).expect("mkdir");
    write(&foreign.join("thesis.tex"), "precious");
    let err = build_index(&[corpus], &foreign, &IndexOptions::default(), &|_| {}).expect_err("refused");
    assert!(matches!(err, IndexError::NotAnIndexDir { .. }), "{err:?}");
    assert_eq!(fs::read_dir(&foreign).expect("ls").count(), 1, "nothing was written");

    let missing_input = dir.path().join("typo.jsonl");
    let fresh = dir.path().join("fresh");
    let err = build_index(&[missing_input], &fresh, &IndexOptions::default(), &|_| {}).expect_err("no input");
    assert!(matches!(err, IndexError::InputNotFound { .. }), "{err:?}");
    assert!(!fresh.exists(), "no empty index is left behind");
}

#[test]
fn changing_the_chunking_of_an_existing_index_is_warned_about() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("c.jsonl");
    write(&corpus, &record("a", "A", &filler("w", 50)));
    let index_dir = dir.path().join("idx");
    let first = build(std::slice::from_ref(&corpus), &index_dir);
    assert_eq!((first.warnings_total, first.passages_total), (0, 1));
    let small = IndexOptions { chunking: ChunkOptions { window_tokens: 20, overlap_tokens: 5 }, ..Default::default() };
    let second = build_index(std::slice::from_ref(&corpus), &index_dir, &small, &|_| {}).expect("rebuild");
    assert_eq!(second.warnings_total, 1);
    assert_eq!(second.warnings[0].kind, hopwise_index::IssueKind::Notice);
    assert!(second.passages_total > 1, "the document was re-chunked with the new window");
    assert_eq!(Bm25Retriever::open(&index_dir).expect("open").meta().chunking, small.chunking);
}

fn ids(passages: &[hopwise_core::Passage]) -> Vec<&str> {
    passages.iter().map(|p| p.id.as_str()).collect()
}

/// The repository's sample (`data/sample`, with its sources and licenses): Wikipedia paragraphs of
/// HotpotQA and 2WikiMultiHopQA questions, and the questions with their supporting titles.
fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample")
}

struct Question {
    question: String,
    supporting_titles: Vec<String>,
}

fn hotpot_questions(data: &Path) -> Vec<Question> {
    let text = fs::read_to_string(data.join("questions.jsonl")).expect("read questions.jsonl");
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("question json"))
        .filter(|v| v["dataset"] == "hotpotqa")
        .map(|v| {
            let supporting_titles = v["supporting_titles"]
                .as_array()
                .expect("supporting_titles")
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect();
            Question { question: v["question"].as_str().expect("question").to_string(), supporting_titles }
        })
        .collect()
}

/// Real data: the HotPotQA paragraphs for a question are found in the sample corpus, chunk offsets point
/// back into the corpus records, and a second build of the same input answers identically.
#[tokio::test]
async fn hotpotqa_questions_find_their_supporting_paragraphs_and_rebuilds_agree() {
    let data = sample_dir();
    let corpus = data.join("corpus.jsonl");
    let dir = tempfile::tempdir().expect("tempdir");
    let (first_dir, second_dir) = (dir.path().join("first"), dir.path().join("second"));
    let report = build(std::slice::from_ref(&corpus), &first_dir);
    assert_eq!(report.skipped_total, 0, "{:?}", report.skipped);
    assert!(report.passages_total > report.documents, "some HotPotQA paragraphs are long enough to chunk");
    build(std::slice::from_ref(&corpus), &second_dir);

    let first = Bm25Retriever::open(&first_dir).expect("open first");
    let second = Bm25Retriever::open(&second_dir).expect("open second");
    let questions = hotpot_questions(&data);
    assert!(questions.len() >= 20, "the sample holds HotpotQA questions");

    // The first question: "Which Canadian rock band released a song called "Counterparts" and had a
    // drummer who was inducted into the Modern Drummer Hall of Fame?" needs Neil Peart's paragraph.
    let top = first.retrieve(&questions[0].question, 5).await.expect("retrieve");
    assert!(questions[0].supporting_titles.contains(&"Neil Peart".to_string()));
    let peart = top.iter().find(|p| p.title == "Neil Peart").expect("Neil Peart's paragraph in the top 5");
    assert!(peart.text.contains("Rush"), "{}", peart.text);
    assert!(top.windows(2).all(|w| w[0].score >= w[1].score), "best first");

    let mut with_support = 0;
    for q in &questions {
        let a = first.retrieve(&q.question, 5).await.expect("retrieve");
        let b = second.retrieve(&q.question, 5).await.expect("retrieve");
        let key =
            |ps: &[hopwise_core::Passage]| ps.iter().map(|p| (p.id.clone(), p.score.to_bits())).collect::<Vec<_>>();
        assert_eq!(key(&a), key(&b), "rebuilt index answers {:?} differently", q.question);
        if a.iter().any(|p| q.supporting_titles.contains(&p.title)) {
            with_support += 1;
        }
    }
    let n = questions.len();
    assert!(with_support * 5 >= n * 4, "only {with_support}/{n} questions had a supporting paragraph in the top 5");

    // Chunked records: offsets point into the corpus record's text.
    let long_record = fs::read_to_string(&corpus)
        .expect("read corpus")
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("record"))
        .find(|r| r["text"].as_str().is_some_and(|t| t.split_whitespace().count() > 400))
        .expect("a long record");
    let id = long_record["id"].as_str().expect("id");
    let text = long_record["text"].as_str().expect("text");
    let part = first.passage(&format!("{id}#1")).expect("lookup").expect("second chunk of the long record");
    let (start, end) = part.offsets.expect("offsets");
    assert_eq!(&text[start..end], part.text);
    assert_eq!(part.doc_id.as_deref(), Some(id));
    assert!(first.passage(id).expect("lookup").is_none(), "chunked records have no unsuffixed passage");
}

/// The content identity names what was indexed, not where: the same corpus indexed in two folders (in
/// another order) gets one identity, and a changed passage another.
#[test]
fn content_identity_follows_the_passages_not_the_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let forward = dir.path().join("forward.jsonl");
    let backward = dir.path().join("backward.jsonl");
    let edited = dir.path().join("edited.jsonl");
    let lines = [record("a", "Alpha", "aardvarks live in africa"), record("b", "Beta", "bees make honey")];
    write(&forward, &lines.join("\n"));
    write(&backward, &[lines[1].clone(), lines[0].clone()].join("\n"));
    write(&edited, &[lines[0].clone(), record("b", "Beta", "bees make wax")].join("\n"));
    let identity = |corpus: &Path, name: &str| {
        let index = dir.path().join(name);
        build(&[corpus.to_path_buf()], &index);
        Bm25Retriever::open(&index).expect("open").content_identity().expect("identity")
    };
    let one = identity(&forward, "one");
    assert!(one.starts_with("bm25 passages=2 "), "{one}");
    assert_eq!(one, identity(&backward, "two"));
    assert_ne!(one, identity(&edited, "three"));
}
