//! Demonstration pools for HGOT's few-shot ablation, built from solved dataset examples outside the
//! evaluated slice (`hopwise data demos`).
//!
//! A demonstration is extractive: from each gold supporting paragraph the sentence that shares the
//! most words with the question, the answer and the other paragraphs' titles (a sentence holding the
//! answer first) becomes a cited passage, and the rationale strings those sentences together with
//! their `[n]` markers. No model writes any of it, so a pool is reproducible from the dataset file
//! alone. Plans (`steps`) are left out: the datasets carry no gold decomposition, so Plan prompts
//! stay zero-shot.

use std::collections::BTreeSet;

use hopwise_core::text::{normalize_answer, split_sentences};
use hopwise_reason::hgot::demos::{word_set, Demonstration};
use serde::Serialize;

use crate::dataset::{Example, Paragraph, Task};

/// Most supporting sentences kept per demonstration (2Wiki's bridge-comparison questions have four).
pub const MAX_PASSAGES: usize = 4;
/// A chosen sentence longer than this (in words) makes the example too long to show as a demo.
pub const MAX_SENTENCE_WORDS: usize = 60;

/// Which examples become demonstrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSlice {
    /// Examples skipped first: the evaluated questions (results.sh evaluates the first 50).
    pub skip: usize,
    /// Most examples read after the skipped ones.
    pub limit: usize,
}

/// How a pool came out: kept demonstrations and the examples left out, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PoolReport {
    pub read: usize,
    pub kept: usize,
    pub no_answer: usize,
    pub no_supporting_paragraph: usize,
    pub too_long: usize,
    pub not_qa: usize,
}

impl PoolReport {
    /// The examples left out, by reason, for messages.
    pub fn left_out(&self) -> String {
        format!(
            "{} without answer, {} without supporting paragraph, {} too long, {} not QA",
            self.no_answer, self.no_supporting_paragraph, self.too_long, self.not_qa
        )
    }
}

/// The demonstrations of `examples[skip..skip + limit]`, in dataset order.
pub fn build_pool(examples: &[Example], slice: PoolSlice) -> (Vec<Demonstration>, PoolReport) {
    let mut report = PoolReport::default();
    let mut pool = Vec::new();
    for example in examples.iter().skip(slice.skip).take(slice.limit) {
        report.read += 1;
        match demonstration(example) {
            Ok(demo) => pool.push(demo),
            Err(Skip::NoAnswer) => report.no_answer += 1,
            Err(Skip::NoSupport) => report.no_supporting_paragraph += 1,
            Err(Skip::TooLong) => report.too_long += 1,
            Err(Skip::NotQa) => report.not_qa += 1,
        }
    }
    report.kept = pool.len();
    (pool, report)
}

enum Skip {
    NoAnswer,
    NoSupport,
    TooLong,
    NotQa,
}

fn demonstration(example: &Example) -> Result<Demonstration, Skip> {
    if example.task != Task::Qa {
        return Err(Skip::NotQa);
    }
    let answer = example.answers.iter().map(|a| a.trim()).find(|a| !a.is_empty()).ok_or(Skip::NoAnswer)?;
    let answer_norm = normalize_answer(answer);
    let supporting: Vec<&Paragraph> = example.paragraphs.iter().filter(|p| p.supporting).take(MAX_PASSAGES).collect();
    let mut passages = Vec::new();
    let mut cited = Vec::new();
    for (i, paragraph) in supporting.iter().enumerate() {
        // The other hops' titles too: a bridge sentence names the entity the next hop is about.
        let others: Vec<&str> =
            supporting.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, p)| p.title.as_str()).collect();
        let cue = word_set(&format!("{} {answer} {}", example.question, others.join(" ")));
        let Some(sentence) = best_sentence(&paragraph.text, &cue, &answer_norm) else { continue };
        if sentence.split_whitespace().count() > MAX_SENTENCE_WORDS {
            return Err(Skip::TooLong);
        }
        let n = passages.len() + 1;
        cited.push(format!("{} [{n}].", sentence.trim_end_matches(['.', '!', '?', ' '])));
        passages.push(format!("{}: {sentence}", paragraph.title.trim()));
    }
    if passages.is_empty() {
        return Err(Skip::NoSupport);
    }
    Ok(Demonstration {
        question: example.question.trim().to_string(),
        rationale: cited.join(" "),
        answer: answer.to_string(),
        steps: Vec::new(),
        passages,
    })
}

