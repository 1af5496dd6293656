//! Questions that ask which of two named options comes first or last ("Which film came out first,
//! A or B?"). Their answer is one of the options, so the final vote counts only readings that name
//! one; and when the question compares dates, ToQD plans one node per option (the date that option
//! stands for) and chooses by comparing the dates the nodes found. Small models find such facts
//! reliably but compare them poorly: on dev traces the local 1.5B, given "died 1963" and "died
//! 2006", often answered with the earlier film for "died later".

use hopwise_core::text::normalize_answer;
use hopwise_core::{Decision, Repair};

use super::answers::contains_words;
use super::{capped, Plan, Toqd, MAX_SUBQUESTION_WORDS, REWRITE_TOKENS};
use crate::ctx::Ctx;
use crate::details::{self, toqd::{ComparisonRecord, ToqdNode}};
use crate::error::Result;
use crate::executor::Dag;
use crate::protocol::{answer, is_question, GraphNode, Topology};
use crate::strategy::Answer;
use hopwise_core::trace::SINK;

/// Which end of the dates the question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// "first", "earlier", "older", …
    Earliest,
    /// "later", "more recently", "younger", …
    Latest,
}

/// A question that names two options to choose between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The options as the question writes them, in its order.
    pub options: [String; 2],
    /// Set when the question compares dates.
    pub direction: Option<Direction>,
}

/// Words that ask for the earlier date or the later one. "older"/"younger" compare birth dates.
const EARLIEST: &[&str] = &["first", "earlier", "earliest", "older", "oldest", "sooner", "before"];
const LATEST: &[&str] = &["later", "latest", "last", "younger", "youngest", "recently", "recent", "newer", "newest", "after"];
/// Kinds of dated event a comparison names, each as the word starts that name it; a question
/// written for one option must keep the event its comparison names ("died earlier" is not "born").
const EVENTS: &[&[&str]] = &[
    &["die", "death", "dead"],
    &["born", "birth"],
    &["releas"],
    &["found", "establish"],
    &["publish"],
    &["form"],
    &["open"],
    &["marri"],
];
/// Words of a lifespan comparison, which no single date decides.
const LIFESPAN: &[&str] = &["age", "lived", "longer", "lifespan"];
/// Longest option, in words: past it the split is not a list of two names.
const MAX_OPTION_WORDS: usize = 12;

impl Comparison {
    /// Reads "<stem>, <A> or <B>?"; `None` for any other question.
    pub fn parse(question: &str) -> Option<Self> {
        let body = question.trim().strip_suffix('?')?.trim_end();
        let (head, second) = body.rsplit_once(" or ")?;
        let (stem, first) = head.rsplit_once(',')?;
        let (first, second, stem) = (first.trim(), second.trim(), stem.trim());
        let fits = |o: &str| !o.is_empty() && o.split_whitespace().count() <= MAX_OPTION_WORDS;
        if stem.is_empty() || !fits(first) || !fits(second) || normalize_answer(first) == normalize_answer(second) {
            return None;
        }
        let words = lower_words(stem);
        let says = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
        // "Who lived to an older age" compares lifespans, not the dates of one event.
        let direction = match (says(EARLIEST), says(LATEST), says(LIFESPAN)) {
            (_, _, true) => None,
            (true, false, _) => Some(Direction::Earliest),
            (false, true, _) => Some(Direction::Latest),
            _ => None,
        };
        Some(Self { options: [first.to_string(), second.to_string()], direction })
    }

    /// Whether `written` (a question for one option) keeps the dated event of `question` (the
    /// comparison), when `question` names one.
    pub fn keeps_event(question: &str, written: &str) -> bool {
        let stem = question.rsplit_once(',').map_or(question, |(stem, _)| stem);
        let (asked, wrote) = (lower_words(stem), lower_words(written));
        let names = |ws: &[String], event: &[&str]| ws.iter().any(|w| event.iter().any(|e| w.starts_with(e)));
        EVENTS.iter().filter(|event| names(&asked, event)).all(|event| names(&wrote, event))
    }

    /// The option `answer` names: the one it contains (or that contains it, when the answer is most
    /// of that option's name); `None` when it names neither or both.
    pub fn option_of(&self, answer: &str) -> Option<usize> {
        let answer = normalize_answer(answer);
        if answer.is_empty() {
            return None;
        }
        let names = |option: &str| {
            let option = normalize_answer(option);
            !option.is_empty()
                && (contains_words(&answer, &option)
                    || (contains_words(&option, &answer) && 2 * answer.len() >= option.len()))
        };
        match (names(&self.options[0]), names(&self.options[1])) {
            (true, false) => Some(0),
            (false, true) => Some(1),
            _ => None,
        }
    }

