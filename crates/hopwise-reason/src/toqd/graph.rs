//! The topology graph both presets run: its nodes and edges written into the trace, child graphs
//! mirrored as the executor splices them in, and the first fatal error of a node kept for the
//! question to return.

use std::sync::Mutex;

use hopwise_core::trace::SINK;
use hopwise_core::NodeTrace;

use crate::ctx::Ctx;
use crate::error::ReasonError;
use crate::executor::{Dag, GraphObserver};

/// The top-level graph: nodes `"1"..="n"` with `questions[i]`, `preds[i]` the 0-based nodes each
/// needs; nodes that feed nothing feed `Q`. Written into the trace as it is built.
pub(super) fn top_level(ctx: &Ctx, questions: &[String], preds: &[Vec<usize>]) -> Dag {
    let mut dag = Dag::new();
    let id = |i: usize| (i + 1).to_string();
    for (i, question) in questions.iter().enumerate() {
        let parents: Vec<String> = preds.get(i).map(|p| p.iter().map(|&j| id(j)).collect()).unwrap_or_default();
        ctx.rec().upsert_node(NodeTrace {
            id: id(i),
            question: question.clone(),
            parents: parents.clone(),
            ..Default::default()
        });
        for parent in &parents {
            ctx.rec().add_edge(parent, &id(i));
        }
        dag.add_node(&id(i), question, parents, 0);
    }
    let sinks: Vec<String> = (0..questions.len()).filter(|i| !preds.iter().any(|p| p.contains(i))).map(id).collect();
    for sink in &sinks {
        ctx.rec().add_edge(sink, SINK);
    }
    ctx.rec().update_node(SINK, |n| n.parents = sinks);
    dag
}

/// Mirrors child graphs into the trace as the executor splices them in.
pub(super) struct TraceObserver<'a> {
    pub ctx: &'a Ctx,
}

impl GraphObserver for TraceObserver<'_> {
    fn child_added(&mut self, parent: &str, id: &str, question: &str, preds: &[String], depth: u32) {
        let prefix = format!("{parent}.");
        self.ctx.rec().upsert_node(NodeTrace {
            id: id.to_string(),
            question: question.to_string(),
            parents: preds.to_vec(),
            decomposes: Some(parent.to_string()),
            depth,
            ..Default::default()
        });
        for p in preds.iter().filter(|p| p.starts_with(&prefix)) {
            self.ctx.rec().add_edge(p, id);
        }
        self.ctx.rec().update_node(parent, |n| n.children.push(id.to_string()));
    }
}

/// The first fatal error a node ran into; the graph finishes, then the question returns it.
#[derive(Default)]
pub(super) struct Fatal(Mutex<Option<ReasonError>>);

impl Fatal {
    pub fn keep(&self, error: ReasonError) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(error);
    }

    pub fn take(self) -> Option<ReasonError> {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}
