//! HGOT — Hierarchical Graph of Thoughts.
//!
//! ```text
//! TRAVERSE(q, depth):
//!     a, CI, CTX_q = PROBE(q)                 retrieve; m cited thoughts in one request; weighted vote
//!     if CI ≥ stop_confidence: return         (`hgot` only: a confident node plans nothing)
//!     if depth ≥ max_depth: return            (checked before PLAN so a leaf costs no planning call;
//!                                             each PLAN also takes one expansion from `r_max`)
//!     G = PLAN(q, CTX_q) → SELF-REFLECT → FORMALIZE → repaired DAG of steps
//!     if G has no steps, or one step close to q: return      (STOP)
//!     CTX_G = SEARCH(G, depth + 1)            executor: topological order, independent steps together,
//!                                             each dependent step REWRITTEN with its dependencies' answers
//!     a', CI' = INFER(q, CTX_q ∪ CTX_G)       top-K passages by σ; m thoughts; weighted vote
//!     return a' unless keep_probe and CI > CI' (`hgot` only: then the Probe's answer)
//! ```
//! `hgot-paper` is Algorithm 1 as published: no `stop_confidence`, no `keep_probe`.
//! Thoughts are weighed by citation quality, `ρ = α + β·REC + γ·PREC` ([`citations`], [`vote`]); a
//! rationale of bare `[n]` markers has no statement and weighs α, unless `answer_claim` scores its
//! answer as a claim citing those markers, or `cited_grammar` samples the thoughts under a grammar
//! in which every sentence ends with its markers;
//! every Probe/Infer updates the passage scores `σ(p, t+1) = w·[σ(p, t), ν̄(p), CI]`, starting from
//! the search engine's scores divided by the round's best ([`crate::vote::initial_scores`]).
//!
//! Trace: the question is node `Q` (layer 0); its steps are `1`, `2`, … (layer 1), theirs `2.1`, …;
//! `parents` and edges carry the dependencies, steps nobody depends on feed their parent. Each
//! node's `extra` holds `layer`, `step`, `probe` / `infer` (per-sample thought, answer, REC, PREC,
//! ρ and statements; the vote table; CI; ν̄), `plan` (replies, steps, edges and where they came
//! from) and `stop`. The trace's `extra` holds the options, the NLI judge, the STOP similarity and
//! `sigma_history` (one entry per σ value: node, stage, passage, σ before, ν̄, CI, σ after).
//! `stats.nli_calls` counts judgements.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::BoxFuture;
use hopwise_core::trace::SINK;
use hopwise_core::{Decision, NodeTrace, Passage};
use serde::Serialize;

use crate::ctx::Ctx;
use crate::details::{
    self,
    hgot::{DemonstrationPool, HgotNode, HgotTrace, KeptAnswer, SigmaEntry, StopDetail, StopReason, StopRecord},
};
use crate::error::{ReasonError, Result};
use crate::strategy::api::{Answer, Strategy};

pub mod citations;
pub mod demos;
mod fewshot;
pub mod options;
mod planning;
mod search;
pub use crate::protocol::steps;
mod thinking;
pub use crate::vote;

pub use citations::{
    parse_thought, score_all, score_citations, split_statements, CitationScore, Judge, Statement, Thought,
};
pub use options::{DemoSelection, HgotOptions};
pub use steps::{
    dependency_text, parse_dependency_sentences, parse_formal_edges, parse_steps, repair_dependencies, Dependencies,
    Steps,
};
pub use vote::{
    initial_scores, normalize_support, passage_support, thought_quality, update_sigma, weighted_vote, Vote,
};

use demos::DemoPool;

/// Embeddings of the demonstration pool's questions and the embedder model that made them.
type PoolVectors = (String, Arc<Vec<Vec<f32>>>);

/// The `hgot` strategy. Build with [`Hgot::new`]; one value answers many questions.
pub struct Hgot {
    name: &'static str,
    opts: HgotOptions,
    pool: Option<DemoPool>,
    /// Pool question embeddings, per embedder model, computed on first use.
    pool_vectors: tokio::sync::Mutex<Option<PoolVectors>>,
}

