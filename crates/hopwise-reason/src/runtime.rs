//! The runtime: live backends plus the defaults every question starts from, handing out one
//! [`Ctx`] per question. The CLI (`ask`, `eval`, `retrieval-eval`) and the server all answer through
//! it, so a question runs the same way whichever door it came in by.
//!
//! What is per question lives in the context: the metered model, and the retriever wrapped by the
//! configured [`RetrieverWrap`] (query rewriting calls that question's model; de-duplication
//! remembers that question's passages).

use std::collections::BTreeMap;
use std::sync::Arc;

use hopwise_core::{Embedder, Event, GenParams, Llm, MeteredModel, Nli, Prompts, Recorder, Retriever, Trace};
use tokio::sync::mpsc::UnboundedSender;

use crate::ctx::{Budget, Ctx};
use crate::error::{ReasonError, Result};
use crate::strategy::{self, Strategy, StrategyOptions};

/// Wraps a question's base retriever around that question's model (query rewriting, de-duplication).
pub type RetrieverWrap = Arc<dyn Fn(Arc<dyn Retriever>, Arc<dyn MeteredModel>) -> Arc<dyn Retriever> + Send + Sync>;

/// What a question starts from before its own request applies.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub strategy: String,
    /// Per-strategy options from configuration; a request's options are laid over them.
    pub options: BTreeMap<String, StrategyOptions>,
    /// The ceiling for every request: a request may lower these, never raise them.
    pub budget: Budget,
    pub k: usize,
    /// Sampling defaults for single-answer calls.
    pub params: GenParams,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            strategy: "toqd".into(),
            options: BTreeMap::new(),
            budget: Budget::default(),
            k: 5,
            params: GenParams::default(),
        }
    }
}

/// One question as asked: everything but the question may be left to the defaults.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub question: String,
    pub strategy: Option<String>,
    /// Options laid over the configured ones.
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Run the strategy's retrieval-free mode.
    pub no_retrieval: bool,
    /// Passages per retrieval round (1..=100).
    pub k: Option<usize>,
    /// Budgets: they lower the defaults, never raise them.
    pub r_max: Option<u32>,
    pub max_depth: Option<u32>,
    pub max_llm_calls: Option<u64>,
    /// Seconds and tokens the question may spend; past them it answers best-effort.
    pub max_seconds: Option<f64>,
    pub max_tokens: Option<u64>,
    /// The request came from a network client: its options may not name files on this machine
    /// (`StrategySpec::path_options`).
    pub from_network: bool,
}

/// A checked request: every input error has been reported before any work starts.
pub struct Prepared {
    pub name: String,
    pub question: String,
    strategy: Box<dyn Strategy>,
    budget: Budget,
    k: usize,
}

impl Prepared {
    pub fn strategy(&self) -> &dyn Strategy {
        self.strategy.as_ref()
    }
}

/// Shared backends and defaults. Cheap to share (`Arc`).
pub struct Runtime {
    llm: Arc<dyn Llm>,
    prompts: Arc<Prompts>,
    retriever: Option<Arc<dyn Retriever>>,
    wrap: Option<RetrieverWrap>,
    embedder: Option<Arc<dyn Embedder>>,
    nli: Option<Arc<dyn Nli>>,
    defaults: Defaults,
}

impl Runtime {
    pub fn new(llm: Arc<dyn Llm>, prompts: Arc<Prompts>) -> Self {
        Self { llm, prompts, retriever: None, wrap: None, embedder: None, nli: None, defaults: Defaults::default() }
    }

    pub fn with_retriever(mut self, retriever: Option<Arc<dyn Retriever>>) -> Self {
        self.retriever = retriever;
        self
    }

    /// Per-question wrapping of the retriever (query rewriting, de-duplication).
    pub fn with_retriever_wrap(mut self, wrap: Option<RetrieverWrap>) -> Self {
        self.wrap = wrap;
        self
    }

