//! Short human lines for a question's progress, one per graph event worth telling a reader: a node
//! planned, a search made, a node answered. The server streams them as reasoning chunks; any client
//! that shows progress can use the same lines.

use std::collections::{HashMap, HashSet};

use crate::trace::{Decision, Event, EventKind, SINK};

/// Turns a question's events into progress lines, remembering what it already told.
#[derive(Debug, Default)]
pub struct ProgressLines {
    questions: HashMap<String, String>,
    answered: HashSet<String>,
}

impl ProgressLines {
    pub fn new() -> Self {
        Self::default()
    }

    /// The line for `event`, or `None` when it adds nothing a reader needs (model calls, edges,
    /// repairs, an unchanged node, the final answer, which is the reply itself).
    pub fn line(&mut self, event: &Event) -> Option<String> {
        match &event.kind {
            EventKind::Node { node } if node.id != SINK => {
                let first = !self.questions.contains_key(&node.id);
                self.questions.insert(node.id.clone(), node.question.clone());
                let answer = node.answer.as_deref().map(str::trim).filter(|a| !a.is_empty());
                match answer {
                    Some(answer) if node.decision != Decision::Pending && self.answered.insert(node.id.clone()) => {
                        Some(format!(
                            "{}. {} → {} ({})",
                            node.id,
                            one_line(&node.question),
                            one_line(answer),
                            decision(node.decision)
                        ))
                    }
                    _ if first => Some(format!("{}. {}", node.id, one_line(&node.question))),
                    _ => None,
                }
            }
            EventKind::Retrieval { query, passage_ids, error, .. } => {
                let at = event.node_id.as_deref().filter(|n| *n != SINK).map(|n| format!("{n}. ")).unwrap_or_default();
                Some(match error {
                    Some(_) => format!("{at}searching “{}” failed", one_line(query)),
                    None => format!("{at}searching “{}” → {} passages", one_line(query), passage_ids.len()),
                })
            }
            _ => None,
        }
    }
}

fn decision(d: Decision) -> &'static str {
    match d {
        Decision::Pending => "pending",
        Decision::Known => "known",
        Decision::Retrieved => "from evidence",
        Decision::Decomposed => "from its sub-questions",
        Decision::Unresolved => "unsure",
    }
}

/// At most 160 characters on one line.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(160) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::NodeTrace;

    fn node(id: &str, answer: Option<&str>, decision: Decision) -> Event {
        let node = NodeTrace {
            id: id.into(),
            question: "Who drummed for Rush?".into(),
            answer: answer.map(str::to_string),
            decision,
            ..Default::default()
        };
        Event { seq: 0, start_ms: 0, end_ms: 0, node_id: Some(id.into()), kind: EventKind::Node { node } }
    }

    #[test]
    fn a_node_is_told_when_planned_and_when_answered_once_each() {
        let mut lines = ProgressLines::new();
        assert_eq!(lines.line(&node("1", None, Decision::Pending)).as_deref(), Some("1. Who drummed for Rush?"));
        assert_eq!(lines.line(&node("1", None, Decision::Pending)), None);
        let search = Event {
            seq: 1,
            start_ms: 0,
            end_ms: 0,
            node_id: Some("1".into()),
            kind: EventKind::Retrieval {
                query: "Rush drummer".into(),
                k: 5,
                passage_ids: vec!["a".into(), "b".into()],
                error: None,
            },
        };
        assert_eq!(lines.line(&search).as_deref(), Some("1. searching “Rush drummer” → 2 passages"));
        assert_eq!(
            lines.line(&node("1", Some("Neil Peart"), Decision::Retrieved)).as_deref(),
            Some("1. Who drummed for Rush? → Neil Peart (from evidence)")
        );
        assert_eq!(lines.line(&node("1", Some("Neil Peart"), Decision::Retrieved)), None);
        assert_eq!(lines.line(&node(SINK, Some("Rush"), Decision::Retrieved)), None, "the answer is the reply");
        let note =
            Event { seq: 2, start_ms: 0, end_ms: 0, node_id: None, kind: EventKind::Note { message: "x".into() } };
        assert_eq!(lines.line(&note), None);
    }
}
