//! ToQD — Topology of Question Decomposition.
//!
//! Plan globally (decompose → critique → construct a topology graph), then resolve the graph in
//! topological order with the [`executor`](crate::executor): each node is rewritten with its
//! predecessors' answers, asks the model whether it already knows (`NO!` if not), retrieves only
//! then, and is decomposed into a child graph when even the passages do not answer it. A summary
//! over every node's question/answer pair gives the final answer.

use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::{grammars, Decision, GenParams, NodeTrace, Passage, Repair};
use serde::Deserialize;

use crate::ctx::{format_dialog, format_passages, Ctx};
use crate::error::{ReasonError, Result};
use crate::executor::{ChildGraph, Dag, GraphObserver, NodeOutcome, NodeTask, Phase};
use crate::protocol::answer;
use crate::protocol::{self as parse, GraphNode, Topology};
use crate::strategy::{Answer, Strategy};
use crate::uncertainty;

/// ToQD switches. The four `false`-able steps are the paper's ablations.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToqdOptions {
    /// Filter the sub-questions with the critique step.
    pub critique: bool,
    /// Ask the model for the topology; without it sub-questions form a chain in list order.
    pub construct: bool,
    /// Ask the model whether it knows a node's answer before retrieving; without it every node
    /// retrieves.
    pub self_verify: bool,
    /// Rewrite internal nodes with their predecessors' answers.
    pub rewrite: bool,
    /// Constrain list and edge outputs with a grammar where the backend supports it.
    pub grammar: bool,
    /// Most sub-questions kept from one decomposition.
    pub max_subquestions: usize,
}

impl Default for ToqdOptions {
    fn default() -> Self {
        Self { critique: true, construct: true, self_verify: true, rewrite: true, grammar: true, max_subquestions: 6 }
    }
}

pub struct Toqd {
    opts: ToqdOptions,
    with_retrieval: bool,
}

impl Toqd {
    pub fn new(opts: ToqdOptions, with_retrieval: bool) -> Self {
        Self { opts, with_retrieval }
    }
}

/// Output caps per step, so a small model that runs on cannot stall a node for minutes.
const LIST_TOKENS: u32 = 200;
const ANSWER_TOKENS: u32 = 64;
const REWRITE_TOKENS: u32 = 96;
const SUMMARY_TOKENS: u32 = 200;
/// Sub-questions longer than this (in words) are run-on output, not questions.
const MAX_SUBQUESTION_WORDS: usize = 40;

fn capped(ctx: &Ctx, max_tokens: u32) -> GenParams {
    let mut p = ctx.params().clone();
    p.max_tokens = p.max_tokens.min(max_tokens);
    p
}

/// True when `reply` gives no usable answer to `question`: the sentinel, a hedge, or a bare yes/no
/// to a question that is not a yes/no question.
fn unanswered(question: &str, reply: &str) -> bool {
    if parse::is_unanswered(reply) {
        return true;
    }
    let answer = hopwise_core::text::normalize_answer(&answer::short_answer(reply));
    matches!(answer.as_str(), "yes" | "no") && !parse::is_yes_no_question(question)
}

/// Cuts run-on items to their first question and drops those still too long to be a question.
fn tidy_subquestions(items: Vec<String>, stage: &str, ctx: &Ctx) -> Vec<String> {
    items
        .into_iter()
        .filter_map(|item| {
            let first = match item.find('?') {
                Some(i) => item[..=i].to_string(),
                None => item.clone(),
            };
            if hopwise_core::text::word_count(&first) as usize > MAX_SUBQUESTION_WORDS {
                ctx.rec().repair(Repair {
                    stage: stage.to_string(),
                    rule: "drop_overlong_subquestion".into(),
                    detail: hopwise_core::text::truncate_words(&item, 12),
                });
                None
            } else {
                Some(first)
            }
        })
        .collect()
}

/// Word-set Jaccard at or above which a sub-question counts as a restatement.
const RESTATEMENT_JACCARD: f64 = 0.8;

/// Drops sub-questions that restate the question being decomposed or an earlier sub-question: each
/// would cost a node (and its verification calls) without narrowing anything. Keeps the first item
/// when all of them are restatements, so a question too simple to split still gets its one node.
fn drop_restatements(items: Vec<String>, question: &str, stage: &str, ctx: &Ctx) -> Vec<String> {
    let mut kept: Vec<String> = Vec::with_capacity(items.len());
    let mut dropped = Vec::new();
    for item in items {
        let restated = if uncertainty::jaccard(&item, question) >= RESTATEMENT_JACCARD {
            Some("the question itself")
        } else if kept.iter().any(|k| uncertainty::jaccard(&item, k) >= RESTATEMENT_JACCARD) {
            Some("an earlier sub-question")
        } else {
            None
        };
        match restated {
            Some(what) => dropped.push((item, what)),
            None => kept.push(item),
        }
    }
    if kept.is_empty() && !dropped.is_empty() {
        kept.push(dropped.remove(0).0);
    }
    for (item, what) in dropped {
        ctx.rec().repair(Repair {
            stage: stage.to_string(),
            rule: "drop_restated_subquestion".into(),
            detail: format!("{} (restates {what})", hopwise_core::text::truncate_words(&item, 12)),
        });
    }
    kept
}

