//! A trace's executed graph as text a drawing tool renders offline: Mermaid flowcharts and
//! Graphviz DOT. Each node shows its sub-question, its answer and its evidence titles; colours
//! follow the decision (known, retrieved, decomposed, unresolved).

use crate::trace::{NodeTrace, Trace};

/// Which text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    Mermaid,
    Dot,
}

/// The graph of `trace` in `format`.
pub fn render(trace: &Trace, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(trace),
        GraphFormat::Dot => dot(trace),
    }
}

const COLOURS: [(&str, &str); 5] = [
    ("pending", "#e0e0e0"),
    ("known", "#c8e6c9"),
    ("retrieved", "#bbdefb"),
    ("decomposed", "#ffe0b2"),
    ("unresolved", "#ffcdd2"),
];

/// The lines a node's box shows: the question, the answer, up to three evidence titles.
fn label_lines(node: &NodeTrace) -> Vec<String> {
    let clip = |s: &str, n: usize| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        match s.char_indices().nth(n) {
            Some((cut, _)) => format!("{}…", &s[..cut]),
            None => s,
        }
    };
    let mut lines = vec![format!("{}. {}", node.id, clip(&node.question, 90))];
    if let Some(answer) = node.answer.as_deref().filter(|a| !a.trim().is_empty()) {
        lines.push(format!("→ {}", clip(answer, 60)));
    }
    let mut titles: Vec<&str> = Vec::new();
    for p in &node.passages {
        if !p.title.is_empty() && !titles.contains(&p.title.as_str()) && titles.len() < 3 {
            titles.push(&p.title);
        }
    }
    if !titles.is_empty() {
        lines.push(format!("sources: {}", clip(&titles.join("; "), 90)));
    }
    lines
}

/// A Mermaid node id: `n` and the node id with anything but letters and digits as `_`.
fn mermaid_id(id: &str) -> String {
    let mut out = String::from("n");
    for c in id.chars() {
        out.push(if c.is_ascii_alphanumeric() { c } else { '_' });
    }
    out
}

/// Text inside a quoted Mermaid label: quotes and the characters Mermaid treats as markup become
/// entity codes, so no answer can break the chart.
fn mermaid_text(s: &str) -> String {
    escaped(s, |c| match c {
        '"' => Some("#quot;"),
        '#' => Some("#35;"),
        '<' => Some("#lt;"),
        '>' => Some("#gt;"),
        '`' => Some("#96;"),
        _ => None,
    })
}

/// `s` with each character `escape` names replaced and control characters turned into spaces.
fn escaped(s: &str, escape: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match escape(c) {
            Some(code) => out.push_str(code),
            None if c.is_control() => out.push(' '),
            None => out.push(c),
        }
    }
    out
}

fn mermaid(trace: &Trace) -> String {
    let mut out = String::from("flowchart TD\n");
    for node in &trace.nodes {
        let label = label_lines(node).iter().map(|l| mermaid_text(l)).collect::<Vec<_>>().join("<br/>");
        out.push_str(&format!("    {}[\"{}\"]\n", mermaid_id(&node.id), label));
    }
    for edge in &trace.edges {
        out.push_str(&format!("    {} --> {}\n", mermaid_id(&edge.from), mermaid_id(&edge.to)));
    }
    for (name, colour) in COLOURS {
        out.push_str(&format!("    classDef {name} fill:{colour}\n"));
    }
    for node in &trace.nodes {
        out.push_str(&format!("    class {} {}\n", mermaid_id(&node.id), node.decision.name()));
    }
    out
}

fn dot_text(s: &str) -> String {
    escaped(s, |c| match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        _ => None,
    })
}

fn dot(trace: &Trace) -> String {
    let mut out = String::from("digraph hopwise {\n    rankdir=TB;\n    node [shape=box, style=\"rounded,filled\"];\n");
    for node in &trace.nodes {
        let label = label_lines(node).iter().map(|l| dot_text(l)).collect::<Vec<_>>().join("\\n");
        let colour = COLOURS.iter().find(|(n, _)| *n == node.decision.name()).map_or("#ffffff", |(_, c)| c);
        out.push_str(&format!("    \"{}\" [label=\"{}\", fillcolor=\"{}\"];\n", dot_text(&node.id), label, colour));
    }
    for edge in &trace.edges {
        out.push_str(&format!("    \"{}\" -> \"{}\";\n", dot_text(&edge.from), dot_text(&edge.to)));
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Decision, GraphEdge};
    use crate::Passage;

    fn trace() -> Trace {
        let node = |id: &str, q: &str, a: &str, d: Decision| NodeTrace {
            id: id.into(),
            question: q.into(),
            answer: Some(a.into()),
            decision: d,
            passages: vec![Passage { id: "p".into(), title: "Rush (band)".into(), ..Default::default() }],
            ..Default::default()
        };
        Trace {
            nodes: vec![
                node("1", "Which band released \"Counterparts\"?", "Rush <the band> #1", Decision::Retrieved),
                node("2.1", "Who was its drummer?", "Neil Peart", Decision::Known),
                node("Q", "The question", "Rush", Decision::Decomposed),
            ],
            edges: vec![
                GraphEdge { from: "1".into(), to: "2.1".into() },
                GraphEdge { from: "2.1".into(), to: "Q".into() },
            ],
            ..Default::default()
        }
    }

    /// Every line of the chart is one of the forms the flowchart grammar accepts for what we emit,
    /// and no label can close its quotes early.
    #[test]
    fn mermaid_follows_the_flowchart_grammar() {
        let text = render(&trace(), GraphFormat::Mermaid);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("flowchart TD"));
        for line in lines {
            let line = line.trim();
            let id = |s: &str| s.starts_with('n') && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let ok = if let Some((from, to)) = line.split_once(" --> ") {
                id(from) && id(to)
            } else if let Some(rest) = line.strip_prefix("classDef ") {
                rest.split_once(" fill:#").is_some()
            } else if let Some(rest) = line.strip_prefix("class ") {
                rest.split_once(' ').is_some_and(|(n, c)| id(n) && COLOURS.iter().any(|(k, _)| *k == c))
            } else if let Some((name, label)) = line.split_once("[\"") {
                id(name) && label.ends_with("\"]") && !label[..label.len() - 2].contains(['"', '[', ']'])
            } else {
                false
            };
            assert!(ok, "not a flowchart line: {line}");
        }
        assert!(text.contains("n2_1[\"2.1. Who was its drummer?<br/>→ Neil Peart"), "{text}");
        assert!(text.contains("#quot;Counterparts#quot;") && text.contains("#lt;the band#gt; #35;1"), "{text}");
        assert!(text.contains("n1 --> n2_1") && text.contains("class nQ decomposed"), "{text}");
    }

    #[test]
    fn dot_quotes_every_label() {
        let text = render(&trace(), GraphFormat::Dot);
        assert!(text.starts_with("digraph hopwise {") && text.trim_end().ends_with('}'));
        assert!(text.contains("\"1\" -> \"2.1\";"), "{text}");
        assert!(text.contains("released \\\"Counterparts\\\"?\\n→ Rush"), "{text}");
        // Every quote in a label line is escaped: the unescaped ones pair up.
        for line in text.lines().filter(|l| l.contains("label=")) {
            let unescaped = line.replace("\\\"", "").matches('"').count();
            assert_eq!(unescaped % 2, 0, "{line}");
        }
    }
}
