//! Configuration: one TOML file (`hopwise.toml`), overridden by environment variables, overridden by
//! command-line flags (the CLI's flags read their `HOPWISE_*` variables, so both arrive here as
//! [`Overrides`]). This crate reads, merges and checks into typed values; the CLI's runtime turns
//! them into live backends.
//!
//! Where the file is looked for: `--config F`, else `$HOPWISE_CONFIG`, else `./hopwise.toml` if it
//! exists, else built-in defaults (the embedded local model and the sample index).
//!
//! Checked at load and after every override, so a mistake stops startup with a named error: an
//! unknown key, an unknown `[strategies.NAME]` section or strategy, an invalid strategy option, a
//! bad prompt override.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use hopwise_models::OpenAiConfig;
use hopwise_reason::strategy;
use hopwise_reason::{Budget, StrategyOptions};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
    #[error("unknown strategy `{0}`; `hopwise strategies` lists them")]
    UnknownStrategy(String),
    #[error("[strategies.{name}]: no strategy is called `{name}`{hint}; `hopwise strategies` lists them")]
    UnknownStrategySection { name: String, hint: String },
    #[error("[strategies.{name}]: {message}")]
    StrategyOptions { name: String, message: String },
    #[error("prompt overrides: {0}")]
    Prompts(String),
}

pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

pub use hopwise_core::{default_home, RewriteMethod};

/// How a remote engine answers (`[remote] mode`).
pub const REMOTE_MODES: [&str; 3] = ["text", "vector", "hybrid"];

/// The retrieval backend (`retriever`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrieverKind {
    /// BM25 over the index directory.
    Bm25,
    /// all-MiniLM-L6-v2 over the index's `dense/` folder.
    Dense,
    /// BM25 and dense, fused by reciprocal rank.
    Hybrid,
    Typesense,
    Milvus,
    Opensearch,
}

impl RetrieverKind {
    pub const ALL: [RetrieverKind; 6] =
        [Self::Bm25, Self::Dense, Self::Hybrid, Self::Typesense, Self::Milvus, Self::Opensearch];

    pub fn name(self) -> &'static str {
        match self {
            Self::Bm25 => "bm25",
            Self::Dense => "dense",
            Self::Hybrid => "hybrid",
            Self::Typesense => "typesense",
            Self::Milvus => "milvus",
            Self::Opensearch => "opensearch",
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|r| r.name()).collect();
            ConfigError::Invalid(format!("retriever `{name}` is unknown; choose one of {}", names.join(", ")))
        })
    }

    /// Whether it is a remote engine configured in `[remote]`.
    pub fn is_remote(self) -> bool {
        matches!(self, Self::Typesense | Self::Milvus | Self::Opensearch)
    }
}

impl std::fmt::Display for RetrieverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn parse_rewrite(name: &str) -> Result<RewriteMethod> {
    RewriteMethod::parse(name).ok_or_else(|| {
        let names: Vec<&str> = RewriteMethod::ALL.iter().map(|m| m.name()).collect();
        ConfigError::Invalid(format!("query_rewrite `{name}` is unknown; choose one of {}", names.join(", ")))
    })
}

/// How to reach a language model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum LlmConfig {
    /// In-process llama.cpp with a GGUF model: a known name (`qwen2.5-1.5b`, `qwen2.5-0.5b`,
    /// `smollm2-135m`) fetched by `hopwise setup`, or a path to any GGUF file.
    Local {
        #[serde(default = "default_model")]
        model: String,
        /// Inference threads (default: all cores, or `$HOPWISE_THREADS`).
        #[serde(default)]
        threads: Option<u32>,
        /// Context window in tokens.
        #[serde(default = "default_context")]
        context: u32,
    },
    /// Any OpenAI-compatible server: vLLM, llama.cpp's server, Ollama, hosted APIs. Fields: `base_url`,
    /// `model`, `api_key_env` (the NAME of the variable holding the key), `timeout_secs`, `max_retries`,
    /// `max_in_flight`, `send_grammar`, `headers`, … (see `hopwise_models::OpenAiConfig`).
    Openai(OpenAiConfig),
}

fn default_model() -> String {
    "qwen2.5-1.5b".into()
}
fn default_context() -> u32 {
    4096
}

