//! MultiHop-RAG: `MultiHopRAG.json` (a JSON array of `{query, answer, question_type,
//! evidence_list: [{title, fact, source, url, published_at, …}]}`) and `corpus.json` (the 609
//! articles: `{title, body, source, published_at, url, category, author}`). The articles are the
//! corpus; each evidence fact becomes a supporting paragraph linked to its article by title.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{collapse, Converted, Inputs, Paragraph, Passage, Record};
use crate::error::Result;

#[derive(Deserialize)]
struct Query {
    query: String,
    answer: String,
    #[serde(default)]
    question_type: Option<String>,
    #[serde(default)]
    evidence_list: Vec<Map<String, Value>>,
}

fn text_of(map: &Map<String, Value>, key: &str) -> String {
    map.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

pub fn convert(inputs: &Inputs) -> Result<Converted> {
    let articles: Vec<Map<String, Value>> = inputs.json("corpus.json", &inputs.read("corpus.json")?)?;
    let mut corpus = Vec::with_capacity(articles.len());
    let mut by_title: HashMap<String, String> = HashMap::new();
    for (i, article) in articles.into_iter().enumerate() {
        let id = format!("art{i:04}");
        let title = collapse(&text_of(&article, "title"));
        by_title.entry(title.clone()).or_insert_with(|| id.clone());
        let extra: Map<String, Value> = article
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "title" | "body"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        corpus.push(Passage { id, title, text: collapse(&text_of(&article, "body")), extra });
    }
    let queries: Vec<Query> = inputs.json("MultiHopRAG.json", &inputs.read("MultiHopRAG.json")?)?;
    let records = queries
        .into_iter()
        .enumerate()
        .map(|(i, q)| {
            let paragraphs = q
                .evidence_list
                .iter()
                .map(|e| {
                    let mut p = Paragraph::new(&text_of(e, "title"), &text_of(e, "fact"), true);
                    p.article_id = by_title.get(&p.title).cloned();
                    p.corpus_id = p.article_id.clone();
                    p
                })
                .collect();
            let mut meta = Map::new();
            meta.insert("evidence_list".into(), Value::Array(q.evidence_list.into_iter().map(Value::Object).collect()));
            Record {
                id: format!("multihoprag-{i}"),
                question: collapse(&q.query),
                answers: vec![q.answer],
                qtype: q.question_type,
                paragraphs,
                decomposition: None,
                origin: inputs.origin.clone(),
                meta,
            }
        })
        .collect();
    Ok(Converted { records, corpus })
}
