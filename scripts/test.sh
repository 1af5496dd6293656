#!/usr/bin/env bash
# Runs the whole test suite. Fetches the small test model and the sentence embedder first (idempotent: a verified cached copy
# is reused), so it works on a fresh machine. Model tests use 1 inference thread and run serially.
set -euo pipefail
cd "$(dirname "$0")/.."
export HOPWISE_HOME="${HOPWISE_HOME:-$HOME/.cache/hopwise}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hopwise/target}"
export HOPWISE_THREADS=1
# Real-path tests whose server, model or browser is missing record why here (hopwise_core::test_skips);
# the run ends with one line counting them, whatever its outcome.
export HOPWISE_TEST_SKIPS="$CARGO_TARGET_DIR/test-skips.txt"
mkdir -p "$CARGO_TARGET_DIR"
: > "$HOPWISE_TEST_SKIPS"
skip_summary() {
  local n
  n=$(sort -u "$HOPWISE_TEST_SKIPS" | grep -c . || true)
  if [ "$n" = 0 ]; then
    echo "test.sh: every real-path test ran (none skipped)"
  else
    echo "test.sh: $n real-path test(s) skipped: $(sort -u "$HOPWISE_TEST_SKIPS" | paste -sd ';' | sed 's/;/; /g')"
  fi
}
trap skip_summary EXIT

cargo build --workspace --all-targets --locked
cargo run -q -p hopwise --locked -- setup --fetch qwen2.5-0.5b --fetch all-minilm-l6-v2 --no-index
cargo test --workspace --locked -- --test-threads 2
# The HNSW graph is an opt-in feature of hopwise-index (it would otherwise change shared dependency
# features and force a llama.cpp rebuild); test it on its own.
cargo test -p hopwise-index --features hnsw --locked --test dense -- --test-threads 2
# The Python package, built from this checkout (debug profile, sharing the target directory) into its
# own virtual environment, then its pytest suite; the parity test compares with this build's CLI.
venv="$HOPWISE_HOME/venv-python"
if [ ! -x "$venv/bin/pip" ]; then
  python3 -c 'import ensurepip' 2>/dev/null || { echo "test.sh: Python's venv module is missing (Debian: apt-get install python3-venv)" >&2; exit 1; }
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.7,<2" "pytest>=7" "openai>=1.40,<3" \
  "llama-index-core>=0.12,<0.15" "dspy>=2.6,<4"
PATH="$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/pip" install -q --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps ./python
HOPWISE_BIN="$CARGO_TARGET_DIR/debug/hopwise" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
