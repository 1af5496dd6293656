//! Dataset loaders. One [`Example`] shape for every source: the normalised JSONL of
//! evaluation data (`hopwise data fetch`, and the sample in `data/sample`) and the original formats of HotpotQA, 2WikiMultiHopQA,
//! MuSiQue, MultiHop-RAG, StrategyQA and FEVER. The format is recognised per record from its keys,
//! so a file may be JSONL or one JSON array.
//!
//! A record with a missing or mistyped field, a line that is not valid UTF-8 and a line longer than
//! [`MAX_LINE_BYTES`] are skipped and reported with their `file:line`; loading fails only when nothing
//! loads. Only regular files are read (a device such as `/dev/zero` or a FIFO would never end).

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{EvalError, Result};

/// What a prediction is scored as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Short-answer QA: cover-EM, EM, F1 against the gold aliases.
    #[default]
    Qa,
    /// Claim verification (FEVER): label accuracy over SUPPORTS / REFUTES / NOT ENOUGH INFO.
    FactCheck,
}

/// A paragraph given with the example (the distractor setting's context).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Paragraph {
    pub title: String,
    pub text: String,
    pub supporting: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Example {
    pub id: String,
    /// The question, or the claim for fact checking.
    pub question: String,
    /// Gold answer and its aliases; for fact checking the label.
    pub answers: Vec<String>,
    /// Question type (bridge, comparison, 2hop, …) where the source has one.
    pub qtype: Option<String>,
    pub task: Task,
    /// Titles of the gold evidence paragraphs / pages.
    pub evidence_titles: Vec<String>,
    /// Corpus ids of the gold evidence, where the source links them.
    pub evidence_ids: Vec<String>,
    pub paragraphs: Vec<Paragraph>,
}

impl Example {
    /// The text given to a strategy: the question, or for fact checking an instruction around the claim.
    pub fn prompt_question(&self) -> String {
        match self.task {
            Task::Qa => self.question.clone(),
            Task::FactCheck => format!(
                "Is the following claim supported or refuted by the facts, or is there not enough information? \
                 Answer SUPPORTS, REFUTES, or NOT ENOUGH INFO. Claim: {}",
                self.question
            ),
        }
    }
}

/// A problem with one record, kept so the caller can report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedRecord {
    /// `file:line` (JSONL) or `file:item N` (JSON array).
    pub location: String,
    pub message: String,
}

impl std::fmt::Display for SkippedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

#[derive(Debug, Clone)]
pub struct Dataset {
    /// The file stem, e.g. `hotpotqa`; the column name in reports.
    pub name: String,
    pub path: PathBuf,
    pub examples: Vec<Example>,
    pub skipped: Vec<SkippedRecord>,
}

pub const FEVER_LABELS: [&str; 3] = ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"];

/// The longest JSONL line read; longer ones are skipped. Dataset records are kilobytes (a HotpotQA
/// record with its ten paragraphs is about 5 KiB).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// The largest file read as one JSON array (the original HotpotQA dev set is 47 MB).
pub const MAX_ARRAY_FILE_BYTES: u64 = 1024 * 1024 * 1024;

