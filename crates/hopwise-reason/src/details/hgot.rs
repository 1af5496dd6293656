//! What HGOT records: on each node its layer, plan, thoughts and why it stopped; on the trace its
//! options, judge and the history of every passage score.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hgot::options::HgotOptions;
use crate::vote::VoteRow;

/// An HGOT node's detail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HgotNode {
    /// Depth in the hierarchy (`Q` is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<u32>,
    /// Its step number in its parent's plan (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanRecord>,
    /// PROBE: thoughts over the node's own retrieval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ThoughtsRecord>,
    /// INFER: thoughts over the best passages of the node's steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infer: Option<ThoughtsRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopRecord>,
    /// Which answer the node kept after INFER, when `keep_probe` compared the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptAnswer>,
}

/// The keep-the-Probe rule's decision: the graph's answer replaces the Probe's only when its
/// confidence is at least as high.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeptAnswer {
    /// `probe` or `infer`.
    pub kept: String,
    pub probe_confidence: f64,
    pub infer_confidence: f64,
}

/// PLAN: the steps, how their dependencies were read, and the edges kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRecord {
    pub reply: String,
    pub steps: Vec<String>,
    /// The self-reflection's reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflect: Option<String>,
    /// Formalize's reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formal: Option<String>,
    /// The dependency sentences the edges were read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges_from: Option<EdgesFrom>,
    /// `[prerequisite, dependent]` step positions; absent when the plan listed no step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<Vec<(usize, usize)>>,
}

/// Which reply the plan's edges were read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EdgesFrom {
    Plan,
    SelfReflect,
    Formalize,
    /// Formalize gave nothing readable; the dependency sentences were parsed.
    Sentences,
}

/// Sampled thoughts, their citation quality and the weighted vote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThoughtsRecord {
    pub samples: Vec<ThoughtSample>,
    pub votes: Vec<VoteRow>,
    pub answer: String,
    /// CI: the winning answer's share of the citation weight.
    pub confidence: f64,
    /// Every ρ was 0, so each sample counted as 1.
    pub unweighted: bool,
    /// ν̄ per passage id.
    pub nu_bar: BTreeMap<String, f64>,
    /// INFER only: the passages given, best σ first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranked: Option<Vec<RankedPassage>>,
    /// Samples whose citations were not judged: every sample gave the same answer, so the vote
    /// and its confidence (1) could not change (`judge_unanimous` off).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unjudged_samples: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThoughtSample {
    /// The rationale.
    pub thought: String,
    pub answer: String,
    /// Citation recall and precision.
    pub rec: f64,
    pub prec: f64,
    /// The sample's weight, from `rec` and `prec`.
    pub rho: f64,
    pub statements: Vec<StatementScore>,
    /// The reply as the model wrote it.
    pub raw: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RankedPassage {
    pub id: String,
    pub sigma: f64,
}

/// Why the node was not (or was) expanded further.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRecord {
    pub reason: StopReason,
    pub detail: Option<StopDetail>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    MaxDepth,
    RMax,
    NoSteps,
    PlanFailed,
    SingleStep,
    /// A one-step plan that differs enough from its question: expanded.
    Continue,
    /// The Probe was confident enough (`stop_confidence`).
    Confident,
    InferFailed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StopDetail {
    Depth {
        depth: u32,
        max_depth: u32,
    },
    Budget {
        r_max: u32,
    },
    /// The Probe's confidence reached `stop_confidence`.
    Confidence {
        confidence: f64,
        stop_confidence: f64,
    },
    Similarity(SimilarityTest),
    /// The error that ended planning or inference.
    Error(String),
}

/// STOP's similarity between a one-step plan and its question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimilarityTest {
    pub similarity: f64,
    pub threshold: f64,
    /// `embedding:<model>` or `jaccard`.
    pub method: String,
}

/// HGOT's record on the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HgotTrace {
    pub options: HgotOptions,
    /// The NLI judge's name.
    pub nli: String,
    pub nli_calls: u64,
    /// STOP's similarity method, once a one-step plan was tested.
    pub stop_similarity: Option<String>,
    pub demonstrations: Option<DemonstrationPool>,
    /// Every σ, in the order set.
    pub sigma_history: Vec<SigmaEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DemonstrationPool {
    /// Demonstrations kept.
    pub pool: usize,
    /// Lines dropped by the filters.
    pub dropped: usize,
}

/// One passage score: its initial σ from retrieval, or an update after a stage's vote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SigmaEntry {
    Update { node: String, stage: String, passage: String, sigma_before: f64, nu_bar: f64, ci: f64, sigma: f64 },
    Retrieved { node: String, stage: String, passage: String, engine_score: f32, sigma: f64 },
}

/// How one statement's citations were judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StatementScore {
    pub claim: String,
    /// Scored citations (at most `MAX_CITATIONS`), 1-based.
    pub citations: Vec<usize>,
    /// Citations to passages that do not exist.
    pub dangling: Vec<usize>,
    pub supported: bool,
    /// Per scored citation.
    pub relevant: Vec<bool>,
}
