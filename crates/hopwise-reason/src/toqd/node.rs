//! Resolving one node of the topology graph: rewrite it with its predecessors' answers, decide with
//! the gate whether the model already knows, retrieve only if not, read the passages, and ask for a
//! child graph when even they leave the node unanswered.

use hopwise_core::text::normalize_answer;
use hopwise_core::{grammars, Decision, GenParams, Passage, Repair};

use super::answers::{
    asks_not_a_person, comparable, dated_if_asked, echoes, fits, leaf_query, names_only, read_any_answer,
    read_node_answer, vote,
};
use super::options::NodeGate;
use super::{capped, child_graph, QuestionState, Toqd, ANSWER_TOKENS, MAX_SUBQUESTION_WORDS, REWRITE_TOKENS};
use crate::ctx::{format_dialog, format_passages, Ctx};
use crate::details::{
    self,
    toqd::{GateDecision, GateRecord, ReadingRecord, ToqdNode},
};
use crate::error::Result;
use crate::executor::{NodeOutcome, NodeTask, Phase};
use crate::gate;
use crate::protocol::answer::{answer_kind, AnswerKind};
use crate::uncertainty;

/// Word-set Jaccard with the main question at or above which a rewrite counts as a restatement of
/// it (the sub-question's own focus was lost).
const RESTATES_MAIN: f64 = 0.8;

/// Output cap of the kind label (`person`, `place`, `other`).
const KIND_TOKENS: u32 = 4;

/// The readings of one prompt with passages and their vote.
pub(super) struct Reading {
    /// Each sample's answer; `None` for a sample that gave none.
    pub(super) readings: Vec<Option<String>>,
    /// The vote's answer; empty when no sample answered.
    pub(super) answer: String,
    /// The vote share of `answer`; `None` for a single greedy reading.
    pub(super) confidence: Option<f64>,
    /// For a question that asks when, what most samples named instead of a date (the director
    /// rather than the director's birth date): where a search of the node's own should look next.
    pub(super) lead: Option<String>,
}

impl Reading {
    /// The settled answer when the vote gave one with a share of at least `min` (a single greedy
    /// answer always counts), recording the decision as the reading's `accepted` detail.
    pub(super) fn accept(&self, ctx: &Ctx, id: &str, min: f64) -> Option<Settled> {
        let accepted = !self.answer.is_empty() && self.confidence.unwrap_or(1.0) >= min;
        if self.confidence.is_some() {
            record_accepted(ctx, id, accepted);
        }
        accepted.then(|| Settled { answer: self.answer.clone(), confidence: self.confidence })
    }

    /// The settled answer when at least `min_agree` samples (and at least one) answered and all of
    /// them agree, whatever share abstained; recorded as accepted, with a note saying why.
    pub(super) fn accept_unanimous(&self, ctx: &Ctx, id: &str, min_agree: u32) -> Option<Settled> {
        let answered = self.readings.iter().flatten().count();
        let agreeing = self.confidence.map_or(0, |c| (c * self.readings.len() as f64).round() as usize);
        if min_agree == 0 || self.answer.is_empty() || answered < min_agree as usize || agreeing != answered {
            return None;
        }
        record_accepted(ctx, id, true);
        ctx.rec().note(format!(
            "node {id}: the {answered} samples that answered agree on `{}` ({} replied NO!); accepted",
            self.answer,
            self.readings.len() - answered
        ));
        Some(Settled { answer: self.answer.clone(), confidence: self.confidence })
    }
}

/// Records on node `id`'s reading whether it settled the node.
fn record_accepted(ctx: &Ctx, id: &str, accepted: bool) {
    ctx.rec().update_node(id, |n| {
        details::update(n, |d: &mut ToqdNode| {
            if let Some(reading) = &mut d.reading {
                reading.accepted = Some(accepted);
            }
        })
    });
}

/// An answer a node settled on, with how sure the vote was.
pub(super) struct Settled {
    pub(super) answer: String,
    /// Vote share of the winning answer; `None` for a single greedy reply.
    pub(super) confidence: Option<f64>,
}