/// A plan: sub-questions and their topology.
struct Plan {
    questions: Vec<String>,
    topology: Topology,
}

impl Toqd {
    fn structured_params(&self, ctx: &Ctx, grammar: &str) -> GenParams {
        let mut p = ctx.params().clone();
        p.max_tokens = p.max_tokens.min(LIST_TOKENS);
        if self.opts.grammar {
            p.grammar = Some(grammar.to_string());
        }
        p
    }

    /// Decompose → critique → construct. `decompose_prompt` is the already-rendered decomposition
    /// prompt (the top-level, leaf or internal variant). Returns None when no sub-question could be
    /// read.
    async fn plan(
        &self,
        ctx: &Ctx,
        node: Option<&str>,
        question: &str,
        decompose_prompt: String,
    ) -> Result<Option<Plan>> {
        let stage = node.map_or_else(|| "decompose".to_string(), |n| format!("decompose:{n}"));
        let reply = ctx
            .chat("decompose", node, decompose_prompt, self.structured_params(ctx, grammars::NUMBERED_QUESTIONS))
            .await?;
        let listed = tidy_subquestions(parse::parse_numbered_list(reply.text()), &stage, ctx);
        let mut questions = drop_restatements(listed, question, &stage, ctx);
        if questions.is_empty() {
            ctx.rec().repair(Repair {
                stage,
                rule: "no_subquestions".into(),
                detail: "the decomposition listed nothing".into(),
            });
            return Ok(None);
        }
        if questions.len() > self.opts.max_subquestions {
            ctx.rec().repair(Repair {
                stage: stage.clone(),
                rule: "truncate_subquestions".into(),
                detail: format!("kept the first {} of {}", self.opts.max_subquestions, questions.len()),
            });
            questions.truncate(self.opts.max_subquestions);
        }

        if self.opts.critique && questions.len() > 1 {
            let listed = numbered(&questions);
            let reply = ctx
                .complete_with(
                    "critique",
                    node,
                    "toqd_critique",
                    &[("question", question), ("subquestions", &listed)],
                    self.structured_params(ctx, grammars::NUMBERED_QUESTIONS),
                )
                .await?;
            let mut repairs = Vec::new();
            let kept = parse::parse_critique(&reply, &questions, &mut repairs);
            repairs.into_iter().for_each(|r| ctx.rec().repair(r));
            questions = kept.into_iter().filter_map(|i| questions.get(i).cloned()).collect();
        }

        let n = questions.len();
        let topology = if self.opts.construct && n > 1 {
            let listed = numbered(&questions);
            let reply = ctx
                .complete_with(
                    "construct",
                    node,
                    "toqd_construct",
                    &[("question", question), ("subquestions", &listed)],
                    self.structured_params(ctx, &grammars::edges_for(n)),
                )
                .await?;
            let stage = node.map_or_else(|| "construct".to_string(), |n| format!("construct:{n}"));
            parse::parse_edges(&reply, n, &stage)
        } else {
            Topology::chain(n)
        };
        topology.repairs.iter().cloned().for_each(|r| ctx.rec().repair(r));
        Ok(Some(Plan { questions, topology }))
    }

