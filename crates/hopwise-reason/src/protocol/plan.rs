//! The typed question plan (the `typed_plan` protocol): the model states a question's structure as
//! one JSON object, constrained by [`GRAMMAR`] on backends that take a GBNF grammar and by
//! [`json_schema`] on servers that take a response format; [`read_plan`] reads it (or whatever a
//! backend without either wrote) into a [`QuestionPlan`] and checks it against the question.
//!
//! The format, one object with `op` first:
//!
//! ```json
//! {"op":"answer","answer_type":"person","steps":[{"question":"Who directed Blue Lanterns?","answer_type":"person"},{"question":"Who is the mother of #1?","answer_type":"person"}]}
//! {"op":"compare","pick":"earliest","steps":[…],"options":[{"option":"Blue Lanterns","step":1},{"option":"Night Ferry","step":2}]}
//! {"op":"all","steps":[…],"options":[…]}
//! {"op":"select","steps":[…],"options":[…]}
//! ```
//!
//! A step refers to an earlier step's answer as `#k` (1-based): that is its dependency, and code
//! puts the answer in its place before the step is asked. `compare` picks the option whose step's
//! value (a date or a number) is the earliest, latest, largest or smallest; `all` answers yes when
//! every option's yes/no step says yes; `select` answers with the one option whose yes/no step says
//! yes. Options are copied from the question: one the question does not contain is dropped.
//!
//! Repair rules (recorded in the trace):
//! - `plan_unreadable`: no plan object could be read; the question becomes a one-step plan.
//! - `plan_text_around_json`: prose around the object was ignored.
//! - `drop_forward_reference`: `#k` naming the step itself or a later or missing one is left as text.
//! - `drop_option_not_in_question`: an option the question does not contain.
//! - `drop_option_without_step`: an option whose step does not exist, or that another option took.
//! - `op_without_options`: fewer than two options survived; the plan answers the question instead.
//! - `truncate_steps`: steps past the most allowed.

use hopwise_core::text::normalize_answer;
use hopwise_core::Repair;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What an answer is, as the plan states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerType {
    Person,
    Place,
    Organisation,
    Work,
    Date,
    Number,
    YesNo,
    Other,
}

impl AnswerType {
    pub const ALL: [AnswerType; 8] = [
        AnswerType::Person,
        AnswerType::Place,
        AnswerType::Organisation,
        AnswerType::Work,
        AnswerType::Date,
        AnswerType::Number,
        AnswerType::YesNo,
        AnswerType::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AnswerType::Person => "person",
            AnswerType::Place => "place",
            AnswerType::Organisation => "organisation",
            AnswerType::Work => "work",
            AnswerType::Date => "date",
            AnswerType::Number => "number",
            AnswerType::YesNo => "yes_no",
            AnswerType::Other => "other",
        }
    }

    /// A value code can compare (`compare` reads these with [`crate::protocol::values`]).
    pub fn is_comparable(self) -> bool {
        matches!(self, AnswerType::Date | AnswerType::Number)
    }
}

/// Which option a comparison picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    Earliest,
    Latest,
    Largest,
    Smallest,
}

impl Pick {
    const ALL: [Pick; 4] = [Pick::Earliest, Pick::Latest, Pick::Largest, Pick::Smallest];

    pub fn name(self) -> &'static str {
        match self {
            Pick::Earliest => "earliest",
            Pick::Latest => "latest",
            Pick::Largest => "largest",
            Pick::Smallest => "smallest",
        }
    }

    /// Whether the pick wants the lower value (earlier dates, smaller numbers).
    pub fn wants_lower(self) -> bool {
        matches!(self, Pick::Earliest | Pick::Smallest)
    }
}

/// One sub-question of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// The sub-question; `#k` stands for the answer of step k.
    pub question: String,
    pub answer_type: AnswerType,
}

/// One option of a `compare`, `all` or `select` plan: its name as the question gives it, and the
/// step (1-based) whose answer is its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanOption {
    pub option: String,
    pub step: usize,
}

/// How the steps' answers give the question's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FinalOp {
    /// The answers are summarised into the answer (the paper's summary).
    Answer { answer_type: AnswerType },
    /// The option whose value is the earliest, latest, largest or smallest.
    Compare { pick: Pick, options: Vec<PlanOption> },
    /// Yes when every option's yes/no step says yes.
    All { options: Vec<PlanOption> },
    /// The one option whose yes/no step says yes.
    Select { options: Vec<PlanOption> },
}

