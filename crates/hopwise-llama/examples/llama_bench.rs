//! Throughput of the in-process backend.
//!
//! cargo run --release -p hopwise-llama --example llama_bench -- [MODEL] [THREADS] [quick]
//!
//! MODEL is a registry name or a GGUF path (default qwen2.5-0.5b, which must be installed); THREADS
//! defaults to 2. Prints prompt and decode tokens/s, n = 10 shared-prompt sampling against 10 separate
//! calls, 2 concurrent requests against sequential ones (batched and queued), load time and peak RSS;
//! `quick` stops after the prompt and decode rates.

use std::time::{Duration, Instant};

use hopwise_core::{ChatMessage, ChatRequest, GenParams};
use hopwise_llama::{default_home, ensure_model, Concurrency, Generation, LocalConfig, LocalLlm};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args.next().unwrap_or_else(|| hopwise_llama::TEST_MODEL.to_string());
    let threads: usize = args.next().map(|value| value.parse()).transpose()?.unwrap_or(2);
    let quick = args.next().as_deref() == Some("quick");
    let path = ensure_model(&model, &default_home(), &mut |_| {})?;
    println!("model: {model} ({})\nthreads: {threads}\nload average at start: {}\n", path.display(), load_average());

    // No prefix cache: the repeated prompts below must be evaluated every time, not served from it.
    let config = LocalConfig { threads: Some(threads), n_ctx: 4096, prefix_cache: false, ..LocalConfig::default() };
    let llm = LocalLlm::load(&path, config.clone())?;
    let info = llm.info().clone();
    println!("| measure | value |\n|---|---|");
    println!("| load time | {:.2} s |", info.load_time.as_secs_f64());

    // Prompt processing: a ~512-token prompt, one new token. Best of 3 (the first warms caches).
    let long_prompt = filler_prompt(&llm, 512)?;
    let mut prompt_rate: f64 = 0.0;
    let mut prompt_tokens = 0;
    for _ in 0..3 {
        let generation = llm.generate_blocking(&user(&long_prompt, greedy(1)))?;
        prompt_tokens = generation.timing.prompt_tokens;
        prompt_rate = prompt_rate.max(rate(prompt_tokens, generation.timing.prompt_time));
    }
    println!("| prompt eval ({prompt_tokens} tokens) | {prompt_rate:.1} tok/s |");

    // Decoding: one sequence, 64 new tokens; rate over the batched decode steps.
    let story = user("Write a long story about a lighthouse keeper. Do not stop early.", greedy(64));
    let generation = llm.generate_blocking(&story)?;
    let steps = generation.timing.decode_steps;
    let decode_rate = rate(steps, generation.timing.decode_time);
    println!("| decode (1 sequence, {steps} steps) | {decode_rate:.1} tok/s |");
    if quick {
        println!("| peak RSS (VmHWM) | {} |", peak_rss());
        println!("\nload average at end: {}", load_average());
        return Ok(());
    }

    // Self-consistency: n = 10 from one prompt evaluation vs 10 separate calls with the same seeds.
    let question_prompt =
        filler_prompt(&llm, 300)? + "\n\nQuestion: which city is mentioned most often above? Answer briefly.";
    let sampling = GenParams { temperature: 0.7, top_p: 0.95, max_tokens: 16, seed: Some(42), ..GenParams::default() };
    let started = Instant::now();
    let shared = llm.generate_blocking(&user(&question_prompt, GenParams { n: 10, ..sampling.clone() }))?;
    let shared_time = started.elapsed();
    let started = Instant::now();
    let mut separate_tokens = 0;
    let (mut separate_prompt, mut separate_decode, mut separate_steps) = (Duration::ZERO, Duration::ZERO, 0);
    for k in 0..10u64 {
        let params = GenParams { n: 1, seed: Some(42 + k), ..sampling.clone() };
        let generation = llm.generate_blocking(&user(&question_prompt, params))?;
        separate_tokens += generation.response.usage.completion_tokens;
        separate_prompt += generation.timing.prompt_time;
        separate_decode += generation.timing.decode_time;
        separate_steps += generation.timing.decode_steps;
    }
    let separate_time = started.elapsed();
    println!(
        "| n=10 shared prompt ({} prompt tok, {} new tok) | {:.2} s |",
        shared.timing.prompt_tokens,
        shared.response.usage.completion_tokens,
        shared_time.as_secs_f64()
    );
    println!("| 10 separate calls ({separate_tokens} new tok) | {:.2} s |", separate_time.as_secs_f64());
    println!("| speed-up n=10 shared vs separate | {:.2}x |", separate_time.as_secs_f64() / shared_time.as_secs_f64());
    // Where the time went: prompt evaluation vs batched decoding (the rest is sampling and overhead).
    println!(
        "| shared: prompt / decode ({} steps) | {:.2} s / {:.2} s |",
        shared.timing.decode_steps,
        shared.timing.prompt_time.as_secs_f64(),
        shared.timing.decode_time.as_secs_f64()
    );
    println!(
        "| separate: prompt / decode ({separate_steps} steps) | {:.2} s / {:.2} s |",
        separate_prompt.as_secs_f64(),
        separate_decode.as_secs_f64()
    );

    // Two requests arriving together, with this model's batching, then with a queueing instance.
    let pair = [
        user("Explain in a few sentences why the sky is blue.", greedy(32)),
        user("Explain in a few sentences how a bicycle stays upright.", greedy(32)),
    ];
    let (batched_concurrent, sequential) = concurrent_vs_sequential(&llm, &pair)?;
    drop(llm);
    let queued = LocalLlm::load(&path, LocalConfig { concurrency: Concurrency::Queue, ..config })?;
    let (queued_concurrent, _) = concurrent_vs_sequential(&queued, &pair)?;
    drop(queued);
    println!("| 2 requests sequential | {:.2} s |", sequential.as_secs_f64());
    println!("| 2 requests concurrent, batched | {:.2} s |", batched_concurrent.as_secs_f64());
    println!("| 2 requests concurrent, queued | {:.2} s |", queued_concurrent.as_secs_f64());
    println!("| peak RSS (VmHWM) | {} |", peak_rss());
    println!("\nload average at end: {}", load_average());
    Ok(())
}

