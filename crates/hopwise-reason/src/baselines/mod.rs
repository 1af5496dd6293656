//! Baseline strategies the papers compare against, one small module per family. They share the
//! final-answer parser and the list parser below, and record every step as a trace node so the CLI,
//! the server and the evaluator can show what they did.

pub mod cot;
pub mod direct;
pub mod least_to_most;
pub mod plan_solve;
pub mod rtr;
pub mod self_ask;

use hopwise_core::trace::SINK;
use hopwise_core::{Decision, NodeTrace, Passage};

use crate::ctx::Ctx;

/// Markers after which a model states its final answer, most specific first.
const ANSWER_MARKERS: &[&str] =
    &["so the final answer is", "the final answer is", "final answer", "the answer is", "answer is", "answer"];

/// Extracts the short final answer from a model reply.
///
/// Looks for the last line carrying an answer marker ("Answer: X", "So the final answer is: X",
/// "**Final answer:** X", …) and returns what follows it (or the next non-empty line when the marker
/// ends its line). Without a marker, a one-line reply is the answer itself; a longer reply's last
/// non-empty line is taken. Markdown emphasis, surrounding quotes and a trailing full stop are removed.
pub fn parse_final_answer(reply: &str) -> String {
    let lines: Vec<&str> = reply.lines().map(str::trim).collect();
    for (i, line) in lines.iter().enumerate().rev() {
        let plain = strip_emphasis(line);
        // ASCII lower-casing keeps byte offsets, so positions found in `lower` are valid in `plain`.
        let lower = plain.to_ascii_lowercase();
        for marker in ANSWER_MARKERS {
            let Some(pos) = lower.rfind(marker) else {
                continue;
            };
            // "answer" must be a label ("Answer:" / "answer is"), not a word inside prose.
            let after = &plain[pos + marker.len()..];
            let after_trim = after.trim_start();
            let labelled = after_trim.starts_with(':') || marker.ends_with(" is");
            if !labelled {
                continue;
            }
            let value = after_trim.trim_start_matches(':').trim();
            if !value.is_empty() {
                return clean_answer(value);
            }
            if let Some(next) = lines[i + 1..].iter().find(|l| !l.is_empty()) {
                return clean_answer(&strip_emphasis(next));
            }
        }
    }
    let non_empty: Vec<&str> = lines.iter().copied().filter(|l| !l.is_empty()).collect();
    match non_empty.as_slice() {
        [] => String::new(),
        [only] => clean_answer(&strip_emphasis(only)),
        [.., last] => clean_answer(&strip_emphasis(last)),
    }
}

fn strip_emphasis(s: &str) -> String {
    s.replace("**", "").replace("__", "")
}

fn clean_answer(s: &str) -> String {
    let s = s.trim();
    // A reason given on the same line ("X. Reason: …") is not part of the answer.
    let s = match s.to_ascii_lowercase().find("reason:") {
        Some(pos) => s[..pos].trim(),
        None => s,
    };
    let s = s.trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c == '“' || c == '”');
    let s = s.strip_suffix('.').unwrap_or(s);
    s.trim().to_string()
}

/// Shared with the retriever wrappers of `hopwise-index`, so it lives in `hopwise-core`.
pub use hopwise_core::text::parse_numbered_list;

/// A node for one step of a baseline.
pub(crate) fn step_node(id: &str, question: &str, parents: Vec<String>) -> NodeTrace {
    NodeTrace { id: id.to_string(), question: question.to_string(), parents, ..Default::default() }
}

