//! Text utilities shared by strategies and metrics.

/// Number of whitespace-separated words (the papers' "input/output words").
/// Shortest piece of a secret that is still hidden when a message was cut through the secret.
pub const MIN_SECRET_PIECE: usize = 8;

/// `text` with every configured secret replaced by `<redacted>`: whole occurrences, and any piece of
/// at least [`MIN_SECRET_PIECE`] characters from the start or the end of a secret (what survives when
/// a message was cut through it). Every error path that may echo a secret goes through this.
pub fn redact_secrets(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for secret in secrets.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        out = out.replace(secret, "<redacted>");
        let bounds: Vec<usize> = secret.char_indices().map(|(i, _)| i).skip(1).collect();
        // Longest pieces first, so a shorter piece never splits a longer one.
        let mut pieces: Vec<&str> = Vec::new();
        for &at in &bounds {
            pieces.push(&secret[..at]);
            pieces.push(&secret[at..]);
        }
        pieces.retain(|p| p.chars().count() >= MIN_SECRET_PIECE);
        pieces.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for piece in pieces {
            if out.contains(piece) {
                out = out.replace(piece, "<redacted>");
            }
        }
    }
    out
}

pub fn word_count(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// SQuAD answer normalisation: lower-case, drop punctuation and the articles a/an/the, collapse
/// whitespace.
pub fn normalize_answer(s: &str) -> String {
    let lowered = s.to_lowercase();
    let no_punct: String =
        lowered.chars().map(|c| if c.is_alphanumeric() || c.is_whitespace() { c } else { ' ' }).collect();
    no_punct.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect::<Vec<_>>().join(" ")
}

/// Parses a numbered list ("1. …", "2) …", "Step 3: …"); falls back to the non-empty lines that end
/// with a question mark. At most `max` items.
pub fn parse_numbered_list(reply: &str, max: usize) -> Vec<String> {
    let mut items = Vec::new();
    for line in reply.lines() {
        let line = line.trim().replace("**", "").replace("__", "");
        let body = line
            .strip_prefix("Step ")
            .or_else(|| line.strip_prefix("step "))
            .unwrap_or(&line)
            .trim_start_matches(['-', '*', ' ']);
        let digits = body.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            continue;
        }
        let rest = body[digits..].trim_start();
        let Some(rest) = rest.strip_prefix(['.', ')', ':']) else {
            continue;
        };
        let rest = rest.trim();
        if !rest.is_empty() {
            items.push(rest.to_string());
        }
    }
    if items.is_empty() {
        items = reply.lines().map(str::trim).filter(|l| l.ends_with('?')).map(str::to_string).collect();
    }
    items.truncate(max);
    items
}

/// Splits text into sentences at `.`, `!` or `?` followed by whitespace (or the end), keeping
/// citation markers such as `[1][2]` attached to the sentence they follow. A dot after an
/// abbreviation ("U.S.", "Dr.", an initial such as "J.") is not a boundary.
pub fn split_sentences(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let before_len = cur.len();
        cur.push(c);
        if matches!(c, '.' | '!' | '?') {
            // Pull in trailing citation markers and closing quotes.
            let mut j = i + 1;
            loop {
                while j < chars.len() && chars[j] == ' ' && chars.get(j + 1) == Some(&'[') {
                    j += 1;
                }
                if j < chars.len() && chars[j] == '[' {
                    let close = chars[j..].iter().position(|&x| x == ']').map(|p| j + p);
                    match close {
                        Some(end) if chars[j + 1..end].iter().all(|x| x.is_ascii_digit() || *x == ',' || *x == ' ') => {
                            cur.extend(&chars[i + 1..=end]);
                            i = end;
                            j = end + 1;
                            continue;
                        }
                        _ => break,
                    }
                }
                if j < chars.len() && matches!(chars[j], '"' | '\'' | ')') {
                    cur.push(chars[j]);
                    i = j;
                    j += 1;
                    continue;
                }
                break;
            }
            let boundary = j >= chars.len() || chars[j].is_whitespace();
            if boundary && !(c == '.' && ends_with_abbreviation(&cur[..before_len])) {
                let s = cur.trim().to_string();
                if !s.is_empty() {
                    out.push(s);
                }
                cur.clear();
            }
        }
        i += 1;
    }
    let s = cur.trim().to_string();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

fn ends_with_abbreviation(before_dot: &str) -> bool {
    let word = before_dot.rsplit(char::is_whitespace).next().unwrap_or("");
    let word = word.trim_start_matches(['(', '"', '\'']);
    if word.contains('.') {
        return true; // "U.S", "e.g"
    }
    let mut cs = word.chars();
    if let (Some(first), None) = (cs.next(), cs.next()) {
        return first.is_uppercase(); // an initial: "J. R. R. Tolkien"
    }
    matches!(
        word,
        "Mr" | "Mrs" | "Ms" | "Dr" | "St" | "Jr" | "Sr" | "vs" | "Inc" | "Co" | "Ltd" | "Prof" | "Gen" | "Mt"
    )
}

/// Cuts `s` to at most `max_words` words.
pub fn truncate_words(s: &str, max_words: usize) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    if words.len() <= max_words {
        s.trim().to_string()
    } else {
        format!("{} …", words[..max_words].join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_whole_and_where_a_cut_left_a_piece() {
        let key = "sk-proj-0123456789abcdefghijklmnopqrstuvwxyz";
        assert_eq!(redact_secrets(&format!("bad key {key} given"), &[key]), "bad key <redacted> given");
        // A snippet cut through the key keeps its start; a message may also start inside it.
        let cut = format!("HTTP 401: invalid key {}…", &key[..30]);
        let shown = redact_secrets(&cut, &[key]);
        assert_eq!(shown, "HTTP 401: invalid key <redacted>…");
        assert_eq!(redact_secrets(&format!("{} was refused", &key[20..]), &[key]), "<redacted> was refused");
        // A piece shorter than the minimum is ordinary text.
        assert_eq!(redact_secrets("sk-proj ok", &[key]), "sk-proj ok");
        assert_eq!(redact_secrets("nothing", &[]), "nothing");
        assert_eq!(redact_secrets("nothing", &["  "]), "nothing");
    }

    #[test]
    fn normalizes_like_squad() {
        assert_eq!(normalize_answer("The  Beatles!"), "beatles");
        assert_eq!(normalize_answer("An apple, a day"), "apple day");
        assert_eq!(normalize_answer(""), "");
    }

    #[test]
    fn splits_sentences_keeping_citations() {
        let s = split_sentences("Paris is in France [1]. It has 2 million people [2][3]. Done");
        assert_eq!(s, vec!["Paris is in France [1].", "It has 2 million people [2][3].", "Done"]);
        let t = split_sentences("He lived in the U.S. for years. Then left.");
        assert_eq!(t, vec!["He lived in the U.S. for years.", "Then left."]);
        let u = split_sentences("It is true.[1] Next one.");
        assert_eq!(u, vec!["It is true.[1]", "Next one."]);
        assert!(split_sentences("   ").is_empty());
    }

    #[test]
    fn counts_words() {
        assert_eq!(word_count(" a b\nc "), 3);
        assert_eq!(truncate_words("a b c", 2), "a b …");
    }
}
