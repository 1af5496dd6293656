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
//! judgements are the distinct pairs, as when asked one at a time. A vote's samples are scored
//! together in three rounds ([`score_all`]); with `batch_judgements` each round's new pairs go to
//! the NLI in one [`Nli::judge_all`] call (the LLM judge asks them in as few requests as it can).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, FutureExt, Shared};

use hopwise_core::{Nli, NliLabel, Passage, Recorder};
use serde::Serialize;

pub use crate::details::hgot::StatementScore;
pub use crate::protocol::citations::{
    cited_thought_grammar, parse_thought, split_statements, take_markers, Statement, Thought,
};

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

    /// Whether a round's new pairs are asked together.
    pub fn batches(&self) -> bool {
        self.batch
    }

    /// Judgements asked of the NLI so far (cache hits excluded).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Does `premise` entail `hypothesis`? False when the judge fails or the cap is reached.
    pub async fn entails(&self, premise: &str, hypothesis: &str) -> bool {
        let pair = (premise.to_string(), hypothesis.to_string());
        self.entails_all(std::slice::from_ref(&pair)).await.first().copied().flatten().unwrap_or(false)
    }

    /// Does each premise entail its hypothesis? `None` where the cap refused the pair or the judge
    /// failed. Pairs not asked before are asked together: in one [`Nli::judge_all`] call when
    /// batching, else concurrently, one [`Nli::judge`] each.
    pub async fn entails_all(&self, pairs: &[(String, String)]) -> Vec<Option<bool>> {
        let pending: Vec<Option<Judgement>> = {
            let Ok(mut cache) = self.cache.lock() else { return vec![None; pairs.len()] };
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
                Some(judged) => Some(judged.await),
                None => None,
            }
        }))
        .await;
        verdicts
            .into_iter()
            .map(|verdict| match verdict? {
                Ok(entailed) => Some(entailed),
                Err(e) => {
                    if !self.error_noted.swap(true, Ordering::SeqCst) {
                        self.rec.note(format!(
                            "NLI judge {} failed ({e}); its citations count as unsupported",
                            self.name()
                        ));
                    }
                    None
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

    /// The judgements of `pairs`, not yet started: one [`Nli::judge_all`] call for all of them when
    /// batching (and there are several), else one [`Nli::judge`] each.
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

    /// Whether its support is judged at all: it cites, and every citation names a passage.
    fn judgeable(&self) -> bool {
        !self.valid.is_empty() && self.dangling.is_empty()
    }

    fn others(&self, n: usize) -> Vec<usize> {
        self.capped.iter().copied().filter(|&m| m != n).collect()
    }
}

/// The verdicts asked so far for one set of passages: `None` where the judge was refused (the cap)
/// or failed, which is evidence neither way.
struct Verdicts<'a> {
    texts: Vec<String>,
    judge: &'a Judge,
    known: HashMap<(String, String), Option<bool>>,
}

impl Verdicts<'_> {
    /// The premise of the passages numbered `numbers` (from 1).
    fn premise(&self, numbers: &[usize]) -> String {
        let texts = numbers.iter().filter_map(|n| n.checked_sub(1).and_then(|i| self.texts.get(i)));
        texts.cloned().collect::<Vec<_>>().join("\n")
    }

    fn get(&self, numbers: &[usize], claim: &str) -> Option<bool> {
        self.known.get(&(self.premise(numbers), claim.to_string())).copied().flatten()
    }

    fn supported(&self, s: &Scoring) -> bool {
        s.judgeable() && self.get(&s.valid, &s.claim) == Some(true)
    }

    /// Asks the pairs (passage numbers, claim) not asked before, as one round.
    async fn settle(&mut self, asks: Vec<(Vec<usize>, String)>) {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (numbers, claim) in asks {
            let pair = (self.premise(&numbers), claim);
            if !self.known.contains_key(&pair) && !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
        let verdicts = self.judge.entails_all(&pairs).await;
        self.known.extend(pairs.into_iter().zip(verdicts));
    }
}

/// Scores several rationales written from the same passages. Their judgements are asked in three
/// rounds shared by all of them: every statement's support (then, with `uncited_entailment`, each
/// uncited passage against it), then each citation of a supported statement with several citations
/// alone, then, for a citation that does not support it alone, the others without it. A batching
/// judge asks the second round with the first, so a vote usually costs one request. Under the
/// `max_nli_calls` cap the later rounds are refused first; a refused judgement makes no citation
/// relevant.
pub async fn score_all(
    rationales: &[&str],
    passages: &[Passage],
    judge: &Judge,
    uncited_entailment: bool,
) -> Vec<CitationScore> {
    let statements = rationales.iter().map(|r| split_statements(r)).collect();
    score_statements(statements, passages, judge, uncited_entailment).await
}

/// [`score_all`] for rationales already split into statements (one list per rationale).
pub async fn score_statements(
    rationales: Vec<Vec<Statement>>,
    passages: &[Passage],
    judge: &Judge,
    uncited_entailment: bool,
) -> Vec<CitationScore> {
    let mut verdicts = Verdicts { texts: passages.iter().map(premise).collect(), judge, known: HashMap::new() };
    let rationales: Vec<Vec<Scoring>> =
        rationales.into_iter().map(|r| r.into_iter().map(|s| Scoring::new(s, passages.len())).collect()).collect();
    let statements = || rationales.iter().flatten();
    let uncited = |s: &Scoring| (1..=passages.len()).filter(|n| !s.valid.contains(n)).collect::<Vec<_>>();
    let mut asks: Vec<(Vec<usize>, String)> =
        statements().filter(|s| s.judgeable()).map(|s| (s.valid.clone(), s.claim.clone())).collect();
    if judge.batches() {
        // Asked with the support, a multi-cited statement's citations alone cost judgements when it
        // turns out unsupported, but save the vote a request.
        let multi_cited = statements().filter(|s| s.judgeable() && s.capped.len() > 1);
        asks.extend(multi_cited.flat_map(|s| s.capped.iter().map(|&n| (vec![n], s.claim.clone()))));
    }
    if uncited_entailment {
        asks.extend(statements().flat_map(|s| uncited(s).into_iter().map(|n| (vec![n], s.claim.clone()))));
    }
    verdicts.settle(asks).await;
    let supported_multi_cited =
        |v: &Verdicts| statements().filter(|s| v.supported(s) && s.capped.len() > 1).collect::<Vec<_>>();
    let asks = supported_multi_cited(&verdicts)
        .into_iter()
        .flat_map(|s| s.capped.iter().map(|&n| (vec![n], s.claim.clone())))
        .collect();
    verdicts.settle(asks).await;
    let asks = supported_multi_cited(&verdicts)
        .into_iter()
        .flat_map(|s| {
            let alone_fails = |n: &&usize| verdicts.get(&[**n], &s.claim) != Some(true);
            s.capped.iter().filter(alone_fails).map(|&n| (s.others(n), s.claim.clone())).collect::<Vec<_>>()
        })
        .collect();
    verdicts.settle(asks).await;
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
                    for n in uncited(&s) {
                        if verdicts.get(&[n], &s.claim) == Some(true) {
                            support[n - 1] += 1;
                        }
                    }
                }
                let supported = verdicts.supported(&s);
                // A lone citation carries the whole support; otherwise it is relevant when it
                // entails alone, or when the others without it do not.
                let relevant: Vec<bool> = if !supported {
                    vec![false; s.capped.len()]
                } else if s.capped.len() == 1 {
                    vec![true]
                } else {
                    let relevant = |n: usize| {
                        verdicts.get(&[n], &s.claim) == Some(true)
                            || verdicts.get(&s.others(n), &s.claim) == Some(false)
                    };
                    s.capped.iter().map(|&n| relevant(n)).collect()
                };
                supported_count += usize::from(supported);
                relevant_count += relevant.iter().filter(|r| **r).count();
                scored.push(StatementScore {
                    claim: s.claim,
                    citations: s.capped,
                    dangling: s.dangling,
                    supported,
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