    /// Resolves one node visit. A degrading error leaves the node unresolved with a best-effort
    /// answer and a note in the trace; a fatal one is kept in `fatal` for the question to return.
    async fn resolve(
        &self,
        ctx: &Ctx,
        main_question: &str,
        task: NodeTask,
        fatal: &std::sync::Mutex<Option<ReasonError>>,
    ) -> NodeOutcome {
        match self.try_resolve(ctx, main_question, &task).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_fatal() => {
                fatal.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
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

    async fn try_resolve(&self, ctx: &Ctx, main_question: &str, task: &NodeTask) -> Result<NodeOutcome> {
        let id = task.id.as_str();
        if task.phase == Phase::Aggregate {
            let question = ctx.rec().node(id).and_then(|n| n.rewritten).unwrap_or_else(|| task.question.clone());
            let reply = ctx
                .complete_with(
                    "aggregate",
                    Some(id),
                    "toqd_aggregate",
                    &[("dialog", &format_dialog(&task.dialog)), ("question", &question)],
                    capped(ctx, ANSWER_TOKENS),
                )
                .await?;
            let answer = answer::short_answer(&reply);
            ctx.rec().update_node(id, |n| n.answer = Some(answer.clone()));
            return Ok(NodeOutcome::Answered { question, answer });
        }

        // Rewrite internal nodes with what their predecessors found.
        let question = if self.opts.rewrite && task.has_parents && !task.dialog.is_empty() {
            let reply = ctx
                .complete_with(
                    "rewrite",
                    Some(id),
                    "toqd_rewrite",
                    &[
                        ("dialog", &format_dialog(&task.dialog)),
                        ("question", &task.question),
                        ("main_question", main_question),
                    ],
                    capped(ctx, REWRITE_TOKENS),
                )
                .await?;
            let rewritten = answer::short_answer(&reply);
            if rewritten.is_empty() || hopwise_core::text::word_count(&rewritten) as usize > MAX_SUBQUESTION_WORDS {
                task.question.clone()
            } else {
                ctx.rec().update_node(id, |n| n.rewritten = Some(rewritten.clone()));
                rewritten
            }
        } else {
            task.question.clone()
        };

        // Self-verify without context.
        if self.opts.self_verify {
            let reply = ctx
                .complete_with(
                    "self_verify",
                    Some(id),
                    "toqd_self_verify",
                    &[("question", &question)],
                    capped(ctx, ANSWER_TOKENS),
                )
                .await?;
            if !unanswered(&question, &reply) {
                return Ok(record_answer(ctx, id, Decision::Known, question, &reply));
            }
        }

        // Retrieve, then self-verify with context.
        let mut passages: Vec<Passage> = Vec::new();
        if self.with_retrieval {
            passages = ctx.retrieve(Some(id), &question, ctx.k()).await?;
            let ps = passages.clone();
            ctx.rec().update_node(id, |n| n.passages = ps);
            let reply = ctx
                .complete_with(
                    "self_verify_context",
                    Some(id),
                    "toqd_self_verify_context",
                    &[("passages", &format_passages(&passages)), ("question", &question)],
                    capped(ctx, ANSWER_TOKENS),
                )
                .await?;
            if !unanswered(&question, &reply) {
                return Ok(record_answer(ctx, id, Decision::Retrieved, question, &reply));
            }
        }

        // Decompose into a child graph, within the budgets.
        if task.depth < ctx.budget().max_depth && ctx.try_expand() {
            let prompt = if task.has_parents && !task.dialog.is_empty() {
                ctx.render(
                    "toqd_decompose_internal",
                    &[
                        ("dialog", &format_dialog(&task.dialog)),
                        ("question", &question),
                        ("passages", &format_passages(&passages)),
                    ],
                )?
            } else {
                ctx.render(
                    "toqd_decompose_leaf",
                    &[("question", &question), ("passages", &format_passages(&passages))],
                )?
            };
            if let Some(plan) = self.plan(ctx, Some(id), &question, prompt).await? {
                // A "decomposition" that just repeats the node would loop: answer it instead.
                let repeats = plan.questions.len() == 1
                    && hopwise_core::text::normalize_answer(&plan.questions[0])
                        == hopwise_core::text::normalize_answer(&question);
                if !repeats {
                    ctx.rec().update_node(id, |n| n.decision = Decision::Decomposed);
                    return Ok(NodeOutcome::Expand(child_graph(&plan)));
                }
            }
        } else {
            let why = if task.depth >= ctx.budget().max_depth { "max_depth" } else { "r_max" };
            ctx.rec().note(format!("node {id}: {why} reached; answering best-effort"));
        }

        // Best effort: the model must answer from what it has.
        let reply = ctx
            .complete_with(
                "best_effort",
                Some(id),
                "toqd_best_effort",
                &[("passages", &format_passages(&passages)), ("question", &question)],
                capped(ctx, ANSWER_TOKENS),
            )
            .await?;
        // Even forced, a model may still decline: keep no answer rather than the sentinel.
        let answer = if parse::is_unanswered(&reply) { String::new() } else { answer::short_answer(&reply) };
        ctx.rec().update_node(id, |n| {
            n.decision = Decision::Unresolved;
            n.best_effort = true;
            n.answer = Some(answer.clone());
        });
        Ok(NodeOutcome::Answered { question, answer })
    }
}

/// Marks node `id` answered with `reply` and returns the executor's outcome.
fn record_answer(ctx: &Ctx, id: &str, decision: Decision, question: String, reply: &str) -> NodeOutcome {
    let answer = answer::short_answer(reply);
    ctx.rec().update_node(id, |n| {
        n.decision = decision;
        n.answer = Some(answer.clone());
    });
    NodeOutcome::Answered { question, answer }
}

fn numbered(items: &[String]) -> String {
    items.iter().enumerate().map(|(i, q)| format!("{}. {q}", i + 1)).collect::<Vec<_>>().join("\n")
}

fn child_graph(plan: &Plan) -> ChildGraph {
    let edges = plan
        .topology
        .edges
        .iter()
        .filter_map(|(a, b)| match (a, b) {
            (GraphNode::Sub(a), GraphNode::Sub(b)) => Some((*a, *b)),
            _ => None,
        })
        .collect();
    ChildGraph { questions: plan.questions.clone(), edges }
}

/// Mirrors child graphs into the trace as the executor splices them in.
struct TraceObserver<'a> {
    ctx: &'a Ctx,
}

impl GraphObserver for TraceObserver<'_> {
    fn child_added(&mut self, parent: &str, id: &str, question: &str, preds: &[String], depth: u32) {
        let child_preds: Vec<String> = preds.iter().filter(|p| p.starts_with(&format!("{parent}."))).cloned().collect();
        self.ctx.rec().upsert_node(NodeTrace {
            id: id.to_string(),
            question: question.to_string(),
            parents: preds.to_vec(),
            decomposes: Some(parent.to_string()),
            depth,
            ..Default::default()
        });
        for p in &child_preds {
            self.ctx.rec().add_edge(p, id);
        }
        self.ctx.rec().update_node(parent, |n| n.children.push(id.to_string()));
    }
}

