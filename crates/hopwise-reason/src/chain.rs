//! The chain-shaped trace that the baselines and the peers record: a node per step, and the sink
//! `Q` with the final answer.

use hopwise_core::trace::SINK;
use hopwise_core::{Decision, NodeTrace, Passage};

use crate::ctx::Ctx;
use crate::details::{self, baseline::BaselineNode};

/// A node for one step of a chain.
pub(crate) fn step_node(id: &str, question: &str, parents: Vec<String>) -> NodeTrace {
    NodeTrace { id: id.to_string(), question: question.to_string(), parents, ..Default::default() }
}

/// Records the sink node `Q` with the final answer.
pub(crate) fn record_sink(
    ctx: &Ctx,
    question: &str,
    answer: &str,
    decision: Decision,
    parents: Vec<String>,
    passages: Vec<Passage>,
    detail: Option<BaselineNode>,
) {
    for parent in &parents {
        ctx.rec().add_edge(parent, SINK);
    }
    ctx.rec().upsert_node(NodeTrace {
        id: SINK.to_string(),
        question: question.to_string(),
        parents,
        decision,
        answer: Some(answer.to_string()),
        passages,
        extra: detail.map(|d| details::to_extra(&d)).unwrap_or_default(),
        ..Default::default()
    });
}