/// Loads a dataset file. Records that cannot be read are skipped and listed in `skipped`; an error is
/// returned only if the file cannot be read or no record loads.
pub fn load_dataset(path: &Path) -> Result<Dataset> {
    let mut reader = open_regular(path)?;
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("dataset").to_string();
    let file = path.display().to_string();
    let mut examples = Vec::new();
    let mut skipped = Vec::new();
    let mut seen = HashSet::new();
    let mut push = |location: String, result: std::result::Result<Example, String>| match result {
        Ok(ex) if !seen.insert(ex.id.clone()) => {
            skipped.push(SkippedRecord { location, message: format!("duplicate id `{}`", ex.id) })
        }
        Ok(ex) => examples.push(ex),
        Err(message) => skipped.push(SkippedRecord { location, message }),
    };
    let read_err = |e| EvalError::Read { path: path.to_path_buf(), source: e };
    if first_byte(&mut reader).map_err(read_err)? == Some(b'[') {
        let mut src = Vec::new();
        reader.take(MAX_ARRAY_FILE_BYTES + 1).read_to_end(&mut src).map_err(read_err)?;
        if src.len() as u64 > MAX_ARRAY_FILE_BYTES {
            return Err(EvalError::Dataset {
                path: path.to_path_buf(),
                message: format!(
                    "a JSON array larger than {} MiB; convert it to JSONL (one record per line)",
                    MAX_ARRAY_FILE_BYTES / (1024 * 1024)
                ),
            });
        }
        let items: Vec<Value> = serde_json::from_slice(&src)
            .map_err(|e| EvalError::Dataset { path: path.to_path_buf(), message: format!("not a JSON array: {e}") })?;
        for (i, item) in items.into_iter().enumerate() {
            push(format!("{file}:item {i}"), parse_record(item, i));
        }
    } else {
        let mut line = Vec::new();
        let mut i = 0usize;
        loop {
            let read = next_line(&mut reader, &mut line, MAX_LINE_BYTES).map_err(read_err)?;
            let location = format!("{file}:{}", i + 1);
            match read {
                Line::End => break,
                Line::TooLong => push(location, Err(format!("line longer than {} MiB", MAX_LINE_BYTES >> 20))),
                Line::Complete => match std::str::from_utf8(&line) {
                    Err(e) => push(location, Err(format!("not valid UTF-8 (byte {})", e.valid_up_to() + 1))),
                    Ok(text) if text.trim().is_empty() => {}
                    Ok(text) => {
                        let result = serde_json::from_str::<Value>(text)
                            .map_err(|e| format!("not JSON: {e}"))
                            .and_then(|v| parse_record(v, i));
                        push(location, result);
                    }
                },
            }
            i += 1;
        }
    }
    if examples.is_empty() {
        let first = skipped.first().map(ToString::to_string).unwrap_or_else(|| "the file is empty".into());
        return Err(EvalError::EmptyDataset { path: path.to_path_buf(), skipped: skipped.len(), first });
    }
    Ok(Dataset { name, path: path.to_path_buf(), examples, skipped })
}

/// Opens `path` if it is a regular file (or a link to one).
pub(crate) fn open_regular(path: &Path) -> Result<BufReader<File>> {
    let read_err = |e| EvalError::Read { path: path.to_path_buf(), source: e };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if !meta.is_file() {
        let what = if meta.is_dir() { "a directory" } else { "not a regular file (a device, FIFO or socket)" };
        return Err(EvalError::Dataset { path: path.to_path_buf(), message: format!("{what}; give a dataset file") });
    }
    Ok(BufReader::new(File::open(path).map_err(read_err)?))
}

/// The first byte after whitespace and a UTF-8 byte-order mark, which are consumed; the byte is not.
fn first_byte(reader: &mut impl BufRead) -> std::io::Result<Option<u8>> {
    loop {
        let buf = reader.fill_buf()?;
        let Some(&b) = buf.first() else { return Ok(None) };
        if buf.starts_with(b"\xEF\xBB\xBF") {
            reader.consume(3);
        } else if b.is_ascii_whitespace() {
            reader.consume(1);
        } else {
            return Ok(Some(b));
        }
    }
}

pub(crate) enum Line {
    End,
    Complete,
    /// Longer than the limit; its bytes were read and dropped.
    TooLong,
}

/// Reads one line (without its `\n` or `\r\n`) into `line`, holding at most `max` bytes of it.
pub(crate) fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    line.clear();
    let (mut any, mut too_long) = (false, false);
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        any = true;
        let newline = buf.iter().position(|&b| b == b'\n');
        let part = &buf[..newline.unwrap_or(buf.len())];
        if !too_long && line.len() + part.len() > max {
            too_long = true;
            line.clear();
        }
        if !too_long {
            line.extend_from_slice(part);
        }
        let used = part.len() + usize::from(newline.is_some());
        reader.consume(used);
        if newline.is_some() {
            break;
        }
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(match (any, too_long) {
        (false, _) => Line::End,
        (true, true) => Line::TooLong,
        (true, false) => Line::Complete,
    })
}

