#!/usr/bin/env bash
# Runs the planned rows of the results tables (results/plan.tsv) resumably, at low priority, for a
# wall-time budget, then stops cleanly between questions. Finished rows are appended to
# results/<model>/<dataset>/<row>/results.jsonl (commit them); a later run resumes from what is there.
# Each invocation that advances a row appends a line to the row's sessions.jsonl (dates, threads,
# questions at once, machine), and at the end EVALUATION.md's results section is regenerated.
#
#   scripts/results.sh [--budget 4h] [--only REGEX] [--list] [--no-report]
#                      [--pack-traces | --unpack-traces | --archive]
#
#   --budget D       stop starting questions after D (90m, 2h, 1h30m; default 4h)
#   --only RE        run only rows whose "dataset/row" (test-range rows: "test/dataset/row") matches
#                    the extended regex RE
#   --list           print each planned row with its progress (done/planned) and exit
#   --no-report      do not regenerate EVALUATION.md (`hopwise report results --out EVALUATION.md`)
#   --pack-traces    pack the traces/ of each selected complete row into traces.tar.xz (the same
#                    traces give the same bytes), for rows whose traces an analysis reads
#   --unpack-traces  unpack each selected row's traces.tar.xz into its traces/ and exit
#   --archive        move each selected row that has results to results/archive/<model>/<dataset>/<row>/
#                    (kept for the analyses that read it, left out of the tables) and exit; the next run
#                    starts the row from its first question. For a row measured with earlier prompts.
#
# Datasets are named in plan.tsv (hotpotqa, 2wikimultihopqa, musique, ...). A name is read from
# $HOPWISE_DATA/<name>.jsonl with its pooled corpus <name>_corpus.jsonl when that file exists (the
# evaluation data directory the committed rows used), else from the copy `hopwise data fetch <name>`
# made in $HOPWISE_HOME/data/<name>/.
#
# Environment: HOPWISE_DATA (evaluation data directory; unset: the fetched copies), HOPWISE_MODEL (default
# qwen2.5-1.5b), HOPWISE_THREADS (default 2), HOPWISE_CONCURRENCY (questions at once, default 2),
# HOPWISE_BIN (default: `hopwise` on PATH, else this checkout's debug build), HOPWISE_HOME,
# HOPWISE_REVISION (the commit the binary was built from, recorded per session; default this
# checkout's HEAD, with +dirty when crates/ or Cargo.lock differ from it).
set -euo pipefail
cd "$(dirname "$0")/.."

budget=4h only="" list=0 report=1 pack=0 unpack=0 archive=0
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --list) list=1; shift ;;
    --no-report) report=0; shift ;;
    --pack-traces) pack=1; shift ;;
    --unpack-traces) unpack=1; shift ;;
    --archive) archive=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "results.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

data="${HOPWISE_DATA:-}"
[ -z "$data" ] || export HOPWISE_DATA
model="${HOPWISE_MODEL:-qwen2.5-1.5b}"
export HOPWISE_THREADS="${HOPWISE_THREADS:-2}"
concurrency="${HOPWISE_CONCURRENCY:-2}"
home="${HOPWISE_HOME:-$HOME/.cache/hopwise}"
bin="${HOPWISE_BIN:-$(command -v hopwise || true)}"
if [ "$archive" = 1 ] && [ -z "$only" ]; then
  echo "results.sh: --archive needs --only REGEX naming the rows to move" >&2; exit 2
fi
if [ -z "$bin" ] && [ "$list" = 0 ] && [ "$unpack" = 0 ] && [ "$archive" = 0 ]; then
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

# The pooled corpus of a dataset (every paragraph of every question of the set) and its BM25 index:
# from the evaluation data directory when it has the dataset, else from the fetched copy.
corpus_for() {
  if [ -n "$data" ] && [ -f "$data/$1.jsonl" ]; then
    echo "$data/${1}_corpus.jsonl"
  else
    [ -f "$home/data/$1/source.json" ] || nice -n 10 "$bin" data fetch "$1" >&2
    echo "$home/data/$1/${1}_corpus.jsonl"
  fi
}

index_for() {
  local dataset="$1" corpus index="$home/indexes/$1-corpus"
  corpus="$(corpus_for "$dataset")"
  [ "$corpus" = "$data/${dataset}_corpus.jsonl" ] || index="$home/indexes/$1-fetched-corpus"
  if [ ! -f "$index/hopwise-index.json" ]; then
    echo "results.sh: indexing $corpus into $index" >&2
    nice -n 10 "$bin" index --json --index "$index" "$corpus" >/dev/null
  fi
  echo "$index"
}

done_rows() { [ -f "$1/results.jsonl" ] && wc -l <"$1/results.jsonl" | tr -d ' ' || echo 0; }

# One JSON line describing this invocation's work on a row (read by `hopwise report`).
cpu_model="$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -1 | tr -d '"\\')"
[ -n "$cpu_model" ] || cpu_model="$(uname -m)"
revision="${HOPWISE_REVISION:-}"
if [ -z "$revision" ] && revision="$(git rev-parse --short HEAD 2>/dev/null)"; then
  git diff --quiet HEAD -- crates Cargo.lock 2>/dev/null || revision="$revision+dirty"
