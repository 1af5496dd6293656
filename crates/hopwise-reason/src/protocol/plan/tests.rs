use super::*;

fn read(reply: &str, question: &str) -> (QuestionPlan, Vec<String>) {
    let mut repairs = Vec::new();
    let plan = read_plan(reply, question, MAX_STEPS, &mut repairs);
    (plan, repairs.into_iter().map(|r| r.rule).collect())
}

#[test]
fn a_chain_reads_with_its_dependencies() {
    let q = "Who is the mother of the director of Blue Lanterns?";
    let reply = r##"{"op":"answer","answer_type":"person","steps":[{"question":"Who directed Blue Lanterns?","answer_type":"person"},{"question":"Who is the mother of #1?","answer_type":"person"}]}"##;
    let (plan, repairs) = read(reply, q);
    assert!(repairs.is_empty(), "{repairs:?}");
    assert_eq!(plan.steps.len(), 2);
    assert_eq!(plan.needs, vec![vec![], vec![0]]);
    assert_eq!(plan.sinks(), vec![1]);
    assert_eq!(plan.final_op, FinalOp::Answer { answer_type: AnswerType::Person });
}

#[test]
fn a_comparison_keeps_the_options_the_question_names() {
    let q = "Which film came out first, Blue Lanterns or Night Ferry?";
    let reply = r#"Here is the plan: {"op":"compare","pick":"earliest","steps":[{"question":"When did Blue Lanterns come out?","answer_type":"date"},{"question":"When did Night Ferry come out?","answer_type":"date"}],"options":[{"option":"Blue Lanterns","step":1},{"option":"Night Ferry","step":2}]} done"#;
    let (plan, repairs) = read(reply, q);
    assert_eq!(repairs, ["plan_text_around_json"]);
    assert_eq!(plan.option_steps(), vec![0, 1]);
    assert!(matches!(plan.final_op, FinalOp::Compare { pick: Pick::Earliest, .. }));
    assert_eq!(plan.sinks(), vec![0, 1]);
}

#[test]
fn options_the_question_does_not_name_or_without_a_step_are_dropped() {
    let q = "Are Blue Lanterns and Night Ferry both films?";
    let reply = r#"{"op":"all","steps":[{"question":"Is Blue Lanterns a film?","answer_type":"yes_no"}],"options":[{"option":"Blue Lanterns","step":1},{"option":"Night Ferry","step":2}]}"#;
    let (plan, repairs) = read(reply, q);
    assert_eq!(repairs, ["drop_option_without_step", "op_without_options"]);
    assert_eq!(plan.final_op, FinalOp::Answer { answer_type: AnswerType::YesNo });
    let reply = r#"{"op":"select","steps":[{"question":"Is A old?","answer_type":"yes_no"},{"question":"Is B old?","answer_type":"yes_no"}],"options":[{"option":"Red Moon","step":1},{"option":"Night Ferry","step":2}]}"#;
    let (_, repairs) = read(reply, q);
    assert_eq!(repairs, ["drop_option_not_in_question", "op_without_options"]);
}

#[test]
fn references_to_the_step_itself_or_later_ones_are_not_dependencies() {
    let reply = r##"{"op":"answer","answer_type":"other","steps":[{"question":"What is #2?","answer_type":"other"},{"question":"What about #1 and #1?","answer_type":"other"}]}"##;
    let (plan, repairs) = read(reply, "q");
    assert_eq!(repairs, ["drop_forward_reference"]);
    assert_eq!(plan.needs, vec![vec![], vec![0]]);
}

#[test]
fn an_unreadable_plan_is_the_question_as_one_step() {
    for reply in
        ["1. Who?\n2. What?", "{\"op\":\"answer\"}", "{\"op\":\"answer\",\"answer_type\":\"person\",\"steps\":[]}", ""]
    {
        let (plan, repairs) = read(reply, "Who directed Jaws?");
        assert_eq!(repairs, ["plan_unreadable"], "{reply}");
        assert_eq!(plan.steps[0].question, "Who directed Jaws?");
    }
}

#[test]
fn too_many_steps_are_cut() {
    let steps: Vec<String> = (1..=5).map(|i| format!(r#"{{"question":"Q{i}?","answer_type":"other"}}"#)).collect();
    let reply = format!(r#"{{"op":"answer","answer_type":"other","steps":[{}]}}"#, steps.join(","));
    let mut repairs = Vec::new();
    let plan = read_plan(&reply, "q", 3, &mut repairs);
    assert_eq!(plan.steps.len(), 3);
    assert_eq!(repairs[0].rule, "truncate_steps");
}

#[test]
fn substitution_puts_answers_in_place_of_references() {
    let filled = substitute("Who is the mother of #1, born in #12?", |k| (k == 1).then(|| "Ann Lee".to_string()));
    assert_eq!(filled, "Who is the mother of Ann Lee, born in #12?");
    assert_eq!(references("#1 and #2 and # and #10"), vec![1, 2, 10]);
}

#[test]
fn a_reading_names_the_longest_option_it_contains() {
    let options = vec![
        PlanOption { option: "Rush".into(), step: 1 },
        PlanOption { option: "Rush Limbaugh".into(), step: 2 },
        PlanOption { option: "Genesis".into(), step: 3 },
    ];
    assert_eq!(named_option("It was Rush Limbaugh.", &options), Some(1));
    assert_eq!(named_option("rush", &options), Some(0));
    assert_eq!(named_option("Rush and Genesis", &options), None, "two options");
    assert_eq!(named_option("Yes", &options), None);
}

#[test]
fn every_plan_the_grammar_admits_reads_without_repairs() {
    // One sentence of each op, as the grammar writes them (no whitespace).
    let q = "Which is older, Red Moon or Night Ferry, and are both films?";
    for reply in [
        r#"{"op":"answer","answer_type":"yes_no","steps":[{"question":"Is Red Moon a film?","answer_type":"yes_no"}]}"#,
        r#"{"op":"compare","pick":"latest","steps":[{"question":"a","answer_type":"number"},{"question":"b","answer_type":"number"}],"options":[{"option":"Red Moon","step":1},{"option":"Night Ferry","step":2}]}"#,
        r#"{"op":"select","steps":[{"question":"a","answer_type":"yes_no"},{"question":"b","answer_type":"yes_no"}],"options":[{"option":"Red Moon","step":1},{"option":"Night Ferry","step":2}]}"#,
    ] {
        let (_, repairs) = read(reply, q);
        assert!(repairs.is_empty(), "{reply}: {repairs:?}");
    }
    let grammar = grammar();
    for rule in [
        "root ::=",
        "answer ::=",
        "compare ::=",
        "all ::=",
        "select ::=",
        "step ::=",
        "option ::=",
        "type ::=",
        "pick ::=",
    ] {
        assert!(grammar.contains(rule), "{rule}");
    }
    assert!(grammar.contains("\\\"yes_no\\\""), "{grammar}");
    let schema = json_schema();
    assert_eq!(schema["oneOf"].as_array().map(Vec::len), Some(4));
}
