//! Typed values read from answers (the `typed_value` protocol): dates written the ISO way
//! (`YYYY`, `YYYY-MM`, `YYYY-MM-DD`, a leading `-` before the common era), numbers (`-12.5`),
//! and yes/no. A reading that a step of type `date` or `number` hands to code is constrained to
//! these forms by [`grammar_for`]; from a backend without grammars the readers fall back to the
//! digits in the text, so no word of any language is needed to read a value.

use super::plan::{AnswerType, Pick};

/// A date as the span of days it may mean: a year is its whole year, a month its whole month.
/// Days are counted on a simple calendar (12 months of 31 days), which keeps their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateSpan {
    pub first: i64,
    pub last: i64,
}

impl DateSpan {
    fn new(year: i64, month: Option<u32>, day: Option<u32>) -> Self {
        let base = year * 372;
        match (month, day) {
            (Some(m), Some(d)) => {
                let at = base + i64::from(m - 1) * 31 + i64::from(d - 1);
                Self { first: at, last: at }
            }
            (Some(m), None) => {
                let at = base + i64::from(m - 1) * 31;
                Self { first: at, last: at + 30 }
            }
            _ => Self { first: base, last: base + 371 },
        }
    }
}

/// A value code can compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Date(DateSpan),
    Number(f64),
}

/// An ISO date (`1990`, `1990-03`, `1990-03-05`, `-44-03-15`); `None` otherwise.
pub fn iso_date(text: &str) -> Option<DateSpan> {
    let text = text.trim().trim_end_matches('.');
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut parts = body.split('-');
    let year_text = parts.next()?;
    if year_text.is_empty() || year_text.len() > 4 || !year_text.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let year: i64 = year_text.parse().ok()?;
    let year = if negative { -year } else { year };
    let month = match parts.next() {
        Some(m) => Some(m.parse::<u32>().ok().filter(|m| (1..=12).contains(m))?),
        None => None,
    };
    let day = match parts.next() {
        Some(d) => Some(d.parse::<u32>().ok().filter(|d| (1..=31).contains(d))?),
        None => None,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(DateSpan::new(year, month, day))
}

/// The runs of ASCII digits in `text`.
fn digit_runs(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_digit()).filter(|run| !run.is_empty()).collect()
}

/// A date read from `text`: ISO when it is, else the year its one run of three or four digits
/// names (`5 March 1990` → 1990), so a date written in any language still compares by its year.
/// `None` when there is no such run, or several different ones.
pub fn date_in(text: &str) -> Option<DateSpan> {
    if let Some(span) = iso_date(text) {
        return Some(span);
    }
    let mut years: Vec<i64> =
        digit_runs(text).into_iter().filter(|r| (3..=4).contains(&r.len())).filter_map(|r| r.parse().ok()).collect();
    years.dedup();
    match years.as_slice() {
        [year] => Some(DateSpan::new(*year, None, None)),
        _ => None,
    }
}

/// A number read from `text`: the whole text when it is one (`-12.5`, `1,600`), else its one run
/// of digits; `None` when there is none or several different ones.
pub fn number_in(text: &str) -> Option<f64> {
    let compact: String = text.trim().trim_end_matches('.').chars().filter(|c| *c != ',').collect();
    if let Ok(n) = compact.parse::<f64>() {
        return n.is_finite().then_some(n);
    }
    let mut runs: Vec<&str> = digit_runs(text);
    runs.dedup();
    match runs.as_slice() {
        [one] => one.parse().ok(),
        _ => None,
    }
}

/// The value of `text` as a step of type `answer_type` gives it; `None` for types code does not
/// compare, or text that holds no such value.
pub fn value_of(text: &str, answer_type: AnswerType) -> Option<Value> {
    match answer_type {
        AnswerType::Date => date_in(text).map(Value::Date),
        AnswerType::Number => number_in(text).map(Value::Number),
        _ => None,
    }
}

/// A yes/no reading: `Some(true)` for yes, `Some(false)` for no (the protocol's two words, any
/// case, before any punctuation), `None` otherwise.
pub fn yes_no(text: &str) -> Option<bool> {
    let first = text.trim().split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default().to_ascii_lowercase();
    match first.as_str() {
        "yes" => Some(true),
        "no" if !text.trim_start().to_ascii_lowercase().starts_with("no!") => Some(false),
        _ => None,
    }
}

