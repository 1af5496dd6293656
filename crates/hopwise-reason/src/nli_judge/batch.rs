//! The `nli_labels` protocol: several (premise, hypothesis) pairs judged in one request.
//!
//! The prompt shows each distinct premise once, under a letter, and numbers the hypotheses, each
//! naming its premise's letter ([`render`]). The reply is one JSON object mapping every number to
//! a label, constrained by [`grammar`] on backends that take a GBNF grammar and by [`json_schema`]
//! on servers that take a response format; [`read_labels`] reads it, or, from a backend that
//! constrains nothing, `N: label` lines.

use hopwise_core::{NliLabel, Prompts};

use super::parse_label;

/// Most pairs one request judges; more are split into several requests. It bounds the prompt (each
/// pair may bring its own passages) so that a small judge's context still holds every claim's text.
pub const MAX_PAIRS: usize = 12;

/// Tokens a reply to `n` claims may take: an entry like `"12": "contradiction",` with its spacing
/// is at most about a dozen tokens in common tokenizers, plus the braces; the grammar ends the
/// reply itself.
pub fn reply_tokens(n: usize) -> u32 {
    16 * n as u32 + 8
}

const LABEL_WORDS: [&str; 3] = ["entailment", "neutral", "contradiction"];

/// The letter naming premise `k` (A, B, …, Z, then AA, AB, …).
fn letter(k: usize) -> String {
    let mut k = k;
    let mut name = Vec::new();
    loop {
        name.push(b'A' + (k % 26) as u8);
        if k < 26 {
            break;
        }
        k = k / 26 - 1;
    }
    name.reverse();
    String::from_utf8(name).unwrap_or_default()
}

/// The `texts` and `claims` variables of the `nli_judge_batch` template: each distinct premise as
/// an `nli_judge_batch_text`, each pair as an `nli_judge_batch_claim` naming its premise's letter.
pub fn render(pairs: &[(String, String)], prompts: &Prompts) -> hopwise_core::Result<(String, String)> {
    let mut premises: Vec<&str> = Vec::new();
    let mut claims = Vec::with_capacity(pairs.len());
    for (i, (premise, hypothesis)) in pairs.iter().enumerate() {
        let k = premises.iter().position(|p| *p == premise.as_str()).unwrap_or_else(|| {
            premises.push(premise);
            premises.len() - 1
        });
        let (number, letter) = ((i + 1).to_string(), letter(k));
        let vars = [("number", number.as_str()), ("letter", letter.as_str()), ("claim", hypothesis.trim())];
        claims.push(prompts.render("nli_judge_batch_claim", &vars)?);
    }
    let mut texts = Vec::with_capacity(premises.len());
    for (k, premise) in premises.iter().enumerate() {
        let letter = letter(k);
        texts.push(prompts.render("nli_judge_batch_text", &[("letter", letter.as_str()), ("text", premise.trim())])?);
    }
    Ok((texts.join("\n\n"), claims.join("\n")))
}

/// The GBNF grammar of a reply to `n` claims: `{"1":"entailment","2":"neutral",…}`, every number
/// once and in order. It allows the spacing models write JSON with (a space or a line break and
/// indentation between tokens), so the engine's unconstrained choice usually passes it and the
/// whole vocabulary is filtered only where it does not.
pub fn grammar(n: usize) -> String {
    let entries: Vec<String> = (1..=n).map(|i| format!("\"\\\"{i}\\\":\" ws label")).collect();
    let labels: Vec<String> = LABEL_WORDS.iter().map(|w| format!("\"\\\"{w}\\\"\"")).collect();
    format!(
        "root ::= \"{{\" ws {} ws \"}}\"\nlabel ::= {}\nws ::= [ \\n]? [ ]? [ ]? [ ]? [ ]?\n",
        entries.join(" ws \",\" ws "),
        labels.join(" | ")
    )
}

