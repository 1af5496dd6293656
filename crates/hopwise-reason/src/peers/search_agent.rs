//! A search agent: the ReAct-style prompting baseline of the Search-R1 / R1-Searcher / Search-o1
//! line (Jin et al., 2025, "Search-R1"; Yao et al., 2023, "ReAct"), run without training.
//!
//! Each turn the model thinks inside `<think>…</think>` and then either searches with
//! `<search>query</search>`, whose top `k` passages are appended to the transcript inside
//! `<information>…</information>`, or answers with `<answer>…</answer>`. After `max_searches`
//! searches, a repeated query or a turn with no action, one last turn must answer. On the local
//! engine every turn is constrained by a grammar ([`TURN_GRAMMAR`]), so a small model cannot break
//! the tag protocol; other backends stop at the closing tag and the reader tolerates what they write.
//!
//! Departures from the papers: the prompt is zero-shot and the model untrained for the protocol (the
//! baseline those papers report as "prompted"/"ReAct"); a repeated query ends the search phase.

use async_trait::async_trait;
use hopwise_core::trace::SINK;
use hopwise_core::{Decision, GenParams, Passage};
use serde::Deserialize;

use super::chain_node;
use crate::chain::record_sink;
use crate::ctx::Ctx;
use crate::details::baseline::BaselineNode;
use crate::error::{ReasonError, Result};
use crate::protocol::agent::{read_turn, transcript_turn, AgentAction, ANSWER_GRAMMAR, TURN_GRAMMAR, TURN_STOPS};
use crate::protocol::answer::final_answer;
use crate::strategy::api::{Answer, Strategy};

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchAgentOptions {
    /// Searches allowed before the agent must answer.
    pub max_searches: u32,
    /// Passages per search; the context's `k` when not set.
    pub k: Option<usize>,
    /// Tokens one turn (thought and action) may take.
    pub turn_tokens: u32,
}

impl Default for SearchAgentOptions {
    fn default() -> Self {
        Self { max_searches: 4, k: None, turn_tokens: 256 }
    }
}

pub struct SearchAgent {
    opts: SearchAgentOptions,
}

impl SearchAgent {
    pub fn new(opts: SearchAgentOptions) -> Result<Self> {
        if opts.turn_tokens < 16 {
            return Err(ReasonError::InvalidOption("strategy `search-agent`: turn_tokens must be at least 16".into()));
        }
        Ok(Self { opts })
    }

    fn params(&self, ctx: &Ctx, grammar: &str) -> GenParams {
        GenParams {
            n: 1,
            max_tokens: self.opts.turn_tokens,
            grammar: Some(grammar.to_string()),
            stop: TURN_STOPS.iter().map(|s| s.to_string()).collect(),
            ..ctx.params().clone()
        }
    }
}

#[async_trait]
impl Strategy for SearchAgent {
    fn name(&self) -> &str {
        "search-agent"
    }

