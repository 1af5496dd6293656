//! int8 linear layers for the encoder: weights and activations quantized in blocks of 32 along the
//! inner dimension, each block with its own f32 scale (the scheme of ggml's Q8_0).
//!
//! Why blocks: BERT activations have a few outlier features; one scale per row (or per tensor, as
//! ONNX Runtime's dynamic quantization uses) lets them flatten every other value, and the vectors
//! drift away from the f32 model's. One scale per 32 values keeps an outlier from flattening more
//! than its own block.
//!
//! The product runs on AVX-512 VNNI (`vpdpbusd`) when the CPU has it, else on AVX2, detected at run
//! time, and on portable scalar code otherwise; all use the same packed weights and compute the same
//! integer dot products (only the order of the f32 scaling differs).

mod avx2;
mod avx512;
mod portable;

/// Values per quantization block (along the inner dimension).
pub const BLOCK: usize = 32;
/// Output columns per packed panel (one AVX-512 register of i32 lanes).
const PANEL: usize = 16;
/// Inner-dimension values per `vpdpbusd` step (4 bytes per i32 lane).
const GROUP: usize = 4;

/// `y = x W^T + b` with `W` quantized to int8 in blocks of [`BLOCK`] and packed for the kernels.
pub struct Int8Linear {
    /// `W + 128` as u8, laid out `[panel][block][group][column in panel][4]`.
    packed: Vec<u8>,
    /// Scale of each (panel column, block): `[panel][block][column in panel]`.
    scales: Vec<f32>,
    bias: Vec<f32>,
    input: usize,
    output: usize,
    panels: usize,
}

/// A batch of activation rows quantized for [`Int8Linear::forward`].
#[derive(Default)]
pub struct QuantizedRows {
    values: Vec<i8>,
    /// Scale of each (row, block).
    scales: Vec<f32>,
    /// `-128 * sum(values of the block)` for each (row, block): the kernels store weights as
    /// `w + 128`, and this term takes the offset back out.
    offsets: Vec<i32>,
    rows: usize,
    width: usize,
}

impl Int8Linear {
    /// Quantizes a PyTorch-layout `[output x input]` weight. `None` when `input` is not a multiple
    /// of [`BLOCK`] (the caller keeps the f32 layer then).
    pub fn new(weight: &[f32], bias: &[f32], output: usize, input: usize) -> Option<Self> {
        if input == 0 || !input.is_multiple_of(BLOCK) || weight.len() != output * input || bias.len() != output {
            return None;
        }
        let blocks = input / BLOCK;
        let panels = output.div_ceil(PANEL).next_multiple_of(2);
        let mut packed = vec![128u8; panels * PANEL * input];
        let mut scales = vec![0f32; panels * blocks * PANEL];
        for n in 0..output {
            let (panel, col) = (n / PANEL, n % PANEL);
            let row = &weight[n * input..(n + 1) * input];
            for (b, block) in row.chunks_exact(BLOCK).enumerate() {
                let (scale, inv) = block_scale(block.iter().fold(0f32, |m, v| m.max(v.abs())));
                scales[(panel * blocks + b) * PANEL + col] = scale;
                for (i, v) in block.iter().enumerate() {
                    let q = (v * inv).round().clamp(-127.0, 127.0) as i32;
                    let (g, t) = (i / GROUP, i % GROUP);
                    let at = (((panel * blocks + b) * (BLOCK / GROUP) + g) * PANEL + col) * GROUP + t;
                    packed[at] = (q + 128) as u8;
                }
            }
        }
        Some(Self { packed, scales, bias: bias.to_vec(), input, output, panels })
    }

    pub fn input(&self) -> usize {
        self.input
    }

    /// Writes `x W^T + b` for the quantized rows into `out` (`rows x output`, row-major).
    pub fn forward(&self, x: &QuantizedRows, out: &mut [f32]) {
        assert_eq!(x.width, self.input, "int8 linear: input width differs");
        assert!(out.len() >= x.rows * self.output, "int8 linear: output too small");
        let out = &mut out[..x.rows * self.output];
        if avx512::available() {
            // SAFETY: `available` checked the CPU features the kernel is compiled for; shapes were
            // checked above and the buffers were built by `new` and `quantize` with those shapes.
            unsafe { avx512::gemm(self, x, out) }
        } else if avx2::available() {
            // SAFETY: as above, for AVX2.
            unsafe { avx2::gemm(self, x, out) }
        } else {
            portable::gemm(self, x, out)
        }
    }
}

impl QuantizedRows {
    /// Quantizes `rows` rows of width `width` (a multiple of [`BLOCK`]) from `x`, reusing buffers.
    pub fn quantize(&mut self, x: &[f32], rows: usize, width: usize) {
        assert!(width.is_multiple_of(BLOCK) && x.len() >= rows * width, "int8 quantize: bad shape");
        let blocks = width / BLOCK;
        self.values.resize(rows * width, 0);
        self.scales.resize(rows * blocks, 0.0);
        self.offsets.resize(rows * blocks, 0);
        self.rows = rows;
        self.width = width;
        let x = &x[..rows * width];
        if avx512::available() {
            // SAFETY: the CPU has the features; every buffer was sized above for `rows * blocks` blocks.
            unsafe { avx512::quantize(x, &mut self.values, &mut self.scales, &mut self.offsets) }
        } else {
            portable::quantize(x, &mut self.values, &mut self.scales, &mut self.offsets)
        }
    }
}

