//! Typed readings: a prompt sampled `samples` times in one request, each reply read as an answer of
//! the type the plan expects (or as no answer), and the answers voted on. The vote share is the
//! reading's confidence.

use hopwise_core::text::normalize_answer;
use hopwise_core::{GenParams, Passage};

use crate::ctx::Ctx;
use crate::details::{
    self,
    toqd::{ReadingRecord, ToqdNode},
};
use crate::error::Result;
use crate::protocol::answer::short_answer;
use crate::protocol::plan::AnswerType;
use crate::protocol::values;
use crate::protocol::Hedges;
use crate::vote::{weighted_vote, Vote};

/// Output cap of one reading, so a model that runs on cannot stall a node.
pub(super) const ANSWER_TOKENS: u32 = 64;

/// How an answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// As the answer to a question is written: a name, a date in words, a number, yes or no.
    Text,
    /// As code reads it: an ISO date or a number in digits (yes/no either way); constrained by a
    /// grammar where the backend takes one.
    Value,
}

/// What one step expects of its readings.
#[derive(Debug, Clone, Copy)]
pub(super) struct Expect {
    pub answer_type: AnswerType,
    pub form: Form,
    /// Whether an answer that only repeats the question's own words counts (it does for the
    /// question's options).
    pub may_echo: bool,
}

impl Expect {
    pub fn text(answer_type: AnswerType) -> Self {
        Self { answer_type, form: Form::Text, may_echo: false }
    }

    /// The grammar the reading is constrained to, when code reads a value from it.
    fn grammar(&self) -> Option<&'static str> {
        match (self.answer_type, self.form) {
            (AnswerType::YesNo, _) | (AnswerType::Date | AnswerType::Number, Form::Value) => {
                values::grammar_for(self.answer_type)
            }
            _ => None,
        }
    }
}

/// The sentence that tells the model how to write its answer, from the `toqd_format_*` templates.
pub(super) fn answer_format(ctx: &Ctx, expect: Expect) -> Result<String> {
    match (expect.answer_type, expect.form) {
        (AnswerType::YesNo, _) => ctx.render("toqd_format_yes_no", &[]),
        (AnswerType::Date, Form::Value) => ctx.render("toqd_format_iso_date", &[]),
        (AnswerType::Number, Form::Value) => ctx.render("toqd_format_digits", &[]),
        (AnswerType::Other, _) => ctx.render("toqd_format_short", &[]),
        (kind, _) => ctx.render("toqd_format_typed", &[("answer_type", kind.name())]),
    }
}

/// One reply read as an answer of the expected type: `None` for `NO!` (or a hedge meaning it), an
/// empty reply, an answer of the wrong type (yes/no that is neither; a date or number with no digit,
/// or none code can read when a value is expected), or an answer that only repeats `question`.
pub(super) fn read_answer(reply: &str, question: &str, expect: Expect, hedges: &Hedges) -> Option<String> {
    if hedges.is_unanswered(reply) {
        return None;
    }
    let text = short_answer(reply);
    if text.is_empty() {
        return None;
    }
    let fits = match (expect.answer_type, expect.form) {
        (AnswerType::YesNo, _) => return values::yes_no(&text).map(|yes| if yes { "yes" } else { "no" }.to_string()),
        (kind @ (AnswerType::Date | AnswerType::Number), Form::Value) => values::value_of(&text, kind).is_some(),
        (AnswerType::Date | AnswerType::Number, Form::Text) => text.chars().any(char::is_numeric),
        _ => true,
    };
    (fits && (expect.may_echo || !echoes(question, &text))).then_some(text)
}

/// Whether `answer` only repeats words of `question` (a model that cannot find the answer often
/// hands back the entity the question is about).
pub(super) fn echoes(question: &str, answer: &str) -> bool {
    let short = normalize_answer(answer);
    !short.is_empty() && contains_words(&normalize_answer(question), &short)
}

/// Whether normalised `long` holds normalised `short` as a run of whole words.
fn contains_words(long: &str, short: &str) -> bool {
    format!(" {long} ").contains(&format!(" {short} "))
}

/// The readings of one prompt and their vote.
#[derive(Debug, Clone, Default)]
pub(super) struct Reading {
    /// Each sample's answer; `None` for a sample that gave none.
    pub readings: Vec<Option<String>>,
    /// The leading answer; empty when no sample answered.
    pub answer: String,
    /// The leading answer's share of all samples; `None` for one greedy reading.
    pub confidence: Option<f64>,
}

/// An answer a node settled on, with how sure its vote was.
#[derive(Debug, Clone)]
pub(super) struct Settled {
    pub answer: String,
    pub confidence: Option<f64>,
}