    async fn answer(&self, ctx: &Ctx, question: &str) -> Result<Answer> {
        let k = self.opts.k.unwrap_or(ctx.k()).max(1);
        let mut transcript = String::new();
        let mut queries: Vec<String> = Vec::new();
        let mut read: Vec<Passage> = Vec::new();
        let mut answer = None;
        loop {
            if queries.len() >= self.opts.max_searches as usize {
                break;
            }
            let prompt = ctx.render("search_agent", &[("question", question), ("transcript", &transcript)])?;
            let reply = ctx.chat("agent_turn", Some(SINK), prompt, self.params(ctx, TURN_GRAMMAR)).await?;
            let reply = reply.text().trim().to_string();
            match read_turn(&reply) {
                Some(AgentAction::Answer(a)) => {
                    answer = Some(a);
                    break;
                }
                Some(AgentAction::Search(query)) if queries.iter().any(|q| q.eq_ignore_ascii_case(&query)) => {
                    ctx.rec().note(format!("the agent repeated the search `{query}`; asking for the answer"));
                    break;
                }
                Some(action @ AgentAction::Search(_)) => {
                    let AgentAction::Search(query) = &action else { unreachable!("matched above") };
                    let step = queries.len() + 1;
                    let id = step.to_string();
                    if step > 1 {
                        ctx.rec().add_edge(&(step - 1).to_string(), &id);
                    }
                    ctx.rec().upsert_node(chain_node(step, query));
                    let found = ctx.retrieve(Some(&id), query, k).await?;
                    transcript.push_str(&transcript_turn(&reply, &action));
                    transcript.push_str(&format!("\n<information>\n{}\n</information>\n", ctx.format_passages(&found)));
                    for p in &found {
                        if !read.iter().any(|q| q.id == p.id) {
                            read.push(p.clone());
                        }
                    }
                    ctx.rec().update_node(&id, |n| {
                        n.decision = Decision::Retrieved;
                        n.passages = found;
                    });
                    queries.push(query.clone());
                }
                None => {
                    ctx.rec().note("the agent's turn held neither a search nor an answer; asking for the answer");
                    break;
                }
            }
        }
        let forced = answer.is_none();
        let text = match answer {
            Some(a) => a,
            None => {
                let prompt =
                    ctx.render("search_agent_final", &[("question", question), ("transcript", &transcript)])?;
                let reply = ctx.chat("agent_answer", Some(SINK), prompt, self.params(ctx, ANSWER_GRAMMAR)).await?;
                match read_turn(reply.text()) {
                    Some(AgentAction::Answer(a)) => a,
                    _ => final_answer(reply.text()),
                }
            }
        };
        let parents = if queries.is_empty() { Vec::new() } else { vec![queries.len().to_string()] };
        let decision = if queries.is_empty() { Decision::Known } else { Decision::Retrieved };
        let detail = BaselineNode { forced_final: Some(forced), ..Default::default() };
        record_sink(ctx, question, &text, decision, parents, read, Some(detail));
        Ok(Answer { text, rationale: (!transcript.is_empty()).then_some(transcript) })
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::ScriptedLlm;

    use super::*;
    use crate::baselines::test_support::{ctx, passage, searched_queries as queries};
    use crate::strategy::run;

    /// The tiny retriever returns matches in list order: the birthplace passage comes first once a
    /// query names Herbert.
    fn docs() -> Vec<Passage> {
        vec![
            passage("p2", "Frank Herbert", "Frank Herbert was born in Tacoma."),
            passage("p1", "Dune", "Dune is a novel written by Frank Herbert."),
        ]
    }

    #[tokio::test]
    async fn searches_until_it_answers_and_sees_what_it_found() {
        let llm = ScriptedLlm::new().on_fn("Each turn", |prompt, _| {
            if prompt.contains("born in Tacoma") {
                "<think>Found it.</think>\n<answer>Tacoma</answer>".into()
            } else if prompt.contains("written by Frank Herbert") {
                "<think>Now where he was born.</think>\n<search>Frank Herbert birthplace".into()
            } else {
                "<think>Who wrote Dune?</think>\n<search>Dune novel author".into()
            }
        });
        let c = ctx(llm.clone(), "search-agent", Some(docs()));
        let opts = SearchAgentOptions { k: Some(1), ..Default::default() };
        let trace = run(&SearchAgent::new(opts).expect("options"), &c, "Where was the author of Dune born?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "Tacoma");
        assert_eq!(queries(&trace), ["Dune novel author", "Frank Herbert birthplace"]);
        assert_eq!(trace.stats.llm_calls, 3);
        // The transcript restored the closing tag the stop sequence removed, and shows what was found.
        let calls = llm.calls();
        assert!(calls[1].contains("<search>Dune novel author</search>\n<information>\n[1] Dune:"), "{}", calls[1]);
        let detail: Option<BaselineNode> = trace.node("Q").and_then(crate::details::read);
        assert_eq!(detail.and_then(|d| d.forced_final), Some(false));
        assert_eq!(trace.node("Q").map(|n| n.parents.clone()), Some(vec!["2".to_string()]));
    }

    #[tokio::test]
    async fn the_search_budget_or_a_repeated_query_forces_an_answer() {
        let llm = ScriptedLlm::new()
            .on("Each turn", "<think>Search again.</think>\n<search>Dune</search>")
            .on("Answer the question from what the searches", "<think>So.</think>\n<answer>Frank Herbert</answer>");
        let c = ctx(llm.clone(), "search-agent", Some(docs()));
        let trace = run(&SearchAgent::new(SearchAgentOptions::default()).expect("options"), &c, "Who wrote Dune?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "Frank Herbert");
        assert_eq!(queries(&trace), ["Dune"], "the repeated query ends the search phase");

        let llm = ScriptedLlm::new()
            .on_fn("Each turn", |prompt, _| {
                format!("<search>query {}</search>", prompt.matches("<information>").count())
            })
            .on("Answer the question from what the searches", "Answer: Herbert");
        let c = ctx(llm, "search-agent", Some(docs()));
        let opts = SearchAgentOptions { max_searches: 2, ..Default::default() };
        let trace = run(&SearchAgent::new(opts).expect("options"), &c, "Who wrote Dune?").await.expect("run");
        assert_eq!(trace.stats.retrieval_rounds, 2);
        assert_eq!(trace.answer, "Herbert", "a reply without the tag is read by the answer protocol");
        let detail: Option<BaselineNode> = trace.node("Q").and_then(crate::details::read);
        assert_eq!(detail.and_then(|d| d.forced_final), Some(true));
    }

    #[test]
    fn turns_are_constrained_by_the_tag_grammar_and_stop_at_a_closing_tag() {
        let agent = SearchAgent::new(SearchAgentOptions::default()).expect("options");
        let c = ctx(ScriptedLlm::new(), "search-agent", None);
        let turn = agent.params(&c, TURN_GRAMMAR);
        assert_eq!(turn.grammar.as_deref(), Some(TURN_GRAMMAR));
        assert_eq!(turn.stop, ["</search>", "</answer>"]);
        assert_eq!(turn.max_tokens, 256);
        assert!(SearchAgent::new(SearchAgentOptions { turn_tokens: 4, ..Default::default() }).is_err());
    }

    #[tokio::test]
    async fn a_turn_without_an_action_asks_for_the_answer() {
        let llm = ScriptedLlm::new()
            .on("Each turn", "I am not sure.")
            .on("Answer the question from what the searches", "<answer>unknown</answer>");
        let c = ctx(llm, "search-agent", Some(docs()));
        let trace = run(&SearchAgent::new(SearchAgentOptions::default()).expect("options"), &c, "Who wrote Dune?")
            .await
            .expect("run");
        assert_eq!(trace.answer, "unknown");
        assert_eq!(trace.stats.retrieval_rounds, 0);
        assert_eq!(trace.node("Q").map(|n| n.decision), Some(Decision::Known));
    }
}