/// The same format as a JSON Schema.
pub fn json_schema(n: usize) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> =
        (1..=n).map(|i| (i.to_string(), serde_json::json!({ "enum": LABEL_WORDS }))).collect();
    let required: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// The label of each of `n` claims, `None` where the reply gives none. Reads the JSON object, or
/// failing that lines that start with a claim's number.
pub fn read_labels(text: &str, n: usize) -> Vec<Option<NliLabel>> {
    let mut labels = vec![None; n];
    let json = text.find('{').and_then(|start| {
        serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>().next()?.ok()
    });
    if let Some(serde_json::Value::Object(map)) = json {
        for (key, value) in map {
            let slot = key.trim().parse::<usize>().ok().filter(|k| (1..=n).contains(k));
            if let (Some(k), Some(word)) = (slot, value.as_str()) {
                labels[k - 1] = parse_label(word);
            }
        }
        return labels;
    }
    for line in text.lines() {
        let line = line.trim_start_matches(|c: char| !c.is_ascii_digit());
        let digits: String = line.chars().take_while(|c| c.is_ascii_digit()).collect();
        let Some(k) = digits.parse::<usize>().ok().filter(|k| (1..=n).contains(k)) else { continue };
        if labels[k - 1].is_none() {
            labels[k - 1] = parse_label(&line[digits.len()..]);
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(p, h)| (p.to_string(), h.to_string())).collect()
    }

    #[test]
    fn each_premise_is_shown_once_and_each_claim_names_it() {
        let (texts, claims) = render(
            &pairs(&[
                ("Paris is in France.", "Paris is French."),
                ("Rome is in Italy.", "Rome is Italian."),
                ("Paris is in France.", "Paris is big."),
            ]),
            &Prompts::default(),
        )
        .expect("render");
        assert_eq!(texts, "Text A:\nParis is in France.\n\nText B:\nRome is in Italy.");
        assert_eq!(claims, "1. (text A) Paris is French.\n2. (text B) Rome is Italian.\n3. (text A) Paris is big.");
    }

    #[test]
    fn letters_go_past_z() {
        assert_eq!([letter(0), letter(25), letter(26), letter(27), letter(52)], ["A", "Z", "AA", "AB", "BA"]);
    }

    #[test]
    fn the_grammar_names_every_claim_in_order() {
        let g = grammar(2);
        assert_eq!(
            g.lines().next(),
            Some(r#"root ::= "{" ws "\"1\":" ws label ws "," ws "\"2\":" ws label ws "}""#),
            "{g}"
        );
        assert!(g.contains("ws ::= [ \\n]? [ ]? [ ]? [ ]? [ ]?"), "{g}");
        assert!(
            g.contains("label ::= \"\\\"entailment\\\"\" | \"\\\"neutral\\\"\" | \"\\\"contradiction\\\"\""),
            "{g}"
        );
        let schema = json_schema(2);
        assert_eq!(schema["required"], serde_json::json!(["1", "2"]));
        assert_eq!(schema["properties"]["2"]["enum"][2], "contradiction");
    }

    #[test]
    fn labels_are_read_from_the_object_or_from_numbered_lines() {
        let read = read_labels(r#"{"1":"entailment","3":"contradiction","9":"neutral"}"#, 3);
        assert_eq!(read, [Some(NliLabel::Entailment), None, Some(NliLabel::Contradiction)]);
        let read = read_labels("1: neutral\n2. Entailment\nClaim 3: contradiction\n2: neutral", 3);
        assert_eq!(read, [Some(NliLabel::Neutral), Some(NliLabel::Entailment), Some(NliLabel::Contradiction)]);
        let trailing = read_labels("Labels: {\"1\": \"neutral\", \"2\": \"entailment\"} (then {more}).", 2);
        assert_eq!(trailing, [Some(NliLabel::Neutral), Some(NliLabel::Entailment)]);
        assert_eq!(read_labels("I cannot tell.", 2), [None, None]);
    }
}
