//! Human-readable rendering of a trace: the answer, then the graph as an indented tree.

use std::fmt::Write;

use hopwise_core::Trace;

/// Renders `trace` for a terminal.
pub fn render_trace(trace: &Trace) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Question: {}", trace.question);
    let mut marks = Vec::new();
    if let (Some(c), Some(words)) = (trace.confidence, trace.confidence_in_words()) {
        marks.push(format!("confidence {:.0}%: {words}", c * 100.0));
    }
    if trace.best_effort {
        marks.push("best effort: a budget or a failure cut the work short".to_string());
    }
    let marker = if marks.is_empty() { String::new() } else { format!("  ({})", marks.join("; ")) };
    let _ = writeln!(out, "Answer:   {}{marker}", if trace.answer.is_empty() { "(none)" } else { &trace.answer });
    if let Some(r) = &trace.rationale {
        let _ = writeln!(out, "Reason:   {r}");
    }
    let sources = trace.supporting();
    if !sources.is_empty() {
        let _ = writeln!(out, "Sources:");
        for (i, p) in sources.iter().enumerate() {
            let title = if p.title.is_empty() { p.id.as_str() } else { p.title.as_str() };
            let _ = writeln!(out, "  [{}] {title}: {}", i + 1, hopwise_core::text::truncate_words(&p.text, 24));
        }
    }
    if !trace.nodes.is_empty() {
        let _ = writeln!(out, "\nGraph ({}):", trace.strategy);
        for node in trace.nodes.iter().filter(|n| n.decomposes.is_none()) {
            render_node(trace, &node.id, 1, &mut out);
        }
        let into_q: Vec<&str> = trace.edges.iter().filter(|e| e.to == "Q").map(|e| e.from.as_str()).collect();
        if !into_q.is_empty() {
            let _ = writeln!(out, "  Q  <- {}", into_q.join(", "));
        }
    }
    if !trace.repairs.is_empty() {
        let _ = writeln!(out, "\nRepairs:");
        for r in &trace.repairs {
            let _ = writeln!(out, "  [{}] {}: {}", r.stage, r.rule, r.detail);
        }
    }
    for note in &trace.notes {
        let _ = writeln!(out, "Note: {note}");
    }
    let s = &trace.stats;
    let _ = writeln!(
        out,
        "\nStats: {} LLM calls, {} retrieval rounds, {} input / {} output words, {} prompt / {} completion tokens, {:.1} s",
        s.llm_calls,
        s.retrieval_rounds,
        s.input_words,
        s.output_words,
        s.prompt_tokens,
        s.completion_tokens,
        s.wall_ms as f64 / 1000.0
    );
    out
}

fn render_node(trace: &Trace, id: &str, level: usize, out: &mut String) {
    let Some(node) = trace.node(id) else { return };
    let pad = "  ".repeat(level);
    let deps = if node.parents.is_empty() { String::new() } else { format!("  (after {})", node.parents.join(", ")) };
    let _ = writeln!(out, "{pad}{:<5} {}{deps}", node.id, node.question);
    if let Some(rw) = &node.rewritten {
        let _ = writeln!(out, "{pad}      rewritten: {rw}");
    }
    let answer = node.answer.as_deref().unwrap_or("-");
    let flag = if node.best_effort { " (best effort)" } else { "" };
    let _ = writeln!(out, "{pad}      {} -> {answer}{flag}", node.decision.name());
    if !node.passages.is_empty() {
        let titles: Vec<&str> =
            node.passages.iter().map(|p| if p.title.is_empty() { p.id.as_str() } else { p.title.as_str() }).collect();
        let _ = writeln!(out, "{pad}      evidence: {}", titles.join("; "));
    }
    for child in &node.children {
        render_node(trace, child, level + 1, out);
    }
}
