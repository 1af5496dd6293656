//! A retriever over one example's own paragraphs (the "distractor setting" of HotpotQA and 2Wiki,
//! MuSiQue's 20 paragraphs): BM25 over those few paragraphs. Lets an evaluation run without a corpus
//! index; a run with a real index uses that instead.

use std::collections::HashMap;

use async_trait::async_trait;
use hopwise_core::text::normalize_answer;
use hopwise_core::{Passage, Retriever};

use crate::dataset::Example;

const K1: f64 = 1.2;
const B: f64 = 0.75;

pub struct ExampleContextRetriever {
    passages: Vec<Passage>,
    docs: Vec<Vec<String>>,
}

fn terms(s: &str) -> Vec<String> {
    normalize_answer(s).split_whitespace().map(str::to_string).collect()
}

impl ExampleContextRetriever {
    /// Passage ids are `<example id>#<paragraph index>`.
    pub fn new(example: &Example) -> Self {
        let passages: Vec<Passage> = example
            .paragraphs
            .iter()
            .enumerate()
            .map(|(i, p)| Passage {
                id: format!("{}#{i}", example.id),
                title: p.title.clone(),
                text: p.text.clone(),
                ..Default::default()
            })
            .collect();
        let docs = passages.iter().map(|p| terms(&format!("{} {}", p.title, p.text))).collect();
        Self { passages, docs }
    }

    /// The top `k` paragraphs for `query` by BM25, best first; ties keep paragraph order.
    pub fn rank(&self, query: &str, k: usize) -> Vec<Passage> {
        let n = self.docs.len() as f64;
        if n == 0.0 {
            return Vec::new();
        }
        let avg_len = self.docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
        let mut query_terms = terms(query);
        query_terms.sort();
        query_terms.dedup();
        let doc_freq: HashMap<&str, usize> =
            query_terms.iter().map(|t| (t.as_str(), self.docs.iter().filter(|d| d.contains(t)).count())).collect();
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, doc)| {
                let len = doc.len() as f64;
                let score = query_terms
                    .iter()
                    .map(|t| {
                        let tf = doc.iter().filter(|w| *w == t).count() as f64;
                        let df = doc_freq.get(t.as_str()).copied().unwrap_or(0) as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
                    })
                    .sum::<f64>();
                (i, score)
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
            .into_iter()
            .take(k)
            .map(|(i, score)| Passage { score: score as f32, ..self.passages[i].clone() })
            .collect()
    }
}

#[async_trait]
impl Retriever for ExampleContextRetriever {
    fn name(&self) -> &str {
        "example-context-bm25"
    }
    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        Ok(self.rank(query, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Paragraph;

    #[test]
    fn ranks_the_matching_paragraph_first() {
        let p = |t: &str, x: &str| Paragraph { title: t.into(), text: x.into(), supporting: false };
        let ex = Example {
            id: "e".into(),
            paragraphs: vec![
                p("Toto", "Toto is an American rock band formed in 1977."),
                p("Neil Peart", "Neil Peart was the drummer of the Canadian band Rush."),
                p("Rush", "Rush was a Canadian rock band; it released Counterparts."),
            ],
            ..Default::default()
        };
        let r = ExampleContextRetriever::new(&ex);
        let top = r.rank("Which Canadian band released Counterparts?", 2);
        assert_eq!(top.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), vec!["e#2", "e#1"]);
        assert!(top[0].score > top[1].score);
        assert!(r.rank("anything", 0).is_empty());
        assert!(ExampleContextRetriever::new(&Example::default()).rank("x", 3).is_empty());
    }
}
