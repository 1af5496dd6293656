//! The continuous-batching engine on the real Qwen2.5-Coder-0.5B model, one inference thread:
//! scheduling order, cancellation, the prefix cache, prompt-lookup decoding and KV exhaustion.
//!
//! Each test loads its own model instance (its engine counters must not see other tests' work) and
//! holds a lock while it runs, so the tests' inference never runs in parallel. They assert on
//! structure and the engine's own counters, not on a small model's wording; outputs are compared
//! only on prompts whose greedy continuation is decisive (see `same_greedy_outputs_...`).

use std::time::{Duration, Instant};

use hopwise_core::{BackendErrorKind, ChatMessage, ChatRequest, GenParams, Llm};
use hopwise_llama::{default_home, installed_model, Concurrency, EngineStats, LocalConfig, LocalLlm, TEST_MODEL};
use tokio::sync::{Mutex, MutexGuard};

/// Awaits all futures together (they share the engine's decode steps).
async fn join_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                if let std::task::Poll::Ready(value) = future.as_mut().poll(cx) {
                    *output = Some(value);
                }
            }
        }
        if outputs.iter().all(Option::is_some) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// One test's model at a time (an async lock: it is held across awaits).
async fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::const_new(());
    LOCK.lock().await
}

fn load(config: LocalConfig) -> LocalLlm {
    let home = default_home();
    let path = installed_model(TEST_MODEL, &home).unwrap_or_else(|| {
        panic!("{TEST_MODEL} is not installed under {}/models; run `hopwise setup`", home.display())
    });
    LocalLlm::load(path, LocalConfig { threads: Some(1), ..config }).expect("the installed test model loads")
}

fn request(prompt: &str, params: GenParams) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(prompt)], params)
}

fn greedy(max_tokens: u32) -> GenParams {
    GenParams { temperature: 0.0, max_tokens, ..GenParams::default() }
}

/// The engine's counters once `done` holds; panics with the last ones after `limit`.
async fn wait_for(llm: &LocalLlm, limit: Duration, done: impl Fn(&EngineStats) -> bool) -> EngineStats {
    llm.wait_for_stats(limit, done)
        .await
        .unwrap_or_else(|last| panic!("engine did not get there in {limit:?}: {last:?}"))
}

const LONG: &str = "Write a long story about a lighthouse keeper and his cat. Do not stop early.";

#[tokio::test]
async fn a_short_request_submitted_during_a_long_generation_completes_first() {
    let _serial = serial().await;
    let llm = load(LocalConfig::default());
    let (long_request, short_request) =
        (request(LONG, greedy(160)), request("What is 2 + 2? Reply with the number only.", greedy(4)));
    let long = llm.generate(&long_request);
    let short = async {
        // Submit once the long request is generating, not merely queued.
        wait_for(&llm, Duration::from_secs(60), |s| s.running == 1 && s.steps >= 5).await;
        let submitted = Instant::now();
        let generation = llm.generate(&short_request).await;
        (generation, Instant::now(), submitted)
    };
    let ((short, short_done, short_submitted), (long, long_done)) =
        tokio::join!(short, async { (long.await, Instant::now()) });
    let (short, long) = (short.expect("short"), long.expect("long"));
    assert!(short_done < long_done, "the short request finished after the long one");
    assert_eq!(long.timing.generated_tokens, 160, "the long request ran to its cap: {:?}", long.response.choices);
    // It was admitted at once instead of waiting for the long generation to end.
    assert!(short.timing.queue_time < short_done - short_submitted);
    assert!(short.timing.queue_time < Duration::from_secs(5), "{:?}", short.timing);
    assert!(short.response.text().contains('4'), "{:?}", short.response.text());
}

