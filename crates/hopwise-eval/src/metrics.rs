//! Metrics as pure functions. Answers are compared after SQuAD normalisation
//! ([`hopwise_core::text::normalize_answer`]: lower-case, no punctuation, no articles a/an/the,
//! single spaces). With several gold aliases, every answer metric takes the best alias.

use std::collections::{BTreeMap, HashSet};

use hopwise_core::text::normalize_answer;
use serde::{Deserialize, Serialize};

use crate::dataset::FEVER_LABELS;

fn tokens(s: &str) -> Vec<String> {
    normalize_answer(s).split_whitespace().map(str::to_string).collect()
}

/// Exact match after normalisation.
pub fn exact_match(prediction: &str, gold: &str) -> f64 {
    f64::from(u8::from(normalize_answer(prediction) == normalize_answer(gold)))
}

/// Cover-EM (ToQD's metric): the normalised gold occurs in the normalised prediction. Matched on
/// whole words, so gold "no" is not found inside "not". An empty gold never matches.
pub fn cover_em(prediction: &str, gold: &str) -> f64 {
    let p = tokens(prediction);
    let g = tokens(gold);
    let found = !g.is_empty() && p.windows(g.len()).any(|w| w == g.as_slice());
    f64::from(u8::from(found))
}

/// Token-level F1 (SQuAD): harmonic mean of precision and recall over the bag of normalised tokens.
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let p = tokens(prediction);
    let g = tokens(gold);
    if p.is_empty() || g.is_empty() {
        return f64::from(u8::from(p == g));
    }
    let mut remaining: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &g {
        *remaining.entry(t).or_default() += 1;
    }
    let mut common = 0usize;
    for t in &p {
        if let Some(c) = remaining.get_mut(t.as_str()).filter(|c| **c > 0) {
            *c -= 1;
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / p.len() as f64;
    let recall = common as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// ROUGE-L F1 over normalised tokens: from the longest common subsequence.
pub fn rouge_l(prediction: &str, gold: &str) -> f64 {
    let p = tokens(prediction);
    let g = tokens(gold);
    if p.is_empty() || g.is_empty() {
        return 0.0;
    }
    let mut prev = vec![0usize; g.len() + 1];
    for pt in &p {
        let mut cur = vec![0usize; g.len() + 1];
        for (j, gt) in g.iter().enumerate() {
            cur[j + 1] = if pt == gt { prev[j] + 1 } else { cur[j].max(prev[j + 1]) };
        }
        prev = cur;
    }
    let lcs = prev[g.len()] as f64;
    if lcs == 0.0 {
        return 0.0;
    }
    let precision = lcs / p.len() as f64;
    let recall = lcs / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The yes/no a reply commits to: its first word if that is yes or no ("Yes, both are …"), else the
/// only one of the two that occurs in it; `None` when it says neither or both.
pub fn yes_no(prediction: &str) -> Option<bool> {
    let t = tokens(prediction);
    match t.first().map(String::as_str) {
        Some("yes") => return Some(true),
        Some("no") => return Some(false),
        _ => {}
    }
    let yes = t.iter().any(|w| w == "yes");
    let no = t.iter().any(|w| w == "no");
    match (yes, no) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

fn gold_yes_no(gold: &str) -> Option<bool> {
    match normalize_answer(gold).as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// Answer metrics of one prediction, each the best over the gold aliases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerScores {
    pub cover_em: f64,
    pub em: f64,
    pub f1: f64,
    pub rouge_l: f64,
}

/// Scores `prediction` against every alias and keeps the best of each metric. A yes/no gold is
/// judged by the yes/no the prediction commits to ([`yes_no`]): 1 for all three accuracy metrics
/// when it agrees, 0 otherwise.
pub fn score_answer(prediction: &str, golds: &[String]) -> AnswerScores {
    let mut best = AnswerScores::default();
    for gold in golds {
        let s = match gold_yes_no(gold) {
            Some(g) => {
                let hit = f64::from(u8::from(yes_no(prediction) == Some(g)));
                AnswerScores { cover_em: hit, em: hit, f1: hit, rouge_l: rouge_l(prediction, gold) }
            }
            None => AnswerScores {
                cover_em: cover_em(prediction, gold),
                em: exact_match(prediction, gold),
                f1: token_f1(prediction, gold),
                rouge_l: rouge_l(prediction, gold),
            },
        };
        best.cover_em = best.cover_em.max(s.cover_em);
        best.em = best.em.max(s.em);
        best.f1 = best.f1.max(s.f1);
        best.rouge_l = best.rouge_l.max(s.rouge_l);
    }
    best
}

/// The FEVER label a reply gives: SUPPORTS / REFUTES / NOT ENOUGH INFO, read from those words (or
/// "not enough", "NEI", "supported"/"refuted"), else from a yes (SUPPORTS) or no (REFUTES).
pub fn fever_label(prediction: &str) -> Option<&'static str> {
    let up = prediction.to_uppercase();
    let norm = normalize_answer(prediction);
    let words: Vec<&str> = norm.split_whitespace().collect();
    if up.contains("NOT ENOUGH") || words.contains(&"nei") {
        Some(FEVER_LABELS[2])
    } else if up.contains("REFUTE") || up.contains("NOT SUPPORT") {
        Some(FEVER_LABELS[1])
    } else if up.contains("SUPPORT") {
        Some(FEVER_LABELS[0])
    } else {
        yes_no(prediction).map(|y| if y { FEVER_LABELS[0] } else { FEVER_LABELS[1] })
    }
}

/// 1 when the label read from the prediction equals the gold label.
pub fn label_accuracy(prediction: &str, gold_label: &str) -> f64 {
    let gold = gold_label.trim().to_uppercase();
    f64::from(u8::from(fever_label(prediction).is_some_and(|l| l == gold)))
}

/// Retrieval quality of one ranked list against a gold set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrievalScores {
    pub k: usize,
    /// Share of the gold items found in the top K (MultiHop-RAG's Hits@K).
    pub hits: f64,
    /// Average precision at K, normalised by min(|gold|, K).
    pub map: f64,
    /// Reciprocal rank of the first gold item in the top K (0 if none).
    pub mrr: f64,
}

/// Hits@K, MAP@K and MRR@K of `ranked` (best first; repeated keys count once, at their first rank)
/// against `gold`. Keys are compared as given; callers normalise them (e.g. titles) first.
pub fn retrieval_scores(ranked: &[String], gold: &HashSet<String>, k: usize) -> RetrievalScores {
    if gold.is_empty() || k == 0 {
        return RetrievalScores { k, ..Default::default() };
    }
    let mut seen = HashSet::new();
    let top: Vec<&String> = ranked.iter().filter(|key| seen.insert(key.as_str())).take(k).collect();
    let mut found = 0usize;
    let mut precision_sum = 0.0;
    let mut mrr = 0.0;
    for (i, key) in top.iter().enumerate() {
        if gold.contains(*key) {
            found += 1;
            precision_sum += found as f64 / (i + 1) as f64;
            if mrr == 0.0 {
                mrr = 1.0 / (i + 1) as f64;
            }
        }
    }
    RetrievalScores { k, hits: found as f64 / gold.len() as f64, map: precision_sum / gold.len().min(k) as f64, mrr }
}

pub fn mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values.into_iter().fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Count and mean of `value` per key (e.g. accuracy per question type).
pub fn breakdown<K: Ord>(items: impl IntoIterator<Item = (K, f64)>) -> BTreeMap<K, (usize, f64)> {
    let mut acc: BTreeMap<K, (usize, f64)> = BTreeMap::new();
    for (key, v) in items {
        let e = acc.entry(key).or_default();
        e.0 += 1;
        e.1 += v;
    }
    acc.into_iter().map(|(k, (n, sum))| (k, (n, sum / n as f64))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn em_and_cover_em() {
        assert_eq!(exact_match("The Beatles!", "beatles"), 1.0);
        assert_eq!(exact_match("Beatles band", "beatles"), 0.0);
        assert_eq!(cover_em("It was the Beatles, in 1962.", "The Beatles"), 1.0);
        assert_eq!(cover_em("not sure", "no"), 0.0, "whole words only");
        assert_eq!(cover_em("anything", ""), 0.0);
        assert_eq!(cover_em("New York City", "York"), 1.0);
    }

    #[test]
    fn f1_hand_computed() {
        // pred tokens: [barack, obama, jr]; gold: [barack, obama]. common 2, P = 2/3, R = 1, F1 = 0.8.
        assert!(close(token_f1("Barack Obama Jr.", "Barack Obama"), 0.8));
        // Repeated tokens count once per occurrence in gold: pred [a1,a1,b], gold [a1,c]: common 1, P 1/3, R 1/2, F1 0.4.
        assert!(close(token_f1("a1 a1 b", "a1 c"), 0.4));
        assert_eq!(token_f1("x", "y"), 0.0);
        assert_eq!(token_f1("the", "a"), 1.0, "both empty after normalisation");
    }

    #[test]
    fn rouge_l_hand_computed() {
        // pred [police, killed, gunman], gold [police, kill, gunman]: LCS 2, P = R = 2/3, F = 2/3.
        assert!(close(rouge_l("police killed the gunman", "police kill the gunman"), 2.0 / 3.0));
        // pred [a, b, c, d], gold [a, c]: LCS 2, P 1/2, R 1, F 2/3.
        assert!(close(rouge_l("a1 b c d", "a1 c"), 2.0 / 3.0));
        assert_eq!(rouge_l("", "x"), 0.0);
    }

    #[test]
    fn yes_no_handling() {
        let yes = vec!["yes".to_string()];
        let s = score_answer("Yes, both are American.", &yes);
        assert_eq!((s.cover_em, s.em, s.f1), (1.0, 1.0, 1.0));
        let s = score_answer("No, they are not.", &yes);
        assert_eq!((s.cover_em, s.em, s.f1), (0.0, 0.0, 0.0));
        let no = vec!["no".to_string()];
        assert_eq!(score_answer("There is no overlap, so no.", &no).em, 1.0);
        assert_eq!(score_answer("yes and no", &no).em, 0.0, "says both");
        assert_eq!(yes_no("Paris"), None);
    }

    #[test]
    fn best_over_aliases() {
        let golds = vec!["Sir Francis Baring, 1st Baronet".to_string(), "Francis Baring".to_string()];
        let s = score_answer("francis baring", &golds);
        assert_eq!(s.em, 1.0);
        assert_eq!(s.cover_em, 1.0);
        assert_eq!(s.f1, 1.0);
        assert_eq!(score_answer("x", &[]), AnswerScores::default());
    }

    #[test]
    fn fever_labels() {
        assert_eq!(label_accuracy("SUPPORTS", "SUPPORTS"), 1.0);
        assert_eq!(label_accuracy("The claim is refuted.", "REFUTES"), 1.0);
        assert_eq!(label_accuracy("Not enough info", "NOT ENOUGH INFO"), 1.0);
        assert_eq!(label_accuracy("It is not supported by evidence", "SUPPORTS"), 0.0);
        assert_eq!(label_accuracy("Yes", "SUPPORTS"), 1.0);
        assert_eq!(label_accuracy("maybe", "NOT ENOUGH INFO"), 0.0);
    }

    #[test]
    fn retrieval_hand_computed() {
        let gold: HashSet<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let ranked: Vec<String> = ["x", "a", "a", "y", "b"].iter().map(|s| s.to_string()).collect();
        // Deduplicated: [x, a, y, b]. Relevant at ranks 2 and 4.
        let s = retrieval_scores(&ranked, &gold, 4);
        assert!(close(s.hits, 1.0));
        assert!(close(s.map, (1.0 / 2.0 + 2.0 / 4.0) / 2.0));
        assert!(close(s.mrr, 0.5));
        let s2 = retrieval_scores(&ranked, &gold, 2);
        assert!(close(s2.hits, 0.5));
        assert!(close(s2.map, (1.0 / 2.0) / 2.0));
        let none = retrieval_scores(&ranked, &HashSet::new(), 4);
        assert_eq!((none.hits, none.map, none.mrr), (0.0, 0.0, 0.0));
    }

    #[test]
    fn breakdown_and_mean() {
        let b = breakdown(vec![("bridge", 1.0), ("comparison", 0.0), ("bridge", 0.0)]);
        assert_eq!(b.get("bridge"), Some(&(2, 0.5)));
        assert_eq!(b.get("comparison"), Some(&(1, 0.0)));
        assert_eq!(mean(Vec::new()), 0.0);
        assert!(close(mean(vec![1.0, 0.0, 0.5]), 0.5));
    }
}
