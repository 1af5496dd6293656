//! Typed options of the `hgot` strategy and their validation.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{ReasonError, Result};

/// Most samples per Probe/Infer (the paper uses 20; each sample also costs NLI judgements).
pub const MAX_SAMPLES: u32 = 20;

/// How demonstrations are picked from the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DemoSelection {
    /// The pool entries nearest to the question (sentence embeddings when the context has an
    /// embedder, word overlap otherwise).
    #[default]
    Knn,
    /// Round-robin over answer classes (yes / no / other), rotated by a hash of the question.
    Balanced,
}

/// Options of `hgot` (`[strategies.hgot]`). Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HgotOptions {
    /// `ρ = alpha + beta·REC + gamma·PREC` (paper's best: 0.2, 0.4, 0.4).
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    /// `σ(p, t+1) = w[0]·σ(p, t) + w[1]·ν̄(p) + w[2]·CI` (paper's best: 0.2, 0.55, 0.25).
    pub w: [f64; 3],
    /// Samples `m` per Probe/Infer, drawn in one request with `n = m`. Default 5: the paper shows
    /// 20, which with a local model and an LLM NLI judge costs too much per question.
    pub samples: u32,
    /// Draw the `m` samples in one request with `n = m` (the backend can share the prompt). Off:
    /// `m` concurrent requests with `n = 1`, for backends that ignore `n` (and for the cost bench).
    pub shared_sampling: bool,
    /// Deepest layer that may still plan: the question is layer 0, its steps layer 1, … A node at
    /// `max_depth` answers from its Probe alone.
    pub max_depth: u32,
    /// Passages Infer answers from, the best by σ.
    pub top_k: usize,
    /// Most steps kept from one plan.
    pub max_steps: usize,
    /// Confidence-driven depth: a node whose Probe's confidence (the citation-weighted vote's CI)
    /// reaches this answers from the Probe and plans nothing. `None` (the paper, `hgot-paper`): depth
    /// and graph size alone stop the recursion. The default was chosen on the tuning set
    /// (docs/studies/hgot-stop-confidence.md).
    pub stop_confidence: Option<f64>,
    /// After INFER, keep the Probe's answer when its confidence is higher than the graph's.
    pub keep_probe: bool,
    /// Judge the citations of a Probe whose samples all give the same answer. Off (the default):
    /// with `stop_confidence` set, such a Probe's confidence is 1 whatever its citations weigh, so
    /// the node stops on it and the judgements could change nothing; they are skipped and the
    /// unjudged samples counted in the trace.
    pub judge_unanimous: bool,
    /// STOP: a one-step plan whose step embeds within this cosine of the question ends the recursion.
    pub stop_cosine: f64,
    /// STOP without an embedder: the same test with word-set Jaccard similarity.
    pub stop_jaccard: f64,
    /// Sampling temperature of Probe and Infer (must be > 0 when `samples > 1`).
    pub temperature: f32,
    /// Ask for the dependencies again from the steps alone (Self-Reflect).
    pub self_reflect: bool,
    /// Turn the dependency sentences into arrow edges with a model call (Formalize); without it the
    /// sentences are parsed directly.
    pub formalize: bool,
    /// `δ̂(p, s) = 1` also when an uncited passage entails a statement. Off by default: it costs one
    /// NLI judgement per (uncited passage, statement) pair.
    pub uncited_entailment: bool,
    /// Score a rationale that states nothing (only `[n]` markers) as one statement: the answer put as
    /// a claim about the question (template `hgot_answer_claim`), citing those markers. Off (the
    /// paper): such a thought has no statement, recall and precision 0, and weighs `alpha` whatever
    /// its passages say.
    pub answer_claim: bool,
    /// Constrain each Probe/Infer thought with a grammar ([`cited_thought_grammar`]): one to three
    /// sentences, each ending with markers naming passages of the prompt, then the answer.
    /// Backends without grammars ignore it (the trace's calls say whether one was used). Off (the
    /// paper): the prompt alone asks for that form, and a reply of bare markers leaves no statement
    /// whose citations could be judged.
    ///
    /// [`cited_thought_grammar`]: crate::protocol::citations::cited_thought_grammar
    pub cited_grammar: bool,
    /// NLI judgements allowed per question; beyond it a citation counts as unsupported (noted).
    pub max_nli_calls: u64,
    /// Judge a vote's new (premise, statement) pairs of one round together, where the NLI can: the
    /// LLM judge asks them in grammar-constrained `nli_judge_batch` requests of up to 12 pairs, and
    /// its verdicts are then labels without probabilities. The citations of a multi-cited statement
    /// are judged alone in the same round as its support, which costs judgements when it turns out
    /// unsupported and saves a request. Off: one request per pair, as ALCE's NLI model judges them.
    pub batch_judgements: bool,
    /// A JSONL pool of solved examples (`{question, rationale, answer, steps?, passages?}`); none
    /// means zero-shot.
    pub demonstrations: Option<PathBuf>,
    /// Demonstrations shown per prompt.
    pub demo_count: usize,
    pub demo_selection: DemoSelection,
}

