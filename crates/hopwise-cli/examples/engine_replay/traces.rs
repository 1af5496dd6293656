//! `traces`: where each question's time went in an evaluation run (`hopwise eval --out DIR`), read
//! from the per-call timing the backend reported into the traces.

use std::path::Path;

use hopwise_core::{EventKind, Trace};

use crate::report::median;

pub fn traces(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let results = std::fs::read_to_string(dir.join("results.jsonl"))?;
    println!(
        "| question | seconds | calls | queue s | prompt s | decode s | queue share | prompt tokens | cached share |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (mut walls, mut queue_shares, mut cached_shares) = (Vec::new(), Vec::new(), Vec::new());
    let (mut queues, mut prompts, mut decodes) = (Vec::new(), Vec::new(), Vec::new());
    for line in results.lines().filter(|line| !line.trim().is_empty()) {
        let record: serde_json::Value = serde_json::from_str(line)?;
        let Some(trace_path) = record["trace"].as_str() else { continue };
        let trace: Trace = serde_json::from_slice(&std::fs::read(dir.join(trace_path))?)?;
        let seconds = record["seconds"].as_f64().unwrap_or(f64::NAN);
        let (mut queue, mut prompt, mut decode, mut calls) = (0.0, 0.0, 0.0, 0);
        for event in &trace.events {
            if let EventKind::LlmCall { timing: Some(timing), .. } = &event.kind {
                queue += timing.queue_ms as f64 / 1000.0;
                prompt += timing.prompt_ms as f64 / 1000.0;
                decode += timing.decode_ms as f64 / 1000.0;
                calls += 1;
            }
        }
        // Calls of one question overlap, so the parts are shares of the summed call time.
        let queue_share = queue / (queue + prompt + decode).max(1e-9);
        let cached_share = trace.stats.cached_prompt_tokens as f64 / trace.stats.prompt_tokens.max(1) as f64;
        println!(
            "| {} | {seconds:.1} | {calls} | {queue:.1} | {prompt:.1} | {decode:.1} | {:.1}% | {} | {:.1}% |",
            record["id"].as_str().unwrap_or("?"),
            100.0 * queue_share,
            trace.stats.prompt_tokens,
            100.0 * cached_share
        );
        walls.push(seconds);
        queue_shares.push(queue_share);
        cached_shares.push(cached_share);
        queues.push(queue);
        prompts.push(prompt);
        decodes.push(decode);
    }
    println!(
        "| **median** ({} questions) | {:.1} | | {:.1} | {:.1} | {:.1} | {:.1}% | | {:.1}% |",
        walls.len(),
        median(&mut walls),
        median(&mut queues),
        median(&mut prompts),
        median(&mut decodes),
        100.0 * median(&mut queue_shares),
        100.0 * median(&mut cached_shares)
    );
    Ok(())
}
