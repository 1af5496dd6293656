#!/usr/bin/env bash
# Runs the whole test suite. Fetches the small test model and the sentence embedder first (idempotent: a verified cached copy
# is reused), so it works on a fresh machine. Model tests use 1 inference thread and run serially.
set -euo pipefail
cd "$(dirname "$0")/.."
export HOPWISE_HOME="${HOPWISE_HOME:-$HOME/.cache/hopwise}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hopwise/target}"
export HOPWISE_THREADS=1

cargo build --workspace --all-targets --locked
cargo run -q -p hopwise --locked -- setup --fetch qwen2.5-0.5b --fetch all-minilm-l6-v2 --no-index
cargo test --workspace --locked -- --test-threads 2
# The HNSW graph is an opt-in feature of hopwise-index (it would otherwise change shared dependency
# features and force a llama.cpp rebuild); test it on its own.
cargo test -p hopwise-index --features hnsw --locked --test dense -- --test-threads 2
