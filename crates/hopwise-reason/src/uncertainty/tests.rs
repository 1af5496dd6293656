use proptest::prelude::*;

use super::*;

const EPS: f64 = 1e-9;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-7
}

fn ones(n: usize) -> Matrix {
    Matrix::similarity(n, |_, _| 1.0)
}

fn mat_vec(a: &Matrix, x: &[f64]) -> Vec<f64> {
    (0..a.n()).map(|i| (0..a.n()).map(|j| a.get(i, j) * x[j]).sum()).collect()
}

fn assert_decomposes(a: &Matrix) {
    let eig = symmetric_eigen(a);
    let n = a.n();
    assert_eq!(eig.values.len(), n);
    assert!(eig.values.windows(2).all(|w| w[0] <= w[1] + EPS), "ascending: {:?}", eig.values);
    for (k, v) in eig.vectors.iter().enumerate() {
        let av = mat_vec(a, v);
        for i in 0..n {
            assert!((av[i] - eig.values[k] * v[i]).abs() < 1e-8, "A v = λ v fails for k={k}");
        }
        for (l, u) in eig.vectors.iter().enumerate() {
            let dot: f64 = v.iter().zip(u).map(|(x, y)| x * y).sum();
            let want = if k == l { 1.0 } else { 0.0 };
            assert!((dot - want).abs() < 1e-8, "orthonormality fails for {k},{l}: {dot}");
        }
    }
}

// ---------------------------------------------------------------- eigen-solver on known matrices

#[test]
fn eigen_of_known_matrices() {
    let two = Matrix::from_rows(&[vec![2.0, 1.0], vec![1.0, 2.0]]).expect("square");
    let e = symmetric_eigen(&two);
    assert!(close(e.values[0], 1.0) && close(e.values[1], 3.0), "{:?}", e.values);
    let r = std::f64::consts::FRAC_1_SQRT_2;
    assert!(close(e.vectors[1][0].abs(), r) && close(e.vectors[1][1].abs(), r));
    assert!(close(e.vectors[1][0], e.vectors[1][1]), "eigenvector of 3 is (1,1)/√2");

    // Path-graph Laplacian: eigenvalues 2 − √2, 2, 2 + √2.
    let path = Matrix::from_rows(&[vec![2.0, -1.0, 0.0], vec![-1.0, 2.0, -1.0], vec![0.0, -1.0, 2.0]]).expect("square");
    let e = symmetric_eigen(&path);
    let s2 = 2f64.sqrt();
    assert!(close(e.values[0], 2.0 - s2) && close(e.values[1], 2.0) && close(e.values[2], 2.0 + s2), "{:?}", e.values);
    assert_decomposes(&path);

    // Already diagonal (unsorted): values come back sorted with unit vectors.
    let diag = Matrix::from_rows(&[vec![3.0, 0.0, 0.0], vec![0.0, -1.0, 0.0], vec![0.0, 0.0, 0.5]]).expect("square");
    let e = symmetric_eigen(&diag);
    assert_eq!(e.values, vec![-1.0, 0.5, 3.0]);
    assert_eq!(e.vectors[0], vec![0.0, 1.0, 0.0]);

    // All-ones 4×4: one eigenvalue 4, three 0.
    let e = symmetric_eigen(&ones(4));
    assert!(e.values[..3].iter().all(|v| v.abs() < 1e-9) && close(e.values[3], 4.0), "{:?}", e.values);

    // Degenerate sizes.
    assert!(symmetric_eigen(&Matrix::zeros(0)).values.is_empty());
    let one = symmetric_eigen(&Matrix::from_rows(&[vec![7.0]]).expect("square"));
    assert_eq!((one.values, one.vectors), (vec![7.0], vec![vec![1.0]]));
}

#[test]
fn eigen_of_a_20x20_matrix() {
    // A fixed pseudo-random symmetric matrix (LCG), the largest size the strategy uses.
    let mut state = 12345u64;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 33) as f64 / (1u64 << 31) as f64) - 0.5
    };
    let n = 20;
    let mut a = Matrix::zeros(n);
    for i in 0..n {
        for j in i..n {
            let x = next();
            a.set(i, j, x);
            a.set(j, i, x);
        }
    }
    assert_decomposes(&a);
    let trace: f64 = (0..n).map(|i| a.get(i, i)).sum();
    assert!(close(symmetric_eigen(&a).values.iter().sum(), trace), "eigenvalues sum to the trace");
}

// ---------------------------------------------------------------- similarity

#[test]
fn jaccard_on_words() {
    assert_eq!(jaccard("Paris is big.", "paris IS big"), 1.0);
    assert!(close(jaccard("a b c", "b c d"), 0.5));
    assert_eq!(jaccard("", ""), 1.0, "two empty responses are the same response");
    assert_eq!(jaccard("", "x"), 0.0);
    assert_eq!(jaccard("  ...  ", ""), 1.0, "punctuation alone has no words");
    let w = jaccard_matrix(&["a b", "b c", "a b"]);
    assert_eq!(w.rows(), vec![vec![1.0, 1.0 / 3.0, 1.0], vec![1.0 / 3.0, 1.0, 1.0 / 3.0], vec![1.0, 1.0 / 3.0, 1.0]]);
}

