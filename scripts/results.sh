#!/usr/bin/env bash
# Runs the planned rows of the results tables (results/plan.tsv) resumably, at low priority, for a
# wall-time budget, then stops cleanly between questions. Finished rows are appended to
# results/<model>/<dataset>/<row>/results.jsonl (commit them); a later run resumes from what is there.
#
#   scripts/results.sh [--budget 4h] [--only REGEX] [--list]
#
#   --budget D   stop starting questions after D (90m, 2h, 1h30m; default 4h)
#   --only RE    run only rows whose "dataset/row" matches the extended regex RE
#   --list       print each planned row with its progress (done/planned) and exit
#
# Environment: HOPWISE_DATA (dataset directory, default ../shared/data), HOPWISE_MODEL (default
# qwen2.5-1.5b), HOPWISE_THREADS (default 2), HOPWISE_CONCURRENCY (questions at once, default 2),
# HOPWISE_BIN (default: `hopwise` on PATH, else this checkout's debug build), HOPWISE_HOME.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=4h only="" list=0
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --list) list=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "results.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

data="${HOPWISE_DATA:-../shared/data}"
model="${HOPWISE_MODEL:-qwen2.5-1.5b}"
export HOPWISE_THREADS="${HOPWISE_THREADS:-2}"
concurrency="${HOPWISE_CONCURRENCY:-2}"
home="${HOPWISE_HOME:-$HOME/.cache/hopwise}"
bin="${HOPWISE_BIN:-$(command -v hopwise || true)}"
if [ -z "$bin" ]; then
  bin="${CARGO_TARGET_DIR:-$home/target}/debug/hopwise"
  [ -x "$bin" ] || cargo build -q -p hopwise --locked
fi

seconds() { # 90m -> 5400 (units s, m, h)
  local text="$1" total=0 number=""
  [[ "$text" =~ ^[0-9]+$ ]] && { echo "$text"; return; }
  while [ -n "$text" ]; do
    local c="${text:0:1}"; text="${text:1}"
    case "$c" in
      [0-9]) number+="$c" ;;
      h) total=$((total + number * 3600)); number="" ;;
      m) total=$((total + number * 60)); number="" ;;
      s) total=$((total + number)); number="" ;;
      *) echo "results.sh: bad duration $1" >&2; exit 2 ;;
    esac
  done
  echo "$total"
}
deadline=$(( $(date +%s) + $(seconds "$budget") ))

# One BM25 index per dataset, over its pooled corpus (every paragraph of every question of the set).
index_for() {
  local dataset="$1" index="$home/indexes/$1-corpus"
  if [ ! -f "$index/hopwise-index.json" ]; then
    echo "results.sh: indexing $data/${dataset}_corpus.jsonl into $index" >&2
    nice -n 10 "$bin" index --json --index "$index" "$data/${dataset}_corpus.jsonl" >/dev/null
  fi
  echo "$index"
}

done_rows() { [ -f "$1/results.jsonl" ] && wc -l <"$1/results.jsonl" || echo 0; }

while IFS=$'\t' read -r row dataset strategy options limit; do
  case "$row" in ''|'#'*) continue ;; esac
  [ -n "$only" ] && ! [[ "$dataset/$row" =~ $only ]] && continue
  out="results/$model/$dataset/$row"
  if [ "$list" = 1 ]; then
    printf '%-20s %-16s %4s/%s\n' "$row" "$dataset" "$(done_rows "$out" | tr -d ' ')" "$limit"
    continue
  fi
  [ "$(done_rows "$out")" -ge "$limit" ] && continue
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -le 0 ]; then
    echo "results.sh: time budget spent; run again to continue" >&2
    break
  fi
  opts=()
  if [ "$options" != "-" ]; then
    for kv in $options; do opts+=(--opt "$kv"); done
  fi
  echo "results.sh: $dataset/$row ($strategy ${options/-/}) -> $out, ${left}s left" >&2
  # A failed row (a backend error, say) is reported and the next row runs; its finished lines stay.
  nice -n 10 "$bin" --model "$model" eval --json --dataset "$data/$dataset.jsonl" --strategy "$strategy" \
    "${opts[@]}" --index "$(index_for "$dataset")" --limit "$limit" --concurrency "$concurrency" \
    --out "$out" --time-budget "${left}s" || echo "results.sh: $dataset/$row stopped with an error" >&2
done < results/plan.tsv
