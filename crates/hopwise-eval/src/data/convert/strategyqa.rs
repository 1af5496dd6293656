//! StrategyQA (`strategyqa_dataset.zip`): `strategyqa_train.json`, a JSON array of `{qid, term,
//! description, question, answer: bool, facts, decomposition, evidence}`, and
//! `strategyqa_train_paragraphs.json`, an object from paragraph key (`"Title-3"`) to `{title,
//! content, …}`. The paragraphs the annotators cited become the question's supporting paragraphs.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{collapse, id_string, pool_corpus, Converted, Inputs, Paragraph, Record};
use crate::error::Result;

#[derive(Deserialize)]
struct Source {
    qid: Value,
    question: String,
    answer: bool,
    #[serde(default)]
    term: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    facts: Vec<String>,
    #[serde(default)]
    decomposition: Vec<String>,
    #[serde(default)]
    evidence: Value,
}

#[derive(Deserialize)]
struct SourceParagraph {
    #[serde(default)]
    title: String,
    #[serde(default)]
    content: String,
}

/// Paragraph keys cited anywhere in the nested evidence lists (annotator → step → alternatives),
/// in order, each once; the markers `operation` and `no_evidence` are not keys.
fn cited(evidence: &Value, known: &HashMap<String, SourceParagraph>, out: &mut Vec<String>) {
    match evidence {
        Value::String(key) if known.contains_key(key) && !out.contains(key) => out.push(key.clone()),
        Value::Array(items) => items.iter().for_each(|v| cited(v, known, out)),
        _ => {}
    }
}

pub fn convert(inputs: &Inputs) -> Result<Converted> {
    let archive = "strategyqa_dataset.zip";
    let questions: Vec<Source> =
        inputs.json("strategyqa_train.json", &inputs.zip_member(archive, "strategyqa_train.json")?)?;
    let paragraphs: HashMap<String, SourceParagraph> = inputs
        .json("strategyqa_train_paragraphs.json", &inputs.zip_member(archive, "strategyqa_train_paragraphs.json")?)?;
    let mut records = Vec::with_capacity(questions.len());
    for (i, s) in questions.into_iter().enumerate() {
        let id = id_string(&s.qid).ok_or_else(|| inputs.fail(format!("question {i} has no usable `qid`")))?;
        let mut keys = Vec::new();
        cited(&s.evidence, &paragraphs, &mut keys);
        let mut meta = Map::new();
        meta.insert("facts".into(), json!(s.facts));
        meta.insert("term".into(), json!(s.term));
        meta.insert("description".into(), json!(s.description));
        meta.insert("evidence".into(), s.evidence);
        records.push(Record {
            id,
            question: collapse(&s.question),
            answers: vec![if s.answer { "yes" } else { "no" }.to_string()],
            qtype: Some("strategy".into()),
            paragraphs: keys
                .iter()
                .filter_map(|k| paragraphs.get(k))
                .map(|p| Paragraph::new(&p.title, &p.content, true))
                .collect(),
            decomposition: Some(Value::Array(s.decomposition.iter().map(|q| json!({"question": q})).collect())),
            origin: inputs.origin.clone(),
            meta,
        });
    }
    Ok(Converted { corpus: pool_corpus(inputs.dataset, &records), records })
}