impl Hgot {
    /// Validates the options and loads the demonstration pool, if any.
    pub fn new(opts: HgotOptions) -> Result<Self> {
        Self::named("hgot", opts)
    }

    /// The same strategy under another table name (`hgot-paper`).
    pub fn named(name: &'static str, opts: HgotOptions) -> Result<Self> {
        opts.validate()?;
        let pool = match &opts.demonstrations {
            Some(path) => {
                let pool = DemoPool::load(path)
                    .map_err(|e| ReasonError::InvalidOption(format!("strategy `hgot`: demonstrations: {e}")))?;
                if pool.is_empty() {
                    return Err(ReasonError::InvalidOption(format!(
                        "strategy `hgot`: demonstrations: no usable example in {} ({} dropped by the filters)",
                        path.display(),
                        pool.dropped
                    )));
                }
                Some(pool)
            }
            None => None,
        };
        Ok(Self { name, opts, pool, pool_vectors: tokio::sync::Mutex::new(None) })
    }

    pub fn options(&self) -> &HgotOptions {
        &self.opts
    }
}

/// A passage and its score σ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredPassage {
    pub passage: Passage,
    pub sigma: f64,
}

/// What one traversal found.
#[derive(Debug, Clone, Default)]
struct Outcome {
    answer: String,
    confidence: f64,
    /// Every passage collected under the node, with its latest σ.
    passages: Vec<ScoredPassage>,
    rationale: Option<String>,
}

/// A solved step of a SEARCH.
struct StepOutcome {
    question: String,
    outcome: Outcome,
}

/// One question's state.
struct Run<'a> {
    hgot: &'a Hgot,
    ctx: &'a Ctx,
    judge: citations::Judge,
    sigma_history: Mutex<Vec<SigmaEntry>>,
    stop_method: Mutex<Option<String>>,
    demo_fallback_noted: AtomicBool,
}

/// Changes the node's HGOT detail in place.
fn update_detail(node: &mut NodeTrace, change: impl FnOnce(&mut HgotNode)) {
    details::update(node, change);
}

/// Merges passage lists by id, keeping the higher σ; first-seen order.
fn merge_passages(lists: impl IntoIterator<Item = ScoredPassage>) -> Vec<ScoredPassage> {
    let mut merged: Vec<ScoredPassage> = Vec::new();
    for p in lists {
        match merged.iter_mut().find(|m| m.passage.id == p.passage.id) {
            Some(m) if p.sigma > m.sigma => m.sigma = p.sigma,
            Some(_) => {}
            None => merged.push(p),
        }
    }
    merged
}

