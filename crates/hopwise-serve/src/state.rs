//! What every handler shares: the backends, the defaults a request starts from, the limits, the
//! metrics, and the concurrency permits.

use std::sync::Arc;
use std::time::Duration;

use hopwise_core::{Llm, Prompts, Retriever};
use hopwise_reason::Runtime;
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
    /// Connections open at once from one client address (behind a reverse proxy every client has
    /// the proxy's address: raise it to `max_connections` there).
    pub max_connections_per_peer: usize,
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
            max_connections_per_peer: 64,
            read_timeout: Duration::from_secs(10),
        }
    }
}

/// What a request starts from before its own fields apply (the runtime's defaults).
pub use hopwise_reason::runtime::Defaults;

pub(crate) struct Inner {
    /// The same runtime the CLI answers through.
    pub runtime: Runtime,
    pub limits: Limits,
    pub token: Option<String>,
    pub metrics: Metrics,
    pub permits: Arc<Semaphore>,
}

/// The server's shared state. Cheap to clone.
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

impl AppState {
    /// A state over `llm`; give the rest with the builder, or a whole [`Runtime`] with
    /// [`AppStateBuilder::runtime`].
    pub fn builder(llm: Arc<dyn Llm>) -> AppStateBuilder {
        AppStateBuilder {
            llm,
            retriever: None,
            prompts: Arc::new(Prompts::default()),
            defaults: Defaults::default(),
            runtime: None,
            limits: Limits::default(),
            token: None,
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.0.runtime
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
    runtime: Option<Runtime>,
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

    /// Answer through `runtime` (backends, prompts and defaults as the CLI built them); the
    /// builder's own model, retriever, prompts and defaults are then unused.
    pub fn runtime(mut self, runtime: Runtime) -> Self {
        self.runtime = Some(runtime);
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
        limits.max_connections_per_peer = limits.max_connections_per_peer.max(1);
        limits.read_timeout = limits.read_timeout.max(Duration::from_millis(1));
        let runtime = self.runtime.unwrap_or_else(|| {
            Runtime::new(self.llm, self.prompts).with_retriever(self.retriever).with_defaults(self.defaults)
        });
        AppState(Arc::new(Inner {
            permits: Arc::new(Semaphore::new(limits.max_concurrency)),
            runtime,
            limits,
            token: self.token,
            metrics: Metrics::default(),
        }))
    }
}