impl Toqd {
    /// Resolves one node visit. A degrading error leaves the node unresolved with a best-effort
    /// answer and a note in the trace; a fatal one is kept in `fatal` for the question to return.
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
                state.fatal.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
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
            return self.aggregate(ctx, task).await;
        }
        // "Who was Eddie Fisher?" for a name the question gives: answered by the name, with no call.
        // On dev traces such nodes (11 of 99 on HotpotQA) read and searched for a description the
        // echo rule then rejected, and successors' rewrites took the wrong entity from them.
        if let Some(name) = names_only(&task.question, main_question) {
            ctx.rec().repair(Repair {
                stage: format!("node:{id}"),
                rule: "identity_subquestion".into(),
                detail: format!("`{}` asks who a name of the question is; answered with the name", task.question),
            });
            let settled = Settled { answer: name, confidence: None };
            return Ok(record(ctx, id, Decision::Known, task.question.clone(), settled));
        }
        let question = self.rewritten(ctx, main_question, task).await?;

        // The gate: does the model already know?
        if self.opts.self_verify {
            if let Some(known) = self.closed_book(ctx, id, &question).await? {
                return Ok(record(ctx, id, Decision::Known, question, known));
            }
        }

        // The question's passages first (`evidence = question`): no search of the node's own.
        let mut lead = None;
        if !state.evidence.is_empty() {
            let shared = state.evidence.clone();
            ctx.rec().update_node(id, |n| n.passages = shared);
            let prompt = ctx.render(
                "toqd_self_verify_context",
                &[("passages", &format_passages(&state.evidence)), ("question", &question)],
            )?;
            let reading = self.sample_reading(ctx, id, "read_question_passages", &prompt, &question).await?;
            if let Some(settled) = reading.accept(ctx, id, self.opts.min_confidence) {
                return Ok(record(ctx, id, Decision::Retrieved, question, settled));
            }
            lead = reading.lead;
        }

        // Retrieve with the node's own question, then read the passages; past `max_node_searches`,
        // or when the question's passages already title every name it gives, the node goes on
        // with the question's passages.
        let mut passages: Vec<Passage> = Vec::new();
        let covered = titled_by(&question, lead.as_deref(), &state.evidence);
        let may_search = self.with_retrieval && !covered && state.try_search();
        if self.with_retrieval && !may_search {
            passages = state.evidence.clone();
            let why = if covered {
                "the question's passages are titled by every name it gives"
            } else {
                "max_node_searches reached"
            };
            ctx.rec().note(format!("node {id}: {why}; answering from the question's passages"));
        }
        if may_search {
            let query = if let Some(lead) = &lead {
                lead_query(ctx, id, &question, lead)
            } else if task.has_parents {
                question.clone()
            } else {
                let (query, filled) = leaf_query(&question, main_question);
                if filled {
                    ctx.rec().repair(Repair {
                        stage: format!("retrieve:{id}"),
                        rule: "query_keeps_entities".into(),
                        detail: format!("the sub-question names nothing from the question; searched `{query}`"),
                    });
                }
                query
            };
            passages = ctx.retrieve(Some(id), &query, ctx.k()).await?;
            let found = passages.clone();
            ctx.rec().update_node(id, |n| n.passages = found);
            let prompt = ctx.render(
                "toqd_self_verify_context",
                &[("passages", &format_passages(&passages)), ("question", &question)],
            )?;
            let reading = self.read(ctx, id, "self_verify_context", &prompt, &question).await?;
            if let Some(settled) = reading {
                return Ok(record(ctx, id, Decision::Retrieved, question, settled));
            }
        }

        // Decompose into a child graph, within the budgets.
        let deep = task.depth >= ctx.budget().max_depth;
        let within_cap = !deep && state.try_expand(self.opts.max_expansions);
        if within_cap && ctx.try_expand() {
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
                let repeats =
                    plan.questions.len() == 1 && normalize_answer(&plan.questions[0]) == normalize_answer(&question);
                if !repeats {
                    ctx.rec().update_node(id, |n| n.decision = Decision::Decomposed);
                    return Ok(NodeOutcome::Expand(child_graph(&plan)));
                }
            }
        } else {
            let why = if deep {
                "max_depth"
            } else if !within_cap {
                "max_expansions"
            } else {
                "r_max"
            };
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
        // Even forced, a model may still decline: keep no answer rather than the sentinel. What it
        // names is kept even when a "when" question got no date: a fact for the summary.
        let answer = read_any_answer(&question, &reply).unwrap_or_default();
        ctx.rec().update_node(id, |n| {
            n.decision = Decision::Unresolved;
            n.best_effort = true;
            n.answer = Some(answer.clone());
        });
        Ok(NodeOutcome::Answered { question, answer })
    }

    /// The node's question with its predecessors' answers substituted in. A rewrite that comes back
    /// empty, overlong, or as a restatement of the main question is not used: the sub-question then
    /// goes on with the predecessors' answers attached.
    async fn rewritten(&self, ctx: &Ctx, main_question: &str, task: &NodeTask) -> Result<String> {
        if !(self.opts.rewrite && task.has_parents && !task.dialog.is_empty()) {
            return Ok(task.question.clone());
        }
        let id = task.id.as_str();
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
        let rewritten = crate::protocol::answer::short_answer(&reply);
        let restates_main = uncertainty::jaccard(&rewritten, main_question) >= RESTATES_MAIN
            && uncertainty::jaccard(&rewritten, &task.question) < RESTATES_MAIN;
        // A statement ("In 1972, X died") or a bare answer ("Murcia") searched as the node's query
        // finds passages about the guess, not the question.
        let not_a_question = !rewritten.is_empty() && !crate::protocol::is_question(&rewritten);
        let dropped = dropped_name(&task.question, &rewritten, main_question, &task.dialog);
        let usable = !rewritten.is_empty()
            && hopwise_core::text::word_count(&rewritten) as usize <= MAX_SUBQUESTION_WORDS
            && !restates_main
            && !not_a_question
            && dropped.is_none();
        if usable {
            ctx.rec().update_node(id, |n| n.rewritten = Some(rewritten.clone()));
            return Ok(rewritten);
        }
        let known: Vec<&str> = task.dialog.iter().map(|(_, a)| a.as_str()).filter(|a| !a.is_empty()).collect();
        let fallback =
            if known.is_empty() { task.question.clone() } else { format!("{} ({})", task.question, known.join("; ")) };
        let rule = if restates_main {
            "rewrite_restated_question"
        } else if not_a_question {
            "rewrite_not_a_question"
        } else if dropped.is_some() {
            "rewrite_dropped_name"
        } else {
            "rewrite_unusable"
        };
        ctx.rec().repair(Repair {
            stage: format!("rewrite:{id}"),
            rule: rule.into(),
            detail: format!(
                "rewrite `{}` not used; asked `{fallback}`",
                hopwise_core::text::truncate_words(&rewritten, 16)
            ),
        });
        ctx.rec().update_node(id, |n| n.rewritten = Some(fallback.clone()));
        Ok(fallback)
    }

    /// The gate: a settled closed-book answer, or `None` when the node should retrieve.
    pub(super) async fn closed_book(&self, ctx: &Ctx, id: &str, question: &str) -> Result<Option<Settled>> {
        let mut sentinel = None;
        if matches!(self.opts.gate, NodeGate::No | NodeGate::Both) {
            let prompt = ctx.render("toqd_self_verify", &[("question", question)])?;
            let reply = ctx.chat("self_verify", Some(id), prompt, capped(ctx, ANSWER_TOKENS)).await?;
            match read_node_answer(question, reply.text()) {
                None => return Ok(None),
                Some(answer) if self.opts.gate == NodeGate::No => {
                    return Ok(Some(Settled { answer, confidence: None }))
                }
                Some(answer) => sentinel = Some(answer),
            }
        }
        let Some(gate) = &self.gate else { return Ok(None) };
        // Samples that cannot decline: their agreement is what the estimator measures.
        let prompt = ctx.render("toqd_closed_book", &[("question", question)])?;
        let replies =
            gate::sample(ctx, id, "uncertainty_samples", &prompt, gate, ANSWER_TOKENS, |text| text.to_string()).await?;
        let readings: Vec<Option<String>> = replies.iter().map(|r| read_node_answer(question, r)).collect();
        let estimate = gate::estimate(ctx, id, gate, None, &comparable(&readings)).await;
        let vote = vote(&readings);
        // Retrieve when the samples disagree, or when most of them decline.
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
            self_verify: sentinel.clone(),
        };
        ctx.rec().update_node(id, |n| details::write(n, &ToqdNode { gate: Some(detail), ..Default::default() }));
        if retrieve {
            return Ok(None);
        }
        // The greedy answer when there is one (it agrees with the vote, or the gate would have
        // retrieved on disagreement), else the vote's.
        let answer = sentinel.unwrap_or(vote.answer);
        Ok(Some(Settled { answer, confidence: Some(vote.confidence) }))
    }

    /// Reads a node's answer from a prompt with passages: `samples` readings in one request and a
    /// vote (or one greedy reading when `samples` is 1). `None` when the vote found no answer or its
    /// share is under `min_confidence`.
    async fn read(&self, ctx: &Ctx, id: &str, purpose: &str, prompt: &str, question: &str) -> Result<Option<Settled>> {
        let reading = self.sample_reading(ctx, id, purpose, prompt, question).await?;
        Ok(reading.accept(ctx, id, self.opts.min_confidence))
    }

    /// The sampled readings of one prompt with passages and their vote, recorded as the node's
    /// `reading` detail.
    pub(super) async fn sample_reading(
        &self,
        ctx: &Ctx,
        id: &str,
        purpose: &str,
        prompt: &str,
        question: &str,
    ) -> Result<Reading> {
        if self.opts.samples <= 1 {
            let reply = ctx.chat(purpose, Some(id), prompt.to_string(), capped(ctx, ANSWER_TOKENS)).await?;
            let named = [read_any_answer(question, reply.text())];
            let mut readings = [named[0].clone().filter(|a| fits(question, a))];
            let person = self.without_people(ctx, id, question, &mut readings).await?;
            let [answer] = readings;
            let lead = lead_of(question, &named).or(person);
            return Ok(Reading {
                answer: answer.clone().unwrap_or_default(),
                confidence: None,
                readings: vec![answer],
                lead,
            });
        }
        let params = GenParams {
            n: self.opts.samples,
            temperature: self.opts.read_temperature,
            top_p: 1.0,
            grammar: None,
            ..capped(ctx, ANSWER_TOKENS)
        };
        let reply = ctx.chat(purpose, Some(id), prompt.to_string(), params).await?;
        let replies: Vec<String> = reply.choices.iter().map(|c| c.text.clone()).collect();
        let named: Vec<Option<String>> = replies.iter().map(|r| read_any_answer(question, r)).collect();
        let mut readings: Vec<Option<String>> = named.iter().map(|a| a.clone().filter(|a| fits(question, a))).collect();
        let person = self.without_people(ctx, id, question, &mut readings).await?;
        let vote = vote(&readings);
        let lead = lead_of(question, &named).or(person);
        let detail =
            ReadingRecord { samples: replies, vote: vote.table.clone(), confidence: vote.confidence, accepted: None };
        ctx.rec().update_node(id, |n| details::update(n, |d: &mut ToqdNode| d.reading = Some(detail)));
        Ok(Reading { answer: vote.answer, confidence: Some(vote.confidence), readings, lead })
    }

    /// For a question that asks where or what nationality (`answer_kind`), the readings that name a
    /// person abstain:
    /// the vote's winner, unless it holds a digit, is labelled person, place or other by one short
    /// constrained call, and a person's readings are set to `None` before the next winner is
    /// labelled (two at most).
    /// Returns the first person removed: where a search of the node's own should look next.
    pub(super) async fn without_people(
        &self,
        ctx: &Ctx,
        id: &str,
        question: &str,
        readings: &mut [Option<String>],
    ) -> Result<Option<String>> {
        if !self.opts.answer_kind || !asks_not_a_person(question) {
            return Ok(None);
        }
        let mut first_person = None;
        for _ in 0..2 {
            let tally = vote(readings);
            let winner = tally.answer;
            // A date or a number names no person (on a dev trace "29 January 1943" was labelled one).
            let nameless = winner.is_empty() || winner.chars().any(|c| c.is_ascii_digit());
            if nameless || self.kind_of(ctx, id, &winner).await? != Some(AnswerKind::Person) {
                break;
            }
            ctx.rec().repair(Repair {
                stage: format!("read:{id}"),
                rule: "answer_names_a_person".into(),
                detail: format!("`{winner}` names a person, which the question does not ask for; its readings abstain"),
            });
            // Every reading the vote counted for the winner, in whichever form it named them.
            for &i in tally.table.first().map(|row| row.samples.as_slice()).unwrap_or_default() {
                if let Some(reading) = readings.get_mut(i) {
                    *reading = None;
                }
            }
            first_person.get_or_insert(winner);
        }
        Ok(first_person)
    }

    /// The kind of thing `answer` names, by one greedy call constrained to the three labels (when
    /// `grammar` is on); `None` when the reply is none of them or the call failed for a reason
    /// that does not stop the question.
    async fn kind_of(&self, ctx: &Ctx, id: &str, answer: &str) -> Result<Option<AnswerKind>> {
        let prompt = ctx.render("toqd_answer_kind", &[("answer", answer)])?;
        let mut params = GenParams { temperature: 0.0, ..capped(ctx, KIND_TOKENS) };
        if self.opts.grammar {
            params.grammar = Some(grammars::ANSWER_KIND.to_string());
        }
        match ctx.chat("answer_kind", Some(id), prompt, params).await {
            Ok(reply) => Ok(answer_kind(reply.text())),
            Err(e) if e.is_fatal() => Err(e),
            Err(e) => {
                ctx.rec().note(format!("node {id}: labelling `{answer}` failed: {e}; kept"));
                Ok(None)
            }
        }
    }

    /// A decomposed node's answer from its children's dialog.
    async fn aggregate(&self, ctx: &Ctx, task: &NodeTask) -> Result<NodeOutcome> {
        let id = task.id.as_str();
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
        let answer = read_any_answer(&question, &reply).unwrap_or_default();
        ctx.rec().update_node(id, |n| n.answer = Some(answer.clone()));
        Ok(NodeOutcome::Answered { question, answer })
    }
}