impl Run<'_> {
    fn stage(kind: &str, node: &str) -> String {
        format!("{kind}:{node}")
    }

    fn child_id(parent: &str, i: usize) -> String {
        if parent == SINK {
            i.to_string()
        } else {
            format!("{parent}.{i}")
        }
    }

    fn stop(&self, id: &str, reason: StopReason, detail: Option<StopDetail>, probe: &Outcome) {
        let answer = probe.answer.clone();
        self.ctx.rec().update_node(id, |n| {
            update_detail(n, |d| d.stop = Some(StopRecord { reason, detail }));
            n.decision = if answer.is_empty() { Decision::Unresolved } else { Decision::Retrieved };
            n.answer = Some(answer);
        });
    }

    /// TRAVERSE. Boxed because it recurses through SEARCH.
    fn traverse(&self, question: String, id: String, depth: u32) -> BoxFuture<'_, Result<Outcome>> {
        Box::pin(async move {
            let probe = match self.probe(&question, &id).await {
                Ok(p) => p,
                Err(e) if !e.is_fatal() => {
                    self.ctx.rec().best_effort(format!("node {id}: probe failed ({e})"));
                    self.ctx.rec().update_node(&id, |n| {
                        n.decision = Decision::Unresolved;
                        n.best_effort = true;
                        n.answer = Some(String::new());
                    });
                    return Ok(Outcome::default());
                }
                Err(e) => return Err(e),
            };
            if let Some(tau) = self.hgot.opts.stop_confidence {
                if !probe.answer.is_empty() && probe.confidence >= tau {
                    let detail = StopDetail::Confidence { confidence: probe.confidence, stop_confidence: tau };
                    self.stop(&id, StopReason::Confident, Some(detail), &probe);
                    return Ok(probe);
                }
            }
            let max_depth = self.hgot.opts.max_depth.min(self.ctx.budget().max_depth);
            if depth >= max_depth {
                self.stop(&id, StopReason::MaxDepth, Some(StopDetail::Depth { depth, max_depth }), &probe);
                return Ok(probe);
            }
            // Each PLAN takes one expansion from the question's `r_max` budget.
            if !self.ctx.try_expand() {
                self.ctx.rec().note(format!(
                    "node {id}: r_max = {} expansions used; answering from the probe",
                    self.ctx.budget().r_max
                ));
                self.stop(&id, StopReason::RMax, Some(StopDetail::Budget { r_max: self.ctx.budget().r_max }), &probe);
                return Ok(probe);
            }
            let plan = match self.plan(&question, &id, &probe.passages).await {
                Ok(Some(plan)) => plan,
                Ok(None) => {
                    self.stop(&id, StopReason::NoSteps, None, &probe);
                    return Ok(probe);
                }
                Err(e) if !e.is_fatal() => {
                    self.ctx.rec().best_effort(format!("node {id}: planning failed ({e}); kept the probe's answer"));
                    self.stop(&id, StopReason::PlanFailed, Some(StopDetail::Error(e.to_string())), &probe);
                    return Ok(probe);
                }
                Err(e) => return Err(e),
            };
            if plan.steps.len() == 1 {
                let test = self.single_step_similarity(&question, &plan.steps.texts[0]).await;
                if test.similarity >= test.threshold {
                    self.stop(&id, StopReason::SingleStep, Some(StopDetail::Similarity(test)), &probe);
                    return Ok(probe);
                }
                self.ctx.rec().update_node(&id, |n| {
                    let stop = StopRecord { reason: StopReason::Continue, detail: Some(StopDetail::Similarity(test)) };
                    update_detail(n, |d| d.stop = Some(stop));
                });
            }
            let solved = self.search(&id, depth, &plan).await?;
            match self.infer(&question, &id, &probe, &solved).await {
                Ok(outcome) => Ok(self.keep_probe(&id, probe, outcome)),
                Err(e) if !e.is_fatal() => {
                    self.ctx.rec().best_effort(format!("node {id}: infer failed ({e}); kept the probe's answer"));
                    let passages = merge_passages(
                        probe.passages.iter().cloned().chain(solved.iter().flat_map(|s| s.outcome.passages.clone())),
                    );
                    self.stop(&id, StopReason::InferFailed, Some(StopDetail::Error(e.to_string())), &probe);
                    Ok(Outcome { passages, ..probe })
                }
                Err(e) => Err(e),
            }
        })
    }
}

/// HGOT's step templates and the judge's pair template, which every configuration may render.
const PAIRWISE: &[&str] =
    &["hgot_probe", "hgot_plan", "hgot_reflect", "hgot_formalize", "hgot_rewrite", "hgot_infer", "nli_judge"];
/// Rendered with `batch_judgements`.
const BATCH_JUDGE: &[&str] = &["nli_judge_batch", "nli_judge_batch_text", "nli_judge_batch_claim"];
/// Rendered with `demonstrations`.
const DEMOS: &[&str] = &["hgot_demos", "hgot_demo_thought", "hgot_demo_passages", "hgot_demo_plan"];
/// Rendered with `answer_claim`.
pub(crate) const ANSWER_CLAIM: &str = "hgot_answer_claim";
/// Every template HGOT may render: the union of the lists above, which a test keeps equal to what
/// every option on renders. A configuration's own list ([`Strategy::templates`]) holds only what
/// its options could render, so its prompts fingerprint changes only with those.
pub(crate) const TEMPLATES: &[&str] = &[
    "hgot_probe",
    "hgot_plan",
    "hgot_reflect",
    "hgot_formalize",
    "hgot_rewrite",
    "hgot_infer",
    "nli_judge",
    "nli_judge_batch",
    "nli_judge_batch_text",
    "nli_judge_batch_claim",
    "hgot_demos",
    "hgot_demo_thought",
    "hgot_demo_passages",
    "hgot_demo_plan",
    "hgot_answer_claim",
];

