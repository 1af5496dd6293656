//! ToQD — Topology of Question Decomposition.
//!
//! Plan globally (decompose → critique → construct a topology graph), then resolve the graph in
//! topological order with the [`executor`](crate::executor): each node is rewritten with its
//! predecessors' answers, a gate decides whether the model already knows (the paper's `NO!` reply,
//! the disagreement of sampled closed-book answers, or either; [`NodeGate`]), the node retrieves
//! only then, and is decomposed into a child graph when even the passages leave it unanswered
//! (readings of the passages are sampled and voted, and a weak vote counts as unanswered). A summary
//! over every node's question/answer pair gives the final answer, sampled and voted too, so the
//! answer carries its vote share as its confidence.

use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::{grammars, Decision, GenParams, NodeTrace, Passage, Repair};

use crate::ctx::{format_dialog, format_passages, Ctx};
use crate::details::{self, toqd::{SummaryRecord, ToqdNode}};
use both::Both;
use node::Reading;
use crate::error::{ReasonError, Result};
use crate::executor::{ChildGraph, Dag, GraphObserver};
use crate::protocol::answer;
use crate::protocol::{self as parse, GraphNode, Topology};
use crate::strategy::{Answer, Strategy};
use crate::uar::UncertaintyGate;
use crate::uncertainty;

mod answers;
mod both;
mod compare;
mod dates;
mod node;
mod options;

pub use answers::{key_terms, leaf_query, read_node_answer};
pub use compare::{Comparison, Direction};
pub use dates::{Lifespan, PartialDate};
pub use options::{Evidence, NodeGate, ToqdOptions};

/// What the nodes of one question share while its graph runs.
/// The question's readings when they did not settle it, and whether a search followed their lead.
struct Unsure {
    readings: Vec<Option<String>>,
    searched: bool,
}

pub(crate) struct QuestionState {
    /// Passages retrieved with the main question (`evidence = question`); empty otherwise.
    evidence: Vec<Passage>,
    /// Nodes decomposed so far, against `max_expansions`.
    expansions: std::sync::atomic::AtomicU32,
    /// Nodes that searched on their own after the question's passages, against `max_searches`.
    node_searches: std::sync::atomic::AtomicU32,
    /// Most such searches: `max_node_searches`, or one per option node for a comparison.
    max_searches: u32,
    /// The first fatal error, which the question returns once the graph stops.
    fatal: std::sync::Mutex<Option<ReasonError>>,
}

impl QuestionState {
    fn new(evidence: Vec<Passage>, max_searches: u32) -> Self {
        Self {
            evidence,
            expansions: Default::default(),
            node_searches: Default::default(),
            max_searches,
            fatal: Default::default(),
        }
    }

    /// Takes one decomposition from `max`; false when none is left.
    fn try_expand(&self, max: u32) -> bool {
        crate::ctx::take_one(&self.expansions, max)
    }

    /// Takes one search of a node's own: always granted without the question's passages, else one
    /// of `max_searches`; false when none is left.
    fn try_search(&self) -> bool {
        self.evidence.is_empty() || crate::ctx::take_one(&self.node_searches, self.max_searches)
    }
}

pub struct Toqd {
    opts: ToqdOptions,
    with_retrieval: bool,
    /// The sampling gate, when `opts.gate` samples.
    gate: Option<UncertaintyGate>,
}

impl Toqd {
    /// Fails on out-of-range options.
    pub fn new(opts: ToqdOptions, with_retrieval: bool) -> Result<Self> {
        let name = if with_retrieval { "toqd" } else { "toqd-noir" };
        let gate = opts.validate(name)?;
        Ok(Self { opts, with_retrieval, gate })
    }
}

/// Output caps per step, so a small model that runs on cannot stall a node for minutes.
const LIST_TOKENS: u32 = 200;
pub(crate) const ANSWER_TOKENS: u32 = 64;
pub(crate) const REWRITE_TOKENS: u32 = 96;
const SUMMARY_TOKENS: u32 = 200;
/// Sub-questions longer than this (in words) are run-on output, not questions.
pub(crate) const MAX_SUBQUESTION_WORDS: usize = 40;
/// Readings of the question that must agree before they outweigh a graph that left a node to a guess.
const READING_PLURALITY: usize = 2;

