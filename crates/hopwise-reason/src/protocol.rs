//! The output protocols: everything hopwise reads from model text, with its rules written once.
//!
//! Model output is the least trustworthy input hopwise reads, so every reader here is a pure
//! function that never fails on text: it returns what it could read plus the [`Repair`]s it applied,
//! which strategies copy into the trace. Each prompt template declares the protocol its reply follows
//! (`protocol` in `prompts/default.toml`); the readers by protocol:
//!
//! | protocol | reader |
//! |---|---|
//! | `final_answer` (reasoning, then `Answer: …`) | [`answer::final_answer`] |
//! | `short_answer` (the answer first) | [`answer::short_answer`] |
//! | `answer_or_sentinel` (an answer or `NO!`) | [`is_unanswered`], then [`answer::short_answer`] |
//! | `answer_with_reason` (`Answer:` / `Reason:`) | [`answer::answer_with_reason`] |
//! | `numbered_list` | [`parse_numbered_list`], [`parse_critique`] |
//! | `edges` (`1 -> 2 -> Q`) | [`parse_edges`] |
//! | `plan_steps`, `dependencies`, `formal_edges` (HGOT) | [`steps`] |
//! | `cited_thought` (`Rationale: … [n]` / `Answer: …`) | [`citations::parse_thought`] |
//! | `sentence` (one sentence, `So the answer is: …` ends the loop) | [`sentence::first_sentence`], [`answer::marked_answer`] |
//! | `search_request` (`[Search(query)]` or a sentence) | [`sentence::parse_search_request`] |
//! | `query` | [`sentence::clean_query`] |
//! | `nli_label` | [`crate::nli_judge::parse_label`] |
//! | `nli_labels` (a label per numbered claim, one JSON object) | [`crate::nli_judge::batch::read_labels`] |
//! | `typed_plan` (the question's structure as one JSON object) | [`plan::read_plan`] |
//! | `typed_value` (an ISO date, a number, yes/no, or `NO!`) | [`values`] |
//! | `agent_turn` (`<search>query</search>` or `<answer>…</answer>`) | [`agent::read_turn`] |
//! | `text` (free text: a rewritten question, a HyDE passage) | trimmed as it is |
//!
//! Repair rules for topology graphs (see [`parse_edges`]):
//! - `drop_unknown_id`: an edge naming a sub-question that does not exist is dropped.
//! - `drop_self_loop`: `a -> a` is dropped.
//! - `drop_edge_from_sink`: `Q -> a` is dropped (Q is the sink).
//! - `drop_cycle_edge`: an edge that would close a cycle is dropped (edges are taken in order, so the
//!   later edge of a cycle goes).
//! - `wire_sink_to_q`: a sub-question with no outgoing edge gets `a -> Q`.
//! - `no_edges_chain`: when no edge could be read at all, the sub-questions form a chain in list
//!   order (`1 -> 2 -> … -> Q`), the paper's "without construct" behaviour.

use hopwise_core::Repair;

pub mod agent;
pub mod answer;
pub mod citations;
pub mod plan;
pub mod sentence;
pub mod steps;
pub mod values;

/// A node of a topology graph as the model names it: a sub-question number (1-based) or the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GraphNode {
    Sub(usize),
    Sink,
}

impl std::fmt::Display for GraphNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GraphNode::Sub(i) => write!(f, "{i}"),
            GraphNode::Sink => write!(f, "Q"),
        }
    }
}

fn repair(stage: &str, rule: &str, detail: impl Into<String>) -> Repair {
    Repair { stage: stage.to_string(), rule: rule.to_string(), detail: detail.into() }
}

// ------------------------------------------------------------------------------------------------
// Numbered lists