fn user(prompt: &str, params: GenParams) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(prompt)], params)
}

fn greedy(max_tokens: u32) -> GenParams {
    GenParams { temperature: 0.0, max_tokens, ..GenParams::default() }
}

fn rate(tokens: usize, time: Duration) -> f64 {
    tokens as f64 / time.as_secs_f64().max(1e-9)
}

/// A prompt of roughly `target` tokens (including the chat template), found by measuring.
fn filler_prompt(llm: &LocalLlm, target: usize) -> Result<String, Box<dyn std::error::Error>> {
    let sentence =
        "The ferry from Lisbon to Porto left at dawn, and the harbour of Lisbon slowly disappeared behind it. ";
    let probe = llm.generate_blocking(&user(&sentence.repeat(10), greedy(1)))?;
    let per_sentence = (probe.timing.prompt_tokens as f64 / 10.0).max(1.0);
    let count = (target as f64 / per_sentence).floor().max(1.0) as usize;
    Ok(sentence.repeat(count))
}

fn concurrent_vs_sequential(
    llm: &LocalLlm,
    pair: &[ChatRequest; 2],
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let results: Vec<Result<Generation, hopwise_llama::LlamaError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = pair.iter().map(|request| scope.spawn(move || llm.generate_blocking(request))).collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or(Err(hopwise_llama::LlamaError::WorkerGone))).collect()
    });
    let concurrent = started.elapsed();
    for result in results {
        result?;
    }
    let started = Instant::now();
    for request in pair {
        llm.generate_blocking(request)?;
    }
    Ok((concurrent, started.elapsed()))
}

fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find(|line| line.starts_with("VmHWM:")).map(|line| line[6..].trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
