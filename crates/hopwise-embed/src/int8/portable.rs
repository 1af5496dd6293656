//! The int8 product in plain Rust, for CPUs without AVX2 (and as the kernels' reference).

use super::{block_scale, Int8Linear, QuantizedRows, BLOCK, GROUP, PANEL};

pub fn gemm(layer: &Int8Linear, x: &QuantizedRows, out: &mut [f32]) {
    let blocks = layer.input / BLOCK;
    for r in 0..x.rows {
        let row = &x.values[r * layer.input..(r + 1) * layer.input];
        for n in 0..layer.output {
            let (panel, col) = (n / PANEL, n % PANEL);
            let mut acc = 0f32;
            for b in 0..blocks {
                let mut dot = x.offsets[r * blocks + b];
                for g in 0..BLOCK / GROUP {
                    let base = (((panel * blocks + b) * (BLOCK / GROUP) + g) * PANEL + col) * GROUP;
                    for t in 0..GROUP {
                        dot += layer.packed[base + t] as i32 * row[b * BLOCK + g * GROUP + t] as i32;
                    }
                }
                acc += dot as f32 * (layer.scales[(panel * blocks + b) * PANEL + col] * x.scales[r * blocks + b]);
            }
            out[r * layer.output + n] = acc + layer.bias[n];
        }
    }
}

/// Quantizes whole blocks of `x` into `values`, with each block's scale and `-128 * sum` offset.
pub fn quantize(x: &[f32], values: &mut [i8], scales: &mut [f32], offsets: &mut [i32]) {
    for (i, (block, q)) in x.chunks_exact(BLOCK).zip(values.chunks_exact_mut(BLOCK)).enumerate() {
        let (scale, inv) = block_scale(block.iter().fold(0f32, |m, v| m.max(v.abs())));
        let mut sum = 0i32;
        for (v, q) in block.iter().zip(q.iter_mut()) {
            let r = (v * inv).round_ties_even().clamp(-127.0, 127.0) as i8;
            *q = r;
            sum += r as i32;
        }
        scales[i] = scale;
        offsets[i] = -128 * sum;
    }
}
