//! What the sentence loop (uar, always-retrieve, flare-instruct, flare-direct) records: one node per sentence,
//! and its configuration on the trace.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gate::Similarity;
use crate::uncertainty::{Estimator, Matrix};

/// One sentence's step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SentenceNode {
    /// The sentence written before any retrieval.
    pub temporary: String,
    /// The sentence kept.
    pub sentence: String,
    pub decision: StepDecision,
    /// The search query, when the step retrieved.
    pub query: Option<String>,
    /// What the gate saw.
    #[serde(flatten)]
    pub gate: StepGate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepDecision {
    Retrieve,
    Accept,
}

/// The gate's record, by gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StepGate {
    /// uar: sampled next sentences and their disagreement.
    Uncertainty {
        samples: Vec<String>,
        /// Pairwise similarity of the samples, row by row.
        #[schemars(with = "Vec<Vec<f64>>")]
        similarity: Matrix,
        /// `jaccard`, `nli`, `jaccard-fallback` (the judge failed) or `degenerate-samples`.
        similarity_source: String,
        uncertainty: f64,
        estimator: Estimator,
        threshold: f64,
    },
    /// always-retrieve: where the query came from.
    Always { query_source: QuerySource },
    /// flare-instruct: the model's reply (a sentence or a search request).
    Flare { reply: String },
    /// flare-direct: the look-ahead sentence's tokens with their probabilities, the lowest of them,
    /// and θ (a token below it made the step search).
    Confidence { tokens: Vec<(String, f64)>, lowest_probability: Option<f64>, theta: f64 },
}

/// The loop's configuration, on the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SentenceTrace {
    pub gate: LoopGate,
    pub max_steps: u32,
    pub initial_retrieval: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LoopGate {
    Uncertainty { estimator: Estimator, threshold: f64, samples: u32, similarity: Similarity, sample_temperature: f32 },
    Always { query: QuerySource },
    FlareInstruct,
    FlareDirect { theta: f64, beta: f64, without_probabilities: WithoutProbabilities },
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
