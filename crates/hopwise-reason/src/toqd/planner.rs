//! The typed plan of `toqd`: one call, constrained by the plan's grammar (and its JSON Schema on
//! servers that take one), read and checked by [`crate::protocol::plan`]; then the steps that ask
//! the same thing as an earlier one are dropped in code.

use hopwise_core::text::normalize_answer;
use hopwise_core::trace::SINK;
use hopwise_core::{GenParams, Repair};

use super::Toqd;
use crate::ctx::Ctx;
use crate::details::{
    self,
    toqd::{PlanRecord, ToqdNode},
};
use crate::error::Result;
use crate::protocol::plan::{self, AnswerType, FinalOp, QuestionPlan};

/// Output cap of the plan: room for the longest plan the grammar admits with short questions.
const PLAN_TOKENS: u32 = 400;

impl Toqd {
    /// The question's typed plan, recorded on `Q`.
    pub(super) async fn plan(&self, ctx: &Ctx, question: &str) -> Result<QuestionPlan> {
        self.plan_for(ctx, SINK, question).await
    }

    /// The typed plan of node `node`'s question, recorded on the node. A failed call (one that
    /// does not stop the question) or an unreadable reply plans the question as its own one step.
    pub(super) async fn plan_for(&self, ctx: &Ctx, node: &str, question: &str) -> Result<QuestionPlan> {
        let prompt = ctx.render("toqd_plan", &[("question", question)])?;
        let mut params = GenParams { max_tokens: PLAN_TOKENS, ..ctx.params().clone() };
        if self.opts.grammar {
            params.grammar = Some(plan::grammar());
            params.response_schema = Some(plan::json_schema());
        }
        let reply = match ctx.chat("plan", Some(node), prompt, params).await {
            Ok(reply) => reply.text().to_string(),
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                ctx.rec().best_effort(format!("planning failed: {e}; answering the question as one step"));
                return Ok(QuestionPlan::whole(question, AnswerType::Other));
            }
        };
        let mut repairs = Vec::new();
        let plan = plan::read_plan(&reply, question, self.opts.max_steps, &mut repairs);
        let plan = without_duplicates(plan, &mut repairs);
        repairs.into_iter().for_each(|r| ctx.rec().repair(r));
        let record = PlanRecord { reply, plan: plan.clone() };
        ctx.rec().update_node(node, |n| details::update(n, |d: &mut ToqdNode| d.plan = Some(record)));
        Ok(plan)
    }
}

/// Drops each step that asks what an earlier one asks (the same words once normalised, with the
/// same dependencies); references to it then name the earlier step. Option steps are kept.
fn without_duplicates(plan: QuestionPlan, repairs: &mut Vec<Repair>) -> QuestionPlan {
    let option_steps = plan.option_steps();
    let key = |i: usize| normalize_answer(&plan.steps[i].question);
    // For each step, the step it duplicates (itself when none).
    let mut same_as: Vec<usize> = (0..plan.steps.len()).collect();
    for i in 0..plan.steps.len() {
        if option_steps.contains(&i) {
            continue;
        }
        if let Some(j) = (0..i).find(|&j| same_as[j] == j && key(j) == key(i) && plan.needs[j] == plan.needs[i]) {
            same_as[i] = j;
            repairs.push(Repair {
                stage: "plan".into(),
                rule: "drop_duplicate_step".into(),
                detail: format!("step {} asks what step {} asks", i + 1, j + 1),
            });
        }
    }
    if same_as.iter().enumerate().all(|(i, &j)| i == j) {
        return plan;
    }
    // New 0-based numbers of the kept steps, and of each dropped step's original.
    let kept: Vec<usize> = (0..plan.steps.len()).filter(|&i| same_as[i] == i).collect();
    let new_index = |i: usize| kept.iter().position(|&k| k == same_as[i]).unwrap_or(0);
    let steps = kept
        .iter()
        .map(|&i| {
            let mut step = plan.steps[i].clone();
            step.question = plan::substitute(&step.question, |k| {
                (k >= 1 && k <= plan.steps.len()).then(|| format!("#{}", new_index(k - 1) + 1))
            });
            step
        })
        .collect();
    let needs = kept
        .iter()
        .map(|&i| {
            let mut needs: Vec<usize> = plan.needs[i].iter().map(|&j| new_index(j)).collect();
            needs.dedup();
            needs
        })
        .collect();
    let renumber = |options: Vec<plan::PlanOption>| {
        options.into_iter().map(|o| plan::PlanOption { step: new_index(o.step - 1) + 1, ..o }).collect()
    };
    let final_op = match plan.final_op {
        FinalOp::Answer { answer_type } => FinalOp::Answer { answer_type },
        FinalOp::Compare { pick, options } => FinalOp::Compare { pick, options: renumber(options) },
        FinalOp::All { options } => FinalOp::All { options: renumber(options) },
        FinalOp::Select { options } => FinalOp::Select { options: renumber(options) },
    };
    QuestionPlan { steps, needs, final_op }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_step_is_dropped_and_its_references_follow_the_first() {
        let reply = r##"{"op":"answer","answer_type":"person","steps":[{"question":"Who directed Red Moon?","answer_type":"person"},{"question":"who directed red moon","answer_type":"person"},{"question":"Who is the mother of #2?","answer_type":"person"}]}"##;
        let mut repairs = Vec::new();
        let read = plan::read_plan(reply, "Who is the mother of the director of Red Moon?", 5, &mut repairs);
        let plan = without_duplicates(read, &mut repairs);
        assert_eq!(plan.steps.len(), 2);
        assert_eq!(plan.steps[1].question, "Who is the mother of #1?");
        assert_eq!(plan.needs, vec![vec![], vec![0]]);
        assert_eq!(repairs.iter().map(|r| r.rule.as_str()).collect::<Vec<_>>(), ["drop_duplicate_step"]);
    }
}
