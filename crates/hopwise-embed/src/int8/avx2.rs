//! The int8 product on AVX2, for x86 CPUs without AVX-512 VNNI (most AMD parts and older Intel).
//!
//! AVX2 has no `vpdpbusd`; `vpmaddubsw` multiplies unsigned by signed bytes but saturates its i16
//! pair sums, and the packed `w + 128` bytes times activations can exceed i16. So the kernel takes
//! the weight back to signed (`w = packed ^ 0x80`), moves the activation's sign onto it
//! (`vpsignb`) and multiplies by `|x|`: both factors are at most 127 in magnitude, a pair sum at
//! most 32,258, so no saturation and the same integer dot products as the other kernels, without
//! the `-128 * sum` offset (the weights are already signed here).

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::x86_64::*;

    use super::super::{Int8Linear, QuantizedRows, BLOCK, GROUP, PANEL};

    /// Rows per micro-kernel call: 4 rows x 16 columns of i32 dot products (8 ymm) stay in
    /// registers through a block, next to the two weight registers and the broadcast activation.
    const MR: usize = 4;

    pub fn available() -> bool {
        use std::sync::OnceLock;
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| is_x86_feature_detected!("avx2"))
    }

    /// # Safety
    /// The CPU must have AVX2 ([`available`]); `x.width == layer.input` and
    /// `out.len() == x.rows * layer.output` (checked by the caller).
    #[target_feature(enable = "avx2")]
    pub unsafe fn gemm(layer: &Int8Linear, x: &QuantizedRows, out: &mut [f32]) {
        let mut tile = [0f32; MR * PANEL];
        let mut r = 0;
        while r < x.rows {
            let mr = (x.rows - r).min(MR);
            for panel in 0..layer.panels {
                let first_col = panel * PANEL;
                if first_col >= layer.output {
                    break;
                }
                match mr {
                    4 => kernel::<4>(layer, x, r, panel, &mut tile),
                    3 => kernel::<3>(layer, x, r, panel, &mut tile),
                    2 => kernel::<2>(layer, x, r, panel, &mut tile),
                    _ => kernel::<1>(layer, x, r, panel, &mut tile),
                }
                // Bias and the copy out (the last panel may hold padding columns past `output`).
                let cols = (layer.output - first_col).min(PANEL);
                for i in 0..mr {
                    let dst = &mut out[(r + i) * layer.output + first_col..][..cols];
                    let src = &tile[i * PANEL..][..cols];
                    for ((d, s), b) in dst.iter_mut().zip(src).zip(&layer.bias[first_col..first_col + cols]) {
                        *d = s + b;
                    }
                }
            }
            r += mr;
        }
    }

    /// `M` rows starting at `r` times one panel of 16 columns, into `tile` (`M x 16`, no bias).
    #[target_feature(enable = "avx2")]
    unsafe fn kernel<const M: usize>(
        layer: &Int8Linear,
        x: &QuantizedRows,
        r: usize,
        panel: usize,
        tile: &mut [f32; MR * PANEL],
    ) {
        let blocks = layer.input / BLOCK;
        let flip = _mm256_set1_epi8(-128);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        for b in 0..blocks {
            let mut dot = [[_mm256_setzero_si256(); 2]; M];
            // One (panel, block): 8 groups, each 16 columns x 4 bytes = two ymm of weights.
            let weights = layer.packed.as_ptr().add((panel * blocks + b) * BLOCK * PANEL);
            for g in 0..BLOCK / GROUP {
                let w = weights.add(g * PANEL * GROUP);
                let w0 = _mm256_xor_si256(_mm256_loadu_si256(w as *const __m256i), flip);
                let w1 = _mm256_xor_si256(_mm256_loadu_si256(w.add(32) as *const __m256i), flip);
                for (i, row) in dot.iter_mut().enumerate() {
                    let at = x.values.as_ptr().add((r + i) * layer.input + b * BLOCK + g * GROUP);
                    let xv = _mm256_set1_epi32((at as *const i32).read_unaligned());
                    let ax = _mm256_abs_epi8(xv);
                    let p0 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, xv));
                    let p1 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, xv));
                    row[0] = _mm256_add_epi32(row[0], _mm256_madd_epi16(p0, ones));
                    row[1] = _mm256_add_epi32(row[1], _mm256_madd_epi16(p1, ones));
                }
            }
            let scales = layer.scales.as_ptr().add((panel * blocks + b) * PANEL);
            let (ws0, ws1) = (_mm256_loadu_ps(scales), _mm256_loadu_ps(scales.add(8)));
            for (i, (acc, dot)) in acc.iter_mut().zip(&dot).enumerate() {
                let xs = _mm256_set1_ps(x.scales[(r + i) * blocks + b]);
                acc[0] = _mm256_add_ps(acc[0], _mm256_mul_ps(_mm256_cvtepi32_ps(dot[0]), _mm256_mul_ps(ws0, xs)));
                acc[1] = _mm256_add_ps(acc[1], _mm256_mul_ps(_mm256_cvtepi32_ps(dot[1]), _mm256_mul_ps(ws1, xs)));
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(tile.as_mut_ptr().add(i * PANEL), acc[0]);
            _mm256_storeu_ps(tile.as_mut_ptr().add(i * PANEL + 8), acc[1]);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::super::{Int8Linear, QuantizedRows};

    pub fn available() -> bool {
        false
    }

    /// # Safety
    /// Never called: [`available`] is false off x86-64.
    pub unsafe fn gemm(_: &Int8Linear, _: &QuantizedRows, _: &mut [f32]) {
        unreachable!("AVX2 kernel called off x86-64")
    }
}

pub use imp::{available, gemm};