impl Reading {
    /// The answer when the vote gave one with a share of at least `min` (one greedy answer always
    /// counts), recording on node `id` whether it did.
    pub fn accept(&self, ctx: &Ctx, id: &str, min: f64) -> Option<Settled> {
        let accepted = !self.answer.is_empty() && self.confidence.unwrap_or(1.0) >= min;
        if self.confidence.is_some() {
            ctx.rec().update_node(id, |n| {
                details::update(n, |d: &mut ToqdNode| {
                    if let Some(reading) = &mut d.reading {
                        reading.accepted = Some(accepted);
                    }
                })
            });
        }
        accepted.then(|| Settled { answer: self.answer.clone(), confidence: self.confidence })
    }

    /// The leading answer whatever its share: what a node that nothing settled answers with.
    pub fn best_effort(&self) -> Option<Settled> {
        (!self.answer.is_empty()).then(|| Settled { answer: self.answer.clone(), confidence: self.confidence })
    }
}

/// Sampling settings of a reading, and what its replies may say instead of `NO!`.
#[derive(Debug, Clone)]
pub(super) struct Sampling {
    pub samples: u32,
    pub temperature: f32,
    pub grammar: bool,
    pub hedges: Hedges,
}

/// `sampling.samples` readings of `prompt` in one request (one greedy reading when it is 1), read
/// as `expect` says against `question`, voted and recorded as node `id`'s `reading` detail.
pub(super) async fn sample_reading(
    ctx: &Ctx,
    id: &str,
    purpose: &str,
    prompt: String,
    question: &str,
    expect: Expect,
    sampling: &Sampling,
) -> Result<Reading> {
    let mut params = GenParams { max_tokens: ctx.params().max_tokens.min(ANSWER_TOKENS), ..ctx.params().clone() };
    if sampling.samples > 1 {
        params = GenParams { n: sampling.samples, temperature: sampling.temperature, top_p: 1.0, ..params };
    }
    if sampling.grammar {
        params.grammar = expect.grammar().map(str::to_string);
    }
    let reply = ctx.chat(purpose, Some(id), prompt, params).await?;
    let replies: Vec<String> = reply.choices.iter().map(|c| c.text.clone()).collect();
    let readings: Vec<Option<String>> =
        replies.iter().map(|r| read_answer(r, question, expect, &sampling.hedges)).collect();
    let vote = vote(&readings);
    let confidence = (sampling.samples > 1).then_some(vote.confidence);
    if let Some(share) = confidence {
        let detail = ReadingRecord {
            samples: replies,
            answer_type: Some(expect.answer_type),
            vote: vote.table.clone(),
            confidence: share,
            accepted: None,
        };
        ctx.rec().update_node(id, |n| details::update(n, |d: &mut ToqdNode| d.reading = Some(detail)));
    }
    Ok(Reading { readings, answer: vote.answer, confidence })
}

/// The prompt that reads `question` over `passages` (`toqd_self_verify_context`), or closed-book
/// (`toqd_recall`) when there are none.
pub(super) fn reading_prompt(ctx: &Ctx, question: &str, passages: &[Passage], expect: Expect) -> Result<String> {
    let format = answer_format(ctx, expect)?;
    if passages.is_empty() {
        return ctx.render("toqd_recall", &[("question", question), ("answer_format", &format)]);
    }
    ctx.render(
        "toqd_self_verify_context",
        &[("passages", &ctx.format_passages(passages)), ("question", question), ("answer_format", &format)],
    )
}

/// The vote over sampled readings (each `None` when it gave no answer), every sample weighing the
/// same: the answer most samples agree on (normalised), and its share of all samples. A reading
/// that contains another, shorter reading as a run of whole words ("The Canadian rock band Rush"
/// and "Rush") votes for the shorter one: the samples agree, and one says more than was asked.
/// Each answer is then written in the form most of its samples used (ties: the shorter form).
pub(super) fn vote(readings: &[Option<String>]) -> Vote {
    let normalized: Vec<String> =
        readings.iter().map(|r| r.as_deref().map(normalize_answer).unwrap_or_default()).collect();
    let answers: Vec<String> = readings
        .iter()
        .zip(&normalized)
        .map(|(reading, mine)| {
            let Some(text) = reading else { return String::new() };
            readings
                .iter()
                .zip(&normalized)
                .filter(|(_, other)| {
                    !other.is_empty()
                        && other.len() < mine.len()
                        && contains_words(mine, other)
                        && !drops_year(other, mine)
                })
                .min_by_key(|(_, other)| other.len())
                .and_then(|(shorter, _)| shorter.clone())
                .unwrap_or_else(|| text.clone())
        })
        .collect();
    let mut vote = weighted_vote(&answers, &vec![1.0; answers.len()]);
    for row in vote.table.iter_mut() {
        if let Some(form) = usual_form(readings, &normalized, &row.samples, &row.normalized) {
            row.answer = form;
        }
    }
    if let Some(best) = vote.table.first() {
        vote.answer = best.answer.clone();
    }
    vote
}