/// Recognises one record's format by its keys and converts it. `index` names records that carry no id.
pub fn parse_record(value: Value, index: usize) -> std::result::Result<Example, String> {
    let Value::Object(obj) = value else {
        return Err("a record must be a JSON object".into());
    };
    let has = |k: &str| obj.contains_key(k);
    for key in ["id", "_id", "qid"] {
        check_id(&obj, key)?;
    }
    let example = if has("answers") {
        from_normalised(obj)?
    } else if has("_id") || (has("context") && has("supporting_facts")) {
        from_hotpot_like(obj)?
    } else if has("answer_aliases") || (has("paragraphs") && has("answer")) {
        from_musique(obj)?
    } else if has("query") || has("evidence_list") {
        from_multihop_rag(obj, index)?
    } else if has("claim") || has("label") {
        from_fever(obj)?
    } else if has("qid") || obj.get("answer").is_some_and(Value::is_boolean) {
        from_strategyqa(obj)?
    } else {
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        return Err(format!("unrecognised record format (keys: {})", keys.join(", ")));
    };
    if example.question.trim().is_empty() {
        return Err("empty question".into());
    }
    if example.answers.iter().all(|a| a.trim().is_empty()) {
        return Err("no gold answer".into());
    }
    Ok(example)
}

fn field<T: for<'de> Deserialize<'de>>(obj: Map<String, Value>) -> std::result::Result<T, String> {
    serde_json::from_value(Value::Object(obj)).map_err(|e| e.to_string())
}

/// A present but unusable id is named as such (serde would call `null` a variant mismatch).
fn check_id(obj: &Map<String, Value>, key: &str) -> std::result::Result<(), String> {
    match obj.get(key) {
        None | Some(Value::String(_) | Value::Number(_)) => Ok(()),
        Some(other) => {
            let kind = match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Array(_) => "an array",
                _ => "an object",
            };
            Err(format!("`{key}` is {kind}; it must be a string or a number"))
        }
    }
}

/// Ids may be strings or numbers in the sources.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyId {
    Text(String),
    Number(i64),
}

impl AnyId {
    fn into_string(self) -> String {
        match self {
            Self::Text(s) => s,
            Self::Number(n) => n.to_string(),
        }
    }
}

fn uniq(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items.into_iter().filter(|s| !s.is_empty() && seen.insert(s.clone())).collect()
}

fn is_fever_label_set(answers: &[String]) -> bool {
    !answers.is_empty() && answers.iter().all(|a| FEVER_LABELS.contains(&a.trim()))
}

#[derive(Deserialize)]
struct NormalisedRecord {
    id: AnyId,
    question: String,
    answers: Vec<String>,
    #[serde(rename = "type", default)]
    qtype: Option<String>,
    #[serde(default)]
    paragraphs: Vec<NormalisedParagraph>,
}

#[derive(Deserialize)]
struct NormalisedParagraph {
    #[serde(default)]
    title: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    supporting: bool,
    #[serde(default)]
    corpus_id: Option<String>,
}

fn from_normalised(obj: Map<String, Value>) -> std::result::Result<Example, String> {
    let meta_pointers = obj.get("meta").and_then(|m| m.get("evidence_pointers")).cloned();
    let r: NormalisedRecord = field(obj)?;
    let task = if is_fever_label_set(&r.answers) { Task::FactCheck } else { Task::Qa };
    let mut evidence_titles = uniq(r.paragraphs.iter().filter(|p| p.supporting).map(|p| p.title.clone()));
    if task == Task::FactCheck {
        evidence_titles.extend(fever_pages(meta_pointers.as_ref()));
    }
    Ok(Example {
        id: r.id.into_string(),
        question: r.question,
        answers: r.answers,
        qtype: r.qtype,
        task,
        evidence_titles: uniq(evidence_titles),
        evidence_ids: uniq(r.paragraphs.iter().filter(|p| p.supporting).filter_map(|p| p.corpus_id.clone())),
        paragraphs: r
            .paragraphs
            .into_iter()
            .map(|p| Paragraph { title: p.title, text: p.text, supporting: p.supporting })
            .collect(),
    })
}