/// The whole configuration, as read from `hopwise.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Data directory for models, indexes and caches (`$HOPWISE_HOME`, default `~/.cache/hopwise`).
    pub home: Option<PathBuf>,
    /// Which `[llm.NAME]` to use.
    pub llm: String,
    /// Named model backends.
    #[serde(rename = "llms")]
    pub llms: BTreeMap<String, LlmConfig>,
    /// The BM25 index directory (default: the sample index under `home`).
    pub index: Option<PathBuf>,
    /// Retrieval backend.
    pub retriever: RetrieverKind,
    /// Let the model rewrite each retrieval query first: `hyde`, `multi-query` or `sub-question`.
    pub query_rewrite: Option<RewriteMethod>,
    /// Drop passages already given to the same question in an earlier retrieval round.
    pub dedup: bool,
    /// Default strategy.
    pub strategy: String,
    /// Passages per retrieval round.
    pub k: usize,
    pub budget: Budget,
    /// Per-strategy options: `[strategies.toqd] critique = false`.
    pub strategies: BTreeMap<String, StrategyOptions>,
    /// Prompt template overrides: `[prompts] toqd_decompose = "..."`.
    pub prompts: BTreeMap<String, String>,
    /// A TOML file of prompt overrides.
    pub prompts_file: Option<PathBuf>,
    /// Cache model calls on disk (always on for `hopwise eval` unless `--no-cache`).
    pub cache: bool,
    /// `hopwise serve`: bind address, auth, limits.
    pub serve: ServeConfig,
    /// Remote retrieval engines (`retriever = "typesense" | "milvus" | "opensearch"`).
    pub remote: RemoteConfig,
}

/// The `[remote]` section: where the remote engines are and how to use them. Secrets are never read
/// from this file: it names the environment variable holding them (`*_env`); a key given by flag or
/// `HOPWISE_*` variable overrides that and is never serialised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemoteConfig {
    pub typesense_url: Option<String>,
    pub typesense_api_key_env: Option<String>,
    #[serde(skip)]
    pub typesense_api_key: Option<String>,
    pub milvus_url: Option<String>,
    pub milvus_token_env: Option<String>,
    #[serde(skip)]
    pub milvus_token: Option<String>,
    pub opensearch_url: Option<String>,
    /// The NAME of the variable holding the whole `Authorization` header value (`Basic …`, `ApiKey …`).
    pub opensearch_auth_env: Option<String>,
    #[serde(skip)]
    pub opensearch_auth: Option<String>,
    /// Collection (Typesense, Milvus) or index (OpenSearch) name.
    pub collection: String,
    /// `text`, `vector` or `hybrid`; default: hybrid for Typesense and OpenSearch, vector for Milvus.
    pub mode: Option<String>,
    /// Limit for one HTTP attempt.
    pub timeout_secs: f64,
    /// Retries on connection errors, timeouts, 429 and 5xx.
    pub max_retries: u32,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        Self {
            typesense_url: None,
            typesense_api_key_env: None,
            typesense_api_key: None,
            milvus_url: None,
            milvus_token_env: None,
            milvus_token: None,
            opensearch_url: None,
            opensearch_auth_env: None,
            opensearch_auth: None,
            collection: "hopwise".into(),
            mode: None,
            timeout_secs: 30.0,
            max_retries: 3,
        }
    }
}

/// Remote-engine values from flags or `HOPWISE_*` variables.
#[derive(Debug, Clone, Default)]
pub struct RemoteOverrides {
    pub typesense_url: Option<String>,
    pub typesense_api_key: Option<String>,
    pub milvus_url: Option<String>,
    pub milvus_token: Option<String>,
    pub opensearch_url: Option<String>,
    pub opensearch_auth: Option<String>,
    pub collection: Option<String>,
    pub mode: Option<String>,
}

impl RemoteConfig {
    fn apply(&mut self, o: &RemoteOverrides) {
        let set = |dst: &mut Option<String>, src: &Option<String>| {
            if let Some(v) = src.as_ref().filter(|v| !v.trim().is_empty()) {
                *dst = Some(v.clone());
            }
        };
        set(&mut self.typesense_url, &o.typesense_url);
        set(&mut self.typesense_api_key, &o.typesense_api_key);
        set(&mut self.milvus_url, &o.milvus_url);
        set(&mut self.milvus_token, &o.milvus_token);
        set(&mut self.opensearch_url, &o.opensearch_url);
        set(&mut self.opensearch_auth, &o.opensearch_auth);
        set(&mut self.mode, &o.mode);
        if let Some(c) = o.collection.as_ref().filter(|c| !c.trim().is_empty()) {
            self.collection = c.clone();
        }
    }