/// Strips a list marker (`1.`, `1)`, `(1)`, `1:`, `Q1:`, `Sub-question 1:`, `Step 1:`, `-`, `*`, `•`)
/// from the start of a line. Returns the item and whether a numbered marker was found.
fn strip_list_marker(line: &str) -> (String, bool) {
    let mut s = line.trim().trim_start_matches(['*', '#']).trim();
    for bullet in ["- ", "• ", "* "] {
        if let Some(rest) = s.strip_prefix(bullet) {
            return (rest.trim().to_string(), false);
        }
    }
    for word in ["sub-question", "subquestion", "sub question", "question", "step", "q"] {
        if s.get(..word.len()).is_some_and(|head| head.eq_ignore_ascii_case(word)) {
            let rest = &s[word.len()..];
            if rest.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                s = rest.trim_start();
                break;
            }
        }
    }
    let s2 = s.strip_prefix('(').unwrap_or(s);
    let digits = s2.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && digits < 4 {
        let rest = &s2[digits..];
        if let Some(rest) = rest.strip_prefix(['.', ')', ':', ']']) {
            let rest = rest.trim_start_matches([')', '.', ':']);
            return (rest.trim().trim_start_matches(['*']).trim().to_string(), true);
        }
    }
    (s.to_string(), false)
}

/// Reads a numbered list of items (sub-questions). Lines without a number are kept only when the
/// reply has no numbered line at all, and then only those that end with `?`; headers such as
/// `Sub-questions:` are skipped. Duplicates (ignoring case and spacing) are removed.
pub fn parse_numbered_list(text: &str) -> Vec<String> {
    let mut numbered = Vec::new();
    let mut plain = Vec::new();
    for line in text.lines() {
        let (item, had_number) = strip_list_marker(line);
        let item = item.trim().trim_matches('"').trim().to_string();
        if item.is_empty() {
            continue;
        }
        if had_number {
            numbered.push(item);
        } else if item.ends_with('?') {
            plain.push(item);
        }
    }
    let items = if numbered.is_empty() { plain } else { numbered };
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(i.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect()
}

/// Maps a critique reply back onto the original list: returns the 0-based indices kept, in order.
/// The reply may copy kept items (matched by word overlap) or name their numbers (`1, 3`).
/// An empty or unreadable reply keeps everything (`critique_kept_nothing`).
pub fn parse_critique(reply: &str, original: &[String], repairs: &mut Vec<Repair>) -> Vec<usize> {
    let mut kept = Vec::new();
    let items = parse_numbered_list(reply);
    for item in &items {
        if let Some(i) = best_match(item, original) {
            if !kept.contains(&i) {
                kept.push(i);
            }
        }
    }
    if kept.is_empty() {
        // A reply of bare numbers: "1, 3" or "Keep 1 and 3".
        for tok in reply.split(|c: char| !c.is_ascii_digit()).filter(|t| !t.is_empty()) {
            if let Ok(n) = tok.parse::<usize>() {
                if (1..=original.len()).contains(&n) && !kept.contains(&(n - 1)) {
                    kept.push(n - 1);
                }
            }
        }
    }
    if kept.is_empty() {
        repairs.push(repair(
            "critique",
            "critique_kept_nothing",
            "no sub-question could be read from the critique; all kept",
        ));
        return (0..original.len()).collect();
    }
    kept.sort_unstable();
    kept
}

fn words(s: &str) -> std::collections::HashSet<String> {
    hopwise_core::text::normalize_answer(s).split_whitespace().map(str::to_string).collect()
}

/// Index of the original item most similar to `item` (Jaccard over normalised words ≥ 0.5).
fn best_match(item: &str, original: &[String]) -> Option<usize> {
    let a = words(item);
    original
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let b = words(o);
            let inter = a.intersection(&b).count() as f64;
            let union = a.union(&b).count().max(1) as f64;
            (i, inter / union)
        })
        .filter(|(_, s)| *s >= 0.5)
        .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)))
        .map(|(i, _)| i)
}

// ------------------------------------------------------------------------------------------------
// Edges

/// A parsed topology graph over sub-questions `1..=n` and the sink `Q`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    pub n: usize,
    /// Edges `from -> to` in the order read, after repair. Every sub-question reaches the sink.
    pub edges: Vec<(GraphNode, GraphNode)>,
    pub repairs: Vec<Repair>,
}

impl Topology {
    /// The chain `1 -> 2 -> … -> n -> Q`.
    pub fn chain(n: usize) -> Self {
        let mut edges: Vec<_> = (1..n).map(|i| (GraphNode::Sub(i), GraphNode::Sub(i + 1))).collect();
        if n > 0 {
            edges.push((GraphNode::Sub(n), GraphNode::Sink));
        }
        Self { n, edges, repairs: Vec::new() }
    }