/// Page titles out of FEVER evidence pointers (`[page, sentence]` pairs, possibly nested), with
/// Wikipedia's underscores turned into spaces.
fn fever_pages(pointers: Option<&Value>) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        if let Value::Array(items) = v {
            // A pointer is an array whose string element is the page (`[page, idx]` or `[ann, ev, page, idx]`).
            if items.iter().any(|x| x.is_number()) {
                out.extend(items.iter().filter_map(Value::as_str).map(|s| s.replace('_', " ")));
            } else {
                items.iter().for_each(|x| walk(x, out));
            }
        }
    }
    let mut out = Vec::new();
    if let Some(v) = pointers {
        walk(v, &mut out);
    }
    out
}

/// HotpotQA and 2WikiMultiHopQA (the latter adds `evidences`, which is not needed here).
#[derive(Deserialize)]
struct HotpotRecord {
    #[serde(rename = "_id")]
    id: AnyId,
    question: String,
    answer: String,
    #[serde(rename = "type", default)]
    qtype: Option<String>,
    #[serde(default)]
    supporting_facts: Vec<(String, Value)>,
    context: Vec<(String, Vec<String>)>,
}

fn from_hotpot_like(obj: Map<String, Value>) -> std::result::Result<Example, String> {
    let r: HotpotRecord = field(obj)?;
    let gold: Vec<String> = uniq(r.supporting_facts.iter().map(|(t, _)| t.clone()));
    let paragraphs = r
        .context
        .into_iter()
        .map(|(title, sentences)| {
            let supporting = gold.contains(&title);
            Paragraph { title, text: sentences.concat().trim().to_string(), supporting }
        })
        .collect();
    Ok(Example {
        id: r.id.into_string(),
        question: r.question,
        answers: vec![r.answer],
        qtype: r.qtype,
        task: Task::Qa,
        evidence_titles: gold,
        evidence_ids: Vec::new(),
        paragraphs,
    })
}

#[derive(Deserialize)]
struct MusiqueRecord {
    id: AnyId,
    question: String,
    answer: String,
    #[serde(default)]
    answer_aliases: Vec<String>,
    paragraphs: Vec<MusiqueParagraph>,
}

#[derive(Deserialize)]
struct MusiqueParagraph {
    #[serde(default)]
    title: String,
    paragraph_text: String,
    #[serde(default)]
    is_supporting: bool,
}

fn from_musique(obj: Map<String, Value>) -> std::result::Result<Example, String> {
    let r: MusiqueRecord = field(obj)?;
    let id = r.id.into_string();
    // MuSiQue ids start with the hop pattern: `2hop__…`, `3hop1__…`.
    let qtype = id.split_once("__").map(|(t, _)| t.to_string());
    let mut answers = vec![r.answer];
    answers.extend(r.answer_aliases);
    Ok(Example {
        id,
        question: r.question,
        answers: uniq(answers),
        qtype,
        task: Task::Qa,
        evidence_titles: uniq(r.paragraphs.iter().filter(|p| p.is_supporting).map(|p| p.title.clone())),
        evidence_ids: Vec::new(),
        paragraphs: r
            .paragraphs
            .into_iter()
            .map(|p| Paragraph { title: p.title, text: p.paragraph_text, supporting: p.is_supporting })
            .collect(),
    })
}

#[derive(Deserialize)]
struct MultihopRagRecord {
    #[serde(default)]
    id: Option<AnyId>,
    query: String,
    answer: String,
    #[serde(default)]
    question_type: Option<String>,
    evidence_list: Vec<MultihopRagEvidence>,
}