    fn validate(&self) -> Result<()> {
        if let Some(m) = &self.mode {
            if !REMOTE_MODES.contains(&m.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "remote mode `{m}` is unknown; choose one of {}",
                    REMOTE_MODES.join(", ")
                )));
            }
        }
        if self.collection.trim().is_empty() {
            return Err(ConfigError::Invalid("remote collection name is empty".into()));
        }
        if !(self.timeout_secs > 0.0 && self.timeout_secs.is_finite()) {
            return Err(ConfigError::Invalid(format!("remote timeout_secs = {} must be positive", self.timeout_secs)));
        }
        Ok(())
    }

    /// A secret given directly, else read from the variable `env_name` names (an error if it is
    /// named but unset), else `None`.
    pub fn secret(direct: &Option<String>, env_name: &Option<String>) -> Result<Option<String>> {
        if let Some(v) = direct {
            return Ok(Some(v.clone()));
        }
        match env_name {
            None => Ok(None),
            Some(name) => std::env::var(name).ok().filter(|v| !v.is_empty()).map(Some).ok_or_else(|| {
                ConfigError::Invalid(format!("the environment variable {name} (named in [remote]) is not set"))
            }),
        }
    }
}

/// The `[serve]` section. Environment variables (`HOPWISE_SERVE_*`) and `hopwise serve` flags override it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Address to listen on. Loopback by default: exposing the server is a deliberate choice.
    pub bind: String,
    /// The NAME of the environment variable holding the bearer token (never the token itself, so
    /// config files can be shared). No token: no authentication.
    pub token_env: Option<String>,
    /// Questions answered at once; further requests get 503 with `Retry-After`.
    pub max_concurrency: usize,
    /// Wall-clock limit per question; exceeding it answers 504.
    pub timeout_secs: u64,
    /// Largest accepted request body; larger ones get 413.
    pub max_body_bytes: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            token_env: None,
            max_concurrency: 8,
            timeout_secs: 300,
            max_body_bytes: 64 * 1024,
        }
    }
}

impl ServeConfig {
    /// Applies `hopwise serve` flags (whose clap definitions also read the `HOPWISE_SERVE_*` variables).
    pub fn apply(&mut self, o: &ServeOverrides) -> Result<()> {
        if let Some(b) = &o.bind {
            self.bind = b.clone();
        }
        if let Some(t) = &o.token_env {
            self.token_env = Some(t.clone());
        }
        if let Some(c) = o.max_concurrency {
            self.max_concurrency = c;
        }
        if let Some(t) = o.timeout_secs {
            self.timeout_secs = t;
        }
        if let Some(b) = o.max_body_bytes {
            self.max_body_bytes = b;
        }
        self.validate()
    }

    fn validate(&self) -> Result<()> {
        if self.bind.parse::<std::net::SocketAddr>().is_err() {
            return Err(ConfigError::Invalid(format!(
                "serve.bind = `{}` is not an address like 127.0.0.1:8080",
                self.bind
            )));
        }
        if self.max_concurrency == 0 {
            return Err(ConfigError::Invalid("serve.max_concurrency must be at least 1".into()));
        }
        if self.timeout_secs == 0 {
            return Err(ConfigError::Invalid("serve.timeout_secs must be at least 1".into()));
        }
        if self.max_body_bytes < 256 {
            return Err(ConfigError::Invalid("serve.max_body_bytes must be at least 256".into()));
        }
        if self.token_env.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ConfigError::Invalid("serve.token_env is empty; name an environment variable".into()));
        }
        Ok(())
    }

    /// The bearer token, read from the variable named by `token_env`. A named but unset variable is
    /// an error: starting without auth when auth was asked for would be worse than not starting.
    pub fn token(&self) -> Result<Option<String>> {
        let Some(name) = &self.token_env else { return Ok(None) };
        match std::env::var(name) {
            Ok(t) if !t.trim().is_empty() => Ok(Some(t)),
            _ => Err(ConfigError::Invalid(format!(
                "serve.token_env names `{name}`, but that environment variable is unset or empty"
            ))),
        }
    }
}

