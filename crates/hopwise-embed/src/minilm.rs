//! all-MiniLM-L6-v2 run in-process on CPU: tokenizer.json + the BERT encoder, batched over threads.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{BertConfig, BertModel, Scratch};
use crate::error::{EmbedError, Result};
use crate::fetch::{CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE};

/// The id an index records for vectors from this embedder.
pub const MINILM_MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// Inputs are cut to this many tokens, `[CLS]` and `[SEP]` included: the model's own
/// `max_seq_length` in sentence-transformers, so vectors match the reference implementation.
pub const MINILM_MAX_TOKENS: usize = 256;

/// How an embedding call is split into work.
#[derive(Debug, Clone)]
pub struct MiniLmOptions {
    /// Worker threads; each runs whole batches single-threaded (no per-matmul synchronisation).
    pub threads: usize,
    /// Upper bound on the tokens packed into one forward pass. Bigger batches amortise weight loads;
    /// past a few thousand tokens the activations stop fitting in cache.
    pub batch_tokens: usize,
    /// Truncation length in tokens, special tokens included (at most 512, the position table size).
    pub max_tokens: usize,
}

impl Default for MiniLmOptions {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            batch_tokens: 4096,
            max_tokens: MINILM_MAX_TOKENS,
        }
    }
}

struct Inner {
    tokenizer: Tokenizer,
    model: BertModel,
    options: MiniLmOptions,
}

/// all-MiniLM-L6-v2 sentence embeddings: 384-d, mean pooling over tokens, L2-normalised.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    inner: Arc<Inner>,
}

impl MiniLmEmbedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `dir` (as laid out by
    /// [`crate::ensure_embedder_model`]).
    pub fn load(dir: &Path, options: MiniLmOptions) -> Result<Self> {
        for file in [CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE] {
            if !dir.join(file).is_file() {
                return Err(EmbedError::MissingFile(dir.join(file)));
            }
        }
        let config = BertConfig::from_file(&dir.join(CONFIG_FILE))?;
        let max_tokens = options.max_tokens.clamp(2, config.max_position_embeddings);
        let tokenizer = load_tokenizer(&dir.join(TOKENIZER_FILE), max_tokens)?;
        let model = BertModel::load(config, &dir.join(WEIGHTS_FILE))?;
        let options =
            MiniLmOptions { threads: options.threads.max(1), batch_tokens: options.batch_tokens.max(1), max_tokens };
        Ok(Self { inner: Arc::new(Inner { tokenizer, model, options }) })
    }

    pub fn options(&self) -> &MiniLmOptions {
        &self.inner.options
    }

    /// Token ids as the encoder sees them (truncated, with `[CLS]`/`[SEP]`).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self.inner.tokenizer.encode(text, true).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Embeds `texts` on the calling thread plus `threads - 1` helpers; one unit vector per text, in order.
    pub fn embed_blocking<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        let inner = &*self.inner;
        let threads = inner.options.threads.min(texts.len()).max(1);
        let ids = parallel_map(threads, texts.len(), |i| self.tokenize(texts[i].as_ref()))?;

        // Longest first: the big batches start early, and similar lengths share a batch, which keeps
        // the per-sequence attention work of each batch even.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut batches: Vec<Vec<usize>> = Vec::new();
        let mut batch_len = 0;
        for i in order {
            let len = ids[i].len();
            match batches.last_mut() {
                Some(batch) if batch_len + len <= inner.options.batch_tokens => batch.push(i),
                _ => {
                    batches.push(vec![i]);
                    batch_len = 0;
                }
            }
            batch_len += len;
        }

        let per_batch = parallel_map_with(threads, batches.len(), Scratch::default, |scratch, b| {
            let seqs: Vec<&[u32]> = batches[b].iter().map(|&i| ids[i].as_slice()).collect();
            inner.model.embed(&seqs, scratch)
        })?;
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (batch, vectors) in batches.iter().zip(per_batch) {
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

fn load_tokenizer(path: &Path, max_tokens: usize) -> Result<Tokenizer> {
    let mut tokenizer =
        Tokenizer::from_file(path).map_err(|e| EmbedError::Tokenizer(format!("{}: {e}", path.display())))?;
    // The shipped tokenizer.json pads and truncates to 128; the encoder packs sequences instead of
    // padding, and sentence-transformers truncates this model at 256.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
    Ok(tokenizer)
}

/// `f(i)` for `i in 0..n` on `threads` threads (the caller's included), results in index order.
fn parallel_map<T: Send>(threads: usize, n: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    parallel_map_with(threads, n, || (), |_, i| f(i))
}

/// Like [`parallel_map`], with per-thread state from `init`. Work is handed out one index at a time.
fn parallel_map_with<T: Send, S>(
    threads: usize,
    n: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let work = || -> Result<Vec<(usize, T)>> {
        let mut state = init();
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return Ok(done);
            }
            done.push((i, f(&mut state, i)?));
        }
    };
    let parts: Vec<Result<Vec<(usize, T)>>> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads.min(n).max(1)).map(|_| scope.spawn(work)).collect();
        let mut parts = vec![work()];
        for h in helpers {
            parts.push(h.join().unwrap_or_else(|_| Err(EmbedError::Weights("embedding worker panicked".into()))));
        }
        parts
    });
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for part in parts {
        for (i, v) in part? {
            slots[i] = Some(v);
        }
    }
    slots.into_iter().map(|s| s.ok_or_else(|| EmbedError::Weights("embedding worker lost a result".into()))).collect()
}

#[async_trait]
impl hopwise_core::Embedder for MiniLmEmbedder {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dim(&self) -> usize {
        self.inner.model.config().hidden_size
    }

    async fn embed(&self, texts: &[String]) -> hopwise_core::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // Keep the async runtime's workers free while the CPU-bound encoder runs.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let this = self.clone();
                let texts = texts.to_vec();
                handle
                    .spawn_blocking(move || this.embed_blocking(&texts))
                    .await
                    .map_err(|e| {
                        hopwise_core::Error::backend("minilm", hopwise_core::BackendErrorKind::Server, e.to_string())
                    })?
                    .map_err(Into::into)
            }
            Err(_) => self.embed_blocking(texts).map_err(Into::into),
        }
    }
}
