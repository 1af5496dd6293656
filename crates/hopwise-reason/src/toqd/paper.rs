//! `toqd-paper` and `toqd-noir-paper`: ToQD as the paper's Algorithm 1 and 2 run it, with none of
//! `toqd`'s additions. One low-temperature reply per step:
//! decompose (a numbered list) → critique (the kept items) → construct (`1 -> 2`, `2 -> Q` edges);
//! then, in topological order with independent nodes in parallel, each node is rewritten with its
//! predecessors' answers (internal nodes), self-verifies closed-book (`NO!` or an answer),
//! retrieves with its rewritten question on `NO!`, self-verifies over the documents, and on a
//! second `NO!` is decomposed into a child graph the same way (within `r_max` and `max_depth`;
//! past them it gives its best answer from the documents); a decomposed node answers from its
//! children. A summary over the question/answer dialog gives the answer. Without retrieval a node
//! that says `NO!` is decomposed directly.
//!
//! What it keeps of the product: the repairs of malformed model output (lists, edges) and the
//! typed trace. The switches are the paper's ablations: `critique`, `construct`, `rewrite`,
//! `self_verify` (off: every node retrieves); `hedges` (off, as in the paper) would also read the
//! templates' `unanswered_phrases` as `NO!`.

use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::{grammars, Decision, GenParams, NodeTrace, Passage, Repair};

use super::graph::{self, Fatal, TraceObserver};
use super::options::PaperOptions;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::executor::{ChildGraph, NodeOutcome, NodeTask, Phase};
use crate::protocol::answer::{answer_with_reason, short_answer};
use crate::protocol::{self as parse, GraphNode, Topology};
use crate::strategy::api::{Answer, Strategy};
use crate::uncertainty;

/// Output caps per step, so a model that runs on cannot stall a node.
const LIST_TOKENS: u32 = 200;
const ANSWER_TOKENS: u32 = 64;
const REWRITE_TOKENS: u32 = 96;
const SUMMARY_TOKENS: u32 = 200;
/// Sub-questions longer than this (in words) are run-on output, not questions.
const MAX_SUBQUESTION_WORDS: usize = 40;
/// Word-set Jaccard at or above which a sub-question restates the question being decomposed, and
/// (higher, since siblings differ in few words) an earlier sub-question.
const RESTATEMENT_JACCARD: f64 = 0.8;
const SIBLING_RESTATEMENT_JACCARD: f64 = 0.9;

pub struct ToqdPaper {
    opts: PaperOptions,
    with_retrieval: bool,
}

impl ToqdPaper {
    pub fn new(opts: PaperOptions, with_retrieval: bool) -> Result<Self> {
        opts.validate(if with_retrieval { "toqd-paper" } else { "toqd-noir-paper" })?;
        Ok(Self { opts, with_retrieval })
    }

    fn params(&self, ctx: &Ctx, max_tokens: u32, grammar: Option<String>) -> GenParams {
        let mut p = ctx.params().clone();
        p.max_tokens = p.max_tokens.min(max_tokens);
        if self.opts.grammar {
            p.grammar = grammar;
        }
        p
    }
}

/// Sub-questions and their topology.
struct Plan {
    questions: Vec<String>,
    topology: Topology,
}

impl Plan {
    /// For each sub-question (0-based), the sub-questions (0-based) with an edge into it.
    fn preds(&self) -> Vec<Vec<usize>> {
        (1..=self.questions.len()).map(|i| self.topology.parents(i).iter().map(|p| p - 1).collect()).collect()
    }

    fn child_graph(&self) -> ChildGraph {
        let edges = self
            .topology
            .edges
            .iter()
            .filter_map(|(a, b)| match (a, b) {
                (GraphNode::Sub(a), GraphNode::Sub(b)) => Some((*a, *b)),
                _ => None,
            })
            .collect();
        ChildGraph { questions: self.questions.clone(), edges }
    }
}

fn numbered(items: &[String]) -> String {
    items.iter().enumerate().map(|(i, q)| format!("{}. {q}", i + 1)).collect::<Vec<_>>().join("\n")
}

fn repair(ctx: &Ctx, stage: &str, rule: &str, detail: String) {
    ctx.rec().repair(Repair { stage: stage.to_string(), rule: rule.to_string(), detail });
}

