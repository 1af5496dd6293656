//! ToQD — Topology of Question Decomposition, in two presets.
//!
//! **`toqd-paper`** ([`paper::ToqdPaper`]) is the paper's Algorithm 1 and 2: decompose → critique →
//! construct a topology graph (`1 -> 2 -> Q` edges); in topological order, independent nodes in
//! parallel, each node is rewritten with its predecessors' answers, asked closed-book (`NO!` or an
//! answer), retrieves with its own question on `NO!`, reads the documents (`NO!` or an answer), and
//! is decomposed into a child graph on a second `NO!`; a summary over the question/answer dialog
//! answers. One low-temperature reply per step. `toqd-noir-paper` decomposes on the first `NO!`.
//!
//! **`toqd`** ([`Toqd`]), the product default, keeps the graph and lets the model state the
//! question's structure as typed data that code executes:
//! 1. One search with the question (`toqd-noir`: none).
//! 2. One grammar-constrained call writes the typed plan ([`crate::protocol::plan`]): steps with
//!    their answer types, dependencies as `#k` references (the topology), and the final operation:
//!    `answer` (summarise), `compare` (pick the earliest/latest/largest/smallest option by values
//!    code reads and compares), `all` (yes when every option's yes/no step says yes) or `select`
//!    (the one option whose yes/no step says yes). Duplicate steps are dropped in code.
//! 3. For an `answer` plan, the question is read over its passages first (`answer_first`): sampled
//!    readings of the plan's answer type, voted; a share of `answer_first_confidence` answers it.
//! 4. Otherwise the graph runs: each node puts its predecessors' answers in place of `#k`, asks the
//!    gate when one is configured (`gate`), reads the question's passages (sampled, typed, voted),
//!    searches with its own question when they leave it unsure (`max_node_searches`), is decomposed
//!    when still unsure (`max_expansions`), and otherwise keeps its leading reading as a
//!    best-effort answer. Option steps read values (an ISO date, digits, yes/no) under a grammar.
//! 5. `compare`, `all` and `select` are decided in code from the option steps' values; when they
//!    cannot be, and for `answer` plans, sampled summaries over the dialog and the passages vote
//!    with the question's own readings (for an option question, only readings naming an option).

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;

use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::{Decision, NodeTrace, Passage};

use crate::ctx::Ctx;
use crate::details::{self, toqd::ToqdNode};
use crate::error::Result;
use crate::gate::UncertaintyGate;
use crate::protocol::plan::{AnswerType, FinalOp, QuestionPlan};
use crate::strategy::api::{Answer, Strategy};

mod decide;
mod graph;
pub mod options;
pub mod paper;
mod planner;
mod reading;
mod resolve;
mod summary;

pub use options::{NodeGate, PaperOptions, ToqdOptions};
pub use paper::ToqdPaper;
use reading::{Expect, Reading, Sampling};

/// The product preset (`toqd`, `toqd-noir`).
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

    fn sampling(&self, ctx: &Ctx) -> Sampling {
        Sampling {
            samples: self.opts.samples,
            temperature: self.opts.read_temperature,
            grammar: self.opts.grammar,
            hedges: ctx.hedges(self.opts.hedges),
        }
    }
}

/// What the nodes of one question share while its graph runs.
pub(super) struct QuestionState {
    /// Passages of the search with the question; empty without retrieval.
    evidence: Vec<Passage>,
    plan: QuestionPlan,
    /// The question's own reading over `evidence`, when `answer_first` read it.
    question_reading: Option<Reading>,
    /// Each node's answer by id, once settled or guessed: what `#k` references are filled with.
    answers: Mutex<HashMap<String, String>>,
    /// The answer type of each child node, by id.
    child_types: Mutex<HashMap<String, AnswerType>>,
    node_searches: AtomicU32,
    expansions: AtomicU32,
    fatal: graph::Fatal,
}

impl QuestionState {
    fn new(evidence: Vec<Passage>, plan: QuestionPlan, question_reading: Option<Reading>) -> Self {
        Self {
            evidence,
            plan,
            question_reading,
            answers: Default::default(),
            child_types: Default::default(),
            node_searches: Default::default(),
            expansions: Default::default(),
            fatal: Default::default(),
        }
    }

    fn answer_of(&self, id: &str) -> Option<String> {
        self.answers.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    fn set_answer(&self, id: &str, answer: &str) {
        if !answer.is_empty() {
            self.answers.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string(), answer.to_string());
        }
    }

