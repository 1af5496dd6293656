//! Pins of the answer reader on real-looking replies. Results tables of the baselines and of the
//! uncertainty loop were computed with the readers it replaced (the baselines' final-answer parser
//! and the loop's `So the answer is:` marker); every reply here reads exactly as it did then.

use hopwise_core::text::normalize_answer;
use hopwise_reason::protocol::answer::{final_answer, marked_answer};
use hopwise_reason::protocol::sentence::first_sentence;

/// Replies to the baselines' prompts (direct, cot, rtr, self-ask, plan-solve), each with the answer
/// read from it.
const LABELLED_REPLIES: &[(&str, &str)] = &[
    ("Answer: Frank Herbert", "Frank Herbert"),
    ("Answer: Frank Herbert.", "Frank Herbert"),
    ("Frank Herbert wrote Dune in 1965.\nAnswer: Frank Herbert", "Frank Herbert"),
    (
        "Let's think step by step.\n1. The film Jaws was directed by Steven Spielberg.\n2. Steven Spielberg was born in Cincinnati, Ohio.\nAnswer: Cincinnati, Ohio",
        "Cincinnati, Ohio",
    ),
    ("**Answer:** Steven Spielberg", "Steven Spielberg"),
    ("Answer: Yes", "Yes"),
    ("Answer: Yes.", "Yes"),
    ("Answer: No, they are not both American.", "No, they are not both American"),
    ("Answer: \"The Beatles\"", "The Beatles"),
    ("Answer: Rush. Reason: Rush released Counterparts in 1993.", "Rush"),
    ("The passages say Counterparts is a 1993 album by Rush.\n\nAnswer: Rush", "Rush"),
    (
        "Answer: The director of Polish-Russian War is Xawery Żuławski.",
        "The director of Polish-Russian War is Xawery Żuławski",
    ),
    ("Answer:\nMałgorzata Braunek", "Małgorzata Braunek"),
    ("Follow up: When was Frank Herbert born?\nIntermediate answer: 1920\nSo the final answer is: 1920", "1920"),
    ("Final Answer: Paris", "Paris"),
    ("Answer: 1920.\n\nExplanation: Frank Herbert was born on October 8, 1920.", "1920"),
    // The last labelled line wins, even when it is prose about the answer.
    ("Answer: Spielberg\nThe answer is based on passage [1].", "based on passage [1]"),
    (
        "Plan:\n1. Find the author of Dune.\n2. Find the birth year.\nSolution: Frank Herbert, born 1920.\nAnswer: 1920",
        "1920",
    ),
    ("Answer: Washington, D.C.", "Washington, D.C"),
    ("answer: paris", "paris"),
    ("Answer: Steven Spielberg [1]", "Steven Spielberg [1]"),
    ("Answer: `Jaws`", "Jaws"),
    ("The answer is: Ohio.", "Ohio"),
    ("Based on the passages, the answer is Cincinnati.", "Cincinnati"),
    ("Answer: 'Til Death", "Til Death"),
    ("Answer: Xawery Żuławski\nReason: He directed Polish-Russian War (2009).", "Xawery Żuławski"),
    (
        "Step 1: Jaws (1975) was directed by Steven Spielberg.\nStep 2: Spielberg was born in Cincinnati.\n\nFinal answer: Cincinnati",
        "Cincinnati",
    ),
    ("Answer: unknown", "unknown"),
    ("Answer: Neil Peart.", "Neil Peart"),
    ("Answer: 1993", "1993"),
];

/// Sentences of the uncertainty-gated loop, each with the answer its marker carries (None: the
/// loop goes on).
const MARKER_SENTENCES: &[(&str, Option<&str>)] = &[
    ("So the answer is: Lyon.", Some("Lyon")),
    ("So the answer is Cincinnati, Ohio.", Some("Cincinnati, Ohio")),
    ("So the answer is: Steven Spielberg.", Some("Steven Spielberg")),
    ("Therefore, the answer is 1920.", Some("1920")),
    ("So the answer is: **Rush**.", Some("Rush")),
    ("So the answer is: Yes.", Some("Yes")),
    ("So the answer is: no.", Some("no")),
    ("Thus, the answer is \"1984\".", Some("1984")),
    ("So the answer is: Washington, D.C.", Some("Washington, D.C")),
    ("so THE ANSWER IS **Washington, D.C.**", Some("Washington, D.C")),
    ("Answer: yes", Some("yes")),
    ("So the answer is: Xawery Żuławski.", Some("Xawery Żuławski")),
    ("So the answer is: The Beatles.", Some("The Beatles")),
    ("So the answer is: Frank Herbert [1].", Some("Frank Herbert [1]")),
    ("The answer is Rush.", Some("Rush")),
    ("So the answer is: 'Til Death.", Some("Til Death")),
    ("So the answer is: .", None),
    ("Film X was directed by Jane Doe.", None),
    ("Jaws was directed by Steven Spielberg [1].", None),
];

#[test]
fn labelled_replies_read_as_before() {
    for (reply, answer) in LABELLED_REPLIES {
        assert_eq!(final_answer(reply), *answer, "reply {reply:?}");
    }
}

#[test]
fn marker_sentences_read_as_before() {
    for (reply, answer) in MARKER_SENTENCES {
        let sentence = first_sentence(reply);
        assert_eq!(marked_answer(&sentence).as_deref(), *answer, "sentence {sentence:?}");
    }
}

/// Where the replaced readers disagreed, the one rule reads some replies differently, each time by
/// punctuation only, so EM, F1 and cover-EM (which normalise punctuation away) are unchanged:
/// (reply, read before, read now).
const CHANGED: &[(&str, &str, &str)] = &[
    // Baselines: quotes before a full stop, repeated or exclamation marks, single `*` emphasis.
    ("Answer: \"Jaws\".", "Jaws\"", "Jaws"),
    ("Answer: Paris!", "Paris!", "Paris"),
    ("Answer: Paris...", "Paris..", "Paris"),
    ("Answer: *Jaws*", "*Jaws*", "Jaws"),
    // The uncertainty loop: curly quotes, a leading dash kept.
    ("So the answer is “Paris”.", "“Paris”", "Paris"),
    ("So the answer is - Paris.", "Paris", "- Paris"),
];

#[test]
fn changed_readings_differ_by_punctuation_only() {
    for (reply, before, now) in CHANGED {
        assert_eq!(final_answer(reply), *now, "reply {reply:?}");
        assert_eq!(normalize_answer(before), normalize_answer(now), "reply {reply:?}");
    }
}
