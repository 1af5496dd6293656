//! What every handler shares: the backends, the defaults a request starts from, the limits, the
//! metrics, and the concurrency permits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hopwise_core::{Llm, Prompts, Retriever};
use hopwise_reason::{Budget, StrategyOptions};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Result, ServeError};
use crate::metrics::Metrics;

/// Operational limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Questions answered at once; more get 503 + `Retry-After`.
    pub max_concurrency: usize,
    /// Wall-clock limit per question (504 when exceeded).
    pub timeout: Duration,
    /// Largest accepted request body (413 above).
    pub max_body_bytes: usize,
    /// The `Retry-After` sent with 503.
    pub retry_after_secs: u64,
    /// Connections open at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// Headers, and then the body, must each arrive within this (the connection is closed; 408).
    pub read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrency: 8,
            timeout: Duration::from_secs(300),
            max_body_bytes: 64 * 1024,
            retry_after_secs: 1,
            max_connections: 512,
            read_timeout: Duration::from_secs(10),
        }
    }
}

/// What a request starts from before its own fields apply.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub strategy: String,
    /// Per-strategy options from configuration; a request's `options` are laid over them.
    pub options: BTreeMap<String, StrategyOptions>,
    /// The ceiling for every request: a request may lower these, never raise them.
    pub budget: Budget,
    pub k: usize,
}

impl Default for Defaults {
    fn default() -> Self {
        Self { strategy: "toqd".into(), options: BTreeMap::new(), budget: Budget::default(), k: 5 }
    }
}

pub(crate) struct Inner {
    pub llm: Arc<dyn Llm>,
    pub retriever: Option<Arc<dyn Retriever>>,
    pub prompts: Arc<Prompts>,
    pub defaults: Defaults,
    pub limits: Limits,
    pub token: Option<String>,
    pub metrics: Metrics,
    pub permits: Arc<Semaphore>,
}

/// The server's shared state. Cheap to clone.
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

impl AppState {
    pub fn builder(llm: Arc<dyn Llm>) -> AppStateBuilder {
        AppStateBuilder {
            llm,
            retriever: None,
            prompts: Arc::new(Prompts::default()),
            defaults: Defaults::default(),
            limits: Limits::default(),
            token: None,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// A slot for one question, or 503 when all are taken. Held until the work ends or is cancelled.
    pub(crate) fn permit(&self) -> Result<OwnedSemaphorePermit> {
        self.0.permits.clone().try_acquire_owned().map_err(|_| {
            self.0.metrics.rejected_busy();
            ServeError::Busy { limit: self.0.limits.max_concurrency, retry_after_secs: self.0.limits.retry_after_secs }
        })
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.0.limits.max_concurrency.saturating_sub(self.0.permits.available_permits())
    }
}

pub struct AppStateBuilder {
    llm: Arc<dyn Llm>,
    retriever: Option<Arc<dyn Retriever>>,
    prompts: Arc<Prompts>,
    defaults: Defaults,
    limits: Limits,
    token: Option<String>,
}

impl AppStateBuilder {
    pub fn retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.retriever = retriever;
        self
    }

    pub fn prompts(mut self, prompts: Arc<Prompts>) -> Self {
        self.prompts = prompts;
        self
    }

    pub fn defaults(mut self, defaults: Defaults) -> Self {
        self.defaults = defaults;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Requires `Authorization: Bearer <token>` on every route but `/healthz` and the page's assets.
    /// Surrounding whitespace is not part of the token (clients never send a trailing newline).
    pub fn token(mut self, token: Option<String>) -> Self {
        self.token = token.map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
        self
    }

    /// Limits out of range are brought into it: a semaphore cannot hold more than
    /// `Semaphore::MAX_PERMITS`, and a zero would refuse everything.
    pub fn build(self) -> AppState {
        let mut limits = self.limits;
        limits.max_concurrency = limits.max_concurrency.clamp(1, Semaphore::MAX_PERMITS);
        limits.max_connections = limits.max_connections.clamp(1, u32::MAX as usize);
        limits.read_timeout = limits.read_timeout.max(Duration::from_millis(1));
        AppState(Arc::new(Inner {
            permits: Arc::new(Semaphore::new(limits.max_concurrency)),
            llm: self.llm,
            retriever: self.retriever,
            prompts: self.prompts,
            defaults: self.defaults,
            limits,
            token: self.token,
            metrics: Metrics::default(),
        }))
    }
}
