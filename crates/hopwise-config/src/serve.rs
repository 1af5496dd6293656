//! The `[serve]` section: where `hopwise serve` listens and the limits it keeps. Each setting is
//! declared once below; `HOPWISE_SERVE_*` variables and `hopwise serve` flags override the file.

use crate::settings::section;
use crate::{ConfigError, Result};

/// Upper bounds of the `[serve]` numbers: far above any sensible setting, low enough that no value
/// can overflow a timer or a semaphore.
pub const MAX_SERVE_CONCURRENCY: usize = 4096;
pub const MAX_SERVE_CONNECTIONS: usize = 65_536;
pub const MAX_SERVE_TIMEOUT_SECS: u64 = 86_400;
pub const MAX_SERVE_BODY_BYTES: usize = 64 * 1024 * 1024;
pub const MAX_SERVE_READ_TIMEOUT_SECS: u64 = 3_600;

section! {
    /// The `[serve]` section. Environment variables (`HOPWISE_SERVE_*`) and `hopwise serve` flags
    /// override it.
    #[serde(default, deny_unknown_fields)]
    pub struct ServeConfig / ServeOverrides {
        /// Address to listen on. Loopback by default: exposing the server is a deliberate choice.
        #[arg(long, env = "HOPWISE_SERVE_BIND", value_name = "ADDR")]
        bind: String => String = "127.0.0.1:8080".into(),
        /// The NAME of the environment variable holding the bearer token (never the token itself,
        /// so config files can be shared); requests must then send `Authorization: Bearer <token>`
        /// (`/healthz` stays open). No token: no authentication.
        #[arg(long, env = "HOPWISE_SERVE_TOKEN_ENV", value_name = "NAME")]
        token_env: Option<String> => String = None,
        /// Questions answered at once; further requests get 503 with `Retry-After`.
        #[arg(long, env = "HOPWISE_SERVE_MAX_CONCURRENCY", value_name = "N")]
        max_concurrency: usize => usize = 8,
        /// Seconds a question may take; after that the request gets 504.
        #[arg(long, env = "HOPWISE_SERVE_TIMEOUT_SECS", value_name = "SECS")]
        timeout_secs: u64 => u64 = 300,
        /// Largest accepted request body in bytes; larger ones get 413.
        #[arg(long, env = "HOPWISE_SERVE_MAX_BODY_BYTES", value_name = "BYTES")]
        max_body_bytes: usize => usize = 64 * 1024,
        /// Connections open at once; more are answered 503 and closed.
        #[arg(long, env = "HOPWISE_SERVE_MAX_CONNECTIONS", value_name = "N")]
        max_connections: usize => usize = 512,
        /// Connections open at once from one client address. Behind a reverse proxy every client
        /// has the proxy's address: set it to `max_connections` there.
        #[arg(long, env = "HOPWISE_SERVE_MAX_CONNECTIONS_PER_PEER", value_name = "N")]
        max_connections_per_peer: usize => usize = 64,
        /// Seconds a client has to send its request headers, and then its body: the connection is
        /// closed (slow headers) or answered 408 (slow body).
        #[arg(long, env = "HOPWISE_SERVE_READ_TIMEOUT_SECS", value_name = "SECS")]
        read_timeout_secs: u64 => u64 = 10,
    }
}

/// `value` must lie in `min..=max`; the error names the setting.
pub(crate) fn in_range<T: PartialOrd + std::fmt::Display>(name: &str, value: T, min: T, max: T) -> Result<()> {
    if value >= min && value <= max {
        Ok(())
    } else {
        Err(ConfigError::Invalid(format!("{name} = {value} must be between {min} and {max}")))
    }
}

impl ServeConfig {
    /// Applies `hopwise serve` flags (which also read the `HOPWISE_SERVE_*` variables), then checks.
    pub fn apply(&mut self, o: &ServeOverrides) -> Result<()> {
        self.merge(o);
        self.validate()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.bind.parse::<std::net::SocketAddr>().is_err() {
            return Err(ConfigError::Invalid(format!(
                "serve.bind = `{}` is not an address like 127.0.0.1:8080",
                self.bind
            )));
        }
        in_range("serve.max_concurrency", self.max_concurrency, 1, MAX_SERVE_CONCURRENCY)?;
        in_range("serve.timeout_secs", self.timeout_secs, 1, MAX_SERVE_TIMEOUT_SECS)?;
        in_range("serve.max_body_bytes", self.max_body_bytes, 256, MAX_SERVE_BODY_BYTES)?;
        in_range("serve.max_connections", self.max_connections, 1, MAX_SERVE_CONNECTIONS)?;
        in_range("serve.max_connections_per_peer", self.max_connections_per_peer, 1, MAX_SERVE_CONNECTIONS)?;
        in_range("serve.read_timeout_secs", self.read_timeout_secs, 1, MAX_SERVE_READ_TIMEOUT_SECS)?;
        if self.token_env.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ConfigError::Invalid("serve.token_env is empty; name an environment variable".into()));
        }
        Ok(())
    }

    /// The bearer token, read from the variable named by `token_env`, without surrounding
    /// whitespace (a value read from a file often ends in a newline, which no client sends). A named
    /// but unset variable is an error: starting without auth when auth was asked for would be worse
    /// than not starting.
    pub fn token(&self) -> Result<Option<String>> {
        let Some(name) = &self.token_env else { return Ok(None) };
        match std::env::var(name) {
            Ok(t) if !t.trim().is_empty() => Ok(Some(t.trim().to_string())),
            _ => Err(ConfigError::Invalid(format!(
                "serve.token_env names `{name}`, but that environment variable is unset or empty"
            ))),
        }
    }
}
