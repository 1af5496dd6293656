//! How good is a retrieval gate? For single-fact questions with a known answer, ask the model
//! closed-book (greedy, with the `NO!` protocol) and sample `n` more closed-book answers; the oracle
//! says retrieval was needed exactly when the greedy closed-book answer is wrong. Each gate — the `NO!`
//! reply, and each sampling estimator at a threshold — is then scored as a classifier of "needs
//! retrieval": its retrieval rate, precision and recall against the oracle.
//!
//! Items: the gold single-hop steps where a dataset has them (2Wiki's evidence triples
//! `subject, relation, object` → "What is the relation of subject?"; MuSiQue's decomposition with `#k`
//! replaced by the earlier steps' answers), else the question itself.

use hopwise_core::Recorder;
use hopwise_reason::gate::{self, GateSettings, UncertaintyGate};
use hopwise_reason::protocol::Hedges;
use hopwise_reason::uncertainty::{jaccard_matrix, Estimator};
use hopwise_reason::Runtime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

use crate::dataset::{next_line, open_regular, Line, MAX_LINE_BYTES};
use crate::error::{EvalError, Result};
use crate::metrics::score_answer;

/// One single-fact question with its gold answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateItem {
    /// The example it comes from.
    pub id: String,
    pub question: String,
    pub gold: Vec<String>,
    /// `step` (a gold single-hop step) or `question`.
    pub kind: String,
}

/// An answer and how it scores against the item's gold answers.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Scored {
    pub answer: String,
    pub cover_em: f64,
    pub f1: f64,
}

impl Scored {
    pub fn new(answer: &str, gold: &[String]) -> Scored {
        if answer.is_empty() {
            return Scored::default();
        }
        let m = score_answer(answer, gold);
        Scored { answer: answer.to_string(), cover_em: m.cover_em, f1: m.f1 }
    }

    pub fn right(&self) -> bool {
        self.cover_em > 0.0
    }
}

/// The answer of a run with retrieval on the same question, and what it cost.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReaderAnswer {
    #[serde(flatten)]
    pub scored: Scored,
    #[serde(default)]
    pub retrieval_rounds: f64,
    #[serde(default)]
    pub llm_calls: f64,
}

/// What the model said about one item, and what each gate would decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRecord {
    #[serde(flatten)]
    pub item: GateItem,
    /// The greedy closed-book answer to a prompt that asks for a best guess. The oracle: retrieval
    /// was needed exactly when it is wrong.
    pub greedy: Scored,
    /// The greedy reply to the `NO!` protocol (`toqd_self_verify`).
    pub self_verify: String,
    /// That reply declined (`NO!` or a hedge): the paper's gate retrieves.
    pub said_no: bool,
    /// What the `NO!` gate answers with when it does not retrieve.
    pub self_verify_answer: Scored,
    /// Closed-book best guesses at temperature, one request.
    pub samples: Vec<String>,
    /// `U` of every Jaccard-similarity estimator over the samples.
    pub uncertainty: BTreeMap<String, f64>,
    /// The samples' vote (what the uncertainty gate answers with when it does not retrieve) and its
    /// share.
    pub vote: Scored,
    pub vote_share: f64,
    /// The reading with retrieval on the same question (retrieve-then-read's result, joined from a
    /// results file by example id): what a gate that retrieves answers. Items without one are left
    /// out of the end-to-end sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader: Option<ReaderAnswer>,
}

impl GateRecord {
    /// The oracle: the greedy closed-book answer is right, so retrieval was not needed.
    pub fn correct(&self) -> bool {
        self.greedy.right()
    }
}

/// Which items a dataset gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    /// Gold single-hop steps where the dataset has them, else the questions.
    #[default]
    Auto,
    /// The questions themselves (what a gate in front of the whole question decides).
    Questions,
}

