//! What ToQD records on its nodes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hgot::vote::VoteRow;
use crate::toqd::{Direction, NodeGate};
use crate::uncertainty::Estimator;

/// A ToQD node's detail. Every part is present only where that step ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToqdNode {
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
    /// On the sink of a question that compares the dates or lifespans of two options: what the
    /// option nodes found and which option that chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<ComparisonRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComparisonRecord {
    /// The two options, as the question names them.
    pub options: Vec<String>,
    pub direction: Direction,
    /// What each option's node found: a date (`YYYY`, `YYYY-MM`, `YYYY-MM-DD`, or `YYYY/YYYY` for a
    /// decade or century), or for a lifespan its birth and death dates and the whole years between
    /// (`1909-09-07/2003-09-28 (94 years)`); null where its answer gave none, or several.
    pub dates: Vec<Option<String>>,
    /// The option the dates chose; null when they could not (the summary then answers).
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
    /// The greedy `NO!`-or-answer reply's answer (gate `both`); null otherwise or when it declined.
    pub self_verify: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadingRecord {
    /// The readings, as the model wrote them.
    pub samples: Vec<String>,
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
    /// For a question that names two options: only readings naming one of them voted, as that
    /// option.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restricted_to: Vec<String>,
    pub vote: Vec<VoteRow>,
    /// The winning answer's share of the votes.
    pub confidence: f64,
}
