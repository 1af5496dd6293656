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
//! judgements are the distinct pairs, as when asked one at a time. A batching judge asks each
//! round's new pairs of a vote in one request ([`Nli::judge_all`]); the rounds are the statements'
//! support, then each citation of a supported statement alone, then the others without it.

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

/// Where one asked pair's verdict comes from.
enum Slot {
    /// Asked before (finished or in flight).
    Known(Judgement),
    /// New in this round: the `k`-th of the pairs now asked.
    Fresh(usize),
    /// Beyond `max_nli_calls`: not asked, not entailed.
    Refused,
}

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
    /// Ask the new pairs of one round in one request.
    batch: bool,
}

impl Judge {
    pub fn new(nli: Arc<dyn Nli>, rec: Recorder, limit: u64, batch: bool) -> Self {
        Self {
            batch,
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
        let pair = (premise.to_string(), hypothesis.to_string());
        self.entails_all(std::slice::from_ref(&pair)).await.first().copied().unwrap_or(false)
    }

    /// Does each premise entail its hypothesis? Pairs not asked before are asked together: in one
    /// request when batching, else concurrently, one request each.
    pub async fn entails_all(&self, pairs: &[(String, String)]) -> Vec<bool> {
        let pending: Vec<Option<Judgement>> = {
            let Ok(mut cache) = self.cache.lock() else { return vec![false; pairs.len()] };
            let mut fresh: Vec<(String, String)> = Vec::new();
            let mut slots: Vec<Slot> = Vec::with_capacity(pairs.len());
            for pair in pairs {
                if let Some(judged) = cache.get(pair) {
                    slots.push(Slot::Known(judged.clone()));
                } else if let Some(k) = fresh.iter().position(|f| f == pair) {
                    slots.push(Slot::Fresh(k));
                } else if self.allow() {
                    fresh.push(pair.clone());
                    slots.push(Slot::Fresh(fresh.len() - 1));
                } else {
                    slots.push(Slot::Refused);
                }
            }
            let asked = self.ask(fresh.clone());
            for (pair, judged) in fresh.into_iter().zip(&asked) {
                cache.insert(pair, judged.clone());
            }
            slots
                .into_iter()
                .map(|slot| match slot {
                    Slot::Known(judged) => Some(judged),
                    Slot::Fresh(k) => Some(asked[k].clone()),
                    Slot::Refused => None,
                })
                .collect()
        };
        let verdicts = futures::future::join_all(pending.into_iter().map(|judged| async move {
            match judged {
                Some(judged) => judged.await,
                None => Ok(false),
            }
        }))
        .await;
        verdicts
            .into_iter()
            .map(|verdict| match verdict {
                Ok(entailed) => entailed,
                Err(e) => {
                    if !self.error_noted.swap(true, Ordering::SeqCst) {
                        self.rec.note(format!(
                            "NLI judge {} failed ({e}); its citations count as unsupported",
                            self.name()
                        ));
                    }
                    false
                }
            })
            .collect()
    }

    /// Counts one more judgement, unless the cap is reached (noted once).
    fn allow(&self) -> bool {
        let allowed =
            self.calls.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| (c < self.limit).then_some(c + 1));
        if allowed.is_err() {
            if !self.limit_noted.swap(true, Ordering::SeqCst) {
                self.rec
                    .note(format!("max_nli_calls = {} reached; further citations count as unsupported", self.limit));
            }
            return false;
        }
        self.rec.with_stats(|s| s.nli_calls += 1);
        true
    }

    /// The judgements of `pairs`, not yet started: one request for all of them when batching (and
    /// there are several), else one each.
    fn ask(&self, pairs: Vec<(String, String)>) -> Vec<Judgement> {
        if !self.batch || pairs.len() < 2 {
            return pairs
                .into_iter()
                .map(|(premise, hypothesis)| {
                    let nli = self.nli.clone();
                    async move { entailed(nli.judge(&premise, &hypothesis).await) }.boxed().shared()
                })
                .collect();
        }
        let n = pairs.len();
        let nli = self.nli.clone();
        let all =
            async move { nli.judge_all(&pairs).await.into_iter().map(entailed).collect::<Vec<_>>() }.boxed().shared();
        (0..n)
            .map(|k| {
                let all = all.clone();
                async move { all.await.get(k).cloned().unwrap_or_else(|| Err("no verdict for the pair".into())) }
                    .boxed()
                    .shared()
            })
            .collect()
    }
}