    fn child_type(&self, id: &str) -> Option<AnswerType> {
        self.child_types.lock().unwrap_or_else(|p| p.into_inner()).get(id).copied()
    }

    /// Records the answer types of `parent`'s children `parent.1`, `parent.2`, ….
    fn set_child_types(&self, parent: &str, types: Vec<AnswerType>) {
        let mut known = self.child_types.lock().unwrap_or_else(|p| p.into_inner());
        for (i, t) in types.into_iter().enumerate() {
            known.insert(format!("{parent}.{}", i + 1), t);
        }
    }
}

impl Toqd {
    /// One search with the question; a failed search leaves the nodes to search for themselves.
    async fn question_evidence(&self, ctx: &Ctx, question: &str) -> Result<Vec<Passage>> {
        if !self.with_retrieval {
            return Ok(Vec::new());
        }
        match ctx.retrieve(Some(SINK), question, ctx.k()).await {
            Ok(passages) => Ok(passages),
            Err(e) if e.is_fatal() => Err(e),
            Err(e) => {
                ctx.rec().note(format!("search with the question failed: {e}; nodes search on their own"));
                Ok(Vec::new())
            }
        }
    }

    /// Marks `Q` answered with `answer` (and its confidence) and returns it.
    fn finish(ctx: &Ctx, decision: Decision, answer: String, confidence: Option<f64>) -> Answer {
        if let Some(c) = confidence {
            ctx.rec().set_confidence(c);
        }
        ctx.rec().update_node(SINK, |n| {
            n.decision = decision;
            n.answer = Some(answer.clone());
        });
        Answer { text: answer, rationale: None }
    }

    /// Marks `Q` unresolved with the best-effort `answer` the summary fell back on, and returns it.
    fn fall_back(ctx: &Ctx, answer: String) -> Answer {
        ctx.rec().update_node(SINK, |n| {
            n.decision = Decision::Unresolved;
            n.best_effort = true;
            n.answer = Some(answer.clone());
        });
        Answer { text: answer, rationale: None }
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
        let evidence = self.question_evidence(ctx, question).await?;
        ctx.rec().update_node(SINK, |n| n.passages = evidence.clone());
        let plan = self.plan(ctx, question).await?;

        // An `answer` plan: the question's own reading first, which a sure vote settles.
        let mut question_reading = None;
        if let (true, FinalOp::Answer { answer_type }) = (self.opts.answer_first, &plan.final_op) {
            let expect = Expect::text(*answer_type);
            let prompt = reading::reading_prompt(ctx, question, &evidence, expect)?;
            match reading::sample_reading(ctx, SINK, "read_question", prompt, question, expect, &self.sampling(ctx))
                .await
            {
                Ok(reading) => {
                    if let Some(settled) = reading.accept(ctx, SINK, self.opts.answer_first_confidence) {
                        let decision = if evidence.is_empty() { Decision::Known } else { Decision::Retrieved };
                        return Ok(Self::finish(ctx, decision, settled.answer, settled.confidence));
                    }
                    question_reading = Some(reading);
                }
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => ctx.rec().note(format!("reading the question failed: {e}; running the graph")),
            }
        }

        let questions: Vec<String> = plan.steps.iter().map(|s| s.question.clone()).collect();
        let mut dag = graph::top_level(ctx, &questions, &plan.needs);
        let state = QuestionState::new(evidence, plan, question_reading);
        let mut observer = graph::TraceObserver { ctx };
        dag.execute(|task| self.resolve(ctx, question, task, &state), &mut observer).await;
        let QuestionState { evidence, plan, question_reading, fatal, .. } = state;
        if let Some(e) = fatal.take() {
            return Err(e);
        }

        if let Some((answer, confidence)) = decide::decide(ctx, &plan, &dag) {
            return Ok(Self::finish(ctx, Decision::Known, answer, confidence));
        }
        let pooled = question_reading.map(|r| r.readings).unwrap_or_default();
        self.summarise(ctx, question, &plan, &dag, &evidence, &pooled).await
    }
}

/// The confidence node `id` recorded for its answer, when it recorded one.
pub(super) fn node_confidence(ctx: &Ctx, id: &str) -> Option<f64> {
    ctx.rec().node(id).and_then(|n| details::read::<ToqdNode>(&n)).and_then(|d| d.confidence)
}

#[cfg(test)]
mod tests;