/// Whether the question's passages already hold the page of every name `question` gives (and of
/// `lead`, what a reading named instead of the date asked for): a search with the same names
/// finds the same pages. On dev traces 32 node searches of this kind settled 3 nodes, against 10
/// of 17 for sub-questions that named something the question's passages did not title.
fn titled_by(question: &str, lead: Option<&str>, evidence: &[Passage]) -> bool {
    let titles: Vec<String> = evidence.iter().map(|p| p.title.to_lowercase()).filter(|t| !t.is_empty()).collect();
    let names: Vec<String> = super::answers::key_terms(question).into_iter().chain(lead.map(str::to_string)).collect();
    !titles.is_empty()
        && !names.is_empty()
        && names
            .iter()
            .map(|n| n.to_lowercase())
            .all(|name| titles.iter().any(|t| t.contains(&name) || name.contains(t.as_str())))
}

/// A name of the main question that `question` asks about and its rewrite left out, unless the
/// rewrite put in its place the answer of a predecessor whose question held the name ("the mother
/// of the director of X" may become "the mother of <director>"). On dev traces the rewrite swapped
/// one compared entity for the other ("Who was Helen Zahavi?" became "Who was C. S. Forester?",
/// "How old was Elia Kazan when he died?" became "… Moustapha Akkad …"), and the node then answered
/// for the wrong one.
fn dropped_name(question: &str, rewritten: &str, main_question: &str, dialog: &[(String, String)]) -> Option<String> {
    let (kept, main) = (rewritten.to_lowercase(), main_question.to_lowercase());
    super::answers::key_terms(question).into_iter().find(|name| {
        let name = name.to_lowercase();
        let resolved = || {
            dialog.iter().any(|(q, a)| {
                let answer = a.trim().trim_end_matches('.').to_lowercase();
                q.to_lowercase().contains(&name) && !answer.is_empty() && kept.contains(&answer)
            })
        };
        main.contains(&name) && !kept.contains(&name) && !resolved()
    })
}

