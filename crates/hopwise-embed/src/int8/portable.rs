//! The int8 product in plain Rust, for CPUs without AVX-512 VNNI (and as the kernels' reference).

use super::{Int8Linear, QuantizedRows, BLOCK, GROUP, PANEL};

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
