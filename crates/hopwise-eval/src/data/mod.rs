//! Named datasets: `hopwise data fetch hotpotqa` downloads a release (pinned sha256 and size),
//! converts it to the normalised JSONL and caches it under `$HOPWISE_HOME/data/<name>/`, where
//! `--dataset hotpotqa` then finds it.
//!
//! - [`registry`]: which datasets exist, their files, URLs and pins (`registry.toml`).
//! - [`download`]: one file, streamed, hashed, kept only when complete and verified.
//! - [`convert`]: each release format to the normalised schema and a pooled corpus.
//! - [`fetch`]: the whole fetch of one dataset; [`cache`]: the cache layout and name resolution.

pub mod cache;
pub mod convert;
pub mod download;
pub mod fetch;
pub mod registry;

pub use cache::{resolve_dataset, Manifest};
pub use fetch::{fetch, FetchEvent, FetchOptions, FetchOutcome};
pub use registry::{Entry, Registry};
