//! Yes/no questions that ask whether something holds of two subjects ("Are A and B both X?",
//! "Were both A and B X?", "Did A and B both V?"), with `split_both`. Asked of one subject at a
//! time, each half is an ordinary lookup, and the answer is "yes" only when both halves are. Read
//! whole, the local 1.5B answered "Yes" to all six such HotpotQA dev questions (four are "no");
//! asked by halves it still said "Yes" to each half, so the option is off by default, for models
//! that read a single subject's passage better.

use hopwise_core::text::normalize_answer;
use hopwise_core::{Decision, Passage, Repair};

use super::compare::option_plan;
use super::{node_confidence, Plan, Toqd};
use crate::ctx::Ctx;
use crate::executor::Dag;
use crate::strategy::Answer;
use hopwise_core::trace::SINK;

/// The plural auxiliaries such a question opens with, and the form that asks of one subject.
const AUXILIARIES: &[(&str, &str)] = &[
    ("are", "Is"),
    ("were", "Was"),
    ("do", "Does"),
    ("did", "Did"),
    ("have", "Has"),
    ("had", "Had"),
    ("can", "Can"),
    ("could", "Could"),
    ("will", "Will"),
    ("would", "Would"),
];
/// Words that relate the two subjects to each other ("Do both films X and Y have directors from
/// the same country?"): no half of such a question can be asked alone.
const RELATING: &[&str] = &["same", "different", "each", "another", "together", "both", "similar", "common"];
/// Longest subject, in words: past it the split is not two names.
const MAX_SUBJECT_WORDS: usize = 10;

/// A question that asks whether something holds of both of two subjects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Both {
    /// The subjects as the question writes them, in its order.
    pub subjects: [String; 2],
    /// The question asked of each subject alone ("Is Sutera types of shrub?").
    pub questions: [String; 2],
}

impl Both {
    /// Reads "<aux> A and B both X?" and "<aux> both A and B X?". In the second form B ends with
    /// the longest run of its words that titles one of `passages` ("Reinhold Ewald" of "Reinhold
    /// Ewald ESA astronauts"); without such a title the question is not split (capitals cannot
    /// tell "Inside Job American documentaries" apart). `None` for any other question, or when a
    /// subject is empty, overlong or names the other.
    pub fn parse(question: &str, passages: &[Passage]) -> Option<Self> {
        let body = question.trim().strip_suffix('?')?.trim_end();
        let (aux, rest) = body.split_once(' ')?;
        let single = AUXILIARIES.iter().find(|(plural, _)| plural.eq_ignore_ascii_case(aux))?.1;
        let (a, b, predicate) = match strip_word(rest, "both") {
            Some(listed) => {
                let (a, tail) = listed.split_once(" and ")?;
                let (b, predicate) = split_subject(tail, passages)?;
                (a.trim().to_string(), b, predicate)
            }
            None => {
                let (a, tail) = rest.split_once(" and ")?;
                let (b, predicate) = tail.split_once(" both ")?;
                (a.trim().to_string(), b.trim().to_string(), predicate.trim().to_string())
            }
        };
        let fits = |s: &str| {
            let words = s.split_whitespace().count();
            words > 0 && words <= MAX_SUBJECT_WORDS && !s.contains(',') && !s.contains(" and ")
        };
        let relates = predicate.split(|c: char| !c.is_alphanumeric()).any(|w| RELATING.iter().any(|r| r.eq_ignore_ascii_case(w)));
        if !fits(&a) || !fits(&b) || predicate.is_empty() || relates || normalize_answer(&a) == normalize_answer(&b) {
            return None;
        }
        let ask = |subject: &str| format!("{single} {subject} {predicate}?");
        Some(Self { questions: [ask(&a), ask(&b)], subjects: [a, b] })
    }

    /// The plan: one independent node per subject, both feeding the sink.
    pub fn plan(&self) -> Plan {
        option_plan(self.questions.to_vec())
    }
}

/// `text` after a leading `word` and a space (ASCII case ignored).
fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let (head, rest) = text.split_once(' ')?;
    head.eq_ignore_ascii_case(word).then_some(rest)
}

/// Splits "Reinhold Ewald ESA astronauts" into the subject, the longest run of its first words
/// that titles one of `passages`, and what is asked of it.
fn split_subject(tail: &str, passages: &[Passage]) -> Option<(String, String)> {
    let words: Vec<&str> = tail.split_whitespace().collect();
    let titles: Vec<String> = passages.iter().map(|p| normalize_answer(&p.title)).collect();
    let end = (1..words.len().min(MAX_SUBJECT_WORDS + 1))
        .rev()
        .find(|&n| titles.iter().any(|t| !t.is_empty() && *t == normalize_answer(&words[..n].join(" "))))?;
    Some((words[..end].join(" "), words[end..].join(" ")))
}