/// Reads up to `limit` examples of a normalised JSONL dataset and turns them into items.
pub fn gate_items(path: &Path, limit: Option<usize>, kind: ItemKind) -> Result<Vec<GateItem>> {
    let mut reader = open_regular(path)?;
    let read_err = |e| EvalError::Read { path: path.to_path_buf(), source: e };
    let bad_line = |n: usize, message: String| EvalError::Dataset {
        path: path.to_path_buf(),
        message: format!("line {}: {message}", n + 1),
    };
    let mut items = Vec::new();
    let mut examples = 0;
    let mut line = Vec::new();
    for n in 0.. {
        if limit.is_some_and(|l| examples >= l) {
            break;
        }
        let text = match next_line(&mut reader, &mut line, MAX_LINE_BYTES).map_err(read_err)? {
            Line::End => break,
            Line::TooLong => return Err(bad_line(n, format!("longer than {} MiB", MAX_LINE_BYTES >> 20))),
            Line::Complete => std::str::from_utf8(&line).map_err(|e| bad_line(n, format!("not valid UTF-8: {e}")))?,
        };
        if text.trim().is_empty() {
            continue;
        }
        let record: serde_json::Value = serde_json::from_str(text).map_err(|e| bad_line(n, e.to_string()))?;
        examples += 1;
        items.extend(match kind {
            ItemKind::Auto => items_of(&record),
            ItemKind::Questions => question_item(&record).into_iter().collect(),
        });
    }
    Ok(items)
}

fn items_of(record: &serde_json::Value) -> Vec<GateItem> {
    let id = record["id"].as_str().unwrap_or_default().to_string();
    let step = |question: String, answer: &str| GateItem {
        id: id.clone(),
        question,
        gold: vec![answer.to_string()],
        kind: "step".into(),
    };
    if let Some(triples) = record["meta"]["evidences"].as_array().filter(|t| !t.is_empty()) {
        let mut out: Vec<GateItem> = Vec::new();
        for triple in triples {
            let parts: Vec<&str> = triple.as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
            if let [subject, relation, object] = parts[..] {
                let item = step(format!("What is the {relation} of {subject}?"), object);
                if !out.iter().any(|o| o.question == item.question) {
                    out.push(item);
                }
            }
        }
        return out;
    }
    if let Some(steps) = record["decomposition"].as_array().filter(|s| s.iter().all(|s| s["answer"].is_string())) {
        let answers: Vec<&str> = steps.iter().filter_map(|s| s["answer"].as_str()).collect();
        return steps
            .iter()
            .zip(&answers)
            .filter_map(|(s, answer)| {
                let mut question = s["question"].as_str()?.to_string();
                for (k, earlier) in answers.iter().enumerate().rev() {
                    question = question.replace(&format!("#{}", k + 1), earlier);
                }
                let question = match question.split_once(">>") {
                    Some((subject, relation)) => format!("What is the {} of {}?", relation.trim(), subject.trim()),
                    None => question,
                };
                Some(step(question, answer))
            })
            .collect();
    }
    question_item(record).into_iter().collect()
}

fn question_item(record: &serde_json::Value) -> Option<GateItem> {
    let id = record["id"].as_str().unwrap_or_default().to_string();
    let gold: Vec<String> =
        record["answers"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(str::to_string)).collect();
    match record["question"].as_str() {
        Some(q) if !gold.is_empty() => Some(GateItem { id, question: q.to_string(), gold, kind: "question".into() }),
        _ => None,
    }
}

/// The answer a closed-book reply gives: `None` for `NO!` (or a hedge meaning it, as `toqd` reads
/// replies by default) or nothing.
fn read_node_answer(reply: &str, hedges: &Hedges) -> Option<String> {
    if hedges.is_unanswered(reply) {
        return None;
    }
    Some(hopwise_reason::protocol::answer::short_answer(reply)).filter(|a| !a.is_empty())
}