/// Scale and rounding of one block, shared by the quantizers: symmetric, `max |x| -> 127`, ties to
/// even (what the SIMD conversion does).
fn block_scale(max_abs: f32) -> (f32, f32) {
    let scale = max_abs / 127.0;
    (scale, if scale > 0.0 { 1.0 / scale } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn reference(x: &[f32], w: &[f32], b: &[f32], rows: usize, k: usize, n: usize) -> Vec<f32> {
        let mut out = vec![0f32; rows * n];
        for r in 0..rows {
            for c in 0..n {
                out[r * n + c] = b[c] + (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f32>();
            }
        }
        out
    }

    /// Shapes that exercise the row tail (7 rows) and a padded last panel (40 columns).
    fn check(rows: usize, k: usize, n: usize, kernel: impl Fn(&Int8Linear, &QuantizedRows, &mut [f32])) {
        let mut seed = 7;
        let x: Vec<f32> = (0..rows * k).map(|_| lcg(&mut seed)).collect();
        let w: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed) * 0.1).collect();
        let b: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
        let layer = Int8Linear::new(&w, &b, n, k).expect("k is a multiple of 32");
        let mut q = QuantizedRows::default();
        q.quantize(&x, rows, k);
        let mut out = vec![f32::NAN; rows * n];
        kernel(&layer, &q, &mut out);
        let want = reference(&x, &w, &b, rows, k, n);
        // Each product carries about 1/254 relative error from each operand; over k terms of size
        // ~0.05 that stays far below 0.02.
        for (got, want) in out.iter().zip(&want) {
            assert!((got - want).abs() < 0.02, "got {got}, want {want}");
        }
    }

    #[test]
    fn portable_kernel_matches_the_f32_product() {
        check(7, 96, 40, portable::gemm);
        check(13, 384, 64, portable::gemm);
    }

    /// Compares `kernel` with the portable kernel on random layers of the given shapes.
    fn matches_portable(
        mut seed: u64,
        shapes: &[(usize, usize, usize)],
        kernel: impl Fn(&Int8Linear, &QuantizedRows, &mut [f32]),
    ) {
        for &(rows, k, n) in shapes {
            let x: Vec<f32> = (0..rows * k).map(|_| lcg(&mut seed)).collect();
            let w: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed)).collect();
            let b: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let layer = Int8Linear::new(&w, &b, n, k).expect("layer");
            let mut q = QuantizedRows::default();
            q.quantize(&x, rows, k);
            let (mut fast, mut slow) = (vec![f32::NAN; rows * n], vec![0f32; rows * n]);
            kernel(&layer, &q, &mut fast);
            portable::gemm(&layer, &q, &mut slow);
            for (a, b) in fast.iter().zip(&slow) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b} ({rows}x{k}x{n})");
            }
        }
    }

    #[test]
    fn dispatched_kernel_matches_the_portable_one() {
        matches_portable(3, &[(1, 32, 16), (7, 96, 40), (13, 384, 64), (25, 64, 96)], |l, q, o| l.forward(q, o));
        check(7, 96, 40, |l, q, o| l.forward(q, o));
    }

    #[test]
    fn avx2_kernel_matches_the_portable_one() {
        if !avx2::available() {
            return;
        }
        // SAFETY (both closures): AVX2 is available; the shapes come from `new` and `quantize`.
        matches_portable(5, &[(1, 32, 16), (5, 96, 40), (9, 384, 64), (4, 1536, 384)], |l, q, o| unsafe {
            avx2::gemm(l, q, o)
        });
        check(7, 96, 40, |l, q, o| unsafe { avx2::gemm(l, q, o) });
    }

    #[test]
    fn dispatched_quantizer_matches_the_portable_one() {
        let mut seed = 11;
        let x: Vec<f32> = (0..5 * 96).map(|i| lcg(&mut seed) * if i % 7 == 0 { 40.0 } else { 1.0 }).collect();
        let mut fast = QuantizedRows::default();
        fast.quantize(&x, 5, 96);
        let (mut values, mut scales, mut offsets) = (vec![0i8; 5 * 96], vec![0f32; 15], vec![0i32; 15]);
        portable::quantize(&x, &mut values, &mut scales, &mut offsets);
        assert_eq!(fast.values, values);
        assert_eq!(fast.scales, scales);
        assert_eq!(fast.offsets, offsets);
        assert!(values.iter().any(|&v| v == 127 || v == -127), "each block reaches full scale");
    }

    #[test]
    fn widths_that_are_not_whole_blocks_are_refused() {
        assert!(Int8Linear::new(&[0.0; 40], &[0.0; 2], 2, 20).is_none());
        assert!(Int8Linear::new(&[0.0; 64], &[0.0; 1], 2, 32).is_none(), "bias length differs");
    }
}
