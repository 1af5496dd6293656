//! Typed options of the sentence-loop strategies.

use serde::{Deserialize, Serialize};

pub use crate::details::sentence::{QuerySource, WithoutProbabilities};
use crate::error::{ReasonError, Result};
use crate::gate::{GateSettings, Similarity, UncertaintyGate};
use crate::uncertainty::Estimator;

/// Options of `uar`.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UarOptions {
    pub uncertainty: Estimator,
    /// Retrieve when `U > threshold`. Default: the paper's value for the estimator
    /// (deg-jaccard 0.4, deg-nli 0.5, ecc 2, numsets 2; eigv 2, see [`Estimator::default_threshold`]).
    pub threshold: Option<f64>,
    /// Samples per step (≥ 2). Default 5; for `ecc` 10, because with `n` samples Eccentricity is
    /// at most `√(n − 1)`, so with 5 it could never exceed the paper's θ = 2.
    pub samples: Option<u32>,
    /// Similarity for `eigv` and `ecc` (the others fix it). Default `jaccard`: LM-Polygraph defaults
    /// to NLI with a fast cross-encoder, but with an LLM judge that is `n(n−1)` calls per sentence.
    pub similarity: Option<Similarity>,
    pub max_steps: u32,
    /// Temperature of the `n` samples (the temporary sentence uses the context's defaults).
    pub sample_temperature: f32,
    /// Retrieve once with the question before the first sentence (FLARE does; off by default).
    pub initial_retrieval: bool,
}

impl Default for UarOptions {
    fn default() -> Self {
        Self {
            uncertainty: Estimator::default(),
            threshold: None,
            samples: None,
            similarity: None,
            max_steps: 6,
            sample_temperature: 1.0,
            initial_retrieval: false,
        }
    }
}

/// Options of `always-retrieve` and `always-retrieve-subquery`.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlwaysRetrieveOptions {
    /// Default: `sentence` for `always-retrieve`, `subquery` for `always-retrieve-subquery`.
    pub query: Option<QuerySource>,
    pub max_steps: u32,
    pub initial_retrieval: bool,
}

impl Default for AlwaysRetrieveOptions {
    fn default() -> Self {
        Self { query: None, max_steps: 6, initial_retrieval: false }
    }
}

/// Options of `flare-instruct`.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlareInstructOptions {
    pub max_steps: u32,
    pub initial_retrieval: bool,
}

impl Default for FlareInstructOptions {
    fn default() -> Self {
        Self { max_steps: 6, initial_retrieval: false }
    }
}

/// Options of `flare-direct`.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlareDirectOptions {
    /// θ: the look-ahead sentence is searched for and regenerated when any of its tokens has a
    /// probability below this.
    pub theta: f64,
    /// β: tokens below this probability are masked out of the search query.
    pub beta: f64,
    pub max_steps: u32,
    /// Search with the question before the first sentence (FLARE's first query is the input).
    pub initial_retrieval: bool,
    pub without_probabilities: WithoutProbabilities,
}

impl Default for FlareDirectOptions {
    fn default() -> Self {
        Self {
            theta: 0.8,
            beta: 0.4,
            max_steps: 6,
            initial_retrieval: true,
            without_probabilities: WithoutProbabilities::Error,
        }
    }
}

/// The validated confidence gate of `flare-direct`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ConfidenceGate {
    pub theta: f64,
    pub beta: f64,
    pub without_probabilities: WithoutProbabilities,
}

impl ConfidenceGate {
    pub fn from_options(o: &FlareDirectOptions) -> Result<Self> {
        for (name, value) in [("theta", o.theta), ("beta", o.beta)] {
            if !(0.0..=1.0).contains(&value) {
                return Err(ReasonError::InvalidOption(format!(
                    "strategy `flare-direct`: {name} = {value}: a probability, 0 to 1"
                )));
            }
        }
        Ok(Self { theta: o.theta, beta: o.beta, without_probabilities: o.without_probabilities })
    }
}

/// The validated uncertainty gate of `uar`'s options (error messages name `strategy`).
pub fn uncertainty_gate(strategy: &str, o: &UarOptions) -> Result<UncertaintyGate> {
    UncertaintyGate::new(
        strategy,
        GateSettings {
            estimator: o.uncertainty,
            threshold: o.threshold,
            samples: o.samples,
            similarity: o.similarity,
            sample_temperature: o.sample_temperature,
        },
    )
}
