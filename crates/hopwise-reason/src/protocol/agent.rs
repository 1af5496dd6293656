//! The search agent's turn protocol: the model may think inside `<think>…</think>`, then writes one
//! action, either `<search>query</search>` or `<answer>short answer</answer>`. Search results come
//! back to it inside `<information>…</information>`.
//!
//! The reader takes the first action tag in the reply (the model should stop after it), tolerates a
//! missing closing tag (a stop sequence may have cut it) and ignores tag case.

use super::answer::clean;

/// What one turn asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentAction {
    Search(String),
    Answer(String),
}

/// The GBNF of one turn: a short thought, then exactly one action on one line. Tag contents cannot
/// hold `<`, so a small model cannot open a second tag inside the first.
pub const TURN_GRAMMAR: &str = r#"root ::= "<think>" thought "</think>\n" action
thought ::= [^<]*
action ::= "<search>" body "</search>" | "<answer>" body "</answer>"
body ::= [^<\n]+
"#;

/// The GBNF of a turn that must answer (the search budget is spent).
pub const ANSWER_GRAMMAR: &str = r#"root ::= "<think>" thought "</think>\n<answer>" body "</answer>"
thought ::= [^<]*
body ::= [^<\n]+
"#;

/// The stop sequences that end a turn on backends without grammars.
pub const TURN_STOPS: [&str; 2] = ["</search>", "</answer>"];

/// The first action of `reply`, if it has one with a non-empty body.
pub fn read_turn(reply: &str) -> Option<AgentAction> {
    // ASCII lower-casing keeps byte offsets valid in `reply`.
    let lower = reply.to_ascii_lowercase();
    let search = lower.find("<search>").map(|at| (at, "<search>", "</search>"));
    let answer = lower.find("<answer>").map(|at| (at, "<answer>", "</answer>"));
    let mut found: Vec<_> = [search, answer].into_iter().flatten().collect();
    found.sort_by_key(|(at, ..)| *at);
    for (at, open, close) in found {
        let start = at + open.len();
        let end = lower[start..].find(close).map_or(reply.len(), |e| start + e);
        // A body ends at a line break or at the next tag, whichever comes first.
        let body = reply[start..end].split(['\n', '<']).next().unwrap_or("");
        let body = clean(body);
        if body.is_empty() {
            continue;
        }
        return Some(if open == "<search>" { AgentAction::Search(body) } else { AgentAction::Answer(body) });
    }
    None
}

/// The text of a turn as the transcript keeps it: the reply with the action's closing tag restored
/// (a stop sequence removes it).
pub fn transcript_turn(reply: &str, action: &AgentAction) -> String {
    let head = match action {
        AgentAction::Search(_) => "<search>",
        AgentAction::Answer(_) => "<answer>",
    };
    let lower = reply.to_ascii_lowercase();
    let cut = lower.find(head).unwrap_or(reply.len());
    let (tag_open, tag_close, body) = match action {
        AgentAction::Search(q) => ("<search>", "</search>", q),
        AgentAction::Answer(a) => ("<answer>", "</answer>", a),
    };
    format!("{}{tag_open}{body}{tag_close}", &reply[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_action() {
        assert_eq!(
            read_turn("<think>I need the band.</think>\n<search>band that released Counterparts</search>"),
            Some(AgentAction::Search("band that released Counterparts".into()))
        );
        assert_eq!(read_turn("<think>x</think>\n<ANSWER>Rush</ANSWER>"), Some(AgentAction::Answer("Rush".into())));
        // A stop sequence cut the closing tag.
        assert_eq!(read_turn("<search>who drummed for Rush"), Some(AgentAction::Search("who drummed for Rush".into())));
        // The first action wins over a later one.
        assert_eq!(read_turn("<search>a</search><answer>b</answer>"), Some(AgentAction::Search("a".into())));
        // An empty first action gives way to the next.
        assert_eq!(read_turn("<search> </search><answer>b</answer>"), Some(AgentAction::Answer("b".into())));
        assert_eq!(read_turn("I think the answer is Rush."), None);
        assert_eq!(read_turn("<answer>"), None);
    }

    #[test]
    fn transcript_restores_the_closing_tag() {
        let reply = "<think>t</think>\n<search>q";
        let action = read_turn(reply).expect("action");
        assert_eq!(transcript_turn(reply, &action), "<think>t</think>\n<search>q</search>");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(reply in "\\PC{0,200}") {
            let _ = read_turn(&reply);
            if let Some(a) = read_turn(&reply) {
                let _ = transcript_turn(&reply, &a);
            }
        }
    }
}
