//! Dates as answers write them, to the precision they give (a day, a month, a year, a decade or a
//! century), and lifespans: the birth and death dates one answer gives. Both order only when the
//! spans of time they could mean do not overlap, so "1963" never beats "19 January 1963" by luck
//! and "the late 19th century" is earlier than 1989. Comparing them here, not in the model, is the
//! point: the local 1.5B finds such dates reliably but gets their order and differences wrong (on
//! dev traces it gave Edward Albee, 1928–2016, 96 years and J. M. Barrie, 1860–1937, 67).

use std::cmp::Ordering;

use super::compare::lower_words;

/// A date to the precision an answer gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialDate {
    /// The year, or the first year of a decade or century.
    pub year: i32,
    pub month: Option<u8>,
    pub day: Option<u8>,
    /// How many years the date spans: 1 for a year (or a month or day of it), 10 for a decade
    /// ("1980s"), 101 for a century ("19th century" is read as 1800–1900, which covers both ways of
    /// counting centuries).
    pub years: u16,
}

const MONTHS: [&str; 12] =
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];

impl PartialDate {
    /// A year, or a month or day of it.
    pub fn new(year: i32, month: Option<u8>, day: Option<u8>) -> Self {
        Self { year, month, day, years: 1 }
    }

    /// The one date `answer` gives ("1963", "19 January 1963", "January 19, 1963", "died in 1963",
    /// "the 1920s", "late 19th century"). Mentions that nest ("1963 (19 January 1963)") give the
    /// most precise of them; `None` when it names no date, or dates that do not nest ("1899–1975"):
    /// which one the question compares is then unclear.
    pub fn find(answer: &str) -> Option<Self> {
        match dates(answer)[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Orders two dates when the spans of time they could mean do not overlap; `Equal` when they
    /// say the same; `None` when they overlap but differ (1963 against 19 January 1963).
    pub fn compare(&self, other: &PartialDate) -> Option<Ordering> {
        let (a, b) = (self.bounds(), other.bounds());
        if a == b {
            Some(Ordering::Equal)
        } else if a.1 < b.0 {
            Some(Ordering::Less)
        } else if a.0 > b.1 {
            Some(Ordering::Greater)
        } else {
            None
        }
    }

    /// Whether every day `other` could mean is one `self` could mean.
    fn contains(&self, other: &PartialDate) -> bool {
        let (a, b) = (self.bounds(), other.bounds());
        a.0 <= b.0 && b.1 <= a.1
    }

    /// The first and last day the date could mean, as days since 1970-01-01.
    fn bounds(&self) -> (i64, i64) {
        let year = i64::from(self.year);
        if self.years > 1 {
            return (days_from_civil(year, 1, 1), days_from_civil(year + i64::from(self.years), 1, 1) - 1);
        }
        match (self.month.map(i64::from), self.day.map(i64::from)) {
            (Some(m), Some(d)) => (days_from_civil(year, m, d), days_from_civil(year, m, d)),
            (Some(m), None) => {
                let next = if m == 12 { days_from_civil(year + 1, 1, 1) } else { days_from_civil(year, m + 1, 1) };
                (days_from_civil(year, m, 1), next - 1)
            }
            _ => (days_from_civil(year, 1, 1), days_from_civil(year + 1, 1, 1) - 1),
        }
    }
}

impl std::fmt::Display for PartialDate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.years, self.month, self.day) {
            (years, _, _) if years > 1 => write!(f, "{:04}/{:04}", self.year, self.year + i32::from(years) - 1),
            (_, Some(m), Some(d)) => write!(f, "{:04}-{m:02}-{d:02}", self.year),
            (_, Some(m), None) => write!(f, "{:04}-{m:02}", self.year),
            _ => write!(f, "{:04}", self.year),
        }
    }
}

/// The birth and death dates of one answer ("7 September 1909 – 28 September 2003").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifespan {
    pub born: PartialDate,
    pub died: PartialDate,
}

impl Lifespan {
    /// The lifespan `answer` gives: its dates fall in two groups of nesting mentions, the first
    /// before the second. `None` for one date, three, or two out of order.
    pub fn find(answer: &str) -> Option<Self> {
        match dates(answer)[..] {
            [born, died] if born.compare(&died) == Some(Ordering::Less) => Some(Self { born, died }),
            _ => None,
        }
    }

