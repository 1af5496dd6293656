use super::*;
use proptest::prelude::*;

fn sub(i: usize) -> GraphNode {
    GraphNode::Sub(i)
}
const Q: GraphNode = GraphNode::Sink;

fn rules(t: &Topology) -> Vec<&str> {
    t.repairs.iter().map(|r| r.rule.as_str()).collect()
}

#[test]
fn numbered_lists_in_many_styles() {
    let text =
        "Sub-questions:\n1. Who directed Jaws?\n2) When was he born?\n(3) Where?\nQ4: What else?\nStep 5: Last one?";
    assert_eq!(
        parse_numbered_list(text),
        vec!["Who directed Jaws?", "When was he born?", "Where?", "What else?", "Last one?"]
    );
    assert_eq!(parse_numbered_list("10. Ten?\n1. One?"), vec!["Ten?", "One?"]);
    assert_eq!(parse_numbered_list("**1.** Bold?\n1. Bold?"), vec!["Bold?"], "duplicates removed");
    assert_eq!(parse_numbered_list("Here you go\nWho is A?\nWho is B?"), vec!["Who is A?", "Who is B?"]);
    assert!(parse_numbered_list("").is_empty());
    assert!(parse_numbered_list("no list here").is_empty());
}

#[test]
fn critique_maps_back_to_original_indices() {
    let orig: Vec<String> =
        vec!["Who directed Jaws?".into(), "When was Jaws released?".into(), "Who directed Jaws?!".into()];
    let mut r = Vec::new();
    assert_eq!(parse_critique("1. Who directed Jaws?", &orig, &mut r), vec![0]);
    assert_eq!(parse_critique("Keep 2 and 1", &orig, &mut r), vec![0, 1]);
    assert!(r.is_empty());
    assert_eq!(parse_critique("", &orig, &mut r), vec![0, 1, 2]);
    assert_eq!(r[0].rule, "critique_kept_nothing");
}

#[test]
fn chains_fans_and_multi_digit_ids() {
    let t = parse_edges("1 -> 2 -> Q", 2, "construct");
    assert_eq!(t.edges, vec![(sub(1), sub(2)), (sub(2), Q)]);
    assert!(t.repairs.is_empty());

    let t = parse_edges("1 -> Q\n2 -> Q", 2, "construct");
    assert_eq!(t.edges, vec![(sub(1), Q), (sub(2), Q)]);

    let t = parse_edges("10 -> 1\n1 -> Q", 10, "construct");
    assert!(t.edges.contains(&(sub(10), sub(1))));
    assert!(!t.edges.contains(&(sub(1), sub(1))), "10 is not read as 1");
}

#[test]
fn prose_groups_and_arrow_styles() {
    let t = parse_edges(
        "Sure! Here are the edges:\n- Sub-question 1 → Sub-question 2 because we need the director.\n2 => Q.",
        2,
        "c",
    );
    assert_eq!(t.edges, vec![(sub(1), sub(2)), (sub(2), Q)]);
    let t = parse_edges("(1 and 2) -> 3; 3 -> Q", 3, "c");
    assert_eq!(t.edges, vec![(sub(1), sub(3)), (sub(2), sub(3)), (sub(3), Q)]);
    let t = parse_edges("Step 1 -> (Step 2 and Step 3)\n2, 3 -> Q", 3, "c");
    assert_eq!(t.edges, vec![(sub(1), sub(2)), (sub(1), sub(3)), (sub(2), Q), (sub(3), Q)]);
}

#[test]
fn repairs_cycles_self_loops_unknown_ids_and_loose_nodes() {
    let t = parse_edges("1 -> 2\n2 -> 1\n2 -> 2\n7 -> Q\nQ -> 1\n2 -> Q", 3, "c");
    assert_eq!(t.edges, vec![(sub(1), sub(2)), (sub(2), Q), (sub(3), Q)]);
    assert_eq!(
        rules(&t),
        vec!["drop_cycle_edge", "drop_self_loop", "drop_unknown_id", "drop_edge_from_sink", "wire_sink_to_q"]
    );
}

#[test]
fn no_edges_falls_back_to_a_chain() {
    let t = parse_edges("I think they are related.", 3, "c");
    assert_eq!(t.edges, Topology::chain(3).edges);
    assert_eq!(rules(&t), vec!["no_edges_chain"]);
    assert!(parse_edges("", 0, "c").edges.is_empty());
}

#[test]
fn parents_are_read_from_edges() {
    let t = parse_edges("1 -> 3\n2 -> 3\n3 -> Q", 3, "c");
    assert_eq!(t.parents(3), vec![1, 2]);
    assert!(t.parents(1).is_empty());
}

