use std::sync::Arc;

use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{ChatMessage, Completion, GenParams, Usage};

use super::*;

fn request(prompt: &str, seed: Option<u64>, n: u32) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(prompt)], GenParams { seed, n, ..GenParams::default() })
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test]
async fn second_identical_call_is_a_hit_and_changed_parameters_miss() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedLlm::new().on("capital", "Paris {i}");
    let cached = CachedLlm::new(model.clone(), dir.path(), CacheMode::ReadWrite);

    let first = cached.chat(&request("capital of France?", Some(1), 2)).await.unwrap();
    let again = cached.chat(&request("capital of France?", Some(1), 2)).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(model.calls().len(), 1, "the hit must not reach the model");
    assert_eq!(cached.stats(), CacheStats { hits: 1, misses: 1, writes: 1 });

    // n, seed and the prompt are all part of the key.
    cached.chat(&request("capital of France?", Some(2), 2)).await.unwrap();
    cached.chat(&request("capital of France?", Some(1), 3)).await.unwrap();
    cached.chat(&request("capital of Spain?", Some(1), 2)).await.unwrap();
    assert_eq!(model.calls().len(), 4);
    assert_eq!(cached.stats(), CacheStats { hits: 1, misses: 4, writes: 4 });
    assert_eq!(files_under(dir.path()).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_identical_calls_pay_for_one_backend_call() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedLlm::new().on("q", "a").latency(std::time::Duration::from_millis(100));
    let cached = Arc::new(CachedLlm::new(model.clone(), dir.path(), CacheMode::ReadWrite));
    let calls: Vec<_> = (0..5)
        .map(|i| {
            let cached = cached.clone();
            // Two distinct requests, each asked several times at once.
            let prompt = if i % 2 == 0 { "q even" } else { "q odd" };
            tokio::spawn(async move { cached.chat(&request(prompt, None, 1)).await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap().text(), "a");
    }
    assert_eq!(model.calls().len(), 2);
    assert_eq!(cached.stats(), CacheStats { hits: 3, misses: 2, writes: 2 });
}

#[tokio::test]
async fn entries_fan_out_in_two_levels_named_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let cached = CachedLlm::new(ScriptedLlm::new(), dir.path(), CacheMode::ReadWrite);
    let req = request("q", None, 1);
    cached.chat(&req).await.unwrap();
    let key = cached.key(&req).unwrap();
    assert_eq!(key.len(), 64);
    let expected = dir.path().join(&key[0..2]).join(&key[2..4]).join(format!("{key}.json"));
    assert_eq!(files_under(dir.path()), vec![expected]);
}

#[tokio::test]
async fn a_hit_returns_the_stored_response_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let stored = ChatResponse {
        choices: vec![Completion {
            text: "tricky \"text\" \u{1F600}\n with\ttabs".into(),
            finish_reason: Some("stop".into()),
            top_logprobs: vec![("yes".into(), -0.123_456_79), ("no".into(), -7.1e-5)],
            token_logprobs: vec![("tricky".into(), -0.5)],
        }],
        usage: Usage::new(11, 3),
        grammar_used: true,
        timing: None,
    };
    let req = request("q", Some(9), 1);
    let writer = CachedLlm::new(ScriptedLlm::new(), dir.path(), CacheMode::ReadWrite);
    writer.cache().put(&writer.material(&req).unwrap(), &stored).await.unwrap();
    let path = writer.cache().path_for(&writer.key(&req).unwrap());
    let bytes_before = std::fs::read(&path).unwrap();

    let replay = CachedLlm::new(ScriptedLlm::new(), dir.path(), CacheMode::ReadOnly);
    let got = replay.chat(&req).await.unwrap();
    assert_eq!(got, stored);
    assert_eq!(serde_json::to_vec(&got).unwrap(), serde_json::to_vec(&stored).unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), bytes_before, "a hit must not rewrite the entry");
}

#[tokio::test]
async fn a_hit_reports_no_backend_timing() {
    let dir = tempfile::tempdir().unwrap();
    let timed = ChatResponse {
        choices: vec![Completion { text: "a".into(), ..Completion::default() }],
        timing: Some(hopwise_core::CallTiming { queue_ms: 5, prompt_ms: 900, decode_ms: 300 }),
        ..ChatResponse::default()
    };
    let req = request("q", Some(1), 1);
    let cached = CachedLlm::new(ScriptedLlm::new(), dir.path(), CacheMode::ReadWrite);
    cached.cache().put(&cached.material(&req).unwrap(), &timed).await.unwrap();
    let got = cached.chat(&req).await.unwrap();
    assert_eq!(got.text(), "a");
    assert_eq!(got.timing, None, "the model did no work for a hit");
}