/// The reading most of `samples` gave word for word (normalised), when it is more common than
/// `key`, the form they were counted as; the first sample's wording of it.
fn usual_form(readings: &[Option<String>], normalized: &[String], samples: &[usize], key: &str) -> Option<String> {
    let count = |form: &str| samples.iter().filter(|&&i| normalized[i] == form).count();
    let (top, top_count) =
        samples.iter().map(|&i| (i, count(&normalized[i]))).fold(None, |best: Option<(usize, usize)>, (i, c)| {
            match best {
                Some((_, bc)) if bc >= c => best,
                _ => Some((i, c)),
            }
        })?;
    (top_count > count(key)).then(|| readings[top].as_deref().unwrap_or_default().trim().to_string())
}

/// Whether counting `long` as `short` would lose the year a date holds (a date without its year
/// cannot be compared). Both normalised.
fn drops_year(short: &str, long: &str) -> bool {
    let year = |text: &str| text.split_whitespace().any(|w| w.len() == 4 && w.chars().all(|c| c.is_ascii_digit()));
    short.chars().any(|c| c.is_ascii_digit()) && !year(short) && year(long)
}

/// What an uncertainty gate compares: each sample's normalised answer, or `NO!` for a sample that
/// gave none (declining samples agree with each other and disagree with answering ones).
pub(super) fn comparable(readings: &[Option<String>]) -> Vec<String> {
    readings.iter().map(|r| r.as_deref().map(normalize_answer).unwrap_or_else(|| "NO!".to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn readings_of_the_wrong_type_abstain() {
        let read = |reply: &str, question: &str, expect: Expect| read_answer(reply, question, expect, &Hedges::none());
        let date_value = Expect { answer_type: AnswerType::Date, form: Form::Value, may_echo: true };
        assert_eq!(read("1990-03-05", "q", date_value).as_deref(), Some("1990-03-05"));
        assert_eq!(read("Ann Lee", "q", date_value), None, "a name is no date");
        assert_eq!(read("NO!", "q", date_value), None);
        let date_text = Expect::text(AnswerType::Date);
        assert_eq!(read("5 March 1990", "q", date_text).as_deref(), Some("5 March 1990"));
        assert_eq!(read("Ann Lee", "q", date_text), None);
        let yes_no = Expect::text(AnswerType::YesNo);
        assert_eq!(read("Yes, both are.", "q", yes_no).as_deref(), Some("yes"));
        assert_eq!(read("Ann Lee", "q", yes_no), None);
        let person = Expect::text(AnswerType::Person);
        assert_eq!(read("Answer: Ann Lee", "Who is the mother of Tom Lee?", person).as_deref(), Some("Ann Lee"));
        assert_eq!(read("Tom Lee", "Who is the mother of Tom Lee?", person), None, "an echo");
        let option = Expect { may_echo: true, ..person };
        assert_eq!(read("Tom Lee", "Who is older, Tom Lee or Ann Lee?", option).as_deref(), Some("Tom Lee"));
    }

    #[test]
    fn a_hedge_declines_only_where_the_phrases_are_read() {
        let person = Expect::text(AnswerType::Person);
        let english = Hedges::from_prompts(&hopwise_core::Prompts::default());
        assert_eq!(read_answer("I don't know.", "Who?", person, &english), None);
        assert!(read_answer("I don't know.", "Who?", person, &Hedges::none()).is_some(), "only the sentinel declines");
    }

    #[test]
    fn votes_count_declines_against_the_winner() {
        let readings = vec![some("Neil Peart"), None, some("neil peart"), some("Geddy Lee")];
        let v = vote(&readings);
        assert_eq!(v.answer, "Neil Peart");
        assert!((v.confidence - 0.5).abs() < 1e-9, "{}", v.confidence);
        assert_eq!(comparable(&readings), ["neil peart", "NO!", "neil peart", "geddy lee"]);
    }

    #[test]
    fn a_reading_that_says_more_votes_for_the_shorter_one_it_contains() {
        let v = vote(&[some("The Canadian rock band Rush"), some("Rush"), some("Genesis"), some("Rush.")]);
        assert_eq!(v.answer, "Rush");
        assert!((v.confidence - 0.75).abs() < 1e-9, "{}", v.confidence);
        let v = vote(&[some("Mount Rushmore"), some("Rush"), some("Rush")]);
        assert!((v.confidence - 2.0 / 3.0).abs() < 1e-9, "whole words only");
        let v = vote(&[some("11 July"), some("11 July 1990"), some("11 July 1990")]);
        assert_eq!(v.answer, "11 July 1990", "a date keeps its year");
        let v = vote(&[
            some("1,600 pubs and bars"),
            some("pubs"),
            some("1,600 pubs and bars."),
            some("around 1,600 pubs and bars"),
        ]);
        assert_eq!(v.answer, "1,600 pubs and bars", "the form most samples gave");
        assert!((v.confidence - 1.0).abs() < 1e-9);
    }
}
