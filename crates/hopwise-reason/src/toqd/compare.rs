//! Questions that ask which of two named options comes first or last ("Which film came out first,
//! A or B?", "Was A or B born first?") or lived longer. Their answer is one of the options, so the
//! final vote counts only readings that name one; and when the question compares dates or
//! lifespans, ToQD plans one node per option (the date or the birth and death dates that option
//! stands for) and chooses by comparing what the nodes found ([`dates`](super::dates)). Small
//! models find such facts reliably but compare them poorly: on dev traces the local 1.5B, given
//! "died 1963" and "died 2006", often answered with the earlier film for "died later".

use std::cmp::Ordering;

use hopwise_core::text::normalize_answer;
use hopwise_core::{Decision, Repair};

use super::answers::contains_words;
use super::dates::{Lifespan, PartialDate};
use super::{capped, node_confidence, Plan, Toqd, MAX_SUBQUESTION_WORDS, REWRITE_TOKENS};
use crate::ctx::Ctx;
use crate::details::{self, toqd::{ComparisonRecord, ToqdNode}};
use crate::error::Result;
use crate::executor::Dag;
use crate::protocol::{answer, is_question, GraphNode, Topology};
use crate::strategy::Answer;
use hopwise_core::trace::SINK;

/// What the question asks for of the options' dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The earliest date: "first", "earlier", "older", …
    Earliest,
    /// The latest date: "later", "more recently", "younger", …
    Latest,
    /// The longest lifespan: "lived longer", "lived to an older age".
    LongerLife,
    /// The shortest lifespan: "died younger", "lived a shorter life".
    ShorterLife,
}

impl Direction {
    /// Whether the options are compared by lifespan, which no single date decides.
    pub fn is_lifespan(self) -> bool {
        matches!(self, Direction::LongerLife | Direction::ShorterLife)
    }

    /// Whether the option that orders first wins (the earliest date, the shortest life).
    fn wants_least(self) -> bool {
        matches!(self, Direction::Earliest | Direction::ShorterLife)
    }
}

/// A question that names two options to choose between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The options as the question writes them, in its order.
    pub options: [String; 2],
    /// Set when the question compares dates or lifespans.
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
/// Words of living, which with a word of length ask for a lifespan ("lived longer", "a shorter
/// life"); alone they may not ("Who lived in Paris first?").
const LIVING: &[&str] = &["lived", "life", "lifespan", "lifetime"];
const LENGTH: &[&str] = &["longer", "longest", "shorter", "shortest", "older", "oldest", "younger", "youngest", "age", "long"];
/// Words that, with a word of death, ask for an age at death ("Who died younger").
const AGED: &[&str] = &["younger", "youngest", "older", "oldest"];
/// Words of length or age that no single date decides: without a word of living they leave the
/// comparison undated ("Which film is longer").
const UNDATED: &[&str] = &["age", "longer", "shorter"];
/// Words that ask for the shorter life.
const SHORTER: &[&str] = &["shorter", "shortest", "younger", "youngest"];
/// Words that relate the options to someone else, whose dates the comparison is about.
const RELATIONS: &[&str] = &["of", "whose", "has", "have", "had", "with", "by"];
/// Words that may open a question that puts its options first ("Was A or B born first?").
const AUXILIARIES: &[&str] = &["was", "were", "is", "are", "did", "does", "do", "has", "have", "had"];
/// Lower-case words that may sit inside a name ("Duke of York", "Ludwig van Beethoven").
const NAME_JOINERS: &[&str] = &["of", "the", "de", "del", "da", "di", "du", "van", "von", "der", "den", "la", "le", "y"];
/// Longest option, in words: past it the split is not a list of two names.
const MAX_OPTION_WORDS: usize = 12;