/// Yes or no, from the first word of a node's answer; `None` for anything else.
fn polarity(answer: &str) -> Option<bool> {
    match normalize_answer(answer).split_whitespace().next()? {
        "yes" | "true" => Some(true),
        "no" | "not" | "false" | "neither" => Some(false),
        _ => None,
    }
}

impl Toqd {
    /// The answer the subject nodes (`1` and `2` of [`Both::plan`]) give: "no" when either says
    /// no, "yes" when both say yes; `None` (the summary decides) when a node said neither or only
    /// guessed (a best-effort answer).
    pub(super) fn decide_both(&self, ctx: &Ctx, both: &Both, dag: &Dag) -> Option<Answer> {
        let answers = dag.answers();
        let said = |id: &str| {
            let guessed = ctx.rec().node(id).is_none_or(|n| n.best_effort);
            let answer = answers.iter().find(|(node, _, _)| node == id).map(|(_, _, a)| a.as_str());
            answer.filter(|_| !guessed).and_then(polarity)
        };
        let found = [said("1"), said("2")];
        let confidence_of = |id: &str| node_confidence(ctx, id);
        let (text, confidence) = match found {
            [Some(true), Some(true)] => {
                ("yes", confidence_of("1").zip(confidence_of("2")).map(|(a, b)| a.min(b)))
            }
            [Some(false), _] => ("no", confidence_of("1")),
            [_, Some(false)] => ("no", confidence_of("2")),
            _ => return None,
        };
        let shown = |i: usize| match found[i] {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown",
        };
        let rationale = format!("{}: {}; {}: {}.", both.subjects[0], shown(0), both.subjects[1], shown(1));
        ctx.rec().repair(Repair {
            stage: "summary".into(),
            rule: "both_one_at_a_time".into(),
            detail: format!("asked of each subject alone: {rationale} No summary"),
        });
        if let Some(c) = confidence {
            ctx.rec().set_confidence(c);
        }
        ctx.rec().update_node(SINK, |n| {
            n.decision = Decision::Known;
            n.answer = Some(text.to_string());
        });
        Some(Answer { text: text.to_string(), rationale: Some(rationale) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titled(title: &str) -> Passage {
        Passage { id: title.to_string(), title: title.to_string(), text: String::new(), score: 1.0, ..Default::default() }
    }

    #[test]
    fn both_questions_split_into_one_question_per_subject() {
        let b = Both::parse("Are Sutera and Rhodotypos both types of shrub?", &[]).expect("parses");
        assert_eq!(b.subjects, ["Sutera", "Rhodotypos"]);
        assert_eq!(b.questions, ["Is Sutera types of shrub?", "Is Rhodotypos types of shrub?"]);
        let b = Both::parse("Did John Updike and Tom Clancy both publish more than 15 bestselling novels?", &[]).unwrap();
        assert_eq!(b.questions[1], "Did Tom Clancy publish more than 15 bestselling novels?");
        // "both A and B X": B ends where a passage title does, or at its first lower-case word.
        let q = "Were both Ernst Messerschmid and Reinhold Ewald ESA astronauts?";
        let b = Both::parse(q, &[titled("Reinhold Ewald"), titled("Ernst Messerschmid")]).unwrap();
        assert_eq!(b.questions, ["Was Ernst Messerschmid ESA astronauts?", "Was Reinhold Ewald ESA astronauts?"]);
        assert_eq!(Both::parse(q, &[titled("Ernst Messerschmid")]), None, "no title to end B by");
        let q = "Are both Freakonomics and In the Realm of the Hackers American documentaries?";
        let b = Both::parse(q, &[titled("In the Realm of the Hackers")]).unwrap();
        assert_eq!(b.subjects, ["Freakonomics", "In the Realm of the Hackers"]);
        assert_eq!(b.questions[1], "Is In the Realm of the Hackers American documentaries?");
    }

    #[test]
    fn other_questions_are_not_both_questions() {
        for q in [
            "Are Aladdin and Song of the South produced by the same company?",
            "Which band released Counterparts?",
            "Is Paris the capital of France?",
            "Are Rush and Rush both bands?",
            "Are Tom, Dick and Harry both plumbers?",
            "Were both Ernst Messerschmid and Reinhold Ewald?",
            "Are X and Y both",
            "Do both films Levity and I Come With The Rain have directors born in the same country?",
        ] {
            assert_eq!(Both::parse(q, &[titled("I Come With The Rain")]), None, "{q}");
        }
    }

    #[test]
    fn polarity_reads_the_first_word() {
        assert_eq!(polarity("Yes, it is a shrub"), Some(true));
        assert_eq!(polarity("No."), Some(false));
        assert_eq!(polarity("Not an ESA astronaut"), Some(false));
        assert_eq!(polarity("Sutera is a genus"), None);
        assert_eq!(polarity(""), None);
    }
}