/// The sentence holding the answer, else the one sharing most words with `cue` (ties: the earlier).
fn best_sentence(text: &str, cue: &BTreeSet<String>, answer: &str) -> Option<String> {
    let padded = |s: &str| format!(" {} ", normalize_answer(s));
    let holds_answer = |s: &str| !answer.is_empty() && padded(s).contains(&format!(" {answer} "));
    split_sentences(text)
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .enumerate()
        .max_by_key(|(i, s)| (holds_answer(s), word_set(s).intersection(cue).count(), std::cmp::Reverse(*i)))
        .map(|(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hopwise_reason::hgot::demos::DemoPool;

    fn paragraph(title: &str, text: &str, supporting: bool) -> Paragraph {
        Paragraph { title: title.into(), text: text.into(), supporting }
    }

    fn example(id: &str, question: &str, answer: &str, paragraphs: Vec<Paragraph>) -> Example {
        Example {
            id: id.into(),
            question: question.into(),
            answers: vec![answer.into()],
            paragraphs,
            ..Example::default()
        }
    }

    fn director() -> Example {
        example(
            "d",
            "Where was the director of Jaws born?",
            "Cincinnati",
            vec![
                paragraph("Jaws (film)", "Jaws is a 1975 thriller. It was directed by Steven Spielberg.", true),
                paragraph("Moon", "The Moon orbits the Earth.", false),
                paragraph(
                    "Steven Spielberg",
                    "Steven Spielberg is an American filmmaker. He was born in Cincinnati, Ohio.",
                    true,
                ),
            ],
        )
    }

    #[test]
    fn supporting_sentences_become_cited_passages() {
        let (pool, report) = build_pool(&[director()], PoolSlice { skip: 0, limit: 10 });
        assert_eq!(report, PoolReport { read: 1, kept: 1, ..PoolReport::default() });
        let demo = &pool[0];
        assert_eq!(
            demo.passages,
            vec![
                "Jaws (film): It was directed by Steven Spielberg.".to_string(),
                "Steven Spielberg: He was born in Cincinnati, Ohio.".to_string(),
            ],
            "the sentence naming the next hop, then the one holding the answer; non-supporting ones left out"
        );
        assert_eq!(demo.rationale, "It was directed by Steven Spielberg [1]. He was born in Cincinnati, Ohio [2].");
        assert_eq!(demo.answer, "Cincinnati");
        assert!(demo.steps.is_empty());
    }

    #[test]
    fn the_evaluated_slice_and_unusable_examples_are_left_out() {
        let no_support = example("n", "Who?", "X", vec![paragraph("A", "A is a thing.", false)]);
        let no_answer = example("a", "Who?", " ", vec![paragraph("A", "A is a thing.", true)]);
        let long = example("l", "Who?", "X", vec![paragraph("A", &"word ".repeat(70), true)]);
        let examples = [director(), director(), no_support, no_answer, long];
        let (pool, report) = build_pool(&examples, PoolSlice { skip: 1, limit: 3 });
        assert_eq!(pool.len(), 1, "the first (evaluated) example is skipped; the fifth is past the limit");
        assert_eq!(
            report,
            PoolReport { read: 3, kept: 1, no_answer: 1, no_supporting_paragraph: 1, ..PoolReport::default() }
        );
        let (_, report) = build_pool(&examples, PoolSlice { skip: 4, limit: 9 });
        assert_eq!(report.too_long, 1);
    }

    #[test]
    fn a_written_pool_is_read_back_by_hgot_unchanged() {
        let (pool, _) = build_pool(&[director()], PoolSlice { skip: 0, limit: 1 });
        let text: String = pool.iter().map(|d| serde_json::to_string(d).expect("json") + "\n").collect();
        let read = DemoPool::parse(&text).expect("hgot accepts the pool");
        assert_eq!((read.demos, read.dropped), (pool, 0));
    }
}
