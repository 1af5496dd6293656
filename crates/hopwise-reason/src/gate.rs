//! The sampling retrieval gate shared by the uncertainty loop (`uar`) and ToQD's nodes: draw `n`
//! answers to one prompt in one request, and measure how much they disagree with a black-box
//! estimator (the uncertainty paper's estimators, `uncertainty.rs`). Retrieval is warranted when
//! `U > θ`.

use std::sync::Arc;

use hopwise_core::{GenParams, Nli};

use serde::{Deserialize, Serialize};

use crate::ctx::Ctx;
use crate::error::{ReasonError, Result};
use crate::nli_judge::entailment_matrix;
use crate::uncertainty::{jaccard_matrix, nli_similarity, num_semantic_sets, Estimator, Matrix};

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

/// The resolved, validated uncertainty gate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UncertaintyGate {
    pub estimator: Estimator,
    pub threshold: f64,
    pub samples: u32,
    pub similarity: Similarity,
    pub sample_temperature: f32,
}

/// A gate as options state it, before validation: `None` takes the estimator's default.
#[derive(Debug, Clone, Copy)]
pub struct GateSettings {
    pub estimator: Estimator,
    pub threshold: Option<f64>,
    pub samples: Option<u32>,
    pub similarity: Option<Similarity>,
    pub sample_temperature: f32,
}

impl UncertaintyGate {
    /// Validates the gate settings of `strategy` (error messages name it).
    pub fn new(strategy: &str, o: GateSettings) -> Result<Self> {
        let invalid = |m: String| Err(ReasonError::InvalidOption(format!("strategy `{strategy}`: {m}")));
        let estimator = o.estimator;
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

/// `U` over a set of samples, with the similarity matrix it came from.
pub struct Estimate {
    pub similarity: Matrix,
    pub uncertainty: f64,
    /// `jaccard`, `nli`, `jaccard-fallback` (the judge failed) or `degenerate-samples`.
    pub source: &'static str,
}

/// `n` samples of `prompt` in one request (so the backend can share the prompt), each cut by
/// `read`. A backend that returns fewer choices is asked again for the rest, once per missing batch;
/// a shortfall is noted in the trace.
pub async fn sample(
    ctx: &Ctx,
    node: &str,
    purpose: &str,
    prompt: &str,
    gate: &UncertaintyGate,
    max_tokens: u32,
    read: fn(&str) -> String,
) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(gate.samples as usize);
    for attempt in 0..gate.samples {
        let missing = gate.samples - out.len() as u32;
        let params = GenParams {
            n: missing,
            temperature: gate.sample_temperature,
            top_p: 1.0,
            max_tokens,
            grammar: None,
            // A different seed per attempt, so a seeded backend does not repeat itself.
            seed: ctx.params().seed.map(|s| s.wrapping_add(u64::from(attempt))),
            ..ctx.params().clone()
        };
        let reply = ctx.chat(purpose, Some(node), prompt.to_string(), params).await?;
        out.extend(reply.choices.iter().take(missing as usize).map(|c| read(&c.text)));
        if out.len() as u32 >= gate.samples || reply.choices.is_empty() {
            break;
        }
    }
    if (out.len() as u32) < gate.samples {
        ctx.rec().note(format!("node {node}: the backend returned {} of {} samples", out.len(), gate.samples));
    }
    Ok(out)
}

/// `U` over `samples`. All-empty samples, or fewer than two, are maximal uncertainty. With NLI
/// similarity and a judge, the entailment matrix is asked for (its judgements are counted); a
/// failing judge falls back to Jaccard similarity and says so in the trace.
pub async fn estimate(
    ctx: &Ctx,
    node: &str,
    gate: &UncertaintyGate,
    nli: Option<&Arc<dyn Nli>>,
    samples: &[String],
) -> Estimate {
    let n = samples.len();
    let jaccard = || jaccard_matrix(samples);
    if n < 2 || samples.iter().all(|s| s.trim().is_empty()) {
        return Estimate {
            similarity: jaccard(),
            uncertainty: gate.estimator.max_value(gate.samples as usize),
            source: "degenerate-samples",
        };
    }
    if let (Similarity::Nli, Some(nli)) = (gate.similarity, nli) {
        match entailment_matrix(nli.as_ref(), samples).await {
            Ok(m) => {
                ctx.rec().with_stats(|s| s.nli_calls += m.judgements);
                let w = nli_similarity(&m.entail);
                let uncertainty = match gate.estimator {
                    Estimator::Numsets => num_semantic_sets(n, |i, j| m.mutual[i][j]) as f64,
                    other => other.from_similarity(&w),
                };
                return Estimate { similarity: w, uncertainty, source: "nli" };
            }
            Err(e) => {
                ctx.rec().note(format!("node {node}: the NLI judge failed ({e}); fell back to Jaccard similarity"));
                let w = jaccard();
                let uncertainty = gate.estimator.from_similarity(&w);
                return Estimate { similarity: w, uncertainty, source: "jaccard-fallback" };
            }
        }
    }
    let w = jaccard();
    Estimate { uncertainty: gate.estimator.from_similarity(&w), similarity: w, source: "jaccard" }
}
