//! Parsers for model output.
