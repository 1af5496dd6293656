//! Fusing ranked passage lists, and the hybrid (BM25 + dense) retriever built on it.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use hopwise_core::{Passage, Retriever};
use serde::{Deserialize, Serialize};

/// How ranked lists are combined.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum Fusion {
    /// Reciprocal-rank fusion: each list adds `1 / (k + rank)` (rank from 1). Needs no score scale.
    Rrf { k: f32 },
    /// Scores min-max normalised to [0, 1] within each list, then summed with these weights (one per
    /// list; a passage missing from a list gets 0 from it).
    Weighted { weights: [f32; 2] },
}

/// The constant of the original RRF paper (Cormack et al. 2009).
pub const RRF_K: f32 = 60.0;

impl Default for Fusion {
    fn default() -> Self {
        Fusion::Rrf { k: RRF_K }
    }
}

impl Fusion {
    /// The fused top `k` of `lists` (each best first). A passage is identified by its id; the copy
    /// from the first list that has it is kept, with the fused score. Ties are broken by id, so the
    /// result does not depend on hash order.
    pub fn fuse(&self, lists: &[Vec<Passage>], k: usize) -> Vec<Passage> {
        match *self {
            Fusion::Rrf { k: c } => reciprocal_rank_fusion(lists, c, k),
            Fusion::Weighted { weights } => weighted_fusion(lists, &weights, k),
        }
    }
}

/// Reciprocal-rank fusion of `lists` with constant `c`; a passage repeated within one list counts
/// at its best rank only.
pub fn reciprocal_rank_fusion(lists: &[Vec<Passage>], c: f32, k: usize) -> Vec<Passage> {
    let mut acc = Accumulator::default();
    for list in lists {
        let mut seen = std::collections::HashSet::new();
        for (rank, p) in list.iter().enumerate() {
            if seen.insert(p.id.as_str()) {
                acc.add(p, 1.0 / (c.max(0.0) + rank as f32 + 1.0));
            }
        }
    }
    acc.top(k)
}

/// Weighted-score fusion: scores min-max normalised per list (a list whose scores are all equal
/// gives each of its passages 1), times the list's weight (weights beyond the given ones are 1).
pub fn weighted_fusion(lists: &[Vec<Passage>], weights: &[f32], k: usize) -> Vec<Passage> {
    let mut acc = Accumulator::default();
    for (i, list) in lists.iter().enumerate() {
        let weight = weights.get(i).copied().unwrap_or(1.0);
        let finite = || list.iter().map(|p| p.score).filter(|s| s.is_finite());
        let (lo, hi) = (finite().fold(f32::INFINITY, f32::min), finite().fold(f32::NEG_INFINITY, f32::max));
        let mut seen = std::collections::HashSet::new();
        for p in list {
            if !seen.insert(p.id.as_str()) {
                continue;
            }
            let norm = if !p.score.is_finite() {
                0.0
            } else if hi > lo {
                (p.score - lo) / (hi - lo)
            } else {
                1.0
            };
            acc.add(p, weight * norm);
        }
    }
    acc.top(k)
}

#[derive(Default)]
struct Accumulator {
    by_id: HashMap<String, usize>,
    fused: Vec<(Passage, f32)>,
}

impl Accumulator {
    fn add(&mut self, p: &Passage, score: f32) {
        match self.by_id.get(&p.id) {
            Some(&i) => self.fused[i].1 += score,
            None => {
                self.by_id.insert(p.id.clone(), self.fused.len());
                self.fused.push((p.clone(), score));
            }
        }
    }

    fn top(mut self, k: usize) -> Vec<Passage> {
        self.fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.id.cmp(&b.0.id)));
        self.fused
            .into_iter()
            .take(k)
            .map(|(mut p, s)| {
                p.score = s;
                p
            })
            .collect()
    }
}

/// BM25 and dense retrieval fused: each side retrieves `depth(k)` candidates, the lists are fused.
pub struct HybridRetriever {
    lexical: Arc<dyn Retriever>,
    dense: Arc<dyn Retriever>,
    fusion: Fusion,
    /// Candidates per side as a multiple of `k` (at least `k`): fusion can only promote what a side
    /// returned, so each side looks deeper than the final list.
    depth_factor: usize,
}

impl HybridRetriever {
    pub fn new(lexical: Arc<dyn Retriever>, dense: Arc<dyn Retriever>) -> Self {
        Self { lexical, dense, fusion: Fusion::default(), depth_factor: 3 }
    }

