//! ToQD's options: the paper's ablation switches, and the node gate that decides where to retrieve.

use serde::{Deserialize, Serialize};

use crate::error::{ReasonError, Result};
use crate::uar::{UarOptions, UncertaintyGate};
use crate::uncertainty::Estimator;

/// What decides that a node needs evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeGate {
    /// The paper's self-verification: the model answers from memory or replies `NO!`.
    No,
    /// `samples` closed-book answers in one request; retrieve when their disagreement `U` exceeds
    /// `threshold` (the estimators of the uncertainty loop), or when most of them give no answer.
    Uncertainty,
    /// Retrieve when either the `NO!` reply or the uncertainty says so.
    Both,
}

/// Where a node that needs evidence looks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Evidence {
    /// The paper's flow: each node that needs evidence retrieves with its own sub-question.
    Node,
    /// One retrieval with the main question before the graph runs; a node that needs evidence reads
    /// those passages first and retrieves with its own sub-question only when they leave it
    /// unanswered, and the summary reads them next to the nodes' answers. Multi-hop questions name
    /// most of their hops, so one search often covers several nodes.
    Question,
}

/// ToQD switches. `critique`, `construct`, `self_verify` and `rewrite` are the paper's ablations.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToqdOptions {
    /// Filter the sub-questions with the critique step.
    pub critique: bool,
    /// The critique runs only when the decomposition lists at least this many sub-questions (with
    /// fewer there is little to filter, and a small model's critique mostly drops a needed one).
    pub critique_min: usize,
    /// Ask the model for the topology; without it sub-questions form a chain in list order.
    pub construct: bool,
    /// Ask the node gate whether the model knows a node's answer before it reads passages; without
    /// it every node reads. Off by default: the local 1.5B model declines nearly every question under
    /// the `NO!` protocol and knows 12-18 % of dev questions closed-book (`hopwise gate-eval`,
    /// EVALUATION.md), so the gate costs a call per node and saves few searches. Turn it on for
    /// models that know more.
    pub self_verify: bool,
    /// Rewrite internal nodes with their predecessors' answers.
    pub rewrite: bool,
    /// Constrain list and edge outputs with a grammar where the backend supports it.
    pub grammar: bool,
    /// Most sub-questions kept from one decomposition, in list order. The decomposition prompt asks
    /// for 2 to 4; the local 1.5B often lists 6 to 8 for a two-hop question, and the extra nodes
    /// (paraphrases of the first ones) cost calls and could not be answered.
    pub max_subquestions: usize,
    /// How a node decides that it needs retrieval.
    pub gate: NodeGate,
    /// The uncertainty estimator of the `uncertainty` and `both` gates.
    pub uncertainty: Estimator,
    /// Retrieve when `U > threshold`; default the estimator's paper value.
    pub threshold: Option<f64>,
    /// Answers sampled per gate decision, per reading of passages and per summary (one request each).
    pub samples: u32,
    /// Temperature of the closed-book samples the gate measures.
    pub sample_temperature: f32,
    /// Temperature of the sampled readings of passages and of the summary, whose vote gives the
    /// node's (and the question's) answer and confidence.
    pub read_temperature: f32,
    /// A reading of passages whose winning answer has a smaller vote share than this leaves the node
    /// unresolved (it is decomposed, or answered best-effort).
    pub min_confidence: f64,
    /// Where a node that needs evidence looks first.
    pub evidence: Evidence,
    /// Most nodes of one question decomposed into child graphs when even passages leave them
    /// unanswered (the paper's last resort; each costs a plan and its children's calls, 10-20 with
    /// the local 1.5B, and rarely changed the answer on dev questions); the budget's `r_max` still
    /// applies. 0: such a node is answered best-effort from its passages.
    pub max_expansions: u32,
    /// With `evidence = question`, most nodes of one question that search with their own
    /// sub-question when the question's passages leave them unanswered; the others answer
    /// best-effort from the question's passages. On dev questions 4 of 14 such searches settled
    /// their node (`hopwise eval` traces, EVALUATION.md), each costing a round and a reading. A node
    /// whose names all title passages of the question does not search at all (same names, same pages).
    pub max_node_searches: u32,
    /// With `evidence = question`, read the question itself over its passages before planning (the
    /// question is the graph's first node to self-verify): a vote share of at least
    /// `answer_first_confidence` answers it there with one call, and below that the graph runs and
    /// the final vote pools these readings with the summary's. Off: always plan (the paper's flow).
    pub answer_first: bool,
    /// The vote share at which the question's own reading answers it without a graph.
    pub answer_first_confidence: f64,
    /// Below that share, the question's reading still answers it when at least this many samples
    /// answered and all of them agree (the others replied `NO!`: an abstention, not a vote against),
    /// unless the answer is one of two options or yes/no, where samples agree by chance half the
    /// time. On the dev traces such readings were right where the graph went wrong (HotpotQA lines 3
    /// and 16: 2 agreeing samples, 3 abstaining). 0: off.
    pub answer_first_agree: u32,
    /// Questions that name two options ("…, A or B?"): the final vote counts only readings that name
    /// one of them; when the question asks which comes first or last, or lived longer, the plan is
    /// one node per option (asking for its date, or its birth and death dates) and the dates decide,
    /// with the summary as the fallback. Off: such questions plan like any other.
    pub compare: bool,
    /// Yes/no questions about two subjects ("Are A and B both X?"): one node per subject asks the
    /// question of it alone, and the answer is "yes" only when both halves say yes. Off by default:
    /// on the six such HotpotQA dev questions the local 1.5B said "Yes" to each half as it does to
    /// the whole question, so the split cost a call and changed no answer.
    pub split_both: bool,
    /// Questions that ask where or what nationality: before a reading's answer counts, one short constrained call asks
    /// whether it names a person, a place or something else, and a person is no answer (the
    /// readings that gave it abstain; the node's own search then looks for that person). On the 2Wiki
    /// dev traces "the place of birth of the director of film X" was answered with the director.
    pub answer_kind: bool,
    /// Ask the node gate (`gate`, with its estimator and threshold) about the question itself before
    /// any search: when the model knows it closed-book, that answer is final and nothing is
    /// retrieved. `hopwise gate-eval --items questions` sweeps its threshold against the reader that
    /// runs otherwise (EVALUATION.md).
    pub question_gate: bool,
}

