"""The embedded model through the Python face: the 0.5B model that `scripts/test.sh` installs,
over the repository's sample index."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

import hopwise
from conftest import SAMPLE

HOME = pathlib.Path(os.environ.get("HOPWISE_HOME") or pathlib.Path.home() / ".cache" / "hopwise")
MODEL = "qwen2.5-0.5b"


def installed() -> bool:
    return any((HOME / "models").glob("qwen2.5-*0.5b*.gguf"))


def test_the_local_model_answers_over_an_index(tmp_path: Any) -> None:
    if not installed():
        if os.environ.get("CI"):
            pytest.fail(f"{MODEL} is not installed in {HOME}; scripts/test.sh installs it")
        pytest.skip(f"{MODEL} is not installed in {HOME}")
    index = hopwise.Index.build([SAMPLE / "corpus.jsonl"], tmp_path / "index")
    engine = hopwise.Engine(MODEL, home=HOME, index=index.dir, threads=1)
    answer = engine.ask("Which band was Neil Peart the drummer of?", "rtr", k=3)
    assert answer.answer.strip(), answer
    assert answer.stats["llm_calls"] == 1 and answer.stats["retrieval_rounds"] == 1
    assert answer.trace["strategy"] == "rtr"
