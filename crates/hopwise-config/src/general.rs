//! The top-level keys of `hopwise.toml`, declared once each in three groups by where their flags
//! apply (every command, the commands that answer questions, the commands that retrieve), and the
//! model flags, which edit the selected `[llms.NAME]`.

use std::path::PathBuf;

use hopwise_core::RewriteMethod;
use hopwise_models::OpenAiConfig;

use crate::settings::{path_or_blank, section, FlagValue};
use crate::{for_another_server, Config, LlmConfig, RetrieverKind};

section! {
    /// Top-level keys every command reads; their flags are global.
    #[serde(default)]
    pub struct GeneralSettings / GeneralOverrides {
        /// Data directory for models, indexes and caches (default `~/.cache/hopwise`).
        #[arg(long, global = true, env = "HOPWISE_HOME", value_name = "DIR", value_parser = path_or_blank)]
        home: Option<PathBuf> => PathBuf = None,
        /// Which configured model backend to use (`[llms.NAME]`).
        #[arg(long, global = true, env = "HOPWISE_LLM", value_name = "NAME")]
        llm: String => String = "local".into(),
        /// The index directory: searched by the local retrievers, written by `hopwise index`
        /// (default: the sample index under `home`).
        #[arg(long, global = true, env = "HOPWISE_INDEX", value_name = "DIR", value_parser = path_or_blank)]
        index: Option<PathBuf> => PathBuf = None,
        /// Retrieval backend: bm25, dense (all-MiniLM-L6-v2; needs `hopwise index --dense`), hybrid
        /// (both, fused), or a remote engine configured in `[remote]`: typesense, milvus, opensearch.
        #[arg(long, global = true, env = "HOPWISE_RETRIEVER", value_enum)]
        retriever: RetrieverKind => RetrieverKind = RetrieverKind::Bm25,
        /// A TOML file of prompt overrides (applied before `[prompts]`).
        #[arg(skip)]
        prompts_file: Option<PathBuf> => PathBuf = None,
        /// Cache model calls on disk (always on for `hopwise eval` unless `--no-cache`).
        #[arg(skip)]
        cache: bool => bool = false,
    }
}

section! {
    /// Top-level keys of answering a question; `hopwise ask` and `hopwise serve` take their flags.
    #[serde(default)]
    pub struct RunSettings / RunOverrides {
        /// The strategy that answers (see `hopwise strategies`).
        #[arg(short, long, env = "HOPWISE_STRATEGY")]
        strategy: String => String = "toqd".into(),
        /// Passages per retrieval round.
        #[arg(short, long)]
        k: usize => usize = 5,
    }
}

section! {
    /// Top-level keys of how queries are searched; `hopwise ask` and `hopwise eval` take their flags.
    #[serde(default)]
    pub struct RetrievalSettings / RetrievalOverrides {
        /// Let the model rewrite each retrieval query first: hyde, multi-query or sub-question.
        #[arg(long, value_name = "METHOD", value_parser = crate::parse_rewrite_method)]
        query_rewrite: Option<RewriteMethod> => RewriteMethod = None,
        /// Drop passages a question was already given in an earlier retrieval round (`--dedup`,
        /// or `--dedup=false` against the file).
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
        dedup: bool => bool = false,
    }
}

/// Flags that edit the selected model backend (`[llms.NAME]`, see `--llm`); the file sets the
/// same things as that backend's fields.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ModelOverrides {
    /// Model: a name (qwen2.5-1.5b, qwen2.5-0.5b, smollm2-135m), a GGUF path, or a served model id.
    #[arg(long, global = true, env = "HOPWISE_MODEL")]
    pub model: Option<String>,
    /// Use an OpenAI-compatible server at this URL (e.g. http://127.0.0.1:8000/v1); key from
    /// $OPENAI_API_KEY. Selects a backend named `cli`.
    #[arg(long, global = true, env = "HOPWISE_BASE_URL", value_name = "URL")]
    pub base_url: Option<String>,
    /// Inference threads of a local model (`threads`).
    #[arg(long, global = true, env = "HOPWISE_THREADS", value_name = "N")]
    pub threads: Option<u32>,
    /// Seconds one request to an OpenAI-compatible server may take (`timeout_secs`).
    #[arg(long, global = true, env = "HOPWISE_LLM_TIMEOUT_SECS", value_name = "SECS")]
    pub llm_timeout_secs: Option<f64>,
    /// Retries of a failed request to an OpenAI-compatible server (`max_retries`).
    #[arg(long, global = true, env = "HOPWISE_LLM_MAX_RETRIES", value_name = "N")]
    pub llm_max_retries: Option<u32>,
}

impl ModelOverrides {
    /// Edits the selected backend, or selects a new `cli` one for `--base-url`.
    pub(crate) fn apply_to(&self, config: &mut Config) {
        let selected = config.general.llm.clone();
        let given = |v: &Option<String>| v.clone().filter(|s| !s.is_blank());
        if let Some(url) = given(&self.base_url) {
            let model = given(&self.model).unwrap_or_else(|| "default".into());
            let mut cfg = match config.llms.get(&selected) {
                Some(LlmConfig::Openai(current)) => for_another_server(current, &url, &model),
                _ => OpenAiConfig::new(url, model),
            };
            // Local servers need no key; send one only when the conventional variable is set.
            cfg.api_key_env = std::env::var_os("OPENAI_API_KEY").map(|_| "OPENAI_API_KEY".into());
            config.llms.insert("cli".into(), LlmConfig::Openai(cfg));
            config.general.llm = "cli".into();
        } else if let Some(m) = given(&self.model) {
            match config.llms.get_mut(&selected) {
                Some(LlmConfig::Local { model, .. }) | Some(LlmConfig::Openai(OpenAiConfig { model, .. })) => {
                    *model = m
                }
                None => {}
            }
        }
        let selected = config.general.llm.clone();
        match config.llms.get_mut(&selected) {
            Some(LlmConfig::Local { threads, .. }) => {
                if let Some(t) = self.threads {
                    *threads = Some(t);
                }
            }
            Some(LlmConfig::Openai(cfg)) => {
                if let Some(t) = self.llm_timeout_secs {
                    cfg.timeout_secs = t;
                }
                if let Some(r) = self.llm_max_retries {
                    cfg.max_retries = r;
                }
            }
            None => {}
        }
    }
}
