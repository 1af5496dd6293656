//! Evaluation harness: dataset loaders, metrics, the concurrent resumable runner, reports and plots.
//!
//! - [`dataset`]: one [`Example`] shape for the normalised JSONL and the original formats.
//! - [`context`]: a BM25 retriever over one example's own paragraphs (distractor setting).
//! - [`metrics`]: cover-EM, EM, F1, ROUGE-L, FEVER label accuracy, Hits/MAP/MRR@K (pure functions).
//! - [`runner`]: [`run_eval`] runs datasets × strategies through a caller-given context factory,
//!   appending one fsync'd line per job to `results.jsonl` and resuming from it; [`lock`] keeps a
//!   second run out of a directory in use.
//! - [`summary`]: `summary.md` / `summary.json`, recomputed from `results.jsonl`.
//! - [`retrieval_eval`]: query-rewriting methods (native, HyDE, sub-question, multi-query, ToQD)
//!   scored by Hits/MAP/MRR@K against gold evidence.
//! - [`plots`]: accuracy vs retrieval rounds, per-type accuracy (PNG + SVG).
//! - [`bootstrap`], [`paired`]: 95 % bootstrap intervals and paired comparisons with rtr.
//! - [`compare`]: any two runs question by question, overall and per question type or gate
//!   decision (`hopwise compare`).
//! - [`report`]: regenerates EVALUATION.md's results section from `results/`, with the
//!   [`cost_plot`]s (accuracy against seconds and tokens, Pareto front).
//! - [`data`]: named datasets (`hopwise data fetch hotpotqa`): registry, verified download,
//!   conversion to the normalised JSONL, cache and `--dataset NAME` resolution.
//! - [`demo_pool`]: HGOT demonstration pools from solved examples outside the evaluated slice.

pub mod bootstrap;
pub mod compare;
pub mod config;
pub mod context;
pub mod cost_plot;
pub mod data;
pub mod dataset;
pub mod demo_pool;
pub mod error;
pub mod gate_eval;
pub mod gate_sweep;
pub mod lock;
pub mod metrics;
pub mod paired;
pub mod plots;
pub mod progress;
pub mod report;
pub mod results;
pub mod retrieval_eval;
pub mod runner;
pub mod summary;

pub use config::{check_run_dir, prompts_hash, EvalConfig, RunFingerprint};
pub use context::ExampleContextRetriever;
pub use dataset::{load_dataset, Dataset, Example, Task};
pub use error::{EvalError, Result};
pub use progress::{IndicatifProgress, NoProgress, ProgressSink, ProgressSnapshot};
pub use results::{read_results, ResultRecord, ResultsLog};
pub use retrieval_eval::{retrieval_eval, write_retrieval_report, QueryMethod, RetrievalEvalConfig, RetrievalReport};
pub use runner::{regenerate_reports, run_eval, CtxFactory, FailedJob, Job, RunOutcome};
pub use summary::{render_markdown, summarize, write_summary, Summary};