/// What the samples named most often instead of the date a "when" question asks for (the
/// director rather than the director's birth date), leaving out what only repeats the question;
/// `None` when there is no such answer.
fn lead_of(question: &str, named: &[Option<String>]) -> Option<String> {
    let unfit: Vec<Option<String>> =
        named.iter().map(|a| a.clone().filter(|a| !dated_if_asked(question, a) && !echoes(question, a))).collect();
    Some(vote(&unfit).answer).filter(|top| !top.is_empty())
}

/// The search for a node (or the question, `Q`) whose passages led part of the way ("When was
/// the director of X born?" read as the director): its question and what they named, recorded as
/// the repair `query_follows_lead`.
pub(super) fn lead_query(ctx: &Ctx, id: &str, question: &str, lead: &str) -> String {
    ctx.rec().repair(Repair {
        stage: format!("retrieve:{id}"),
        rule: "query_follows_lead".into(),
        detail: format!("the question's passages named `{lead}` instead of what it asks; searched with it"),
    });
    format!("{question} {lead}")
}

/// Marks node `id` answered and returns the executor's outcome.
fn record(ctx: &Ctx, id: &str, decision: Decision, question: String, settled: Settled) -> NodeOutcome {
    let Settled { answer, confidence } = settled;
    ctx.rec().update_node(id, |n| {
        n.decision = decision;
        n.answer = Some(answer.clone());
        if let Some(c) = confidence {
            details::update(n, |d: &mut ToqdNode| d.confidence = Some(c));
        }
    });
    NodeOutcome::Answered { question, answer }
}