#[test]
fn nli_similarity_averages_directions() {
    let e = Matrix::from_rows(&[vec![0.2, 1.0, 0.0], vec![0.5, 1.0, 0.0], vec![0.0, 0.0, 1.0]]).expect("square");
    let w = nli_similarity(&e);
    assert_eq!(w.get(0, 1), 0.75);
    assert_eq!(w.get(1, 0), 0.75);
    assert_eq!(w.get(0, 0), 1.0, "the diagonal is 1 whatever the judge said");
    assert_eq!(w.get(1, 2), 0.0);
}

#[test]
fn similarity_sanitises_entries() {
    let w = Matrix::similarity(3, |i, _| if i == 0 { f64::NAN } else { 7.0 });
    assert_eq!(w.rows(), vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 1.0], vec![0.0, 1.0, 1.0]]);
}

#[test]
fn matrix_json_round_trip() {
    let w = jaccard_matrix(&["a b", "b"]);
    let json = serde_json::to_string(&w).expect("serialise");
    assert_eq!(json, "[[1.0,0.5],[0.5,1.0]]");
    let back: Matrix = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, w);
    assert!(serde_json::from_str::<Matrix>("[[1.0,0.5]]").is_err());
}

// ---------------------------------------------------------------- estimators: extremes

#[test]
fn identical_responses_give_the_minimum() {
    for n in 1..=10 {
        let w = jaccard_matrix(&vec!["The film was directed by Ryazanov."; n]);
        assert!(degree_uncertainty(&w).abs() < EPS, "deg n={n}");
        assert!(close(eigv_uncertainty(&w), 1.0), "eigv n={n}: {}", eigv_uncertainty(&w));
        assert!(eccentricity(&w).abs() < 1e-7, "ecc n={n}: {}", eccentricity(&w));
        assert_eq!(Estimator::Numsets.from_similarity(&w), 1.0);
    }
}

#[test]
fn dissimilar_responses_give_the_maximum() {
    for n in 1..=10 {
        let texts: Vec<String> = (0..n).map(|i| format!("word{i} other{i}")).collect();
        let w = jaccard_matrix(&texts);
        assert_eq!(w, Matrix::identity(n));
        for est in Estimator::ALL {
            let u = est.from_similarity(&w);
            assert!(close(u, est.max_value(n)), "{est} n={n}: {u} vs {}", est.max_value(n));
        }
    }
    // The concrete values the thresholds are compared with.
    assert!(close(Estimator::DegJaccard.max_value(5), 0.8));
    assert!(close(Estimator::Ecc.max_value(5), 2.0));
    assert!(close(Estimator::Ecc.max_value(10), 3.0));
}

#[test]
fn two_clusters_sit_between_the_extremes() {
    let w = jaccard_matrix(&["paris", "paris", "paris", "lyon", "lyon"]);
    let deg = degree_uncertainty(&w);
    assert!(close(deg, (25.0 - 13.0) / 25.0), "{deg}");
    let eigv = eigv_uncertainty(&w);
    assert!(close(eigv, 2.0), "two disconnected clusters give two zero eigenvalues: {eigv}");
    assert_eq!(num_semantic_sets(5, |i, j| w.get(i, j) >= 0.5), 2);
    // k separated clusters embed as k points: the centred norm is √(k − 1).
    let ecc = eccentricity(&w);
    assert!(close(ecc, 1.0), "{ecc}");
}

#[test]
fn single_and_empty_inputs_are_stable() {
    let one = jaccard_matrix(&["anything"]);
    assert_eq!(degree_uncertainty(&one), 0.0);
    assert!(close(eigv_uncertainty(&one), 1.0));
    assert_eq!(eccentricity(&one), 0.0);
    assert_eq!(num_semantic_sets(1, |_, _| false), 1);

    let none = Matrix::zeros(0);
    assert_eq!(degree_uncertainty(&none), 0.0);
    assert_eq!(eigv_uncertainty(&none), 0.0);
    assert_eq!(eccentricity(&none), 0.0);
    assert_eq!(num_semantic_sets(0, |_, _| true), 0);

    let empties = jaccard_matrix(&["", "", ""]);
    assert_eq!(empties, ones(3), "empty strings agree with each other");
    let mixed = jaccard_matrix(&["", "a", ""]);
    for est in Estimator::ALL {
        assert!(est.from_similarity(&mixed).is_finite());
    }
}

#[test]
fn zero_weight_rows_do_not_divide_by_zero() {
    let w = Matrix::zeros(3);
    let l = normalized_laplacian(&w);
    assert_eq!(l, Matrix::identity(3));
    assert!(eigv_uncertainty(&w).is_finite() && eccentricity(&w).is_finite());
}

