//! HotpotQA (`hotpot_dev_distractor_v1.json`) and 2WikiMultiHopQA (`dev.json` inside `data.zip`):
//! one JSON array of `{_id, question, answer, type, supporting_facts: [[title, sentence]],
//! context: [[title, [sentences]]]}`; 2Wiki adds `evidences` triples, HotpotQA `level`.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{collapse, id_string, pool_corpus, uniq, Converted, Inputs, Paragraph, Record};
use crate::error::Result;

#[derive(Deserialize)]
struct Source {
    #[serde(rename = "_id")]
    id: Value,
    question: String,
    answer: String,
    #[serde(rename = "type", default)]
    qtype: Option<String>,
    #[serde(default)]
    level: Option<String>,
    #[serde(default)]
    supporting_facts: Vec<(String, Value)>,
    context: Vec<(String, Vec<String>)>,
    #[serde(default)]
    evidences: Option<Value>,
}

/// How a paragraph's sentences become its text: HotpotQA's sentences carry their own leading
/// spaces, 2Wiki's do not.
#[derive(Clone, Copy)]
enum Join {
    AsIs,
    Spaced,
}

fn records(inputs: &Inputs, bytes: &[u8], join: Join) -> Result<Vec<Record>> {
    let sources: Vec<Source> = inputs.json("the question file", bytes)?;
    let mut out = Vec::with_capacity(sources.len());
    for (position, s) in sources.into_iter().enumerate() {
        let id = id_string(&s.id).ok_or_else(|| inputs.fail(format!("question {position} has no usable `_id`")))?;
        let gold: Vec<String> = uniq(s.supporting_facts.iter().map(|(title, _)| title.clone()));
        let paragraphs = s
            .context
            .iter()
            .map(|(title, sentences)| {
                let text = match join {
                    Join::AsIs => sentences.concat(),
                    Join::Spaced => sentences.join(" "),
                };
                Paragraph::new(title, &text, gold.contains(title))
            })
            .collect();
        let mut meta = Map::new();
        meta.insert("supporting_facts".into(), serde_json::to_value(&s.supporting_facts).unwrap_or(Value::Null));
        if let Some(level) = s.level {
            meta.insert("level".into(), level.into());
        }
        if let Some(evidences) = s.evidences {
            meta.insert("evidences".into(), evidences);
        }
        meta.insert("dev_position".into(), position.into());
        out.push(Record {
            id,
            question: collapse(&s.question),
            answers: vec![s.answer],
            qtype: s.qtype,
            paragraphs,
            decomposition: None,
            origin: inputs.origin.clone(),
            meta,
        });
    }
    Ok(out)
}

pub fn hotpotqa(inputs: &Inputs) -> Result<Converted> {
    let bytes = inputs.read("hotpot_dev_distractor_v1.json")?;
    let records = records(inputs, &bytes, Join::AsIs)?;
    Ok(Converted { corpus: pool_corpus(inputs.dataset, &records), records })
}

pub fn two_wiki(inputs: &Inputs) -> Result<Converted> {
    let bytes = inputs.zip_member("data.zip", "dev.json")?;
    let records = records(inputs, &bytes, Join::Spaced)?;
    Ok(Converted { corpus: pool_corpus(inputs.dataset, &records), records })
}
