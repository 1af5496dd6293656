//! Parsers for HGOT's plans, pure and total: step lists (`Step 1: …`), dependency sentences
//! (`Step 2 depends on Step 1.`, `Step 3 depends on Step 1 and Step 2.`) and formal edges
//! (`Step 1 -> Step 2`, `(Step 1 and Step 2) -> Step 3`, `Step 1 -> (Step 2 and Step 3)`).
//!
//! An edge `(a, b)` means step `b` needs the answer of step `a`. Repair rules (recorded, in this
//! order, by [`repair_dependencies`]):
//! - `drop_unknown_step`: an edge naming a step that does not exist;
//! - `drop_self_dependency`: a step depending on itself;
//! - `drop_cycle_edge`: an edge that would close a cycle with the edges kept before it;
//! - `drop_forward_dependency`: a step depending on a later step (the plan must list prerequisites
//!   first, so that list order is a topological order).
//!
//! Step lists: `truncate_steps` (more than `max_steps`), `drop_duplicate_step` (same text),
//! `renumber_steps` (labels that are not 1, 2, 3, … in order: dependencies written with the
//! model's labels are mapped to list positions).

use std::collections::{BTreeSet, HashMap};

use hopwise_core::text::normalize_answer;
use hopwise_core::Repair;

fn repair(stage: &str, rule: &str, detail: impl Into<String>) -> Repair {
    Repair { stage: stage.to_string(), rule: rule.to_string(), detail: detail.into() }
}

/// The steps of a plan, in list order (position `i` is step `i + 1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steps {
    pub texts: Vec<String>,
    /// The number the model gave each kept step.
    pub labels: Vec<usize>,
    pub repairs: Vec<Repair>,
}

impl Steps {
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// `Step 1: …` lines, numbered by position (what later prompts show).
    pub fn numbered(&self) -> String {
        self.texts.iter().enumerate().map(|(i, s)| format!("Step {}: {s}", i + 1)).collect::<Vec<_>>().join("\n")
    }

    /// Maps edges written with the model's labels onto 1-based positions; labels that name no kept
    /// step are dropped (`drop_unknown_step`).
    pub fn map_labels(&self, raw: &[(usize, usize)], stage: &str) -> (Vec<(usize, usize)>, Vec<Repair>) {
        let mut position: HashMap<usize, usize> = HashMap::new();
        for (i, label) in self.labels.iter().enumerate() {
            position.entry(*label).or_insert(i + 1);
        }
        let mut repairs = Vec::new();
        let mut edges = Vec::new();
        for &(a, b) in raw {
            match (position.get(&a), position.get(&b)) {
                (Some(&pa), Some(&pb)) => edges.push((pa, pb)),
                _ => repairs.push(repair(
                    stage,
                    "drop_unknown_step",
                    format!("Step {b} depends on Step {a}: no such step"),
                )),
            }
        }
        (edges, repairs)
    }
}

/// Reads `Step N: text` (also `Step N.`, `Step N)`, `**Step N:**`, `- Step N:`). The number and
/// the text after the separator, or None when the line is not a step.
fn step_line(line: &str) -> Option<(usize, String)> {
    let s = line.trim().trim_start_matches(['-', '*', '#', '•', '>']).trim_start();
    let head = s.get(..4)?;
    if !head.eq_ignore_ascii_case("step") {
        return None;
    }
    let rest = s[4..].trim_start();
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 3 {
        return None;
    }
    let label: usize = rest[..digits].parse().ok()?;
    let after = rest[digits..].trim_start_matches('*').trim_start();
    let text = after.strip_prefix([':', '.', ')', '-'])?;
    let text = text.trim().trim_matches(['*', '"']).trim();
    (!text.is_empty()).then(|| (label, text.to_string()))
}

