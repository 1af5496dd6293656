//! all-MiniLM-L6-v2 run in-process on CPU: tokenizer.json + the BERT encoder, batched over threads.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{BertConfig, BertModel, Scratch};
use crate::error::{EmbedError, Result};
use crate::fetch::{CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE};

/// The id an index records for vectors from this embedder in f32.
pub const MINILM_MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// The id for int8 vectors: a separate identity, so an index never mixes them with f32 ones.
pub const MINILM_INT8_MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2@int8";
/// Sequences shorter than this (special tokens included) run in f32 even in int8 mode: with two to
/// four tokens there is no averaging over tokens to cancel int8 rounding, which then moves the
/// vector visibly; such inputs cost next to nothing in f32.
pub const INT8_MIN_TOKENS: usize = 6;
/// Inputs are cut to this many tokens, `[CLS]` and `[SEP]` included: the model's own
/// `max_seq_length` in sentence-transformers, so vectors match the reference implementation.
pub const MINILM_MAX_TOKENS: usize = 256;

/// Arithmetic of the encoder's matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// Weights and activations in int8 blocks of 32 (AVX-512 VNNI or AVX2 kernels): faster than f32
    /// and close to its vectors (a test bounds the cosine to the f32 model).
    #[default]
    Int8,
    /// The reference arithmetic.
    F32,
}

impl Precision {
    /// `int8` or `f32`.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "int8" | "i8" | "q8" => Some(Self::Int8),
            "f32" | "fp32" | "float" => Some(Self::F32),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Int8 => "int8",
            Self::F32 => "f32",
        }
    }
}

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
    /// int8 (default) or f32 matrix products; part of the embedder's identity.
    pub precision: Precision,
}

impl Default for MiniLmOptions {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            batch_tokens: 4096,
            max_tokens: MINILM_MAX_TOKENS,
            precision: Precision::default(),
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
        // A file that is there but unreadable is a damaged download: say so, and how to fetch it again.
        let damaged = |file: &str| {
            let path = dir.join(file);
            move |e: EmbedError| EmbedError::Damaged { path, reason: e.to_string() }
        };
        let config = BertConfig::from_file(&dir.join(CONFIG_FILE)).map_err(damaged(CONFIG_FILE))?;
        let max_tokens = options.max_tokens.clamp(2, config.max_position_embeddings);
        let tokenizer = load_tokenizer(&dir.join(TOKENIZER_FILE), max_tokens).map_err(damaged(TOKENIZER_FILE))?;
        let mut model = BertModel::load(config, &dir.join(WEIGHTS_FILE)).map_err(damaged(WEIGHTS_FILE))?;
        if options.precision == Precision::Int8 {
            model.quantize()?;
        }
        let options = MiniLmOptions {
            threads: options.threads.max(1),
            batch_tokens: options.batch_tokens.max(1),
            max_tokens,
            precision: options.precision,
        };
        Ok(Self { inner: Arc::new(Inner { tokenizer, model, options }) })
    }

    pub fn options(&self) -> &MiniLmOptions {
        &self.inner.options
    }

    /// The identity an index records: the model and the precision of its arithmetic.
    pub fn identity(&self) -> &'static str {
        match self.inner.options.precision {
            Precision::Int8 => MINILM_INT8_MODEL_ID,
            Precision::F32 => MINILM_MODEL_ID,
        }
    }

    /// Whether a sequence of `len` tokens runs through the int8 products.
    fn int8_for(&self, len: usize) -> bool {
        self.inner.options.precision == Precision::Int8 && len >= INT8_MIN_TOKENS
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

        // Length buckets: longest first, so the big batches start early and similar lengths share a
        // batch, which keeps the per-sequence attention work of each batch even. Sequences are
        // packed, not padded, so a bucket wastes no work on padding. Short sequences (f32 even in
        // int8 mode) never share a batch with int8 ones.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut batches: Vec<(bool, Vec<usize>)> = Vec::new();
        let mut batch_len = 0;
        for i in order {
            let len = ids[i].len();
            let int8 = self.int8_for(len);
            match batches.last_mut() {
                Some((kind, batch)) if *kind == int8 && batch_len + len <= inner.options.batch_tokens => batch.push(i),
                _ => {
                    batches.push((int8, vec![i]));
                    batch_len = 0;
                }
            }
            batch_len += len;
        }

        let per_batch = parallel_map_with(threads, batches.len(), Scratch::default, |scratch, b| {
            let (int8, batch) = &batches[b];
            let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
            inner.model.embed(&seqs, scratch, *int8)
        })?;
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for ((_, batch), vectors) in batches.iter().zip(per_batch) {
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
        self.identity()
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
