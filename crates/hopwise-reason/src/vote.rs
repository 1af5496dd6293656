//! The weighted vote shared by HGOT and ToQD, and HGOT's other formulas, pure: thought quality ρ,
//! the vote and its confidence CI, and the passage scores δ̂ → ν → ν̂ → ν̄ → σ.

use hopwise_core::text::normalize_answer;
use serde::{Deserialize, Serialize};

/// `ρ = α + β·REC + γ·PREC`.
pub fn thought_quality(alpha: f64, beta: f64, gamma: f64, recall: f64, precision: f64) -> f64 {
    alpha + beta * recall + gamma * precision
}

/// One distinct answer in a vote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VoteRow {
    /// The answer as first written by a sample.
    pub answer: String,
    /// The form answers are compared in (`normalize_answer`).
    pub normalized: String,
    /// `Σ ρ_i δ(a_i, â)`.
    pub weight: f64,
    pub count: usize,
    /// Indices of the samples that gave it.
    pub samples: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vote {
    /// `â*`; empty when no sample gave an answer.
    pub answer: String,
    /// `CI = Σ ρ_i δ(a_i, â*) / Σ ρ_i`, over every sample (one without an answer only adds to the
    /// denominator).
    pub confidence: f64,
    /// Distinct answers, heaviest first (ties: first seen first).
    pub table: Vec<VoteRow>,
    pub total_weight: f64,
    /// Every ρ was 0, so the vote counted each sample as 1 (plain self-consistency).
    pub unweighted: bool,
}

/// `â* = argmax_â Σ_i ρ_i δ(a_i, â)` over the distinct normalised answers. Samples whose answer
/// normalises to nothing take no part in the argmax. Ties go to the answer seen first, so the
/// result does not depend on hashing.
pub fn weighted_vote(answers: &[String], rho: &[f64]) -> Vote {
    let n = answers.len().min(rho.len());
    let clean = |r: f64| if r.is_finite() && r > 0.0 { r } else { 0.0 };
    let mut total: f64 = rho[..n].iter().copied().map(clean).sum();
    let unweighted = total <= 0.0 && n > 0;
    let weight = |i: usize| if unweighted { 1.0 } else { clean(rho[i]) };
    if unweighted {
        total = n as f64;
    }
    let mut table: Vec<VoteRow> = Vec::new();
    for (i, answer) in answers.iter().enumerate().take(n) {
        let normalized = normalize_answer(answer);
        if normalized.is_empty() {
            continue;
        }
        match table.iter_mut().find(|r| r.normalized == normalized) {
            Some(row) => {
                row.weight += weight(i);
                row.count += 1;
                row.samples.push(i);
            }
            None => table.push(VoteRow {
                answer: answer.trim().to_string(),
                normalized,
                weight: weight(i),
                count: 1,
                samples: vec![i],
            }),
        }
    }
    // Stable sort: equal weights keep first-seen order.
    table.sort_by(|a, b| b.weight.total_cmp(&a.weight));
    let (answer, confidence) = match table.first() {
        Some(best) if total > 0.0 => (best.answer.clone(), best.weight / total),
        _ => (String::new(), 0.0),
    };
    Vote { answer, confidence, table, total_weight: total, unweighted }
}

/// `ν̂(p) = Σ_i ρ_i Σ_j δ̂(p, s_ij)` for every passage `p`, where `support[i][p]` is
/// `Σ_j δ̂(p, s_ij)`, the number of statements of thought `i` that passage `p` supports.
pub fn passage_support(support: &[Vec<u32>], rho: &[f64], passages: usize) -> Vec<f64> {
    let mut nu_hat = vec![0.0; passages];
    for (counts, r) in support.iter().zip(rho) {
        for (p, c) in counts.iter().enumerate().take(passages) {
            nu_hat[p] += r * f64::from(*c);
        }
    }
    nu_hat
}

/// `ν̄(p) = ν̂(p) / max_p ν̂(p)`; all zeros when no passage has support.
pub fn normalize_support(nu_hat: &[f64]) -> Vec<f64> {
    let max = nu_hat.iter().copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
    if max <= 0.0 {
        return vec![0.0; nu_hat.len()];
    }
    nu_hat.iter().map(|v| if v.is_finite() { (v / max).clamp(0.0, 1.0) } else { 0.0 }).collect()
}

/// `σ(p, t+1) = w₀·σ(p, t) + w₁·ν̄(p) + w₂·CI`.
pub fn update_sigma(w: [f64; 3], sigma: f64, nu_bar: f64, confidence: f64) -> f64 {
    w[0] * sigma + w[1] * nu_bar + w[2] * confidence
}