impl FinalOp {
    pub fn name(&self) -> &'static str {
        match self {
            FinalOp::Answer { .. } => "answer",
            FinalOp::Compare { .. } => "compare",
            FinalOp::All { .. } => "all",
            FinalOp::Select { .. } => "select",
        }
    }

    pub fn options(&self) -> &[PlanOption] {
        match self {
            FinalOp::Answer { .. } => &[],
            FinalOp::Compare { options, .. } | FinalOp::All { options } | FinalOp::Select { options } => options,
        }
    }

    /// What the question's own answer is: an option is whatever the options are, `all` is yes/no.
    pub fn answer_type(&self) -> Option<AnswerType> {
        match self {
            FinalOp::Answer { answer_type } => Some(*answer_type),
            FinalOp::All { .. } => Some(AnswerType::YesNo),
            FinalOp::Compare { .. } | FinalOp::Select { .. } => None,
        }
    }
}

/// A checked plan: steps with their dependencies, and the final operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionPlan {
    pub steps: Vec<PlanStep>,
    /// For each step (0-based), the earlier steps (0-based) its `#k` references name.
    pub needs: Vec<Vec<usize>>,
    #[serde(rename = "final")]
    pub final_op: FinalOp,
}

impl QuestionPlan {
    /// The question as its own one step, answered by the summary.
    pub fn whole(question: &str, answer_type: AnswerType) -> Self {
        Self {
            steps: vec![PlanStep { question: question.to_string(), answer_type }],
            needs: vec![Vec::new()],
            final_op: FinalOp::Answer { answer_type },
        }
    }

    /// Steps (0-based) no other step needs: they feed the question.
    pub fn sinks(&self) -> Vec<usize> {
        (0..self.steps.len()).filter(|i| !self.needs.iter().any(|n| n.contains(i))).collect()
    }

    /// The 0-based step of each option, in option order.
    pub fn option_steps(&self) -> Vec<usize> {
        self.final_op.options().iter().map(|o| o.step - 1).collect()
    }
}

/// The JSON the model writes: the op first, so it states the question's form before its steps.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Written {
    Answer { answer_type: AnswerType, steps: Vec<PlanStep> },
    Compare { pick: Pick, steps: Vec<PlanStep>, options: Vec<PlanOption> },
    All { steps: Vec<PlanStep>, options: Vec<PlanOption> },
    Select { steps: Vec<PlanStep>, options: Vec<PlanOption> },
}

/// Most steps a grammar-constrained plan can have.
pub const MAX_STEPS: usize = 5;
/// Most options a grammar-constrained plan can name.
pub const MAX_OPTIONS: usize = 4;

fn quoted_alternatives(names: impl Iterator<Item = &'static str>) -> String {
    names.map(|n| format!("\"\\\"{n}\\\"\"")).collect::<Vec<_>>().join(" | ")
}

