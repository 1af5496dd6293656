//! Corpus readers on real files: JSONL with good and bad lines, folders of text files, non-UTF-8
//! bytes and empty documents.

use std::fs;
use std::path::{Path, PathBuf};

use hopwise_index::{CorpusItem, CorpusReader, Document, IndexError, Issue, IssueKind};

fn read_all(inputs: &[PathBuf]) -> (Vec<Document>, Vec<Issue>) {
    let mut docs = Vec::new();
    let mut issues = Vec::new();
    for item in CorpusReader::open(inputs).expect("open corpus") {
        match item {
            CorpusItem::Document(doc) => docs.push(doc),
            CorpusItem::Issue(issue) => issues.push(issue),
        }
    }
    (docs, issues)
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, bytes).expect("write");
}

#[test]
fn jsonl_bad_lines_are_reported_with_file_and_line_and_the_rest_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.jsonl");
    let lines = [
        r#"{"id": "a", "title": "A", "text": "first document"}"#,
        r#"{"id": "b", "title": "B", "text": "#,
        r#"{"id": "c", "title": "C"}"#,
        "",
        r#"{"id": "d", "text": "no title, extra fields", "url": "http://x", "n": 3}"#,
        r#"{"id": "e", "title": "E", "text": "   "}"#,
        r#"[1, 2, 3]"#,
        r#"{"title": "no id", "text": "t"}"#,
        "{\"id\": \"f\", \"title\": \"F\", \"text\": \"last, no newline\"}",
    ];
    write(&path, lines.join("\n"));

    let (docs, issues) = read_all(std::slice::from_ref(&path));

    let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["a", "d", "f"]);
    assert_eq!(docs[1].title, "");
    assert_eq!(docs[0].location, format!("{}:1", path.display()));
    assert_eq!(docs[2].location, format!("{}:9", path.display()));

    let located: Vec<(String, IssueKind)> = issues.iter().map(|i| (i.location.clone(), i.kind)).collect();
    let at = |line: u32| format!("{}:{line}", path.display());
    assert_eq!(
        located,
        [
            (at(2), IssueKind::Malformed),
            (at(3), IssueKind::Malformed),
            (at(6), IssueKind::EmptyDocument),
            (at(7), IssueKind::Malformed),
            (at(8), IssueKind::Malformed),
        ]
    );
    assert!(issues[1].message.contains("\"text\""), "{}", issues[1]);
    assert!(issues[4].message.contains("\"id\""), "{}", issues[4]);
    assert!(issues[0].to_string().starts_with(&format!("{}:2: ", path.display())));
}

#[test]
fn folders_are_walked_recursively_in_name_order_and_only_text_files_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("docs");
    write(&root.join("b.txt"), "bee");
    write(&root.join("a/z.md"), "# Zed heading\n\nzed body");
    write(&root.join("a/c.TXT"), "sea");
    write(&root.join("a/records.jsonl"), r#"{"id": "r1", "title": "R", "text": "record"}"#);
    write(&root.join(".hidden/x.txt"), "hidden");
    write(&root.join("image.png"), [0u8, 1, 2]);
    write(&root.join("notes.rs"), "fn main() {}");

    let (docs, issues) = read_all(std::slice::from_ref(&root));

    assert!(issues.is_empty(), "{issues:?}");
    let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
    let expect = |rel: &str| format!("{}/{rel}", root.display());
    assert_eq!(ids, [expect("a/c.TXT"), "r1".into(), expect("a/z.md"), expect("b.txt")]);
    assert_eq!(docs[2].title, "Zed heading");
    assert_eq!(docs[3].title, "b");
    assert_eq!(docs[3].text, "bee");
}

#[test]
fn a_file_named_explicitly_is_read_whatever_its_extension() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("README");
    write(&path, "plain words");
    let (docs, issues) = read_all(&[path]);
    assert!(issues.is_empty());
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].title, "README");
}

#[test]
fn non_utf8_bytes_are_decoded_lossily_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let txt = dir.path().join("latin1.txt");
    write(&txt, b"caf\xe9 au lait");
    let jsonl = dir.path().join("bad.jsonl");
    let mut bytes = b"{\"id\": \"ok\", \"text\": \"fine\"}\n".to_vec();
    bytes.extend_from_slice(b"{\"id\": \"x\", \"title\": \"T\", \"text\": \"na\xefve\"}\n");
    bytes.extend_from_slice(b"{\"id\": \"y\", \"text\": \"\xff\xfe again\"}\n");
    write(&jsonl, bytes);

    let (docs, issues) = read_all(&[txt.clone(), jsonl.clone()]);

    let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
    assert_eq!(texts, ["caf\u{fffd} au lait", "fine", "na\u{fffd}ve", "\u{fffd}\u{fffd} again"]);
    // One warning per file, pointing at the first bad line.
    let warnings: Vec<(String, IssueKind)> = issues.iter().map(|i| (i.location.clone(), i.kind)).collect();
    assert_eq!(
        warnings,
        [
            (txt.display().to_string(), IssueKind::InvalidUtf8),
            (format!("{}:2", jsonl.display()), IssueKind::InvalidUtf8),
        ]
    );
}

#[test]
fn empty_documents_are_reported_and_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("empty.txt"), "");
    write(&dir.path().join("blank.md"), " \n\t\n");
    write(&dir.path().join("full.txt"), "\u{feff}content");
    let (docs, issues) = read_all(&[dir.path().to_path_buf()]);
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].text, "content", "the byte-order mark is dropped");
    assert_eq!(issues.len(), 2);
    assert!(issues.iter().all(|i| i.kind == IssueKind::EmptyDocument));
}

#[test]
fn a_byte_order_mark_does_not_break_the_first_jsonl_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bom.jsonl");
    write(&path, "\u{feff}{\"id\": \"a\", \"text\": \"t\"}\r\n{\"id\": \"b\", \"text\": \"u\"}\r\n");
    let (docs, issues) = read_all(&[path]);
    assert!(issues.is_empty(), "{issues:?}");
    assert_eq!(docs.len(), 2);
}

#[test]
fn a_missing_input_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.jsonl");
    let err = CorpusReader::open(std::slice::from_ref(&missing)).err().expect("an error");
    assert!(matches!(err, IndexError::InputNotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
}

#[test]
fn progress_counters_reach_the_total() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.jsonl");
    write(&path, "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"text\": \"y\"}\n");
    let mut reader = CorpusReader::open(&[path]).expect("open");
    assert_eq!(reader.bytes_read(), 0);
    let total = reader.bytes_total();
    assert!(total > 0);
    while reader.next().is_some() {}
    assert_eq!(reader.bytes_read(), total);
}
