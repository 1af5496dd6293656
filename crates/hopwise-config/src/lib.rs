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

mod budget;
mod general;
mod reference;
mod remote;
mod serve;
mod settings;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use hopwise_models::OpenAiConfig;
use hopwise_reason::strategy;
use hopwise_reason::StrategyOptions;
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

pub use budget::{BudgetConfig, BudgetOverrides};
pub use general::{
    GeneralOverrides, GeneralSettings, ModelOverrides, RetrievalOverrides, RetrievalSettings, RunOverrides, RunSettings,
};
pub use hopwise_core::{default_home, RewriteMethod};
pub use reference::reference_block;
pub use remote::{RemoteConfig, RemoteMode, RemoteOverrides};
use serve::in_range;
pub use serve::{
    ServeConfig, ServeOverrides, MAX_SERVE_BODY_BYTES, MAX_SERVE_CONCURRENCY, MAX_SERVE_CONNECTIONS,
    MAX_SERVE_READ_TIMEOUT_SECS, MAX_SERVE_TIMEOUT_SECS,
};
use settings::FlagValue;

/// Upper bounds for an OpenAI-compatible backend's limits.
pub const MAX_LLM_TIMEOUT_SECS: f64 = 86_400.0;
pub const MAX_LLM_RETRIES: u32 = 20;
pub const MAX_LLM_IN_FLIGHT: usize = 1024;

/// The retrieval backend (`retriever`, `--retriever`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum RetrieverKind {
    /// BM25 over the index directory.
    Bm25,
    /// all-MiniLM-L6-v2 over the index's `dense/` folder.
    Dense,
    /// BM25 and dense, fused by reciprocal rank.
    Hybrid,
    /// A Typesense collection (`[remote]`).
    Typesense,
    /// A Milvus collection (`[remote]`).
    Milvus,
    /// An OpenSearch or Elasticsearch index (`[remote]`).
    Opensearch,
}

impl FlagValue for RetrieverKind {}
impl FlagValue for RewriteMethod {}

impl RetrieverKind {
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

    /// Whether it is a remote engine configured in `[remote]`.
    pub fn is_remote(self) -> bool {
        matches!(self, Self::Typesense | Self::Milvus | Self::Opensearch)
    }
}

impl std::str::FromStr for RetrieverKind {
    type Err = ConfigError;

    /// By name (`bm25`, `dense`, …), for callers outside clap and the file (the Python package).
    fn from_str(name: &str) -> Result<Self> {
        <Self as clap::ValueEnum>::from_str(name, false).map_err(|_| {
            let names: Vec<&str> = <Self as clap::ValueEnum>::value_variants().iter().map(|r| r.name()).collect();
            ConfigError::Invalid(format!("retriever `{name}` is unknown; choose one of {}", names.join(", ")))
        })
    }
}

