//! `toqd`'s summary: sampled answers from the dialog of the graph's answers (and the question's
//! passages), voted together with the question's own readings. A question whose plan names
//! options is answered by one of them: when some readings name one, only those vote.

use hopwise_core::trace::SINK;
use hopwise_core::{Decision, GenParams, Passage, Repair};

use super::reading::{self, Expect};
use super::Toqd;
use crate::ctx::Ctx;
use crate::details::{
    self,
    toqd::{SummaryRecord, ToqdNode},
};
use crate::error::Result;
use crate::executor::Dag;
use crate::protocol::answer::answer_with_reason;
use crate::protocol::plan::{named_option, AnswerType, QuestionPlan};
use crate::protocol::Hedges;
use crate::strategy::api::Answer;

/// Output cap of one summary (an answer and a one-sentence reason).
const SUMMARY_TOKENS: u32 = 200;

impl Toqd {
    pub(super) async fn summarise(
        &self,
        ctx: &Ctx,
        question: &str,
        plan: &QuestionPlan,
        dag: &Dag,
        evidence: &[Passage],
        pooled: &[Option<String>],
    ) -> Result<Answer> {
        // The facts are the answers nodes settled; guesses of nodes nothing settled are left out
        // when any node settled, and kept when none did (a guess is then the best lead there is).
        let answered: Vec<(String, String, String)> =
            dag.answers().into_iter().filter(|(_, _, answer)| !answer.is_empty()).collect();
        let settled = |id: &str| !ctx.rec().node(id).is_some_and(|n| n.best_effort);
        let any_settled = answered.iter().any(|(id, _, _)| settled(id));
        let last_answer = answered.last().map(|(_, _, a)| a.clone()).unwrap_or_default();
        let dialog: Vec<(String, String)> =
            answered.into_iter().filter(|(id, _, _)| !any_settled || settled(id)).map(|(_, q, a)| (q, a)).collect();

        let options = plan.final_op.options();
        let expect = Expect {
            may_echo: !options.is_empty(),
            ..Expect::text(plan.final_op.answer_type().unwrap_or(AnswerType::Other))
        };
        let format = reading::answer_format(ctx, expect)?;
        let dialog = ctx.format_dialog(&dialog);
        let prompt = if evidence.is_empty() {
            ctx.render("toqd_summary", &[("dialog", &dialog), ("question", question), ("answer_format", &format)])?
        } else {
            ctx.render(
                "toqd_summary_passages",
                &[
                    ("passages", &ctx.format_passages(evidence)),
                    ("dialog", &dialog),
                    ("question", question),
                    ("answer_format", &format),
                ],
            )?
        };
        let samples = self.opts.samples.max(1);
        let mut params = GenParams { max_tokens: ctx.params().max_tokens.min(SUMMARY_TOKENS), ..ctx.params().clone() };
        if samples > 1 {
            params = GenParams { n: samples, temperature: self.opts.read_temperature, top_p: 1.0, ..params };
        }
        let reply = match ctx.chat("summary", Some(SINK), prompt, params).await {
            Ok(reply) => reply,
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                ctx.rec().best_effort(format!("summary failed: {e}; using the last node's answer"));
                return Ok(Self::fall_back(ctx, last_answer));
            }
        };
        let hedges = ctx.hedges(self.opts.hedges);
        let parsed: Vec<(Option<String>, Option<String>)> = reply
            .choices
            .iter()
            .map(|choice| {
                let (text, rationale) = answer_with_reason(&choice.text);
                (reading::read_answer(&text, question, expect, &hedges), rationale)
            })
            .collect();
        // The question's own readings vote after the summaries, so a tie goes to a summary, which
        // saw the graph's answers too.
        let mut readings: Vec<Option<String>> =
            parsed.iter().map(|(answer, _)| answer.clone()).chain(pooled.iter().cloned()).collect();
        let as_options: Vec<Option<String>> = readings
            .iter()
            .map(|r| r.as_deref().and_then(|r| named_option(r, options)).map(|i| options[i].option.clone()))
            .collect();
        let restricted = as_options.iter().any(Option::is_some);
        if restricted {
            readings = as_options;
        }
        let vote = reading::vote(&readings);
        let record = SummaryRecord {
            samples: reply.choices.iter().map(|c| c.text.clone()).collect(),
            pooled_readings: pooled.len(),
            restricted_to: if restricted { options.iter().map(|o| o.option.clone()).collect() } else { Vec::new() },
            vote: vote.table.clone(),
            confidence: vote.confidence,
        };
        ctx.rec().update_node(SINK, |n| details::update(n, |d: &mut ToqdNode| d.summary = Some(record)));
        if vote.answer.is_empty() && last_answer.is_empty() {
            // No reading had the expected type and no node answered: the summary's own answer, read
            // without its type, is the only lead left.
            let text = parsed_text(&reply, &hedges);
            if !text.is_empty() {
                ctx.rec().best_effort(format!(
                    "no summary reading had the expected answer type and no node answered; answering with the summary's text `{text}`"
                ));
                return Ok(Self::fall_back(ctx, text));
            }
        }
        if vote.answer.is_empty() {
            ctx.rec().repair(Repair {
                stage: "summary".into(),
                rule: "summary_unanswered".into(),
                detail: format!("the summary gave no answer; using the last node's answer `{last_answer}`"),
            });
            return Ok(Self::fall_back(ctx, last_answer));
        }
        let winner = hopwise_core::text::normalize_answer(&vote.answer);
        let rationale = parsed
            .iter()
            .find(|(answer, _)| {
                answer.as_deref().is_some_and(|a| {
                    hopwise_core::text::normalize_answer(a) == winner
                        || named_option(a, options).is_some_and(|i| options[i].option == vote.answer)
                })
            })
            .and_then(|(_, rationale)| rationale.clone());
        let confidence = (readings.len() > 1).then_some(vote.confidence);
        let mut answer = Self::finish(ctx, Decision::Known, vote.answer, confidence);
        answer.rationale = rationale;
        Ok(answer)
    }
}

/// The short answer of the first summary sample that gives one, read without its expected type
/// (a sample that declines, `NO!` or a hedge meaning it, gives none).
fn parsed_text(reply: &hopwise_core::ChatResponse, hedges: &Hedges) -> String {
    reply
        .choices
        .iter()
        .map(|choice| answer_with_reason(&choice.text).0)
        .filter(|text| !hedges.is_unanswered(text))
        .map(|text| crate::protocol::answer::short_answer(&text))
        .find(|text| !text.is_empty())
        .unwrap_or_default()
}
