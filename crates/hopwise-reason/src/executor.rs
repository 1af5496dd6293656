//! Graph executor.
