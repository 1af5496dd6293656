//! Reasoning strategies and the shared parts they are composed from.
//!
//! - [`ctx`]: the per-question context every strategy receives (backends, prompts, budgets, recorder);
//!   its `chat` and `retrieve` methods meter every call into the trace.
//! - [`meter`]: the per-question model handle every model call goes through (budget, breaker, trace).
//! - [`protocol`]: everything read from model text (answers, lists, edges, steps, citations, sentences), with its rules and repairs.
//! - [`executor`]: resolves a growing DAG of sub-questions, ready nodes concurrently.
//! - [`strategy`]: the `Strategy` trait and the one table of named strategies.
//! - [`runtime`]: shared backends and defaults handing out one context per question (CLI and server).
//! - [`toqd`]: Topology of Question Decomposition.
//! - [`baselines`]: Direct, CoT, CoT-SC, Retrieve-then-Read, Self-Ask, Least-to-Most, Plan-and-Solve.
//! - [`uar`]: uncertainty-gated dynamic retrieval and its baselines (always-retrieve, FLARE-instruct);
//!   [`uncertainty`] holds its estimators, [`nli_judge`] the LLM-as-judge NLI they can use.
//! - [`peers`]: the training-free multi-hop methods users compare with (IRCoT, Iter-RetGen, a search
//!   agent).
//! - [`hgot`]: Hierarchical Graph of Thoughts (plans of dependent steps, citation-weighted voting,
//!   passage scores).

pub mod baselines;
mod chain;
pub mod ctx;
pub mod details;
pub mod error;
pub mod executor;
pub mod gate;
pub mod hgot;
pub mod meter;
pub mod nli_judge;
pub mod peers;
pub mod protocol;
pub mod runtime;

pub mod strategy;
pub mod toqd;
pub mod uar;
pub mod uncertainty;
pub mod vote;

pub use ctx::{Budget, Ctx};
pub use error::ReasonError;
pub use meter::Meter;
pub use runtime::{Prepared, Request, Runtime};
pub use strategy::{Strategy, StrategyOptions};
