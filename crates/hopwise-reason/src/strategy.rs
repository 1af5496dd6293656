//! The `Strategy` trait and the registry of named strategies.
//!
//! A strategy answers one question through a [`Ctx`]; [`run`] wraps it with input checks and closes
//! the trace. New strategies register a constructor in [`build`] and a line in [`CATALOG`].

use async_trait::async_trait;
use hopwise_core::Trace;
use serde::de::DeserializeOwned;

use crate::ctx::Ctx;
use crate::error::{ReasonError, Result};

/// What a strategy returns; the rest of the record is in the trace.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub text: String,
    pub rationale: Option<String>,
}

#[async_trait]
pub trait Strategy: Send + Sync {
    fn name(&self) -> &str;
    /// The prompt templates the strategy may render (besides `system`, which every call sends), so an
    /// evaluation can tell whether a changed template touches its results.
    fn templates(&self) -> &'static [&'static str];
    /// Whether the strategy cannot run without a retriever.
    fn needs_retriever(&self) -> bool;
    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer>;
}

/// Strategy options as given in config (`[strategy.NAME]`) or flags. Each strategy deserialises its
/// own typed options from them and rejects keys it does not know.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StrategyOptions(pub serde_json::Map<String, serde_json::Value>);

impl StrategyOptions {
    pub fn parse<T: DeserializeOwned>(&self, strategy: &str) -> Result<T> {
        serde_json::from_value(serde_json::Value::Object(self.0.clone()))
            .map_err(|e| ReasonError::InvalidOption(format!("strategy `{strategy}`: {e}")))
    }

    pub fn set(&mut self, key: &str, value: serde_json::Value) {
        self.0.insert(key.to_string(), value);
    }
}

/// Every registered strategy: name and one-line description.
pub const CATALOG: &[(&str, &str)] = &[
    ("toqd", "ToQD: decompose, critique, construct a topology graph, resolve nodes with self-verification and retrieval"),
    ("toqd-noir", "ToQD without retrieval: a node that says NO! is decomposed directly"),
    ("uar", "Uncertainty-gated retrieval: sentence by sentence, retrieve with a sub-query when sampled next sentences disagree (U > θ)"),
    ("always-retrieve", "Sentence loop that retrieves before every sentence, with the temporary sentence as the query"),
    ("always-retrieve-subquery", "Sentence loop that retrieves before every sentence, with a generated sub-query"),
    ("flare-instruct", "Sentence loop in which the model asks for a search itself with [Search(query)]"),
    ("hgot", "HGOT: recursive plans of dependent search steps; thoughts weighed by citation quality, passages by σ"),
    ("direct", "Direct prompting: one call, answer from the model's own knowledge"),
    ("cot", "Chain-of-thought: reason step by step, then answer"),
    ("cot-sc", "CoT with self-consistency: n reasoning samples in one request, majority vote (option samples=5)"),
    ("rtr", "Direct Retrieval / Retrieve-then-Read: retrieve top-k for the question, answer from the passages"),
    ("self-ask", "Self-Ask with retrieval: follow-up questions, each answered from retrieved passages"),
    ("self-ask-noir", "Self-Ask without retrieval: follow-up questions answered from the model's knowledge"),
    ("least-to-most", "Least-to-Most: reduce to simpler questions, solve them in order, then answer"),
    ("plan-solve", "Plan-and-Solve: devise a plan, carry it out step by step, answer"),
    ("plan-solve-rtr", "Plan-and-Solve over passages retrieved for the question"),
];

/// The strategy to run for `name`, honouring a request for no retrieval through the `-noir` variants.
/// Shared by the CLI and the server so both accept exactly the same names.
pub fn resolve(name: &str, no_retrieval: bool) -> Result<String> {
    if !CATALOG.iter().any(|(n, _)| *n == name) {
        return Err(ReasonError::UnknownStrategy(name.to_string()));
    }
    if !no_retrieval || name.ends_with("-noir") {
        return Ok(name.to_string());
    }
    let variant = format!("{name}-noir");
    if CATALOG.iter().any(|(n, _)| *n == variant) {
        return Ok(variant);
    }
    // Strategies that never retrieve (direct, cot, …) already are their retrieval-free mode.
    match build(name, &StrategyOptions::default()) {
        Ok(s) if !s.needs_retriever() => Ok(name.to_string()),
        _ => Err(ReasonError::InvalidOption(format!("strategy `{name}` has no retrieval-free mode"))),
    }
}

