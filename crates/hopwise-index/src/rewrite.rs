//! Query-side retriever wrappers: the model rewrites the query (HyDE, multi-query, sub-questions),
//! every rewritten query retrieves from the wrapped retriever, and the lists are fused by reciprocal
//! rank. They use the prompt templates of `hopwise retrieval-eval` (`rq_hyde`, `rq_multi_query`,
//! `rq_sub_question`). A rewriter serves one question: it calls that question's metered model, so
//! its calls are in the question's trace and count against its `max_llm_calls`.
//!
//! [`DedupRetriever`] drops passages a question has already been given in an earlier round.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hopwise_core::text::parse_numbered_list;
use hopwise_core::{ChatRequest, MeteredModel, Passage, Prompts, Retriever};

use crate::fusion::{reciprocal_rank_fusion, RRF_K};

/// Most rewritten queries taken from one model reply.
const MAX_QUERIES: usize = 6;

/// The rewrite methods are named in configuration, so the enum lives with the retrieval contract.
pub use hopwise_core::retrieval::RewriteMethod;

/// A retriever that lets the model rewrite each query first (see the module docs).
pub struct RewriteRetriever {
    inner: Arc<dyn Retriever>,
    model: Arc<dyn MeteredModel>,
    prompts: Arc<Prompts>,
    method: RewriteMethod,
    name: String,
}

impl RewriteRetriever {
    /// `model` is the metered model of the question this retriever serves.
    pub fn new(
        inner: Arc<dyn Retriever>,
        model: Arc<dyn MeteredModel>,
        prompts: Arc<Prompts>,
        method: RewriteMethod,
    ) -> Self {
        let name = format!("{}+{}", method.name(), inner.name());
        Self { inner, model, prompts, method, name }
    }

    /// The queries `query` is rewritten into (never empty: an unreadable reply falls back to `query`).
    pub async fn queries(&self, query: &str) -> hopwise_core::Result<Vec<String>> {
        let prompt = self.prompts.render(self.method.template(), &[("question", query)])?;
        // A bare user turn with default parameters: the request (and so its cache key) is what it
        // was before rewriting went through the meter.
        let reply = self.model.send("query_rewrite", None, ChatRequest::user(prompt)).await?;
        let reply = reply.text().trim();
        let mut queries = match self.method {
            RewriteMethod::Hyde if reply.is_empty() => Vec::new(),
            RewriteMethod::Hyde => vec![format!("{query} {reply}")],
            RewriteMethod::MultiQuery => {
                let mut qs = vec![query.to_string()];
                qs.extend(parse_numbered_list(reply, MAX_QUERIES));
                qs
            }
            RewriteMethod::SubQuestion => parse_numbered_list(reply, MAX_QUERIES),
        };
        let mut seen = HashSet::new();
        queries.retain(|q| !q.trim().is_empty() && seen.insert(q.clone()));
        if queries.is_empty() {
            queries.push(query.to_string());
        }
        Ok(queries)
    }
}

#[async_trait]
impl Retriever for RewriteRetriever {
    fn name(&self) -> &str {
        &self.name
    }

    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let queries = self.queries(query).await?;
        let lists = futures::future::try_join_all(queries.iter().map(|q| self.inner.retrieve(q, k))).await?;
        Ok(reciprocal_rank_fusion(&lists, RRF_K, k))
    }
}

/// Most extra candidates fetched to make up for passages already seen.
const MAX_EXTRA: usize = 200;

/// Wraps a retriever for one question: passages returned in an earlier round of the same question
/// are dropped (the wrapped retriever is asked for more to fill `k`). Use one per question, or
/// [`reset`](Self::reset) between questions.
pub struct DedupRetriever {
    inner: Arc<dyn Retriever>,
    seen: Mutex<HashSet<String>>,
    name: String,
}

impl DedupRetriever {
    pub fn new(inner: Arc<dyn Retriever>) -> Self {
        let name = format!("dedup+{}", inner.name());
        Self { inner, seen: Mutex::new(HashSet::new()), name }
    }

