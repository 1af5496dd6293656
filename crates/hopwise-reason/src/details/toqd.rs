//! What ToQD records on its nodes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::protocol::plan::{AnswerType, QuestionPlan};
use crate::toqd::options::NodeGate;
use crate::uncertainty::Estimator;
use crate::vote::VoteRow;

/// A ToQD node's detail. Every part is present only where that step ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToqdNode {
    /// On `Q` (or a decomposed node) of `toqd`: the typed plan as the model wrote it and as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanRecord>,
    /// The closed-book gate that decided whether the node needs evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateRecord>,
    /// The sampled reading of the node's passages (on `Q`, with `answer_first`, of the question's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<ReadingRecord>,
    /// The vote share of the node's answer, where sampled answers were voted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The sink's final answer: sampled summaries and their vote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryRecord>,
    /// On `Q` of a `compare`, `all` or `select` plan: what each option's step found and which
    /// option (or yes/no) that gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRecord {
    /// The plan call's reply, as the model wrote it.
    pub reply: String,
    /// The plan as read and checked (the repairs are in the trace's `repairs`).
    pub plan: QuestionPlan,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    /// `compare`, `all` or `select`.
    pub op: String,
    /// The options, as the question names them.
    pub options: Vec<String>,
    /// Each option step's answer; null where it gave none.
    pub found: Vec<Option<String>>,
    /// The option (or, for `all`, yes or no) the values gave; null when they did not decide (the
    /// summary then answers).
    pub chosen: Option<String>,
}

/// Whether the gate sent the node to retrieval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateDecision {
    Retrieve,
    Known,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateRecord {
    /// The configured gate.
    pub gate: NodeGate,
    /// The closed-book samples, as the model wrote them.
    pub samples: Vec<String>,
    /// `U` over the samples' answers.
    pub uncertainty: f64,
    pub estimator: Estimator,
    /// Retrieve when `uncertainty` exceeds it.
    pub threshold: f64,
    /// `jaccard`, `nli`, `jaccard-fallback` (the judge failed) or `degenerate-samples`.
    pub similarity_source: String,
    /// The samples' answers, voted.
    pub vote: Vec<VoteRow>,
    pub decision: GateDecision,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadingRecord {
    /// The readings, as the model wrote them.
    pub samples: Vec<String>,
    /// The answer type each reading was read as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_type: Option<AnswerType>,
    pub vote: Vec<VoteRow>,
    /// The winning answer's share of the readings.
    pub confidence: f64,
    /// Whether the share reached `min_confidence`, so the node took the answer; absent until that
    /// is decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummaryRecord {
    /// The summaries, as the model wrote them.
    pub samples: Vec<String>,
    /// The question's own readings (when `answer_first` was unsure) that voted with the summaries.
    pub pooled_readings: usize,
    /// For a plan with options: only readings naming one of them voted, as that option.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restricted_to: Vec<String>,
    pub vote: Vec<VoteRow>,
    /// The winning answer's share of the votes.
    pub confidence: f64,
}