#[async_trait]
impl Strategy for Toqd {
    fn name(&self) -> &str {
        if self.with_retrieval {
            "toqd"
        } else {
            "toqd-noir"
        }
    }

    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let prompt = ctx.render("toqd_decompose", &[("question", question)])?;
        let plan = match self.plan(ctx, None, question, prompt).await {
            Ok(Some(plan)) => plan,
            Ok(None) => Plan { questions: vec![question.to_string()], topology: Topology::chain(1) },
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                ctx.rec().best_effort(format!("planning failed: {e}; answering the question as one node"));
                Plan { questions: vec![question.to_string()], topology: Topology::chain(1) }
            }
        };

        // The top-level graph: nodes "1".."n", sink "Q".
        let mut dag = Dag::new();
        for (i, q) in plan.questions.iter().enumerate() {
            let id = (i + 1).to_string();
            let parents: Vec<String> = plan.topology.parents(i + 1).iter().map(|p| p.to_string()).collect();
            ctx.rec().upsert_node(NodeTrace {
                id: id.clone(),
                question: q.clone(),
                parents: parents.clone(),
                ..Default::default()
            });
            dag.add_node(&id, q, parents, 0);
        }
        for (a, b) in &plan.topology.edges {
            ctx.rec().add_edge(&a.to_string(), &b.to_string());
        }

        let mut observer = TraceObserver { ctx };
        let fatal = std::sync::Mutex::new(None);
        dag.execute(|task| self.resolve(ctx, question, task, &fatal), &mut observer).await;
        if let Some(e) = fatal.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }

        let dialog: Vec<(String, String)> =
            dag.answers().into_iter().filter(|(_, _, a)| !a.is_empty()).map(|(_, q, a)| (q, a)).collect();
        let last_answer = dialog.last().map(|(_, a)| a.clone()).unwrap_or_default();
        let summary = ctx
            .complete_with(
                "summary",
                Some(SINK),
                "toqd_summary",
                &[("dialog", &format_dialog(&dialog)), ("question", question)],
                capped(ctx, SUMMARY_TOKENS),
            )
            .await;
        match summary {
            Ok(reply) => {
                let (text, rationale) = answer::answer_with_reason(&reply);
                // A hedge, the sentinel, or a bare "Yes" to "Which band ...?" (small models over-apply the
                // prompt's yes/no rule): the graph's own last answer is then the better final answer.
                if unanswered(question, &text) && !last_answer.is_empty() {
                    ctx.rec().repair(Repair {
                        stage: "summary".into(),
                        rule: "summary_unanswered".into(),
                        detail: format!("summary answered `{text}`; using the last node's answer `{last_answer}`"),
                    });
                    return Ok(Answer { text: last_answer, rationale });
                }
                Ok(Answer { text, rationale })
            }
            Err(e) => {
                ctx.rec().best_effort(format!("summary failed: {e}; using the last node's answer"));
                Ok(Answer { text: last_answer, rationale: None })
            }
        }
    }
}

#[cfg(test)]
mod tests;