/// The model's answer in a reply that may be `NO!` (or, with `hedges`, a phrase meaning it) instead.
fn answer_or_no(reply: &str, hedges: &parse::Hedges) -> Option<String> {
    if hedges.is_unanswered(reply) {
        return None;
    }
    Some(short_answer(reply)).filter(|a| !a.is_empty())
}

impl ToqdPaper {
    /// Decompose → critique → construct. `decompose_prompt` is the rendered decomposition prompt
    /// (the question's, or a node's with what it has found). `None` when nothing could be read.
    async fn plan(
        &self,
        ctx: &Ctx,
        node: Option<&str>,
        question: &str,
        decompose_prompt: String,
    ) -> Result<Option<Plan>> {
        let stage = node.map_or_else(|| "decompose".to_string(), |n| format!("decompose:{n}"));
        let list_grammar = Some(grammars::NUMBERED_QUESTIONS.to_string());
        let reply =
            ctx.chat("decompose", node, decompose_prompt, self.params(ctx, LIST_TOKENS, list_grammar.clone())).await?;
        let mut listed = parse::parse_numbered_list(reply.text());
        let cut_off = reply.choices.first().and_then(|c| c.finish_reason.as_deref()) == Some("length");
        if cut_off && listed.last().is_some_and(|last| !last.trim_end().ends_with('?')) {
            let last = listed.pop().unwrap_or_default();
            repair(
                ctx,
                &stage,
                "drop_cut_off_subquestion",
                format!("`{last}` (the reply ran out of tokens inside it)"),
            );
        }
        let mut questions = self.kept_items(ctx, &stage, question, listed);
        if questions.is_empty() {
            repair(ctx, &stage, "no_subquestions", "the decomposition listed nothing".into());
            return Ok(None);
        }
        if questions.len() > self.opts.max_subquestions {
            repair(
                ctx,
                &stage,
                "truncate_subquestions",
                format!("kept the first {} of {}", self.opts.max_subquestions, questions.len()),
            );
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
                    self.params(ctx, LIST_TOKENS, list_grammar),
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
                    self.params(ctx, LIST_TOKENS, Some(grammars::forward_edges_for(n))),
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

    /// The listed items that are questions at all: a run-on item is cut at its first `?`, one still
    /// too long to be a question is dropped, and so is one that restates the question being
    /// decomposed or an earlier item (the first is kept when all of them do).
    fn kept_items(&self, ctx: &Ctx, stage: &str, question: &str, listed: Vec<String>) -> Vec<String> {
        let mut kept: Vec<String> = Vec::new();
        let mut restated = Vec::new();
        for item in listed {
            let first = item.find('?').map_or(item.clone(), |i| item[..=i].to_string());
            if hopwise_core::text::word_count(&first) as usize > MAX_SUBQUESTION_WORDS {
                repair(ctx, stage, "drop_overlong_subquestion", hopwise_core::text::truncate_words(&item, 12));
                continue;
            }
            let what = if uncertainty::jaccard(&first, question) >= RESTATEMENT_JACCARD {
                Some("the question itself")
            } else if kept.iter().any(|k| uncertainty::jaccard(&first, k) >= SIBLING_RESTATEMENT_JACCARD) {
                Some("an earlier sub-question")
            } else {
                None
            };
            match what {
                Some(what) => restated.push((first, what)),
                None => kept.push(first),
            }
        }
        if kept.is_empty() && !restated.is_empty() {
            kept.push(restated.remove(0).0);
        }
        for (item, what) in restated {
            let detail = format!("{} (restates {what})", hopwise_core::text::truncate_words(&item, 12));
            repair(ctx, stage, "drop_restated_subquestion", detail);
        }
        kept
    }

    /// Resolves one node visit; a fatal error is kept for the question, any other leaves the node
    /// unresolved with an empty answer.
    async fn resolve(&self, ctx: &Ctx, main_question: &str, task: NodeTask, fatal: &Fatal) -> NodeOutcome {
        match self.try_resolve(ctx, main_question, &task).await {
            Ok(outcome) => outcome,
            Err(e) => {
                if e.is_fatal() {
                    fatal.keep(e);
                } else {
                    ctx.rec().best_effort(format!("node {}: {e}", task.id));
                    ctx.rec().update_node(&task.id, |n| {
                        n.decision = Decision::Unresolved;
                        n.best_effort = true;
                    });
                }
                NodeOutcome::Answered { question: task.question, answer: String::new() }
            }
        }
    }

    async fn try_resolve(&self, ctx: &Ctx, main_question: &str, task: &NodeTask) -> Result<NodeOutcome> {
        let id = task.id.as_str();
        if task.phase == Phase::Aggregate {
            let question = ctx.rec().node(id).and_then(|n| n.rewritten).unwrap_or_else(|| task.question.clone());
            let format = ctx.render("toqd_format_short", &[])?;
            let reply = ctx
                .complete_with(
                    "aggregate",
                    Some(id),
                    "toqd_aggregate",
                    &[
                        ("dialog", &ctx.format_dialog(&task.dialog)),
                        ("question", &question),
                        ("answer_format", &format),
                    ],
                    self.params(ctx, ANSWER_TOKENS, None),
                )
                .await?;
            let answer = answer_or_no(&reply, &ctx.hedges(self.opts.hedges)).unwrap_or_default();
            ctx.rec().update_node(id, |n| n.answer = Some(answer.clone()));
            return Ok(NodeOutcome::Answered { question, answer });
        }
        let question = self.rewritten(ctx, main_question, task).await?;
        let format = ctx.render("toqd_format_short", &[])?;
        let answered = |decision: Decision, answer: String, question: String| {
            ctx.rec().update_node(id, |n| {
                n.decision = decision;
                n.answer = Some(answer.clone());
            });
            NodeOutcome::Answered { question, answer }
        };

        if self.opts.self_verify {
            let reply = ctx
                .complete_with(
                    "self_verify",
                    Some(id),
                    "toqd_self_verify",
                    &[("question", &question), ("answer_format", &format)],
                    self.params(ctx, ANSWER_TOKENS, None),
                )
                .await?;
            if let Some(answer) = answer_or_no(&reply, &ctx.hedges(self.opts.hedges)) {
                return Ok(answered(Decision::Known, answer, question));
            }
        }
        let mut passages: Vec<Passage> = Vec::new();
        if self.with_retrieval {
            passages = ctx.retrieve(Some(id), &question, ctx.k()).await?;
            let found = passages.clone();
            ctx.rec().update_node(id, |n| n.passages = found);
            let reply = ctx
                .complete_with(
                    "self_verify_context",
                    Some(id),
                    "toqd_self_verify_context",
                    &[
                        ("passages", &ctx.format_passages(&passages)),
                        ("question", &question),
                        ("answer_format", &format),
                    ],
                    self.params(ctx, ANSWER_TOKENS, None),
                )
                .await?;
            if let Some(answer) = answer_or_no(&reply, &ctx.hedges(self.opts.hedges)) {
                return Ok(answered(Decision::Retrieved, answer, question));
            }
        }

        let deep = task.depth >= ctx.budget().max_depth;
        if !deep && ctx.try_expand() {
            let prompt = if task.has_parents && !task.dialog.is_empty() {
                ctx.render(
                    "toqd_decompose_internal",
                    &[
                        ("dialog", &ctx.format_dialog(&task.dialog)),
                        ("question", &question),
                        ("passages", &ctx.format_passages(&passages)),
                    ],
                )?
            } else {
                ctx.render(
                    "toqd_decompose_leaf",
                    &[("question", &question), ("passages", &ctx.format_passages(&passages))],
                )?
            };
            if let Some(plan) = self.plan(ctx, Some(id), &question, prompt).await? {
                let repeats = plan.questions.len() == 1
                    && hopwise_core::text::normalize_answer(&plan.questions[0])
                        == hopwise_core::text::normalize_answer(&question);
                if !repeats {
                    ctx.rec().update_node(id, |n| n.decision = Decision::Decomposed);
                    return Ok(NodeOutcome::Expand(plan.child_graph()));
                }
            }
        } else {
            ctx.rec().note(format!(
                "node {id}: {} reached; answering best-effort",
                if deep { "max_depth" } else { "r_max" }
            ));
        }
        let reply = ctx
            .complete_with(
                "best_effort",
                Some(id),
                "toqd_best_effort",
                &[("passages", &ctx.format_passages(&passages)), ("question", &question)],
                self.params(ctx, ANSWER_TOKENS, None),
            )
            .await?;
        let answer = answer_or_no(&reply, &ctx.hedges(self.opts.hedges)).unwrap_or_default();
        ctx.rec().update_node(id, |n| {
            n.decision = Decision::Unresolved;
            n.best_effort = true;
            n.answer = Some(answer.clone());
        });
        Ok(NodeOutcome::Answered { question, answer })
    }

    /// An internal node rewritten with its predecessors' answers (the paper's Rewrite); an empty
    /// reply leaves the question with those answers attached.
    async fn rewritten(&self, ctx: &Ctx, main_question: &str, task: &NodeTask) -> Result<String> {
        if !(self.opts.rewrite && task.has_parents && !task.dialog.is_empty()) {
            return Ok(task.question.clone());
        }
        let reply = ctx
            .complete_with(
                "rewrite",
                Some(&task.id),
                "toqd_rewrite",
                &[
                    ("dialog", &ctx.format_dialog(&task.dialog)),
                    ("question", &task.question),
                    ("main_question", main_question),
                ],
                self.params(ctx, REWRITE_TOKENS, None),
            )
            .await?;
        let mut rewritten = short_answer(&reply);
        if rewritten.is_empty() || hopwise_core::text::word_count(&rewritten) as usize > MAX_SUBQUESTION_WORDS {
            let known: Vec<&str> = task.dialog.iter().map(|(_, a)| a.as_str()).filter(|a| !a.is_empty()).collect();
            rewritten = format!("{} ({})", task.question, known.join("; "));
            repair(ctx, &format!("rewrite:{}", task.id), "rewrite_unusable", format!("asked `{rewritten}`"));
        }
        ctx.rec().update_node(&task.id, |n| n.rewritten = Some(rewritten.clone()));
        Ok(rewritten)
    }

    /// The summary over the dialog; the last node's answer when it gives none.
    async fn summarise(&self, ctx: &Ctx, question: &str, dialog: &[(String, String)]) -> Result<Answer> {
        let last = dialog.last().map(|(_, a)| a.clone()).unwrap_or_default();
        let format = ctx.render("toqd_format_short", &[])?;
        let reply = match ctx
            .complete_with(
                "summary",
                Some(SINK),
                "toqd_summary",
                &[("dialog", &ctx.format_dialog(dialog)), ("question", question), ("answer_format", &format)],
                self.params(ctx, SUMMARY_TOKENS, None),
            )
            .await
        {
            Ok(reply) => reply,
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                ctx.rec().best_effort(format!("summary failed: {e}; using the last node's answer"));
                return Ok(super::Toqd::fall_back(ctx, last));
            }
        };
        let (answer, rationale) = answer_with_reason(&reply);
        if ctx.hedges(self.opts.hedges).is_unanswered(&answer) || answer.is_empty() {
            repair(
                ctx,
                "summary",
                "summary_unanswered",
                format!("the summary gave no answer; using the last node's answer `{last}`"),
            );
            return Ok(super::Toqd::fall_back(ctx, last));
        }
        ctx.rec().update_node(SINK, |n| {
            n.decision = Decision::Known;
            n.answer = Some(answer.clone());
        });
        Ok(Answer { text: answer, rationale })
    }
}

#[async_trait]
impl Strategy for ToqdPaper {
    fn name(&self) -> &str {
        if self.with_retrieval {
            "toqd-paper"
        } else {
            "toqd-noir-paper"
        }
    }

    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        ctx.rec().upsert_node(NodeTrace { id: SINK.to_string(), question: question.to_string(), ..Default::default() });
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
        let mut dag = graph::top_level(ctx, &plan.questions, &plan.preds());
        let fatal = Fatal::default();
        let mut observer = TraceObserver { ctx };
        dag.execute(|task| self.resolve(ctx, question, task, &fatal), &mut observer).await;
        if let Some(e) = fatal.take() {
            return Err(e);
        }
        let dialog: Vec<(String, String)> =
            dag.answers().into_iter().filter(|(_, _, a)| !a.is_empty()).map(|(_, q, a)| (q, a)).collect();
        self.summarise(ctx, question, &dialog).await
    }
}
