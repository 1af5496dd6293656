//! Reading an answer out of a reply. One rule for every strategy:
//!
//! 1. **The label.** The answer follows the last line that carries an answer label: `So the final
//!    answer is`, `The final answer is`, `Final answer`, `Short answer`, `So the answer is`,
//!    `The answer is`, `Answer is` or `Answer` (any case, `**`/`__` emphasis ignored). `Answer` and the
//!    other labels without `is` count only when a colon follows them, so "the answer depends" is
//!    prose. The answer is the rest of that line, or the next non-empty line when the label ends its
//!    line. On a line with several labels the most specific one, then the last one, wins.
//! 2. **No label.** Where the answer stands then is part of the protocol: a reasoning reply
//!    ([`final_answer`]) ends with it, a short reply ([`short_answer`]) starts with it, and in a
//!    sentence of the uncertainty loop ([`marked_answer`]) or a cited thought there is none.
//! 3. **Cleaning.** Emphasis (`**`, `__`) goes, a same-line `Reason: …` goes, and then, until nothing
//!    changes: surrounding whitespace, quotes (`"`, `'`, `` ` ``, `“`, `”`) and single `*`, one
//!    trailing `.` or `!`, and one pair of angle brackets around the whole answer (a small model fills
//!    a template's `<short answer>` slot as `<yes>`). `Washington, D.C.` reads as `Washington, D.C`,
//!    as it always has.

/// Answer labels, most specific first (see the module docs).
const LABELS: &[&str] = &[
    "so the final answer is",
    "the final answer is",
    "final answer",
    "short answer",
    "so the answer is",
    "the answer is",
    "answer is",
    "answer",
];

/// A labelled answer found in a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// The cleaned answer (may be empty: `Answer: .`).
    pub answer: String,
    /// Byte offset in the reply where the label starts (what comes before it is the reasoning).
    pub label_at: usize,
}

fn strip_emphasis(s: &str) -> String {
    s.replace("**", "").replace("__", "")
}

/// Cleans an answer as the module docs say.
pub fn clean(value: &str) -> String {
    let plain = strip_emphasis(value);
    // A reason given on the same line ("X. Reason: …") is not part of the answer. ASCII lower-casing
    // keeps byte offsets, so the position is valid in `plain`.
    let mut s = match plain.to_ascii_lowercase().find("reason:") {
        Some(pos) => &plain[..pos],
        None => plain.as_str(),
    };
    loop {
        let before = s.len();
        s = s.trim().trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '“' | '”' | '*'));
        s = s.strip_suffix(['.', '!']).unwrap_or(s);
        if let Some(inside) = s.strip_prefix('<').and_then(|t| t.strip_suffix('>')) {
            if !inside.contains(['<', '>']) {
                s = inside;
            }
        }
        if s.len() == before {
            return s.trim().to_string();
        }
    }
}

/// The last labelled answer among the lines `keep` accepts.
fn find_labelled(reply: &str, keep: impl Fn(&str) -> bool) -> Option<Labelled> {
    let mut lines = Vec::new();
    let mut offset = 0;
    for raw in reply.split_inclusive('\n') {
        // Offset of the trimmed line's first byte.
        lines.push((offset + raw.len() - raw.trim_start().len(), raw.trim()));
        offset += raw.len();
    }
    for (i, &(line_at, line)) in lines.iter().enumerate().rev() {
        if !keep(line) {
            continue;
        }
        let plain = strip_emphasis(line);
        // ASCII lower-casing keeps byte offsets, so positions found in `lower` are valid in `plain`.
        let lower = plain.to_ascii_lowercase();
        for label in LABELS {
            let Some(pos) = lower.rfind(label) else { continue };
            let after = plain[pos + label.len()..].trim_start();
            if !(after.starts_with(':') || label.ends_with(" is")) {
                continue;
            }
            let label_at = line_at + line.to_ascii_lowercase().rfind(label).unwrap_or(0);
            let value = after.trim_start_matches(':').trim();
            if !value.is_empty() {
                return Some(Labelled { answer: clean(value), label_at });
            }
            if let Some((_, next)) = lines[i + 1..].iter().find(|(_, l)| !l.is_empty()) {
                return Some(Labelled { answer: clean(next), label_at });
            }
        }
    }
    None
}

/// The labelled answer of a reply, if any.
pub fn labelled(reply: &str) -> Option<Labelled> {
    find_labelled(reply, |_| true)
}

fn non_empty_lines(reply: &str) -> impl DoubleEndedIterator<Item = &str> {
    reply.lines().map(str::trim).filter(|l| !l.is_empty())
}

/// A reasoning reply (the baselines' protocol): the labelled answer, else the last line.
pub fn final_answer(reply: &str) -> String {
    match labelled(reply) {
        Some(found) => found.answer,
        None => non_empty_lines(reply).next_back().map(clean).unwrap_or_default(),
    }
}

