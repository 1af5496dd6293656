//! Splitting long documents into overlapping token windows.
//!
//! Tokenisation for chunking (independent of the search analyzer): a token is either a maximal run
//! of alphanumeric characters (Unicode `char::is_alphanumeric`) or one single other non-whitespace
//! character (punctuation, symbols). Whitespace separates tokens and is never a token. So
//! `"U.S. (1990)"` is the 7 tokens `U . S . ( 1990 )`; 256 tokens are roughly 200 English words.
//!
//! A document of at most `window_tokens` tokens is one passage covering the whole text, whose id is
//! the document id. A longer one becomes windows of `window_tokens` tokens, each starting
//! `window_tokens - overlap_tokens` tokens after the previous one (the last window may be shorter);
//! passage `n` (from 0) has id `{doc_id}#{n}`. Every passage keeps the document id and the byte
//! range of its text in the document's `text`, so `&doc.text[start..end] == passage.text`.

use hopwise_core::Passage;
use serde::{Deserialize, Serialize};

use crate::corpus::Document;
use crate::error::{IndexError, Result};

/// Window and overlap sizes, in chunking tokens (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkOptions {
    pub window_tokens: usize,
    pub overlap_tokens: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        Self { window_tokens: 256, overlap_tokens: 32 }
    }
}

impl ChunkOptions {
    pub fn validate(&self) -> Result<()> {
        if self.window_tokens == 0 {
            return Err(IndexError::InvalidOptions("the chunk window must be at least 1 token".into()));
        }
        if self.overlap_tokens >= self.window_tokens {
            return Err(IndexError::InvalidOptions(format!(
                "the chunk overlap ({}) must be smaller than the window ({})",
                self.overlap_tokens, self.window_tokens
            )));
        }
        Ok(())
    }
}

/// Byte ranges `[start, end)` of the chunking tokens of `text`.
pub fn token_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut word_start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            word_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = word_start.take() {
            spans.push((start, i));
        }
        if !c.is_whitespace() {
            spans.push((i, i + c.len_utf8()));
        }
    }
    if let Some(start) = word_start {
        spans.push((start, text.len()));
    }
    spans
}

/// Byte ranges of the passages `text` is split into; one range `(0, len)` if it fits one window.
/// Options are assumed valid (see [`ChunkOptions::validate`]); an invalid overlap is clamped.
pub fn chunk_spans(text: &str, opts: &ChunkOptions) -> Vec<(usize, usize)> {
    let tokens = token_spans(text);
    let window = opts.window_tokens.max(1);
    if tokens.len() <= window {
        return vec![(0, text.len())];
    }
    let stride = window - opts.overlap_tokens.min(window - 1);
    let mut spans = Vec::with_capacity(tokens.len() / stride + 1);
    let mut first = 0;
    loop {
        let last = (first + window).min(tokens.len()) - 1;
        spans.push((tokens[first].0, tokens[last].1));
        if last + 1 == tokens.len() {
            break;
        }
        first += stride;
    }
    spans
}

/// The passages of one document (score 0), as they are indexed.
pub fn chunk_document(doc: &Document, opts: &ChunkOptions) -> Vec<Passage> {
    let spans = chunk_spans(&doc.text, opts);
    let single = spans.len() == 1;
    spans
        .into_iter()
        .enumerate()
        .map(|(n, (start, end))| Passage {
            id: if single { doc.id.clone() } else { format!("{}#{n}", doc.id) },
            title: doc.title.clone(),
            text: doc.text[start..end].to_string(),
            score: 0.0,
            doc_id: Some(doc.id.clone()),
            offsets: Some((start, end)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        Document { id: "d".into(), title: "T".into(), text: text.into(), location: "x".into() }
    }

    fn words(n: usize) -> String {
        (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn tokens_are_words_and_single_punctuation() {
        let text = "U.S. (1990) café—ok";
        let tokens: Vec<&str> = token_spans(text).iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(tokens, ["U", ".", "S", ".", "(", "1990", ")", "café", "—", "ok"]);
    }

    #[test]
    fn short_document_is_one_passage_with_the_document_id() {
        let d = doc("  A short text.  ");
        let passages = chunk_document(&d, &ChunkOptions::default());
        assert_eq!(passages.len(), 1);
        assert_eq!(passages[0].id, "d");
        assert_eq!(passages[0].text, d.text);
        assert_eq!(passages[0].offsets, Some((0, d.text.len())));
        assert_eq!(passages[0].doc_id.as_deref(), Some("d"));
    }

    #[test]
    fn exactly_one_window_is_not_split() {
        let d = doc(&words(10));
        let passages = chunk_document(&d, &ChunkOptions { window_tokens: 10, overlap_tokens: 2 });
        assert_eq!(passages.len(), 1);
    }

    #[test]
    fn long_document_windows_overlap_and_offsets_point_at_the_text() {
        let d = doc(&format!("Ünïcode — {} end.", words(600)));
        let opts = ChunkOptions { window_tokens: 100, overlap_tokens: 10 };
        let passages = chunk_document(&d, &opts);
        assert!(passages.len() > 1);
        let all_tokens = token_spans(&d.text).len();
        for (n, p) in passages.iter().enumerate() {
            assert_eq!(p.id, format!("d#{n}"));
            let (start, end) = p.offsets.expect("offsets");
            assert_eq!(&d.text[start..end], p.text);
            let count = token_spans(&p.text).len();
            if n + 1 < passages.len() {
                assert_eq!(count, 100, "passage {n}");
            } else {
                assert!(count <= 100 && count > 10, "last passage has {count} tokens");
            }
        }
        for pair in passages.windows(2) {
            let tail: Vec<&str> = token_spans(&pair[0].text).iter().map(|&(s, e)| &pair[0].text[s..e]).collect();
            let head: Vec<&str> = token_spans(&pair[1].text).iter().map(|&(s, e)| &pair[1].text[s..e]).collect();
            assert_eq!(tail[tail.len() - 10..], head[..10], "windows overlap by 10 tokens");
        }
        assert!(passages[0].text.starts_with("Ünïcode"));
        assert!(passages.last().expect("last").text.ends_with("end."));
        // Stride 90: every token is covered, none is skipped.
        assert_eq!(passages.len(), (all_tokens - 10).div_ceil(90));
    }

    #[test]
    fn invalid_options_are_rejected() {
        assert!(ChunkOptions { window_tokens: 0, overlap_tokens: 0 }.validate().is_err());
        assert!(ChunkOptions { window_tokens: 8, overlap_tokens: 8 }.validate().is_err());
        assert!(ChunkOptions { window_tokens: 8, overlap_tokens: 7 }.validate().is_ok());
    }
}
