use proptest::prelude::*;

use super::*;

fn rules(r: &[Repair]) -> Vec<&str> {
    r.iter().map(|r| r.rule.as_str()).collect()
}

#[test]
fn reads_step_lists_in_several_styles() {
    let reply =
        "Here is the plan.\nStep 1: Who directed Jaws?\n**Step 2:** When was that director born?\n- Step 3) Where?\n\
                 Step 2 depends on Step 1.";
    let s = parse_steps(reply, 5, "plan");
    assert_eq!(s.texts, vec!["Who directed Jaws?", "When was that director born?", "Where?"]);
    assert_eq!(s.labels, vec![1, 2, 3]);
    assert!(s.repairs.is_empty());
    assert_eq!(s.numbered(), "Step 1: Who directed Jaws?\nStep 2: When was that director born?\nStep 3: Where?");
    assert_eq!(dependency_text(reply), "Here is the plan.\nStep 2 depends on Step 1.");

    let plain = parse_steps("1. Who is A?\n2. Who is B?\nStep 2 depends on Step 1.", 5, "plan");
    assert_eq!(plain.texts, vec!["Who is A?", "Who is B?"], "a numbered list without `Step` labels");
}

#[test]
fn no_steps_is_an_empty_plan() {
    for reply in ["", "I cannot plan this.", "Step 2 depends on Step 1.", "Step 1:", "Step: nothing"] {
        let s = parse_steps(reply, 5, "plan");
        assert!(s.is_empty(), "{reply:?} gave {:?}", s.texts);
    }
}

#[test]
fn step_list_repairs_are_recorded() {
    let s = parse_steps("Step 1: A?\nStep 2: a?\nStep 3: B?\nStep 4: C?", 2, "plan");
    assert_eq!(s.texts, vec!["A?", "B?"]);
    assert_eq!(rules(&s.repairs), vec!["drop_duplicate_step", "truncate_steps", "renumber_steps"]);
    // Labels 1 and 3 are kept; "Step 3 depends on Step 1" maps onto positions (1, 2).
    let (edges, repairs) = s.map_labels(&[(1, 3), (4, 3)], "plan");
    assert_eq!(edges, vec![(1, 2)]);
    assert_eq!(rules(&repairs), vec!["drop_unknown_step"]);
}

#[test]
fn dependency_sentences() {
    assert_eq!(parse_dependency_sentences("Step 2 depends on Step 1."), vec![(1, 2)]);
    assert_eq!(parse_dependency_sentences("Step 3 depends on Step 1 and Step 2."), vec![(1, 3), (2, 3)]);
    assert_eq!(parse_dependency_sentences("Step 3 depends on Steps 1 and 2"), vec![(1, 3), (2, 3)]);
    assert_eq!(parse_dependency_sentences("Steps 2 and 3 depend on Step 1."), vec![(1, 2), (1, 3)]);
    assert_eq!(
        parse_dependency_sentences("Step 2 depends on Step 1, Step 3 depends on Step 2"),
        vec![(1, 2), (2, 3)],
        "two dependencies in one clause"
    );
    assert_eq!(parse_dependency_sentences("Step 2 depends on Step 1 (and Step 3)."), vec![(1, 2), (3, 2)]);
    assert_eq!(
        parse_dependency_sentences("Step 2 needs the answer of step1.\nStep 4 relies on #3"),
        vec![(1, 2), (3, 4)]
    );
    for none in [
        "No dependencies.",
        "Step 1 does not depend on any other step.",
        "Step 2 doesn't depend on Step 1.",
        "All steps are independent.",
        "depends on Step 1",
        "banana -> ??",
        "",
    ] {
        assert!(parse_dependency_sentences(none).is_empty(), "{none:?}");
    }
}

#[test]
fn formal_edges() {
    assert_eq!(parse_formal_edges("Step 1 -> Step 2"), vec![(1, 2)]);
    assert_eq!(parse_formal_edges("(Step 1 and Step 2) -> Step 3"), vec![(1, 3), (2, 3)]);
    assert_eq!(parse_formal_edges("Step 1 -> (Step 2 and Step 3)"), vec![(1, 2), (1, 3)]);
    assert_eq!(parse_formal_edges("Step 1 → Step 2 => Step 3"), vec![(1, 2), (2, 3)]);
    assert_eq!(parse_formal_edges("Edges: Step 1 -> Step 2; (Step 1, Step 2) -> Step 4"), vec![(1, 2), (1, 4), (2, 4)]);
    assert_eq!(parse_formal_edges("So Step 1 -> Step 2 because it needs the name"), vec![(1, 2)]);
    assert_eq!(parse_formal_edges("Step 12 -> Step 13"), vec![(12, 13)], "multi-digit steps");
    assert!(parse_formal_edges("None").is_empty());
    assert!(parse_formal_edges("-> -> Step").is_empty());
}

#[test]
fn repairs_forward_dependencies_cycles_and_unknown_steps() {
    // Step 1 depending on Step 3 is a forward dependency; 2 -> 1 after 1 -> 2 closes a cycle.
    let d = repair_dependencies(3, &[(1, 2), (3, 1), (2, 1), (2, 2), (1, 9), (1, 2), (2, 3)], "formalize");
    assert_eq!(d.edges, vec![(1, 2), (2, 3)]);
    assert_eq!(
        rules(&d.repairs),
        vec!["drop_forward_dependency", "drop_cycle_edge", "drop_self_dependency", "drop_unknown_step"]
    );
    assert_eq!(d.parents(3), vec![2]);
    assert!(d.has_dependents(1) && !d.has_dependents(3));
    assert!(repair_dependencies(0, &[(1, 2)], "x").edges.is_empty());
}

proptest! {
    #[test]
    fn parsers_never_panic_and_repaired_graphs_point_forward(text in "(?s).{0,300}", n in 0usize..8) {
        let steps = parse_steps(&text, 6, "plan");
        prop_assert!(steps.len() <= 6);
        prop_assert_eq!(steps.texts.len(), steps.labels.len());
        let mut raw = parse_dependency_sentences(&text);
        raw.extend(parse_formal_edges(&text));
        let d = repair_dependencies(n, &raw, "p");
        for &(a, b) in &d.edges {
            prop_assert!(a < b && b <= n && a >= 1);
        }
        let (mapped, _) = steps.map_labels(&raw, "p");
        for &(a, b) in &mapped {
            prop_assert!(a >= 1 && a <= steps.len() && b >= 1 && b <= steps.len());
        }
    }

    #[test]
    fn written_edges_are_read_back(edges in proptest::collection::vec((1usize..9, 1usize..9), 0..6)) {
        let formal: String = edges.iter().map(|(a, b)| format!("Step {a} -> Step {b}\n")).collect();
        prop_assert_eq!(parse_formal_edges(&formal), edges.clone());
        let sentences: String = edges.iter().map(|(a, b)| format!("Step {b} depends on Step {a}. ")).collect();
        prop_assert_eq!(parse_dependency_sentences(&sentences), edges);
    }

    #[test]
    fn numbered_plans_round_trip(items in proptest::collection::vec("[A-Za-z][a-z ]{0,20}\\?", 1..5)) {
        let reply: String = items.iter().enumerate().map(|(i, q)| format!("Step {}: {q}\n", i + 1)).collect();
        let steps = parse_steps(&reply, 10, "plan");
        let mut expected: Vec<String> = Vec::new();
        for q in &items {
            if !expected.iter().any(|e| normalize_answer(e) == normalize_answer(q.trim())) {
                expected.push(q.trim().to_string());
            }
        }
        prop_assert_eq!(steps.texts, expected);
    }
}
