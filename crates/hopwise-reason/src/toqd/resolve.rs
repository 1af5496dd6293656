//! Resolving one node of `toqd`'s graph: its predecessors' answers go in place of `#k`; the gate,
//! when one is configured, asks whether the model knows; the question's passages are read; a
//! search of the node's own follows when they leave it unsure; a child graph when that does too;
//! else the leading reading is kept as a best-effort answer.

use hopwise_core::{Decision, GenParams, Passage};

use super::reading::{self, Expect, Form, Reading, Settled, ANSWER_TOKENS};
use super::{NodeGate, QuestionState, Toqd};
use crate::ctx::{take_one, Ctx};
use crate::details::{
    self,
    toqd::{GateDecision, GateRecord, ToqdNode},
};
use crate::error::Result;
use crate::executor::{ChildGraph, NodeOutcome, NodeTask, Phase};
use crate::protocol::plan::{self, AnswerType, FinalOp};
use crate::{gate, uncertainty};

/// Word-set Jaccard with the main question at or above which a node asks the question itself: its
/// reading of the question's passages is then the question's own.
const RESTATES_QUESTION: f64 = 0.8;

impl Toqd {
    /// Resolves one node visit. A degrading error leaves the node unresolved with an empty answer
    /// and a note; a fatal one is kept for the question to return.
    pub(super) async fn resolve(
        &self,
        ctx: &Ctx,
        main_question: &str,
        task: NodeTask,
        state: &QuestionState,
    ) -> NodeOutcome {
        match self.try_resolve(ctx, main_question, &task, state).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_fatal() => {
                state.fatal.keep(e);
                NodeOutcome::Answered { question: task.question, answer: String::new() }
            }
            Err(e) => {
                ctx.rec().best_effort(format!("node {}: {e}", task.id));
                ctx.rec().update_node(&task.id, |n| {
                    n.decision = Decision::Unresolved;
                    n.best_effort = true;
                });
                let question = ctx.rec().node(&task.id).and_then(|n| n.rewritten).unwrap_or(task.question);
                NodeOutcome::Answered { question, answer: String::new() }
            }
        }
    }

    async fn try_resolve(
        &self,
        ctx: &Ctx,
        main_question: &str,
        task: &NodeTask,
        state: &QuestionState,
    ) -> Result<NodeOutcome> {
        let id = task.id.as_str();
        if task.phase == Phase::Aggregate {
            return self.aggregate(ctx, task, state).await;
        }
        let expect = expectation(id, state);
        let question = filled(ctx, task, state);

        if let Some(known) = self.gate(ctx, id, &question, expect).await? {
            return Ok(settle(ctx, id, state, Decision::Known, question, known));
        }

        let mut best: Option<Reading> = None;
        let sampling = self.sampling(ctx);
        if !state.evidence.is_empty() || !self.with_retrieval {
            let shared = state.evidence.clone();
            ctx.rec().update_node(id, |n| n.passages = shared);
            let reuse = state
                .question_reading
                .as_ref()
                .filter(|_| uncertainty::jaccard(&question, main_question) >= RESTATES_QUESTION);
            let reading = match reuse {
                Some(reading) => {
                    ctx.rec().note(format!(
                        "node {id}: asks the question itself; its reading of the question's passages is the question's"
                    ));
                    reading.clone()
                }
                None => {
                    let prompt = reading::reading_prompt(ctx, &question, &state.evidence, expect)?;
                    reading::sample_reading(ctx, id, "read", prompt, &question, expect, &sampling).await?
                }
            };
            if let Some(settled) = reading.accept(ctx, id, self.opts.min_confidence) {
                let decision = if self.with_retrieval { Decision::Retrieved } else { Decision::Known };
                return Ok(settle(ctx, id, state, decision, question, settled));
            }
            best = Some(reading);
        }

        // A search of the node's own: always when the question's search found nothing, else
        // within `max_node_searches`.
        let may_search = self.with_retrieval
            && (state.evidence.is_empty() || take_one(&state.node_searches, self.opts.max_node_searches));
        if may_search {
            let passages: Vec<Passage> = ctx.retrieve(Some(id), &question, ctx.k()).await?;
            let found = passages.clone();
            ctx.rec().update_node(id, |n| {
                for p in found {
                    if !n.passages.iter().any(|held| held.id == p.id) {
                        n.passages.push(p);
                    }
                }
            });
            let prompt = reading::reading_prompt(ctx, &question, &passages, expect)?;
            let reading =
                reading::sample_reading(ctx, id, "read_own_search", prompt, &question, expect, &sampling).await?;
            if let Some(settled) = reading.accept(ctx, id, self.opts.min_confidence) {
                return Ok(settle(ctx, id, state, Decision::Retrieved, question, settled));
            }
            if best.as_ref().is_none_or(|b| b.confidence.unwrap_or(0.0) <= reading.confidence.unwrap_or(0.0)) {
                best = Some(reading);
            }
        } else if self.with_retrieval {
            ctx.rec().note(format!("node {id}: max_node_searches reached"));
        }

        if let Some(child) = self.expand(ctx, task, &question, state).await? {
            ctx.rec().update_node(id, |n| n.decision = Decision::Decomposed);
            return Ok(NodeOutcome::Expand(child));
        }

        let answer = best.and_then(|b| b.best_effort()).map(|s| s.answer).unwrap_or_default();
        state.set_answer(id, &answer);
        ctx.rec().update_node(id, |n| {
            n.decision = Decision::Unresolved;
            n.best_effort = true;
            n.answer = Some(answer.clone());
        });
        Ok(NodeOutcome::Answered { question, answer })
    }

    /// The gate's verdict: `Some` when the model knows the answer closed-book.
    async fn gate(&self, ctx: &Ctx, id: &str, question: &str, expect: Expect) -> Result<Option<Settled>> {
        match self.opts.gate {
            NodeGate::None => Ok(None),
            NodeGate::No => {
                let format = reading::answer_format(ctx, expect)?;
                let prompt = ctx.render("toqd_self_verify", &[("question", question), ("answer_format", &format)])?;
                let params =
                    GenParams { max_tokens: ctx.params().max_tokens.min(ANSWER_TOKENS), ..ctx.params().clone() };
                let reply = ctx.chat("self_verify", Some(id), prompt, params).await?;
                Ok(reading::read_answer(reply.text(), question, expect, &ctx.hedges(self.opts.hedges))
                    .map(|answer| Settled { answer, confidence: None }))
            }
            NodeGate::Uncertainty => {
                let Some(gate) = &self.gate else { return Ok(None) };
                let format = reading::answer_format(ctx, expect)?;
                let prompt = ctx.render("toqd_recall", &[("question", question), ("answer_format", &format)])?;
                let replies =
                    gate::sample(ctx, id, "uncertainty_samples", &prompt, gate, ANSWER_TOKENS, |t| t.to_string())
                        .await?;
                let hedges = ctx.hedges(self.opts.hedges);
                let readings: Vec<Option<String>> =
                    replies.iter().map(|r| reading::read_answer(r, question, expect, &hedges)).collect();
                let estimate = gate::estimate(ctx, id, gate, None, &reading::comparable(&readings)).await;
                let vote = reading::vote(&readings);
                let retrieve = estimate.uncertainty > gate.threshold || vote.answer.is_empty() || vote.confidence < 0.5;
                let detail = GateRecord {
                    gate: self.opts.gate,
                    samples: replies,
                    uncertainty: estimate.uncertainty,
                    estimator: gate.estimator,
                    threshold: gate.threshold,
                    similarity_source: estimate.source.to_string(),
                    vote: vote.table.clone(),
                    decision: if retrieve { GateDecision::Retrieve } else { GateDecision::Known },
                };
                ctx.rec().update_node(id, |n| details::update(n, |d: &mut ToqdNode| d.gate = Some(detail)));
                Ok((!retrieve).then_some(Settled { answer: vote.answer, confidence: Some(vote.confidence) }))
            }
        }
    }

    /// A child graph for a node nothing settled: the typed plan of its question, within
    /// `max_expansions`, the budget's `r_max` and `max_depth`. `None` when none is allowed or the
    /// plan would only repeat the node.
    async fn expand(
        &self,
        ctx: &Ctx,
        task: &NodeTask,
        question: &str,
        state: &QuestionState,
    ) -> Result<Option<ChildGraph>> {
        if self.opts.max_expansions == 0 {
            return Ok(None);
        }
        let id = task.id.as_str();
        if task.depth >= ctx.budget().max_depth
            || !take_one(&state.expansions, self.opts.max_expansions)
            || !ctx.try_expand()
        {
            ctx.rec().note(format!("node {id}: no decomposition left (max_expansions, r_max or max_depth)"));
            return Ok(None);
        }
        let child = self.plan_for(ctx, id, question).await?;
        let repeats = child.steps.len() == 1
            && hopwise_core::text::normalize_answer(&child.steps[0].question)
                == hopwise_core::text::normalize_answer(question);
        if repeats {
            return Ok(None);
        }
        let edges =
            child.needs.iter().enumerate().flat_map(|(i, needs)| needs.iter().map(move |&j| (j + 1, i + 1))).collect();
        state.set_child_types(id, child.steps.iter().map(|s| s.answer_type).collect());
        Ok(Some(ChildGraph { questions: child.steps.into_iter().map(|s| s.question).collect(), edges }))
    }

    /// A decomposed node's answer from its children's answers.
    async fn aggregate(&self, ctx: &Ctx, task: &NodeTask, state: &QuestionState) -> Result<NodeOutcome> {
        let id = task.id.as_str();
        let question = ctx.rec().node(id).and_then(|n| n.rewritten).unwrap_or_else(|| task.question.clone());
        let expect = expectation(id, state);
        let format = reading::answer_format(ctx, expect)?;
        let prompt = ctx.render(
            "toqd_aggregate",
            &[("dialog", &ctx.format_dialog(&task.dialog)), ("question", &question), ("answer_format", &format)],
        )?;
        let params = GenParams { max_tokens: ctx.params().max_tokens.min(ANSWER_TOKENS), ..ctx.params().clone() };
        let reply = ctx.chat("aggregate", Some(id), prompt, params).await?;
        let answer =
            reading::read_answer(reply.text(), &question, expect, &ctx.hedges(self.opts.hedges)).unwrap_or_default();
        state.set_answer(id, &answer);
        ctx.rec().update_node(id, |n| n.answer = Some(answer.clone()));
        Ok(NodeOutcome::Answered { question, answer })
    }
}

