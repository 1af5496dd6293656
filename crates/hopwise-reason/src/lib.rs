//! Reasoning strategies and the shared parts they are composed from.
//!
//! - [`ctx`]: the per-question context every strategy receives (backends, prompts, budgets, recorder);
//!   its `chat` and `retrieve` methods meter every call into the trace.
//! - [`parse`]: deterministic parsers and repair rules for model output.
//! - [`executor`]: resolves a growing DAG of sub-questions, ready nodes concurrently.
//! - [`strategy`]: the `Strategy` trait and the registry of named strategies.
//! - [`toqd`]: Topology of Question Decomposition.
//! - [`baselines`]: Direct, CoT, CoT-SC, Retrieve-then-Read, Self-Ask, Least-to-Most, Plan-and-Solve.
//! - [`uar`]: uncertainty-gated dynamic retrieval and its baselines (always-retrieve, FLARE-instruct);
//!   [`uncertainty`] holds its estimators, [`nli_judge`] the LLM-as-judge NLI they can use.
//! - [`hgot`]: Hierarchical Graph of Thoughts (plans of dependent steps, citation-weighted voting,
//!   passage scores).

pub mod baselines;
pub mod ctx;
pub mod error;
pub mod executor;
pub mod gate;
pub mod hgot;
pub mod nli_judge;
pub mod parse;

pub mod strategy;
pub mod toqd;
pub mod uar;
pub mod uncertainty;

pub use ctx::{Budget, Ctx};
pub use error::ReasonError;
pub use strategy::{Strategy, StrategyOptions};
