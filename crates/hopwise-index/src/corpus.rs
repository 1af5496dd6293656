//! Corpus readers: JSONL records and plain-text / Markdown files, streamed one document at a time.
//!
//! Inputs are files or folders. A folder is walked recursively in file-name order (so two runs read
//! the same documents in the same order); hidden entries are skipped and only `.jsonl`, `.ndjson`,
//! `.txt`, `.text`, `.md` and `.markdown` files are read. A file named explicitly is read as JSONL if
//! its extension is `.jsonl`/`.ndjson` and as one plain-text document otherwise.
//!
//! JSONL is streamed line by line, so a corpus never has to fit in memory; a text file is one document
//! and is read whole.
//!
//! Problems with the content never abort the read: a malformed JSONL line, an unreadable file, bytes
//! that are not UTF-8 (decoded lossily) and empty documents each come out as an [`Issue`] naming
//! `file:line` (or `file`), and reading goes on. Only an input path that does not exist is an error.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IndexError, Result};

const UTF8_BOM: &str = "\u{feff}";

/// One source document, before chunking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The JSONL `id`, or for a text file its path as named (lexically cleaned, `/`-separated).
    pub id: String,
    pub title: String,
    pub text: String,
    /// Where it came from: `file:line` for JSONL, `file` for text files.
    pub location: String,
}

/// What kind of problem an [`Issue`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    /// A JSONL line that is not a usable record; the line was skipped.
    Malformed,
    /// A file (or the rest of one) could not be read; it was skipped.
    Unreadable,
    /// Bytes that are not UTF-8; they were replaced with U+FFFD and the text kept.
    InvalidUtf8,
    /// A document with no text; it was skipped.
    EmptyDocument,
    /// Anything else worth telling the user that did not drop content.
    Notice,
}

impl IssueKind {
    /// Whether content was dropped (as opposed to kept with a warning).
    pub fn drops_content(self) -> bool {
        matches!(self, Self::Malformed | Self::Unreadable | Self::EmptyDocument)
    }
}

/// A problem found while reading, located as `file:line` or `file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub location: String,
    pub kind: IssueKind,
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// What the reader yields: a document, or a problem it stepped over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorpusItem {
    Document(Document),
    Issue(Issue),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Jsonl,
    Text,
}

#[derive(Debug)]
struct CorpusFile {
    path: PathBuf,
    format: Format,
    size: u64,
}

struct OpenJsonl {
    path: PathBuf,
    reader: BufReader<File>,
    line_no: u64,
    consumed: u64,
    warned_utf8: bool,
}

/// Streams documents out of a list of files and folders; see the module docs for the rules.
pub struct CorpusReader {
    files: std::vec::IntoIter<CorpusFile>,
    current: Option<OpenJsonl>,
    pending: VecDeque<CorpusItem>,
    current_path: Option<PathBuf>,
    bytes_total: u64,
    bytes_done: u64,
    line_buf: Vec<u8>,
}

impl CorpusReader {
    /// Lists the files to read. Fails only if an input path does not exist or cannot be inspected;
    /// unreadable entries inside folders are reported as issues while iterating.
    pub fn open(inputs: &[PathBuf]) -> Result<Self> {
        let mut files = Vec::new();
        let mut pending = VecDeque::new();
        for input in inputs {
            let meta = std::fs::metadata(input).map_err(|err| match err.kind() {
                std::io::ErrorKind::NotFound => IndexError::InputNotFound { path: input.clone() },
                _ => IndexError::io(input, err),
            })?;
            if meta.is_dir() {
                collect_folder(input, &mut files, &mut pending);
            } else if !meta.is_file() {
                // A device or a pipe never ends (or never starts): reading one would exhaust memory
                // or hang.
                return Err(IndexError::NotARegularFile { path: input.clone() });
            } else {
                let format = if has_extension(input, &["jsonl", "ndjson"]) { Format::Jsonl } else { Format::Text };
                files.push(CorpusFile { path: input.clone(), format, size: meta.len() });
            }
        }
        let bytes_total = files.iter().map(|f| f.size).sum();
        Ok(Self {
            files: files.into_iter(),
            current: None,
            pending,
            current_path: None,
            bytes_total,
            bytes_done: 0,
            line_buf: Vec::new(),
        })
    }

    /// Total size of the files to read, for progress reporting.
    pub fn bytes_total(&self) -> u64 {
        self.bytes_total
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_done + self.current.as_ref().map_or(0, |c| c.consumed)
    }

    /// The file being read now.
    pub fn current_file(&self) -> Option<&Path> {
        self.current_path.as_deref()
    }