impl std::fmt::Display for RetrieverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `--query-rewrite`'s value parser: the method, or which ones there are.
pub fn parse_rewrite_method(name: &str) -> std::result::Result<RewriteMethod, String> {
    RewriteMethod::parse(name).ok_or_else(|| {
        let names: Vec<&str> = RewriteMethod::ALL.iter().map(|m| m.name()).collect();
        format!("`{name}` is unknown; choose one of {}", names.join(", "))
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

/// The whole configuration, as read from `hopwise.toml`. The top-level keys come from the three
/// groups in `general.rs`; the sections below them are tables of the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    #[serde(flatten)]
    pub general: GeneralSettings,
    #[serde(flatten)]
    pub run: RunSettings,
    #[serde(flatten)]
    pub retrieval: RetrievalSettings,
    /// Named model backends.
    pub llms: BTreeMap<String, LlmConfig>,
    pub budget: BudgetConfig,
    /// Per-strategy options: `[strategies.toqd] max_steps = 3`.
    pub strategies: BTreeMap<String, StrategyOptions>,
    /// Prompt template overrides: `[prompts] toqd_decompose = "..."`.
    pub prompts: BTreeMap<String, String>,
    /// `hopwise serve`: bind address, auth, limits.
    pub serve: ServeConfig,
    /// Remote retrieval engines (`retriever = "typesense" | "milvus" | "opensearch"`).
    pub remote: RemoteConfig,
}

/// The file's tables (every other key is a top-level key of a group).
const TABLES: &[&str] = &["llms", "budget", "strategies", "prompts", "serve", "remote"];

impl Default for Config {
    fn default() -> Self {
        let mut llms = BTreeMap::new();
        llms.insert(
            "local".to_string(),
            LlmConfig::Local { model: default_model(), threads: None, context: default_context() },
        );
        Self {
            general: GeneralSettings::default(),
            run: RunSettings::default(),
            retrieval: RetrievalSettings::default(),
            llms,
            budget: BudgetConfig::default(),
            strategies: BTreeMap::new(),
            prompts: BTreeMap::new(),
            serve: ServeConfig::default(),
            remote: RemoteConfig::default(),
        }
    }
}

/// Values from flags or the environment that override the file, one group per place the CLI
/// takes them. `None` (or a blank variable) leaves the file's value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub general: GeneralOverrides,
    pub model: ModelOverrides,
    pub run: RunOverrides,
    pub retrieval: RetrievalOverrides,
    pub budget: BudgetOverrides,
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
        let table: toml::Table = toml::from_str(src).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        check_top_level_keys(&table)?;
        // From the text again, so an error points at its line.
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
        self.general.merge(&o.general);
        o.model.apply_to(self);
        self.run.merge(&o.run);
        self.retrieval.merge(&o.retrieval);
        self.budget.merge(&o.budget);
        self.remote.merge(&o.remote);
        self.validate()
    }

    fn validate(&self) -> Result<()> {
        if !self.llms.contains_key(&self.general.llm) {
            let known: Vec<&str> = self.llms.keys().map(String::as_str).collect();
            return Err(ConfigError::Invalid(format!(
                "llm `{}` is not configured; configured: {}",
                self.general.llm,
                known.join(", ")
            )));
        }
        self.remote.validate()?;
        for (name, llm) in &self.llms {
            if let LlmConfig::Openai(cfg) = llm {
                validate_openai(name, cfg)?;
            }
        }
        if self.run.k == 0 || self.run.k > 100 {
            return Err(ConfigError::Invalid(format!("k = {} must be between 1 and 100", self.run.k)));
        }
        if let Some(seconds) = self.budget.max_seconds.filter(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(ConfigError::Invalid(format!("max_seconds = {seconds} must be a positive number")));
        }
        // A zero budget could only end every question before its first call.
        if self.budget.max_llm_calls == 0 {
            return Err(ConfigError::Invalid("max_llm_calls = 0 must be at least 1".into()));
        }
        if self.budget.max_tokens == Some(0) {
            return Err(ConfigError::Invalid("max_tokens = 0 must be at least 1".into()));
        }
        self.serve.validate()?;
        self.check_strategies()?;
        self.prompts().map(|_| ())
    }

    /// The default strategy must exist, and every `[strategies.NAME]` must name a strategy and hold
    /// options it accepts.
    fn check_strategies(&self) -> Result<()> {
        strategy::spec(&self.run.strategy).map_err(|_| ConfigError::UnknownStrategy(self.run.strategy.clone()))?;
        for (name, options) in &self.strategies {
            let row = strategy::spec(name).map_err(|_| ConfigError::UnknownStrategySection {
                name: name.clone(),
                hint: closest_strategy(name).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default(),
            })?;
            row.build(options)
                .map_err(|e| ConfigError::StrategyOptions { name: name.clone(), message: e.to_string() })?;
        }
        Ok(())
    }

    /// The data directory: `home`, else `$HOME/.cache/hopwise`.
    pub fn home_dir(&self) -> PathBuf {
        self.general.home.clone().unwrap_or_else(default_home)
    }

    /// The index to use: the configured one, else the sample index built by `hopwise setup`.
    pub fn index_dir(&self) -> PathBuf {
        self.general.index.clone().unwrap_or_else(|| self.home_dir().join("indexes").join("sample"))
    }

    pub fn llm_config(&self) -> &LlmConfig {
        // validate() guarantees presence; fall back to the default local model regardless.
        static FALLBACK: std::sync::OnceLock<LlmConfig> = std::sync::OnceLock::new();
        self.llms.get(&self.general.llm).unwrap_or_else(|| {
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
        if let Some(f) = &self.general.prompts_file {
            p = p.with_overrides_file(f).map_err(|e| ConfigError::Prompts(e.to_string()))?;
        }
        p.with_overrides(&self.prompts).map_err(|e| ConfigError::Prompts(e.to_string()))
    }
}

/// The settings of `current` that describe how to talk to any server (timeouts, retries, limits),
/// for `url` and `model`. What belongs to the configured server — its key, extra headers, name —
/// stays behind: a key for one server is never sent to another.
pub(crate) fn for_another_server(current: &OpenAiConfig, url: &str, model: &str) -> OpenAiConfig {
    OpenAiConfig {
        base_url: url.to_string(),
        model: model.to_string(),
        api_key_env: None,
        name: None,
        headers: BTreeMap::new(),
        ..current.clone()
    }
}

fn validate_openai(name: &str, cfg: &OpenAiConfig) -> Result<()> {
    let field = |f: &str| format!("llms.{name}.{f}");
    if !(cfg.timeout_secs > 0.0 && cfg.timeout_secs <= MAX_LLM_TIMEOUT_SECS) {
        return Err(ConfigError::Invalid(format!(
            "{} = {} must be more than 0 and at most {MAX_LLM_TIMEOUT_SECS}",
            field("timeout_secs"),
            cfg.timeout_secs
        )));
    }
    in_range(&field("max_retries"), cfg.max_retries, 0, MAX_LLM_RETRIES)?;
    in_range(&field("max_in_flight"), cfg.max_in_flight, 1, MAX_LLM_IN_FLIGHT)
}

/// Every top-level key is a group's key or a table: an unknown one (a typo) is an error naming the
/// keys there are, as serde's `deny_unknown_fields` does inside the tables.
fn check_top_level_keys(table: &toml::Table) -> Result<()> {
    let keys: Vec<&str> = GeneralSettings::KEYS
        .iter()
        .chain(RunSettings::KEYS)
        .chain(RetrievalSettings::KEYS)
        .filter(|k| k.in_file())
        .map(|k| k.name)
        .chain(TABLES.iter().copied())
        .collect();
    match table.keys().find(|key| !keys.contains(&key.as_str())) {
        None => Ok(()),
        Some(key) => Err(ConfigError::Invalid(format!("unknown field `{key}`, expected one of {}", keys.join(", ")))),
    }
}

/// The strategy name within two edits of `name`, for "did you mean".
pub fn closest_strategy(name: &str) -> Option<&'static str> {
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
                mode: Some(RemoteMode::Text),
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
        assert_eq!(c.remote.mode, Some(RemoteMode::Text));
        assert!(Config::from_toml("[remote]\nmode = \"fuzzy\"").is_err());
        assert!(Config::from_toml("[remote]\ntimeout_secs = 0.0").is_err());
        assert!(Config::from_toml("[remote]\ntypesense_api_key = \"k\"").is_err(), "keys never go in the file");
        // An environment variable set to nothing leaves the file's value.
        c.apply(&Overrides {
            remote: RemoteOverrides { collection: Some("  ".into()), ..Default::default() },
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.remote.collection, "c1");
    }

    use super::*;

    /// The annotated example in `docs/configuration.md` is a valid configuration: every key it
    /// shows exists, with a value in range (strategy options included).
    #[test]
    fn the_documented_example_is_a_valid_configuration() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
        let doc = std::fs::read_to_string(path).expect("docs/configuration.md");
        let start = doc.find("```toml\n").expect("a TOML example") + "```toml\n".len();
        let end = start + doc[start..].find("```").expect("its end");
        let config = Config::from_toml(&doc[start..end]).unwrap_or_else(|e| panic!("the documented example: {e}"));
        assert_eq!(config.serve.max_concurrency, 8);
        assert_eq!(config.remote.mode, Some(RemoteMode::Hybrid));
        assert!(config.strategies.contains_key("toqd"));
    }

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

    /// `--base-url` keeps how the configured OpenAI backend is talked to (timeouts, retries), not
    /// what belongs to its server (key, headers); the timeout flags apply to whichever is in use.
    #[test]
    fn base_url_keeps_timeouts_and_retries_and_flags_override_them() {
        let mut c = Config::from_toml(
            "llm = \"srv\"\n[llms.srv]\nkind = \"openai\"\nbase_url = \"http://a:1/v1\"\nmodel = \"m\"\n\
             timeout_secs = 7.5\nmax_retries = 1\napi_key_env = \"SRV_KEY\"\nheaders = { x-tenant = \"t\" }",
        )
        .expect("valid");
        let url = |u: &str| Overrides {
            model: ModelOverrides { base_url: Some(u.into()), ..Default::default() },
            ..Default::default()
        };
        c.apply(&url("http://b:2/v1")).expect("apply");
        let LlmConfig::Openai(cfg) = c.llm_config() else { panic!("openai expected") };
        assert_eq!((cfg.base_url.as_str(), cfg.timeout_secs, cfg.max_retries), ("http://b:2/v1", 7.5, 1));
        assert!(cfg.headers.is_empty() && cfg.api_key_env.as_deref() != Some("SRV_KEY"), "{cfg:?}");

        let model = |m: ModelOverrides| Overrides { model: m, ..Default::default() };
        let o = model(ModelOverrides { llm_timeout_secs: Some(2.0), llm_max_retries: Some(0), ..Default::default() });
        c.apply(&o).expect("apply");
        let LlmConfig::Openai(cfg) = c.llm_config() else { panic!("openai expected") };
        assert_eq!((cfg.timeout_secs, cfg.max_retries), (2.0, 0));
        for bad in [
            model(ModelOverrides { llm_timeout_secs: Some(0.0), ..Default::default() }),
            model(ModelOverrides { llm_timeout_secs: Some(f64::NAN), ..Default::default() }),
            model(ModelOverrides { llm_max_retries: Some(1_000_000), ..Default::default() }),
        ] {
            assert!(c.clone().apply(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn numbers_are_bounded_with_named_errors() {
        let huge = 2_305_843_009_213_693_952usize;
        let err = ServeConfig::default()
            .apply(&ServeOverrides { max_concurrency: Some(huge), ..Default::default() })
            .expect_err("absurd concurrency");
        assert!(err.to_string().contains("serve.max_concurrency"), "{err}");
        for toml in [
            "[serve]\nmax_concurrency = 2305843009213693952",
            "[serve]\ntimeout_secs = 18446744073709551615",
            "[serve]\nmax_connections = 0",
            "[serve]\nmax_connections_per_peer = 0",
            "[budget]\nmax_llm_calls = 0",
            "[budget]\nmax_tokens = 0",
            "[serve]\nread_timeout_secs = 0",
            "[serve]\nmax_body_bytes = 9223372036854775807",
            "[llms.x]\nkind = \"openai\"\nmodel = \"m\"\nmax_in_flight = 2305843009213693952",
        ] {
            assert!(Config::from_toml(toml).is_err(), "{toml}");
        }
        let ok = Config::from_toml("[serve]\nmax_connections = 64\nread_timeout_secs = 3").expect("in range");
        assert_eq!((ok.serve.max_connections, ok.serve.read_timeout_secs), (64, 3));
    }

    #[test]
    fn the_configured_token_is_trimmed() {
        std::env::set_var("HOPWISE_TEST_TOKEN_WITH_NEWLINE", "s3cret-token\n");
        let serve = ServeConfig { token_env: Some("HOPWISE_TEST_TOKEN_WITH_NEWLINE".into()), ..Default::default() };
        assert_eq!(serve.token().expect("set").as_deref(), Some("s3cret-token"));
    }

    #[test]
    fn defaults_use_the_local_model() {
        let c = Config::default();
        assert!(matches!(c.llm_config(), LlmConfig::Local { model, .. } if model == "qwen2.5-1.5b"));
        assert_eq!(c.run.strategy, "toqd");
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
            [strategies.toqd-paper]
            critique = false
            [prompts]
            toqd_self_verify = "Q: {question}"
            "#,
        )
        .expect("valid");
        assert!(matches!(c.llm_config(), LlmConfig::Openai(OpenAiConfig { model, .. }) if model == "qwen"));
        assert_eq!(c.budget.r_max, 2);
        assert_eq!(c.strategy_options("toqd-paper").0.get("critique"), Some(&serde_json::Value::Bool(false)));
        assert_eq!(c.retrieval.query_rewrite, None);
        assert!(c.prompts().expect("prompts").template("toqd_self_verify") == Some("Q: {question}"));
        c.apply(&Overrides {
            model: ModelOverrides { model: Some("other".into()), ..Default::default() },
            run: RunOverrides { k: Some(7), ..Default::default() },
            ..Default::default()
        })
        .expect("apply");
        assert!(matches!(c.llm_config(), LlmConfig::Openai(OpenAiConfig { model, .. }) if model == "other"));
        assert_eq!(c.run.k, 7);
        assert_eq!(c.general.retriever, RetrieverKind::Bm25);
        let o = Overrides {
            general: GeneralOverrides { retriever: Some(RetrieverKind::Hybrid), ..Default::default() },
            retrieval: RetrievalOverrides { dedup: Some(true), query_rewrite: Some(RewriteMethod::MultiQuery) },
            ..Default::default()
        };
        c.apply(&o).expect("apply");
        assert!(c.general.retriever == RetrieverKind::Hybrid && c.retrieval.dedup);
        assert_eq!(c.retrieval.query_rewrite, Some(RewriteMethod::MultiQuery));
        assert_eq!(parse_rewrite_method("hyde"), Ok(RewriteMethod::Hyde));
        assert_eq!("dense".parse::<RetrieverKind>().unwrap(), RetrieverKind::Dense);
        let err = "vector".parse::<RetrieverKind>().expect_err("unknown");
        assert!(err.to_string().contains("bm25, dense, hybrid, typesense, milvus, opensearch"), "{err}");
        let err = parse_rewrite_method("magic").expect_err("unknown");
        assert!(err.contains("hyde, multi-query, sub-question"), "{err}");
        c.general.retriever = RetrieverKind::Hybrid;
        let url = Overrides {
            model: ModelOverrides { base_url: Some("http://127.0.0.1:9/v1".into()), ..Default::default() },
            ..Default::default()
        };
        c.apply(&url).expect("apply");
        assert!(
            matches!(c.llm_config(), LlmConfig::Openai(OpenAiConfig { base_url, .. }) if base_url.ends_with(":9/v1"))
        );
    }

    /// What `hopwise config` prints is a configuration file that loads to the same values.
    #[test]
    fn the_printed_configuration_reads_back() {
        let mut c = Config::from_toml("k = 3\nquery_rewrite = \"hyde\"\n[budget]\nmax_seconds = 30.0").expect("valid");
        c.retrieval.dedup = true;
        let printed = toml::to_string(&c).expect("serialise");
        assert_eq!(Config::from_toml(&printed).expect("reads back"), c, "{printed}");
    }

    #[test]
    fn mistakes_are_reported() {
        let err = Config::from_toml("strategi = \"toqd\"").expect_err("unknown key");
        assert!(err.to_string().contains("unknown field `strategi`, expected one of home, llm"), "{err}");
        assert!(Config::from_toml("[budget]\nr_maxx = 1").is_err(), "unknown key in a table");
        assert!(Config::from_toml("[budget]\nmax_seconds = -1.0").is_err());
        let err = Config::from_toml("k = 5\n[serve]\nbind = 3").expect_err("wrong type");
        assert!(err.to_string().contains("line 3"), "points at the line: {err}");
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
        let nope = Overrides {
            run: RunOverrides { strategy: Some("nope".into()), ..Default::default() },
            ..Default::default()
        };
        let err = c.apply(&nope).expect_err("flag");
        assert!(matches!(err, ConfigError::UnknownStrategy(_)), "{err}");
        assert!(Config::from_toml("[strategies.hgot]\nsamples = 3").is_ok());
    }

    /// A flag reaches its config field typed, through the declaration's clap argument.
    #[test]
    fn flags_parse_into_typed_overrides() {
        use clap::{Args, FromArgMatches};
        let serve = ServeOverrides::augment_args(clap::Command::new("serve").no_binary_name(true));
        let matches = serve.clone().try_get_matches_from(["--max-concurrency", "5", "--bind", "0.0.0.0:1"]).unwrap();
        let mut config = ServeConfig::default();
        config.apply(&ServeOverrides::from_arg_matches(&matches).unwrap()).unwrap();
        assert_eq!((config.max_concurrency, config.bind.as_str()), (5, "0.0.0.0:1"));
        assert_eq!(config.timeout_secs, ServeConfig::default().timeout_secs);
        let err = serve.try_get_matches_from(["--max-concurrency", "many"]).expect_err("not a number");
        assert!(err.to_string().contains("max-concurrency"), "{err}");

        let remote = RemoteOverrides::augment_args(clap::Command::new("remote").no_binary_name(true));
        let matches = remote.clone().try_get_matches_from(["--remote-mode", "vector"]).unwrap();
        assert_eq!(RemoteOverrides::from_arg_matches(&matches).unwrap().mode, Some(RemoteMode::Vector));
        let err = remote.try_get_matches_from(["--remote-mode", "fuzzy"]).expect_err("unknown mode");
        assert!(err.to_string().contains("text, vector, hybrid"), "{err}");
        // File-only settings have no flag.
        let remote = RemoteOverrides::augment_args(clap::Command::new("remote").no_binary_name(true));
        assert!(remote.try_get_matches_from(["--timeout-secs", "3"]).is_err());
    }
}