/// A short reply (self-verification, aggregation, rewriting): the labelled answer, else the first
/// line, where a dialog's `A:` label is dropped too.
pub fn short_answer(reply: &str) -> String {
    match labelled(reply) {
        Some(found) => found.answer,
        None => {
            let first = non_empty_lines(reply).next().unwrap_or("");
            let first = match first.get(..2) {
                Some(head) if head.eq_ignore_ascii_case("a:") => &first[2..],
                _ => first,
            };
            clean(first)
        }
    }
}

/// A sentence of the uncertainty loop: the answer its label carries, or None (the loop goes on).
pub fn marked_answer(sentence: &str) -> Option<String> {
    labelled(sentence).map(|found| found.answer).filter(|a| !a.is_empty())
}

fn starts_with_reason(line: &str) -> bool {
    let t = line.trim_start_matches(['*', '#', ' ']).to_ascii_lowercase();
    t.starts_with("reason:") || t.starts_with("rationale:")
}

/// A reply with an answer and its reason (`Answer: …` / `Reason: …` lines): the answer as a short
/// reply reads it, looking for the label outside the reason, and the first `Reason:` or
/// `Rationale:` line.
pub fn answer_with_reason(reply: &str) -> (String, Option<String>) {
    let reason = reply
        .lines()
        .map(|l| l.trim().trim_start_matches(['*', '#', ' ']).trim())
        .filter(|l| starts_with_reason(l))
        .map(|l| l[l.find(':').map_or(0, |i| i + 1)..].trim().to_string())
        .find(|r| !r.is_empty());
    let answer = match find_labelled(reply, |line| !starts_with_reason(line)) {
        Some(found) if !found.answer.is_empty() => found.answer,
        _ => short_answer(reply),
    };
    (answer, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_fallbacks_and_cleaning() {
        assert_eq!(final_answer("I think so.\nThe answer is yes."), "yes");
        assert_eq!(final_answer("The answer depends.\nLondon"), "London", "an unlabelled 'answer' is prose");
        assert_eq!(final_answer("answer:\n\n  Neil Peart  \n"), "Neil Peart");
        assert_eq!(final_answer(""), "");
        assert_eq!(final_answer("4. Compare.\n5. The short answer is: Love In A Fallen City"), "Love In A Fallen City");
        // Characters whose lower case has another byte length must not shift the cut.
        assert_eq!(final_answer("İİİ answer: Ünïcode Ⅻ"), "Ünïcode Ⅻ");
        assert_eq!(final_answer("ẞẞ Answer: X. REASON: y"), "X");
        assert_eq!(short_answer("Paris.\nIt is the capital."), "Paris");
        assert_eq!(short_answer("A: Xawery Żuławski"), "Xawery Żuławski");
        assert_eq!(marked_answer("Film X was directed by Jane Doe."), None);
        assert_eq!(marked_answer("İİ the answer is éé").as_deref(), Some("éé"));
        assert_eq!(clean("\"Jaws\"."), "Jaws");
        assert_eq!(clean("*Jaws*!"), "Jaws");
        assert_eq!(clean("Washington, D.C."), "Washington, D.C");
        assert_eq!(clean("<yes>."), "yes", "a template slot filled in place");
        assert_eq!(clean("<b>Jaws</b>"), "<b>Jaws</b>", "markup is not a slot");
        assert_eq!(short_answer("Answer: <Manchester Orchestra>\nReason: more members"), "Manchester Orchestra");
    }

    #[test]
    fn answer_and_reason_lines() {
        let (a, r) = answer_with_reason("Answer: Rush\nReason: the answer is Rush because they released it.");
        assert_eq!((a.as_str(), r.as_deref()), ("Rush", Some("the answer is Rush because they released it.")));
        let (a, r) = answer_with_reason("Rush\nsome words");
        assert_eq!((a.as_str(), r), ("Rush", None));
        let (a, _) = answer_with_reason("**Final answer:** Neil Peart.");
        assert_eq!(a, "Neil Peart");
    }

    #[test]
    fn the_label_position_splits_off_the_reasoning() {
        let reply = "Rationale: A is B [1]. So the answer is: B.";
        let found = labelled(reply).expect("labelled");
        assert_eq!(&reply[..found.label_at], "Rationale: A is B [1]. ");
        assert_eq!(found.answer, "B");
    }

    proptest::proptest! {
        #[test]
        fn readers_never_panic(reply in "\\PC{0,200}") {
            let _ = final_answer(&reply);
            let _ = short_answer(&reply);
            let _ = marked_answer(&reply);
            let _ = answer_with_reason(&reply);
            if let Some(found) = labelled(&reply) {
                proptest::prop_assert!(reply.is_char_boundary(found.label_at));
            }
        }

        #[test]
        fn a_labelled_answer_line_is_found(answer in "[A-Za-z][A-Za-z0-9 ]{0,30}[A-Za-z0-9]", prose in "[a-z ,]{0,80}") {
            let reply = format!("{prose}\nAnswer: {answer}");
            proptest::prop_assert_eq!(final_answer(&reply), answer.trim().to_string());
        }
    }
}