    fn next_jsonl_item(&mut self) -> Option<CorpusItem> {
        let open = self.current.as_mut()?;
        loop {
            self.line_buf.clear();
            match open.reader.read_until(b'\n', &mut self.line_buf) {
                Ok(0) => {
                    self.bytes_done += open.consumed;
                    self.current = None;
                    return None;
                }
                Ok(n) => {
                    open.consumed += n as u64;
                    open.line_no += 1;
                    let location = format!("{}:{}", open.path.display(), open.line_no);
                    let (line, lossy) = decode(&self.line_buf);
                    let line: &str = &line;
                    let line = if open.line_no == 1 { line.trim_start_matches(UTF8_BOM) } else { line };
                    if line.trim().is_empty() {
                        continue;
                    }
                    let item = parse_record(line, &location);
                    if lossy && !open.warned_utf8 {
                        open.warned_utf8 = true;
                        self.pending.push_back(item);
                        return Some(CorpusItem::Issue(Issue {
                            location,
                            kind: IssueKind::InvalidUtf8,
                            message:
                                "not valid UTF-8 (first such line in this file); invalid bytes replaced with U+FFFD"
                                    .into(),
                        }));
                    }
                    return Some(item);
                }
                Err(err) => {
                    let location = format!("{}:{}", open.path.display(), open.line_no + 1);
                    self.bytes_done += open.consumed;
                    self.current = None;
                    return Some(CorpusItem::Issue(Issue {
                        location,
                        kind: IssueKind::Unreadable,
                        message: format!("read error ({err}); rest of the file skipped"),
                    }));
                }
            }
        }
    }

    fn start_file(&mut self, file: CorpusFile) -> Option<CorpusItem> {
        self.current_path = Some(file.path.clone());
        match file.format {
            Format::Jsonl => match File::open(&file.path) {
                Ok(handle) => {
                    self.current = Some(OpenJsonl {
                        path: file.path,
                        reader: BufReader::with_capacity(1 << 16, handle),
                        line_no: 0,
                        consumed: 0,
                        warned_utf8: false,
                    });
                    None
                }
                Err(err) => {
                    self.bytes_done += file.size;
                    Some(unreadable(&file.path, &err))
                }
            },
            Format::Text => {
                self.bytes_done += file.size;
                match std::fs::read(&file.path) {
                    Ok(bytes) => {
                        let (doc, warning) = text_document(&file.path, &bytes);
                        match warning {
                            Some(w) => {
                                self.pending.push_back(doc);
                                Some(CorpusItem::Issue(w))
                            }
                            None => Some(doc),
                        }
                    }
                    Err(err) => Some(unreadable(&file.path, &err)),
                }
            }
        }
    }
}

impl Iterator for CorpusReader {
    type Item = CorpusItem;

    fn next(&mut self) -> Option<CorpusItem> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.current.is_some() {
                if let Some(item) = self.next_jsonl_item() {
                    return Some(item);
                }
                continue;
            }
            let file = self.files.next()?;
            if let Some(item) = self.start_file(file) {
                return Some(item);
            }
        }
    }
}

const FOLDER_EXTENSIONS: &[&str] = &["jsonl", "ndjson", "txt", "text", "md", "markdown"];

fn collect_folder(root: &Path, files: &mut Vec<CorpusFile>, pending: &mut VecDeque<CorpusItem>) {
    let walker = walkdir::WalkDir::new(root).follow_links(true).sort_by_file_name().into_iter();
    let entries = walker.filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                let path = err.path().unwrap_or(root).to_path_buf();
                pending.push_back(CorpusItem::Issue(Issue {
                    location: path.display().to_string(),
                    kind: IssueKind::Unreadable,
                    message: format!("cannot list ({err}); skipped"),
                }));
                continue;
            }
        };
        if !entry.file_type().is_file() || !has_extension(entry.path(), FOLDER_EXTENSIONS) {
            continue;
        }
        let format = if has_extension(entry.path(), &["jsonl", "ndjson"]) { Format::Jsonl } else { Format::Text };
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        files.push(CorpusFile { path: entry.into_path(), format, size });
    }
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

fn unreadable(path: &Path, err: &std::io::Error) -> CorpusItem {
    CorpusItem::Issue(Issue {
        location: path.display().to_string(),
        kind: IssueKind::Unreadable,
        message: format!("cannot read ({err}); skipped"),
    })
}

/// Decodes bytes as UTF-8, replacing invalid sequences; the flag says whether any were replaced.
fn decode(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, bool) {
    let text = String::from_utf8_lossy(bytes);
    let lossy = matches!(text, std::borrow::Cow::Owned(_));
    (text, lossy)
}

#[derive(Deserialize)]
struct RawRecord {
    /// `Some(Null)` for `"id": null`, which is not a missing id.
    #[serde(default, deserialize_with = "present")]
    id: Option<serde_json::Value>,
    title: Option<String>,
    text: Option<String>,
}