    /// The option a reading of the final answer chooses: the one it names, or, when a sentence
    /// names both ("A lived longer than B"), the one it names first, its subject. A sentence that
    /// names one option only after "than" chooses the other: on dev traces the summary answered
    /// "Elias Kazantzoglou lived to an older age than Moustapha Akkad" (Elia Kazan's birth name),
    /// which counted as a vote for Akkad. `None` when the reading names neither, or both as a list
    /// ("A and B", "both", "neither A nor B").
    pub fn chosen_option(&self, answer: &str) -> Option<usize> {
        let text = normalize_answer(answer);
        let padded = format!(" {text} ");
        let named_at = |index: usize| {
            let name = normalize_answer(&self.options[index]);
            (!name.is_empty()).then(|| padded.find(&format!(" {name} ")).map(|at| (at, at + name.len() + 1))).flatten()
        };
        match (named_at(0), named_at(1)) {
            (Some((at, _)), None) => Some(if padded[..at].ends_with(" than") { 1 } else { 0 }),
            (None, Some((at, _))) => Some(if padded[..at].ends_with(" than") { 0 } else { 1 }),
            (Some(a), Some(b)) => {
                let (first, second, index) = if a.0 <= b.0 { (a, b, 0) } else { (b, a, 1) };
                let between = padded.get(first.1..second.0).unwrap_or("");
                let listed = between.split_whitespace().all(|w| matches!(w, "and" | "or" | "nor"));
                let both = text.split_whitespace().any(|w| matches!(w, "both" | "neither" | "either"));
                (!listed && !both).then_some(index)
            }
            // "Love In A Fallen City" for the option "Love In A Fallen City (Film)".
            (None, None) => self.option_of(answer),
        }
    }

    /// The option whose date is the earliest or latest, as the question asks; `None` without a
    /// direction, or when the dates tie at the precision both give.
    pub fn pick(&self, dates: [&PartialDate; 2]) -> Option<usize> {
        let order = dates[0].compare(dates[1])?;
        match (self.direction?, order) {
            (_, std::cmp::Ordering::Equal) => None,
            (Direction::Earliest, std::cmp::Ordering::Less) | (Direction::Latest, std::cmp::Ordering::Greater) => Some(0),
            _ => Some(1),
        }
    }
}

impl Toqd {
    /// The plan for a question that compares two options' dates: one node per option, asking for
    /// that option's date, independent of each other. The model writes the first option's question
    /// and the second one's is the same question with the other option in it (the two are symmetric
    /// by construction, and a small model writing both confused the options); when the first comes
    /// back unusable (not a question, overlong, not about its option, or without the compared
    /// event), the second option is tried the same way. `None`, with a repair per attempt, when
    /// neither is usable: the question then plans like any other.
    pub(super) async fn comparison_plan(&self, ctx: &Ctx, question: &str, comparison: &Comparison) -> Result<Option<Plan>> {
        for index in [0, 1] {
            let option = comparison.options[index].as_str();
            let other = comparison.options[1 - index].as_str();
            let reply = ctx
                .complete_with(
                    "compare_split",
                    None,
                    "toqd_compare_split",
                    &[("question", question), ("option", option)],
                    capped(ctx, REWRITE_TOKENS),
                )
                .await?;
            // The first line, to its last `?` (a title may hold one: "What Will You Do When You Catch Me?").
            let line = answer::short_answer(&reply);
            let written = match line.rfind('?') {
                Some(end) => line[..=end].trim().to_string(),
                None => line.trim().to_string(),
            };
            let usable = is_question(&written)
                && hopwise_core::text::word_count(&written) as usize <= MAX_SUBQUESTION_WORDS
                && comparison.option_of(&written) == Some(index)
                && Comparison::keeps_event(question, &written);
            let mirrored = usable.then(|| swap_option(&written, option, other)).flatten();
            match mirrored {
                Some(mirrored) if comparison.option_of(&mirrored) == Some(1 - index) => {
                    let mut questions = vec![written, mirrored];
                    if index == 1 {
                        questions.reverse();
                    }
                    let topology = Topology {
                        n: 2,
                        edges: vec![(GraphNode::Sub(1), GraphNode::Sink), (GraphNode::Sub(2), GraphNode::Sink)],
                        repairs: Vec::new(),
                    };
                    return Ok(Some(Plan { questions, topology }));
                }
                _ => ctx.rec().repair(Repair {
                    stage: "compare".into(),
                    rule: "compare_split_unusable".into(),
                    detail: format!(
                        "the question for `{option}` came back as `{}` (not a question about it and the compared event)",
                        hopwise_core::text::truncate_words(&written, 16)
                    ),
                }),
            }
        }
        Ok(None)
    }

