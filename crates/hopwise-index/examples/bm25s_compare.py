"""bm25s (PyPI) on the corpus and queries of the `bm25_bench` example, for a side-by-side rate.

Same input as bm25_bench: every *_corpus.jsonl in the data folder pooled (title + text per record),
and the questions of hotpotqa, 2wikimultihopqa and musique, top-5, one thread, one warm-up pass then
5 timed passes. bm25s is given the same kind of analysis (English stop words, Snowball stemmer via
PyStemmer). Run both in one go:

    python3 -m venv /tmp/bm25s-venv && /tmp/bm25s-venv/bin/pip install bm25s PyStemmer
    cargo run --release -p hopwise-index --example bm25_bench && \
        /tmp/bm25s-venv/bin/python crates/hopwise-index/examples/bm25s_compare.py "$HOPWISE_DATA"
"""

import glob
import json
import os
import sys
import time

import bm25s
import Stemmer

ROUNDS = 5
K = 5
QA_FILES = ["hotpotqa", "2wikimultihopqa", "musique"]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bm25s_compare.py DATA_DIR (the evaluation data folder)")
    data = sys.argv[1]
    corpus = []
    for path in sorted(glob.glob(os.path.join(data, "*_corpus.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    corpus.append(f"{r.get('title', '')} {r.get('text', '')}")
    questions = []
    for name in QA_FILES:
        with open(os.path.join(data, f"{name}.jsonl"), encoding="utf-8") as f:
            questions += [json.loads(line)["question"] for line in f if line.strip()]

    stemmer = Stemmer.Stemmer("english")
    t = time.perf_counter()
    tokens = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    build_s = time.perf_counter() - t
    print(f"bm25s {bm25s.__version__}: indexed {len(corpus)} records in {build_s:.2f} s")

    def search(q):
        qt = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        return retriever.retrieve(qt, k=K, n_threads=1, show_progress=False)

    for q in questions:  # warm-up
        search(q)
    lat = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(ROUNDS):
        for q in questions:
            s = time.perf_counter()
            search(q)
            lat.append((time.perf_counter() - s) * 1e6)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    lat.sort()
    p = lambda x: lat[round((len(lat) - 1) * x)]
    print(
        f"bm25s queries: {len(questions)} questions x {ROUNDS} rounds, top-{K}, 1 thread, one query per call "
        f"(tokenize + retrieve): p50 {p(0.5):.0f} us, p99 {p(0.99):.0f} us, {len(lat) / wall:.0f} queries/s, "
        f"{len(lat) / cpu:.0f} queries per CPU-second"
    )
    # bm25s's batched path (all questions of a pass in one call) is how it is usually benchmarked.
    qt = bm25s.tokenize(questions, stopwords="en", stemmer=stemmer, show_progress=False)
    t0 = time.perf_counter()
    for _ in range(ROUNDS):
        retriever.retrieve(qt, k=K, n_threads=1, show_progress=False)
    wall = time.perf_counter() - t0
    print(f"bm25s batched (pre-tokenized, one call per pass): {len(questions) * ROUNDS / wall:.0f} queries/s")


if __name__ == "__main__":
    main()