/// Asks one item closed-book: a greedy best guess, a greedy `NO!`-protocol reply, and `samples`
/// sampled best guesses (one request).
pub async fn judge(runtime: &Runtime, item: GateItem, samples: u32, temperature: f32) -> Result<GateRecord> {
    // The same runtime as `ask`: its metered model, prompts and default parameters, no retriever.
    let ctx = runtime.context(Recorder::new(&item.question, "gate-eval"), None);
    let settings = GateSettings {
        estimator: Estimator::default(),
        threshold: None,
        samples: Some(samples),
        similarity: None,
        sample_temperature: temperature,
    };
    let sampling = UncertaintyGate::new("gate-eval", settings)?;
    let mut params = ctx.params().clone();
    params.max_tokens = 64;
    let format = ctx.render("toqd_format_short", &[])?;
    let guess_prompt = ctx.render("toqd_recall", &[("question", &item.question), ("answer_format", &format)])?;
    let greedy =
        ctx.chat("closed_book", Some("1"), guess_prompt.clone(), params.clone()).await?.text().trim().to_string();
    let hedges = ctx.hedges(true);
    let greedy = read_node_answer(&greedy, &hedges).unwrap_or_default();
    let verify_prompt = ctx.render("toqd_self_verify", &[("question", &item.question), ("answer_format", &format)])?;
    let self_verify = ctx.chat("self_verify", Some("1"), verify_prompt, params).await?.text().trim().to_string();
    let verified = read_node_answer(&self_verify, &hedges);
    let samples =
        gate::sample(&ctx, "1", "uncertainty_samples", &guess_prompt, &sampling, 64, |t| t.trim().to_string()).await?;
    let readings: Vec<Option<String>> = samples.iter().map(|s| read_node_answer(s, &hedges)).collect();
    let comparable: Vec<String> = readings
        .iter()
        .map(|r| r.as_deref().map(hopwise_core::text::normalize_answer).unwrap_or_else(|| "NO!".into()))
        .collect();
    let w = jaccard_matrix(&comparable);
    let uncertainty = [Estimator::DegJaccard, Estimator::Eigv, Estimator::Ecc]
        .into_iter()
        .map(|e| (e.name().to_string(), e.from_similarity(&w)))
        .collect();
    let answers: Vec<String> = readings.iter().map(|r| r.clone().unwrap_or_default()).collect();
    let vote = hopwise_reason::hgot::vote::weighted_vote(&answers, &vec![1.0; answers.len()]);
    Ok(GateRecord {
        greedy: Scored::new(&greedy, &item.gold),
        said_no: verified.is_none(),
        self_verify_answer: Scored::new(verified.as_deref().unwrap_or_default(), &item.gold),
        self_verify,
        samples,
        uncertainty,
        vote: Scored::new(&vote.answer, &item.gold),
        vote_share: vote.confidence,
        reader: None,
        item,
    })
}

/// Gives each record the reader's answer to the same example (by id) from results records, skipping
/// failed ones. Returns how many records got one.
pub fn join_reader(records: &mut [GateRecord], results: &[crate::results::ResultRecord]) -> usize {
    let by_id: std::collections::HashMap<&str, &crate::results::ResultRecord> =
        results.iter().filter(|r| r.error.is_none()).map(|r| (r.id.as_str(), r)).collect();
    let mut joined = 0;
    for record in records.iter_mut() {
        if let Some(read) = by_id.get(record.item.id.as_str()) {
            record.reader = Some(ReaderAnswer {
                scored: Scored {
                    answer: read.prediction.clone(),
                    cover_em: read.metrics.cover_em,
                    f1: read.metrics.f1,
                },
                retrieval_rounds: read.stats.retrieval_rounds as f64,
                llm_calls: read.stats.llm_calls as f64,
            });
            joined += 1;
        }
    }
    joined
}