    /// The answer the option nodes' dates give (nodes `1` and `2` of a comparison plan), recorded on
    /// the sink; `None` when either node found no single date or the dates tie.
    pub(super) fn decide(&self, ctx: &Ctx, comparison: &Comparison, dag: &Dag) -> Option<Answer> {
        let direction = comparison.direction?;
        let answers = dag.answers();
        let answer_of = |id: &str| answers.iter().find(|(node, _, _)| node == id).map(|(_, _, a)| a.clone());
        let dates = [answer_of("1"), answer_of("2")].map(|a| a.as_deref().and_then(PartialDate::find));
        let chosen = match &dates {
            [Some(a), Some(b)] => comparison.pick([a, b]),
            _ => None,
        };
        let record = ComparisonRecord {
            options: comparison.options.to_vec(),
            direction,
            dates: dates.iter().map(|d| d.map(|d| d.to_string())).collect(),
            chosen: chosen.map(|i| comparison.options[i].clone()),
        };
        ctx.rec().update_node(SINK, |n| details::update(n, |d: &mut ToqdNode| d.comparison = Some(record)));
        let index = chosen?;
        let text = comparison.options[index].clone();
        // As sure as the less sure of the two readings that found the dates.
        let confidence = ["1", "2"]
            .iter()
            .map(|id| ctx.rec().node(id).and_then(|n| details::read::<ToqdNode>(&n)).and_then(|d| d.confidence))
            .collect::<Option<Vec<f64>>>()
            .and_then(|c| c.into_iter().reduce(f64::min));
        if let Some(c) = confidence {
            ctx.rec().set_confidence(c);
        }
        ctx.rec().update_node(SINK, |n| {
            n.decision = Decision::Known;
            n.answer = Some(text.clone());
        });
        let dated = |i: usize| format!("{} ({})", comparison.options[i], dates[i].map(|d| d.to_string()).unwrap_or_default());
        let end = match direction {
            Direction::Earliest => "earlier",
            Direction::Latest => "later",
        };
        Some(Answer { text, rationale: Some(format!("{} is {end} than {}.", dated(index), dated(1 - index))) })
    }
}

/// `text` with `option` (matched ignoring ASCII case) replaced by `other`; `None` when it does not
/// hold `option` as written.
fn swap_option(text: &str, option: &str, other: &str) -> Option<String> {
    let start = match text.find(option) {
        Some(start) => start,
        None if text.is_ascii() && option.is_ascii() => text.to_ascii_lowercase().find(&option.to_ascii_lowercase())?,
        None => return None,
    };
    Some(format!("{}{other}{}", &text[..start], &text[start + option.len()..]))
}

/// The alphanumeric runs of `text`, lowercased.
fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// A date to the precision an answer gives it: a year, a month of a year, or a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialDate {
    pub year: i32,
    pub month: Option<u8>,
    pub day: Option<u8>,
}

const MONTHS: [&str; 12] =
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];

impl PartialDate {
    /// The one date `answer` gives ("1963", "19 January 1963", "January 19, 1963", "died in 1963").
    /// `None` when it names no year, or years that differ ("1899–1975"): which one the question
    /// compares is then unclear.
    pub fn find(answer: &str) -> Option<Self> {
        let tokens = lower_words(answer);
        let mut found: Option<PartialDate> = None;
        for (i, token) in tokens.iter().enumerate() {
            let Some(year) = year_of(token) else { continue };
            let before = |back: usize| i.checked_sub(back).and_then(|j| tokens.get(j)).map(String::as_str);
            let (month, day) = match (before(2), before(1)) {
                (Some(d), Some(m)) if month_of(m).is_some() && day_of(d).is_some() => (month_of(m), day_of(d)),
                (Some(m), Some(d)) if month_of(m).is_some() && day_of(d).is_some() => (month_of(m), day_of(d)),
                (_, Some(m)) if month_of(m).is_some() => (month_of(m), None),
                _ => (None, None),
            };
            let date = PartialDate { year, month, day };
            match found {
                Some(earlier) if earlier.year != year => return None,
                // Keep the most precise mention of the same year.
                Some(earlier) if earlier.month.is_some() && date.month.is_none() => {}
                _ => found = Some(date),
            }
        }
        found
    }