/// What node `id`'s readings must be: its step's type; written as a value code reads when the
/// step is an option of `compare` (yes/no steps always are).
fn expectation(id: &str, state: &QuestionState) -> Expect {
    let Some(step) = top_level_step(id) else {
        return Expect::text(state.child_type(id).unwrap_or(AnswerType::Other));
    };
    let Some(planned) = state.plan.steps.get(step) else { return Expect::text(AnswerType::Other) };
    let compared = matches!(state.plan.final_op, FinalOp::Compare { .. }) && state.plan.option_steps().contains(&step);
    let form = if compared && planned.answer_type.is_comparable() { Form::Value } else { Form::Text };
    Expect { answer_type: planned.answer_type, form, may_echo: false }
}

/// The 0-based plan step of a top-level node id (`"1"` is step 0); `None` for a child node.
pub(super) fn top_level_step(id: &str) -> Option<usize> {
    id.parse::<usize>().ok().and_then(|n| n.checked_sub(1))
}

/// The node's question with each `#k` replaced by the answer of its sibling `k` (a predecessor).
/// A reference whose node has no answer gets that node's question in brackets, so the node still
/// says what it is about; the filled question is recorded as the node's rewrite.
fn filled(ctx: &Ctx, task: &NodeTask, state: &QuestionState) -> String {
    if plan::references(&task.question).is_empty() {
        return task.question.clone();
    }
    let prefix = task.id.rsplit_once('.').map(|(parent, _)| format!("{parent}.")).unwrap_or_default();
    let question = plan::substitute(&task.question, |k| {
        let sibling = format!("{prefix}{k}");
        state.answer_of(&sibling).or_else(|| ctx.rec().node(&sibling).map(|n| format!("[{}]", n.question)))
    });
    ctx.rec().update_node(&task.id, |n| n.rewritten = Some(question.clone()));
    question
}

/// Marks node `id` answered and returns the executor's outcome.
fn settle(
    ctx: &Ctx,
    id: &str,
    state: &QuestionState,
    decision: Decision,
    question: String,
    settled: Settled,
) -> NodeOutcome {
    let Settled { answer, confidence } = settled;
    state.set_answer(id, &answer);
    ctx.rec().update_node(id, |n| {
        n.decision = decision;
        n.answer = Some(answer.clone());
        if let Some(c) = confidence {
            details::update(n, |d: &mut ToqdNode| d.confidence = Some(c));
        }
    });
    NodeOutcome::Answered { question, answer }
}
