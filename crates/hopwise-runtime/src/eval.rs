//! An evaluation run assembled from configuration, the same for `hopwise eval` and Python's
//! `hopwise.evaluate`: datasets resolved by name or file, every strategy's options checked before a
//! model loads, the run fingerprinted (model, retriever, settings, prompts), and the jobs run by
//! [`hopwise_eval::run_eval`] through this crate's [`Runtime`](hopwise_reason::Runtime).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use hopwise_config::{Config, RetrieverKind};
use hopwise_core::Retriever;
use hopwise_eval::data::{self, Registry};
use hopwise_eval::{run_eval, EvalConfig, ExampleContextRetriever, Job, ProgressSink, RunOutcome};

use crate::Needs;

/// The evaluation data directory, where bare dataset names are looked up first.
pub const DATA_DIR_ENV: &str = "HOPWISE_DATA";
/// A registry file replacing the built-in one (`--registry` of `hopwise data`).
pub const REGISTRY_ENV: &str = "HOPWISE_DATA_REGISTRY";

/// Resolves dataset arguments: files stay files, names find their file (see
/// [`hopwise_eval::data::resolve_dataset`]).
pub fn resolve_datasets(config: &Config, args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let registry = Registry::load(std::env::var_os(REGISTRY_ENV).map(PathBuf::from).as_deref())?;
    let data_dir = std::env::var_os(DATA_DIR_ENV).map(PathBuf::from);
    let home = config.home_dir();
    args.iter().map(|a| data::resolve_dataset(a, &home, data_dir.as_deref(), &registry).map_err(Into::into)).collect()
}

/// What to evaluate and how.
#[derive(Debug, Clone, Default)]
pub struct EvalPlan {
    /// Dataset files or names (`hotpotqa`, …).
    pub datasets: Vec<PathBuf>,
    pub strategies: Vec<String>,
    /// The results folder: created, or resumed.
    pub out: PathBuf,
    /// Examples skipped first, then at most `limit` run.
    pub skip: usize,
    pub limit: Option<usize>,
    /// Questions answered at once.
    pub concurrency: usize,
    /// Options for every strategy, laid over `[strategies.NAME]`.
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Each example's own paragraphs are its corpus (no index).
    pub context: bool,
    /// Cache model calls on disk, so an interrupted run never pays twice.
    pub cache: bool,
    /// Jobs not started when this runs out are left for the next run.
    pub time_budget: Option<Duration>,
    /// Progress output on stderr while the model loads.
    pub progress: bool,
}

/// Runs `plan` with the backends `config` names; finished jobs found in `plan.out` are kept.
pub async fn evaluate(mut config: Config, plan: &EvalPlan, progress: &dyn ProgressSink) -> Result<RunOutcome> {
    let mut strategy_options = BTreeMap::new();
    for s in &plan.strategies {
        let options = config.strategy_options(s).overlaid(&plan.options);
        hopwise_reason::strategy::build(s, &options)?;
        strategy_options.insert(s.clone(), options);
    }
    // Before any model loads, so a dataset name that is not fetched fails fast.
    let datasets = resolve_datasets(&config, &plan.datasets)?;
    // Recorded in the run's fingerprint as configured, whether or not it applies (below).
    let rewrite_setting = config.retrieval.query_rewrite.map(|m| m.name());
    if plan.context {
        // An example's own paragraphs are searched as they are: the configured query rewriting
        // applies to the index retriever only.
        config.retrieval.query_rewrite = None;
    }
    let needs = Needs {
        retriever: !plan.context,
        cache: plan.cache,
        progress: plan.progress,
        ..Needs::for_strategies(plan.strategies.iter().map(String::as_str))?
    };
    let runtime = Arc::new(crate::build(&config, &needs).await?);

    let mut eval = EvalConfig::new(datasets, plan.strategies.clone(), plan.out.clone());
    eval.skip = plan.skip;
    eval.limit = plan.limit;
    eval.concurrency = plan.concurrency.max(1);
    eval.k = config.run.k;
    eval.model = runtime.llm().identity();
    eval.retriever = Some(if plan.context {
        "example-context".to_string()
    } else if config.general.retriever == RetrieverKind::Bm25 {
        // What was indexed, not where: a committed run resumes on any machine that indexed the same corpus.
        hopwise_index::Bm25Retriever::open(&config.index_dir())?.content_identity()?
    } else {
        format!("{}:{}", config.general.retriever, config.index_dir().display())
    });
    if let Some(rewrite) = rewrite_setting {
        eval.settings.insert("query_rewrite".into(), rewrite.into());
    }
    if config.retrieval.dedup {
        eval.settings.insert("dedup".into(), true.into());
    }
    if let Some(e) = runtime.embedder() {
        eval.settings.insert("embedder".into(), e.model_id().into());
    }
    eval.prompts = (**runtime.prompts()).clone();
    eval.strategy_options = strategy_options;
    eval.time_budget = plan.time_budget;
    eval.settings.insert("budget".into(), serde_json::to_value(config.budget.budget())?);

    let context = plan.context;
    let factory =
        Arc::new(move |job: &Job, rec: hopwise_core::Recorder| -> hopwise_eval::Result<hopwise_reason::Ctx> {
            let base: Option<Arc<dyn Retriever>> =
                if context { Some(Arc::new(ExampleContextRetriever::new(&job.example))) } else { None };
            Ok(runtime.context(rec, base))
        });
    Ok(run_eval(&eval, factory, progress).await?)
}

/// The outcome as the CLI's `--json` and the Python package report it: the job counts, each failed
/// job with its reason, and the summary table (one row per dataset and strategy).
pub fn outcome_json(outcome: &RunOutcome) -> serde_json::Value {
    let failures: Vec<serde_json::Value> = outcome
        .failed
        .iter()
        .map(|j| serde_json::json!({"dataset": j.dataset, "id": j.id, "strategy": j.strategy, "error": j.error}))
        .collect();
    serde_json::json!({
        "total": outcome.total,
        "resumed": outcome.resumed,
        "ran": outcome.ran,
        "failed": outcome.failed.len(),
        "failures": failures,
        "not_started": outcome.not_started,
        "skipped": outcome.skipped.len(),
        "summary": outcome.summary,
    })
}