#[tokio::test]
async fn replay_mode_serves_hits_and_fails_misses_without_calling_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = CachedLlm::new(ScriptedLlm::new().on("known", "recorded"), dir.path(), CacheMode::ReadWrite);
    recorder.chat(&request("known question", None, 1)).await.unwrap();

    let model = ScriptedLlm::new().on("known", "live answer");
    let replay = CachedLlm::new(model.clone(), dir.path(), CacheMode::ReadOnly);
    assert_eq!(replay.chat(&request("known question", None, 1)).await.unwrap().text(), "recorded");
    let err = replay.chat(&request("new question", None, 1)).await.unwrap_err();
    assert_eq!(err.backend_kind(), Some(BackendErrorKind::Unsupported));
    assert!(err.to_string().contains("not in cache (replay mode)"), "{err}");
    assert!(model.calls().is_empty());
    assert_eq!(replay.stats(), CacheStats { hits: 1, misses: 1, writes: 0 });
}

#[tokio::test]
async fn off_mode_always_calls_the_model_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedLlm::new();
    let cached = CachedLlm::new(model.clone(), dir.path().join("c"), CacheMode::Off);
    cached.chat(&request("q", None, 1)).await.unwrap();
    cached.chat(&request("q", None, 1)).await.unwrap();
    assert_eq!(model.calls().len(), 2);
    assert!(!dir.path().join("c").exists());
}

#[tokio::test]
async fn corrupt_or_foreign_entries_count_as_misses_and_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedLlm::new().on("q", "fresh");
    let cached = CachedLlm::new(model.clone(), dir.path(), CacheMode::ReadWrite);
    let req = request("q", None, 1);
    let path = cached.cache().path_for(&cached.key(&req).unwrap());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();

    // A truncated entry, as a non-atomic writer killed mid-write would leave.
    std::fs::write(&path, b"{\"version\":1,\"key\":\"").unwrap();
    assert_eq!(cached.chat(&req).await.unwrap().text(), "fresh");
    // An entry for another request under this key (e.g. copied by hand).
    let other = cached.material(&request("other", None, 1)).unwrap();
    let foreign = serde_json::json!({"version": 1, "key": cached.key(&req).unwrap(), "material": other,
        "value": {"choices": [{"text": "wrong"}], "usage": {"prompt_tokens": 0, "completion_tokens": 0}}});
    std::fs::write(&path, serde_json::to_vec(&foreign).unwrap()).unwrap();
    assert_eq!(cached.chat(&req).await.unwrap().text(), "fresh");
    assert_eq!(model.calls().len(), 2);
    // Repaired: now a hit.
    assert_eq!(cached.chat(&req).await.unwrap().text(), "fresh");
    assert_eq!(model.calls().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_never_see_a_partial_entry_while_writers_replace_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(DiskCache::new(dir.path()));
    let material = DiskCache::canonical(&serde_json::json!({"k": "contended"})).unwrap();
    // Large values make a torn read likely if writes were not atomic.
    let value_of = |i: usize| vec![format!("{i:04}"); 20_000];
    cache.put(&material, &value_of(0)).await.unwrap();

    let writers: Vec<_> = (1..=16)
        .map(|i| {
            let (cache, material, value) = (cache.clone(), material.clone(), value_of(i));
            tokio::spawn(async move { cache.put(&material, &value).await })
        })
        .collect();
    let reader = {
        let (cache, material) = (cache.clone(), material.clone());
        tokio::spawn(async move {
            let mut reads = 0;
            for _ in 0..200 {
                let value: Vec<String> = cache.get(&material).await.unwrap().expect("entry vanished mid-replace");
                assert_eq!(value.len(), 20_000);
                assert!(value.iter().all(|v| v == &value[0]), "mixed entry");
                reads += 1;
                tokio::task::yield_now().await;
            }
            reads
        })
    };
    for w in writers {
        w.await.unwrap().unwrap();
    }
    assert_eq!(reader.await.unwrap(), 200);
    let leftovers: Vec<_> =
        files_under(dir.path()).into_iter().filter(|p| p.to_string_lossy().ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert_eq!(files_under(dir.path()).len(), 1);
}

#[tokio::test]
async fn a_failed_write_reports_the_path_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocked");
    std::fs::write(&blocker, b"a file where the cache dir should be").unwrap();
    let cached = CachedLlm::new(ScriptedLlm::new(), &blocker, CacheMode::ReadWrite);
    let err = cached.chat(&request("q", None, 1)).await.unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
    assert!(err.to_string().contains("blocked"), "{err}");
}

#[test]
fn cache_modes_parse_from_config_words() {
    assert_eq!("replay".parse::<CacheMode>().unwrap(), CacheMode::ReadOnly);
    assert_eq!("read-write".parse::<CacheMode>().unwrap(), CacheMode::ReadWrite);
    assert_eq!("OFF".parse::<CacheMode>().unwrap(), CacheMode::Off);
    assert!("sometimes".parse::<CacheMode>().is_err());
    let m: CacheMode = serde_json::from_str("\"replay\"").unwrap();
    assert_eq!(m, CacheMode::ReadOnly);
}

#[test]
fn keys_do_not_depend_on_field_order() {
    let a = DiskCache::canonical(&serde_json::json!({"a": 1, "b": [1, 2]})).unwrap();
    let b: serde_json::Value = serde_json::from_str(r#"{"b": [1, 2], "a": 1}"#).unwrap();
    assert_eq!(DiskCache::key(&a).unwrap(), DiskCache::key(&DiskCache::canonical(&b).unwrap()).unwrap());
}