fi
revision="$(printf '%s' "$revision" | tr -cd '[:alnum:]+._-')"
record_session() { # out started done_before
  local done_after; done_after="$(done_rows "$1")"
  [ "$done_after" != "$3" ] || return 0
  printf '{"started":"%s","ended":"%s","threads":%s,"concurrency":%s,"cpu":"%s","cpus":%s,"done_before":%s,"done_after":%s,"revision":"%s"}\n' \
    "$2" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$HOPWISE_THREADS" "$concurrency" "$cpu_model" "$(nproc)" "$3" "$done_after" "$revision" \
    >>"$1/sessions.jsonl"
  progressed=1
}
progressed=0

# traces.tar.xz is a function of the traces alone: sorted names, fixed owners and modes, every file dated
# when the row's last session ended, so repacking unchanged traces leaves git nothing to commit.
pack_traces() { # out
  [ -d "$1/traces" ] || { echo "results.sh: $1 has no traces/ to pack" >&2; return 0; }
  local stamp
  stamp="$(sed -n 's/.*"ended":"\([^"]*\)".*/\1/p' "$1/sessions.jsonl" 2>/dev/null | tail -1)"
  tar --sort=name --mtime="${stamp:-@0}" --mode=a+rX,u+w,go-w --owner=0 --group=0 --numeric-owner -C "$1" -cf - traces \
    | xz -9 -T1 >"$1/traces.tar.xz.part"
  mv "$1/traces.tar.xz.part" "$1/traces.tar.xz"
  echo "results.sh: packed $(find "$1/traces" -type f | wc -l | tr -d ' ') traces into $1/traces.tar.xz" >&2
}

while IFS=$'\t' read -r row dataset strategy options questions; do
  case "$row" in ''|'#'*) continue ;; esac
  # `N`: the first N questions (the tuning set); `A-B`: questions A to B, the test range, whose rows
  # live under results/<model>/test/ and are matched by --only as "test/<dataset>/<row>".
  if [[ "$questions" =~ ^([0-9]+)-([0-9]+)$ ]]; then
    skip=$(( BASH_REMATCH[1] - 1 )) limit=$(( BASH_REMATCH[2] - BASH_REMATCH[1] + 1 ))
  else
    skip=0 limit="$questions"
  fi
  if [ "$skip" -gt 0 ]; then
    key="test/$dataset/$row" out="results/$model/test/$dataset/$row"
  else
    key="$dataset/$row" out="results/$model/$dataset/$row"
  fi
  [ -n "$only" ] && ! [[ "$key" =~ $only ]] && continue
  if [ "$list" = 1 ]; then
    printf '%-20s %-21s %4s/%s\n' "$row" "${key%/*}" "$(done_rows "$out" | tr -d ' ')" "$limit"
    continue
  fi
  if [ "$unpack" = 1 ]; then
    if [ -f "$out/traces.tar.xz" ]; then
      tar -xJf "$out/traces.tar.xz" -C "$out"
      echo "results.sh: unpacked $out/traces.tar.xz" >&2
    fi
    continue
  fi
  if [ "$archive" = 1 ]; then
    [ -f "$out/results.jsonl" ] || continue
    kept="results/archive/$model/$key"
    if [ -e "$kept" ]; then
      echo "results.sh: $kept already exists; move or remove it before archiving $out again" >&2
      exit 1
    fi
    mkdir -p "$(dirname "$kept")"
    # git mv keeps the history of committed files; untracked ones (traces/, plots) move with the folder.
    if git ls-files --error-unmatch "$out/results.jsonl" >/dev/null 2>&1; then
      git mv "$out" "$kept"
    else
      mv "$out" "$kept"
    fi
    echo "results.sh: archived $out to $kept; commit the move" >&2
    continue
  fi
  if [ "$(done_rows "$out")" -ge "$limit" ]; then
    if [ "$pack" = 1 ]; then pack_traces "$out"; fi
    continue
  fi
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
  index="$(index_for "$dataset")"
  started="$(date -u +%Y-%m-%dT%H:%M:%SZ)" before="$(done_rows "$out")"
  # A failed row (a backend error, say) is reported and the next row runs; its finished lines stay.
  # --no-cache: the seconds and tokens of a row are what its calls cost, not replays of earlier runs.
  # Stopped by a signal, the row still records the session that advanced it (the eval, in its own
  # process group, is stopped too; its finished lines are already written).
  trap 'kill -TERM -- "-$eval_pid" 2>/dev/null || true; wait "$eval_pid" || true; record_session "$out" "$started" "$before"; exit 143' TERM INT
  set -m
  nice -n 10 "$bin" --model "$model" eval --json --dataset "$dataset" --strategy "$strategy" \
    "${opts[@]}" --index "$index" --skip "$skip" --limit "$limit" --concurrency "$concurrency" --no-cache \
    --out "$out" --time-budget "${left}s" </dev/null &
  eval_pid=$!
  set +m
  wait "$eval_pid" || echo "results.sh: $dataset/$row stopped with an error" >&2
  trap - TERM INT
  record_session "$out" "$started" "$before"
  if [ "$pack" = 1 ] && [ "$(done_rows "$out")" -ge "$limit" ]; then pack_traces "$out"; fi
done < results/plan.tsv

if [ "$list" = 0 ] && [ "$unpack" = 0 ] && [ "$archive" = 0 ] && [ "$report" = 1 ] && [ "$progressed" = 1 ]; then
  "$bin" report results --out EVALUATION.md || echo "results.sh: regenerating EVALUATION.md failed" >&2
fi
