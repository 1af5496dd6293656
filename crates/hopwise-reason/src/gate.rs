//! The sampling retrieval gate shared by the uncertainty loop (`uar`) and ToQD's nodes: draw `n`
//! answers to one prompt in one request, and measure how much they disagree with a black-box
//! estimator (the uncertainty paper's estimators, `uncertainty.rs`). Retrieval is warranted when
//! `U > θ`.

use std::sync::Arc;

use hopwise_core::{GenParams, Nli};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::nli_judge::entailment_matrix;
use crate::uar::{Similarity, UncertaintyGate};
use crate::uncertainty::{jaccard_matrix, nli_similarity, num_semantic_sets, Estimator, Matrix};

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