    pub fn with_fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    pub fn with_depth_factor(mut self, factor: usize) -> Self {
        self.depth_factor = factor.max(1);
        self
    }
}

#[async_trait]
impl Retriever for HybridRetriever {
    fn name(&self) -> &str {
        "hybrid"
    }

    async fn retrieve(&self, query: &str, k: usize) -> hopwise_core::Result<Vec<Passage>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let depth = k.saturating_mul(self.depth_factor).max(k);
        let (lexical, dense) = tokio::join!(self.lexical.retrieve(query, depth), self.dense.retrieve(query, depth));
        Ok(self.fusion.fuse(&[lexical?, dense?], k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, f32)]) -> Vec<Passage> {
        items.iter().map(|(id, s)| Passage { id: id.to_string(), score: *s, ..Default::default() }).collect()
    }

    fn ids(ps: &[Passage]) -> Vec<&str> {
        ps.iter().map(|p| p.id.as_str()).collect()
    }

    #[test]
    fn rrf_adds_reciprocal_ranks() {
        let a = list(&[("x", 9.0), ("y", 5.0)]);
        let b = list(&[("y", 0.9), ("z", 0.8)]);
        let fused = reciprocal_rank_fusion(&[a, b], 60.0, 10);
        // y: 1/62 + 1/61; x: 1/61; z: 1/62.
        assert_eq!(ids(&fused), ["y", "x", "z"]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-7);
        assert!((fused[1].score - 1.0 / 61.0).abs() < 1e-7);
    }

    #[test]
    fn rrf_counts_a_repeat_once_and_breaks_ties_by_id() {
        let fused = reciprocal_rank_fusion(&[list(&[("b", 1.0), ("b", 1.0)]), list(&[("a", 1.0)])], 60.0, 10);
        assert_eq!(ids(&fused), ["a", "b"], "equal scores: id order");
        assert!((fused[1].score - 1.0 / 61.0).abs() < 1e-7);
        assert!(reciprocal_rank_fusion(&[], 60.0, 5).is_empty());
        assert_eq!(reciprocal_rank_fusion(&[list(&[("a", 1.0), ("b", 1.0)])], 60.0, 1).len(), 1);
    }

    #[test]
    fn weighted_fusion_normalises_each_list() {
        // BM25-scale and cosine-scale scores: after min-max both lists span [0, 1].
        let bm25 = list(&[("a", 20.0), ("b", 10.0), ("c", 0.0)]);
        let dense = list(&[("c", 0.9), ("b", 0.7), ("a", 0.5)]);
        let fused = weighted_fusion(&[bm25.clone(), dense.clone()], &[0.5, 0.5], 10);
        // a: 0.5*1 + 0.5*0 = 0.5, b: 0.5*0.5 + 0.5*0.5 = 0.5, c: 0 + 0.5 = 0.5 -> ties by id.
        assert_eq!(ids(&fused), ["a", "b", "c"]);
        assert!(fused.iter().all(|p| (p.score - 0.5).abs() < 1e-6));
        let fused = weighted_fusion(&[bm25, dense], &[0.2, 0.8], 10);
        // c: 0.8, b: 0.1 + 0.4 = 0.5, a: 0.2.
        assert_eq!(ids(&fused), ["c", "b", "a"]);
        assert!((fused[0].score - 0.8).abs() < 1e-6 && (fused[1].score - 0.5).abs() < 1e-6);
    }

    #[test]
    fn weighted_fusion_handles_flat_and_non_finite_scores() {
        let flat = list(&[("a", 3.0), ("b", 3.0)]);
        let odd = list(&[("c", f32::NAN), ("a", 1.0)]);
        let fused = weighted_fusion(&[flat, odd], &[1.0, 1.0], 10);
        // a: 1 (flat list) + 1 (only finite score of its list) = 2, b: 1, c: 0.
        assert_eq!(ids(&fused), ["a", "b", "c"]);
        assert_eq!(fused[2].score, 0.0);
    }

    #[test]
    fn missing_passages_get_nothing_from_a_list() {
        let fused = Fusion::Weighted { weights: [1.0, 1.0] }
            .fuse(&[list(&[("a", 2.0), ("b", 1.0)]), list(&[("b", 1.0), ("c", 0.0)])], 2);
        // a: 1 + 0, b: 0 + 1 (c would be 0 + 0): a tie, broken by id.
        assert_eq!(ids(&fused), ["a", "b"]);
    }
}