/// The steps of a plan reply. Lines `Step N: …` are steps; when there are none, a plain numbered
/// list (`1. …`) is read instead. Never fails: no steps is an empty list.
pub fn parse_steps(text: &str, max_steps: usize, stage: &str) -> Steps {
    let mut found: Vec<(usize, String)> = text.lines().filter_map(step_line).collect();
    if found.is_empty() {
        found = crate::protocol::parse_numbered_list(text)
            .into_iter()
            .filter(|item| !item.to_lowercase().contains("depends on"))
            .enumerate()
            .map(|(i, item)| (i + 1, item))
            .collect();
    }
    let mut steps = Steps::default();
    let mut seen = BTreeSet::new();
    for (label, text) in found {
        if !seen.insert(normalize_answer(&text)) {
            steps.repairs.push(repair(stage, "drop_duplicate_step", format!("Step {label} repeats an earlier step")));
            continue;
        }
        if steps.texts.len() == max_steps {
            steps.repairs.push(repair(stage, "truncate_steps", format!("kept the first {max_steps} steps")));
            break;
        }
        steps.labels.push(label);
        steps.texts.push(text);
    }
    if steps.labels.iter().enumerate().any(|(i, l)| *l != i + 1) {
        steps.repairs.push(repair(
            stage,
            "renumber_steps",
            format!("labels {:?} renumbered 1..{}", steps.labels, steps.len()),
        ));
    }
    steps
}

/// The lines of a plan reply that are not steps (where the dependency sentences are).
pub fn dependency_text(plan_reply: &str) -> String {
    plan_reply
        .lines()
        .filter(|l| step_line(l).is_none())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Num(usize),
    Depend,
    Negation,
    Connector,
    Word,
}

