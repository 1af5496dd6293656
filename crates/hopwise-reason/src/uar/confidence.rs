//! `flare-direct`'s reading of token probabilities: which tokens belong to the sentence kept, the
//! least likely of them, and the query left when the unlikely ones are masked out.

/// The leading tokens whose text makes up `sentence` (the reply may run on past the first
/// sentence; those tokens are not part of the look-ahead sentence and must not trigger a search).
pub(super) fn sentence_tokens(tokens: &[(String, f32)], sentence: &str) -> Vec<(String, f32)> {
    let target = sentence.split_whitespace().collect::<String>();
    let mut covered = String::new();
    let mut kept = Vec::new();
    for (token, logprob) in tokens {
        if covered.len() >= target.len() {
            break;
        }
        covered.extend(token.split_whitespace());
        kept.push((token.clone(), *logprob));
    }
    kept
}

/// The lowest token probability of the sentence; `None` when it has no tokens.
pub(super) fn lowest_probability(tokens: &[(String, f32)]) -> Option<f64> {
    tokens
        .iter()
        .filter(|(token, _)| !token.trim().is_empty())
        .map(|(_, logprob)| f64::from(*logprob).exp())
        .min_by(f64::total_cmp)
}

/// The sentence with every token below probability `beta` left out (FLARE's masked query).
pub(super) fn masked_query(tokens: &[(String, f32)], beta: f64) -> String {
    let kept: String =
        tokens.iter().filter(|(_, logprob)| f64::from(*logprob).exp() >= beta).map(|(t, _)| t.as_str()).collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(pairs: &[(&str, f32)]) -> Vec<(String, f32)> {
        pairs.iter().map(|(t, p)| (t.to_string(), p.ln())).collect()
    }

    #[test]
    fn the_sentence_keeps_its_own_tokens_only() {
        let all =
            tokens(&[("Rush", 0.9), (" formed", 0.95), (" in", 0.9), (" 1968", 0.3), (".", 0.99), (" Then", 0.1)]);
        let kept = sentence_tokens(&all, "Rush formed in 1968.");
        assert_eq!(kept.len(), 5, "{kept:?}");
        let lowest = lowest_probability(&kept).expect("tokens");
        assert!((lowest - 0.3).abs() < 1e-6, "{lowest}");
    }

    #[test]
    fn unlikely_tokens_are_masked_out_of_the_query() {
        let all =
            tokens(&[("Rush", 0.9), (" formed", 0.95), (" in", 0.9), (" Toronto", 0.2), (" in", 0.9), (" 1968", 0.3)]);
        assert_eq!(masked_query(&all, 0.4), "Rush formed in in");
        assert_eq!(masked_query(&all, 0.0), "Rush formed in Toronto in 1968");
        assert_eq!(masked_query(&all, 1.0), "");
        assert_eq!(lowest_probability(&[]), None);
    }
}
