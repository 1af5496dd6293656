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

/// [`EDGES`] restricted to the ids of an `n`-question list: only `1`..`n` and `Q` can be written.
///
/// With the generic grammar small models name sub-questions that do not exist, whose edges the parser
/// then has to drop, so the list's size is built into the grammar. Larger numbers are listed first: alternatives are tried in order, and `1`
/// must not win over `10` (the following `" -> "` would then fail to match).
pub fn edges_for(n: usize) -> String {
    if n == 0 {
        return EDGES.to_string();
    }
    let ids: Vec<String> = (1..=n).rev().map(|id| format!("\"{id}\"")).collect();
    format!(
        "root ::= edge edge? edge? edge? edge? edge? edge? edge? edge? edge? edge? edge?\n\
         edge ::= node \" -> \" target \"\\n\"\n\
         target ::= node | \"Q\"\n\
         node ::= {}\n",
        ids.join(" | ")
    )
}

/// Edges of an `n`-question list that only point forward: `i -> j` with `j > i`, or `i -> Q`.
///
/// A decomposition lists a sub-question after the ones whose answers it needs (the prompt asks it to
/// refer back to them), so forward edges are enough, and a graph of forward edges cannot have a cycle.
/// With [`edges_for`] small models wrote back edges (`2 -> 1` after `1 -> 2`) on most graphs, which the
/// parser then had to drop.
pub fn forward_edges_for(n: usize) -> String {
    if n == 0 {
        return EDGES.to_string();
    }
    let mut rules = Vec::new();
    for from in (1..=n).rev() {
        let mut targets: Vec<String> = ((from + 1)..=n).rev().map(|to| format!("\"{to}\"")).collect();
        targets.push("\"Q\"".to_string());
        rules.push(format!("from{from} ::= \"{from} -> \" ({}) \"\\n\"", targets.join(" | ")));
    }
    let edge = (1..=n).rev().map(|from| format!("from{from}")).collect::<Vec<_>>().join(" | ");
    let most = (n * (n + 1) / 2).clamp(1, 12);
    let optional = " edge?".repeat(most - 1);
    format!("root ::= edge{optional}\nedge ::= {edge}\n{}\n", rules.join("\n"))
}

/// Looks a grammar up by name (`numbered_questions`, `edges`), for configuration files.
pub fn by_name(name: &str) -> Option<&'static str> {
    match name {
        "numbered_questions" => Some(NUMBERED_QUESTIONS),
        "edges" => Some(EDGES),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_edges_allow_only_later_targets_and_q() {
        let g = forward_edges_for(3);
        assert!(g.contains(r#"from1 ::= "1 -> " ("3" | "2" | "Q") "\n""#), "{g}");
        assert!(g.contains(r#"from3 ::= "3 -> " ("Q") "\n""#), "{g}");
        assert!(g.contains("edge ::= from3 | from2 | from1"), "{g}");
        assert_eq!(g.matches("edge?").count(), 5, "at most n(n+1)/2 = 6 edges: {g}");
        assert_eq!(forward_edges_for(0), EDGES);
    }

    #[test]
    fn edges_for_lists_exactly_the_ids_of_the_list() {
        let g = edges_for(3);
        assert!(g.contains(r#"node ::= "3" | "2" | "1""#), "{g}");
        assert!(g.contains(r#"edge ::= node " -> " target "\n""#), "{g}");
        assert!(!g.contains("[1-9]"));
        assert_eq!(edges_for(0), EDGES, "an empty list keeps the generic grammar");
        // Two-digit ids come before their one-digit prefixes.
        let g = edges_for(11);
        assert!(
            g.find(r#""11""#)
                < g.find(r#""1" "#).or(g.find(
                    r#""1"
"#
                ))
        );
    }
}