/// `hopwise serve` flag values; `None` leaves the file's value.
#[derive(Debug, Clone, Default)]
pub struct ServeOverrides {
    pub bind: Option<String>,
    pub token_env: Option<String>,
    pub max_concurrency: Option<usize>,
    pub timeout_secs: Option<u64>,
    pub max_body_bytes: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        let mut llms = BTreeMap::new();
        llms.insert(
            "local".to_string(),
            LlmConfig::Local { model: default_model(), threads: None, context: default_context() },
        );
        Self {
            home: None,
            llm: "local".into(),
            llms,
            index: None,
            retriever: RetrieverKind::Bm25,
            query_rewrite: None,
            dedup: false,
            strategy: "toqd".into(),
            k: 5,
            budget: Budget::default(),
            strategies: BTreeMap::new(),
            prompts: BTreeMap::new(),
            prompts_file: None,
            cache: false,
            serve: ServeConfig::default(),
            remote: RemoteConfig::default(),
        }
    }
}

/// Values from flags or the environment that override the file. `None` leaves the file's value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub home: Option<PathBuf>,
    pub llm: Option<String>,
    /// `--model`: a model name or GGUF path for a local backend, or the model id for an OpenAI one.
    pub model: Option<String>,
    /// `--base-url`: switches to an OpenAI-compatible backend at this URL.
    pub base_url: Option<String>,
    pub index: Option<PathBuf>,
    /// `--retriever` / `HOPWISE_RETRIEVER`.
    pub retriever: Option<String>,
    pub query_rewrite: Option<String>,
    /// `Some(true)` turns de-duplication on; `None` leaves the file's setting.
    pub dedup: Option<bool>,
    pub strategy: Option<String>,
    pub k: Option<usize>,
    pub threads: Option<u32>,
    pub r_max: Option<u32>,
    /// `--max-seconds` / `--max-tokens`: per-question time and token budgets.
    pub max_seconds: Option<f64>,
    pub max_tokens: Option<u64>,
    pub remote: RemoteOverrides,
}