#[derive(Deserialize)]
struct MultihopRagEvidence {
    #[serde(default)]
    title: String,
    #[serde(default)]
    fact: String,
}

fn from_multihop_rag(obj: Map<String, Value>, index: usize) -> std::result::Result<Example, String> {
    let r: MultihopRagRecord = field(obj)?;
    Ok(Example {
        id: r.id.map(AnyId::into_string).unwrap_or_else(|| format!("multihoprag-{index}")),
        question: r.query,
        answers: vec![r.answer],
        qtype: r.question_type,
        task: Task::Qa,
        evidence_titles: uniq(r.evidence_list.iter().map(|e| e.title.clone())),
        evidence_ids: Vec::new(),
        paragraphs: r
            .evidence_list
            .into_iter()
            .map(|e| Paragraph { title: e.title, text: e.fact, supporting: true })
            .collect(),
    })
}

#[derive(Deserialize)]
struct StrategyQaRecord {
    qid: AnyId,
    question: String,
    answer: bool,
}

fn from_strategyqa(obj: Map<String, Value>) -> std::result::Result<Example, String> {
    let r: StrategyQaRecord = field(obj)?;
    Ok(Example {
        id: r.qid.into_string(),
        question: r.question,
        answers: vec![if r.answer { "yes" } else { "no" }.to_string()],
        qtype: Some("yes/no".into()),
        task: Task::Qa,
        ..Default::default()
    })
}

#[derive(Deserialize)]
struct FeverRecord {
    id: AnyId,
    claim: String,
    label: String,
    #[serde(default)]
    evidence: Value,
}