fn entailed(verdict: hopwise_core::Result<hopwise_core::NliVerdict>) -> Result<bool, String> {
    verdict.map(|v| v.label() == NliLabel::Entailment).map_err(|e| e.to_string())
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

/// Scores a rationale's citations against the passages it was written from (numbered from 1).
pub async fn score_citations(
    rationale: &str,
    passages: &[Passage],
    judge: &Judge,
    uncited_entailment: bool,
) -> CitationScore {
    score_all(&[rationale], passages, judge, uncited_entailment).await.pop().unwrap_or_default()
}

/// One statement as scored: its capped citations split into those naming a passage and the rest.
struct Scoring {
    claim: String,
    capped: Vec<usize>,
    valid: Vec<usize>,
    dangling: Vec<usize>,
}

impl Scoring {
    fn new(statement: Statement, passages: usize) -> Self {
        let capped: Vec<usize> = statement.citations.iter().copied().take(MAX_CITATIONS).collect();
        let (valid, dangling) = capped.iter().copied().partition(|&n| (1..=passages).contains(&n));
        Self { claim: statement.claim, capped, valid, dangling }
    }

    fn judged(&self) -> bool {
        !self.valid.is_empty() && self.dangling.is_empty()
    }

    fn others(&self, n: usize) -> Vec<usize> {
        self.capped.iter().copied().filter(|&m| m != n).collect()
    }
}

/// The verdicts of one round of pairs, added to `known`.
async fn settle(judge: &Judge, asks: Vec<(String, String)>, known: &mut HashMap<(String, String), bool>) {
    let asks: Vec<(String, String)> = asks.into_iter().filter(|a| !known.contains_key(a)).collect();
    let verdicts = judge.entails_all(&asks).await;
    known.extend(asks.into_iter().zip(verdicts));
}

/// Scores several rationales written from the same passages. Their judgements are asked in three
/// rounds shared by all of them: every statement's support (and, with `uncited_entailment`, each
/// uncited passage against it), then each citation of a supported statement alone, then, for a
/// citation that does not support it alone, the others without it.
pub async fn score_all(
    rationales: &[&str],
    passages: &[Passage],
    judge: &Judge,
    uncited_entailment: bool,
) -> Vec<CitationScore> {
    let texts: Vec<String> = passages.iter().map(premise).collect();
    let joined = |numbers: &[usize]| {
        numbers
            .iter()
            .filter_map(|n| n.checked_sub(1).and_then(|i| texts.get(i)))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    };
    let rationales: Vec<Vec<Scoring>> = rationales
        .iter()
        .map(|r| split_statements(r).into_iter().map(|s| Scoring::new(s, passages.len())).collect())
        .collect();
    let all = || rationales.iter().flatten();
    let mut known = HashMap::new();
    let mut asks = Vec::new();
    for s in all() {
        if uncited_entailment {
            let uncited = (1..=passages.len()).filter(|n| !s.valid.contains(n));
            asks.extend(uncited.map(|n| (texts[n - 1].clone(), s.claim.clone())));
        }
        if s.judged() {
            asks.push((joined(&s.valid), s.claim.clone()));
        }
    }
    settle(judge, asks, &mut known).await;
    let verdict = |known: &HashMap<(String, String), bool>, numbers: &[usize], claim: &str| {
        known.get(&(joined(numbers), claim.to_string())).copied().unwrap_or(false)
    };
    let supported =
        |known: &HashMap<(String, String), bool>, s: &Scoring| s.judged() && verdict(known, &s.valid, &s.claim);
    // A lone citation carries the whole support; otherwise it is relevant when it entails alone,
    // or when the others without it do not.
    let multi = |known: &HashMap<(String, String), bool>| {
        all().filter(|s| supported(known, s) && s.capped.len() > 1).collect::<Vec<_>>()
    };
    let asks = multi(&known).iter().flat_map(|s| s.capped.iter().map(|&n| (joined(&[n]), s.claim.clone()))).collect();
    settle(judge, asks, &mut known).await;
    let asks = multi(&known)
        .iter()
        .flat_map(|s| {
            s.capped
                .iter()
                .filter(|&&n| !verdict(&known, &[n], &s.claim))
                .map(|&n| (joined(&s.others(n)), s.claim.clone()))
        })
        .collect();
    settle(judge, asks, &mut known).await;
    rationales
        .into_iter()
        .map(|statements| {
            let mut support = vec![0u32; passages.len()];
            let (mut supported_count, mut citation_count, mut relevant_count) = (0usize, 0usize, 0usize);
            let mut scored = Vec::with_capacity(statements.len());
            for s in statements {
                citation_count += s.capped.len();
                for &n in &s.valid {
                    support[n - 1] += 1;
                }
                if uncited_entailment {
                    for n in (1..=passages.len()).filter(|n| !s.valid.contains(n)) {
                        if known.get(&(texts[n - 1].clone(), s.claim.clone())).copied().unwrap_or(false) {
                            support[n - 1] += 1;
                        }
                    }
                }
                let is_supported = supported(&known, &s);
                let relevant: Vec<bool> = if !is_supported {
                    vec![false; s.capped.len()]
                } else if s.capped.len() == 1 {
                    vec![true]
                } else {
                    s.capped
                        .iter()
                        .map(|&n| verdict(&known, &[n], &s.claim) || !verdict(&known, &s.others(n), &s.claim))
                        .collect()
                };
                supported_count += usize::from(is_supported);
                relevant_count += relevant.iter().filter(|r| **r).count();
                scored.push(StatementScore {
                    claim: s.claim,
                    citations: s.capped,
                    dangling: s.dangling,
                    supported: is_supported,
                    relevant,
                });
            }
            let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
            CitationScore {
                recall: ratio(supported_count, scored.len()),
                precision: ratio(relevant_count, citation_count),
                statements: scored,
                support,
            }
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests;