    /// Orders two dates at the precision both give; `None` when they agree as far as both go but one
    /// says more (1963 against 19 January 1963 cannot be ordered).
    pub fn compare(&self, other: &PartialDate) -> Option<std::cmp::Ordering> {
        use std::cmp::Ordering::Equal;
        let by_year = self.year.cmp(&other.year);
        if by_year != Equal {
            return Some(by_year);
        }
        let by_month = match (self.month, other.month) {
            (Some(a), Some(b)) => a.cmp(&b),
            (None, None) => return Some(Equal),
            _ => return None,
        };
        if by_month != Equal {
            return Some(by_month);
        }
        match (self.day, other.day) {
            (Some(a), Some(b)) => Some(a.cmp(&b)),
            (None, None) => Some(Equal),
            _ => None,
        }
    }
}

impl std::fmt::Display for PartialDate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.month, self.day) {
            (Some(m), Some(d)) => write!(f, "{:04}-{m:02}-{d:02}", self.year),
            (Some(m), None) => write!(f, "{:04}-{m:02}", self.year),
            _ => write!(f, "{:04}", self.year),
        }
    }
}

fn year_of(token: &str) -> Option<i32> {
    (token.len() == 4).then(|| token.parse::<i32>().ok()).flatten().filter(|y| (1000..=2100).contains(y))
}

fn month_of(token: &str) -> Option<u8> {
    // A month's name or its first three letters or more ("Jan", "Sept").
    MONTHS.iter().position(|m| token.len() >= 3 && m.starts_with(token)).map(|i| i as u8 + 1)
}