#[async_trait]
impl Strategy for Hgot {
    fn name(&self) -> &str {
        self.name
    }

    fn templates(&self) -> Option<Vec<&'static str>> {
        let mut templates = PAIRWISE.to_vec();
        if self.opts.batch_judgements {
            templates.extend_from_slice(BATCH_JUDGE);
        }
        if self.pool.is_some() {
            templates.extend_from_slice(DEMOS);
        }
        if self.opts.answer_claim {
            templates.push(ANSWER_CLAIM);
        }
        Some(templates)
    }

    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let nli = ctx.nli();
        let run = Run {
            hgot: self,
            ctx,
            judge: citations::Judge::new(nli, ctx.rec().clone(), self.opts.max_nli_calls, self.opts.batch_judgements),
            sigma_history: Mutex::new(Vec::new()),
            stop_method: Mutex::new(None),
            demo_fallback_noted: AtomicBool::new(false),
        };
        ctx.rec().upsert_node(NodeTrace {
            id: SINK.to_string(),
            question: question.to_string(),
            extra: details::to_extra(&HgotNode { layer: Some(0), ..Default::default() }),
            ..Default::default()
        });
        let outcome = run.traverse(question.to_string(), SINK.to_string(), 0).await;
        let history = run.sigma_history.lock().map(|h| h.clone()).unwrap_or_default();
        let stop_method = run.stop_method.lock().ok().and_then(|m| m.clone());
        ctx.rec().set_extra(details::to_extra(&HgotTrace {
            options: self.opts.clone(),
            nli: run.judge.name().to_string(),
            nli_calls: run.judge.calls(),
            stop_similarity: stop_method,
            demonstrations: self.pool.as_ref().map(|p| DemonstrationPool { pool: p.demos.len(), dropped: p.dropped }),
            sigma_history: history,
        }));
        let outcome = outcome?;
        if outcome.answer.is_empty() {
            ctx.rec().best_effort("no thought gave an answer");
        } else {
            // The answer's confidence index: its citation-weighted share of the root's vote.
            ctx.rec().set_confidence(outcome.confidence);
        }
        Ok(Answer { text: outcome.answer, rationale: outcome.rationale })
    }
}

impl Run<'_> {
    /// The keep-the-Probe rule (`keep_probe`): the graph's answer replaces the Probe's only when
    /// its confidence is at least as high. The decision is recorded on the node.
    fn keep_probe(&self, id: &str, probe: Outcome, inferred: Outcome) -> Outcome {
        if !self.hgot.opts.keep_probe || probe.answer.is_empty() {
            return inferred;
        }
        let keep = probe.confidence > inferred.confidence || inferred.answer.is_empty();
        let record = KeptAnswer {
            kept: if keep { "probe" } else { "infer" }.to_string(),
            probe_confidence: probe.confidence,
            infer_confidence: inferred.confidence,
        };
        let answer = if keep { probe.answer.clone() } else { inferred.answer.clone() };
        self.ctx.rec().update_node(id, |n| {
            update_detail(n, |d| d.kept = Some(record));
            n.answer = Some(answer);
        });
        if keep {
            Outcome { passages: inferred.passages, ..probe }
        } else {
            inferred
        }
    }

    /// Whether the demonstration selection fell back to word overlap (noted once per question).
    fn note_demo_fallback(&self, why: &str) {
        if !self.demo_fallback_noted.swap(true, Ordering::SeqCst) {
            self.ctx.rec().note(format!("demonstrations selected by word overlap: {why}"));
        }
    }
}

#[cfg(test)]
mod tests;
