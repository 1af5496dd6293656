#!/usr/bin/env bash
# hopwise's BM25 against bm25s (PyPI) in one run: same corpora, same questions, one query per call on
# one thread, back to back. Prints both reports and the ratio of queries per CPU-second (the issue's
# target is >= 5x bm25s's single-thread rate); CPU-seconds keep the ratio honest on a shared machine.
#
#   crates/hopwise-index/examples/bm25_vs_bm25s.sh [DATA_DIR]      # default ../shared/data
# Needs a Python with bm25s and PyStemmer: BM25S_PYTHON (default: a venv it creates in /tmp).
set -euo pipefail
cd "$(dirname "$0")/../../.."
data="$(realpath "${1:-../shared/data}")"
python="${BM25S_PYTHON:-/tmp/bm25s-venv/bin/python}"
if ! "$python" -c "import bm25s, Stemmer" 2>/dev/null; then
  python3 -m venv /tmp/bm25s-venv
  /tmp/bm25s-venv/bin/pip install -q bm25s PyStemmer
  python=/tmp/bm25s-venv/bin/python
fi
cargo build -q --release -p hopwise-index --example bm25_bench
target_dir="${CARGO_TARGET_DIR:-target}"
ours="$(HOPWISE_DATA_DIR="$data" "$target_dir/release/examples/bm25_bench")"
theirs="$("$python" crates/hopwise-index/examples/bm25s_compare.py "$data")"
printf '%s\n\n%s\n\n' "$ours" "$theirs"
ours_rate="$(grep -o '[0-9]* queries per CPU-second' <<<"$ours" | grep -o '^[0-9]*')"
theirs_rate="$(grep -o '[0-9]* queries per CPU-second' <<<"$theirs" | grep -o '^[0-9]*')"
awk -v a="$ours_rate" -v b="$theirs_rate" 'BEGIN { printf "hopwise / bm25s, queries per CPU-second, one query per call: %d / %d = %.1fx\n", a, b, a / b }'
