//! Thoughts and their citations: the `Rationale: … [n]` / `Answer: …` protocol, statements with
//! their `[n]` markers, and citation recall and precision after ALCE (Gao et al. 2023) judged by
//! an [`Nli`].
//!
//! ALCE's rules, as implemented here:
//! - a statement is *supported* when the concatenation of the passages it cites entails it; a
//!   statement without citations, or citing a passage that does not exist, is not supported;
//! - recall = supported statements / statements;
//! - a citation of a supported statement is *relevant* when its passage alone entails the
//!   statement, or when the other cited passages without it do not (removing it breaks support);
//!   every citation of an unsupported statement is irrelevant; precision = relevant / citations;
//! - at most the first [`MAX_CITATIONS`] distinct citations of a statement are scored (ALCE's cap,
//!   which also bounds the judgements per statement).
//!
//! NLI judgements go through a per-question [`Judge`]: cached by (premise, hypothesis), counted in
//! `stats.nli_calls`, capped by `max_nli_calls`; a failed or refused judgement counts as "not
//! entailed" and is noted once in the trace. Judgements may be asked concurrently (a batching engine
//! then serves them together): a pair already being judged is awaited, not asked again, so the
//! calls are the distinct pairs, as when asked one at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, FutureExt, Shared};

use hopwise_core::{Nli, NliLabel, Passage, Recorder};
use serde::Serialize;

pub use crate::details::hgot::StatementScore;
pub use crate::protocol::citations::{parse_thought, split_statements, take_markers, Statement, Thought};

/// Citations per statement that are scored.
pub const MAX_CITATIONS: usize = 3;

/// One pair's judgement, finished or in flight: entailed or not, or why the judge failed.
type Judgement = Shared<BoxFuture<'static, Result<bool, String>>>;

/// Per-question NLI access for citation scoring: cache, counter, cap.
pub struct Judge {
    nli: Arc<dyn Nli>,
    rec: Recorder,
    /// Each pair asked so far, finished or in flight.
    cache: Mutex<HashMap<(String, String), Judgement>>,
    calls: AtomicU64,
    limit: u64,
    limit_noted: AtomicBool,
    error_noted: AtomicBool,
}

impl Judge {
    pub fn new(nli: Arc<dyn Nli>, rec: Recorder, limit: u64) -> Self {
        Self {
            nli,
            rec,
            cache: Mutex::new(HashMap::new()),
            calls: AtomicU64::new(0),
            limit,
            limit_noted: AtomicBool::new(false),
            error_noted: AtomicBool::new(false),
        }
    }

    pub fn name(&self) -> &str {
        self.nli.name()
    }

    /// Judgements asked of the NLI so far (cache hits excluded).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Does `premise` entail `hypothesis`? False when the judge fails or the cap is reached.
    pub async fn entails(&self, premise: &str, hypothesis: &str) -> bool {
        let key = (premise.to_string(), hypothesis.to_string());
        let pending = {
            let Ok(mut cache) = self.cache.lock() else { return false };
            match cache.get(&key) {
                Some(pending) => pending.clone(),
                None => {
                    let allowed = self
                        .calls
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| (c < self.limit).then_some(c + 1));
                    if allowed.is_err() {
                        drop(cache);
                        if !self.limit_noted.swap(true, Ordering::SeqCst) {
                            self.rec.note(format!(
                                "max_nli_calls = {} reached; further citations count as unsupported",
                                self.limit
                            ));
                        }
                        return false;
                    }
                    self.rec.with_stats(|s| s.nli_calls += 1);
                    let (nli, premise, hypothesis) = (self.nli.clone(), key.0.clone(), key.1.clone());
                    let judged = async move {
                        nli.judge(&premise, &hypothesis)
                            .await
                            .map(|v| v.label() == NliLabel::Entailment)
                            .map_err(|e| e.to_string())
                    }
                    .boxed()
                    .shared();
                    cache.insert(key, judged.clone());
                    judged
                }
            }
        };
        match pending.await {
            Ok(verdict) => verdict,
            Err(e) => {
                if !self.error_noted.swap(true, Ordering::SeqCst) {
                    self.rec
                        .note(format!("NLI judge {} failed ({e}); its citations count as unsupported", self.name()));
                }
                false
            }
        }
    }
}

/// Citation quality of one rationale.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CitationScore {
    pub recall: f64,
    pub precision: f64,
    pub statements: Vec<StatementScore>,
    /// Per passage: `Σ_j δ̂(p, s_j)`, the statements it supports (cited, or entailing when
    /// uncited entailment is on).
    pub support: Vec<u32>,
}

/// The premise text of a passage.
pub fn premise(p: &Passage) -> String {
    if p.title.trim().is_empty() {
        p.text.trim().to_string()
    } else {
        format!("{}: {}", p.title.trim(), p.text.trim())
    }
}

fn joined(passages: &[Passage], numbers: &[usize]) -> String {
    numbers.iter().filter_map(|n| passages.get(n - 1)).map(premise).collect::<Vec<_>>().join("\n")
}

/// Scores a rationale's citations against the passages it was written from (numbered from 1).
pub async fn score_citations(
    rationale: &str,
    passages: &[Passage],
    judge: &Judge,
    uncited_entailment: bool,
) -> CitationScore {
    let statements = split_statements(rationale);
    let mut support = vec![0u32; passages.len()];
    let mut scored = Vec::with_capacity(statements.len());
    let (mut supported_count, mut citation_count, mut relevant_count) = (0usize, 0usize, 0usize);
    for statement in statements {
        let capped: Vec<usize> = statement.citations.iter().copied().take(MAX_CITATIONS).collect();
        let (valid, dangling): (Vec<usize>, Vec<usize>) =
            capped.iter().copied().partition(|&n| (1..=passages.len()).contains(&n));
        citation_count += capped.len();
        for &n in &valid {
            support[n - 1] += 1;
        }
        if uncited_entailment {
            for (i, p) in passages.iter().enumerate() {
                if !valid.contains(&(i + 1)) && judge.entails(&premise(p), &statement.claim).await {
                    support[i] += 1;
                }
            }
        }
        let supported = !valid.is_empty()
            && dangling.is_empty()
            && judge.entails(&joined(passages, &valid), &statement.claim).await;
        let mut relevant = vec![false; capped.len()];
        if supported {
            supported_count += 1;
            for (k, &n) in capped.iter().enumerate() {
                // A lone citation carries the whole support; otherwise it is relevant when it
                // entails alone, or when the others without it do not.
                relevant[k] = capped.len() == 1 || judge.entails(&joined(passages, &[n]), &statement.claim).await || {
                    let others: Vec<usize> = capped.iter().copied().filter(|&m| m != n).collect();
                    !judge.entails(&joined(passages, &others), &statement.claim).await
                };
            }
        }
        relevant_count += relevant.iter().filter(|r| **r).count();
        scored.push(StatementScore { claim: statement.claim, citations: capped, dangling, supported, relevant });
    }
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    CitationScore {
        recall: ratio(supported_count, scored.len()),
        precision: ratio(relevant_count, citation_count),
        statements: scored,
        support,
    }
}

#[cfg(test)]
pub(super) mod tests;
