//! Black-box uncertainty estimators over `n` sampled responses (Lin, Trivedi & Sun 2023, as
//! LM-Polygraph implements them). Pure functions: no model calls happen here.
//!
//! Every estimator reads a symmetric similarity matrix `W` (`w_ii = 1`, entries in `[0, 1]`), built
//! from word overlap ([`jaccard_matrix`]) or from entailment probabilities ([`nli_similarity`]).
//! With `D = diag(Σ_j w_ij)` and the normalised Laplacian `L = I − D^-½ W D^-½`:
//!
//! | estimator | formula | identical responses | mutually dissimilar |
//! |---|---|---|---|
//! | Degree | `trace(nI − D) / n²` | 0 | `(n − 1) / n` |
//! | Eigenvalue Laplacian | `Σ_k max(0, 1 − λ_k)` | 1 | `n` |
//! | Eccentricity | norm of the centred spectral embedding | 0 | `√(n − 1)` |
//! | Semantic sets | classes under bidirectional entailment | 1 | `n` |
//!
//! The eigen-decomposition is a small cyclic Jacobi solver ([`symmetric_eigen`]): `n` is the number
//! of samples (≤ ~20), where it is exact to machine precision and needs no linear-algebra crate.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Eigenvalues of `L` below this cut-off select the eigenvectors of the Eccentricity embedding.
/// LM-Polygraph's default (`thres = 0.9`); the paper we follow used LM-Polygraph, so we keep it.
pub const ECC_EIGENVALUE_CUTOFF: f64 = 0.9;
/// Eigenvalues this close to the cut-off count as at it (and are left out, as LM-Polygraph's `<`).
const CUTOFF_TOLERANCE: f64 = 1e-9;

/// A dense square matrix, row-major. Serialises as a list of rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    n: usize,
    data: Vec<f64>,
}

impl Matrix {
    pub fn zeros(n: usize) -> Self {
        Self { n, data: vec![0.0; n * n] }
    }

    pub fn identity(n: usize) -> Self {
        let mut m = Self::zeros(n);
        for i in 0..n {
            m.set(i, i, 1.0);
        }
        m
    }

    /// A square matrix from rows; `None` when the rows are not all of length `rows.len()`.
    pub fn from_rows(rows: &[Vec<f64>]) -> Option<Self> {
        let n = rows.len();
        if rows.iter().any(|r| r.len() != n) {
            return None;
        }
        Some(Self { n, data: rows.iter().flatten().copied().collect() })
    }

    /// A similarity matrix: symmetric, unit diagonal, entries clamped to `[0, 1]` (NaN becomes 0),
    /// with `w_ij = f(i, j)` for `i < j`.
    pub fn similarity(n: usize, mut f: impl FnMut(usize, usize) -> f64) -> Self {
        let mut m = Self::identity(n);
        for i in 0..n {
            for j in i + 1..n {
                let w = clamp_unit(f(i, j));
                m.set(i, j, w);
                m.set(j, i, w);
            }
        }
        m
    }

    pub fn n(&self) -> usize {
        self.n
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }

    pub fn set(&mut self, i: usize, j: usize, v: f64) {
        self.data[i * self.n + j] = v;
    }

    pub fn rows(&self) -> Vec<Vec<f64>> {
        self.data.chunks(self.n.max(1)).take(self.n).map(<[f64]>::to_vec).collect()
    }

    /// The matrix with rows and columns reordered: entry `(i, j)` of the result is `(p[i], p[j])`.
    pub fn permuted(&self, p: &[usize]) -> Self {
        let mut m = Self::zeros(self.n);
        for i in 0..self.n {
            for j in 0..self.n {
                m.set(i, j, self.get(p[i], p[j]));
            }
        }
        m
    }
}

impl Serialize for Matrix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.rows().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Matrix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let rows = Vec::<Vec<f64>>::deserialize(d)?;
        Self::from_rows(&rows).ok_or_else(|| serde::de::Error::custom("matrix rows must form a square"))
    }
}