#[test]
fn eccentricity_cutoff_keeps_at_least_one_vector() {
    let w = jaccard_matrix(&["a", "a", "b"]);
    let all = eccentricity_with_cutoff(&w, 10.0);
    let none = eccentricity_with_cutoff(&w, -1.0);
    assert!(none.is_finite() && none <= all + EPS);
    // With every eigenvector kept the centred embedding spans the whole centred space.
    assert!(close(all, 2f64.sqrt()), "{all}");
}

#[test]
fn semantic_sets_are_transitive() {
    // 0~1 and 1~2 put 0, 1, 2 in one class even though 0 and 2 were never linked.
    let links = [(0, 1), (1, 2), (3, 4)];
    assert_eq!(num_semantic_sets(6, |i, j| links.contains(&(i, j))), 3);
}

#[test]
fn estimator_names_and_defaults() {
    for est in Estimator::ALL {
        let json = serde_json::to_value(est).expect("serialise");
        assert_eq!(json, serde_json::Value::String(est.name().to_string()));
        assert!(est.default_threshold() < est.max_value(5) || est == Estimator::Ecc);
    }
    assert_eq!(Estimator::DegJaccard.default_threshold(), 0.4);
    assert_eq!(Estimator::DegNli.default_threshold(), 0.5);
    assert!(serde_json::from_str::<Estimator>("\"deg-cosine\"").is_err());
}

// ---------------------------------------------------------------- properties

fn similarity_strategy() -> impl Strategy<Value = Matrix> {
    (1usize..=12).prop_flat_map(|n| {
        proptest::collection::vec(0.0f64..=1.0, n * n).prop_map(move |raw| Matrix::similarity(n, |i, j| raw[i * n + j]))
    })
}

fn texts_strategy() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(
        proptest::collection::vec(prop::sample::select(vec!["a", "b", "c", "d", "e", "f", ""]), 0..5),
        1..9,
    )
    .prop_map(|v| v.into_iter().map(|words| words.join(" ")).collect())
}

proptest! {
    #[test]
    fn estimators_stay_in_bounds(w in similarity_strategy()) {
        let n = w.n();
        let deg = degree_uncertainty(&w);
        prop_assert!((-EPS..=Estimator::DegJaccard.max_value(n) + EPS).contains(&deg), "deg {deg}");
        let eigv = eigv_uncertainty(&w);
        prop_assert!((1.0 - 1e-7..=n as f64 + 1e-7).contains(&eigv), "eigv {eigv}");
        let ecc = eccentricity(&w);
        prop_assert!((0.0..=Estimator::Ecc.max_value(n) + 1e-7).contains(&ecc), "ecc {ecc}");
        let sets = Estimator::Numsets.from_similarity(&w);
        prop_assert!((1.0..=n as f64).contains(&sets));
    }

    #[test]
    fn laplacian_spectrum_is_in_zero_two(w in similarity_strategy()) {
        let eig = symmetric_eigen(&normalized_laplacian(&w));
        prop_assert!(eig.values[0].abs() < 1e-7, "the smallest eigenvalue is 0: {:?}", eig.values);
        prop_assert!(eig.values.iter().all(|&l| (-1e-7..=2.0 + 1e-7).contains(&l)));
    }

    #[test]
    fn eigen_decomposition_reconstructs(w in similarity_strategy()) {
        let eig = symmetric_eigen(&w);
        let n = w.n();
        for i in 0..n {
            for j in 0..n {
                let r: f64 = (0..n).map(|k| eig.values[k] * eig.vectors[k][i] * eig.vectors[k][j]).sum();
                prop_assert!((r - w.get(i, j)).abs() < 1e-8);
            }
        }
    }

    #[test]
    fn estimators_ignore_response_order(texts in texts_strategy(), seed in any::<u64>()) {
        let n = texts.len();
        let mut order: Vec<usize> = (0..n).collect();
        // Fisher-Yates with a small LCG so the permutation depends on the seed.
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            order.swap(i, (s >> 33) as usize % (i + 1));
        }
        let shuffled: Vec<&String> = order.iter().map(|&i| &texts[i]).collect();
        let w = jaccard_matrix(&texts);
        let ws = jaccard_matrix(&shuffled);
        prop_assert_eq!(&w.permuted(&order), &ws);
        for est in Estimator::ALL {
            let (a, b) = (est.from_similarity(&w), est.from_similarity(&ws));
            prop_assert!((a - b).abs() < 1e-6, "{} {} vs {}", est, a, b);
        }
    }

    #[test]
    fn similarity_is_symmetric(texts in texts_strategy()) {
        let w = jaccard_matrix(&texts);
        for i in 0..w.n() {
            prop_assert_eq!(w.get(i, i), 1.0);
            for j in 0..w.n() {
                prop_assert_eq!(w.get(i, j), w.get(j, i));
            }
        }
    }
}