#[test]
fn no_sentinel_variants() {
    for yes in [
        "NO!",
        "no!",
        "No!",
        " NO! ",
        "NO !",
        "NO! I cannot answer that.",
        "Answer: NO!",
        "\"NO!\"",
        "NO",
        "**NO!**",
        "I don't have that information. NO!",
    ] {
        assert!(is_no_sentinel(yes), "{yes:?} is the sentinel");
    }
    for no in [
        "No, they are not both guitarists.",
        "No.",
        "No",
        "Nolan",
        "Norway",
        "no",
        "Steven Spielberg",
        "None of them",
        "",
    ] {
        assert!(!is_no_sentinel(no), "{no:?} is an answer");
    }
}

#[test]
fn hedges_count_as_unanswered_only_with_a_phrase_list() {
    let english = Hedges::from_prompts(&hopwise_core::Prompts::default());
    assert!(english.is_unanswered("I don't know."));
    assert!(english.is_unanswered("The passages do not contain this information."));
    assert!(!english.is_unanswered(&format!("{} but it does not contain the date.", "Ann Lee wrote it, ".repeat(8))));
    assert!(!english.is_unanswered("No, they are not."));
    assert!(!english.is_unanswered("Steven Spielberg"));
    let sentinel_only = Hedges::none();
    assert!(sentinel_only.is_unanswered("NO!") && sentinel_only.is_unanswered(""));
    assert!(!sentinel_only.is_unanswered("I don't know."));
    let o = std::collections::BTreeMap::from([(Hedges::TEMPLATE.to_string(), "Weiß nicht".to_string())]);
    let german = Hedges::from_prompts(&hopwise_core::Prompts::default().with_overrides(&o).expect("valid"));
    assert!(german.is_unanswered("Das weiß nicht einmal das Buch."));
    assert!(!german.is_unanswered("I don't know."));
}

#[test]
fn answers_and_finals_are_cleaned() {
    assert_eq!(answer::short_answer("Answer: Steven Spielberg.\nHe directed it."), "Steven Spielberg");
    assert_eq!(answer::short_answer("\n\n  Paris"), "Paris");
    let (a, r) = answer::answer_with_reason("Answer: Rush\nReason: Neil Peart was their drummer.");
    assert_eq!(a, "Rush");
    assert_eq!(r.as_deref(), Some("Neil Peart was their drummer."));
    let (a, r) = answer::answer_with_reason("**Final answer:** yes");
    assert_eq!(a, "yes");
    assert!(r.is_none());
    assert_eq!(answer::answer_with_reason("Rush.").0, "Rush");
}

fn acyclic(t: &Topology) -> bool {
    t.edges.iter().all(|&(a, b)| !reaches(&t.edges, b, a))
}

proptest! {
    #[test]
    fn edges_parser_never_panics_and_always_repairs(text in ".{0,200}", n in 0usize..12) {
        let t = parse_edges(&text, n, "p");
        prop_assert!(acyclic(&t));
        for i in 1..=n {
            prop_assert!(t.edges.iter().any(|(f, _)| *f == GraphNode::Sub(i)), "node {} reaches out", i);
        }
        for (a, b) in &t.edges {
            prop_assert!(*a != GraphNode::Sink);
            prop_assert!(a != b);
            if let GraphNode::Sub(i) = a { prop_assert!((1..=n).contains(i)); }
            if let GraphNode::Sub(i) = b { prop_assert!((1..=n).contains(i)); }
        }
    }

    #[test]
    fn arbitrary_edge_lists_become_dags(raw in proptest::collection::vec((0usize..8, 0usize..8), 0..30), n in 1usize..7) {
        let to_node = |x: usize| if x == 0 { GraphNode::Sink } else { GraphNode::Sub(x) };
        let text: String = raw.iter().map(|&(a, b)| format!("{} -> {}\n", to_node(a), to_node(b))).collect();
        let t = parse_edges(&text, n, "p");
        prop_assert!(acyclic(&t));
    }

    #[test]
    fn list_and_sentinel_parsers_never_panic(text in "\\PC{0,300}") {
        let _ = parse_numbered_list(&text);
        let _ = is_no_sentinel(&text);
        let _ = Hedges::from_prompts(&hopwise_core::Prompts::default()).is_unanswered(&text);
        let _ = answer::short_answer(&text);
        let _ = answer::answer_with_reason(&text);
        let mut r = Vec::new();
        let orig = vec!["a?".to_string(), "b?".to_string()];
        let kept = parse_critique(&text, &orig, &mut r);
        prop_assert!(!kept.is_empty() && kept.iter().all(|&i| i < 2));
    }
}