/// The GBNF grammar of the plan: exactly the JSON [`read_plan`] reads, with no whitespace, 1 to
/// [`MAX_STEPS`] steps and 2 to [`MAX_OPTIONS`] options whose `step` is a single digit.
pub fn grammar() -> String {
    let types = quoted_alternatives(AnswerType::ALL.iter().map(|t| t.name()));
    let picks = quoted_alternatives(Pick::ALL.iter().map(|p| p.name()));
    let steps = format!("\"[\" step{}\"]\"", "(\",\" step".repeat(MAX_STEPS - 1) + &")?".repeat(MAX_STEPS - 1));
    let options = format!(
        "\"[\" option \",\" option{}\"]\"",
        "(\",\" option".repeat(MAX_OPTIONS - 2) + &")?".repeat(MAX_OPTIONS - 2)
    );
    format!(
        r#"root ::= answer | compare | all | select
answer ::= "{{\"op\":\"answer\",\"answer_type\":" type ",\"steps\":" steps "}}"
compare ::= "{{\"op\":\"compare\",\"pick\":" pick ",\"steps\":" steps ",\"options\":" options "}}"
all ::= "{{\"op\":\"all\",\"steps\":" steps ",\"options\":" options "}}"
select ::= "{{\"op\":\"select\",\"steps\":" steps ",\"options\":" options "}}"
steps ::= {steps}
step ::= "{{\"question\":" string ",\"answer_type\":" type "}}"
options ::= {options}
option ::= "{{\"option\":" string ",\"step\":" [1-{MAX_STEPS}] "}}"
type ::= {types}
pick ::= {picks}
string ::= "\"" [^"\\\n] char* "\""
char ::= [^"\\\n] | "\\" ["\\/nt]
"#
    )
}

/// The same format as a JSON Schema, for servers that constrain output with a response format.
pub fn json_schema() -> serde_json::Value {
    use serde_json::json;
    let types: Vec<&str> = AnswerType::ALL.iter().map(|t| t.name()).collect();
    let picks: Vec<&str> = Pick::ALL.iter().map(|p| p.name()).collect();
    let step = json!({
        "type": "object",
        "properties": {"question": {"type": "string"}, "answer_type": {"enum": types}},
        "required": ["question", "answer_type"],
        "additionalProperties": false
    });
    let steps = json!({"type": "array", "items": step, "minItems": 1, "maxItems": MAX_STEPS});
    let options = json!({
        "type": "array",
        "minItems": 2,
        "maxItems": MAX_OPTIONS,
        "items": {
            "type": "object",
            "properties": {"option": {"type": "string"}, "step": {"type": "integer", "minimum": 1, "maximum": MAX_STEPS}},
            "required": ["option", "step"],
            "additionalProperties": false
        }
    });
    let op = |name: &str, extra: serde_json::Value, required: &[&str]| {
        let mut properties = json!({"op": {"const": name}, "steps": steps});
        if let (Some(all), Some(more)) = (properties.as_object_mut(), extra.as_object()) {
            all.extend(more.clone());
        }
        let mut required: Vec<&str> = required.to_vec();
        required.extend(["op", "steps"]);
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    };
    json!({
        "oneOf": [
            op("answer", json!({"answer_type": {"enum": types}}), &["answer_type"]),
            op("compare", json!({"pick": {"enum": picks}, "options": options}), &["pick", "options"]),
            op("all", json!({"options": options}), &["options"]),
            op("select", json!({"options": options}), &["options"]),
        ]
    })
}

fn repair(rule: &str, detail: impl Into<String>) -> Repair {
    Repair { stage: "plan".to_string(), rule: rule.to_string(), detail: detail.into() }
}

/// The first balanced `{…}` object in `text` (braces inside strings ignored), and whether anything
/// but whitespace stood around it.
fn json_object(text: &str) -> Option<(&str, bool)> {
    let start = text.find('{')?;
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, c) in text[start..].char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let end = start + i + 1;
                    let around = !text[..start].trim().is_empty() || !text[end..].trim().is_empty();
                    return Some((&text[start..end], around));
                }
            }
            _ => {}
        }
    }
    None
}

/// The step numbers `#k` in `question`, in order of appearance (with repeats).
pub fn references(question: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let bytes = question.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'#' {
            let digits: String = question[i + 1..].chars().take_while(char::is_ascii_digit).collect();
            if let Ok(k) = digits.parse::<usize>() {
                found.push(k);
            }
            i += 1 + digits.len();
        } else {
            i += 1;
        }
    }
    found
}

/// `question` with each `#k` replaced by `answer(k)` (1-based); a reference `answer` gives `None`
/// for stays as it is.
pub fn substitute(question: &str, answer: impl Fn(usize) -> Option<String>) -> String {
    let mut out = String::with_capacity(question.len());
    let mut rest = question;
    while let Some(at) = rest.find('#') {
        out.push_str(&rest[..at]);
        let digits: String = rest[at + 1..].chars().take_while(char::is_ascii_digit).collect();
        match digits.parse::<usize>().ok().and_then(&answer) {
            Some(value) => out.push_str(&value),
            None => {
                out.push('#');
                out.push_str(&digits);
            }
        }
        rest = &rest[at + 1 + digits.len()..];
    }
    out.push_str(rest);
    out
}

/// Whether the question contains `option` (normalised, as a run of whole words).
pub fn question_names(question: &str, option: &str) -> bool {
    let (long, short) = (normalize_answer(question), normalize_answer(option));
    !short.is_empty() && format!(" {long} ").contains(&format!(" {short} "))
}

