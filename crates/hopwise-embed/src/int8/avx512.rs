//! The int8 product on AVX-512 VNNI: `vpdpbusd` multiplies 4 unsigned weight bytes by 4 signed
//! activation bytes and adds them into each i32 lane. A micro-kernel keeps `MR` rows x 32 columns of
//! accumulators in registers; each block of 32 inner values is converted to f32 and scaled once.

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::x86_64::*;

    use super::super::{block_scale, Int8Linear, QuantizedRows, BLOCK, GROUP, PANEL};

    /// Rows per micro-kernel call: 6 rows x 2 panels = 12 i32 + 12 f32 accumulators, which leaves
    /// registers for the weights and the broadcast activations (32 zmm in all).
    const MR: usize = 6;
    /// Rows whose activations stay hot in cache while every panel pair streams past them.
    const ROW_CHUNK: usize = 48;

    pub fn available() -> bool {
        use std::sync::OnceLock;
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
        })
    }

    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI ([`available`]); `x.width == layer.input` and
    /// `out.len() == x.rows * layer.output` (checked by the caller).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn gemm(layer: &Int8Linear, x: &QuantizedRows, out: &mut [f32]) {
        let mut tile = [0f32; MR * 2 * PANEL];
        let mut r0 = 0;
        while r0 < x.rows {
            let chunk_end = (r0 + ROW_CHUNK).min(x.rows);
            for pair in 0..layer.panels / 2 {
                let mut r = r0;
                while r < chunk_end {
                    let mr = (chunk_end - r).min(MR);
                    match mr {
                        6 => kernel::<6>(layer, x, r, pair, &mut tile),
                        5 => kernel::<5>(layer, x, r, pair, &mut tile),
                        4 => kernel::<4>(layer, x, r, pair, &mut tile),
                        3 => kernel::<3>(layer, x, r, pair, &mut tile),
                        2 => kernel::<2>(layer, x, r, pair, &mut tile),
                        _ => kernel::<1>(layer, x, r, pair, &mut tile),
                    }
                    // Bias and the copy out (the last panel may hold padding columns past `output`).
                    let first_col = pair * 2 * PANEL;
                    let cols = (layer.output - first_col.min(layer.output)).min(2 * PANEL);
                    for i in 0..mr {
                        let dst = &mut out[(r + i) * layer.output + first_col..][..cols];
                        let src = &tile[i * 2 * PANEL..][..cols];
                        for ((d, s), b) in dst.iter_mut().zip(src).zip(&layer.bias[first_col..first_col + cols]) {
                            *d = s + b;
                        }
                    }
                    r += mr;
                }
            }
            r0 = chunk_end;
        }
    }

    /// The SIMD version of `portable::quantize` (same results: `cvtps` rounds ties to even).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW; `values` holds `x.len()` bytes and `scales`/`offsets`
    /// one entry per block of `x`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn quantize(x: &[f32], values: &mut [i8], scales: &mut [f32], offsets: &mut [i32]) {
        let blocks = x.len() / BLOCK;
        assert!(values.len() >= blocks * BLOCK && scales.len() >= blocks && offsets.len() >= blocks);
        let abs_mask = _mm512_set1_epi32(0x7fff_ffff);
        for b in 0..blocks {
            let src = x.as_ptr().add(b * BLOCK);
            let lo = _mm512_loadu_ps(src);
            let hi = _mm512_loadu_ps(src.add(16));
            let abs = |v: __m512| _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), abs_mask));
            let (scale, inv) = block_scale(_mm512_reduce_max_ps(_mm512_max_ps(abs(lo), abs(hi))));
            let inv = _mm512_set1_ps(inv);
            let limit = (_mm512_set1_epi32(-127), _mm512_set1_epi32(127));
            let q = |v: __m512| {
                _mm512_max_epi32(limit.0, _mm512_min_epi32(limit.1, _mm512_cvtps_epi32(_mm512_mul_ps(v, inv))))
            };
            let (qlo, qhi) = (q(lo), q(hi));
            let dst = values.as_mut_ptr().add(b * BLOCK);
            _mm_storeu_si128(dst as *mut __m128i, _mm512_cvtepi32_epi8(qlo));
            _mm_storeu_si128(dst.add(16) as *mut __m128i, _mm512_cvtepi32_epi8(qhi));
            *scales.get_unchecked_mut(b) = scale;
            *offsets.get_unchecked_mut(b) = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
        }
    }

    /// `R` rows starting at `row` times the panel pair `pair`, written to `tile` (`R x 32`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn kernel<const R: usize>(layer: &Int8Linear, x: &QuantizedRows, row: usize, pair: usize, tile: &mut [f32]) {
        let k = layer.input;
        let blocks = k / BLOCK;
        let panel_bytes = blocks * BLOCK * PANEL;
        let w0 = layer.packed.as_ptr().add(2 * pair * panel_bytes);
        let w1 = w0.add(panel_bytes);
        let s0 = layer.scales.as_ptr().add(2 * pair * blocks * PANEL);
        let s1 = s0.add(blocks * PANEL);
        let a = x.values.as_ptr().add(row * k);
        let mut fsum = [[_mm512_setzero_ps(); 2]; R];
        for b in 0..blocks {
            let mut acc = [[_mm512_setzero_si512(); 2]; R];
            for (i, lane) in acc.iter_mut().enumerate() {
                let offset = _mm512_set1_epi32(*x.offsets.get_unchecked((row + i) * blocks + b));
                *lane = [offset, offset];
            }
            for g in 0..BLOCK / GROUP {
                let at = (b * (BLOCK / GROUP) + g) * PANEL * GROUP;
                let wa = _mm512_loadu_si512(w0.add(at) as *const _);
                let wb = _mm512_loadu_si512(w1.add(at) as *const _);
                for (i, lane) in acc.iter_mut().enumerate() {
                    let bytes = (a.add(i * k + b * BLOCK + g * GROUP) as *const i32).read_unaligned();
                    let v = _mm512_set1_epi32(bytes);
                    lane[0] = _mm512_dpbusd_epi32(lane[0], wa, v);
                    lane[1] = _mm512_dpbusd_epi32(lane[1], wb, v);
                }
            }
            let sw0 = _mm512_loadu_ps(s0.add(b * PANEL));
            let sw1 = _mm512_loadu_ps(s1.add(b * PANEL));
            for (i, (lane, sum)) in acc.iter().zip(fsum.iter_mut()).enumerate() {
                let sa = _mm512_set1_ps(*x.scales.get_unchecked((row + i) * blocks + b));
                sum[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane[0]), _mm512_mul_ps(sw0, sa), sum[0]);
                sum[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane[1]), _mm512_mul_ps(sw1, sa), sum[1]);
            }
        }
        for (i, sum) in fsum.iter().enumerate() {
            _mm512_storeu_ps(tile.as_mut_ptr().add(i * 2 * PANEL), sum[0]);
            _mm512_storeu_ps(tile.as_mut_ptr().add(i * 2 * PANEL + PANEL), sum[1]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub use imp::{available, gemm, quantize};

#[cfg(not(target_arch = "x86_64"))]
pub fn available() -> bool {
    false
}

/// # Safety
/// Never called: [`available`] is false on this architecture.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn gemm(layer: &super::Int8Linear, x: &super::QuantizedRows, out: &mut [f32]) {
    super::portable::gemm(layer, x, out)
}

/// # Safety
/// Never called: [`available`] is false on this architecture.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn quantize(x: &[f32], values: &mut [i8], scales: &mut [f32], offsets: &mut [i32]) {
    super::portable::quantize(x, values, scales, offsets)
}