    /// Orders two lifespans by their length when the fewest and most days each could have lasted
    /// do not overlap ("1909–2003" is longer than "1930–2005"); `None` otherwise.
    pub fn compare(&self, other: &Lifespan) -> Option<Ordering> {
        let (a, b) = (self.days(), other.days());
        if a.1 < b.0 {
            Some(Ordering::Less)
        } else if a.0 > b.1 {
            Some(Ordering::Greater)
        } else {
            None
        }
    }

    /// Whole years lived, as far as the dates tell (the fewest the dates allow).
    pub fn years(&self) -> i64 {
        self.days().0 * 4 / 1461
    }

    fn days(&self) -> (i64, i64) {
        let (born, died) = (self.born.bounds(), self.died.bounds());
        (died.0 - born.1, died.1 - born.0)
    }
}

impl std::fmt::Display for Lifespan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} to {}", self.born, self.died)
    }
}

/// Whether `answer` names a date at all: a year, decade or century [`dates`] reads, a bare number
/// of three or four digits (a year before 1000), or a month. An ordinal alone ("George Grey, 2nd
/// Earl of Kent", a dev answer to "When did … die?") is none.
pub(super) fn names_a_date(answer: &str) -> bool {
    let tokens = lower_words(answer);
    let year_like = |t: &String| (3..=4).contains(&t.len()) && t.chars().all(|c| c.is_ascii_digit());
    !dates(answer).is_empty() || tokens.iter().any(|t| year_like(t) || (t != "may" && month_of(t).is_some()))
}

/// The dates `answer` gives, in order: a run of mentions that nest ("1963 (19 January 1963)") is one
/// date, the most precise of them.
fn dates(answer: &str) -> Vec<PartialDate> {
    let mut dates: Vec<PartialDate> = Vec::new();
    for date in mentions(answer) {
        match dates.last_mut() {
            Some(held) if held.contains(&date) => *held = date,
            Some(held) if date.contains(held) => {}
            _ => dates.push(date),
        }
    }
    dates
}

/// Every date `answer` mentions, in order.
fn mentions(answer: &str) -> Vec<PartialDate> {
    let tokens = lower_words(answer);
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let before = |back: usize| i.checked_sub(back).and_then(|j| tokens.get(j)).map(String::as_str);
        if let Some(year) = year_of(token) {
            let (month, day) = match (before(2), before(1)) {
                (Some(d), Some(m)) if month_of(m).is_some() && day_of(d).is_some() => (month_of(m), day_of(d)),
                (Some(m), Some(d)) if month_of(m).is_some() && day_of(d).is_some() => (month_of(m), day_of(d)),
                (_, Some(m)) if month_of(m).is_some() => (month_of(m), None),
                _ => (None, None),
            };
            found.push(PartialDate::new(year, month, day));
        } else if let Some(year) = decade_of(token) {
            found.push(PartialDate { year, month: None, day: None, years: 10 });
        } else if let Some(century) = ordinal_of(token).filter(|_| matches!(tokens.get(i + 1).map(String::as_str), Some("century" | "centuries"))) {
            found.push(PartialDate { year: (century - 1) * 100, month: None, day: None, years: 101 });
        }
    }
    found
}

fn year_of(token: &str) -> Option<i32> {
    (token.len() == 4).then(|| token.parse::<i32>().ok()).flatten().filter(|y| (1000..=2100).contains(y))
}

/// "1920s".
fn decade_of(token: &str) -> Option<i32> {
    token.strip_suffix('s').and_then(year_of).filter(|y| y % 10 == 0)
}

/// "19th" as 19, for centuries 1 to 21.
fn ordinal_of(token: &str) -> Option<i32> {
    let digits = ["st", "nd", "rd", "th"].iter().find_map(|s| token.strip_suffix(s))?;
    (!digits.is_empty() && digits.len() <= 2).then(|| digits.parse::<i32>().ok()).flatten().filter(|n| (1..=21).contains(n))
}

fn month_of(token: &str) -> Option<u8> {
    // A month's name or its first three letters or more ("Jan", "Sept").
    MONTHS.iter().position(|m| token.len() >= 3 && m.starts_with(token)).map(|i| i as u8 + 1)
}