impl Comparison {
    /// Reads "<stem>, <A> or <B>?" and "<was|did|…> <A> or <B> <stem>?"; `None` for any other
    /// question.
    pub fn parse(question: &str) -> Option<Self> {
        let body = question.trim().strip_suffix('?')?.trim_end();
        let (first, second, stem) = split_listed(body).or_else(|| split_leading(body))?;
        let fits = |o: &str| !o.is_empty() && o.split_whitespace().count() <= MAX_OPTION_WORDS;
        if stem.is_empty() || !fits(&first) || !fits(&second) || normalize_answer(&first) == normalize_answer(&second) {
            return None;
        }
        Some(Self { options: [first, second], direction: direction_of(&stem) })
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

    /// `readings`, each as the option it chooses ([`Comparison::chosen_option`]; `None` for one
    /// that chooses neither), when any reading chooses one; `None` when none does. A question that
    /// names two options is answered by one of them, so only such readings should vote.
    pub fn as_options(&self, readings: &[Option<String>]) -> Option<Vec<Option<String>>> {
        let chosen: Vec<Option<String>> = readings
            .iter()
            .map(|r| r.as_deref().and_then(|r| self.chosen_option(r)).map(|i| self.options[i].clone()))
            .collect();
        chosen.iter().any(Option::is_some).then_some(chosen)
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
    /// date direction, or when the dates tie or overlap at the precision both give.
    pub fn pick(&self, dates: [&PartialDate; 2]) -> Option<usize> {
        self.choose(self.direction.filter(|d| !d.is_lifespan())?, dates[0].compare(dates[1])?)
    }

    /// The option that lived longer or shorter, as the question asks; `None` without a lifespan
    /// direction, or when the lifespans could be as long as each other.
    pub fn pick_lifespan(&self, lives: [&Lifespan; 2]) -> Option<usize> {
        self.choose(self.direction.filter(|d| d.is_lifespan())?, lives[0].compare(lives[1])?)
    }

    fn choose(&self, direction: Direction, order: Ordering) -> Option<usize> {
        match order {
            Ordering::Equal => None,
            Ordering::Less => Some(if direction.wants_least() { 0 } else { 1 }),
            Ordering::Greater => Some(if direction.wants_least() { 1 } else { 0 }),
        }
    }

    /// Whether the comparison asks about the options themselves ("Who lived longer, A or B?"), not
    /// about something related to them ("Which film has the director who lived longer, A or B?").
    fn asks_of_the_options(&self, question: &str) -> bool {
        let stem = question.rsplit_once(',').map_or(question, |(stem, _)| stem);
        !lower_words(stem).iter().any(|w| RELATIONS.contains(&w.as_str()))
    }

    /// Whether `written` (a question for one option) asks what the comparison needs: the dated
    /// event the comparison names, or, for a lifespan, both the birth and the death.
    fn asks_what_is_compared(&self, question: &str, written: &str) -> bool {
        if !self.direction.is_some_and(Direction::is_lifespan) {
            return Self::keeps_event(question, written);
        }
        let words = lower_words(written);
        let names = |event: &[&str]| words.iter().any(|w| event.iter().any(|e| w.starts_with(e)));
        names(EVENTS[0]) && names(EVENTS[1])
    }
}

/// "<stem>, <A> or <B>": the options after the stem's last comma.
fn split_listed(body: &str) -> Option<(String, String, String)> {
    let (head, second) = body.rsplit_once(" or ")?;
    let (stem, first) = head.rsplit_once(',')?;
    Some((first.trim().to_string(), second.trim().to_string(), stem.trim().to_string()))
}

/// "<auxiliary> <A> or <B> <rest>": options that open the question, each a name (its words
/// capitalised, but for joiners inside it); B ends where the lower-case rest begins.
fn split_leading(body: &str) -> Option<(String, String, String)> {
    let (auxiliary, rest) = body.split_once(' ')?;
    if !AUXILIARIES.contains(&auxiliary.to_lowercase().as_str()) {
        return None;
    }
    let (first, after) = rest.split_once(" or ")?;
    let words: Vec<&str> = after.split_whitespace().collect();
    let capital = |w: &str| w.chars().next().is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
    // The longest run of name words that ends on a capitalised one.
    let mut end = 0;
    for (i, w) in words.iter().enumerate() {
        if capital(w) {
            end = i + 1;
        } else if !NAME_JOINERS.contains(w) {
            break;
        }
    }
    // A name may open with a joiner ("the Duke of York").
    let is_name = |name: &str| name.split_whitespace().find(|w| !NAME_JOINERS.contains(w)).is_some_and(capital);
    let (second, tail) = (words[..end].join(" "), words[end..].join(" "));
    (is_name(first) && is_name(&second) && !tail.is_empty())
        .then(|| (first.trim().to_string(), second, format!("{auxiliary} {tail}")))
}

/// What the words of a comparison's stem ask of the options' dates.
fn direction_of(stem: &str) -> Option<Direction> {
    let words = lower_words(stem);
    let says = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    let dies = words.iter().any(|w| EVENTS[0].iter().any(|e| w.starts_with(e)));
    // "Who lived to an older age", "Who died younger": lifespans, not the dates of one event.
    if (says(LIVING) && says(LENGTH)) || (dies && says(AGED)) {
        return Some(if says(SHORTER) { Direction::ShorterLife } else { Direction::LongerLife });
    }
    match (says(EARLIEST), says(LATEST)) {
        _ if says(UNDATED) => None,
        (true, false) => Some(Direction::Earliest),
        (false, true) => Some(Direction::Latest),
        _ => None,
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
                && comparison.asks_what_is_compared(question, &written);
            let mirrored = usable.then(|| swap_option(&written, option, other)).flatten();
            match mirrored {
                Some(mirrored) if comparison.option_of(&mirrored) == Some(1 - index) => {
                    let mut questions = vec![written, mirrored];
                    if index == 1 {
                        questions.reverse();
                    }
                    return Ok(Some(option_plan(questions)));
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
        // "Who lived longer, A or B?" asks of the options themselves, so their question needs no
        // model: on dev traces it wrote "When did Elia Kazan die?", which no lifespan comes from.
        if comparison.direction.is_some_and(Direction::is_lifespan) && comparison.asks_of_the_options(question) {
            ctx.rec().repair(Repair {
                stage: "compare".into(),
                rule: "lifespan_question".into(),
                detail: "asked each option for its birth and death dates".into(),
            });
            return Ok(Some(option_plan(comparison.options.iter().map(|o| format!("What were the birth and death dates of {o}?")).collect())));
        }
        Ok(None)
    }

    /// The answer the option nodes' dates (or lifespans) give (nodes `1` and `2` of a comparison
    /// plan), recorded on the sink; `None` when either node found none, or they do not order.
    pub(super) fn decide(&self, ctx: &Ctx, comparison: &Comparison, dag: &Dag) -> Option<Answer> {
        let direction = comparison.direction?;
        let answers = dag.answers();
        let answer_of = |id: &str| answers.iter().find(|(node, _, _)| node == id).map(|(_, _, a)| a.clone());
        let found = [answer_of("1"), answer_of("2")];
        // What each option's node found, as the record writes it, and the option chosen.
        let (shown, chosen): ([Option<String>; 2], Option<usize>) = if direction.is_lifespan() {
            let lives = found.clone().map(|a| a.as_deref().and_then(Lifespan::find));
            let chosen = match &lives {
                [Some(a), Some(b)] => comparison.pick_lifespan([a, b]),
                _ => None,
            };
            (lives.map(|l| l.map(|l| format!("{}/{} ({} years)", l.born, l.died, l.years()))), chosen)
        } else {
            let dates = found.clone().map(|a| a.as_deref().and_then(PartialDate::find));
            let chosen = match &dates {
                [Some(a), Some(b)] => comparison.pick([a, b]),
                _ => None,
            };
            (dates.map(|d| d.map(|d| d.to_string())), chosen)
        };
        let record = ComparisonRecord {
            options: comparison.options.to_vec(),
            direction,
            dates: shown.to_vec(),
            chosen: chosen.map(|i| comparison.options[i].clone()),
        };
        ctx.rec().update_node(SINK, |n| details::update(n, |d: &mut ToqdNode| d.comparison = Some(record)));
        let index = chosen?;
        let text = comparison.options[index].clone();
        // As sure as the less sure of the two readings that found the dates.
        let confidence = ["1", "2"]
            .iter()
            .map(|id| node_confidence(ctx, id))
            .collect::<Option<Vec<f64>>>()
            .and_then(|c| c.into_iter().reduce(f64::min));
        if let Some(c) = confidence {
            ctx.rec().set_confidence(c);
        }
        ctx.rec().update_node(SINK, |n| {
            n.decision = Decision::Known;
            n.answer = Some(text.clone());
        });
        let dated = |i: usize| format!("{} ({})", comparison.options[i], shown[i].clone().unwrap_or_default());
        let relation = match direction {
            Direction::Earliest => "is earlier than",
            Direction::Latest => "is later than",
            Direction::LongerLife => "lived longer than",
            Direction::ShorterLife => "lived a shorter life than",
        };
        Some(Answer { text, rationale: Some(format!("{} {relation} {}.", dated(index), dated(1 - index))) })
    }
}

/// Two independent option nodes, both feeding the sink.
pub(super) fn option_plan(questions: Vec<String>) -> Plan {
    let topology = Topology {
        n: 2,
        edges: vec![(GraphNode::Sub(1), GraphNode::Sink), (GraphNode::Sub(2), GraphNode::Sink)],
        repairs: Vec::new(),
    };
    Plan { questions, topology }
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
pub(super) fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
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
        assert_eq!(Comparison::parse("Which came first, the chicken or the chicken?"), None);
        let c = Comparison::parse("Who lived to an older age, Elia Kazan or Moustapha Akkad?").expect("options");
        assert_eq!(c.direction, Some(Direction::LongerLife), "a lifespan, not one date");
        let c = Comparison::parse("Which playwright lived a longer life, Edward Albee or J. M. Barrie?").expect("options");
        assert_eq!(c.direction, Some(Direction::LongerLife));
        let c = Comparison::parse("Who died younger, A or B?").expect("options");
        assert_eq!(c.direction, Some(Direction::ShorterLife), "an age at death");
        let c = Comparison::parse("Which film is longer, Jaws or Alien?").expect("options");
        assert_eq!(c.direction, None, "a running time: no date decides it");
        let c = Comparison::parse("Who lived in Paris first, A or B?").expect("options");
        assert_eq!(c.direction, Some(Direction::Earliest), "living somewhere is not a lifespan");
        let c = Comparison::parse("Which was released later in its first year, A or B?");
        assert_eq!(c.and_then(|c| c.direction), None, "words for both ends decide nothing");
    }

    #[test]
    fn reads_options_that_open_the_question() {
        let c = Comparison::parse("Was Jamie Curry or Alyaksey Vasilewski born first?").expect("options first");
        assert_eq!(c.options, ["Jamie Curry".to_string(), "Alyaksey Vasilewski".to_string()]);
        assert_eq!(c.direction, Some(Direction::Earliest));
        let c = Comparison::parse("Is Jaws or Alien older?").expect("options first");
        assert_eq!(c.options, ["Jaws".to_string(), "Alien".to_string()]);
        let c = Comparison::parse("Did the Duke of York or Ludwig van Beethoven die later?").expect("joiners inside names");
        assert_eq!(c.options[1], "Ludwig van Beethoven");
        assert_eq!(c.direction, Some(Direction::Latest));
        let c = Comparison::parse("Is Paris or London the capital of France?").expect("options without dates");
        assert_eq!((c.options[0].as_str(), c.direction), ("Paris", None));
        assert_eq!(Comparison::parse("Was the film released in 1990 or 1991?"), None, "the first option is no name");
        assert_eq!(Comparison::parse("Was it Jaws or Alien?"), None, "nothing after the options");
        assert_eq!(Comparison::parse("Why Jaws or Alien first?"), None, "no auxiliary");
    }

    #[test]
    fn a_lifespan_question_asks_for_both_dates() {
        let q = "Who lived to an older age, Elia Kazan or Moustapha Akkad?";
        let c = Comparison::parse(q).expect("options");
        assert!(c.asks_what_is_compared(q, "What were the birth and death dates of Elia Kazan?"));
        assert!(c.asks_what_is_compared(q, "When was Elia Kazan born and when did he die?"));
        assert!(!c.asks_what_is_compared(q, "How long did Elia Kazan live?"), "the model's arithmetic");
        assert!(!c.asks_what_is_compared(q, "When was Elia Kazan born?"));
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
        let lived = Comparison::parse("Who lived longer, A or B?").expect("parsed");
        assert_eq!(lived.pick([&a, &b]), None, "a lifespan is not decided by one date");
    }

    #[test]
    fn picks_the_longer_or_shorter_life() {
        let life = |s: &str| Lifespan::find(s).unwrap_or_else(|| panic!("no lifespan in {s:?}"));
        let (kazan, akkad) = (life("7 September 1909 – 28 September 2003"), life("1 July 1930 – 11 November 2005"));
        let longer = Comparison::parse("Who lived to an older age, Elia Kazan or Moustapha Akkad?").expect("parsed");
        assert_eq!(longer.pick_lifespan([&kazan, &akkad]), Some(0));
        let shorter = Comparison::parse("Who died younger, Elia Kazan or Moustapha Akkad?").expect("parsed");
        assert_eq!(shorter.pick_lifespan([&kazan, &akkad]), Some(1));
        let first = Comparison::parse("Who was born first, A or B?").expect("parsed");
        assert_eq!(first.pick_lifespan([&kazan, &akkad]), None, "not a lifespan question");
    }
}
