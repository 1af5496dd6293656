//! Where hopwise keeps its data (models, indexes, caches) when no directory is configured.

use std::path::PathBuf;

/// `$HOPWISE_HOME`, else `$HOME/.cache/hopwise`, else `./.hopwise` (a process without a home).
pub fn default_home() -> PathBuf {
    if let Some(h) = std::env::var_os("HOPWISE_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => PathBuf::from(home).join(".cache").join("hopwise"),
        None => PathBuf::from(".hopwise"),
    }
}
