//! The few numeric kernels a BERT encoder needs, on plain `f32` slices.
//!
//! Matrix products go through `matrixmultiply` (runtime-dispatched AVX2/FMA kernels, no C build),
//! which suits the encoder's small, tall-and-thin shapes.

/// Calls the `#[inline(always)]` function `body` through a copy compiled for AVX-512 or AVX2 when
/// the CPU has them (picked at run time; the crate is built for baseline x86-64), so its element-wise
/// loops vectorise 16 or 8 wide. `body` must call nothing that is not inlined (hence [`exp`] rather
/// than `f32::exp`).
macro_rules! simd_dispatch {
    ($body:ident($($arg:ident: $ty:ty),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
            unsafe fn wide($($arg: $ty),*) {
                $body($($arg),*)
            }
            #[target_feature(enable = "avx2,fma")]
            unsafe fn narrow($($arg: $ty),*) {
                $body($($arg),*)
            }
            // SAFETY: each copy runs only on a CPU with the features it is compiled for.
            match simd_level() {
                2 => return unsafe { wide($($arg),*) },
                1 => return unsafe { narrow($($arg),*) },
                _ => {}
            }
        }
        $body($($arg),*)
    }};
}

/// A strided read-only view of a row-major-ish matrix: element (r, c) is `data[r * row_stride + c * col_stride]`.
#[derive(Clone, Copy)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

/// A strided writable view; see [`MatRef`].
pub struct MatMut<'a> {
    pub data: &'a mut [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// A dense row-major `rows x cols` matrix.
    pub fn dense(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self { data, rows, cols, row_stride: cols, col_stride: 1 }
    }

    /// The transpose, without copying.
    pub fn t(self) -> Self {
        Self { rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }
}

impl<'a> MatMut<'a> {
    pub fn dense(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self { data, rows, cols, row_stride: cols, col_stride: 1 }
    }
}

/// Whether every element a strided view addresses lies inside `len`.
fn fits(len: usize, rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let last = (rows - 1).checked_mul(row_stride).and_then(|r| (cols - 1).checked_mul(col_stride).map(|c| (r, c)));
    matches!(last, Some((r, c)) if r.checked_add(c).is_some_and(|end| end < len))
}

/// `c = alpha * a * b + beta * c`.
///
/// Shapes and strides are internal invariants of the encoder (never user input), so a mismatch is a
/// bug and panics before any unchecked access happens.
pub fn matmul(alpha: f32, a: MatRef<'_>, b: MatRef<'_>, beta: f32, c: MatMut<'_>) {
    assert_eq!(a.cols, b.rows, "matmul: inner dimensions differ");
    assert_eq!((a.rows, b.cols), (c.rows, c.cols), "matmul: output shape differs");
    assert!(fits(a.data.len(), a.rows, a.cols, a.row_stride, a.col_stride), "matmul: a out of bounds");
    assert!(fits(b.data.len(), b.rows, b.cols, b.row_stride, b.col_stride), "matmul: b out of bounds");
    assert!(fits(c.data.len(), c.rows, c.cols, c.row_stride, c.col_stride), "matmul: c out of bounds");
    let stride = |s: usize| isize::try_from(s).expect("matmul: stride overflows isize");
    // SAFETY: the asserts above prove that every element addressed through the given shapes and strides
    // lies inside the borrowed slices, and `c` is borrowed mutably so it cannot alias `a` or `b`.
    unsafe {
        matrixmultiply::sgemm(
            a.rows,
            a.cols,
            b.cols,
            alpha,
            a.data.as_ptr(),
            stride(a.row_stride),
            stride(a.col_stride),
            b.data.as_ptr(),
            stride(b.row_stride),
            stride(b.col_stride),
            beta,
            c.data.as_mut_ptr(),
            stride(c.row_stride),
            stride(c.col_stride),
        );
    }
}

/// Row-wise layer normalisation in place: `x = (x - mean) / sqrt(var + eps) * gamma + beta`.
pub fn layer_norm(x: &mut [f32], width: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    simd_dispatch!(layer_norm_rows(x: &mut [f32], width: usize, gamma: &[f32], beta: &[f32], eps: f32))
}

