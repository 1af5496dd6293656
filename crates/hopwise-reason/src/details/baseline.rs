//! What the baselines record on their sink node `Q`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A baseline's detail on `Q`; each baseline fills its own fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BaselineNode {
    /// The model's full reply (CoT, Plan-and-Solve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The answer read from each sample (CoT-SC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<Vec<String>>,
    /// Samples that agree with the majority answer (CoT-SC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub votes: Option<usize>,
    /// Samples asked for (CoT-SC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<u32>,
    /// The simpler questions, in order (Least-to-Most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subquestions: Option<Vec<String>>,
    /// The plan's steps (Plan-and-Solve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<String>>,
    /// No follow-up ended with a final answer, so one was asked for (Self-Ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_final: Option<bool>,
}
