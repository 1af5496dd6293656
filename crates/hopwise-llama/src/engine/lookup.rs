//! Prompt-lookup decoding: guess the next tokens by finding the latest tokens earlier in the prompt
//! (or the output so far) and copying what followed them there.
//!
//! The guesses (drafts) are decoded in the same batch as the sequence's next token, each with its own
//! logits; the sampler then draws token by token and keeps drafting tokens only while its draw equals
//! the draft. Every emitted token is therefore drawn by the same sampler from the same distribution,
//! in the same order, as without drafts: outputs do not change, only how many tokens a step yields.

use llama_cpp_2::token::LlamaToken;

/// Longest and shortest suffix looked up; a match of one token predicts too little.
const MAX_NGRAM: usize = 4;
const MIN_NGRAM: usize = 2;

/// The tokens that followed the most recent earlier occurrence of the longest suffix of `history`
/// (between [`MIN_NGRAM`] and [`MAX_NGRAM`] tokens), at most `max` of them.
pub(crate) fn draft(history: &[LlamaToken], max: usize) -> Vec<LlamaToken> {
    if max == 0 {
        return Vec::new();
    }
    let len = history.len();
    for n in (MIN_NGRAM..=MAX_NGRAM.min(len.saturating_sub(1))).rev() {
        let suffix = &history[len - n..];
        // Occurrences that end before the suffix itself starts ending; latest first.
        let found = (0..len - n).rev().find(|&start| &history[start..start + n] == suffix);
        if let Some(start) = found {
            let from = start + n;
            let to = (from + max).min(len);
            return history[from..to].to_vec();
        }
    }
    Vec::new()
}

/// How many tokens to draft next for one sequence, adapted to how many were confirmed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DraftLength {
    current: usize,
    max: usize,
}

impl DraftLength {
    pub fn new(max: usize) -> Self {
        Self { current: max, max }
    }

    pub fn get(&self) -> usize {
        self.current
    }

    /// All confirmed: try twice as many. Some rejected: one more than were confirmed, so a sequence
    /// whose drafts keep failing costs one extra token per step at most.
    pub fn update(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        self.current =
            if accepted == drafted { (self.current * 2).min(self.max) } else { (accepted + 1).min(self.max) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(ids: &[i32]) -> Vec<LlamaToken> {
        ids.iter().map(|id| LlamaToken(*id)).collect()
    }

    #[test]
    fn copies_what_followed_the_latest_occurrence_of_the_suffix() {
        // "... 5 6 7 8 9 ... 5 6" → predict "7 8 9".
        let history = tokens(&[1, 5, 6, 7, 8, 9, 2, 3, 5, 6]);
        assert_eq!(draft(&history, 3), tokens(&[7, 8, 9]));
        assert_eq!(draft(&history, 2), tokens(&[7, 8]));
        assert_eq!(draft(&history, 0), Vec::new());
        // The latest of two occurrences wins.
        let history = tokens(&[5, 6, 1, 5, 6, 2, 9, 5, 6]);
        assert_eq!(draft(&history, 1), tokens(&[2]));
    }

    #[test]
    fn prefers_longer_matches_and_needs_two_tokens() {
        // "4 5" occurs twice; "3 4 5" only once, followed by 9.
        let history = tokens(&[3, 4, 5, 9, 4, 5, 8, 0, 3, 4, 5]);
        assert_eq!(draft(&history, 1), tokens(&[9]));
        // Only the last token recurs: no draft.
        assert!(draft(&tokens(&[7, 1, 2, 7]), 4).is_empty());
        assert!(draft(&tokens(&[]), 4).is_empty());
        assert!(draft(&tokens(&[1]), 4).is_empty());
        // A run of one token predicts more of it, limited by what the history holds.
        assert_eq!(draft(&tokens(&[7, 7, 7]), 4), tokens(&[7]));
    }

    #[test]
    fn the_draft_length_follows_the_acceptance() {
        let mut length = DraftLength::new(8);
        assert_eq!(length.get(), 8);
        length.update(8, 2);
        assert_eq!(length.get(), 3);
        length.update(3, 3);
        assert_eq!(length.get(), 6);
        length.update(6, 6);
        assert_eq!(length.get(), 8, "bounded by the maximum");
        length.update(8, 0);
        assert_eq!(length.get(), 1);
        length.update(0, 0);
        assert_eq!(length.get(), 1, "no draft, no change");
    }
}
