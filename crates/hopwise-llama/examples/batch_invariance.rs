//! Does llama.cpp give a token the same logits whatever batch it is evaluated in?
//!
//! cargo run --release -p hopwise-llama --example batch_invariance -- [MODEL] [THREADS] [flash: on|off|auto] [UBATCH]
//!
//! Evaluates one prompt's last tokens four ways and compares their logits bit for bit with plain
//! one-token decoding (what greedy generation without batching does):
//! - `prompt batch`: the whole prompt in one batch;
//! - `verify batch`: the prefix, then the last tokens in one batch (prompt-lookup verification);
//! - `mixed batch`: the last tokens decoded one at a time beside another sequence's tokens
//!   (continuous batching);
//! - `late cells`: the same one-token decoding with the prefix stored after another sequence's cells
//!   (what the prefix cache and a busy cache make of cell order).
//!
//! Prints the largest absolute difference and whether the greedy choice agrees, per way.

use std::num::NonZeroU32;

use hopwise_llama::{default_home, ensure_model};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

const TAIL: usize = 8;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model_name = args.next().unwrap_or_else(|| hopwise_llama::TEST_MODEL.to_string());
    let threads: i32 = args.next().map(|value| value.parse()).transpose()?.unwrap_or(1);
    let flash = args.next().unwrap_or_else(|| "auto".into());
    let ubatch: u32 = args.next().map(|value| value.parse()).transpose()?.unwrap_or(512);
    let path = ensure_model(&model_name, &default_home(), &mut |_| {})?;
    let backend = LlamaBackend::init()?;
    let model = LlamaModel::load_from_file(&backend, &path, &LlamaModelParams::default())?;
    let policy = match flash.as_str() {
        // llama.h's llama_flash_attn_type: -1 auto, 0 disabled, 1 enabled.
        "on" => 1,
        "off" => 0,
        _ => -1,
    };
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(4096))
        .with_n_batch(512)
        .with_n_ubatch(ubatch)
        .with_n_seq_max(4)
        .with_kv_unified(true)
        .with_n_threads(threads)
        .with_n_threads_batch(threads)
        .with_flash_attention_policy(policy);
    let mut ctx = model.new_context(&backend, params)?;
    let text = "Passages:\n[1] Rush is a Canadian rock band formed in Toronto in 1968. Its drummer Neil Peart was \
                inducted into the Modern Drummer Hall of Fame in 1983. Counterparts is the fifteenth studio album \
                by Rush, released in 1993.\n[2] Counterparts was produced by Peter Collins and the band.\n\n\
                Question: Which Canadian rock band released Counterparts and had a drummer in the Modern Drummer \
                Hall of Fame? Think it through and then answer with the band's name: the band that released it";
    let tokens = model.vocab().tokenize(text.as_bytes(), true, true);
    let n = tokens.len();
    let prefix = n - TAIL;
    println!(
        "model {model_name}, {threads} thread(s), flash attention {flash}, ubatch {ubatch}, {n} prompt tokens, last {TAIL} compared"
    );

    // Reference: the prefix in one batch, then one token per decode.
    ctx.clear_kv_cache();
    eval(&mut ctx, &[(0, &tokens[..prefix], 0)], false)?;
    let mut reference = Vec::new();
    for i in prefix..n {
        eval(&mut ctx, &[(0, &tokens[i..=i], i)], true)?;
        reference.push(ctx.get_logits_ith(0).to_vec());
    }

    // The whole prompt in one batch.
    ctx.clear_kv_cache();
    let mut batch = LlamaBatch::new(n, 1);
    for (i, token) in tokens.iter().enumerate() {
        batch.add(*token, i as i32, &[0], i >= prefix)?;
    }
    ctx.decode(&mut batch)?;
    let whole: Vec<Vec<f32>> = (0..TAIL).map(|j| ctx.get_logits_ith((prefix + j) as i32).to_vec()).collect();
    report("prompt batch", &reference, &whole);
    // Bits of the prompt batch's logits, to compare runs with another UBATCH.
    let digest = whole
        .iter()
        .flatten()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ u64::from(x.to_bits())).wrapping_mul(0x100_0000_01b3));
    println!("{:>13}: {digest:016x}", "prompt digest");

    // The prefix, then the tail in one batch.
    ctx.clear_kv_cache();
    eval(&mut ctx, &[(0, &tokens[..prefix], 0)], false)?;
    let mut batch = LlamaBatch::new(TAIL, 1);
    for (i, &token) in tokens.iter().enumerate().take(n).skip(prefix) {
        batch.add(token, i as i32, &[0], true)?;
    }
    ctx.decode(&mut batch)?;
    let verify: Vec<Vec<f32>> = (0..TAIL).map(|j| ctx.get_logits_ith(j as i32).to_vec()).collect();
    report("verify batch", &reference, &verify);

    // One token at a time beside another sequence that decodes its own tokens in the same batches.
    ctx.clear_kv_cache();
    eval(&mut ctx, &[(0, &tokens[..prefix], 0), (1, &tokens[..prefix / 2], 0)], false)?;
    let mut mixed = Vec::new();
    for (j, i) in (prefix..n).enumerate() {
        let other = prefix / 2 + j;
        let mut batch = LlamaBatch::new(2, 2);
        batch.add(tokens[other], other as i32, &[1], true)?;
        batch.add(tokens[i], i as i32, &[0], true)?;
        ctx.decode(&mut batch)?;
        mixed.push(ctx.get_logits_ith(1).to_vec());
    }
    report("mixed batch", &reference, &mixed);

    // One token at a time, the prefix stored after another sequence's cells.
    ctx.clear_kv_cache();
    eval(&mut ctx, &[(1, &tokens[..37], 0)], false)?;
    eval(&mut ctx, &[(0, &tokens[..prefix], 0)], false)?;
    let mut late = Vec::new();
    for i in prefix..n {
        eval(&mut ctx, &[(0, &tokens[i..=i], i)], true)?;
        late.push(ctx.get_logits_ith(0).to_vec());
    }
    report("late cells", &reference, &late);
    Ok(())
}

/// Evaluates `(sequence, tokens, first position)` runs in one batch; logits for the last token of
/// the last run only when `logits`.
fn eval(
    ctx: &mut LlamaContext,
    runs: &[(i32, &[LlamaToken], usize)],
    logits: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let total: usize = runs.iter().map(|(_, tokens, _)| tokens.len()).sum();
    let mut batch = LlamaBatch::new(total, runs.len() as i32);
    for (r, (seq, tokens, start)) in runs.iter().enumerate() {
        for (i, token) in tokens.iter().enumerate() {
            let last = r == runs.len() - 1 && i == tokens.len() - 1;
            batch.add(*token, (start + i) as i32, &[*seq], logits && last)?;
        }
    }
    ctx.decode(&mut batch)?;
    Ok(())
}

fn argmax(logits: &[f32]) -> usize {
    logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0)
}

fn report(way: &str, reference: &[Vec<f32>], other: &[Vec<f32>]) {
    let mut max_diff = 0f32;
    let mut identical = 0;
    let mut same_choice = 0;
    for (a, b) in reference.iter().zip(other) {
        let diff = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        max_diff = max_diff.max(diff);
        identical += usize::from(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));
        same_choice += usize::from(argmax(a) == argmax(b));
    }
    println!(
        "{way:>13}: bit-identical {identical}/{n}, same greedy token {same_choice}/{n}, max |diff| {max_diff:.3e}",
        n = reference.len()
    );
}