#[tokio::test]
async fn dropping_a_caller_stops_its_sequence_and_frees_its_cells() {
    let _serial = serial().await;
    // No prefix cache: a cancelled request must leave nothing behind at all.
    let llm = load(LocalConfig { prefix_cache: false, ..LocalConfig::default() });
    let long_request = request(LONG, greedy(400));
    let call = llm.generate(&long_request);
    let stopped_early = tokio::time::timeout(Duration::from_secs(600), async {
        tokio::select! {
            _ = call => panic!("the generation finished before it was dropped"),
            stats = wait_for(&llm, Duration::from_secs(60), |s| s.running == 1 && s.steps >= 10) => stats,
        }
    })
    .await
    .expect("timeout");
    // The call future is dropped here, as a disconnecting client's would be.
    assert!(stopped_early.kv_cells_used > 0);
    let after = wait_for(&llm, Duration::from_secs(10), |s| s.running == 0).await;
    assert_eq!(after.cancelled, 1);
    assert_eq!((after.live_sequences, after.kv_cells_used), (0, 0), "{after:?}");
    // Within a few decode steps of noticing, and none after.
    assert!(after.steps <= stopped_early.steps + 3, "{stopped_early:?} then {after:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.stats().steps, after.steps, "no decode steps without requests");
    // The engine still serves.
    let reply = llm.chat(&request("Say hi.", greedy(3))).await.expect("chat after a cancellation");
    assert!(!reply.choices.is_empty());
}

#[tokio::test]
async fn a_second_request_sharing_a_prefix_evaluates_only_the_suffix() {
    let _serial = serial().await;
    let llm = load(LocalConfig::default());
    let system = "You answer questions about a small library. The library has three rooms: the map room, \
                  the reading room with twelve desks, and the archive, which is open on Tuesdays only. \
                  Books may be borrowed for two weeks. Answer in one short sentence.";
    let ask =
        |question: &str| ChatRequest::new(vec![ChatMessage::system(system), ChatMessage::user(question)], greedy(6));
    let first = llm.generate(&ask("When is the archive open?")).await.expect("first");
    assert_eq!(first.response.usage.cached_prompt_tokens, 0, "nothing cached yet");
    let evaluated_before = llm.stats().prompt_tokens_evaluated;

    let second = llm.generate(&ask("How many desks are in the reading room?")).await.expect("second");
    let usage = &second.response.usage;
    // The system turn alone is over 50 tokens; the question differs, so not everything is reused.
    assert!(usage.cached_prompt_tokens > 50 && usage.cached_prompt_tokens < usage.prompt_tokens, "{usage:?}");
    assert_eq!(second.timing.cached_prompt_tokens as u64, usage.cached_prompt_tokens);
    // Only the suffix was evaluated.
    let evaluated = llm.stats().prompt_tokens_evaluated - evaluated_before;
    assert_eq!(evaluated, usage.prompt_tokens - usage.cached_prompt_tokens);
    assert_eq!(second.response.timing.expect("timing").queue_ms, second.timing.call_timing().queue_ms);

    // The same prompt again: all but its last token (whose logits must be computed) come from the cache.
    let again = llm.generate(&ask("How many desks are in the reading room?")).await.expect("again");
    assert_eq!(again.response.usage.cached_prompt_tokens, again.response.usage.prompt_tokens - 1);
    assert_eq!(again.response.text(), second.response.text());
    let stats = llm.stats();
    assert_eq!(stats.prompt_tokens_reused, usage.cached_prompt_tokens + again.response.usage.cached_prompt_tokens);
    assert!(stats.cached_sequences >= 1, "{stats:?}");
}

/// Prompts whose greedy continuations are far from any tie, so llama.cpp's batch-shape-dependent
/// rounding (chunked prompts, mixed batches) cannot flip them: copies and counting.
const DECISIVE: [&str; 3] = [
    "Repeat this sentence exactly, and nothing else: The quick brown fox jumps over the lazy dog near the river bank.",
    "Count from 1 to 15, separated by commas.",
    "Repeat this question exactly, and nothing else: Which Canadian rock band released Counterparts and had a drummer in the Modern Drummer Hall of Fame?",
];

async fn run_decisive(llm: &LocalLlm) -> Vec<String> {
    // Concurrently (batched together), then again one after another (prefix cache hits).
    let requests: Vec<ChatRequest> = DECISIVE.iter().map(|prompt| request(prompt, greedy(40))).collect();
    let concurrent = join_all(requests.iter().map(|request| llm.generate(request))).await;
    let mut texts: Vec<String> =
        concurrent.into_iter().map(|g| g.expect("generate").response.text().to_string()).collect();
    for prompt in DECISIVE {
        texts.push(llm.generate(&request(prompt, greedy(40))).await.expect("generate").response.text().to_string());
    }
    texts
}

#[tokio::test]
async fn same_greedy_outputs_with_and_without_batching_prefix_cache_and_prompt_lookup() {
    let _serial = serial().await;
    let baseline = {
        // One request at a time, nothing reused: no batching, no cache, no drafts.
        let llm = load(LocalConfig {
            concurrency: Concurrency::Queue,
            prefix_cache: false,
            lookup_max_draft: 0,
            ..LocalConfig::default()
        });
        run_decisive(&llm).await
    };
    let plain = {
        let llm = load(LocalConfig { prefix_cache: false, lookup_max_draft: 0, ..LocalConfig::default() });
        run_decisive(&llm).await
    };
    let (everything, stats) = {
        let llm = load(LocalConfig::default());
        let texts = run_decisive(&llm).await;
        (texts, llm.stats())
    };
    assert!(baseline.iter().all(|text| !text.trim().is_empty()), "{baseline:?}");
    assert_eq!(plain, baseline, "continuous batching changed greedy outputs");
    assert_eq!(everything, baseline, "the prefix cache or prompt lookup changed greedy outputs");
    // Both were exercised: the repeats hit the cache, and the copy prompts took drafts.
    assert!(stats.prompt_tokens_reused > 0 && stats.accepted_draft_tokens > 10, "{stats:?}");
}

#[tokio::test]
async fn prompt_lookup_is_off_where_a_call_says_so() {
    let _serial = serial().await;
    let llm = load(LocalConfig::default());
    let copy = DECISIVE[0];
    let with = llm.generate(&request(copy, greedy(32))).await.expect("with lookup");
    let without = llm
        .generate(&request(copy, GenParams { prompt_lookup: Some(false), ..greedy(32) }))
        .await
        .expect("without lookup");
    assert_eq!(with.response.text(), without.response.text());
    assert!(with.timing.accepted_draft_tokens > 0, "{:?}", with.timing);
    assert!(with.timing.decode_steps < with.timing.generated_tokens, "{:?}", with.timing);
    assert_eq!((without.timing.drafted_tokens, without.timing.accepted_draft_tokens), (0, 0));
}

#[tokio::test]
async fn many_concurrent_requests_on_a_small_cache_wait_their_turn_or_fail_clearly() {
    let _serial = serial().await;
    // 512 cells and 4 sequences: a few requests at a time, the rest wait.
    let llm = load(LocalConfig { n_ctx: 512, max_sequences: 4, ..LocalConfig::default() });
    let mut requests: Vec<ChatRequest> = (0..10u8)
        .map(|i| request(&format!("Name a city whose name starts with the letter {}.", (b'A' + i) as char), greedy(48)))
        .collect();
    // More samples than sequences: they run in waves on the sequences the request holds.
    let samples = GenParams { n: 6, temperature: 0.9, seed: Some(5), max_tokens: 8, ..GenParams::default() };
    requests.push(request("Name a colour.", samples));
    requests.push(request(&"word ".repeat(600), greedy(4)));
    let calls: Vec<_> = requests.iter().map(|request| llm.generate(request)).collect();

    let results = join_all(calls).await;
    let (ok, errors): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    assert_eq!(ok.len(), 11, "every request that fits eventually runs: {errors:?}");
    let err = errors.into_iter().next().and_then(Result::err).expect("the long prompt fails");
    assert!(err.to_string().contains("context window"), "{err}");
    assert_eq!(err.into_core("local").backend_kind(), Some(BackendErrorKind::Unsupported));
    let generations: Vec<_> = ok.into_iter().filter_map(Result::ok).collect();
    assert!(generations.iter().any(|g| g.response.choices.len() == 6));
    assert!(generations.iter().all(|g| g.response.choices.iter().all(|c| c.finish_reason.is_some())));
    // The counters are published after the step that sent the last reply.
    let stats = wait_for(&llm, Duration::from_secs(5), |s| s.running == 0).await;
    assert_eq!((stats.waiting, stats.failed, stats.completed), (0, 0, 11), "{stats:?}");
    assert!(stats.kv_cells_used <= stats.kv_cells && stats.kv_cells <= 512 + 256, "{stats:?}");
}
