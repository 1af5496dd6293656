//! Baseline strategies the papers compare against, one small module per family. Their replies end
//! with an `Answer: …` line, read by [`final_answer`]; they record every step as a trace node so the
//! CLI, the server and the evaluator can show what they did.

pub mod cot;
pub mod direct;
pub mod least_to_most;
pub mod plan_solve;
pub mod rtr;
pub mod self_ask;

pub(crate) use crate::chain::{record_sink, step_node};
pub use crate::protocol::answer::final_answer;

/// Shared with the retriever wrappers of `hopwise-index`, so it lives in `hopwise-core`.
pub use hopwise_core::text::parse_numbered_list;

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

    /// The queries `trace` searched with, in order.
    pub fn searched_queries(trace: &hopwise_core::Trace) -> Vec<String> {
        trace
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                hopwise_core::EventKind::Retrieval { query, .. } => Some(query.clone()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let _ = parse_numbered_list(&reply, 6);
            let _ = super::self_ask::parse_self_ask_step(&reply);
        }
    }
}