    pub fn with_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.embedder = embedder;
        self
    }

    pub fn with_nli(mut self, nli: Option<Arc<dyn Nli>>) -> Self {
        self.nli = nli;
        self
    }

    pub fn with_defaults(mut self, defaults: Defaults) -> Self {
        self.defaults = defaults;
        self
    }

    pub fn llm(&self) -> &Arc<dyn Llm> {
        &self.llm
    }

    pub fn prompts(&self) -> &Arc<Prompts> {
        &self.prompts
    }

    pub fn defaults(&self) -> &Defaults {
        &self.defaults
    }

    pub fn has_retriever(&self) -> bool {
        self.retriever.is_some()
    }

    /// The shared retriever as opened, without the per-question wrapping.
    pub fn retriever(&self) -> Option<Arc<dyn Retriever>> {
        self.retriever.clone()
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    /// The configured options of `strategy` with `overlay` laid over them.
    pub fn options_for(&self, strategy: &str, overlay: &serde_json::Map<String, serde_json::Value>) -> StrategyOptions {
        self.defaults.options.get(strategy).cloned().unwrap_or_default().overlaid(overlay)
    }

    /// Checks a request and builds its strategy.
    pub fn prepare(&self, req: Request) -> Result<Prepared> {
        let question = req.question.trim().to_string();
        if question.is_empty() {
            return Err(ReasonError::EmptyQuestion);
        }
        let requested =
            req.strategy.as_deref().map(str::trim).filter(|n| !n.is_empty()).unwrap_or(&self.defaults.strategy);
        let name = strategy::resolve(requested, req.no_retrieval)?;
        let row = strategy::spec(&name)?;
        if req.from_network {
            if let Some(option) = req.options.keys().find(|k| row.path_options.contains(&k.as_str())) {
                return Err(ReasonError::ServerPathOption { strategy: name, option: option.clone() });
            }
        }
        let strategy = row.build(&self.options_for(&name, &req.options))?;
        if row.needs_retriever && self.retriever.is_none() {
            return Err(ReasonError::NeedsRetriever(name));
        }
        let k = req.k.unwrap_or(self.defaults.k);
        if !(1..=100).contains(&k) {
            return Err(ReasonError::InvalidOption(format!("k = {k} must be between 1 and 100")));
        }
        if let Some(seconds) = req.max_seconds.filter(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(ReasonError::InvalidOption(format!("max_seconds = {seconds} must be a positive number")));
        }
        // A zero budget could only end the question before its first call.
        for (name, value) in [("max_llm_calls", req.max_llm_calls), ("max_tokens", req.max_tokens)] {
            if value == Some(0) {
                return Err(ReasonError::InvalidOption(format!("{name} = 0 must be at least 1")));
            }
        }
        let ceiling = &self.defaults.budget;
        let requested = Budget {
            r_max: req.r_max.unwrap_or(ceiling.r_max),
            max_depth: req.max_depth.unwrap_or(ceiling.max_depth),
            max_llm_calls: req.max_llm_calls.unwrap_or(ceiling.max_llm_calls),
            max_seconds: req.max_seconds,
            max_tokens: req.max_tokens,
        };
        let budget = requested.min(ceiling);
        Ok(Prepared { name, question, strategy, budget, k })
    }

    /// The context for a prepared question, recording into `rec`.
    pub fn context_for(&self, prepared: &Prepared, rec: Recorder) -> Ctx {
        self.build(rec, self.retriever.clone(), prepared.budget.clone(), prepared.k)
    }

    /// A context with the defaults' budget and `k`. `base` replaces the configured retriever for this
    /// question (an evaluation example's own paragraphs); the configured wrapping still applies.
    pub fn context(&self, rec: Recorder, base: Option<Arc<dyn Retriever>>) -> Ctx {
        let base = base.or_else(|| self.retriever.clone());
        self.build(rec, base, self.defaults.budget.clone(), self.defaults.k)
    }

    fn build(&self, rec: Recorder, base: Option<Arc<dyn Retriever>>, budget: Budget, k: usize) -> Ctx {
        let ctx = Ctx::new(self.llm.clone(), self.prompts.clone(), rec)
            .with_budget(budget)
            .with_k(k)
            .with_params(self.defaults.params.clone())
            .with_embedder(self.embedder.clone())
            .with_nli(self.nli.clone());
        let retriever = match (base, &self.wrap) {
            (Some(base), Some(wrap)) => Some(wrap(base, ctx.model())),
            (base, _) => base,
        };
        ctx.with_retriever(retriever)
    }

    /// Answers a prepared question; `listener` receives every trace event as it is recorded.
    pub async fn answer(&self, prepared: &Prepared, listener: Option<UnboundedSender<Event>>) -> Result<Trace> {
        let mut rec = Recorder::new(&prepared.question, &prepared.name);
        if let Some(tx) = listener {
            rec = rec.with_listener(tx);
        }
        let ctx = self.context_for(prepared, rec);
        strategy::run(prepared.strategy(), &ctx, &prepared.question).await
    }
}