fn clamp_unit(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

// ------------------------------------------------------------------------------------ similarity

/// The lower-cased words of `text`, with punctuation trimmed from each word's ends so that
/// "Paris." and "paris" count as the same word.
pub fn word_set(text: &str) -> BTreeSet<String> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// `|A ∩ B| / |A ∪ B|` over word sets. Two texts without words are identical (1); a text without
/// words shares nothing with one that has words (0).
pub fn jaccard_sets(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

pub fn jaccard(a: &str, b: &str) -> f64 {
    jaccard_sets(&word_set(a), &word_set(b))
}

/// Pairwise Jaccard similarity of `texts`.
pub fn jaccard_matrix<S: AsRef<str>>(texts: &[S]) -> Matrix {
    let sets: Vec<_> = texts.iter().map(|t| word_set(t.as_ref())).collect();
    Matrix::similarity(sets.len(), |i, j| jaccard_sets(&sets[i], &sets[j]))
}

/// NLI similarity from directional entailment probabilities: `entail(i, j)` is p(response `i`
/// entails response `j`); `w_ij` is the mean of both directions.
pub fn nli_similarity(entail: &Matrix) -> Matrix {
    Matrix::similarity(entail.n(), |i, j| (entail.get(i, j) + entail.get(j, i)) / 2.0)
}

// ------------------------------------------------------------------------------------ estimators

/// `U_Deg = trace(nI − D) / n²`: 0 when all responses agree, `(n − 1)/n` when none overlap.
pub fn degree_uncertainty(w: &Matrix) -> f64 {
    let n = w.n();
    if n == 0 {
        return 0.0;
    }
    let total: f64 = (0..n).flat_map(|i| (0..n).map(move |j| (i, j))).map(|(i, j)| w.get(i, j)).sum();
    let nf = n as f64;
    ((nf * nf - total) / (nf * nf)).max(0.0)
}

/// `L = I − D^-½ W D^-½`. A row without weight (impossible with a unit diagonal) is left isolated.
pub fn normalized_laplacian(w: &Matrix) -> Matrix {
    let n = w.n();
    let inv_sqrt_deg: Vec<f64> = (0..n)
        .map(|i| {
            let d: f64 = (0..n).map(|j| w.get(i, j)).sum();
            if d > 0.0 {
                1.0 / d.sqrt()
            } else {
                0.0
            }
        })
        .collect();
    let mut l = Matrix::identity(n);
    for i in 0..n {
        for j in 0..n {
            let v = l.get(i, j) - inv_sqrt_deg[i] * w.get(i, j) * inv_sqrt_deg[j];
            l.set(i, j, v);
        }
    }
    l
}

/// `U_EigV = Σ_k max(0, 1 − λ_k(L))`, a continuous count of clusters: 1 when all responses agree,
/// `n` when none overlap.
pub fn eigv_uncertainty(w: &Matrix) -> f64 {
    if w.n() == 0 {
        return 0.0;
    }
    symmetric_eigen(&normalized_laplacian(w)).values.iter().map(|l| (1.0 - l).max(0.0)).sum()
}

/// Eccentricity with LM-Polygraph's cut-off ([`ECC_EIGENVALUE_CUTOFF`]).
pub fn eccentricity(w: &Matrix) -> f64 {
    eccentricity_with_cutoff(w, ECC_EIGENVALUE_CUTOFF)
}

/// `U_Ecc`: embed response `j` as row `j` of the eigenvectors of `L` whose eigenvalues are below
/// `cutoff` (at least the smallest one is always used), centre the embeddings, and take the
/// Frobenius norm of the centred set. 0 when all responses agree, `√(n − 1)` when none overlap.
pub fn eccentricity_with_cutoff(w: &Matrix, cutoff: f64) -> f64 {
    let n = w.n();
    if n == 0 {
        return 0.0;
    }
    let eig = symmetric_eigen(&normalized_laplacian(w));
    // An eigenvalue at the cut-off (0.9 is one for some sets of short answers) must fall on the
    // same side whatever the responses' order: rounding noise alone would otherwise decide.
    let keep = eig.values.iter().filter(|&&l| l < cutoff - CUTOFF_TOLERANCE).count().max(1);
    let mut sum_sq = 0.0;
    for v in eig.vectors.iter().take(keep) {
        let mean = v.iter().sum::<f64>() / n as f64;
        sum_sq += v.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
    }
    sum_sq.sqrt()
}

/// Number of classes of `n` responses when `i` and `j` share a class whenever
/// `mutually_entail(i, j)` (called for `i < j`), closed transitively (union-find).
pub fn num_semantic_sets(n: usize, mut mutually_entail: impl FnMut(usize, usize) -> bool) -> usize {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut classes = n;
    for i in 0..n {
        for j in i + 1..n {
            let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
            if ri != rj && mutually_entail(i, j) {
                parent[rj] = ri;
                classes -= 1;
            }
        }
    }
    classes
}

// ------------------------------------------------------------------------------------ eigen-solver

/// Eigen-decomposition of a symmetric matrix: `values` ascending, `vectors[k]` the unit eigenvector
/// of `values[k]`.
#[derive(Debug, Clone)]
pub struct Eigen {
    pub values: Vec<f64>,
    pub vectors: Vec<Vec<f64>>,
}

/// Cyclic Jacobi rotations until the off-diagonal mass vanishes (quadratic convergence; a 20×20
/// matrix takes a handful of sweeps). Only the symmetric part of `a` is meaningful.
pub fn symmetric_eigen(a: &Matrix) -> Eigen {
    const MAX_SWEEPS: usize = 100;
    let n = a.n();
    let mut m = a.clone();
    let mut v = Matrix::identity(n);
    let scale: f64 = m.data.iter().map(|x| x * x).sum::<f64>().max(f64::MIN_POSITIVE);
    for _ in 0..MAX_SWEEPS {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|(i, j)| i != j)
            .map(|(i, j)| m.get(i, j).powi(2))
            .sum();
        if off <= scale * 1e-30 || !off.is_finite() {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                rotate(&mut m, &mut v, p, q);
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| m.get(x, x).total_cmp(&m.get(y, y)));
    Eigen {
        values: order.iter().map(|&k| m.get(k, k)).collect(),
        vectors: order.iter().map(|&k| (0..n).map(|r| v.get(r, k)).collect()).collect(),
    }
}

/// One Jacobi rotation in the `(p, q)` plane that zeroes `m[p][q]`; accumulates it into `v`.
fn rotate(m: &mut Matrix, v: &mut Matrix, p: usize, q: usize) {
    let apq = m.get(p, q);
    if apq.abs() < f64::MIN_POSITIVE {
        return;
    }
    let theta = (m.get(q, q) - m.get(p, p)) / (2.0 * apq);
    // t = tan of the rotation angle, the smaller root of t² + 2tθ − 1 = 0.
    let t =
        if theta.abs() > 1e150 { 0.5 / theta } else { theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt()) };
    let c = 1.0 / (t * t + 1.0).sqrt();
    let s = t * c;
    let n = m.n();
    for k in 0..n {
        let (akp, akq) = (m.get(k, p), m.get(k, q));
        m.set(k, p, c * akp - s * akq);
        m.set(k, q, s * akp + c * akq);
    }
    for k in 0..n {
        let (apk, aqk) = (m.get(p, k), m.get(q, k));
        m.set(p, k, c * apk - s * aqk);
        m.set(q, k, s * apk + c * aqk);
    }
    m.set(p, q, 0.0);
    m.set(q, p, 0.0);
    for k in 0..n {
        let (vkp, vkq) = (v.get(k, p), v.get(k, q));
        v.set(k, p, c * vkp - s * vkq);
        v.set(k, q, s * vkp + c * vkq);
    }
}

// ------------------------------------------------------------------------------------ choice

/// Which estimator gates retrieval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Estimator {
    /// Degree matrix over Jaccard similarity.
    #[default]
    DegJaccard,
    /// Degree matrix over NLI similarity.
    DegNli,
    /// Eigenvalue Laplacian.
    Eigv,
    /// Eccentricity.
    Ecc,
    /// Number of semantic sets (NLI).
    Numsets,
}