fn day_of(token: &str) -> Option<u8> {
    let digits = token.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    digits.parse::<u8>().ok().filter(|d| (1..=31).contains(d) && digits.len() <= 2)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (the usual civil-from-days
/// arithmetic: years start in March so the leap day comes last).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(s: &str) -> PartialDate {
        PartialDate::find(s).unwrap_or_else(|| panic!("no date in {s:?}"))
    }

    #[test]
    fn counts_days_like_the_calendar() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28), 2, "2000 is a leap year");
        assert_eq!(days_from_civil(1900, 3, 1) - days_from_civil(1900, 2, 28), 1, "1900 is not");
        assert_eq!(days_from_civil(2001, 1, 1) - days_from_civil(2000, 1, 1), 366);
    }

    #[test]
    fn finds_the_one_date_an_answer_gives() {
        assert_eq!(date("1963"), PartialDate::new(1963, None, None));
        assert_eq!(date("19 January 1963"), PartialDate::new(1963, Some(1), Some(19)));
        assert_eq!(date("January 19th, 1963"), PartialDate::new(1963, Some(1), Some(19)));
        assert_eq!(date("He died in May 1963 in Rome"), PartialDate::new(1963, Some(5), None));
        assert_eq!(date("1963 (19 January 1963)").day, Some(19), "the more precise mention");
        assert_eq!(date("the 1920s"), PartialDate { year: 1920, month: None, day: None, years: 10 });
        assert_eq!(date("late 19th century").to_string(), "1800/1900");
        assert_eq!(date("in the 19th century, in 1895"), PartialDate::new(1895, None, None), "nested: the year");
        assert_eq!(PartialDate::find("1899–1975"), None, "two years: which one is compared is unclear");
        assert_eq!(PartialDate::find("Hrishikesh Mukherjee"), None);
        assert_eq!(PartialDate::find("12345 people"), None);
        assert_eq!(PartialDate::find("the 19th president"), None, "an ordinal without `century`");
        assert_eq!(PartialDate::find("1985s"), None, "not a decade");
    }

    #[test]
    fn orders_dates_only_where_they_cannot_overlap() {
        let order = |a: &str, b: &str| date(a).compare(&date(b));
        assert_eq!(order("3 May 1963", "19 January 1963"), Some(Ordering::Greater));
        assert_eq!(order("1963", "19 January 1963"), None, "same year, one says more");
        assert_eq!(order("1963", "1963"), Some(Ordering::Equal));
        assert_eq!(order("late 19th century", "June 1989"), Some(Ordering::Less));
        assert_eq!(order("19th century", "1850"), None, "inside the century");
        assert_eq!(order("the 1980s", "1979"), Some(Ordering::Greater));
        assert_eq!(order("December 1963", "1964"), Some(Ordering::Less));
    }

    #[test]
    fn reads_a_lifespan_as_two_dates_in_order() {
        let kazan = Lifespan::find("September 7, 1909 – September 28, 2003").expect("a lifespan");
        assert_eq!(kazan.born, PartialDate::new(1909, Some(9), Some(7)));
        assert_eq!(kazan.years(), 94);
        let akkad = Lifespan::find("born 1 July 1930, died 11 November 2005").expect("a lifespan");
        assert_eq!(akkad.years(), 75);
        assert_eq!(kazan.compare(&akkad), Some(Ordering::Greater));
        let albee = Lifespan::find("1928 – 2016").expect("years alone");
        let barrie = Lifespan::find("9 May 1860 – 19 June 1937 (1937)").expect("a nested repeat");
        assert_eq!(albee.compare(&barrie), Some(Ordering::Greater), "87-88 years against 77");
        let close = Lifespan::find("1900–1980").expect("a lifespan");
        let closer = Lifespan::find("1901–1981").expect("a lifespan");
        assert_eq!(close.compare(&closer), None, "79 to 81 years each: undecided");
        assert_eq!(Lifespan::find("1963"), None, "one date");
        assert_eq!(Lifespan::find("2003 – 1909"), None, "out of order");
        assert_eq!(Lifespan::find("1900, 1950 and 1990"), None, "three dates");
    }
}
