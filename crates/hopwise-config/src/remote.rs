//! The `[remote]` section: where the remote retrieval engines are and how to use them. Each setting
//! is declared once below. Secrets are never read from the file: it names the environment variable
//! holding them (`*_env`); a key given by flag or `HOPWISE_*` variable overrides that and is never
//! serialised.

use serde::{Deserialize, Serialize};

use crate::settings::{section, FlagValue};
use crate::{ConfigError, Result};

/// How a remote engine answers (`[remote] mode`, `--remote-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum RemoteMode {
    /// The engine's text ranking.
    Text,
    /// Nearest neighbours of the query's embedding.
    Vector,
    /// Both, fused by reciprocal rank.
    Hybrid,
}

impl FlagValue for RemoteMode {}

section! {
    /// The `[remote]` section (`retriever = "typesense" | "milvus" | "opensearch"`).
    #[serde(default, deny_unknown_fields)]
    pub struct RemoteConfig / RemoteOverrides {
        /// Typesense server, e.g. http://127.0.0.1:8108.
        #[arg(long, global = true, env = "HOPWISE_TYPESENSE_URL", value_name = "URL")]
        typesense_url: Option<String> => String = None,
        /// The NAME of the variable holding the Typesense API key.
        #[arg(skip)]
        typesense_api_key_env: Option<String> => String = None,
        /// Typesense API key (prefer the environment variable: flags show in process lists).
        #[serde(skip)]
        #[arg(long, global = true, env = "HOPWISE_TYPESENSE_API_KEY", hide_env_values = true, value_name = "KEY")]
        typesense_api_key: Option<String> => String = None,
        /// Milvus server (its REST API), e.g. http://127.0.0.1:19530.
        #[arg(long, global = true, env = "HOPWISE_MILVUS_URL", value_name = "URL")]
        milvus_url: Option<String> => String = None,
        /// The NAME of the variable holding the Milvus token.
        #[arg(skip)]
        milvus_token_env: Option<String> => String = None,
        /// Milvus token (`user:password` or an API key).
        #[serde(skip)]
        #[arg(long, global = true, env = "HOPWISE_MILVUS_TOKEN", hide_env_values = true, value_name = "TOKEN")]
        milvus_token: Option<String> => String = None,
        /// OpenSearch or Elasticsearch server, e.g. http://127.0.0.1:9200.
        #[arg(long, global = true, env = "HOPWISE_OPENSEARCH_URL", value_name = "URL")]
        opensearch_url: Option<String> => String = None,
        /// The NAME of the variable holding the whole OpenSearch `Authorization` header value.
        #[arg(skip)]
        opensearch_auth_env: Option<String> => String = None,
        /// The `Authorization` header value for OpenSearch/Elasticsearch (`Basic …`, `ApiKey …`).
        #[serde(skip)]
        #[arg(long, global = true, env = "HOPWISE_OPENSEARCH_AUTH", hide_env_values = true, value_name = "VALUE")]
        opensearch_auth: Option<String> => String = None,
        /// Collection (Typesense, Milvus) or index (OpenSearch) name.
        #[arg(long, global = true, env = "HOPWISE_REMOTE_COLLECTION", value_name = "NAME")]
        collection: String => String = "hopwise".into(),
        /// How a remote engine answers: text, vector or hybrid (default: hybrid; Milvus: vector).
        #[arg(long = "remote-mode", global = true, env = "HOPWISE_REMOTE_MODE", value_enum, value_name = "MODE")]
        mode: Option<RemoteMode> => RemoteMode = None,
        /// Seconds one HTTP attempt may take.
        #[arg(skip)]
        timeout_secs: f64 => f64 = 30.0,
        /// Retries on connection errors, timeouts, 429 and 5xx.
        #[arg(skip)]
        max_retries: u32 => u32 = 3,
    }
}

impl RemoteConfig {
    pub(crate) fn validate(&self) -> Result<()> {
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
