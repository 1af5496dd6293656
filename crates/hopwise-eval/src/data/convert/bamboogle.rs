//! Bamboogle: the authors' sheet exported as CSV, with `Question` and `Answer` columns (matched
//! case-insensitively); questions only, no paragraphs and so no corpus.

use serde_json::Map;

use super::{collapse, Converted, Inputs, Record};
use crate::error::Result;

pub fn convert(inputs: &Inputs) -> Result<Converted> {
    let bytes = inputs.read("bamboogle.csv")?;
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(bytes.as_slice());
    let headers = reader.headers().map_err(|e| inputs.fail(format!("bamboogle.csv has no header row: {e}")))?.clone();
    let column = |name: &str| headers.iter().position(|h| h.trim().eq_ignore_ascii_case(name));
    let (Some(question), Some(answer)) = (column("question"), column("answer")) else {
        let found: Vec<&str> = headers.iter().collect();
        return Err(inputs.fail(format!("bamboogle.csv needs Question and Answer columns; found {}", found.join(", "))));
    };
    let mut records = Vec::new();
    for (i, row) in reader.records().enumerate() {
        let row = row.map_err(|e| inputs.fail(format!("bamboogle.csv row {}: {e}", i + 2)))?;
        let (q, a) = (collapse(row.get(question).unwrap_or_default()), row.get(answer).unwrap_or_default().trim());
        if q.is_empty() || a.is_empty() {
            continue;
        }
        records.push(Record {
            id: format!("bamboogle-{}", records.len()),
            question: q,
            answers: vec![a.to_string()],
            qtype: None,
            paragraphs: Vec::new(),
            decomposition: None,
            origin: inputs.origin.clone(),
            meta: Map::new(),
        });
    }
    Ok(Converted { records, corpus: Vec::new() })
}