impl Config {
    /// Reads `path`, or finds the file as the module docs describe. Unknown keys are errors, so a
    /// typo never silently falls back to a default.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        let path = path
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("HOPWISE_CONFIG").map(PathBuf::from))
            .or_else(|| Some(PathBuf::from("hopwise.toml")).filter(|p| p.exists()));
        match path {
            Some(p) => Self::from_file(&p),
            None => Ok(Self::default()),
        }
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let src = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::File { path: path.to_path_buf(), message: e.to_string() })?;
        Self::from_toml(&src).map_err(|e| ConfigError::File { path: path.to_path_buf(), message: e.to_string() })
    }

    pub fn from_toml(src: &str) -> Result<Self> {
        let mut config: Config = toml::from_str(src).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if !config.llms.contains_key("local") {
            config.llms.insert(
                "local".into(),
                LlmConfig::Local { model: default_model(), threads: None, context: default_context() },
            );
        }
        config.validate()?;
        Ok(config)
    }

    /// Applies flag (or environment) values, then checks the result.
    pub fn apply(&mut self, o: &Overrides) -> Result<()> {
        if let Some(h) = &o.home {
            self.home = Some(h.clone());
        }
        if let Some(l) = &o.llm {
            self.llm = l.clone();
        }
        if let Some(url) = &o.base_url {
            let model = o.model.clone().unwrap_or_else(|| "default".into());
            let mut cfg = OpenAiConfig::new(url.clone(), model);
            // Local servers need no key; send one only when the conventional variable is set.
            cfg.api_key_env = std::env::var_os("OPENAI_API_KEY").map(|_| "OPENAI_API_KEY".into());
            self.llms.insert("cli".into(), LlmConfig::Openai(cfg));
            self.llm = "cli".into();
        } else if let Some(m) = &o.model {
            match self.llms.get_mut(&self.llm) {
                Some(LlmConfig::Local { model, .. }) | Some(LlmConfig::Openai(OpenAiConfig { model, .. })) => {
                    *model = m.clone()
                }
                None => {}
            }
        }
        if let Some(t) = o.threads {
            if let Some(LlmConfig::Local { threads, .. }) = self.llms.get_mut(&self.llm) {
                *threads = Some(t);
            }
        }
        if let Some(i) = &o.index {
            self.index = Some(i.clone());
        }
        if let Some(r) = &o.retriever {
            self.retriever = RetrieverKind::parse(r)?;
        }
        if let Some(q) = &o.query_rewrite {
            self.query_rewrite = Some(parse_rewrite(q)?);
        }
        if let Some(d) = o.dedup {
            self.dedup = d;
        }
        if let Some(s) = &o.strategy {
            self.strategy = s.clone();
        }
        if let Some(k) = o.k {
            self.k = k;
        }
        if let Some(r) = o.r_max {
            self.budget.r_max = r;
        }
        if let Some(seconds) = o.max_seconds {
            if !(seconds.is_finite() && seconds > 0.0) {
                return Err(ConfigError::Invalid(format!("max_seconds = {seconds} must be a positive number")));
            }
            self.budget.max_seconds = Some(seconds);
        }
        if let Some(tokens) = o.max_tokens {
            self.budget.max_tokens = Some(tokens);
        }
        self.remote.apply(&o.remote);
        self.validate()
    }

    fn validate(&self) -> Result<()> {
        if !self.llms.contains_key(&self.llm) {
            let known: Vec<&str> = self.llms.keys().map(String::as_str).collect();
            return Err(ConfigError::Invalid(format!(
                "llm `{}` is not configured; configured: {}",
                self.llm,
                known.join(", ")
            )));
        }
        self.remote.validate()?;
        if self.k == 0 || self.k > 100 {
            return Err(ConfigError::Invalid(format!("k = {} must be between 1 and 100", self.k)));
        }
        self.serve.validate()?;
        self.check_strategies()?;
        self.prompts().map(|_| ())
    }

    /// The default strategy must exist, and every `[strategies.NAME]` must name a strategy and hold
    /// options it accepts.
    fn check_strategies(&self) -> Result<()> {
        strategy::spec(&self.strategy).map_err(|_| ConfigError::UnknownStrategy(self.strategy.clone()))?;
        for (name, options) in &self.strategies {
            let row = strategy::spec(name).map_err(|_| ConfigError::UnknownStrategySection {
                name: name.clone(),
                hint: closest_strategy(name).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default(),
            })?;
            row.build(options).map_err(|e| ConfigError::StrategyOptions { name: name.clone(), message: e.to_string() })?;
        }
        Ok(())
    }

    /// The data directory: `home`, else `$HOME/.cache/hopwise`.
    pub fn home_dir(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(default_home)
    }

    /// The index to use: the configured one, else the sample index built by `hopwise setup`.
    pub fn index_dir(&self) -> PathBuf {
        self.index.clone().unwrap_or_else(|| self.home_dir().join("indexes").join("sample"))
    }

    pub fn llm_config(&self) -> &LlmConfig {
        // validate() guarantees presence; fall back to the default local model regardless.
        static FALLBACK: std::sync::OnceLock<LlmConfig> = std::sync::OnceLock::new();
        self.llms.get(&self.llm).unwrap_or_else(|| {
            FALLBACK.get_or_init(|| LlmConfig::Local {
                model: default_model(),
                threads: None,
                context: default_context(),
            })
        })
    }

    pub fn strategy_options(&self, strategy: &str) -> StrategyOptions {
        self.strategies.get(strategy).cloned().unwrap_or_default()
    }

    /// The prompt templates in force: built-ins, then `prompts_file`, then `[prompts]`.
    pub fn prompts(&self) -> Result<hopwise_core::Prompts> {
        let mut p = hopwise_core::Prompts::default();
        if let Some(f) = &self.prompts_file {
            p = p.with_overrides_file(f).map_err(|e| ConfigError::Prompts(e.to_string()))?;
        }
        p.with_overrides(&self.prompts).map_err(|e| ConfigError::Prompts(e.to_string()))
    }
}