fn day_of(token: &str) -> Option<u8> {
    let digits = token.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    digits.parse::<u8>().ok().filter(|d| (1..=31).contains(d) && digits.len() <= 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(s: &str) -> PartialDate {
        PartialDate::find(s).unwrap_or_else(|| panic!("no date in {s:?}"))
    }

    #[test]
    fn reads_the_options_and_the_direction() {
        let c = Comparison::parse("Which film has the director who died later, Majhli Didi or Dream Of The Rhine?").expect("a comparison");
        assert_eq!(c.options, ["Majhli Didi".to_string(), "Dream Of The Rhine".to_string()]);
        assert_eq!(c.direction, Some(Direction::Latest));
        let c = Comparison::parse("Who was born first, Arthur Conan Doyle or Penelope Lively?").expect("a comparison");
        assert_eq!(c.direction, Some(Direction::Earliest));
        let c = Comparison::parse("Which film was released more recently, Osmondagi Bolalar or Mcdull: Rise Of The Rice Cooker?")
            .expect("a comparison");
        assert_eq!(c.options[1], "Mcdull: Rise Of The Rice Cooker");
        assert_eq!(c.direction, Some(Direction::Latest));
        let c = Comparison::parse("Which is taller, the Eiffel Tower or Big Ben?").expect("options without dates");
        assert_eq!(c.direction, None);
        assert_eq!(Comparison::parse("Who directed Jaws?"), None);
        assert_eq!(Comparison::parse("Is Jaws or Alien older?"), None, "no comma before the options");
        assert_eq!(Comparison::parse("Which came first, the chicken or the chicken?"), None);
        let c = Comparison::parse("Who lived to an older age, Elia Kazan or Moustapha Akkad?").expect("options");
        assert_eq!(c.direction, None, "a lifespan, not one date");
        let c = Comparison::parse("Which was released later in its first year, A or B?");
        assert_eq!(c.and_then(|c| c.direction), None, "words for both ends decide nothing");
    }

    #[test]
    fn a_question_for_one_option_keeps_the_compared_event() {
        let q = "Which film has the director died earlier, Payment On Demand or My Cousin From Warsaw?";
        assert!(Comparison::keeps_event(q, "When did the director of Payment On Demand die?"));
        assert!(!Comparison::keeps_event(q, "When was the director of Payment On Demand born?"));
        let q = "Which film whose director is younger, Forbidden Ground or Free Guy?";
        assert!(Comparison::keeps_event(q, "When was the director of Free Guy born?"), "no event named: any date");
        assert!(Comparison::keeps_event("Which album was released first, A or B?", "When was A released?"));
    }

    #[test]
    fn the_other_options_question_mirrors_the_first() {
        let q = "When was the director of Bloody Moon born?";
        assert_eq!(swap_option(q, "Bloody Moon", "The House Of Pulcini").as_deref(), Some("When was the director of The House Of Pulcini born?"));
        assert_eq!(swap_option("When was the director of BLOODY MOON born?", "Bloody Moon", "X").as_deref(), Some("When was the director of X born?"));
        assert_eq!(swap_option(q, "Free Guy", "X"), None);
        assert_eq!(swap_option("Wann wurde Ödön geboren?", "ödön", "X"), None, "non-ASCII: exact matches only");
    }

    #[test]
    fn an_answer_names_one_option_or_none() {
        let c = Comparison::parse("Which film came out first, Love In A Fallen City (Film) or Mummy'S Boys?").expect("parsed");
        assert_eq!(c.option_of("Mummy's Boys"), Some(1));
        assert_eq!(c.option_of("The film Love in a Fallen City (film), released in 1984"), Some(0));
        assert_eq!(c.option_of("Love In A Fallen City"), Some(0), "most of the option's name");
        assert_eq!(c.option_of("Fred Guiol"), None);
        assert_eq!(c.option_of("film"), None, "a word of the option is not the option");
        assert_eq!(c.option_of("Mummy's Boys and Love In A Fallen City (Film)"), None, "both");
    }

    #[test]
    fn a_sentence_chooses_its_subject() {
        let c = Comparison::parse("Who lived to an older age, Elia Kazan or Moustapha Akkad?").expect("parsed");
        let reading = "Elias Kazantzoglou lived to an older age than Moustapha Akkad";
        assert_eq!(c.option_of(reading), Some(1), "the strict reading sees one option's name");
        assert_eq!(c.chosen_option(reading), Some(0), "named only after `than`: the other one");
        assert_eq!(c.chosen_option("Elia Kazan lived longer than Moustapha Akkad"), Some(0));
        assert_eq!(c.chosen_option("Moustapha Akkad lived longer than Elia Kazan"), Some(1));
        assert_eq!(c.chosen_option("Moustapha Akkad"), Some(1));
        assert_eq!(c.chosen_option("Elia Kazan and Moustapha Akkad"), None, "a list");
        assert_eq!(c.chosen_option("Both Elia Kazan and Moustapha Akkad lived long"), None);
        assert_eq!(c.chosen_option("Neither"), None);
        assert_eq!(c.chosen_option("Elia"), None);
    }

    #[test]
    fn finds_the_one_date_an_answer_gives() {
        assert_eq!(date("1963"), PartialDate { year: 1963, month: None, day: None });
        assert_eq!(date("19 January 1963"), PartialDate { year: 1963, month: Some(1), day: Some(19) });
        assert_eq!(date("January 19th, 1963"), PartialDate { year: 1963, month: Some(1), day: Some(19) });
        assert_eq!(date("He died in May 1963 in Rome"), PartialDate { year: 1963, month: Some(5), day: None });
        assert_eq!(date("1963 (19 January 1963)").day, Some(19), "the more precise mention");
        assert_eq!(PartialDate::find("1899–1975"), None, "two years: which one is compared is unclear");
        assert_eq!(PartialDate::find("Hrishikesh Mukherjee"), None);
        assert_eq!(PartialDate::find("12345 people"), None);
    }

    #[test]
    fn picks_the_earliest_or_latest_at_the_precision_both_give() {
        let later = Comparison::parse("Which film has the director who died later, A or B?").expect("parsed");
        let first = Comparison::parse("Who was born first, A or B?").expect("parsed");
        let (a, b) = (date("2006"), date("1963"));
        assert_eq!(later.pick([&a, &b]), Some(0));
        assert_eq!(first.pick([&a, &b]), Some(1));
        let (a, b) = (date("3 May 1963"), date("19 January 1963"));
        assert_eq!(first.pick([&a, &b]), Some(1));
        assert_eq!(first.pick([&date("1963"), &date("19 January 1963")]), None, "same year, one says more");
        assert_eq!(first.pick([&date("1963"), &date("1963")]), None, "a tie");
        let taller = Comparison::parse("Which is taller, A or B?").expect("parsed");
        assert_eq!(taller.pick([&a, &b]), None, "no direction");
    }
}