impl Default for ToqdOptions {
    fn default() -> Self {
        Self {
            critique: true,
            critique_min: 3,
            construct: true,
            self_verify: false,
            rewrite: true,
            grammar: true,
            max_subquestions: 4,
            gate: NodeGate::Uncertainty,
            uncertainty: Estimator::DegJaccard,
            threshold: None,
            samples: 5,
            sample_temperature: 1.0,
            read_temperature: 0.5,
            min_confidence: 0.5,
            evidence: Evidence::Question,
            max_expansions: 0,
            max_node_searches: 1,
            answer_first: true,
            answer_first_confidence: 0.8,
            answer_first_agree: 2,
            compare: true,
            split_both: false,
            answer_kind: true,
            question_gate: false,
        }
    }
}

impl ToqdOptions {
    /// Checks ranges, and returns the validated sampling gate when the node gate samples.
    pub fn validate(&self, strategy: &str) -> Result<Option<UncertaintyGate>> {
        let invalid = |m: String| Err(ReasonError::InvalidOption(format!("strategy `{strategy}`: {m}")));
        if self.samples == 0 || self.samples > crate::uar::MAX_SAMPLES {
            return invalid(format!("samples = {}: must be 1 to {}", self.samples, crate::uar::MAX_SAMPLES));
        }
        if !(self.read_temperature > 0.0 && self.read_temperature <= 2.0) {
            return invalid(format!("read_temperature = {}: must be in (0, 2]", self.read_temperature));
        }
        if !(0.0..=1.0).contains(&self.min_confidence) {
            return invalid(format!("min_confidence = {}: must be in [0, 1]", self.min_confidence));
        }
        if !(0.0..=1.0).contains(&self.answer_first_confidence) {
            return invalid(format!("answer_first_confidence = {}: must be in [0, 1]", self.answer_first_confidence));
        }
        if self.max_subquestions == 0 {
            return invalid("max_subquestions must be at least 1".into());
        }
        if self.gate == NodeGate::No {
            return Ok(None);
        }
        if self.uncertainty.requires_nli() {
            return invalid(format!(
                "the node gate compares short answers by their words; choose deg-jaccard, eigv or ecc (not {})",
                self.uncertainty
            ));
        }
        let gate = UncertaintyGate::for_strategy(
            strategy,
            &UarOptions {
                uncertainty: self.uncertainty,
                threshold: self.threshold,
                samples: Some(self.samples),
                sample_temperature: self.sample_temperature,
                ..UarOptions::default()
            },
        )?;
        Ok(Some(gate))
    }
}