pub(crate) fn capped(ctx: &Ctx, max_tokens: u32) -> GenParams {
    let mut p = ctx.params().clone();
    p.max_tokens = p.max_tokens.min(max_tokens);
    p
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

/// The vote share node `id` recorded for its answer, when it recorded one.
fn node_confidence(ctx: &Ctx, id: &str) -> Option<f64> {
    ctx.rec().node(id).and_then(|n| details::read::<ToqdNode>(&n)).and_then(|d| d.confidence)
}

/// The last item of a list the model stopped writing at its token cap (`cut_off`), when it does not
/// end its question: on dev traces 3 of 17 HotpotQA decompositions ran out inside an item, and
/// "Which Canadian rock band released a song called \"Counterparts\" and had a" became a node.
fn cut_off_item(items: &[String], cut_off: bool) -> Option<&str> {
    let last = items.last()?;
    (cut_off && !last.trim_end().ends_with('?')).then_some(last.as_str())
}

/// Word-set Jaccard at or above which a sub-question counts as a restatement of the question.
const RESTATEMENT_JACCARD: f64 = 0.8;
/// Between two sub-questions the bar is higher: siblings often differ in the one word that matters
/// ("the name of the club" and "the nickname of the club"), which still leaves a Jaccard of ~0.87.
const SIBLING_RESTATEMENT_JACCARD: f64 = 0.9;

/// Drops sub-questions that restate the question being decomposed or an earlier sub-question: each
/// would cost a node (and its verification calls) without narrowing anything. Keeps the first item
/// when all of them are restatements, so a question too simple to split still gets its one node.
fn drop_restatements(items: Vec<String>, question: &str, stage: &str, ctx: &Ctx) -> Vec<String> {
    let mut kept: Vec<String> = Vec::with_capacity(items.len());
    let mut dropped = Vec::new();
    for item in items {
        let restated = if uncertainty::jaccard(&item, question) >= RESTATEMENT_JACCARD {
            Some("the question itself")
        } else if kept.iter().any(|k| uncertainty::jaccard(&item, k) >= SIBLING_RESTATEMENT_JACCARD) {
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
pub(crate) struct Plan {
    pub(crate) questions: Vec<String>,
    pub(crate) topology: Topology,
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
    pub(crate) async fn plan(
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
        let mut listed = parse::parse_numbered_list(reply.text());
        let cut_off = reply.choices.first().and_then(|c| c.finish_reason.as_deref()) == Some("length");
        if let Some(last) = cut_off_item(&listed, cut_off) {
            ctx.rec().repair(Repair {
                stage: stage.clone(),
                rule: "drop_cut_off_subquestion".into(),
                detail: format!("`{last}` (the reply ran out of tokens inside it)"),
            });
            listed.pop();
        }
        let listed = tidy_subquestions(listed, &stage, ctx);
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

        if self.opts.critique && questions.len() >= self.opts.critique_min.max(2) {
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
                    self.structured_params(ctx, &grammars::forward_edges_for(n)),
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

}

impl Toqd {
    /// With `evidence = question`, one retrieval with the main question that nodes read before
    /// retrieving on their own; a failed search leaves the nodes to retrieve for themselves.
    async fn question_evidence(&self, ctx: &Ctx, question: &str) -> Result<Vec<Passage>> {
        if !self.with_retrieval || self.opts.evidence != Evidence::Question {
            return Ok(Vec::new());
        }
        match ctx.retrieve(Some(SINK), question, ctx.k()).await {
            Ok(passages) => Ok(passages),
            Err(e) if e.is_fatal() => Err(e),
            Err(e) => {
                ctx.rec().note(format!("search with the question failed: {e}; nodes retrieve on their own"));
                Ok(Vec::new())
            }
        }
    }

    /// Decompose → critique → construct for the question; one node with the question itself when no
    /// sub-question could be read or planning failed (a fatal error still stops the question).
    async fn general_plan(&self, ctx: &Ctx, question: &str) -> Result<Plan> {
        let prompt = ctx.render("toqd_decompose", &[("question", question)])?;
        let whole = || Plan { questions: vec![question.to_string()], topology: Topology::chain(1) };
        Ok(match self.plan(ctx, None, question, prompt).await {
            Ok(Some(plan)) => plan,
            Ok(None) => whole(),
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                ctx.rec().best_effort(format!("planning failed: {e}; answering the question as one node"));
                whole()
            }
        })
    }

    /// Reads the question over its own passages. `Ok(answer)` when the vote is sure enough to answer
    /// without a graph (node Q is then marked retrieved); otherwise the readings, for the final vote.
    /// `open_answer`: the answer is neither yes/no nor one of two options, so readings that agree are
    /// unlikely to agree by chance (`answer_first_agree`). When the readings named something other
    /// than what the question asks (the director for "When (where) was the director of X born?"),
    /// one search with the question and that lead is read the same way; it takes the place of a
    /// node's own search (`max_node_searches`).
    async fn read_question(
        &self,
        ctx: &Ctx,
        question: &str,
        evidence: &[Passage],
        open_answer: bool,
    ) -> Result<std::result::Result<Answer, Unsure>> {
        let reading = self.read_passages(ctx, question, evidence, "read_question").await?;
        if let Some(answer) = self.settle_question(ctx, &reading, open_answer) {
            return Ok(Ok(answer));
        }
        let mut unsure = Unsure { readings: reading.readings, searched: false };
        let Some(lead) = reading.lead.filter(|_| self.with_retrieval && self.opts.max_node_searches > 0) else {
            return Ok(Err(unsure));
        };
        unsure.searched = true;
        let query = node::lead_query(ctx, SINK, question, &lead);
        let passages = match ctx.retrieve(Some(SINK), &query, ctx.k()).await {
            Ok(passages) => passages,
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                ctx.rec().note(format!("search with the lead `{lead}` failed: {e}; planning"));
                return Ok(Err(unsure));
            }
        };
        ctx.rec().update_node(SINK, |n| {
            for p in &passages {
                if !n.passages.iter().any(|held| held.id == p.id) {
                    n.passages.push(p.clone());
                }
            }
        });
        let reading = self.read_passages(ctx, question, &passages, "read_question_lead").await?;
        if let Some(answer) = self.settle_question(ctx, &reading, open_answer) {
            return Ok(Ok(answer));
        }
        unsure.readings.extend(reading.readings);
        Ok(Err(unsure))
    }

    /// The sampled readings of the question over `passages`, recorded on node Q.
    async fn read_passages(&self, ctx: &Ctx, question: &str, passages: &[Passage], purpose: &str) -> Result<Reading> {
        let prompt =
            ctx.render("toqd_self_verify_context", &[("passages", &format_passages(passages)), ("question", question)])?;
        self.sample_reading(ctx, SINK, purpose, &prompt, question).await
    }

    /// The question's answer when `reading` is sure (a share of `answer_first_confidence`, or for an
    /// open answer `answer_first_agree` samples that all agree); node Q is then marked retrieved.
    fn settle_question(&self, ctx: &Ctx, reading: &Reading, open_answer: bool) -> Option<Answer> {
        let settled = reading
            .accept(ctx, SINK, self.opts.answer_first_confidence)
            .or_else(|| open_answer.then(|| reading.accept_unanimous(ctx, SINK, self.opts.answer_first_agree)).flatten())?;
        if let Some(c) = settled.confidence {
            ctx.rec().set_confidence(c);
        }
        ctx.rec().update_node(SINK, |n| {
            n.decision = Decision::Retrieved;
            n.answer = Some(settled.answer.clone());
        });
        Some(Answer { text: settled.answer, rationale: None })
    }

    /// The question's own reading when its samples agree on a plurality of at least
    /// `READING_PLURALITY` (a lone sample is no agreement), recorded as a repair of the summary
    /// step it replaces; `None` otherwise. A question with two options counts each reading as the
    /// option it names, when any names one; since two of five readings of a choice of two (or of
    /// yes and no) agree by chance, such an answer needs a majority of all readings.
    fn reading_over_guesses(
        &self,
        ctx: &Ctx,
        pooled: &[Option<String>],
        open_answer: bool,
        comparison: Option<&Comparison>,
    ) -> Option<Answer> {
        let as_options = comparison.and_then(|c| c.as_options(pooled));
        let vote = answers::vote(as_options.as_deref().unwrap_or(pooled));
        let lead = vote.table.first()?;
        let contested = vote.table.get(1).is_some_and(|next| next.count >= lead.count);
        let needed = if open_answer { READING_PLURALITY } else { pooled.len() / 2 + 1 };
        if lead.count < needed || contested {
            return None;
        }
        ctx.rec().repair(Repair {
            stage: "summary".into(),
            rule: "question_reading_over_guesses".into(),
            detail: format!(
                "the graph left nodes to guesses; {} of {} readings of the question's passages agree on `{}`; no summary",
                lead.count,
                pooled.len(),
                vote.answer
            ),
        });
        ctx.rec().set_confidence(vote.confidence);
        ctx.rec().update_node(SINK, |n| {
            n.decision = Decision::Retrieved;
            n.answer = Some(vote.answer.clone());
        });
        Some(Answer { text: vote.answer, rationale: None })
    }

    /// The final answer from the dialog (and the question's passages, when there are any): `samples` summaries in one request and a vote over their
    /// answers (one greedy summary when `samples` is 1). A yes/no question gets the yes/no form of the
    /// prompt, any other question the form that asks for the thing itself, so a small model does not
    /// answer "Yes" to "Which band …?". Returns the answer, the rationale of a sample that gave it,
    /// and the vote share; `None` when no sample answered.
    async fn summarise(
        &self,
        ctx: &Ctx,
        question: &str,
        dialog: &[(String, String)],
        evidence: &[Passage],
        pooled: &[Option<String>],
        comparison: Option<&Comparison>,
    ) -> Result<Option<(String, Option<String>, Option<f64>)>> {
        let yes_no = parse::is_yes_no_question(question);
        let dialog = format_dialog(dialog);
        let prompt = if evidence.is_empty() {
            let template = if yes_no { "toqd_summary_yes_no" } else { "toqd_summary" };
            ctx.render(template, &[("dialog", &dialog), ("question", question)])?
        } else {
            let template = if yes_no { "toqd_summary_passages_yes_no" } else { "toqd_summary_passages" };
            ctx.render(template, &[("passages", &format_passages(evidence)), ("dialog", &dialog), ("question", question)])?
        };
        let samples = self.opts.samples.max(1);
        let params = if samples == 1 {
            capped(ctx, SUMMARY_TOKENS)
        } else {
            GenParams {
                n: samples,
                temperature: self.opts.read_temperature,
                top_p: 1.0,
                grammar: None,
                ..capped(ctx, SUMMARY_TOKENS)
            }
        };
        let reply = ctx.chat("summary", Some(SINK), prompt, params).await?;
        let parsed: Vec<(Option<String>, Option<String>)> = reply
            .choices
            .iter()
            .map(|choice| {
                let (text, rationale) = answer::answer_with_reason(&choice.text);
                (read_node_answer(question, &text), rationale)
            })
            .collect();
        // The question's own readings (when `answer_first` was unsure) vote next to the summaries,
        // after them, so a tie goes to the summary, which saw the graph's facts too.
        let readings: Vec<Option<String>> =
            parsed.iter().map(|(answer, _)| answer.clone()).chain(pooled.iter().cloned()).collect();
        // A question that names two options is answered by one of them: when some readings name
        // one, only those vote, each as the option it names.
        let as_options = comparison.and_then(|c| c.as_options(&readings));
        let restriction = comparison.filter(|_| as_options.is_some());
        let mut readings: Vec<Option<String>> = as_options.unwrap_or(readings);
        self.without_people(ctx, SINK, question, &mut readings).await?;
        let vote = answers::vote(&readings);
        let summary = SummaryRecord {
            samples: reply.choices.iter().map(|c| c.text.clone()).collect(),
            pooled_readings: pooled.len(),
            restricted_to: restriction.map(|c| c.options.to_vec()).unwrap_or_default(),
            vote: vote.table.clone(),
            confidence: vote.confidence,
        };
        ctx.rec().update_node(SINK, |n| {
            details::update(n, |d: &mut ToqdNode| d.summary = Some(summary));
        });
        if vote.answer.is_empty() {
            return Ok(None);
        }
        let winner = hopwise_core::text::normalize_answer(&vote.answer);
        let gave_winner = |answer: &str| {
            hopwise_core::text::normalize_answer(answer) == winner
                || restriction.is_some_and(|c| c.chosen_option(answer).map(|i| &c.options[i]) == Some(&vote.answer))
        };
        let rationale = parsed
            .iter()
            .find(|(answer, _)| answer.as_deref().is_some_and(gave_winner))
            .and_then(|(_, rationale)| rationale.clone());
        let confidence = (readings.len() > 1).then_some(vote.confidence);
        Ok(Some((vote.answer, rationale, confidence)))
    }
}

fn numbered(items: &[String]) -> String {
    items.iter().enumerate().map(|(i, q)| format!("{}. {q}", i + 1)).collect::<Vec<_>>().join("\n")
}

pub(crate) fn child_graph(plan: &Plan) -> ChildGraph {
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
        ctx.rec().upsert_node(NodeTrace { id: SINK.to_string(), question: question.to_string(), ..Default::default() });
        if self.opts.question_gate && self.with_retrieval {
            if let Some(known) = self.closed_book(ctx, SINK, question).await? {
                if let Some(c) = known.confidence {
                    ctx.rec().set_confidence(c);
                }
                ctx.rec().update_node(SINK, |n| {
                    n.decision = Decision::Known;
                    n.answer = Some(known.answer.clone());
                });
                return Ok(Answer { text: known.answer, rationale: None });
            }
        }
        // The question's passages come first: with `answer_first` the question is read over them
        // before any plan, and a sure reading answers it with one call.
        let evidence = self.question_evidence(ctx, question).await?;
        ctx.rec().update_node(SINK, |n| n.passages = evidence.clone());
        // A question that asks which of two options comes first or last is planned as one node per
        // option and decided by their dates; its reading of the question would rarely be sure.
        let options = Comparison::parse(question);
        let open_answer = options.is_none() && !parse::is_yes_no_question(question);
        let comparison = options.filter(|_| self.opts.compare);
        let dated = comparison.as_ref().filter(|c| c.direction.is_some());
        // A yes/no question about two subjects ("Are A and B both X?") may be asked of each
        // subject alone and answered by the two halves (`split_both`).
        let both = (self.opts.split_both && comparison.is_none()).then(|| Both::parse(question, &evidence)).flatten();
        let mut pooled = Vec::new();
        let mut lead_searched = false;
        if self.opts.answer_first && !evidence.is_empty() && dated.is_none() && both.is_none() {
            match self.read_question(ctx, question, &evidence, open_answer).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(unsure)) => (pooled, lead_searched) = (unsure.readings, unsure.searched),
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => ctx.rec().note(format!("reading the question's passages failed: {e}; planning")),
            }
        }

        let compared = match dated {
            Some(c) => match self.comparison_plan(ctx, question, c).await {
                Ok(plan) => plan,
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    ctx.rec().note(format!("writing the options' questions failed: {e}; planning"));
                    None
                }
            },
            None => both.as_ref().map(Both::plan),
        };
        // The comparison the dates decide, when it was planned as one node per option; each option
        // (or subject) node may then search once of its own, whatever `max_node_searches` says.
        let decided_by_dates = dated.filter(|_| compared.is_some());
        let max_searches = if decided_by_dates.is_some() || both.is_some() {
            self.opts.max_node_searches.max(2)
        } else {
            self.opts.max_node_searches.saturating_sub(u32::from(lead_searched))
        };
        let plan = match compared {
            Some(plan) => plan,
            None => self.general_plan(ctx, question).await?,
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
        let sinks: Vec<String> =
            plan.topology.edges.iter().filter(|(_, to)| *to == GraphNode::Sink).map(|(from, _)| from.to_string()).collect();
        ctx.rec().update_node(SINK, |n| n.parents = sinks);

        let mut observer = TraceObserver { ctx };
        let state = QuestionState::new(evidence, max_searches);
        dag.execute(|task| self.resolve(ctx, question, task, &state), &mut observer).await;
        let QuestionState { evidence, fatal, .. } = state;
        if let Some(e) = fatal.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }

        if let Some(answer) = decided_by_dates.and_then(|c| self.decide(ctx, c, &dag)) {
            return Ok(answer);
        }
        if let Some(answer) = both.as_ref().and_then(|b| self.decide_both(ctx, b, &dag)) {
            return Ok(answer);
        }
        // Nodes that only named an entity of the question ("Who was Eddie Fisher?") add no fact.
        let answered: Vec<(String, String, String)> = dag
            .answers()
            .into_iter()
            .filter(|(_, q, a)| !a.is_empty() && answers::names_only(q, question).is_none())
            .collect();
        let last_answer = answered.last().map(|(_, _, a)| a.clone()).unwrap_or_default();
        // The summary's facts are the answers nodes settled; best-effort guesses from passages that
        // did not answer their node are left out when any node settled (on dev traces such guesses,
        // repeated by several nodes, outvoted the one node that had found the answer), and kept when
        // none did (a guess that names the right entity is then the best lead the summary has).
        let settled = |id: &str| !ctx.rec().node(id).is_some_and(|n| n.best_effort);
        let any_settled = answered.iter().any(|(id, _, _)| settled(id));
        let incomplete =
            !any_settled || !dag.unanswered().is_empty() || dag.answers().iter().any(|(id, _, _)| !settled(id));
        // A graph that left a node to a guess (or settled none) answers the question less surely
        // than its own readings over its passages: when two or more of them agree on a plurality,
        // that reading answers it. On dev traces the summary otherwise followed a guess, or a node
        // that had lost the question's hinge ("What drummer was inducted into the Modern Drummer
        // Hall of Fame?"), away from a reading three of five samples gave.
        if incomplete {
            if let Some(answer) = self.reading_over_guesses(ctx, &pooled, open_answer, comparison.as_ref()) {
                return Ok(answer);
            }
        }
        let dialog: Vec<(String, String)> = answered
            .into_iter()
            .filter(|(id, _, _)| !any_settled || settled(id))
            .map(|(_, q, a)| (q, a))
            .collect();
        match self.summarise(ctx, question, &dialog, &evidence, &pooled, comparison.as_ref()).await {
            Ok(Some((text, rationale, confidence))) => {
                if let Some(c) = confidence {
                    ctx.rec().set_confidence(c);
                }
                ctx.rec().update_node(SINK, |n| {
                    n.decision = Decision::Known;
                    n.answer = Some(text.clone());
                });
                Ok(Answer { text, rationale })
            }
            // A hedge, the sentinel, or a bare "Yes" to "Which band ...?": the graph's own last
            // answer is then the better final answer.
            Ok(None) => {
                ctx.rec().repair(Repair {
                    stage: "summary".into(),
                    rule: "summary_unanswered".into(),
                    detail: format!("the summary gave no answer; using the last node's answer `{last_answer}`"),
                });
                Ok(Answer { text: last_answer, rationale: None })
            }
            Err(e) if e.is_fatal() => Err(e),
            Err(e) => {
                ctx.rec().best_effort(format!("summary failed: {e}; using the last node's answer"));
                Ok(Answer { text: last_answer, rationale: None })
            }
        }
    }
}

#[cfg(test)]
mod tests;
