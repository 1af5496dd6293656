//! Prompt templates: one TOML file of named templates (`prompts/default.toml`), compiled in, each
//! overridable from config. Templates use `{name}` placeholders; `{{` and `}}` are literal braces.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{Error, Result};

const DEFAULTS: &str = include_str!("../prompts/default.toml");

/// The output protocol a template's reply follows, declared next to the template (as a signature
/// pairs a format with its parser); `hopwise_reason::protocol` has one reader per protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// Reasoning, then an `Answer: …` line.
    FinalAnswer,
    /// The answer first.
    ShortAnswer,
    /// An answer, or the `NO!` sentinel.
    AnswerOrSentinel,
    /// `Answer: …` and `Reason: …` lines.
    AnswerWithReason,
    NumberedList,
    /// `1 -> 2 -> Q` edges.
    Edges,
    /// HGOT's `Step N: …` lines and dependency sentences.
    PlanSteps,
    /// `Step 2 depends on Step 1.` sentences.
    Dependencies,
    /// `Step 1 -> Step 2` arrows.
    FormalEdges,
    /// `Rationale: … [n]` and `Answer: …`.
    CitedThought,
    /// One sentence; `So the answer is: …` ends the loop.
    Sentence,
    /// `[Search(query)]` or a sentence.
    SearchRequest,
    /// A search query.
    Query,
    /// `entail`, `contradict` or `neutral`.
    NliLabel,
    /// One NLI label per numbered hypothesis, as one JSON object (`{"1":"entailment",…}`).
    NliLabels,
    /// The question's structure as one JSON object (steps with answer types, dependencies as `#k`,
    /// the final operation).
    TypedPlan,
    /// Self-Ask's `Follow up: …` or a final answer.
    SelfAskStep,
    /// A search agent's turn: optional `<think>…</think>`, then `<search>query</search>` or
    /// `<answer>…</answer>`.
    AgentTurn,
    /// Free text (a system message, a rewritten question, a passage).
    Text,
    /// Not a prompt: phrases, one per line, that code matches replies against.
    PhraseList,
    /// A piece of a prompt that code repeats or picks and places into another template's placeholder
    /// (a passage line, a dialog turn, a demonstration); no reply of its own.
    Fragment,
}

impl Protocol {
    /// Text that code assembles into prompts (a fragment) or reads (a phrase list) rather than a
    /// prompt sent as it stands.
    pub fn is_part(self) -> bool {
        matches!(self, Protocol::PhraseList | Protocol::Fragment)
    }
}

#[derive(Debug, Clone, Deserialize)]
struct TemplateSpec {
    #[serde(default)]
    vars: Vec<String>,
    /// Required in the built-in file; an override replaces the text and keeps it.
    protocol: Protocol,
    text: String,
}

/// The set of prompt templates in force.
#[derive(Debug, Clone)]
pub struct Prompts {
    templates: BTreeMap<String, TemplateSpec>,
}

impl Default for Prompts {
    fn default() -> Self {
        Self::from_toml(DEFAULTS).expect("the built-in prompt file is valid (checked by a unit test)")
    }
}

impl Prompts {
    fn from_toml(src: &str) -> Result<Self> {
        let templates: BTreeMap<String, TemplateSpec> =
            toml::from_str(src).map_err(|e| Error::Template { name: "<file>".into(), message: e.to_string() })?;
        let prompts = Self { templates };
        for (name, spec) in &prompts.templates {
            check_placeholders(name, &spec.text, &spec.vars)?;
        }
        Ok(prompts)
    }

    /// Replaces the text of named templates. Each override may use only the placeholders the
    /// built-in template receives; an unknown template name or placeholder is an error.
    pub fn with_overrides(mut self, overrides: &BTreeMap<String, String>) -> Result<Self> {
        for (name, text) in overrides {
            let spec = self.templates.get_mut(name).ok_or_else(|| Error::Template {
                name: name.clone(),
                message: "no such template (see `hopwise prompts` for the list)".into(),
            })?;
            check_placeholders(name, text, &spec.vars)?;
            spec.text = text.clone();
        }
        Ok(self)
    }

    /// Reads overrides from a TOML file whose top-level keys are template names and whose values
    /// are either strings or tables with a `text` field.
    pub fn with_overrides_file(self, path: &std::path::Path) -> Result<Self> {
        let src = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("prompts file {}: {e}", path.display())))?;
        let value: toml::Table =
            toml::from_str(&src).map_err(|e| Error::Config(format!("prompts file {}: {e}", path.display())))?;
        let mut overrides = BTreeMap::new();
        for (name, v) in value {
            let text = match v {
                toml::Value::String(s) => s,
                toml::Value::Table(t) => match t.get("text") {
                    Some(toml::Value::String(s)) => s.clone(),
                    _ => return Err(Error::Config(format!("prompts file: `{name}` needs a `text` string"))),
                },
                _ => return Err(Error::Config(format!("prompts file: `{name}` must be a string or a table"))),
            };
            overrides.insert(name, text);
        }
        self.with_overrides(&overrides)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.templates.keys().map(String::as_str)
    }

    pub fn template(&self, name: &str) -> Option<&str> {
        self.templates.get(name).map(|t| t.text.as_str())
    }

    /// The lines of phrase list `name`, trimmed and lower-cased, blank lines dropped; empty when
    /// there is no such template.
    pub fn phrases(&self, name: &str) -> Vec<String> {
        self.template(name)
            .into_iter()
            .flat_map(str::lines)
            .map(|line| line.trim().to_lowercase())
            .filter(|line| !line.is_empty())
            .collect()
    }

    /// Whether template `name` differs from the built-in one (an override replaced its text).
    pub fn is_overridden(&self, name: &str) -> bool {
        static BUILT_IN: std::sync::OnceLock<Prompts> = std::sync::OnceLock::new();
        BUILT_IN.get_or_init(Prompts::default).template(name) != self.template(name)
    }

    /// The output protocol template `name` declares.
    pub fn protocol(&self, name: &str) -> Option<Protocol> {
        self.templates.get(name).map(|t| t.protocol)
    }

    /// Fills template `name` with `vars`. Every placeholder must be given.
    pub fn render(&self, name: &str, vars: &[(&str, &str)]) -> Result<String> {
        let spec = self
            .templates
            .get(name)
            .ok_or_else(|| Error::Template { name: name.into(), message: "no such template".into() })?;
        fill(name, &spec.text, vars)
    }
}

enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// Walks a template, handing each literal run and each placeholder to `on`.
fn walk<'a>(name: &str, text: &'a str, mut on: impl FnMut(Piece<'a>) -> Result<()>) -> Result<()> {
    let mut rest = text;
    while let Some(pos) = rest.find(['{', '}']) {
        on(Piece::Text(&rest[..pos]))?;
        let tail = &rest[pos..];
        if let Some(after) = tail.strip_prefix("{{") {
            on(Piece::Text("{"))?;
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            on(Piece::Text("}"))?;
            rest = after;
        } else if tail.starts_with('{') {
            let end = tail.find('}').ok_or_else(|| Error::Template {
                name: name.into(),
                message: "unclosed `{` (write `{{` for a literal brace)".into(),
            })?;
            on(Piece::Var(&tail[1..end]))?;
            rest = &tail[end + 1..];
        } else {
            return Err(Error::Template {
                name: name.into(),
                message: "stray `}` (write `}}` for a literal brace)".into(),
            });
        }
    }
    on(Piece::Text(rest))
}

fn check_placeholders(name: &str, text: &str, allowed: &[String]) -> Result<()> {
    walk(name, text, |piece| match piece {
        Piece::Var(var) if !allowed.iter().any(|a| a == var) => Err(Error::Template {
            name: name.into(),
            message: format!("unknown placeholder `{{{var}}}`; this template receives {allowed:?}"),
        }),
        _ => Ok(()),
    })
}

fn fill(name: &str, text: &str, vars: &[(&str, &str)]) -> Result<String> {
    let mut out = String::with_capacity(text.len() + 256);
    let mut missing = None;
    walk(name, text, |piece| {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(var) => match vars.iter().find(|(k, _)| *k == var) {
                Some((_, v)) => out.push_str(v),
                None => missing = Some(var.to_string()),
            },
        }
        Ok(())
    })?;
    match missing {
        Some(var) => Err(Error::Template { name: name.into(), message: format!("no value given for `{{{var}}}`") }),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_templates_load_and_render() {
        let p = Prompts::default();
        assert!(p.names().count() > 5);
        let s = p
            .render("toqd_self_verify", &[("question", "Who wrote Dune?"), ("answer_format", "Be brief.")])
            .expect("render");
        assert!(s.contains("Who wrote Dune?"));
        assert!(s.contains("NO!"));
    }

    #[test]
    fn every_template_declares_its_protocol_and_overrides_keep_it() {
        let p = Prompts::default();
        assert_eq!(p.protocol("toqd_construct"), Some(Protocol::Edges));
        assert_eq!(p.protocol("cot"), Some(Protocol::FinalAnswer));
        assert!(Prompts::from_toml("[t]\ntext = \"x\"").is_err(), "a template without a protocol");
        let mut o = BTreeMap::new();
        o.insert("toqd_self_verify".to_string(), "Q: {question}".to_string());
        let p = p.with_overrides(&o).expect("valid override");
        assert_eq!(p.protocol("toqd_self_verify"), Some(Protocol::AnswerOrSentinel));
    }

    #[test]
    fn a_phrase_list_reads_as_trimmed_lower_case_lines_and_knows_when_it_was_replaced() {
        let p = Prompts::default();
        assert_eq!(p.protocol("unanswered_phrases"), Some(Protocol::PhraseList));
        assert!(p.phrases("unanswered_phrases").iter().any(|line| line == "i don't know"));
        assert!(!p.is_overridden("unanswered_phrases"));
        assert!(p.phrases("no_such_list").is_empty());
        let o = BTreeMap::from([("unanswered_phrases".to_string(), "  Weiß nicht \n\n\tKeine Ahnung".to_string())]);
        let p = p.with_overrides(&o).expect("valid override");
        assert_eq!(p.phrases("unanswered_phrases"), ["weiß nicht", "keine ahnung"]);
        assert!(p.is_overridden("unanswered_phrases"));
        assert!(!p.is_overridden("rtr"), "only the replaced template counts");
    }

    #[test]
    fn overrides_are_checked() {
        let mut o = BTreeMap::new();
        o.insert("toqd_self_verify".to_string(), "Q: {question} {{literal}}".to_string());
        let p = Prompts::default().with_overrides(&o).expect("valid override");
        let rendered = p.render("toqd_self_verify", &[("question", "x"), ("answer_format", "y")]).expect("render");
        assert_eq!(rendered, "Q: x {literal}");

        o.insert("toqd_self_verify".to_string(), "Q: {nope}".to_string());
        assert!(Prompts::default().with_overrides(&o).is_err());
        let mut unknown = BTreeMap::new();
        unknown.insert("no_such".to_string(), "x".to_string());
        assert!(Prompts::default().with_overrides(&unknown).is_err());
    }

    #[test]
    fn missing_values_and_bad_braces_are_errors() {
        let p = Prompts::default();
        assert!(p.render("toqd_self_verify", &[]).is_err());
        assert!(fill("t", "a {b", &[("b", "x")]).is_err());
        assert!(fill("t", "a } b", &[]).is_err());
    }
}
