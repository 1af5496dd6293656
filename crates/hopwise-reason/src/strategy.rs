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
];

/// Builds a strategy by name.
pub fn build(name: &str, options: &StrategyOptions) -> Result<Box<dyn Strategy>> {
    Ok(match name {
        "toqd" => Box::new(crate::toqd::Toqd::new(options.parse("toqd")?, true)),
        "toqd-noir" => Box::new(crate::toqd::Toqd::new(options.parse("toqd-noir")?, false)),
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
        Err(e @ (ReasonError::EmptyQuestion | ReasonError::NeedsRetriever(_) | ReasonError::InvalidOption(_))) => Err(e),
        Err(ReasonError::Core(e @ (hopwise_core::Error::Template { .. } | hopwise_core::Error::Config(_)))) => {
            Err(ReasonError::Core(e))
        }
        Err(e) => {
            ctx.rec.best_effort(format!("the strategy stopped early: {e}"));
            Ok(ctx.rec.finish("", None))
        }
    }
}