/// A gate scored against the oracle.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GateScore {
    /// Share of items the gate sends to retrieval.
    pub retrieval_rate: f64,
    /// Of the items it retrieves for, the share whose closed-book answer was wrong.
    pub precision: f64,
    /// Of the items whose closed-book answer was wrong, the share it retrieves for.
    pub recall: f64,
    /// Of the items it answers closed-book, the share answered right.
    pub kept_accuracy: f64,
}

/// Scores a gate, given its decision (`true` = retrieve) per record.
pub fn score(records: &[GateRecord], retrieves: impl Fn(&GateRecord) -> bool) -> GateScore {
    let (mut retrieved, mut retrieved_wrong, mut wrong, mut kept, mut kept_right) = (0usize, 0usize, 0usize, 0, 0);
    for r in records {
        let needs = !r.correct();
        wrong += usize::from(needs);
        if retrieves(r) {
            retrieved += 1;
            retrieved_wrong += usize::from(needs);
        } else {
            kept += 1;
            kept_right += usize::from(r.correct());
        }
    }
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    GateScore {
        retrieval_rate: ratio(retrieved, records.len()),
        precision: ratio(retrieved_wrong, retrieved),
        recall: ratio(retrieved_wrong, wrong),
        kept_accuracy: ratio(kept_right, kept),
    }
}

/// The uncertainty gate's decision as ToQD takes it: retrieve when `U > θ` or when most samples
/// decline.
pub fn uncertainty_retrieves(r: &GateRecord, estimator: &str, threshold: f64) -> bool {
    r.uncertainty.get(estimator).is_none_or(|u| *u > threshold) || r.vote.answer.is_empty() || r.vote_share < 0.5
}

