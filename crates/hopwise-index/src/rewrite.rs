//! Query-side retriever wrappers: the model rewrites the query (HyDE, multi-query, sub-questions),
//! every rewritten query retrieves from the wrapped retriever, and the lists are fused by reciprocal
//! rank. They use the prompt templates of `hopwise retrieval-eval` (`rq_hyde`, `rq_multi_query`,
//! `rq_sub_question`), so a method behaves the same in evaluation and in `ask`.
//!
//! [`DedupRetriever`] drops passages a question has already been given in an earlier round.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hopwise_core::text::parse_numbered_list;
use hopwise_core::{ChatRequest, Llm, Passage, Prompts, Retriever};
use serde::{Deserialize, Serialize};

use crate::fusion::{reciprocal_rank_fusion, RRF_K};

/// Most rewritten queries taken from one model reply.
const MAX_QUERIES: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RewriteMethod {
    /// The query plus a passage the model writes as if it answered it (Gao et al., HyDE).
    Hyde,
    /// The query plus the model's rephrasings of it.
    MultiQuery,
    /// The simpler questions the model breaks the query into.
    SubQuestion,
}

impl RewriteMethod {
    pub const ALL: [RewriteMethod; 3] = [Self::Hyde, Self::MultiQuery, Self::SubQuestion];

    pub fn name(self) -> &'static str {
        match self {
            Self::Hyde => "hyde",
            Self::MultiQuery => "multi-query",
            Self::SubQuestion => "sub-question",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    fn template(self) -> &'static str {
        match self {
            Self::Hyde => "rq_hyde",
            Self::MultiQuery => "rq_multi_query",
            Self::SubQuestion => "rq_sub_question",
        }
    }
}

/// A retriever that lets the model rewrite each query first (see the module docs).
pub struct RewriteRetriever {
    inner: Arc<dyn Retriever>,
    llm: Arc<dyn Llm>,
    prompts: Arc<Prompts>,
    method: RewriteMethod,
    name: String,
}

impl RewriteRetriever {
    pub fn new(inner: Arc<dyn Retriever>, llm: Arc<dyn Llm>, prompts: Arc<Prompts>, method: RewriteMethod) -> Self {
        let name = format!("{}+{}", method.name(), inner.name());
        Self { inner, llm, prompts, method, name }
    }

    /// The queries `query` is rewritten into (never empty: an unreadable reply falls back to `query`).
    pub async fn queries(&self, query: &str) -> hopwise_core::Result<Vec<String>> {
        let prompt = self.prompts.render(self.method.template(), &[("question", query)])?;
        let reply = self.llm.chat(&ChatRequest::user(prompt)).await?;
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

    use super::*;

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
        let llm = Arc::new(ScriptedLlm::new().on("Write a short passage", "Gamma was founded long ago."));
        let r = RewriteRetriever::new(corpus(), llm.clone(), Arc::new(Prompts::default()), RewriteMethod::Hyde);
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
        let llm = Arc::new(ScriptedLlm::new().on("simpler search questions", "1. where is alpha?\n2. what is gamma?"));
        let r = RewriteRetriever::new(corpus(), llm, Arc::new(Prompts::default()), RewriteMethod::SubQuestion);
        let got = r.retrieve("something vague", 3).await.expect("retrieve");
        let titles = ids(&got);
        assert!(titles.contains(&"Alpha".to_string()) && titles.contains(&"Gamma".to_string()), "{titles:?}");
    }

    #[tokio::test]
    async fn an_unreadable_reply_falls_back_to_the_query() {
        let llm = Arc::new(ScriptedLlm::new().fallback("I cannot help with that"));
        for method in [RewriteMethod::SubQuestion, RewriteMethod::MultiQuery] {
            let r = RewriteRetriever::new(corpus(), llm.clone(), Arc::new(Prompts::default()), method);
            assert_eq!(r.queries("beta town").await.expect("queries"), ["beta town"], "{method:?}");
        }
        let empty = Arc::new(ScriptedLlm::new().fallback(""));
        let r = RewriteRetriever::new(corpus(), empty, Arc::new(Prompts::default()), RewriteMethod::Hyde);
        assert_eq!(r.queries("beta town").await.expect("queries"), ["beta town"]);
    }

    #[tokio::test]
    async fn multi_query_keeps_the_original_query_first() {
        let llm = Arc::new(ScriptedLlm::new().on("rephrasings", "1. gamma founder\n2. beta town\n3. beta town"));
        let r = RewriteRetriever::new(corpus(), llm, Arc::new(Prompts::default()), RewriteMethod::MultiQuery);
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