#[cfg(test)]
mod tests {
    use super::{dropped_name, titled_by};
    use hopwise_core::Passage;

    #[test]
    fn a_node_whose_names_title_the_question_passages_needs_no_search_of_its_own() {
        let page = |title: &str| Passage { title: title.into(), ..Passage::default() };
        let evidence = vec![page("Payment on Demand"), page("My Cousin from Warsaw")];
        assert!(titled_by("When did the director of Payment On Demand die?", None, &evidence));
        assert!(
            !titled_by("When did the director of Payment On Demand die?", Some("Bretaigne Windust"), &evidence),
            "a lead is new"
        );
        assert!(!titled_by("Where was Bretaigne Windust born?", None, &evidence));
        assert!(!titled_by("Where was this director born?", None, &evidence), "names nothing");
        assert!(!titled_by("When did the director of Payment On Demand die?", None, &[]));
    }

    #[test]
    fn a_rewrite_may_drop_only_names_a_predecessor_resolved() {
        let main = "Who lived to an older age, Elia Kazan or Moustapha Akkad?";
        let parents = vec![
            ("Who was Elia Kazan?".to_string(), "Elia Kazan".to_string()),
            ("Who was Moustapha Akkad?".to_string(), "Moustapha Akkad".to_string()),
        ];
        let q = "How old was Elia Kazan when he died?";
        let swapped = dropped_name(q, "How old was Moustapha Akkad when he died?", main, &parents);
        assert_eq!(
            swapped.as_deref(),
            Some("Elia Kazan"),
            "a predecessor named it, but its answer is not what replaced it"
        );
        let main = "Which novelist was educated in London, C. S. Forester or Helen Zahavi?";
        let parents = vec![("Who was C. S. Forester?".to_string(), "an English novelist".to_string())];
        let swapped = dropped_name("Who was Helen Zahavi?", "Who was C. S. Forester?", main, &parents);
        assert_eq!(swapped.as_deref(), Some("Helen Zahavi"));
        assert_eq!(dropped_name("Who was Helen Zahavi?", "Who was Helen Zahavi, the novelist?", main, &parents), None);
        let main = "Who is the mother of the director of film Polish-Russian War?";
        let parents = vec![("Who directed Polish-Russian War?".to_string(), "Xawery Żuławski".to_string())];
        let q = "Who is the mother of the director of Polish-Russian War?";
        assert_eq!(
            dropped_name(q, "Who is the mother of Xawery Żuławski?", main, &parents),
            None,
            "resolved by node 1"
        );
    }
}