fn from_fever(obj: Map<String, Value>) -> std::result::Result<Example, String> {
    let r: FeverRecord = field(obj)?;
    let label = r.label.trim().to_uppercase();
    if !FEVER_LABELS.contains(&label.as_str()) {
        return Err(format!("unknown FEVER label `{}`", r.label));
    }
    Ok(Example {
        id: r.id.into_string(),
        question: r.claim,
        answers: vec![label.clone()],
        qtype: Some(label),
        task: Task::FactCheck,
        evidence_titles: uniq(fever_pages(Some(&r.evidence))),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_every_original_format() {
        let hotpot = json!({"_id": "h1", "question": "Q?", "answer": "A", "type": "bridge", "level": "hard",
            "supporting_facts": [["T1", 0], ["T2", 1], ["T1", 2]],
            "context": [["T1", ["One. ", "Two."]], ["T3", ["Three."]], ["T2", ["Four."]]]});
        let e = parse_record(hotpot, 0).expect("hotpot");
        assert_eq!((e.id.as_str(), e.qtype.as_deref()), ("h1", Some("bridge")));
        assert_eq!(e.evidence_titles, vec!["T1", "T2"]);
        assert_eq!(e.paragraphs[0].text, "One. Two.");
        assert!(!e.paragraphs[1].supporting);

        let wiki = json!({"_id": "w1", "question": "Q?", "answer": "A", "type": "comparison",
            "supporting_facts": [["X", 0]], "context": [["X", ["x"]]], "evidences": [["X", "r", "Y"]]});
        assert_eq!(parse_record(wiki, 0).expect("2wiki").qtype.as_deref(), Some("comparison"));

        let musique = json!({"id": "3hop1__1_2_3", "question": "Q?", "answer": "A", "answer_aliases": ["A1", "A"],
            "paragraphs": [{"idx": 0, "title": "P", "paragraph_text": "t", "is_supporting": true},
                           {"idx": 1, "title": "R", "paragraph_text": "u", "is_supporting": false}], "answerable": true});
        let m = parse_record(musique, 0).expect("musique");
        assert_eq!(m.answers, vec!["A", "A1"]);
        assert_eq!(m.qtype.as_deref(), Some("3hop1"));
        assert_eq!(m.evidence_titles, vec!["P"]);

        let rag = json!({"query": "Q?", "answer": "Yes", "question_type": "comparison_query",
            "evidence_list": [{"title": "Art", "fact": "f", "source": "s"}]});
        let r = parse_record(rag, 7).expect("multihop-rag");
        assert_eq!((r.id.as_str(), r.evidence_titles.len()), ("multihoprag-7", 1));

        let sqa = json!({"qid": "s1", "term": "t", "question": "Is it?", "answer": false, "facts": []});
        assert_eq!(parse_record(sqa, 0).expect("strategyqa").answers, vec!["no"]);

        let fever = json!({"id": 42, "verifiable": "VERIFIABLE", "label": "REFUTES", "claim": "C.",
            "evidence": [[[1, 2, "Some_Page", 0]], [[3, 4, "Other", 2]]]});
        let f = parse_record(fever, 0).expect("fever");
        assert_eq!((f.id.as_str(), f.task), ("42", Task::FactCheck));
        assert_eq!(f.evidence_titles, vec!["Some Page", "Other"]);
        assert!(f.prompt_question().contains("Claim: C."));
    }

    #[test]
    fn reads_the_normalised_schema() {
        let n = json!({"id": "x", "question": "Q?", "answers": ["A", "a1"], "type": "inference_query",
            "paragraphs": [{"title": "T", "text": "t", "supporting": true, "corpus_id": "c1"},
                           {"title": "U", "text": "u", "supporting": false}], "origin": "o", "meta": {}});
        let e = parse_record(n, 0).expect("normalised");
        assert_eq!(e.evidence_ids, vec!["c1"]);
        assert_eq!(e.evidence_titles, vec!["T"]);
        let fever = json!({"id": "fever-1", "question": "Claim.", "answers": ["SUPPORTS"], "type": "SUPPORTS",
            "paragraphs": [], "meta": {"evidence_pointers": [["Page_A", 3]]}});
        let f = parse_record(fever, 0).expect("normalised fever");
        assert_eq!(f.task, Task::FactCheck);
        assert_eq!(f.evidence_titles, vec!["Page A"]);
    }

    #[test]
    fn bad_lines_are_skipped_with_their_location() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mini.jsonl");
        let lines = [
            r#"{"id": "1", "question": "Q1?", "answers": ["a"]}"#,
            r#"{"id": "2", "answers": ["b"]}"#,
            "not json",
            "",
            r#"{"id": "1", "question": "dup?", "answers": ["a"]}"#,
            r#"{"id": "3", "question": "Q3?", "answers": []}"#,
            r#"{"id": "4", "question": "Q4?", "answers": ["d"]}"#,
        ];
        std::fs::write(&path, lines.join("\n")).expect("write");
        let ds = load_dataset(&path).expect("loads the good lines");
        assert_eq!(ds.name, "mini");
        assert_eq!(ds.examples.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), vec!["1", "4"]);
        let locs: Vec<String> =
            ds.skipped.iter().map(|s| s.location.rsplit(':').next().unwrap_or("").to_string()).collect();
        assert_eq!(locs, vec!["2", "3", "5", "6"]);
        assert!(ds.skipped[0].message.contains("missing field `question`"), "{}", ds.skipped[0].message);
        assert!(ds.skipped[2].message.contains("duplicate"));

        std::fs::write(&path, "{\"id\": 1}\n").expect("write");
        let err = load_dataset(&path).expect_err("nothing loads");
        assert!(err.to_string().contains("mini.jsonl:1"), "{err}");
    }

    #[test]
    fn an_invalid_utf8_line_is_skipped_not_the_whole_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mixed.jsonl");
        let mut bytes = br#"{"id": "1", "question": "Q1?", "answers": ["a"]}"#.to_vec();
        bytes.extend_from_slice(b"\n{\"id\": \"2\", \"question\": \"Q\xff?\", \"answers\": [\"b\"]}\r\n");
        bytes.extend_from_slice(br#"{"id": "3", "question": "Q3?", "answers": ["c"]}"#);
        std::fs::write(&path, bytes).expect("write");
        let ds = load_dataset(&path).expect("the valid lines load");
        assert_eq!(ds.examples.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["1", "3"]);
        assert_eq!(ds.skipped.len(), 1);
        assert!(ds.skipped[0].location.ends_with("mixed.jsonl:2"), "{}", ds.skipped[0]);
        assert!(ds.skipped[0].message.contains("UTF-8"), "{}", ds.skipped[0]);
    }

    #[test]
    fn an_overlong_line_is_skipped_and_reading_goes_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("long.jsonl");
        let long = format!(r#"{{"id": "big", "question": "{}", "answers": ["x"]}}"#, "q".repeat(MAX_LINE_BYTES));
        let text = format!("{long}\n{}\n", r#"{"id": "small", "question": "Q?", "answers": ["a"]}"#);
        std::fs::write(&path, text).expect("write");
        let ds = load_dataset(&path).expect("the short line loads");
        assert_eq!(ds.examples.len(), 1);
        assert_eq!(ds.examples[0].id, "small");
        assert!(ds.skipped[0].message.contains("longer than"), "{}", ds.skipped[0]);
    }

    #[test]
    fn lines_are_cut_at_the_limit_whatever_the_buffering() {
        let mut reader = std::io::BufReader::with_capacity(3, &b"abcdefgh\nxy\r\n\nlast"[..]);
        let mut line = Vec::new();
        let mut read = || match next_line(&mut reader, &mut line, 5).expect("read") {
            Line::End => "END".to_string(),
            Line::TooLong => "LONG".to_string(),
            Line::Complete => String::from_utf8_lossy(&line).into_owned(),
        };
        assert_eq!([read(), read(), read(), read(), read()], ["LONG", "xy", "", "last", "END"]);
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        for path in [Path::new("/dev/zero"), dir.path()] {
            let err = load_dataset(path).expect_err("not a regular file");
            assert!(err.to_string().contains("give a dataset file"), "{err}");
        }
        let fifo = dir.path().join("pipe.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false);
        if made {
            // Opening a FIFO with no writer blocks forever; the check comes first.
            let err = load_dataset(&fifo).expect_err("a FIFO");
            assert!(err.to_string().contains("not a regular file"), "{err}");
        }
    }

    #[test]
    fn a_null_id_is_named_as_such() {
        let err = parse_record(serde_json::json!({"id": null, "question": "Q?", "answers": ["a"]}), 0).unwrap_err();
        assert_eq!(err, "`id` is null; it must be a string or a number");
        let err = parse_record(serde_json::json!({"_id": [1], "question": "Q?", "answer": "a", "context": []}), 0);
        assert!(err.unwrap_err().contains("`_id` is an array"));
    }

    #[test]
    fn json_array_files_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hotpot_dev.json");
        let body = json!([{"_id": "a", "question": "Q?", "answer": "A", "supporting_facts": [], "context": []},
                          {"_id": "b", "question": "Q?", "supporting_facts": [], "context": []}]);
        std::fs::write(&path, body.to_string()).expect("write");
        let ds = load_dataset(&path).expect("load");
        assert_eq!(ds.examples.len(), 1);
        assert!(ds.skipped[0].location.ends_with("item 1"));
        assert!(ds.skipped[0].message.contains("missing field `answer`"));
    }

    #[test]
    fn loads_the_repository_sample_files() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample");
        for name in ["hotpotqa", "2wikimultihopqa"] {
            let path = dir.join(format!("{name}.jsonl"));
            let rows = std::fs::read_to_string(&path).expect(name).lines().filter(|l| !l.trim().is_empty()).count();
            let ds = load_dataset(&path).expect(name);
            assert_eq!(ds.examples.len(), rows, "{name}: {:?}", ds.skipped.first());
            assert!(ds.skipped.is_empty());
            assert!(ds.examples.iter().all(|e| !e.answers.is_empty()));
            if name == "hotpotqa" {
                assert!(ds.examples.iter().all(|e| e.evidence_titles.len() == 2 && e.task == Task::Qa));
            }
        }
    }
}
