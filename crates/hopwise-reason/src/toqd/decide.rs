//! The final operations code executes: `compare` reads each option step's value and picks one,
//! `all` and `select` read each option step's yes or no. When a value is missing or does not
//! decide, the summary answers instead.

use std::collections::HashMap;

use hopwise_core::trace::SINK;

use super::node_confidence;
use crate::ctx::Ctx;
use crate::details::{
    self,
    toqd::{DecisionRecord, ToqdNode},
};
use crate::executor::Dag;
use crate::protocol::plan::{AnswerType, FinalOp, QuestionPlan};
use crate::protocol::values::{self, Value};

/// The answer `plan`'s final operation gives from the graph's answers, with the least confidence
/// of the option steps it used; `None` for an `answer` plan or when the values do not decide. The
/// decision is recorded on `Q` either way.
pub(super) fn decide(ctx: &Ctx, plan: &QuestionPlan, dag: &Dag) -> Option<(String, Option<f64>)> {
    let options = plan.final_op.options();
    if options.is_empty() {
        return None;
    }
    let answers: HashMap<String, String> = dag.answers().into_iter().map(|(id, _, answer)| (id, answer)).collect();
    let step_answer = |step: usize| answers.get(&step.to_string()).cloned().filter(|a| !a.is_empty());
    let found: Vec<Option<String>> = options.iter().map(|o| step_answer(o.step)).collect();
    let types: Vec<AnswerType> =
        options.iter().map(|o| plan.steps.get(o.step - 1).map_or(AnswerType::Other, |s| s.answer_type)).collect();
    let chosen: Option<String> = match &plan.final_op {
        FinalOp::Answer { .. } => None,
        FinalOp::Compare { pick, .. } => {
            let values: Vec<Option<Value>> = found
                .iter()
                .zip(&types)
                .map(|(answer, kind)| answer.as_deref().and_then(|a| value_in(a, *kind)))
                .collect();
            values::pick_value(&values, *pick).map(|i| options[i].option.clone())
        }
        FinalOp::All { .. } => {
            let said: Vec<Option<bool>> = found.iter().map(|a| a.as_deref().and_then(values::yes_no)).collect();
            if said.contains(&Some(false)) {
                Some("no".to_string())
            } else if said.iter().all(|s| *s == Some(true)) {
                Some("yes".to_string())
            } else {
                None
            }
        }
        FinalOp::Select { .. } => {
            let said: Vec<Option<bool>> = found.iter().map(|a| a.as_deref().and_then(values::yes_no)).collect();
            let yes: Vec<usize> = (0..said.len()).filter(|&i| said[i] == Some(true)).collect();
            let all_said = said.iter().all(Option::is_some);
            match yes.as_slice() {
                [one] if all_said => Some(options[*one].option.clone()),
                _ => None,
            }
        }
    };
    let record = DecisionRecord {
        op: plan.final_op.name().to_string(),
        options: options.iter().map(|o| o.option.clone()).collect(),
        found: found.clone(),
        chosen: chosen.clone(),
    };
    ctx.rec().update_node(SINK, |n| details::update(n, |d: &mut ToqdNode| d.decision = Some(record)));
    let chosen = chosen?;
    let confidence =
        options.iter().filter_map(|o| node_confidence(ctx, &o.step.to_string())).min_by(|a, b| a.total_cmp(b));
    Some((chosen, confidence))
}

/// The value an option step's answer holds: of its own type, or, when the plan typed it as
/// neither a date nor a number, a date if it holds one and else a number.
fn value_in(answer: &str, kind: AnswerType) -> Option<Value> {
    if kind.is_comparable() {
        return values::value_of(answer, kind);
    }
    values::value_of(answer, AnswerType::Date).or_else(|| values::value_of(answer, AnswerType::Number))
}