/// A number token: `2`, `2,`, `step2`, `#2`, `s2` (at most 3 digits).
fn read_number(word: &str) -> Option<usize> {
    let w = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    let digits = w.trim_start_matches("steps").trim_start_matches("step").trim_start_matches('s');
    (!digits.is_empty() && digits.len() <= 3 && digits.chars().all(|c| c.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

fn classify(word: &str) -> Token {
    if let Some(n) = read_number(word) {
        return Token::Num(n);
    }
    let w = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '&').to_lowercase();
    if ["depend", "relies", "rely", "require", "need"].iter().any(|s| w.starts_with(s)) {
        return Token::Depend;
    }
    if w.ends_with("n't") || matches!(w.as_str(), "not" | "no" | "none" | "nothing" | "without" | "independent") {
        return Token::Negation;
    }
    if w.is_empty() || matches!(w.as_str(), "step" | "steps" | "and" | "&" | "on" | "upon" | "both" | "of" | "the") {
        return Token::Connector;
    }
    Token::Word
}

/// Edges from dependency sentences: `Step 2 depends on Step 1.`, `Step 3 depends on Step 1 and
/// Step 2`, `Steps 2 and 3 depend on Step 1`, several per line. Negated sentences (`Step 1 does
/// not depend on any step`, `No dependencies.`) give nothing. Returns raw `(prerequisite,
/// dependent)` pairs with the numbers as written.
pub fn parse_dependency_sentences(text: &str) -> Vec<(usize, usize)> {
    let mut edges = Vec::new();
    for clause in text.split(['.', ';', '\n']) {
        let tokens: Vec<Token> = clause.split_whitespace().map(classify).collect();
        let depends: Vec<usize> =
            tokens.iter().enumerate().filter(|(_, t)| **t == Token::Depend).map(|(i, _)| i).collect();
        let last_num_before =
            |end: usize, start: usize| (start..end).rev().find(|&i| matches!(tokens[i], Token::Num(_)));
        for (k, &d) in depends.iter().enumerate() {
            let start = if k == 0 { 0 } else { depends[k - 1] + 1 };
            // The first sentence in a clause may have several subjects; later ones have one (the
            // numbers before it belong to the previous dependency's objects).
            let subject_start = if k == 0 { start } else { last_num_before(d, start).unwrap_or(d) };
            let subjects: Vec<usize> = tokens[subject_start..d]
                .iter()
                .filter_map(|t| match t {
                    Token::Num(n) => Some(*n),
                    _ => None,
                })
                .collect();
            let end = match depends.get(k + 1) {
                Some(&next) => last_num_before(next, d + 1).unwrap_or(next),
                None => tokens.len(),
            };
            let first_object = (d + 1..end).find(|&i| matches!(tokens[i], Token::Num(_))).unwrap_or(end);
            let negated = tokens[subject_start..first_object].contains(&Token::Negation);
            if negated {
                continue;
            }
            for t in &tokens[d + 1..end] {
                if let Token::Num(o) = t {
                    for s in &subjects {
                        edges.push((*o, *s));
                    }
                }
            }
        }
    }
    edges
}

/// The step numbers at one side of an arrow, read from the arrow outwards (`from_end` for the
/// left side). Reading stops at the first word that is neither a number nor a connector, which
/// skips prose around the edge.
fn arrow_side(segment: &str, from_end: bool) -> Vec<usize> {
    let spaced = segment.replace(['(', ')', '[', ']', '{', '}', ','], " ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut ids = Vec::new();
    let mut take = |w: &str| match classify(w) {
        Token::Num(n) => {
            ids.push(n);
            true
        }
        Token::Connector => true,
        _ => false,
    };
    super::walk_outwards(&words, from_end, |w| take(w));
    if from_end {
        ids.reverse();
    }
    ids
}

/// Edges from the formal forms `Step 1 -> Step 2`, `(Step 1 and Step 2) -> Step 3`,
/// `Step 1 -> (Step 2 and Step 3)` and chains `Step 1 -> Step 2 -> Step 3`; `→`, `=>` and `-->`
/// are arrows too. Raw `(prerequisite, dependent)` pairs, numbers as written.
pub fn parse_formal_edges(text: &str) -> Vec<(usize, usize)> {
    let normalized = text.replace('→', "->").replace("=>", "->").replace("-->", "->").replace('−', "-");
    let mut edges = Vec::new();
    for line in normalized.lines().flat_map(|l| l.split(';')) {
        let segments: Vec<&str> = line.split("->").collect();
        for w in 0..segments.len().saturating_sub(1) {
            let left = arrow_side(segments[w], w == 0);
            let right = arrow_side(segments[w + 1], false);
            for &a in &left {
                for &b in &right {
                    edges.push((a, b));
                }
            }
        }
    }
    edges
}

/// A repaired dependency DAG over steps `1..=n`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependencies {
    pub n: usize,
    /// `(prerequisite, dependent)`, every pair with `prerequisite < dependent`.
    pub edges: Vec<(usize, usize)>,
    pub repairs: Vec<Repair>,
}

impl Dependencies {
    /// The steps step `i` depends on, ascending.
    pub fn parents(&self, i: usize) -> Vec<usize> {
        let mut p: Vec<usize> = self.edges.iter().filter(|(_, b)| *b == i).map(|(a, _)| *a).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Whether some other step depends on step `i`.
    pub fn has_dependents(&self, i: usize) -> bool {
        self.edges.iter().any(|(a, _)| *a == i)
    }
}

/// Applies the repair rules (module docs) to raw edges over steps `1..=n`.
pub fn repair_dependencies(n: usize, raw: &[(usize, usize)], stage: &str) -> Dependencies {
    let mut deps = Dependencies { n, ..Default::default() };
    for &(a, b) in raw {
        if !(1..=n).contains(&a) || !(1..=n).contains(&b) {
            deps.repairs.push(repair(
                stage,
                "drop_unknown_step",
                format!("Step {a} -> Step {b}: only steps 1..{n} exist"),
            ));
        } else if a == b {
            deps.repairs.push(repair(stage, "drop_self_dependency", format!("Step {a} -> Step {b}")));
        } else if deps.edges.contains(&(a, b)) {
            continue;
        } else if reaches(&deps.edges, b, a) {
            deps.repairs.push(repair(stage, "drop_cycle_edge", format!("Step {a} -> Step {b} would close a cycle")));
        } else if a > b {
            deps.repairs.push(repair(
                stage,
                "drop_forward_dependency",
                format!("Step {b} cannot depend on the later Step {a}"),
            ));
        } else {
            deps.edges.push((a, b));
        }
    }
    deps
}

fn reaches(edges: &[(usize, usize)], from: usize, to: usize) -> bool {
    let mut stack = vec![from];
    let mut seen = BTreeSet::new();
    while let Some(x) = stack.pop() {
        if x == to {
            return true;
        }
        if seen.insert(x) {
            stack.extend(edges.iter().filter(|(a, _)| *a == x).map(|(_, b)| *b));
        }
    }
    false
}

#[cfg(test)]
mod tests;
