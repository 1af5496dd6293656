//! Converters from each release's own format to the normalised JSONL every hopwise tool reads:
//! one question per line, `{"id", "question", "answers", "type", "paragraphs": [{"title", "text",
//! "supporting"}], "decomposition"?, "origin", "meta"}`, plus a pooled corpus
//! `{"id", "title", "text"}` (every distinct paragraph, or the release's own corpus) to index.
//! Paragraph text has its runs of whitespace collapsed; `meta` keeps source fields, never
//! invented ones.

mod bamboogle;
mod hotpot_like;
mod multihop_rag;
mod musique;
mod strategyqa;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{EvalError, Result};

/// Largest archive member read into memory (the biggest needed, 2Wiki's dev.json, is ~60 MB).
const MAX_MEMBER_BYTES: u64 = 1 << 30;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paragraph {
    pub title: String,
    pub text: String,
    pub supporting: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corpus_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub article_id: Option<String>,
}

impl Paragraph {
    pub fn new(title: &str, text: &str, supporting: bool) -> Self {
        Self { title: collapse(title), text: collapse(text), supporting, corpus_id: None, article_id: None }
    }
}

/// One question in the normalised schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub id: String,
    pub question: String,
    pub answers: Vec<String>,
    #[serde(rename = "type")]
    pub qtype: Option<String>,
    pub paragraphs: Vec<Paragraph>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decomposition: Option<Value>,
    pub origin: String,
    pub meta: Map<String, Value>,
}

/// One passage of the retrieval corpus; `extra` carries source metadata (MultiHop-RAG's source,
/// date, url).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Passage {
    pub id: String,
    pub title: String,
    pub text: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default)]
pub struct Converted {
    pub records: Vec<Record>,
    pub corpus: Vec<Passage>,
}

/// The downloaded files of one dataset, looked up by their registry names.
pub struct Inputs<'a> {
    pub dataset: &'a str,
    pub dir: &'a Path,
    /// Where the files came from, for each record's `origin`.
    pub origin: String,
}

impl Inputs<'_> {
    pub fn fail(&self, message: impl Into<String>) -> EvalError {
        EvalError::Convert { name: self.dataset.to_string(), message: message.into() }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn read(&self, file: &str) -> Result<Vec<u8>> {
        let path = self.path(file);
        std::fs::read(&path).map_err(|e| EvalError::Read { path, source: e })
    }

    /// The member of the zip `file` whose file name is `base_name` (at any depth; macOS resource
    /// forks under `__MACOSX/` are skipped).
    pub fn zip_member(&self, file: &str, base_name: &str) -> Result<Vec<u8>> {
        let path = self.path(file);
        let handle = std::fs::File::open(&path).map_err(|e| EvalError::Read { path: path.clone(), source: e })?;
        let mut archive = zip::ZipArchive::new(handle)
            .map_err(|e| self.fail(format!("{file} is not a readable zip archive: {e}")))?;
        let wanted = (0..archive.len()).find(|&i| {
            archive.name_for_index(i).is_some_and(|n| {
                !n.starts_with("__MACOSX") && (n == base_name || n.ends_with(&format!("/{base_name}")))
            })
        });
        let Some(index) = wanted else {
            return Err(self.fail(format!("{file} holds no `{base_name}`")));
        };
        let member = archive.by_index(index).map_err(|e| self.fail(format!("{file}: {e}")))?;
        let mut bytes = Vec::new();
        member
            .take(MAX_MEMBER_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| self.fail(format!("{file}/{base_name} cannot be read: {e}")))?;
        Ok(bytes)
    }

    /// Parses JSON bytes, naming what they were in the error.
    pub fn json<T: serde::de::DeserializeOwned>(&self, what: &str, bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|e| self.fail(format!("{what} is not in the expected format: {e}")))
    }
}

/// Runs the converter `format` over the downloaded files.
pub fn convert(format: &str, inputs: &Inputs) -> Result<Converted> {
    let converted = match format {
        "hotpotqa" => hotpot_like::hotpotqa(inputs)?,
        "2wikimultihopqa" => hotpot_like::two_wiki(inputs)?,
        "musique" => musique::convert(inputs)?,
        "multihop_rag" => multihop_rag::convert(inputs)?,
        "strategyqa" => strategyqa::convert(inputs)?,
        "bamboogle" => bamboogle::convert(inputs)?,
        other => return Err(inputs.fail(format!("no converter for format `{other}`"))),
    };
    if converted.records.is_empty() {
        return Err(inputs.fail("the release holds no question"));
    }
    Ok(converted)
}

/// Runs of whitespace become one space; ends are trimmed.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Drops empty and repeated strings, keeping the first occurrence's order.
pub fn uniq(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items.into_iter().filter(|s| !s.trim().is_empty() && seen.insert(s.clone())).collect()
}

/// Every distinct (title, text) paragraph of the records, in order of first appearance.
pub fn pool_corpus(dataset: &str, records: &[Record]) -> Vec<Passage> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for p in records.iter().flat_map(|r| &r.paragraphs) {
        if seen.insert((p.title.clone(), p.text.clone())) {
            out.push(Passage {
                id: format!("{dataset}-{}", out.len()),
                title: p.title.clone(),
                text: p.text.clone(),
                extra: Map::new(),
            });
        }
    }
    out
}

/// Ids may be strings or numbers in the sources.
pub fn id_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_and_uniq() {
        assert_eq!(collapse("  a \n\t b  "), "a b");
        assert_eq!(uniq(vec!["x".into(), "".into(), "x".into(), "y".into()]), vec!["x", "y"]);
    }

    #[test]
    fn the_corpus_keeps_each_paragraph_once() {
        let record = |paragraphs: Vec<Paragraph>| Record {
            id: "1".into(),
            question: "q".into(),
            answers: vec!["a".into()],
            qtype: None,
            paragraphs,
            decomposition: None,
            origin: "o".into(),
            meta: Map::new(),
        };
        let a = Paragraph::new("A", "one", true);
        let b = Paragraph::new("B", "two", false);
        let corpus = pool_corpus("d", &[record(vec![a.clone(), b.clone()]), record(vec![b, a])]);
        assert_eq!(corpus.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), vec!["d-0", "d-1"]);
        assert_eq!(corpus[1].title, "B");
    }
}