#[inline(always)]
fn layer_norm_rows(x: &mut [f32], width: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    let add = |a: f32, b: f32| a + b;
    for row in x.chunks_exact_mut(width) {
        let n = width as f32;
        let mean = lanes(row, 0.0, add, add) / n;
        let var = lanes(row, 0.0, |s, v| s + (v - mean) * (v - mean), add) / n;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// Row-wise softmax in place.
pub fn softmax_rows(x: &mut [f32], width: usize) {
    simd_dispatch!(softmax_rows_inline(x: &mut [f32], width: usize))
}

#[inline(always)]
fn softmax_rows_inline(x: &mut [f32], width: usize) {
    let larger = |m: f32, v: f32| if v > m { v } else { m };
    let add = |a: f32, b: f32| a + b;
    for row in x.chunks_exact_mut(width) {
        let max = lanes(row, f32::NEG_INFINITY, larger, larger);
        row.iter_mut().for_each(|v| *v = exp(*v - max));
        let inv = 1.0 / lanes(row, 0.0, add, add);
        row.iter_mut().for_each(|v| *v *= inv);
    }
}

/// The exact (erf-based) GELU that BERT's `"gelu"` activation means, in place.
pub fn gelu(x: &mut [f32]) {
    simd_dispatch!(gelu_inline(x: &mut [f32]))
}

#[inline(always)]
fn gelu_inline(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Folds `x` with `f` into 16 independent lanes (so the loop vectorises; plain folds over f32 stay
/// scalar, since reordering them changes rounding), then merges the lanes with `merge`.
#[inline(always)]
fn lanes(x: &[f32], init: f32, f: impl Fn(f32, f32) -> f32, merge: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; 16];
    let mut chunks = x.chunks_exact(16);
    for chunk in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a = f(*a, v);
        }
    }
    let tail = chunks.remainder().iter().fold(init, |a, &v| f(a, v));
    acc.iter().fold(tail, |a, &v| merge(a, v))
}

/// 2: AVX-512, 1: AVX2 + FMA, 0: neither (baseline x86-64, or another architecture).
#[allow(dead_code)]
fn simd_level() -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static LEVEL: OnceLock<u8> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq") {
                2
            } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                1
            } else {
                0
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// `e^x` to about 2e-7 relative error, in plain arithmetic so that loops over it vectorise: 2^n
/// from the exponent bits times a degree-6 Taylor polynomial on |r| <= ln2/2.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

/// erf from Numerical Recipes' erfc Chebyshev fit (fit error below 1.2e-7), evaluated in f32 with
/// the inlinable [`exp`]: the library's f64 `exp` is an opaque call in the encoder's hottest loop,
/// and f32 rounding keeps the error within 3e-7.
// The fit's published coefficients are kept verbatim; rounding them to f32 is intended.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub fn erf(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * exp(poly);
    if x >= 0.0 {
        1.0 - erfc
    } else {
        erfc - 1.0
    }
}

/// Scales `v` to unit L2 norm; a zero vector stays zero.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    #[test]
    fn matmul_matches_naive_product_including_transposed_operands() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let want = naive(&a, &b, m, k, n);
        let mut c = vec![0.0; m * n];
        matmul(1.0, MatRef::dense(&a, m, k), MatRef::dense(&b, k, n), 0.0, MatMut::dense(&mut c, m, n));
        for (x, y) in c.iter().zip(&want) {
            assert!((x - y).abs() < 1e-5);
        }
        // b stored as its transpose [n x k], read through a transposed view.
        let bt: Vec<f32> = (0..n * k).map(|idx| b[(idx % k) * n + idx / k]).collect();
        let mut c2 = vec![1.0; m * n];
        matmul(1.0, MatRef::dense(&a, m, k), MatRef::dense(&bt, n, k).t(), 1.0, MatMut::dense(&mut c2, m, n));
        for (x, y) in c2.iter().zip(&want) {
            assert!((x - (y + 1.0)).abs() < 1e-5);
        }
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn matmul_refuses_views_past_the_slice() {
        let a = vec![0.0; 6];
        let mut c = vec![0.0; 4];
        let bad = MatRef { data: &a, rows: 3, cols: 2, row_stride: 3, col_stride: 1 };
        matmul(1.0, MatRef::dense(&a, 2, 3), bad, 0.0, MatMut::dense(&mut c, 2, 2));
    }

    #[test]
    #[allow(clippy::excessive_precision)]
    fn erf_matches_known_values() {
        for (x, want) in [(0.0, 0.0), (0.5, 0.520_499_9), (1.0, 0.842_700_8), (-2.0, -0.995_322_3), (4.0, 0.999_999_98)]
        {
            assert!((erf(x) - want).abs() < 3e-7, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn exp_matches_the_standard_library() {
        for i in -800..=800 {
            let x = i as f32 * 0.1;
            let (got, want) = (exp(x), x.exp());
            assert!((got - want).abs() <= 4e-7 * want, "exp({x}) = {got}, want {want}");
        }
        assert_eq!(exp(-1000.0), exp(-87.0), "clamped, no denormal blow-up");
    }

    #[test]
    fn softmax_and_layer_norm_have_their_defining_properties() {
        let mut x = vec![1.0, 2.0, 3.0, 1000.0, 1000.0, 1000.0];
        softmax_rows(&mut x, 3);
        assert!((x[..3].iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[2] > x[1] && x[1] > x[0]);
        assert!(x[3..].iter().all(|v| (v - 1.0 / 3.0).abs() < 1e-6), "large logits stay finite");

        let mut y = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut y, 4, &[1.0; 4], &[0.5; 4], 1e-12);
        let mean = y.iter().sum::<f32>() / 4.0;
        let var = y.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 4.0;
        assert!((mean - 0.5).abs() < 1e-6 && (var - 1.0).abs() < 1e-5);
    }
}