/// The strategy name within two edits of `name`, for "did you mean".
fn closest_strategy(name: &str) -> Option<&'static str> {
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut diagonal = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let next = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
                diagonal = row[j + 1];
                row[j + 1] = next;
            }
        }
        row[b.len()]
    }
    strategy::STRATEGIES.iter().map(|s| (distance(name, s.name), s.name)).filter(|(d, _)| *d <= 2).min().map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn remote_section_layers_file_then_overrides_and_never_serialises_keys() {
        let mut c = Config::from_toml(
            "retriever = \"typesense\"\n[remote]\ntypesense_url = \"http://a:1\"\ntypesense_api_key_env = \"TS_KEY_FOR_TEST\"\ncollection = \"c1\"",
        )
        .unwrap();
        assert_eq!(c.remote.typesense_url.as_deref(), Some("http://a:1"));
        let o = Overrides {
            remote: RemoteOverrides {
                typesense_url: Some("http://b:2".into()),
                typesense_api_key: Some("secret-key".into()),
                mode: Some("text".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        c.apply(&o).unwrap();
        assert_eq!(c.remote.typesense_url.as_deref(), Some("http://b:2"));
        assert_eq!(c.remote.collection, "c1");
        assert_eq!(
            RemoteConfig::secret(&c.remote.typesense_api_key, &c.remote.typesense_api_key_env).unwrap().as_deref(),
            Some("secret-key")
        );
        assert!(!toml::to_string(&c).unwrap().contains("secret-key"));
        assert!(RemoteConfig::secret(&None, &Some("HOPWISE_SURELY_UNSET_VAR".into())).is_err());
        let bad = Overrides {
            remote: RemoteOverrides { mode: Some("fuzzy".into()), ..Default::default() },
            ..Default::default()
        };
        assert!(c.apply(&bad).is_err());
        assert!(Config::from_toml("[remote]\ntimeout_secs = 0.0").is_err());
    }

    use super::*;

    #[test]
    fn serve_section_then_flags() {
        let mut c = Config::from_toml("[serve]\nbind = \"0.0.0.0:9000\"\nmax_concurrency = 2").expect("valid");
        assert_eq!(c.serve.bind, "0.0.0.0:9000");
        assert_eq!(c.serve.timeout_secs, ServeConfig::default().timeout_secs);
        c.serve
            .apply(&ServeOverrides {
                max_concurrency: Some(5),
                token_env: Some("HW_TEST_UNSET_TOKEN".into()),
                ..Default::default()
            })
            .expect("apply");
        assert_eq!(c.serve.max_concurrency, 5);
        assert_eq!(c.serve.bind, "0.0.0.0:9000", "unset flags keep the file's value");
        let err = c.serve.token().expect_err("named variable is unset");
        assert!(err.to_string().contains("HW_TEST_UNSET_TOKEN"));
        assert!(c.serve.apply(&ServeOverrides { bind: Some("nope".into()), ..Default::default() }).is_err());
        assert_eq!(ServeConfig::default().token().expect("no token configured"), None);
    }

    #[test]
    fn defaults_use_the_local_model() {
        let c = Config::default();
        assert!(matches!(c.llm_config(), LlmConfig::Local { model, .. } if model == "qwen2.5-1.5b"));
        assert_eq!(c.strategy, "toqd");
        assert_eq!(c.budget.r_max, 6);
    }

    #[test]
    fn file_then_overrides() {
        let mut c = Config::from_toml(
            r#"
            llm = "vllm"
            k = 3
            [llms.vllm]
            kind = "openai"
            base_url = "http://127.0.0.1:8000/v1"
            model = "qwen"
            api_key_env = "MY_KEY"
            [budget]
            r_max = 2
            [strategies.toqd]
            critique = false
            [prompts]
            toqd_self_verify = "Q: {question}"
            "#,
        )
        .expect("valid");
        assert!(matches!(c.llm_config(), LlmConfig::Openai(OpenAiConfig { model, .. }) if model == "qwen"));
        assert_eq!(c.budget.r_max, 2);
        assert_eq!(c.strategy_options("toqd").0.get("critique"), Some(&serde_json::Value::Bool(false)));
        assert_eq!(c.query_rewrite, None);
        assert!(c.prompts().expect("prompts").template("toqd_self_verify") == Some("Q: {question}"));
        c.apply(&Overrides { model: Some("other".into()), k: Some(7), ..Default::default() }).expect("apply");
        assert!(matches!(c.llm_config(), LlmConfig::Openai(OpenAiConfig { model, .. }) if model == "other"));
        assert_eq!(c.k, 7);
        assert_eq!(c.retriever, RetrieverKind::Bm25);
        let o = Overrides {
            retriever: Some("hybrid".into()),
            dedup: Some(true),
            query_rewrite: Some("multi-query".into()),
            ..Default::default()
        };
        c.apply(&o).expect("apply");
        assert!(c.retriever == RetrieverKind::Hybrid && c.dedup);
        assert_eq!(c.query_rewrite, Some(RewriteMethod::MultiQuery));
        let err = c.apply(&Overrides { retriever: Some("nope".into()), ..Default::default() }).expect_err("unknown");
        assert!(err.to_string().contains("bm25, dense, hybrid"), "{err}");
        c.retriever = RetrieverKind::Hybrid;
        c.apply(&Overrides { base_url: Some("http://127.0.0.1:9/v1".into()), ..Default::default() }).expect("apply");
        assert!(
            matches!(c.llm_config(), LlmConfig::Openai(OpenAiConfig { base_url, .. }) if base_url.ends_with(":9/v1"))
        );
    }

    #[test]
    fn mistakes_are_reported() {
        assert!(Config::from_toml("strategi = \"toqd\"").is_err(), "unknown key");
        assert!(Config::from_toml("llm = \"nope\"").is_err(), "unknown llm");
        assert!(Config::from_toml("k = 0").is_err());
        assert!(Config::from_toml("[prompts]\ntoqd_self_verify = \"{nope}\"").is_err());
        assert!(Config::from_toml("[serve]\nbind = \"localhost\"").is_err(), "bind needs a port");
        assert!(Config::from_toml("[serve]\nmax_concurrency = 0").is_err());
        assert!(Config::from_toml("[serve]\ntoken = \"x\"").is_err(), "tokens never go in the file");
        let err = Config::from_toml("retriever = \"vector\"").expect_err("unknown retriever");
        assert!(err.to_string().contains("`bm25`, `dense`, `hybrid`"), "{err}");
        assert!(Config::from_toml("query_rewrite = \"magic\"").is_err());
        let err = Config::from_file(Path::new("/nonexistent/hopwise.toml")).expect_err("missing");
        assert!(err.to_string().contains("/nonexistent/hopwise.toml"));
    }

    #[test]
    fn strategy_sections_prompts_and_names_are_checked_at_load() {
        let err = Config::from_toml("[strategies.toqdd]\ncritique = false").expect_err("misspelled section");
        assert!(matches!(&err, ConfigError::UnknownStrategySection { name, .. } if name == "toqdd"), "{err}");
        assert!(err.to_string().contains("did you mean `toqd`?"), "{err}");
        let err = Config::from_toml("[strategies.toqd]\ncritiqe = false").expect_err("unknown option");
        assert!(matches!(&err, ConfigError::StrategyOptions { name, .. } if name == "toqd"), "{err}");
        assert!(err.to_string().contains("critiqe"), "{err}");
        let err = Config::from_toml("[strategies.uar]\nsamples = 1").expect_err("invalid value");
        assert!(matches!(&err, ConfigError::StrategyOptions { name, .. } if name == "uar"), "{err}");
        let err = Config::from_toml("[prompts]\ntoqd_self_verify = \"{nope}\"").expect_err("bad placeholder");
        assert!(matches!(err, ConfigError::Prompts(_)), "{err}");
        let err = Config::from_toml("[prompts]\nno_such_template = \"x\"").expect_err("unknown template");
        assert!(matches!(err, ConfigError::Prompts(_)), "{err}");
        let err = Config::from_toml("strategy = \"tqod\"").expect_err("unknown strategy");
        assert!(matches!(err, ConfigError::UnknownStrategy(_)), "{err}");
        let mut c = Config::default();
        let err = c.apply(&Overrides { strategy: Some("nope".into()), ..Default::default() }).expect_err("flag");
        assert!(matches!(err, ConfigError::UnknownStrategy(_)), "{err}");
        assert!(Config::from_toml("[strategies.hgot]\nsamples = 3").is_ok());
    }
}