impl Default for HgotOptions {
    fn default() -> Self {
        Self {
            alpha: 0.2,
            beta: 0.4,
            gamma: 0.4,
            w: [0.2, 0.55, 0.25],
            samples: 5,
            shared_sampling: true,
            max_depth: 2,
            stop_confidence: Some(0.5),
            keep_probe: true,
            judge_unanimous: false,
            top_k: 5,
            max_steps: 4,
            stop_cosine: 0.9,
            stop_jaccard: 0.6,
            temperature: 0.7,
            self_reflect: true,
            formalize: true,
            uncited_entailment: false,
            answer_claim: false,
            cited_grammar: false,
            max_nli_calls: 300,
            batch_judgements: false,
            demonstrations: None,
            demo_count: 3,
            demo_selection: DemoSelection::Knn,
        }
    }
}

impl HgotOptions {
    /// The paper's flow (`hgot-paper`): these options without the confidence-driven additions
    /// unless they were set explicitly.
    pub fn paper(mut self, explicit: &serde_json::Map<String, serde_json::Value>) -> Self {
        if !explicit.contains_key("stop_confidence") {
            self.stop_confidence = None;
        }
        if !explicit.contains_key("keep_probe") {
            self.keep_probe = false;
        }
        self
    }

    /// Checks ranges; every message names the option.
    pub fn validate(&self) -> Result<()> {
        let invalid = |m: String| Err(ReasonError::InvalidOption(format!("strategy `hgot`: {m}")));
        let weights = [("alpha", self.alpha), ("beta", self.beta), ("gamma", self.gamma)];
        for (name, v) in weights {
            if !v.is_finite() || v < 0.0 {
                return invalid(format!("{name} = {v}: must be a finite number ≥ 0"));
            }
        }
        if self.alpha + self.beta + self.gamma <= 0.0 {
            return invalid("alpha, beta and gamma are all 0: every thought would weigh nothing".into());
        }
        if self.w.iter().any(|v| !v.is_finite() || *v < 0.0) || self.w.iter().sum::<f64>() <= 0.0 {
            return invalid(format!("w = {:?}: three finite numbers ≥ 0, not all 0", self.w));
        }
        if !(1..=MAX_SAMPLES).contains(&self.samples) {
            return invalid(format!("samples = {}: must be 1 to {MAX_SAMPLES}", self.samples));
        }
        if self.max_depth > 4 {
            return invalid(format!("max_depth = {}: at most 4 (the tree grows as steps^depth)", self.max_depth));
        }
        if self.top_k == 0 || self.max_steps == 0 || self.demo_count == 0 {
            return invalid("top_k, max_steps and demo_count must be at least 1".into());
        }
        let tau = self.stop_confidence.unwrap_or(0.0);
        for (name, v) in
            [("stop_cosine", self.stop_cosine), ("stop_jaccard", self.stop_jaccard), ("stop_confidence", tau)]
        {
            if !(0.0..=1.0).contains(&v) {
                return invalid(format!("{name} = {v}: must be in [0, 1]"));
            }
        }
        if !(self.temperature >= 0.0 && self.temperature <= 2.0) {
            return invalid(format!("temperature = {}: must be in [0, 2]", self.temperature));
        }
        if self.samples > 1 && self.temperature == 0.0 {
            return invalid("temperature = 0 with samples > 1 would draw the same thought m times".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> std::result::Result<HgotOptions, String> {
        serde_json::from_value::<HgotOptions>(v).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_papers_weights_and_valid() {
        let o = HgotOptions::default();
        assert_eq!((o.alpha, o.beta, o.gamma), (0.2, 0.4, 0.4));
        assert_eq!(o.w, [0.2, 0.55, 0.25]);
        assert!(o.validate().is_ok());
    }

    #[test]
    fn unknown_keys_and_bad_ranges_are_rejected() {
        assert!(parse(serde_json::json!({ "alpah": 1.0 })).is_err());
        let o = parse(serde_json::json!({ "alpha": 1.0, "beta": 0.0, "gamma": 0.0, "w": [1, 0, 0] })).expect("valid");
        assert!(o.validate().is_ok());
        for bad in [
            serde_json::json!({ "alpha": 0.0, "beta": 0.0, "gamma": 0.0 }),
            serde_json::json!({ "alpha": -1.0 }),
            serde_json::json!({ "w": [0, 0, 0] }),
            serde_json::json!({ "samples": 0 }),
            serde_json::json!({ "samples": 21 }),
            serde_json::json!({ "stop_cosine": 1.5 }),
            serde_json::json!({ "temperature": 0.0 }),
            serde_json::json!({ "top_k": 0 }),
            serde_json::json!({ "max_depth": 9 }),
        ] {
            let o = parse(bad.clone()).expect("well-typed");
            assert!(o.validate().is_err(), "{bad} should be rejected");
        }
        let single = parse(serde_json::json!({ "samples": 1, "temperature": 0.0 })).expect("typed");
        assert!(single.validate().is_ok(), "one greedy sample is allowed");
    }
}
