//! Retrieval evaluation (ToQD's Table 3 on MultiHop-RAG): how well the queries written by each
//! query-rewriting method retrieve the gold evidence. Each method turns the question into one or
//! more queries, every query retrieves top-k, the lists are fused by reciprocal rank, and the fused
//! top-K is scored with Hits@K, MAP@K and MRR@K.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use hopwise_core::text::normalize_answer;
use hopwise_core::{Passage, Recorder};
use hopwise_reason::baselines::parse_numbered_list;
use hopwise_reason::{Ctx, Runtime};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::dataset::Example;
use crate::error::{EvalError, Result};
use crate::metrics::{mean, retrieval_scores, RetrievalScores};
use crate::results::write_atomic;

/// How the question becomes search queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryMethod {
    /// The question itself.
    Native,
    /// The question plus a passage the model writes as if it answered it (HyDE).
    Hyde,
    /// Sub-questions the model lists.
    SubQuestion,
    /// The question plus three rephrasings.
    MultiQuery,
    /// ToQD's decomposition followed by its critique step.
    Toqd,
    /// ToQD's decomposition without the critique step.
    ToqdNoCritique,
}

impl QueryMethod {
    pub const ALL: [QueryMethod; 6] =
        [Self::Native, Self::Hyde, Self::SubQuestion, Self::MultiQuery, Self::Toqd, Self::ToqdNoCritique];

    pub fn name(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Hyde => "hyde",
            Self::SubQuestion => "sub-question",
            Self::MultiQuery => "multi-query",
            Self::Toqd => "toqd",
            Self::ToqdNoCritique => "toqd-no-critique",
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|m| m.name()).collect();
            EvalError::Config(format!("unknown query method `{name}` (known: {})", known.join(", ")))
        })
    }
}

#[derive(Debug, Clone)]
pub struct RetrievalEvalConfig {
    pub methods: Vec<QueryMethod>,
    /// K of the metrics and of each query's retrieval.
    pub k: usize,
    pub concurrency: usize,
}