    /// Direct predecessors of sub-question `i`.
    pub fn parents(&self, i: usize) -> Vec<usize> {
        let mut p: Vec<usize> = self
            .edges
            .iter()
            .filter_map(|(f, t)| match (f, t) {
                (GraphNode::Sub(f), GraphNode::Sub(t)) if *t == i => Some(*f),
                _ => None,
            })
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    }
}

/// Reads one id token: `3`, `Q`, `Q3` (sub-question 3), `(3`, `3)`, `[3]`, `#3`, `step3`.
fn read_id(token: &str) -> Option<GraphNode> {
    let t = token.trim_matches(|c: char| !c.is_alphanumeric());
    if t.is_empty() {
        return None;
    }
    let lower = t.to_lowercase();
    if matches!(lower.as_str(), "q" | "main") {
        return Some(GraphNode::Sink);
    }
    let digits = lower.trim_start_matches("subquestion").trim_start_matches("step").trim_start_matches('q');
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        return digits.parse().ok().map(GraphNode::Sub);
    }
    None
}

fn is_connector(token: &str) -> bool {
    let t = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '&').to_lowercase();
    t.is_empty() || matches!(t.as_str(), "and" | "&" | "sub-question" | "subquestion" | "question" | "step" | "node")
}

/// Ids at one side of an arrow. `from_end`: read backwards from the arrow (the left side);
/// otherwise forwards (the right side). Reading stops at the first word that is neither an id nor a
/// connector, which is how prose around edges is skipped.
fn side_ids(segment: &str, from_end: bool) -> Vec<GraphNode> {
    let spaced = segment.replace([',', '(', ')', '[', ']', '{', '}'], " , ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut ids = Vec::new();
    let mut walk = |tok: &str| -> bool {
        if let Some(id) = read_id(tok) {
            // "Q" right after a connector word like "question" is still the sink.
            ids.push(id);
            true
        } else {
            is_connector(tok)
        }
    };
    walk_outwards(&tokens, from_end, |tok| walk(tok));
    if from_end {
        ids.reverse();
    }
    ids
}

/// Feeds the words on one side of an arrow to `take`, nearest the arrow first (backwards when
/// `from_end`), until `take` refuses one: how both edge readers skip the prose around an edge.
pub(crate) fn walk_outwards(words: &[&str], from_end: bool, mut take: impl FnMut(&str) -> bool) {
    if from_end {
        words.iter().rev().take_while(|w| take(w)).for_each(drop);
    } else {
        words.iter().take_while(|w| take(w)).for_each(drop);
    }
}

/// Parses `a -> b` edges (also `→` and `=>`), chains `1 -> 2 -> Q`, grouped sides
/// `(1 and 2) -> 3`, prose around the edges, multi-digit ids, then repairs the result into a DAG
/// over `1..=n` whose every node reaches `Q`. See the module docs for the rules.
pub fn parse_edges(text: &str, n: usize, stage: &str) -> Topology {
    let normalized = text.replace('→', "->").replace("=>", "->").replace("-->", "->").replace('−', "-");
    let mut raw: Vec<(GraphNode, GraphNode)> = Vec::new();
    for line in normalized.lines().flat_map(|l| l.split(';')) {
        let segments: Vec<&str> = line.split("->").collect();
        if segments.len() < 2 {
            continue;
        }
        for w in 0..segments.len() - 1 {
            let left_is_first = w == 0;
            let left = if left_is_first { side_ids(segments[w], true) } else { side_ids(segments[w], false) };
            let right = side_ids(segments[w + 1], false);
            for &a in &left {
                for &b in &right {
                    raw.push((a, b));
                }
            }
        }
    }
    repair_topology(raw, n, stage)
}

/// Applies the repair rules to raw edges.
pub fn repair_topology(raw: Vec<(GraphNode, GraphNode)>, n: usize, stage: &str) -> Topology {
    let mut repairs = Vec::new();
    let mut edges: Vec<(GraphNode, GraphNode)> = Vec::new();
    let valid = |x: GraphNode| match x {
        GraphNode::Sub(i) => (1..=n).contains(&i),
        GraphNode::Sink => true,
    };
    let any_read = !raw.is_empty();
    for (a, b) in raw {
        if !valid(a) || !valid(b) {
            repairs.push(repair(stage, "drop_unknown_id", format!("{a} -> {b}: only 1..{n} and Q exist")));
            continue;
        }
        if a == b {
            repairs.push(repair(stage, "drop_self_loop", format!("{a} -> {b}")));
            continue;
        }
        if a == GraphNode::Sink {
            repairs.push(repair(stage, "drop_edge_from_sink", format!("{a} -> {b}")));
            continue;
        }
        if edges.contains(&(a, b)) {
            continue;
        }
        if reaches(&edges, b, a) {
            repairs.push(repair(stage, "drop_cycle_edge", format!("{a} -> {b} would close a cycle")));
            continue;
        }
        edges.push((a, b));
    }
    if !any_read && n > 0 {
        repairs.push(repair(stage, "no_edges_chain", "no edge could be read; sub-questions chained in list order"));
        let mut chain = Topology::chain(n);
        chain.repairs = repairs;
        return chain;
    }
    for i in 1..=n {
        let node = GraphNode::Sub(i);
        if !edges.iter().any(|(f, _)| *f == node) {
            repairs.push(repair(stage, "wire_sink_to_q", format!("{i} had no outgoing edge; added {i} -> Q")));
            edges.push((node, GraphNode::Sink));
        }
    }
    Topology { n, edges, repairs }
}

/// Whether `to` is reachable from `from` along `edges`.
fn reaches(edges: &[(GraphNode, GraphNode)], from: GraphNode, to: GraphNode) -> bool {
    let mut stack = vec![from];
    let mut seen = std::collections::HashSet::new();
    while let Some(x) = stack.pop() {
        if x == to {
            return true;
        }
        if seen.insert(x) {
            stack.extend(edges.iter().filter(|(f, _)| *f == x).map(|(_, t)| *t));
        }
    }
    false
}

// ------------------------------------------------------------------------------------------------
// The NO! sentinel and answers

/// Strips a leading `Answer:` label, quotes and markdown emphasis.
fn strip_answer_label(text: &str) -> &str {
    let mut s = text.trim().trim_matches(|c| c == '*' || c == '"' || c == '`').trim();
    for label in ["answer:", "final answer:", "a:"] {
        if s.get(..label.len()).is_some_and(|head| head.eq_ignore_ascii_case(label)) {
            s = s[label.len()..].trim().trim_matches(|c| c == '*' || c == '"' || c == '`').trim();
        }
    }
    s
}

/// True when a self-verification reply is the `NO!` sentinel: it starts with `no!` in any case
/// (`NO!`, `No!`, `NO !`, `NO! I can't…`), is exactly `NO`, or contains the upper-case `NO!` token.
/// Answers that merely start with "No" ("No, they are not", "No.") are not the sentinel.
pub fn is_no_sentinel(reply: &str) -> bool {
    let s = strip_answer_label(reply);
    let compact: String = s.chars().take(6).filter(|c| !c.is_whitespace()).collect();
    if compact.to_lowercase().starts_with("no!") || s == "NO" {
        return true;
    }
    s.split_whitespace().any(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '!') == "NO!")
}

