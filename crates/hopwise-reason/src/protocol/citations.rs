//! Cited thoughts: `Rationale: … [n]` / `Answer: …` replies, statements and their `[n]` markers,
//! and the grammar that makes a reply state something before each marker.

use hopwise_core::text::split_sentences;
use serde::Serialize;

/// A sampled thought: rationale `τ` and short answer `a`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Thought {
    pub rationale: String,
    pub answer: String,
}

fn strip_label<'a>(s: &'a str, labels: &[&str]) -> &'a str {
    let t = s.trim_start().trim_start_matches(['*', '#']).trim_start();
    for label in labels {
        if let Some(head) = t.get(..label.len()) {
            if head.eq_ignore_ascii_case(label) {
                return t[label.len()..].trim_start_matches('*').trim_start();
            }
        }
    }
    t
}

/// Reads a reply written as `Rationale: … Answer: …`: the answer is the labelled answer (see
/// [`answer`](super::answer)) without its citation markers, and the rationale is what stands before
/// the label. Without a label the whole reply is the rationale and the answer is empty (the sample
/// then takes no part in the vote). Never fails.
pub fn parse_thought(reply: &str) -> Thought {
    let (rationale, answer) = match super::answer::labelled(reply) {
        Some(found) => {
            let first_line = found.answer.lines().next().unwrap_or("");
            (&reply[..found.label_at], super::answer::clean(&take_markers(first_line).0))
        }
        None => (reply, String::new()),
    };
    let rationale = strip_label(rationale, &["rationale:", "reasoning:", "reason:"]);
    Thought { rationale: rationale.split_whitespace().collect::<Vec<_>>().join(" "), answer }
}

/// Removes `[n]`, `[n, m]` and `[n][m]` markers; returns the text and the numbers in order of
/// appearance (duplicates removed). Brackets holding anything but digits, commas and spaces are
/// left alone.
pub fn take_markers(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut numbers: Vec<usize> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(']') {
            Some(close) if close > 0 && after[..close].chars().all(|c| c.is_ascii_digit() || c == ',' || c == ' ') => {
                for n in after[..close].split([',', ' ']).filter_map(|t| t.parse::<usize>().ok()) {
                    if !numbers.contains(&n) {
                        numbers.push(n);
                    }
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    (out.split_whitespace().collect::<Vec<_>>().join(" ").replace(" .", "."), numbers)
}

/// One statement of a rationale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Statement {
    /// The claim without its markers (the NLI hypothesis).
    pub claim: String,
    /// Passage numbers as written (1-based), distinct, in order.
    pub citations: Vec<usize>,
}

/// Splits a rationale into statements (sentences, also split at line breaks), each with the
/// markers that follow it. Marker-only fragments are dropped.
pub fn split_statements(rationale: &str) -> Vec<Statement> {
    rationale
        .lines()
        .flat_map(split_sentences)
        .filter_map(|sentence| {
            let (claim, citations) = take_markers(&sentence);
            let has_words = claim.chars().any(char::is_alphanumeric);
            has_words.then_some(Statement { claim, citations })
        })
        .collect()
}

/// Most statements the grammar of [`cited_thought_grammar`] lets a rationale hold (the prompts ask
/// for one to three).
pub const GRAMMAR_STATEMENTS: usize = 3;

/// The rules of [`cited_thought_grammar`] that do not depend on the passage count. A statement
/// opens with a word, and within it `.`, `!` or `?` is never followed by a space or a bracket, so a
/// sentence can end only at its markers.
const CITED_STATEMENT: &str = r#"statement ::= [^\[\]\n .!?] piece piece+ "."? " "? cite cite? cite? "."?
piece ::= [^\[\]\n.!?] | [.!?] [^\[\]\n .!?]
cite ::= "[" id "]"
answer ::= [^\[\n ] [^\[\n]*
"#;

/// The GBNF of a cited thought over `passages` numbered passages: `Rationale: ` then one to
/// [`GRAMMAR_STATEMENTS`] sentences, each some words and then one to three markers naming those
/// passages, then `\nAnswer: ` and a one-line answer. This is the form the `cited_thought`
/// prompts ask for; without it a small model often writes a rationale of bare markers, which states
/// nothing whose citations could be judged, or sentences whose markers stand only after the last.
/// `None` without passages: there is nothing to cite.
pub fn cited_thought_grammar(passages: usize) -> Option<String> {
    if passages == 0 {
        return None;
    }
    // Larger numbers first: alternatives are tried in order, and `1` must not win over `10`.
    let ids: Vec<String> = (1..=passages).rev().map(|id| format!("\"{id}\"")).collect();
    let more = " (\" \" statement)?".repeat(GRAMMAR_STATEMENTS - 1);
    Some(format!(
        "root ::= \"Rationale: \" statement{more} \"\\nAnswer: \" answer\nid ::= {}\n{CITED_STATEMENT}",
        ids.join(" | ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_names_only_the_prompts_passages_and_needs_words_before_a_marker() {
        assert_eq!(cited_thought_grammar(0), None);
        let g = cited_thought_grammar(12).expect("passages to cite");
        assert!(g.contains(r#"id ::= "12" | "11" | "10" | "9""#), "{g}");
        assert!(g.contains("| \"2\" | \"1\"\n"), "{g}");
        assert!(g.contains(r#"statement ::= [^\[\]\n .!?] piece"#), "a statement opens with a word: {g}");
        assert_eq!(g.matches("statement)?").count(), GRAMMAR_STATEMENTS - 1, "{g}");
    }

    #[test]
    fn a_reply_in_the_grammars_form_reads_back_as_statements_with_their_markers() {
        let reply =
            "Rationale: Ridley Scott directed Alien [1]. He was born in South Shields[2][3]\nAnswer: South Shields";
        let thought = parse_thought(reply);
        assert_eq!(thought.answer, "South Shields");
        let statements = split_statements(&thought.rationale);
        let cited: Vec<Vec<usize>> = statements.iter().map(|s| s.citations.clone()).collect();
        assert_eq!(cited, vec![vec![1], vec![2, 3]], "{statements:?}");
        assert_eq!(statements[1].claim, "He was born in South Shields");
    }
}