/// The report: the gates at their default thresholds, then a threshold sweep per estimator.
pub fn render_report(records: &[GateRecord], title: &str) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let wrong = records.iter().filter(|r| !r.correct()).count();
    let _ = writeln!(out, "### {title}\n");
    let _ = writeln!(
        out,
        "{} items; the greedy closed-book answer is wrong (retrieval needed) for {} ({:.0}%).\n",
        records.len(),
        wrong,
        100.0 * wrong as f64 / records.len().max(1) as f64
    );
    let _ = writeln!(out, "| gate | retrieval rate | precision | recall | closed-book accuracy where not retrieving |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let row = |out: &mut String, name: &str, s: GateScore| {
        let _ = writeln!(
            out,
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
            s.retrieval_rate, s.precision, s.recall, s.kept_accuracy
        );
    };
    row(&mut out, "NO! (self-verify)", score(records, |r| r.said_no));
    for estimator in [Estimator::DegJaccard, Estimator::Eigv] {
        let theta = estimator.default_threshold();
        let name = format!("{} (θ = {theta})", estimator.name());
        row(&mut out, &name, score(records, |r| uncertainty_retrieves(r, estimator.name(), theta)));
        let both = format!("NO! or {} (θ = {theta})", estimator.name());
        row(&mut out, &both, score(records, |r| r.said_no || uncertainty_retrieves(r, estimator.name(), theta)));
    }
    row(&mut out, "always retrieve", score(records, |_| true));
    let _ = writeln!(out, "\nThreshold sweep (retrieve when U > θ or most samples decline):\n");
    let _ = writeln!(
        out,
        "| estimator | θ | retrieval rate | precision | recall | closed-book accuracy where not retrieving |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for estimator in [Estimator::DegJaccard, Estimator::Eigv, Estimator::Ecc] {
        let mut values: Vec<f64> =
            records.iter().filter_map(|r| r.uncertainty.get(estimator.name()).copied()).collect();
        values.sort_by(f64::total_cmp);
        values.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
        for theta in values.iter().take(12) {
            let s = score(records, |r| uncertainty_retrieves(r, estimator.name(), *theta));
            let _ = writeln!(
                out,
                "| {} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} |",
                estimator.name(),
                theta,
                s.retrieval_rate,
                s.precision,
                s.recall,
                s.kept_accuracy
            );
        }
    }
    let with_reader = records.iter().filter(|r| r.reader.is_some()).count();
    out.push_str(&crate::gate_sweep::render_sweep(&crate::gate_sweep::sweep(records), with_reader));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(correct: bool, said_no: bool, u: f64) -> GateRecord {
        let answer = Scored { answer: "a".into(), cover_em: f64::from(u8::from(correct)), f1: 0.0 };
        GateRecord {
            item: GateItem { id: "x".into(), question: "q".into(), gold: vec!["a".into()], kind: "step".into() },
            greedy: answer.clone(),
            self_verify: String::new(),
            said_no,
            self_verify_answer: answer.clone(),
            samples: Vec::new(),
            uncertainty: [("deg-jaccard".to_string(), u)].into_iter().collect(),
            vote: answer,
            vote_share: 1.0,
            reader: None,
        }
    }

    #[test]
    fn gates_are_scored_against_the_closed_book_oracle() {
        // Two wrong answers (one flagged by NO!, one by U), two right ones (one wrongly flagged by U).
        let records =
            [record(false, true, 0.1), record(false, false, 0.6), record(true, false, 0.5), record(true, false, 0.0)];
        let no = score(&records, |r| r.said_no);
        assert_eq!((no.retrieval_rate, no.precision, no.recall), (0.25, 1.0, 0.5));
        assert!((no.kept_accuracy - 2.0 / 3.0).abs() < 1e-9);
        let u = score(&records, |r| uncertainty_retrieves(r, "deg-jaccard", 0.4));
        assert_eq!((u.retrieval_rate, u.precision, u.recall, u.kept_accuracy), (0.5, 0.5, 0.5, 0.5));
    }

    #[test]
    fn items_come_from_gold_steps_where_the_dataset_has_them() {
        let wiki = serde_json::json!({"id": "w", "question": "Q?", "answers": ["x"], "meta": {"evidences": [["Jaws", "director", "Steven Spielberg"], ["Jaws", "director", "Steven Spielberg"]]}});
        let items = items_of(&wiki);
        assert_eq!(items.len(), 1, "duplicates dropped");
        assert_eq!(items[0].question, "What is the director of Jaws?");
        assert_eq!(items[0].gold, ["Steven Spielberg"]);
        let musique = serde_json::json!({"id": "m", "question": "Q?", "answers": ["y"], "decomposition": [
            {"question": "Edward Baring >> father", "answer": "Henry Baring"},
            {"question": "#1 >> father", "answer": "Francis Baring"}]});
        let items = items_of(&musique);
        assert_eq!(items[1].question, "What is the father of Henry Baring?");
        let hotpot = serde_json::json!({"id": "h", "question": "Which band?", "answers": ["Rush"]});
        assert_eq!(items_of(&hotpot)[0].kind, "question");
        let asked = question_item(&wiki).expect("the question itself");
        assert_eq!((asked.question.as_str(), asked.gold.as_slice()), ("Q?", ["x".to_string()].as_slice()));
    }

    /// The dataset reader's bounds hold here too: a device is refused before reading, and a line over
    /// the limit is named as such instead of being held in memory whole.
    #[test]
    fn devices_are_refused_and_lines_are_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("long.jsonl");
        let long = format!(
            "{{\"id\": \"l\", \"question\": \"{}\", \"answers\": [\"a\"]}}\n",
            "x".repeat(crate::dataset::MAX_LINE_BYTES)
        );
        std::fs::write(&path, long).expect("write");
        let err = match gate_items(&path, None, ItemKind::Auto) {
            Ok(items) => panic!("{} items read from a line over the limit", items.len()),
            Err(e) => e,
        };
        assert!(err.to_string().contains("line 1: longer than"), "{err}");

        let err = gate_items(Path::new("/dev/zero"), Some(1), ItemKind::Auto).expect_err("a device is no dataset");
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