/// Builds a strategy by name.
pub fn build(name: &str, options: &StrategyOptions) -> Result<Box<dyn Strategy>> {
    Ok(match name {
        "toqd" => Box::new(crate::toqd::Toqd::new(options.parse("toqd")?, true)?),
        "toqd-noir" => Box::new(crate::toqd::Toqd::new(options.parse("toqd-noir")?, false)?),
        "uar" => Box::new(crate::uar::DynamicRetrieval::uar(&options.parse("uar")?)?),
        "always-retrieve" => Box::new(crate::uar::DynamicRetrieval::always_retrieve(
            "always-retrieve",
            &options.parse("always-retrieve")?,
        )?),
        "always-retrieve-subquery" => Box::new(crate::uar::DynamicRetrieval::always_retrieve(
            "always-retrieve-subquery",
            &options.parse("always-retrieve-subquery")?,
        )?),
        "flare-instruct" => Box::new(crate::uar::DynamicRetrieval::flare_instruct(&options.parse("flare-instruct")?)?),
        "hgot" => Box::new(crate::hgot::Hgot::new(options.parse("hgot")?)?),
        "direct" => Box::new(crate::baselines::direct::Direct::new(options.parse("direct")?)),
        "cot" => Box::new(crate::baselines::cot::Cot::new(options.parse("cot")?)),
        "cot-sc" => Box::new(crate::baselines::cot::CotSc::new(options.parse("cot-sc")?)?),
        "rtr" => Box::new(crate::baselines::rtr::Rtr::new(options.parse("rtr")?)),
        "self-ask" => Box::new(crate::baselines::self_ask::SelfAsk::new(options.parse("self-ask")?, true)),
        "self-ask-noir" => Box::new(crate::baselines::self_ask::SelfAsk::new(options.parse("self-ask-noir")?, false)),
        "least-to-most" => Box::new(crate::baselines::least_to_most::LeastToMost::new(options.parse("least-to-most")?)),
        "plan-solve" => Box::new(crate::baselines::plan_solve::PlanSolve::new(options.parse("plan-solve")?, false)),
        "plan-solve-rtr" => {
            Box::new(crate::baselines::plan_solve::PlanSolve::new(options.parse("plan-solve-rtr")?, true))
        }
        other => return Err(ReasonError::UnknownStrategy(other.to_string())),
    })
}

/// Answers `question` with `strategy` and returns the closed trace. Backend failures inside the
/// strategy degrade to a best-effort answer; only bad input and configuration errors are `Err`.
pub async fn run(strategy: &dyn Strategy, ctx: &Ctx, question: &str) -> Result<Trace> {
    let question = question.trim();
    if question.is_empty() {
        return Err(ReasonError::EmptyQuestion);
    }
    if strategy.needs_retriever() && !ctx.has_retriever() {
        return Err(ReasonError::NeedsRetriever(strategy.name().to_string()));
    }
    match strategy.answer(ctx, question).await {
        Ok(answer) => Ok(ctx.rec.finish(&answer.text, answer.rationale)),
        Err(e @ (ReasonError::EmptyQuestion | ReasonError::NeedsRetriever(_) | ReasonError::InvalidOption(_))) => {
            Err(e)
        }
        Err(ReasonError::Core(e @ (hopwise_core::Error::Template { .. } | hopwise_core::Error::Config(_)))) => {
            Err(ReasonError::Core(e))
        }
        Err(e) => {
            ctx.rec.best_effort(format!("the strategy stopped early: {e}"));
            Ok(ctx.rec.finish("", None))
        }
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn every_catalog_entry_builds_with_default_options_and_names_itself() {
        for (name, _) in CATALOG {
            let s = build(name, &StrategyOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(s.name(), *name);
        }
        assert!(matches!(build("nope", &StrategyOptions::default()), Err(ReasonError::UnknownStrategy(_))));
        let mut bad = StrategyOptions::default();
        bad.set("no_such_key", serde_json::json!(1));
        assert!(matches!(build("cot", &bad), Err(ReasonError::InvalidOption(_))));
        assert_eq!(resolve("toqd", true).ok().as_deref(), Some("toqd-noir"));
        assert_eq!(resolve("toqd-noir", true).ok().as_deref(), Some("toqd-noir"));
        assert_eq!(resolve("cot", false).ok().as_deref(), Some("cot"));
        assert_eq!(resolve("direct", true).ok().as_deref(), Some("direct"), "never retrieves anyway");
        assert!(matches!(resolve("rtr", true), Err(ReasonError::InvalidOption(_))));
        assert!(matches!(resolve("nope", false), Err(ReasonError::UnknownStrategy(_))));
    }

    /// Each strategy, run on a few scripted replies that walk its main paths, renders only templates it
    /// declares (the evaluation fingerprint hashes exactly those).
    #[tokio::test]
    async fn strategies_render_only_the_templates_they_declare() {
        use std::sync::Arc;

        use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
        use hopwise_core::{Passage, Prompts, Recorder};

        let passages = vec![Passage {
            id: "p1".into(),
            title: "Jaws".into(),
            text: "Jaws was directed by Steven Spielberg.".into(),
            ..Default::default()
        }];
        let scripts = [
            ScriptedLlm::new(),
            ScriptedLlm::new().fallback("1. Who directed Jaws?\n2. When was he born?\n1 -> 2\n2 -> Q\nAnswer: Spielberg"),
            ScriptedLlm::new().fallback("Follow up: Who directed Jaws?\nSo the final answer is: Spielberg.\nStep 1: Who directed Jaws? [1]\nAnswer: Spielberg"),
        ];
        for (name, _) in CATALOG {
            for llm in &scripts {
                let strategy = build(name, &StrategyOptions::default()).expect("builds");
                let rec = Recorder::new("Who directed Jaws?", name);
                let ctx = Ctx::new(Arc::new(llm.clone()), Arc::new(Prompts::default()), rec)
                    .with_retriever(Some(Arc::new(StaticRetriever::new(passages.clone()))));
                let _ = run(strategy.as_ref(), &ctx, "Who directed Jaws?").await;
                for template in ctx.rendered_templates() {
                    assert!(
                        strategy.templates().contains(&template.as_str()),
                        "{name} rendered `{template}`, which it does not declare"
                    );
                }
            }
        }
    }
}
