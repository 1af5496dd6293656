//! The sentence loop's protocol: one sentence per step (the answer marker `So the answer is: X` is
//! read by [`answer::marked_answer`](super::answer::marked_answer)), FLARE-instruct's search request
//! `[Search(query)]`, and a search query.

use hopwise_core::text::split_sentences;

/// The first sentence of a reply: the first line that says something once a leading label
/// (`Next sentence:`, `Step 2:`), a list bullet or number (`-`, `1.`) and quotes are removed, cut at
/// the first sentence boundary. Empty when the reply has no such line.
pub fn first_sentence(reply: &str) -> String {
    reply
        .lines()
        .map(strip_line_prefix)
        .find(|l| !l.is_empty())
        .and_then(|l| split_sentences(l).into_iter().next())
        .unwrap_or_default()
}

fn strip_line_prefix(line: &str) -> &str {
    let mut line = line.trim().trim_start_matches(['-', '*', '•']).trim_start();
    // "1. " or "2) " list numbering (not "1984 was …").
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && (line[digits..].starts_with(". ") || line[digits..].starts_with(") ")) {
        line = line[digits + 1..].trim_start();
    }
    for label in ["next sentence:", "next step:", "next:", "sentence:", "step"] {
        if let Some(rest) = strip_prefix_ignore_case(line, label) {
            let rest = if label == "step" {
                // "Step 3:" → drop the number and the colon; "Steps so far" is left alone.
                match rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ').strip_prefix(':') {
                    Some(r) if rest.starts_with(' ') => r,
                    _ => continue,
                }
            } else {
                rest
            };
            line = rest.trim_start();
        }
    }
    line.trim_matches(|c: char| c == '"' || c.is_whitespace())
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

/// The query of a FLARE-instruct search request `[Search(query)]` (case-insensitive; a missing
/// closing bracket is tolerated).
pub fn parse_search_request(reply: &str) -> Option<String> {
    let lower = reply.to_ascii_lowercase();
    let start = lower.find("[search(")? + "[search(".len();
    let rest = &reply[start..];
    let end = rest.find(")]").or_else(|| rest.find(']')).or_else(|| rest.rfind(')')).unwrap_or(rest.len());
    let query = clean_query(&rest[..end]);
    (!query.is_empty()).then_some(query)
}

/// A query as the model wrote it, without a `Query:` label or quotes, on one line.
pub fn clean_query(reply: &str) -> String {
    let line = reply.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let line = strip_prefix_ignore_case(line, "query:").unwrap_or(line);
    line.trim().trim_matches(|c: char| matches!(c, '"' | '\'' | '`')).trim().to_string()
}

#[cfg(test)]
mod unicode_tests {
    use super::*;

    #[test]
    fn markers_next_to_case_changing_characters_slice_safely() {
        assert_eq!(parse_search_request("İİ [Search(who is ẞ)]").as_deref(), Some("who is ẞ"));
    }
}
