//! The one place every entry point gets its backends (`ask`, `eval`, `retrieval-eval` and `serve`
//! in the CLI): configuration in, a [`Runtime`] out, which hands each question its context (metered
//! model, wrapped retriever, embedder, budgets). What a command needs follows from the strategy
//! table.

pub mod backends;
pub mod eval;

use std::sync::Arc;

use anyhow::Result;
use hopwise_config::Config;
use hopwise_core::scripted::ScriptedLlm;
use hopwise_core::{Llm, MeteredModel, Retriever, RewriteMethod};
use hopwise_index::{DedupRetriever, RewriteRetriever};
use hopwise_models::{CacheMode, CachedLlm};
use hopwise_reason::runtime::{Defaults, RetrieverWrap};
use hopwise_reason::strategy::{self, STRATEGIES};
use hopwise_reason::Runtime;

/// What a command asks of the runtime.
#[derive(Debug, Clone, Default)]
pub struct Needs {
    /// Open the configured retriever (before the model, so a missing index fails fast).
    pub retriever: bool,
    /// Load the sentence embedder when it is installed (a strategy that uses one may run).
    pub embedder: bool,
    /// Cache model calls on disk (content-addressed, under the data directory).
    pub cache: bool,
    /// Apply the configured query rewriting and de-duplication to each question's retriever.
    pub wrap_retriever: bool,
    /// Load no model: every call would be a mistake (retrieval-eval's native queries).
    pub no_model: bool,
    /// Progress output on stderr (model loading).
    pub progress: bool,
}

impl Needs {
    /// What running `strategies` needs: a retriever when one of them retrieves, the embedder when
    /// one of them uses it.
    pub fn for_strategies<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self> {
        let mut needs = Needs { wrap_retriever: true, ..Needs::default() };
        for name in names {
            let row = strategy::spec(name)?;
            needs.retriever |= row.needs_retriever;
            needs.embedder |= row.uses_embedder;
        }
        Ok(needs)
    }

    /// A server may be asked for any strategy.
    pub fn for_any_strategy() -> Self {
        Needs {
            retriever: true,
            embedder: STRATEGIES.iter().any(|s| s.uses_embedder),
            wrap_retriever: true,
            ..Needs::default()
        }
    }
}

/// Builds the backends `needs` names from `config` and the defaults every question starts from.
pub async fn build(config: &Config, needs: &Needs) -> Result<Runtime> {
    let retriever = if needs.retriever { Some(backends::open_retriever(config).await?) } else { None };
    let llm: Arc<dyn Llm> = if needs.no_model {
        // A model nobody may call: the scripted fallback never answers a real prompt.
        Arc::new(ScriptedLlm::new())
    } else {
        let base = backends::build_llm(config, needs.progress).await?;
        if needs.cache {
            // Content-addressed: a finished run is recomputed offline and an interrupted one never pays twice.
            Arc::new(CachedLlm::new(base, config.home_dir().join("cache").join("llm"), CacheMode::ReadWrite))
        } else {
            base
        }
    };
    let embedder = if needs.embedder { backends::installed_embedder(config)? } else { None };
    let prompts = Arc::new(config.prompts()?);
    let wrap = if needs.wrap_retriever {
        retriever_wrap(config.retrieval.query_rewrite, config.retrieval.dedup, &prompts)
    } else {
        None
    };
    let defaults = Defaults {
        strategy: config.run.strategy.clone(),
        options: config.strategies.clone(),
        budget: config.budget.budget(),
        k: config.run.k,
        ..Defaults::default()
    };
    Ok(Runtime::new(llm, prompts)
        .with_retriever(retriever)
        .with_retriever_wrap(wrap)
        .with_embedder(embedder)
        .with_defaults(defaults))
}

/// Per question: the query rewriting (calling that question's model), then de-duplication across
/// that question's rounds.
fn retriever_wrap(
    rewrite: Option<RewriteMethod>,
    dedup: bool,
    prompts: &Arc<hopwise_core::Prompts>,
) -> Option<RetrieverWrap> {
    if rewrite.is_none() && !dedup {
        return None;
    }
    let prompts = prompts.clone();
    Some(Arc::new(move |base: Arc<dyn Retriever>, model: Arc<dyn MeteredModel>| {
        let rewritten: Arc<dyn Retriever> = match rewrite {
            Some(method) => Arc::new(RewriteRetriever::new(base, model, prompts.clone(), method)),
            None => base,
        };
        if dedup {
            Arc::new(DedupRetriever::new(rewritten))
        } else {
            rewritten
        }
    }))
}
