//! Typed options of the sentence-loop strategies and the validated uncertainty gate.

use serde::{Deserialize, Serialize};

use crate::error::{ReasonError, Result};
use crate::uncertainty::Estimator;

/// Most samples per step: the estimators' eigen-solver and the NLI cost (`n(n−1)` judgements) are
/// sized for small `n`.
pub const MAX_SAMPLES: u32 = 20;

/// Which similarity feeds EigV and Eccentricity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Similarity {
    Jaccard,
    Nli,
}

/// What always-retrieve searches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QuerySource {
    /// The temporary sentence itself (FLARE's direct query).
    Sentence,
    /// A generated sub-query for the missing fact.
    Subquery,
}

/// Options of `uar`.
#[derive(Debug, Clone, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
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

/// What `flare-direct` does when the backend reports no token probabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WithoutProbabilities {
    /// Stop with an error that names this option (the default: a row must not silently measure
    /// another method).
    #[default]
    Error,
    /// Run `flare-instruct` instead, and say so in the trace.
    FlareInstruct,
}

/// Options of `flare-direct`.
#[derive(Debug, Clone, Deserialize)]
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

/// The resolved, validated uncertainty gate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UncertaintyGate {
    pub estimator: Estimator,
    pub threshold: f64,
    pub samples: u32,
    pub similarity: Similarity,
    pub sample_temperature: f32,
}

impl UncertaintyGate {
    pub fn from_options(o: &UarOptions) -> Result<Self> {
        Self::for_strategy("uar", o)
    }

    /// Validates the gate settings of `strategy` (error messages name it).
    pub fn for_strategy(strategy: &str, o: &UarOptions) -> Result<Self> {
        let invalid = |m: String| Err(ReasonError::InvalidOption(format!("strategy `{strategy}`: {m}")));
        let estimator = o.uncertainty;
        let samples = o.samples.unwrap_or(if estimator == Estimator::Ecc { 10 } else { 5 });
        if samples < 2 {
            return invalid(format!("samples = {samples}: uncertainty needs at least 2 samples to compare"));
        }
        if samples > MAX_SAMPLES {
            return invalid(format!("samples = {samples}: at most {MAX_SAMPLES} are supported"));
        }
        let similarity = match (estimator, o.similarity) {
            (Estimator::Eigv | Estimator::Ecc, s) => s.unwrap_or(Similarity::Jaccard),
            (_, Some(_)) => {
                return invalid(format!(
                    "`similarity` applies to eigv and ecc only; {estimator} fixes its own similarity"
                ))
            }
            (Estimator::DegJaccard, None) => Similarity::Jaccard,
            (Estimator::DegNli | Estimator::Numsets, None) => Similarity::Nli,
        };
        let threshold = o.threshold.unwrap_or(estimator.default_threshold());
        let max = estimator.max_value(samples as usize);
        if !threshold.is_finite() || threshold < 0.0 {
            return invalid(format!("threshold = {threshold}: must be a finite number ≥ 0"));
        }
        if threshold >= max {
            return invalid(format!(
                "threshold = {threshold}: {estimator} is at most {max:.3} with {samples} samples, so it could never \
                 exceed the threshold; lower it or raise `samples`"
            ));
        }
        if !(o.sample_temperature > 0.0 && o.sample_temperature <= 2.0) {
            return invalid(format!("sample_temperature = {}: must be in (0, 2]", o.sample_temperature));
        }
        Ok(Self { estimator, threshold, samples, similarity, sample_temperature: o.sample_temperature })
    }
}