    /// Forgets the passages returned so far.
    pub fn reset(&self) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Passages returned so far.
    pub fn returned(&self) -> usize {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[async_trait]
impl Retriever for DedupRetriever {
    fn name(&self) -> &str {
        &self.name
    }

    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let extra = self.returned().min(MAX_EXTRA);
        let candidates = self.inner.retrieve(query, k + extra).await?;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let fresh: Vec<Passage> = candidates.into_iter().filter(|p| !seen.contains(&p.id)).take(k).collect();
        seen.extend(fresh.iter().map(|p| p.id.clone()));
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use hopwise_core::scripted::{ScriptedLlm, StaticRetriever};
    use hopwise_core::Recorder;
    use hopwise_reason::Meter;

    use super::*;

    /// `llm` metered for one question.
    fn model(llm: ScriptedLlm) -> Arc<dyn MeteredModel> {
        Arc::new(Meter::new(Arc::new(llm), Recorder::new("q", "test"), 100))
    }

    fn corpus() -> Arc<dyn Retriever> {
        Arc::new(StaticRetriever::from_pairs(&[
            ("Alpha", "alpha is a river in the north"),
            ("Beta", "beta is a town on the alpha river"),
            ("Gamma", "gamma was founded by the mayor of beta"),
        ]))
    }

    fn ids(ps: &[Passage]) -> Vec<String> {
        ps.iter().map(|p| p.title.clone()).collect()
    }

    #[tokio::test]
    async fn hyde_searches_with_the_written_passage() {
        let llm = ScriptedLlm::new().on("Write a short passage", "Gamma was founded long ago.");
        let r = RewriteRetriever::new(corpus(), model(llm), Arc::new(Prompts::default()), RewriteMethod::Hyde);
        assert_eq!(
            r.queries("who founded it?").await.expect("queries"),
            ["who founded it? Gamma was founded long ago."]
        );
        let got = r.retrieve("who founded it?", 1).await.expect("retrieve");
        assert_eq!(ids(&got), ["Gamma"]);
        assert_eq!(r.name(), "hyde+static");
    }

    #[tokio::test]
    async fn sub_questions_are_fused() {
        let llm = ScriptedLlm::new().on("simpler search questions", "1. where is alpha?\n2. what is gamma?");
        let r = RewriteRetriever::new(corpus(), model(llm), Arc::new(Prompts::default()), RewriteMethod::SubQuestion);
        let got = r.retrieve("something vague", 3).await.expect("retrieve");
        let titles = ids(&got);
        assert!(titles.contains(&"Alpha".to_string()) && titles.contains(&"Gamma".to_string()), "{titles:?}");
    }

    #[tokio::test]
    async fn an_unreadable_reply_falls_back_to_the_query() {
        let llm = ScriptedLlm::new().fallback("I cannot help with that");
        for method in [RewriteMethod::SubQuestion, RewriteMethod::MultiQuery] {
            let r = RewriteRetriever::new(corpus(), model(llm.clone()), Arc::new(Prompts::default()), method);
            assert_eq!(r.queries("beta town").await.expect("queries"), ["beta town"], "{method:?}");
        }
        let empty = ScriptedLlm::new().fallback("");
        let r = RewriteRetriever::new(corpus(), model(empty), Arc::new(Prompts::default()), RewriteMethod::Hyde);
        assert_eq!(r.queries("beta town").await.expect("queries"), ["beta town"]);
    }

    #[tokio::test]
    async fn multi_query_keeps_the_original_query_first() {
        let llm = ScriptedLlm::new().on("rephrasings", "1. gamma founder\n2. beta town\n3. beta town");
        let r = RewriteRetriever::new(corpus(), model(llm), Arc::new(Prompts::default()), RewriteMethod::MultiQuery);
        assert_eq!(r.queries("q").await.expect("queries"), ["q", "gamma founder", "beta town"]);
    }

    #[tokio::test]
    async fn dedup_drops_passages_of_earlier_rounds_and_refills() {
        let d = DedupRetriever::new(corpus());
        let first = d.retrieve("alpha beta river", 2).await.expect("first");
        assert_eq!(first.len(), 2);
        let second = d.retrieve("alpha beta river", 2).await.expect("second");
        assert_eq!(second.len(), 1, "only one passage left that was not returned before");
        let all: HashSet<String> = first.iter().chain(&second).map(|p| p.id.clone()).collect();
        assert_eq!(all.len(), 3, "no passage twice");
        assert!(d.retrieve("alpha beta river", 2).await.expect("third").is_empty());
        d.reset();
        assert_eq!(d.retrieve("alpha beta river", 2).await.expect("after reset").len(), 2);
    }
}