/// A field that is present, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<serde_json::Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// Parses one JSONL line into a document, or an issue saying why it was skipped.
fn parse_record(line: &str, location: &str) -> CorpusItem {
    let malformed = |message: String| {
        CorpusItem::Issue(Issue { location: location.to_string(), kind: IssueKind::Malformed, message })
    };
    let record: RawRecord = match serde_json::from_str(line) {
        Ok(record) => record,
        Err(err) => return malformed(describe_json_error(&err)),
    };
    let id = match record.id {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s,
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(serde_json::Value::String(_)) => return malformed("empty \"id\"; line skipped".into()),
        Some(_) => return malformed("\"id\" must be a string or a number; line skipped".into()),
        None => return malformed("missing \"id\" field; line skipped".into()),
    };
    let Some(text) = record.text else {
        return malformed(format!("record {id:?} has no \"text\" field; line skipped"));
    };
    if text.trim().is_empty() {
        return CorpusItem::Issue(Issue {
            location: location.to_string(),
            kind: IssueKind::EmptyDocument,
            message: format!("record {id:?} has empty text; skipped"),
        });
    }
    CorpusItem::Document(Document { id, title: record.title.unwrap_or_default(), text, location: location.into() })
}

/// serde_json's message without its "at line 1 column N" suffix (the line is ours, not serde's).
fn describe_json_error(err: &serde_json::Error) -> String {
    let full = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full);
    format!("invalid JSON record ({message}, column {}); line skipped", err.column())
}

/// Builds the document for a plain-text or Markdown file, plus a warning if it was not UTF-8.
fn text_document(path: &Path, bytes: &[u8]) -> (CorpusItem, Option<Issue>) {
    let location = path.display().to_string();
    let (text, lossy) = decode(bytes);
    let text = text.trim_start_matches(UTF8_BOM);
    let warning = lossy.then(|| Issue {
        location: location.clone(),
        kind: IssueKind::InvalidUtf8,
        message: "not valid UTF-8; invalid bytes replaced with U+FFFD".into(),
    });
    let id = clean_path_id(path);
    if text.trim().is_empty() {
        let issue = Issue { location, kind: IssueKind::EmptyDocument, message: "empty file; skipped".into() };
        return (CorpusItem::Issue(issue), warning);
    }
    let title = markdown_title(path, text)
        .unwrap_or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| id.clone()));
    (CorpusItem::Document(Document { id, title, text: text.to_string(), location }), warning)
}

/// A Markdown file's title: its first line if that is a `# heading`.
fn markdown_title(path: &Path, text: &str) -> Option<String> {
    if !has_extension(path, &["md", "markdown"]) {
        return None;
    }
    let first = text.lines().find(|l| !l.trim().is_empty())?;
    let heading = first.trim().strip_prefix("# ")?.trim();
    (!heading.is_empty()).then(|| heading.to_string())
}

/// The path as named, without `.` components or doubled separators, joined with `/`, so that
/// `./docs//a.md` and `docs/a.md` give the same document id.
fn clean_path_id(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut absolute = false;
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::RootDir => absolute = true,
            Component::Prefix(p) => parts.push(p.as_os_str().to_string_lossy().into_owned()),
            Component::ParentDir => parts.push("..".into()),
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_error_is_described_without_serde_line_number() {
        let item = parse_record("{\"id\": \"a\", \"text\": ", "f.jsonl:7");
        let CorpusItem::Issue(issue) = item else { panic!("expected an issue, got {item:?}") };
        assert_eq!(issue.kind, IssueKind::Malformed);
        assert_eq!(issue.location, "f.jsonl:7");
        assert!(!issue.message.contains("at line 1"), "{}", issue.message);
        assert!(issue.message.contains("column"), "{}", issue.message);
    }

    #[test]
    fn numeric_ids_and_missing_titles_are_accepted() {
        let item = parse_record(r#"{"id": 42, "text": "hello", "extra": [1, 2]}"#, "f:1");
        let CorpusItem::Document(doc) = item else { panic!("expected a document, got {item:?}") };
        assert_eq!(doc.id, "42");
        assert_eq!(doc.title, "");
    }

    #[test]
    fn ids_of_the_wrong_type_are_malformed() {
        for line in [r#"{"id": null, "text": "x"}"#, r#"{"id": ["a"], "text": "x"}"#, r#"{"id": " ", "text": "x"}"#] {
            let item = parse_record(line, "f:1");
            assert!(matches!(item, CorpusItem::Issue(Issue { kind: IssueKind::Malformed, .. })), "{line}: {item:?}");
        }
        let CorpusItem::Issue(issue) = parse_record(r#"{"id": null, "text": "x"}"#, "f:1") else { panic!() };
        assert!(issue.message.contains("must be a string or a number"), "{}", issue.message);
    }

    #[test]
    fn path_ids_are_cleaned() {
        assert_eq!(clean_path_id(Path::new("./docs//a/./b.md")), "docs/a/b.md");
        assert_eq!(clean_path_id(Path::new("/tmp/x.txt")), "/tmp/x.txt");
    }

    #[test]
    fn markdown_heading_becomes_title_only_for_markdown() {
        assert_eq!(markdown_title(Path::new("a.md"), "\n# Hello world\ntext").as_deref(), Some("Hello world"));
        assert_eq!(markdown_title(Path::new("a.txt"), "# Hello"), None);
        assert_eq!(markdown_title(Path::new("a.md"), "## Sub\n"), None);
    }
}