/// `σ(p, 0)` from the search engine's scores, in `[0, 1]`: each score divided by the round's best
/// score (so the top passage starts at 1 and ratios are kept; BM25 and dense scores are on
/// unrelated scales). When the engine reports no positive score, reciprocal rank `1/r` is used.
pub fn initial_scores(scores: &[f32]) -> Vec<f64> {
    let max = scores.iter().copied().filter(|s| s.is_finite()).fold(0.0f32, f32::max);
    if max > 0.0 {
        scores.iter().map(|s| if s.is_finite() { f64::from(s / max).clamp(0.0, 1.0) } else { 0.0 }).collect()
    } else {
        (1..=scores.len()).map(|r| 1.0 / r as f64).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn alpha_only_is_plain_self_consistency() {
        let answers = strings(&["Paris", "paris.", "Lyon", "The Paris", "Lyon"]);
        // REC/PREC differ per sample but β = γ = 0 makes every ρ = α = 1.
        let rho: Vec<f64> = [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (0.5, 0.5), (0.0, 0.0)]
            .iter()
            .map(|&(rec, prec)| thought_quality(1.0, 0.0, 0.0, rec, prec))
            .collect();
        let v = weighted_vote(&answers, &rho);
        assert_eq!(v.answer, "Paris");
        assert_eq!(v.table[0].count, 3);
        assert!((v.confidence - 3.0 / 5.0).abs() < 1e-12, "majority share");
        assert_eq!(v.table[1].normalized, "lyon");
        assert!(!v.unweighted);
    }

    #[test]
    fn citation_quality_can_overturn_the_majority() {
        // Two poorly cited "Lyon" thoughts lose to one well cited "Paris" thought.
        let rho = [
            thought_quality(0.2, 0.4, 0.4, 1.0, 1.0), // 1.0
            thought_quality(0.2, 0.4, 0.4, 0.0, 0.5), // 0.4
            thought_quality(0.2, 0.4, 0.4, 0.0, 0.0), // 0.2
        ];
        let v = weighted_vote(&strings(&["Paris", "Lyon", "Lyon"]), &rho);
        assert_eq!(v.answer, "Paris");
        assert!((v.confidence - 1.0 / 1.6).abs() < 1e-12);
        assert!((v.table[1].weight - 0.6).abs() < 1e-12);
    }

    #[test]
    fn unanimous_vote_has_confidence_one() {
        let v = weighted_vote(&strings(&["42", "42.", " 42 "]), &[0.3, 0.9, 0.2]);
        assert_eq!(v.answer, "42");
        assert_eq!(v.confidence, 1.0);
        assert_eq!(v.table.len(), 1);
    }

    #[test]
    fn empty_answers_count_against_confidence_and_zero_weights_fall_back() {
        let v = weighted_vote(&strings(&["Bob", "", "  "]), &[1.0, 1.0, 2.0]);
        assert_eq!(v.answer, "Bob");
        assert!((v.confidence - 0.25).abs() < 1e-12);
        let none = weighted_vote(&strings(&["", ""]), &[1.0, 1.0]);
        assert_eq!((none.answer.as_str(), none.confidence), ("", 0.0));
        let zero = weighted_vote(&strings(&["a", "b", "b"]), &[0.0, 0.0, 0.0]);
        assert!(zero.unweighted);
        assert_eq!(zero.answer, "b");
        assert!((zero.confidence - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(weighted_vote(&[], &[]).answer, "");
        // Ties go to the first answer seen.
        assert_eq!(weighted_vote(&strings(&["x", "y"]), &[0.5, 0.5]).answer, "x");
    }

    #[test]
    fn passage_scores_by_hand() {
        // Thought 0 (ρ=1): p0 supports 2 statements, p1 one. Thought 1 (ρ=0.5): p1 supports 2.
        let support = vec![vec![2, 1, 0], vec![0, 2, 0]];
        let nu_hat = passage_support(&support, &[1.0, 0.5], 3);
        assert_eq!(nu_hat, vec![2.0, 2.0, 0.0]);
        let nu_bar = normalize_support(&nu_hat);
        assert_eq!(nu_bar, vec![1.0, 1.0, 0.0]);
        assert_eq!(nu_bar.iter().copied().fold(0.0, f64::max), 1.0, "ν̄ peaks at exactly 1");
        let skewed = normalize_support(&[3.0, 1.5, 0.0]);
        assert_eq!(skewed, vec![1.0, 0.5, 0.0]);
        assert_eq!(normalize_support(&[0.0, 0.0]), vec![0.0, 0.0]);
        // σ update with the paper's w: 0.2·0.5 + 0.55·1 + 0.25·0.8 = 0.85.
        let s = update_sigma([0.2, 0.55, 0.25], 0.5, 1.0, 0.8);
        assert!((s - 0.85).abs() < 1e-12);
        assert_eq!(update_sigma([1.0, 0.0, 0.0], 0.3, 1.0, 1.0), 0.3, "w = (1,0,0) keeps the engine's order");
    }

    #[test]
    fn initial_scores_are_normalised() {
        assert_eq!(initial_scores(&[8.0, 4.0, 2.0]), vec![1.0, 0.5, 0.25]);
        assert_eq!(initial_scores(&[0.0, 0.0]), vec![1.0, 0.5], "no scores: reciprocal rank");
        assert_eq!(initial_scores(&[2.0, -1.0, f32::NAN]), vec![1.0, 0.0, 0.0]);
        assert!(initial_scores(&[]).is_empty());
    }
}