/// Reads the model's plan for `question` and checks it (see the module docs for the repairs).
/// Never fails: an unreadable plan is the question as one step of type `fallback_type`.
pub fn read_plan(reply: &str, question: &str, max_steps: usize, repairs: &mut Vec<Repair>) -> QuestionPlan {
    let whole = |repairs: &mut Vec<Repair>, why: String| {
        repairs.push(repair("plan_unreadable", why));
        QuestionPlan::whole(question, AnswerType::Other)
    };
    let Some((object, around)) = json_object(reply) else {
        return whole(repairs, "no JSON object in the reply".into());
    };
    if around {
        repairs.push(repair("plan_text_around_json", "text around the plan object was ignored"));
    }
    let written: Written = match serde_json::from_str(object) {
        Ok(w) => w,
        Err(e) => return whole(repairs, format!("the plan object does not fit the format: {e}")),
    };
    let (mut steps, final_op) = match written {
        Written::Answer { answer_type, steps } => (steps, FinalOp::Answer { answer_type }),
        Written::Compare { pick, steps, options } => (steps, FinalOp::Compare { pick, options }),
        Written::All { steps, options } => (steps, FinalOp::All { options }),
        Written::Select { steps, options } => (steps, FinalOp::Select { options }),
    };
    steps.retain(|s| !s.question.trim().is_empty());
    if steps.is_empty() {
        return whole(repairs, "the plan lists no step".into());
    }
    let most = max_steps.max(1);
    if steps.len() > most {
        repairs.push(repair("truncate_steps", format!("kept the first {most} of {}", steps.len())));
        steps.truncate(most);
    }
    let needs: Vec<Vec<usize>> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mut needs = Vec::new();
            for k in references(&step.question) {
                if k >= 1 && k <= i {
                    if !needs.contains(&(k - 1)) {
                        needs.push(k - 1);
                    }
                } else {
                    repairs.push(repair(
                        "drop_forward_reference",
                        format!("step {} names #{k}, which is not an earlier step", i + 1),
                    ));
                }
            }
            needs
        })
        .collect();
    let final_op = checked_options(final_op, question, steps.len(), repairs);
    QuestionPlan { steps, needs, final_op }
}

/// Keeps the options the question names and whose step exists (one option per step); an op left
/// with fewer than two options answers the question by summary instead.
fn checked_options(op: FinalOp, question: &str, steps: usize, repairs: &mut Vec<Repair>) -> FinalOp {
    let keep = |options: Vec<PlanOption>, repairs: &mut Vec<Repair>| {
        let mut kept: Vec<PlanOption> = Vec::new();
        for option in options {
            if !question_names(question, &option.option) {
                repairs.push(repair("drop_option_not_in_question", format!("`{}`", option.option)));
            } else if option.step == 0 || option.step > steps || kept.iter().any(|k| k.step == option.step) {
                repairs.push(repair(
                    "drop_option_without_step",
                    format!("`{}` names step {}", option.option, option.step),
                ));
            } else if !kept.iter().any(|k| normalize_answer(&k.option) == normalize_answer(&option.option)) {
                kept.push(option);
            }
        }
        kept
    };
    let (name, kept) = match op {
        FinalOp::Answer { .. } => return op,
        FinalOp::Compare { pick, options } => ("compare", FinalOp::Compare { pick, options: keep(options, repairs) }),
        FinalOp::All { options } => ("all", FinalOp::All { options: keep(options, repairs) }),
        FinalOp::Select { options } => ("select", FinalOp::Select { options: keep(options, repairs) }),
    };
    if kept.options().len() >= 2 {
        return kept;
    }
    repairs.push(repair("op_without_options", format!("`{name}` kept fewer than two options; summarising instead")));
    let answer_type = if name == "all" { AnswerType::YesNo } else { AnswerType::Other };
    FinalOp::Answer { answer_type }
}

/// Which option `reading` names: the one whose words it contains (the longest such option, so
/// "Rush" does not win over "Rush Limbaugh"); `None` when it names none, or two that do not contain
/// each other.
pub fn named_option(reading: &str, options: &[PlanOption]) -> Option<usize> {
    let text = format!(" {} ", normalize_answer(reading));
    let named: Vec<(usize, String)> = options
        .iter()
        .enumerate()
        .map(|(i, o)| (i, normalize_answer(&o.option)))
        .filter(|(_, o)| !o.is_empty() && text.contains(&format!(" {o} ")))
        .collect();
    let (best, longest) = named.iter().max_by_key(|(_, o)| o.len())?;
    named.iter().all(|(_, o)| longest.contains(o.as_str())).then_some(*best)
}

#[cfg(test)]
mod tests;