impl Default for RetrievalEvalConfig {
    fn default() -> Self {
        Self { methods: QueryMethod::ALL.to_vec(), k: 10, concurrency: 4 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryRecord {
    pub id: String,
    pub method: QueryMethod,
    pub queries: Vec<String>,
    /// Keys of the fused top-K (gold ids, or normalised titles), best first.
    pub retrieved: Vec<String>,
    pub scores: RetrievalScores,
    pub llm_calls: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodSummary {
    pub method: QueryMethod,
    pub n: usize,
    pub hits: f64,
    pub map: f64,
    pub mrr: f64,
    pub queries_per_question: f64,
    pub llm_calls: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievalReport {
    pub k: usize,
    /// Examples without gold evidence (e.g. MultiHop-RAG's null queries) are left out.
    pub skipped_without_gold: usize,
    pub methods: Vec<MethodSummary>,
    pub records: Vec<QueryRecord>,
}

/// Fuses ranked lists by reciprocal rank (score Σ 1/(60 + rank)); ties keep first-seen order.
pub fn fuse_rankings(lists: &[Vec<String>], k: usize) -> Vec<String> {
    let mut score: HashMap<&str, (f64, usize)> = HashMap::new();
    let mut order = 0usize;
    for list in lists {
        let mut seen = HashSet::new();
        for (rank, key) in list.iter().enumerate() {
            if !seen.insert(key.as_str()) {
                continue;
            }
            let entry = score.entry(key.as_str()).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            entry.0 += 1.0 / (60.0 + rank as f64 + 1.0);
        }
    }
    let mut ranked: Vec<(&str, (f64, usize))> = score.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
    ranked.into_iter().take(k).map(|(key, _)| key.to_string()).collect()
}

/// The gold keys of an example (corpus ids where known, else normalised titles) and how to key a
/// retrieved passage the same way.
fn gold_of(example: &Example) -> Option<(HashSet<String>, bool)> {
    if !example.evidence_ids.is_empty() {
        Some((example.evidence_ids.iter().cloned().collect(), true))
    } else if !example.evidence_titles.is_empty() {
        Some((example.evidence_titles.iter().map(|t| normalize_answer(t)).collect(), false))
    } else {
        None
    }
}

fn key_of(p: &Passage, by_id: bool, gold: &HashSet<String>) -> String {
    if !by_id {
        return normalize_answer(&p.title);
    }
    match &p.doc_id {
        Some(doc) if !gold.contains(&p.id) && gold.contains(doc) => doc.clone(),
        _ => p.id.clone(),
    }
}

async fn queries_for(ctx: &Ctx, method: QueryMethod, question: &str) -> hopwise_reason::error::Result<Vec<String>> {
    let list = |reply: &str| parse_numbered_list(reply, 6);
    Ok(match method {
        QueryMethod::Native => vec![question.to_string()],
        QueryMethod::Hyde => {
            let passage = ctx.complete("hyde", None, "rq_hyde", &[("question", question)]).await?;
            vec![format!("{question} {passage}")]
        }
        QueryMethod::SubQuestion => {
            list(&ctx.complete("sub_question", None, "rq_sub_question", &[("question", question)]).await?)
        }
        QueryMethod::MultiQuery => {
            let mut qs = vec![question.to_string()];
            qs.extend(list(&ctx.complete("multi_query", None, "rq_multi_query", &[("question", question)]).await?));
            qs
        }
        QueryMethod::Toqd | QueryMethod::ToqdNoCritique => {
            let subs = list(&ctx.complete("decompose", None, "toqd_decompose", &[("question", question)]).await?);
            if method == QueryMethod::ToqdNoCritique || subs.is_empty() {
                subs
            } else {
                let numbered: String = subs.iter().enumerate().map(|(i, q)| format!("{}. {q}\n", i + 1)).collect();
                let vars = [("question", question), ("subquestions", numbered.as_str())];
                let kept = list(&ctx.complete("critique", None, "toqd_critique", &vars).await?);
                if kept.is_empty() {
                    subs
                } else {
                    kept
                }
            }
        }
    })
}

async fn evaluate_one(
    example: Arc<Example>,
    method: QueryMethod,
    runtime: Arc<Runtime>,
    k: usize,
) -> Option<QueryRecord> {
    let (gold, by_id) = gold_of(&example)?;
    let rec = Recorder::new(&example.question, method.name());
    // The same runtime as `ask`: its metered model, prompts and retriever (no query rewriting of its
    // own: each method forms its queries itself).
    let ctx = runtime.context(rec, None).with_k(k);
    let mut error = None;
    let mut queries = match queries_for(&ctx, method, &example.question).await {
        Ok(q) => q,
        Err(e) => {
            error = Some(e.to_string());
            Vec::new()
        }
    };
    if queries.is_empty() {
        // A method that produced no query falls back to the question, and the record says so.
        error.get_or_insert_with(|| "no query could be read from the model's reply; used the question".into());
        queries.push(example.question.clone());
    }
    let mut lists = Vec::new();
    for q in &queries {
        match ctx.retrieve(None, q, k).await {
            Ok(ps) => lists.push(ps.iter().map(|p| key_of(p, by_id, &gold)).collect()),
            Err(e) => error = Some(e.to_string()),
        }
    }
    let retrieved = fuse_rankings(&lists, k);
    let scores = retrieval_scores(&retrieved, &gold, k);
    Some(QueryRecord {
        id: example.id.clone(),
        method,
        queries,
        retrieved,
        scores,
        llm_calls: ctx.rec().stats().llm_calls,
        error,
    })
}

/// Runs every method over every example with gold evidence, through `runtime` (which must have a
/// retriever).
pub async fn retrieval_eval(
    examples: &[Example],
    runtime: Arc<Runtime>,
    config: &RetrievalEvalConfig,
) -> Result<RetrievalReport> {
    if !runtime.has_retriever() {
        return Err(EvalError::Config("retrieval-eval needs a retriever".into()));
    }
    if config.methods.is_empty() {
        return Err(EvalError::Config("no query method given".into()));
    }
    let k = config.k.max(1);
    let with_gold: Vec<Arc<Example>> =
        examples.iter().filter(|e| gold_of(e).is_some()).cloned().map(Arc::new).collect();
    let skipped_without_gold = examples.len() - with_gold.len();
    let mut jobs = with_gold.iter().flat_map(|e| config.methods.iter().map(move |m| (e.clone(), *m)));
    let mut running = JoinSet::new();
    let mut records = Vec::new();
    loop {
        while running.len() < config.concurrency.max(1) {
            let Some((example, method)) = jobs.next() else { break };
            running.spawn(evaluate_one(example, method, runtime.clone(), k));
        }
        let Some(joined) = running.join_next().await else { break };
        match joined {
            Ok(Some(record)) => records.push(record),
            Ok(None) => {}
            Err(e) => return Err(EvalError::Config(format!("a retrieval job crashed: {e}"))),
        }
    }
    // Stable order for reports and diffs: by example position, then method order.
    let position: HashMap<&str, usize> = with_gold.iter().enumerate().map(|(i, e)| (e.id.as_str(), i)).collect();
    let method_rank = |m: QueryMethod| config.methods.iter().position(|x| *x == m).unwrap_or(usize::MAX);
    records.sort_by_key(|r| (position.get(r.id.as_str()).copied().unwrap_or(usize::MAX), method_rank(r.method)));
    let methods = config
        .methods
        .iter()
        .map(|&method| {
            let rs: Vec<&QueryRecord> = records.iter().filter(|r| r.method == method).collect();
            MethodSummary {
                method,
                n: rs.len(),
                hits: mean(rs.iter().map(|r| r.scores.hits)),
                map: mean(rs.iter().map(|r| r.scores.map)),
                mrr: mean(rs.iter().map(|r| r.scores.mrr)),
                queries_per_question: mean(rs.iter().map(|r| r.queries.len() as f64)),
                llm_calls: mean(rs.iter().map(|r| r.llm_calls as f64)),
            }
        })
        .collect();
    Ok(RetrievalReport { k, skipped_without_gold, methods, records })
}

pub fn render_retrieval_markdown(report: &RetrievalReport) -> String {
    let k = report.k;
    let mut out = String::new();
    let _ = writeln!(out, "# Retrieval evaluation\n");
    let _ = writeln!(
        out,
        "Fused top-{k} of each method's queries against the gold evidence; {} examples without gold evidence left out.\n",
        report.skipped_without_gold
    );
    let _ = writeln!(out, "| method | n | Hits@{k} | MAP@{k} | MRR@{k} | queries / question | LLM calls / question |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for m in &report.methods {
        let _ = writeln!(
            out,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} |",
            m.method.name(),
            m.n,
            m.hits,
            m.map,
            m.mrr,
            m.queries_per_question,
            m.llm_calls
        );
    }
    out
}

/// Writes `retrieval.jsonl` (one line per example × method) and `retrieval.md` into `out_dir`.
pub fn write_retrieval_report(out_dir: &Path, report: &RetrievalReport) -> Result<()> {
    let mut lines = Vec::new();
    for r in &report.records {
        let mut line = serde_json::to_vec(r).map_err(|e| EvalError::Config(e.to_string()))?;
        line.push(b'\n');
        lines.extend(line);
    }
    write_atomic(&out_dir.join("retrieval.jsonl"), &lines)?;
    write_atomic(&out_dir.join("retrieval.md"), render_retrieval_markdown(report).as_bytes())
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use hopwise_core::scripted::ScriptedLlm;
    use hopwise_core::{Prompts, Retriever};

    use super::*;

    #[test]
    fn reciprocal_rank_fusion() {
        let s = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // b: 1/62 + 1/61 beats a: 1/61 and c: 1/62.
        assert_eq!(fuse_rankings(&[s(&["a", "b"]), s(&["b", "c"])], 3), s(&["b", "a", "c"]));
        assert_eq!(fuse_rankings(&[s(&["a", "a", "b"])], 5), s(&["a", "b"]), "repeats count once");
        assert!(fuse_rankings(&[], 3).is_empty());
        assert!(QueryMethod::parse("hyde").is_ok() && QueryMethod::parse("nope").is_err());
    }

    /// Each passage is found only by a query that contains its title word.
    struct ByWord(Vec<&'static str>);

    #[async_trait]
    impl Retriever for ByWord {
        fn name(&self) -> &str {
            "by-word"
        }
        async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
            let mut hits: Vec<Passage> = self
                .0
                .iter()
                .filter(|w| query.contains(*w))
                .map(|w| Passage {
                    id: format!("id-{w}"),
                    title: w.to_string(),
                    text: w.to_string(),
                    ..Default::default()
                })
                .collect();
            hits.push(Passage {
                id: "id-noise".into(),
                title: "noise".into(),
                text: "noise".into(),
                ..Default::default()
            });
            hits.truncate(k);
            Ok(hits)
        }
    }

    #[tokio::test]
    async fn decomposition_finds_both_pieces_of_evidence() {
        let llm = ScriptedLlm::new()
            .on("simpler search questions", "1. Where is alpha?\n2. Where is beta?")
            .on("Break the question below", "1. What is alpha?\n2. What is beta?\n3. Unrelated?")
            .on("Review the candidates", "1. What is alpha?\n2. What is beta?")
            .on("rephrasings", "1. alpha and what else\n2. something\n3. other")
            .on("Write a short passage", "It is about beta.")
            .fallback("");
        let example = Example {
            id: "e1".into(),
            question: "How do they relate?".into(),
            answers: vec!["x".into()],
            evidence_ids: vec!["id-alpha".into(), "id-beta".into()],
            ..Default::default()
        };
        let no_gold =
            Example { id: "e2".into(), question: "q".into(), answers: vec!["x".into()], ..Default::default() };
        let runtime = Runtime::new(Arc::new(llm), Arc::new(Prompts::default()))
            .with_retriever(Some(Arc::new(ByWord(vec!["alpha", "beta"]))));
        let report =
            retrieval_eval(&[example, no_gold], Arc::new(runtime), &RetrievalEvalConfig { k: 3, ..Default::default() })
                .await
                .expect("eval");
        assert_eq!(report.skipped_without_gold, 1);
        let get = |m: QueryMethod| report.methods.iter().find(|s| s.method == m).expect("method").clone();
        // Native: only noise -> nothing found.
        assert_eq!((get(QueryMethod::Native).hits, get(QueryMethod::Native).llm_calls), (0.0, 0.0));
        // Sub-questions and ToQD find both gold passages in the top 3 (behind the noise both queries share).
        assert_eq!(get(QueryMethod::SubQuestion).hits, 1.0);
        assert_eq!(get(QueryMethod::Toqd).hits, 1.0);
        assert_eq!(get(QueryMethod::Toqd).llm_calls, 2.0, "decompose + critique");
        assert_eq!(get(QueryMethod::ToqdNoCritique).llm_calls, 1.0);
        assert_eq!(get(QueryMethod::ToqdNoCritique).queries_per_question, 3.0);
        // HyDE's passage names beta only: Hits 1/2, and beta is ranked first (MRR 1).
        assert_eq!((get(QueryMethod::Hyde).hits, get(QueryMethod::Hyde).mrr), (0.5, 1.0));
        assert_eq!(get(QueryMethod::MultiQuery).hits, 0.5);
        let md = render_retrieval_markdown(&report);
        assert!(md.contains("| toqd | 1 | 1.000 |"), "{md}");
    }
}