/// The index of the value `pick` chooses; `None` when a value is missing, values are of different
/// kinds, or the best two cannot be told apart (equal numbers, overlapping date spans).
pub fn pick_value(values: &[Option<Value>], pick: Pick) -> Option<usize> {
    let values: Vec<Value> = values.iter().copied().collect::<Option<Vec<_>>>()?;
    let mut order: Vec<usize> = (0..values.len()).collect();
    // Sort by the bound that matters: the lowest first for earliest/smallest.
    let key = |v: &Value| match v {
        Value::Date(span) => {
            if pick.wants_lower() {
                span.last as f64
            } else {
                span.first as f64
            }
        }
        Value::Number(n) => *n,
    };
    if values.iter().any(|v| matches!(v, Value::Date(_))) && values.iter().any(|v| matches!(v, Value::Number(_))) {
        return None;
    }
    order.sort_by(|a, b| key(&values[*a]).total_cmp(&key(&values[*b])));
    if !pick.wants_lower() {
        order.reverse();
    }
    let (best, next) = (order[0], *order.get(1)?);
    let apart = match (values[best], values[next]) {
        (Value::Date(a), Value::Date(b)) => {
            if pick.wants_lower() {
                a.last < b.first
            } else {
                a.first > b.last
            }
        }
        (Value::Number(a), Value::Number(b)) => a != b,
        _ => false,
    };
    apart.then_some(best)
}

/// The grammar a reading of type `answer_type` is constrained to when code reads its value:
/// `NO!` or an ISO date, a number, or yes/no. `None` for types whose answers are names.
pub fn grammar_for(answer_type: AnswerType) -> Option<&'static str> {
    match answer_type {
        AnswerType::Date => Some(
            "root ::= \"NO!\" | \"-\"? year (\"-\" month (\"-\" day)?)?\nyear ::= [0-9] [0-9]? [0-9]? [0-9]?\nmonth ::= \"0\" [1-9] | \"1\" [0-2]\nday ::= \"0\" [1-9] | [12] [0-9] | \"3\" [01]\n",
        ),
        AnswerType::Number => Some("root ::= \"NO!\" | \"-\"? [0-9] [0-9]* (\".\" [0-9] [0-9]*)?\n"),
        AnswerType::YesNo => Some("root ::= \"NO!\" | \"yes\" | \"no\" | \"Yes\" | \"No\"\n"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_read_as_the_span_they_may_mean() {
        let day = iso_date("1990-03-05").expect("a day");
        assert_eq!(day.first, day.last);
        let month = iso_date("1990-03").expect("a month");
        assert!(month.first <= day.first && day.last <= month.last);
        let year = iso_date("1990").expect("a year");
        assert!(year.first <= month.first && month.last <= year.last);
        assert!(iso_date("-44-03-15").expect("before the era").last < iso_date("44").expect("a year").first);
        for bad in ["1990-13", "1990-03-32", "19901", "March 1990", "", "1990-03-05-01"] {
            assert_eq!(iso_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_date_in_any_words_compares_by_its_year() {
        assert_eq!(date_in("5 March 1990"), iso_date("1990"));
        assert_eq!(date_in("5. März 1990"), iso_date("1990"));
        assert_eq!(date_in("1990-03-05"), iso_date("1990-03-05"));
        assert_eq!(date_in("between 1850 and 1860"), None, "two years: no one date");
        assert_eq!(date_in("no date here"), None);
    }

    #[test]
    fn numbers_read_whole_or_as_their_one_run_of_digits() {
        assert_eq!(number_in("1,600"), Some(1600.0));
        assert_eq!(number_in("-12.5"), Some(-12.5));
        assert_eq!(number_in("about 42 members"), Some(42.0));
        assert_eq!(number_in("3 or 4"), None);
        assert_eq!(number_in("none"), None);
    }

    #[test]
    fn yes_and_no_are_the_protocol_words_not_the_sentinel() {
        assert_eq!(yes_no("Yes."), Some(true));
        assert_eq!(yes_no("no, it is not"), Some(false));
        assert_eq!(yes_no("NO!"), None, "the sentinel declines");
        assert_eq!(yes_no("Nobody"), None);
    }

    #[test]
    fn picks_need_values_that_can_be_told_apart() {
        let date = |t: &str| Some(Value::Date(iso_date(t).expect("date")));
        assert_eq!(pick_value(&[date("1990"), date("1985-06")], Pick::Earliest), Some(1));
        assert_eq!(pick_value(&[date("1990"), date("1985-06")], Pick::Latest), Some(0));
        assert_eq!(pick_value(&[date("1990"), date("1990-06-01")], Pick::Earliest), None, "the spans overlap");
        assert_eq!(pick_value(&[date("1990"), None], Pick::Earliest), None);
        let n = |v: f64| Some(Value::Number(v));
        assert_eq!(pick_value(&[n(3.0), n(7.0), n(5.0)], Pick::Largest), Some(1));
        assert_eq!(pick_value(&[n(3.0), n(7.0), n(5.0)], Pick::Smallest), Some(0));
        assert_eq!(pick_value(&[n(7.0), n(7.0)], Pick::Largest), None);
        assert_eq!(pick_value(&[n(7.0), date("1990")], Pick::Largest), None, "mixed kinds");
    }
}
