//! The options of the two ToQD presets: `toqd` (the product default, [`ToqdOptions`]) and
//! `toqd-paper` (the paper's Algorithm 1 and 2, [`PaperOptions`]: its four ablation switches).

use serde::{Deserialize, Serialize};

use crate::error::{ReasonError, Result};
use crate::gate::{GateSettings, UncertaintyGate, MAX_SAMPLES};
use crate::uncertainty::Estimator;

/// What a node asks the model before it reads passages: whether it already knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeGate {
    /// Nothing: every node reads passages.
    None,
    /// The paper's self-verification: one closed-book reply, an answer or `NO!`.
    No,
    /// `samples` closed-book answers in one request; the node is known when their disagreement `U`
    /// stays at or under `threshold` and most of them agree.
    Uncertainty,
}

/// Options of `toqd` and `toqd-noir`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToqdOptions {
    /// Most steps of a plan.
    pub max_steps: usize,
    /// Read the question itself over its passages (closed-book without retrieval) before the graph
    /// runs; a vote share of at least `answer_first_confidence` answers it there.
    pub answer_first: bool,
    pub answer_first_confidence: f64,
    /// A node's reading is its answer when the vote share reaches this; below it the node searches
    /// (within `max_node_searches`), is decomposed (within `max_expansions`), or keeps the leading
    /// reading as a best-effort answer.
    pub min_confidence: f64,
    /// Readings sampled per prompt (one request); 1 reads once, greedily.
    pub samples: u32,
    /// Temperature of the sampled readings.
    pub read_temperature: f32,
    /// Most nodes of one question that search with their own question after the question's
    /// passages left them unsure.
    pub max_node_searches: u32,
    /// Most nodes of one question decomposed into a child graph when nothing else settled them
    /// (within the budget's `r_max` and `max_depth`).
    pub max_expansions: u32,
    /// What a node asks the model before reading passages.
    pub gate: NodeGate,
    /// The estimator of the `uncertainty` gate, and its threshold (default: the estimator's).
    pub uncertainty: Estimator,
    pub threshold: Option<f64>,
    /// Temperature of the `uncertainty` gate's closed-book samples.
    pub sample_temperature: f32,
    /// Constrain the plan and typed readings with grammars where the backend supports them.
    pub grammar: bool,
    /// Count a reply that says it does not know in words (the `unanswered_phrases` list of the
    /// prompt templates, English unless replaced) like `NO!`; off, only the sentinel declines.
    pub hedges: bool,
}

impl Default for ToqdOptions {
    fn default() -> Self {
        Self {
            max_steps: 4,
            answer_first: true,
            answer_first_confidence: 0.8,
            min_confidence: 0.5,
            samples: 5,
            read_temperature: 0.5,
            max_node_searches: 1,
            max_expansions: 0,
            gate: NodeGate::None,
            uncertainty: Estimator::DegJaccard,
            threshold: None,
            sample_temperature: 1.0,
            grammar: true,
            hedges: true,
        }
    }
}

impl ToqdOptions {
    /// Checks ranges; returns the sampling gate when `gate = uncertainty`.
    pub fn validate(&self, strategy: &str) -> Result<Option<UncertaintyGate>> {
        let invalid = |m: String| Err(ReasonError::InvalidOption(format!("strategy `{strategy}`: {m}")));
        if self.samples == 0 || self.samples > MAX_SAMPLES {
            return invalid(format!("samples = {}: must be 1 to {}", self.samples, MAX_SAMPLES));
        }
        if !(self.read_temperature > 0.0 && self.read_temperature <= 2.0) {
            return invalid(format!("read_temperature = {}: must be in (0, 2]", self.read_temperature));
        }
        for (name, value) in
            [("min_confidence", self.min_confidence), ("answer_first_confidence", self.answer_first_confidence)]
        {
            if !(0.0..=1.0).contains(&value) {
                return invalid(format!("{name} = {value}: must be in [0, 1]"));
            }
        }
        if !(1..=crate::protocol::plan::MAX_STEPS).contains(&self.max_steps) {
            return invalid(format!(
                "max_steps = {}: must be 1 to {}",
                self.max_steps,
                crate::protocol::plan::MAX_STEPS
            ));
        }
        if self.gate != NodeGate::Uncertainty {
            return Ok(None);
        }
        if self.uncertainty.requires_nli() {
            return invalid(format!(
                "the node gate compares short answers by their words; choose deg-jaccard, eigv or ecc (not {})",
                self.uncertainty
            ));
        }
        let gate = UncertaintyGate::new(
            strategy,
            GateSettings {
                estimator: self.uncertainty,
                threshold: self.threshold,
                samples: Some(self.samples.max(2)),
                similarity: None,
                sample_temperature: self.sample_temperature,
            },
        )?;
        Ok(Some(gate))
    }
}

/// Options of `toqd-paper` and `toqd-noir-paper`: the paper's ablation switches.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PaperOptions {
    /// Filter the sub-questions with the critique step.
    pub critique: bool,
    /// Ask the model for the topology; without it the sub-questions form a chain in list order.
    pub construct: bool,
    /// Rewrite a node with its predecessors' answers before it is asked.
    pub rewrite: bool,
    /// Ask each node closed-book first (`NO!` or an answer); without it every node retrieves.
    pub self_verify: bool,
    /// Constrain list and edge outputs with a grammar where the backend supports it.
    pub grammar: bool,
    /// Most sub-questions kept from one decomposition (the paper asks for 2 to 6).
    pub max_subquestions: usize,
    /// Count a reply that says it does not know in words (the `unanswered_phrases` list) like
    /// `NO!`. Off in the paper, where only the sentinel declines.
    pub hedges: bool,
}

impl Default for PaperOptions {
    fn default() -> Self {
        Self {
            critique: true,
            construct: true,
            rewrite: true,
            self_verify: true,
            grammar: true,
            max_subquestions: 6,
            hedges: false,
        }
    }
}

impl PaperOptions {
    pub fn validate(&self, strategy: &str) -> Result<()> {
        if self.max_subquestions == 0 {
            return Err(ReasonError::InvalidOption(format!(
                "strategy `{strategy}`: max_subquestions must be at least 1"
            )));
        }
        Ok(())
    }
}
