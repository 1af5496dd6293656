//! GBNF grammars for the structured steps of the strategies (part of each method's protocol, so they
//! live beside the prompts).
//!
//! Set one as `GenParams::grammar`; the local backend then only samples tokens the grammar allows, so
//! even a 0.5B model emits text the parsers accept.

/// A numbered list of one to eight questions, numbered 1, 2, 3, … in order, one per line, each ending
/// with a question mark: `1. Who directed Jaws?\n2. When was that person born?\n`.
///
/// The numbering is unrolled (GBNF cannot count), which is what keeps it consecutive. Ending every line
/// at its first `?` stops small models from running a line on into an answer.
pub const NUMBERED_QUESTIONS: &str = r#"root ::= "1. " line ("2. " line ("3. " line ("4. " line ("5. " line ("6. " line ("7. " line ("8. " line)?)?)?)?)?)?)?
line ::= [^\n? ] [^\n?]* "?\n"
"#;

/// One to twelve dependency edges, one per line: `1 -> 2`, `2 -> Q` (`Q` is the main question).
pub const EDGES: &str = r#"root ::= edge edge? edge? edge? edge? edge? edge? edge? edge? edge? edge? edge?
edge ::= node " -> " target "\n"
target ::= node | "Q"
node ::= [1-9] [0-9]?
"#;

/// Looks a grammar up by name (`numbered_questions`, `edges`), for configuration files.
pub fn by_name(name: &str) -> Option<&'static str> {
    match name {
        "numbered_questions" => Some(NUMBERED_QUESTIONS),
        "edges" => Some(EDGES),
        _ => None,
    }
}
