//! Shared vocabulary of hopwise: the backend traits every strategy talks to, the one trace type every
//! strategy writes, the prompt templates, and small text utilities.
//!
//! Nothing here does I/O of its own (except [`test_skips`], the record of a test that could not run); backends live in `hopwise-models` and `hopwise-index`, strategies in
//! `hopwise-reason`.

pub mod error;
pub mod grammars;
pub mod graph_text;
pub mod home;
pub mod llm;
pub mod nli;
pub mod progress;
pub mod prompts;
pub mod retrieval;
pub mod scripted;
pub mod test_skips;
pub mod text;
pub mod trace;
#[cfg(feature = "schema")]
pub mod trace_schema;

pub use error::{BackendErrorKind, Error, Result};
pub use home::default_home;
pub use llm::{
    CallTiming, ChatMessage, ChatRequest, ChatResponse, Completion, GenParams, Llm, MeteredModel, Role, Usage,
};
pub use nli::{Nli, NliLabel, NliVerdict};
pub use prompts::{Prompts, Protocol};
pub use retrieval::{Embedder, Passage, Retriever, RewriteMethod};
pub use trace::{Decision, Event, EventKind, GraphEdge, NodeId, NodeTrace, Recorder, Repair, Stats, Trace};
