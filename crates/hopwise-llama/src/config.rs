//! Settings of the in-process backend.

/// Environment variable with the number of inference threads.
pub const THREADS_ENV: &str = "HOPWISE_THREADS";

/// How requests that arrive while the model is busy are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Concurrency {
    /// Continuous batching: at every decode step waiting requests join, new prompts are evaluated in
    /// chunks beside the running generations, and a finished sequence frees its place at once.
    Continuous,
    /// One request at a time, in arrival order: the same scheduler with room for one running request.
    Queue,
}

/// Settings of the local backend.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LocalConfig {
    /// KV-cache cells shared by all sequences (running requests and the prefix cache). A request is
    /// admitted when its prompt and `n × max_tokens` fit beside the running ones (larger `n` runs in
    /// waves). A prompt of `n_ctx` tokens or more is refused with [`crate::LlamaError::PromptTooLong`]; a
    /// shorter one gets at most `n_ctx - prompt` new tokens.
    pub n_ctx: u32,
    /// Inference threads; `None` reads `HOPWISE_THREADS`, else uses every available core.
    pub threads: Option<usize>,
    /// Most tokens in one decode call.
    pub n_batch: u32,
    /// Most sequences held at once: decoding samples of all requests plus cached prompts.
    pub max_sequences: u32,
    pub concurrency: Concurrency,
    /// Keep only the k most likely tokens before top-p (0 = off); bounds the sampling cost per token.
    pub top_k: u32,
    /// Prompt tokens evaluated per decode step while other sequences are generating: smaller keeps
    /// their tokens coming, larger evaluates prompts faster (continuous scheduler only).
    pub prefill_chunk: u32,
    /// Keep the KV cells of finished requests and reuse their longest common token prefix.
    pub prefix_cache: bool,
    /// Most draft tokens per step for prompt-lookup decoding; 0 turns it off for every request.
    pub lookup_max_draft: u32,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            n_ctx: 4096,
            threads: None,
            n_batch: 512,
            max_sequences: 32,
            concurrency: Concurrency::Continuous,
            top_k: 40,
            prefill_chunk: 128,
            prefix_cache: true,
            lookup_max_draft: 8,
        }
    }
}

impl LocalConfig {
    /// The thread count to use: the explicit setting, `HOPWISE_THREADS`, or the available cores.
    pub fn resolved_threads(&self) -> usize {
        self.threads
            .or_else(|| std::env::var(THREADS_ENV).ok().and_then(|value| value.trim().parse().ok()))
            .filter(|threads| *threads > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_threads_win_and_zero_is_ignored() {
        let config = LocalConfig { threads: Some(3), ..LocalConfig::default() };
        assert_eq!(config.resolved_threads(), 3);
        let config = LocalConfig { threads: Some(0), ..LocalConfig::default() };
        assert!(config.resolved_threads() >= 1);
    }

    #[test]
    fn concurrency_reads_by_name_and_a_removed_scheduler_is_refused() {
        let config: LocalConfig = serde_json::from_str(r#"{"concurrency": "queue"}"#).unwrap();
        assert_eq!(config.concurrency, Concurrency::Queue);
        assert_eq!(LocalConfig::default().concurrency, Concurrency::Continuous);
        let err = serde_json::from_str::<LocalConfig>(r#"{"concurrency": "rounds"}"#).expect_err("removed");
        assert!(err.to_string().contains("continuous"), "{err}");
    }
}