impl Estimator {
    pub const ALL: [Estimator; 5] = [Self::DegJaccard, Self::DegNli, Self::Eigv, Self::Ecc, Self::Numsets];

    pub fn name(self) -> &'static str {
        match self {
            Self::DegJaccard => "deg-jaccard",
            Self::DegNli => "deg-nli",
            Self::Eigv => "eigv",
            Self::Ecc => "ecc",
            Self::Numsets => "numsets",
        }
    }

    /// The paper's thresholds (Jaccard degree 0.4, NLI degree 0.5, Eccentricity 2, Semantic Sets 2).
    /// The paper does not use EigV; it is a continuous count of clusters (1 = full agreement), so it
    /// gets the Semantic Sets cut: retrieve when the samples look like more than two clusters.
    pub fn default_threshold(self) -> f64 {
        match self {
            Self::DegJaccard => 0.4,
            Self::DegNli => 0.5,
            Self::Eigv | Self::Ecc | Self::Numsets => 2.0,
        }
    }

    /// The largest value the estimator can take with `n` samples (mutually dissimilar responses).
    pub fn max_value(self, n: usize) -> f64 {
        let nf = n as f64;
        match self {
            Self::DegJaccard | Self::DegNli => {
                if n == 0 {
                    0.0
                } else {
                    (nf - 1.0) / nf
                }
            }
            Self::Eigv | Self::Numsets => nf,
            Self::Ecc => (nf - 1.0).max(0.0).sqrt(),
        }
    }

    /// Whether the estimator needs NLI judgements by definition (`deg-nli`, `numsets`).
    pub fn requires_nli(self) -> bool {
        matches!(self, Self::DegNli | Self::Numsets)
    }

    /// `U` from a similarity matrix. Semantic sets read `w_ij ≥ 0.5` as mutual entailment here; the
    /// strategy calls [`num_semantic_sets`] with the judge's labels instead when it has them.
    pub fn from_similarity(self, w: &Matrix) -> f64 {
        match self {
            Self::DegJaccard | Self::DegNli => degree_uncertainty(w),
            Self::Eigv => eigv_uncertainty(w),
            Self::Ecc => eccentricity(w),
            Self::Numsets => num_semantic_sets(w.n(), |i, j| w.get(i, j) >= 0.5) as f64,
        }
    }
}

impl std::fmt::Display for Estimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests;
