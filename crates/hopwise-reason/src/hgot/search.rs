//! SEARCH (the plan's DAG through the executor), REWRITE and INFER.

use std::collections::BTreeMap;
use std::sync::Mutex;

use hopwise_core::{Decision, NodeTrace, Passage};

use super::{merge_passages, planning, update_detail, Outcome, Run, StepOutcome};

use crate::details::{
    self,
    hgot::{HgotNode, RankedPassage, ThoughtsRecord},
};
use crate::error::Result;
use crate::executor::{Dag, NodeOutcome, NodeTask};

impl Run<'_> {
    /// SEARCH: the plan's steps as a DAG run by the executor (independent steps concurrently);
    /// each step with dependencies is rewritten with their answers, then traversed one layer down.
    pub(super) async fn search(&self, parent: &str, depth: u32, plan: &planning::Plan) -> Result<Vec<StepOutcome>> {
        let rec = &self.ctx.rec();
        let mut dag = Dag::new();
        let mut children = Vec::new();
        for (i, text) in plan.steps.texts.iter().enumerate().map(|(i, t)| (i + 1, t)) {
            let id = Self::child_id(parent, i);
            let preds: Vec<String> = plan.deps.parents(i).into_iter().map(|p| Self::child_id(parent, p)).collect();
            rec.upsert_node(NodeTrace {
                id: id.clone(),
                question: text.clone(),
                parents: preds.clone(),
                decomposes: Some(parent.to_string()),
                depth: depth + 1,
                extra: details::to_extra(&HgotNode { layer: Some(depth + 1), step: Some(i), ..Default::default() }),
                ..Default::default()
            });
            for p in &preds {
                rec.add_edge(p, &id);
            }
            if !plan.deps.has_dependents(i) {
                rec.add_edge(&id, parent);
            }
            dag.add_node(&id, text, preds, depth + 1);
            children.push(id);
        }
        rec.update_node(parent, |n| {
            n.children = children.clone();
            n.decision = Decision::Decomposed;
        });

        let results: Mutex<BTreeMap<String, Result<Outcome>>> = Mutex::new(BTreeMap::new());
        let work = |task: NodeTask| {
            let results = &results;
            async move {
                let question = if task.has_parents && task.dialog.iter().any(|(_, a)| !a.is_empty()) {
                    self.rewrite(&task).await
                } else {
                    task.question.clone()
                };
                let outcome = self.traverse(question.clone(), task.id.clone(), task.depth).await;
                let answer = outcome.as_ref().map(|o| o.answer.clone()).unwrap_or_default();
                if let Ok(mut r) = results.lock() {
                    r.insert(task.id.clone(), outcome);
                }
                NodeOutcome::Answered { question, answer }
            }
        };
        dag.execute(work, &mut ()).await;

        let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut solved = Vec::new();
        for (id, question, _) in dag.answers() {
            match results.remove(&id) {
                Some(Ok(outcome)) => solved.push(StepOutcome { question, outcome }),
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        Ok(solved)
    }

    /// REWRITE: the step made standalone with its dependencies' answers. A failure keeps the step
    /// as written (noted).
    async fn rewrite(&self, task: &NodeTask) -> String {
        // Steps that found no answer have nothing to substitute.
        let answered: Vec<(String, String)> = task.dialog.iter().filter(|(_, a)| !a.is_empty()).cloned().collect();
        let dialog = self.ctx.format_dialog(&answered);
        let reply = self
            .ctx
            .complete("rewrite", Some(&task.id), "hgot_rewrite", &[("dialog", &dialog), ("question", &task.question)])
            .await;
        match reply {
            Ok(reply) => {
                let line = reply.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
                let rewritten = line
                    .strip_prefix("Rewritten question:")
                    .unwrap_or(line)
                    .trim()
                    .trim_matches(|c: char| matches!(c, '"' | '*' | '`'))
                    .trim()
                    .to_string();
                if rewritten.is_empty() {
                    self.ctx.rec().note(format!("node {}: the rewrite was empty; kept the step as written", task.id));
                    return task.question.clone();
                }
                let r = rewritten.clone();
                self.ctx.rec().update_node(&task.id, |n| n.rewritten = Some(r));
                rewritten
            }
            Err(e) => {
                self.ctx.rec().note(format!("node {}: rewrite failed ({e}); kept the step as written", task.id));
                task.question.clone()
            }
        }
    }

    /// INFER: every passage collected under the node, ranked by σ; the top K answer the question.
    pub(super) async fn infer(
        &self,
        question: &str,
        id: &str,
        probe: &Outcome,
        solved: &[StepOutcome],
    ) -> Result<Outcome> {
        let mut pool = merge_passages(
            probe.passages.iter().cloned().chain(solved.iter().flat_map(|s| s.outcome.passages.iter().cloned())),
        );
        // Stable sort: equal σ keeps first-seen order (the node's own passages first).
        pool.sort_by(|a, b| b.sigma.total_cmp(&a.sigma));
        let k = self.hgot.opts.top_k.min(pool.len());
        let findings: Vec<(String, String)> = solved
            .iter()
            .filter(|s| !s.outcome.answer.is_empty())
            .map(|s| (s.question.clone(), s.outcome.answer.clone()))
            .collect();
        let top: Vec<Passage> = pool[..k].iter().map(|s| s.passage.clone()).collect();
        let ranked: Vec<RankedPassage> =
            pool[..k].iter().map(|s| RankedPassage { id: s.passage.id.clone(), sigma: s.sigma }).collect();
        let demos = self.thought_demos(question).await?;
        let prompt = self.ctx.render(
            "hgot_infer",
            &[
                ("demonstrations", &demos),
                ("passages", &self.ctx.format_passages(&top)),
                ("findings", &self.ctx.format_dialog(&findings)),
                ("question", question),
            ],
        )?;
        let thought = self.deliberate("infer", id, question, prompt, &top, false).await?;
        self.update_sigma(id, "infer", &mut pool[..k], &thought.nu_bar, thought.vote.confidence);
        let record = ThoughtsRecord { ranked: Some(ranked), ..thought.to_record(&top) };
        let (answer, confidence, rationale, decision) = if thought.vote.answer.is_empty() {
            self.ctx.rec().note(format!("node {id}: no inferred thought gave an answer; kept the probe's answer"));
            (probe.answer.clone(), probe.confidence, probe.rationale.clone(), Decision::Unresolved)
        } else {
            (thought.vote.answer.clone(), thought.vote.confidence, thought.best_rationale(), Decision::Decomposed)
        };
        let a = answer.clone();
        self.ctx.rec().update_node(id, |n| {
            update_detail(n, |d| d.infer = Some(record));
            n.answer = Some(a);
            n.decision = decision;
        });
        Ok(Outcome { answer, confidence, passages: pool, rationale })
    }
}
