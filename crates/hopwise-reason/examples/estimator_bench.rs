//! Cost of each uncertainty estimator per call, excluding model calls (the samples and, for NLI,
//! the entailment probabilities are given).
//!
//! Run: `cargo run --release -p hopwise-reason --example estimator_bench [n ...]` (default n = 10).

use std::hint::black_box;
use std::time::Instant;

use hopwise_reason::uncertainty::{
    degree_uncertainty, eccentricity, eigv_uncertainty, jaccard_matrix, nli_similarity, num_semantic_sets, Matrix,
};

/// Sentence-length samples with partial overlap, like sampled next sentences.
fn samples(n: usize) -> Vec<String> {
    let subjects = ["The film", "Fire Over England", "The director", "William K. Howard", "Eldar Ryazanov"];
    let verbs = ["was directed by", "died on", "was born in", "is known for"];
    let objects = ["November 30, 2015", "Moscow in 1927", "a British studio", "the year 1954", "St. Marys, Ohio"];
    (0..n).map(|i| format!("{} {} {}.", subjects[i % 5], verbs[(i / 2) % 4], objects[(i * 7 + 3) % 5])).collect()
}

/// Directional entailment probabilities standing in for a judge's answers.
fn entailment(n: usize) -> Matrix {
    let mut m = Matrix::identity(n);
    for i in 0..n {
        for j in 0..n {
            if i != j {
                m.set(i, j, ((i * 31 + j * 17) % 100) as f64 / 100.0);
            }
        }
    }
    m
}

/// Mean microseconds per call of `f`, over enough iterations to take ~0.3 s.
fn time_us(mut f: impl FnMut() -> f64) -> f64 {
    let start = Instant::now();
    let mut iters = 0u64;
    while start.elapsed().as_secs_f64() < 0.05 {
        black_box(f());
        iters += 1;
    }
    let target = (iters as f64 * 6.0).max(10.0) as u64;
    let start = Instant::now();
    for _ in 0..target {
        black_box(f());
    }
    start.elapsed().as_secs_f64() * 1e6 / target as f64
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10] } else { sizes };
    println!("| n | estimator | µs per call |");
    println!("|---|---|---|");
    for n in sizes {
        let texts = samples(n);
        let entail = entailment(n);
        let w = jaccard_matrix(&texts);
        let rows: Vec<(&str, f64)> = vec![
            ("jaccard matrix only", time_us(|| jaccard_matrix(black_box(&texts)).get(0, 0))),
            ("deg-jaccard (matrix + degree)", time_us(|| degree_uncertainty(&jaccard_matrix(black_box(&texts))))),
            ("deg-nli (from entailment probs)", time_us(|| degree_uncertainty(&nli_similarity(black_box(&entail))))),
            ("eigv (jaccard)", time_us(|| eigv_uncertainty(&jaccard_matrix(black_box(&texts))))),
            ("ecc (jaccard)", time_us(|| eccentricity(&jaccard_matrix(black_box(&texts))))),
            ("eigv (given matrix)", time_us(|| eigv_uncertainty(black_box(&w)))),
            ("ecc (given matrix)", time_us(|| eccentricity(black_box(&w)))),
            (
                "numsets (from entailment labels)",
                time_us(|| {
                    let e = black_box(&entail);
                    num_semantic_sets(n, |i, j| e.get(i, j) > 0.5 && e.get(j, i) > 0.5) as f64
                }),
            ),
        ];
        for (name, us) in rows {
            println!("| {n} | {name} | {us:.2} |");
        }
    }
}