/// A reply at least this long may mention a hedge on its way to an answer: only its opening counts.
const SHORT_REPLY_BYTES: usize = 120;

/// Phrases that mean "I do not know" in the templates' language (the `unanswered_phrases` list),
/// which a strategy with a `hedges` option treats like `NO!`, so that a hedge is never recorded as a
/// known answer; [`Hedges::none`] reads the sentinel alone.
#[derive(Debug, Clone, Default)]
pub struct Hedges(Vec<String>);

impl Hedges {
    /// The phrase list's template name.
    pub const TEMPLATE: &'static str = "unanswered_phrases";

    /// The sentinel alone.
    pub fn none() -> Self {
        Self(Vec::new())
    }

    /// The phrases in force in `prompts`.
    pub fn from_prompts(prompts: &hopwise_core::Prompts) -> Self {
        Self(prompts.phrases(Self::TEMPLATE))
    }

    /// True for the sentinel, an empty reply, a reply that opens with a hedge, or a short reply
    /// that contains one.
    pub fn is_unanswered(&self, reply: &str) -> bool {
        if is_no_sentinel(reply) {
            return true;
        }
        let s = strip_answer_label(reply).to_lowercase();
        s.is_empty()
            || self
                .0
                .iter()
                .any(|h| s.starts_with(h.as_str()) || (s.len() < SHORT_REPLY_BYTES && s.contains(h.as_str())))
    }
}

#[cfg(test)]
mod tests;