/// Records the sink node `Q` with the final answer.
pub(crate) fn record_sink(
    ctx: &Ctx,
    question: &str,
    answer: &str,
    decision: Decision,
    parents: Vec<String>,
    passages: Vec<Passage>,
    extra: serde_json::Value,
) {
    for parent in &parents {
        ctx.rec().add_edge(parent, SINK);
    }
    ctx.rec().upsert_node(NodeTrace {
        id: SINK.to_string(),
        question: question.to_string(),
        parents,
        decision,
        answer: Some(answer.to_string()),
        passages,
        extra,
        ..Default::default()
    });
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::Arc;

    use async_trait::async_trait;
    use hopwise_core::scripted::ScriptedLlm;
    use hopwise_core::{Passage, Prompts, Recorder, Retriever};

    use crate::ctx::Ctx;

    /// A retriever over a fixed list: returns passages whose text shares a word with the query.
    pub struct TinyRetriever(pub Vec<Passage>);

    #[async_trait]
    impl Retriever for TinyRetriever {
        fn name(&self) -> &str {
            "tiny"
        }
        async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
            let words: Vec<String> =
                query.to_lowercase().split_whitespace().map(|w| w.trim_matches('?').to_string()).collect();
            Ok(self
                .0
                .iter()
                .filter(|p| words.iter().any(|w| w.len() > 3 && p.text.to_lowercase().contains(w.as_str())))
                .take(k)
                .cloned()
                .collect())
        }
    }

    pub fn passage(id: &str, title: &str, text: &str) -> Passage {
        Passage { id: id.into(), title: title.into(), text: text.into(), score: 1.0, ..Default::default() }
    }

    pub fn ctx(llm: ScriptedLlm, strategy: &str, retriever: Option<Vec<Passage>>) -> Ctx {
        let rec = Recorder::new("q", strategy);
        let ctx = Ctx::new(Arc::new(llm), Arc::new(Prompts::default()), rec);
        ctx.with_retriever(retriever.map(|ps| Arc::new(TinyRetriever(ps)) as Arc<dyn Retriever>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_answer_forms() {
        assert_eq!(parse_final_answer("Answer: Paris"), "Paris");
        assert_eq!(parse_final_answer("Step 1 ...\nStep 2 ...\nAnswer: The Beatles."), "The Beatles");
        assert_eq!(parse_final_answer("So the final answer is: 1912"), "1912");
        assert_eq!(parse_final_answer("**Final Answer:** Rush"), "Rush");
        assert_eq!(parse_final_answer("answer:\n\n  Neil Peart  \n"), "Neil Peart");
        assert_eq!(parse_final_answer("Paris"), "Paris");
        assert_eq!(parse_final_answer("I think so.\nThe answer is yes."), "yes");
        assert_eq!(parse_final_answer("Answer: Rush. Reason: they released it."), "Rush");
        assert_eq!(parse_final_answer("The answer depends.\nLondon"), "London", "unlabelled 'answer' is prose");
        assert_eq!(parse_final_answer(""), "");
        assert_eq!(parse_final_answer("Answer: \"Yes\""), "Yes");
        assert_eq!(
            parse_final_answer("4. Compare.\n5. The short answer is: Love In A Fallen City"),
            "Love In A Fallen City"
        );
        // Characters whose lower case has another byte length must not shift the cut.
        assert_eq!(parse_final_answer("İİİ answer: Ünïcode Ⅻ"), "Ünïcode Ⅻ");
        assert_eq!(parse_final_answer("ẞẞ Answer: X. REASON: y"), "X");
    }

    #[test]
    fn numbered_lists() {
        let l = parse_numbered_list("Here:\n1. Who directed X?\n2) When was he born?\nStep 3: Compare.\n", 6);
        assert_eq!(l, vec!["Who directed X?", "When was he born?", "Compare."]);
        let q = parse_numbered_list("Who is A?\nsome prose\nWhere is B?", 6);
        assert_eq!(q, vec!["Who is A?", "Where is B?"]);
        assert_eq!(parse_numbered_list("1. a\n2. b\n3. c", 2).len(), 2);
        assert!(parse_numbered_list("1999 was a year", 6).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(reply in "\\PC{0,200}") {
            let _ = parse_final_answer(&reply);
            let _ = parse_numbered_list(&reply, 6);
            let _ = super::self_ask::parse_self_ask_step(&reply);
        }

        #[test]
        fn a_labelled_answer_line_is_found(answer in "[A-Za-z][A-Za-z0-9 ]{0,30}[A-Za-z0-9]", prose in "[a-z ,]{0,80}") {
            let reply = format!("{prose}\nAnswer: {answer}");
            proptest::prop_assert_eq!(parse_final_answer(&reply), answer.trim().to_string());
        }
    }
}
