//! MuSiQue-Ans (`musique_ans_v1.0_dev.jsonl` inside `musique_v1.0.zip`): JSONL of `{id, question,
//! answer, answer_aliases, answerable, paragraphs: [{idx, title, paragraph_text, is_supporting}],
//! question_decomposition: [{id, question, answer, paragraph_support_idx}]}`.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{collapse, id_string, pool_corpus, uniq, Converted, Inputs, Paragraph, Record};
use crate::error::Result;

#[derive(Deserialize)]
struct Source {
    id: Value,
    question: String,
    answer: String,
    #[serde(default)]
    answer_aliases: Vec<String>,
    #[serde(default = "yes")]
    answerable: bool,
    paragraphs: Vec<SourceParagraph>,
    #[serde(default)]
    question_decomposition: Vec<Step>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct SourceParagraph {
    #[serde(default)]
    title: String,
    paragraph_text: String,
    #[serde(default)]
    is_supporting: bool,
}

#[derive(Deserialize)]
struct Step {
    question: String,
    #[serde(default)]
    answer: Value,
    #[serde(default)]
    paragraph_support_idx: Value,
}

pub fn convert(inputs: &Inputs) -> Result<Converted> {
    let bytes = inputs.zip_member("musique_v1.0.zip", "musique_ans_v1.0_dev.jsonl")?;
    let text = String::from_utf8(bytes).map_err(|_| inputs.fail("the dev file is not UTF-8"))?;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let s: Source = inputs.json(&format!("dev file line {}", i + 1), line.as_bytes())?;
        if !s.answerable {
            continue;
        }
        let id = id_string(&s.id).ok_or_else(|| inputs.fail(format!("line {} has no usable `id`", i + 1)))?;
        let mut answers = vec![s.answer];
        answers.extend(s.answer_aliases);
        let decomposition: Vec<Value> = s
            .question_decomposition
            .iter()
            .map(|d| json!({"question": d.question, "answer": d.answer, "paragraph_support_idx": d.paragraph_support_idx}))
            .collect();
        records.push(Record {
            // MuSiQue ids start with their hop pattern: `2hop__…`, `3hop1__…`.
            qtype: id.split_once("__").map(|(t, _)| t.to_string()),
            id,
            question: collapse(&s.question),
            answers: uniq(answers),
            paragraphs: s
                .paragraphs
                .iter()
                .map(|p| Paragraph::new(&p.title, &p.paragraph_text, p.is_supporting))
                .collect(),
            decomposition: Some(Value::Array(decomposition)),
            origin: inputs.origin.clone(),
            meta: Map::new(),
        });
    }
    Ok(Converted { corpus: pool_corpus(inputs.dataset, &records), records })
}
