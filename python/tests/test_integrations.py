"""The adapters against the real toolkits installed from the registry: a LlamaIndex query engine
and a DSPy module that answer with a hopwise strategy over the scripted model and the sample
corpus."""

from __future__ import annotations

import asyncio
import os
import pathlib
from typing import Any

import dspy
import pytest
from llama_index.core.base.response.schema import Response

import hopwise
from conftest import QUESTION, SAMPLE, ScriptedServer
from hopwise.integrations.dspy import Hopwise
from hopwise.integrations.llamaindex import HopwiseQueryEngine


@pytest.fixture(autouse=True)
def no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HOPWISE_") and name not in ("HOPWISE_BIN", "HOPWISE_THREADS"):
            monkeypatch.delenv(name)


@pytest.fixture
def engine(scripted: ScriptedServer, home: pathlib.Path, tmp_path: pathlib.Path) -> hopwise.Engine:
    index = tmp_path / "index"
    hopwise.Index.build([SAMPLE / "corpus.jsonl"], index)
    return hopwise.Engine("scripted", base_url=scripted.base_url, home=home, index=index)


def test_a_llamaindex_query_engine_answers_with_its_sources(engine: hopwise.Engine) -> None:
    direct = engine.ask(QUESTION, "rtr", k=3)
    query_engine = HopwiseQueryEngine(engine, strategy="rtr", k=3)
    response = query_engine.query(QUESTION)
    assert isinstance(response, Response)
    assert response.response == "Rush" == direct.answer
    assert [n.node.node_id for n in response.source_nodes] == [c.id for c in direct.citations]
    assert response.source_nodes and all(n.node.get_content() for n in response.source_nodes)
    assert response.metadata["strategy"] == "rtr" and response.metadata["trace"]["question"] == QUESTION

    # The async path of the same engine.
    again = asyncio.run(query_engine.aquery(QUESTION))
    assert again.response == "Rush"

    # A bad option is the engine's error, raised through LlamaIndex.
    with pytest.raises(ValueError, match="unknown field"):
        HopwiseQueryEngine(engine, strategy="rtr", no_such_option=1).query(QUESTION)


def test_a_dspy_program_uses_hopwise_as_a_step(engine: hopwise.Engine) -> None:
    class AnswerThenCheck(dspy.Module):
        """A two-step program: hopwise answers, then plain Python checks the answer against its
        passages (no DSPy language model is configured or needed)."""

        def __init__(self, engine: hopwise.Engine) -> None:
            super().__init__()
            self.answer = Hopwise(engine, strategy="rtr", k=3)

        def forward(self, question: str) -> Any:
            found = self.answer(question=question)
            grounded = any(found.answer in p for p in found.passages)
            return dspy.Prediction(answer=found.answer, grounded=grounded, titles=found.titles)

    program = AnswerThenCheck(engine)
    result = program(question=QUESTION)
    assert result.answer == "Rush"
    assert result.grounded, "Rush appears in a cited passage of the sample corpus"
    assert result.titles
    assert [name for name, _ in program.named_predictors()] == [], "the hopwise step has no DSPy predictor"
    prediction = Hopwise(engine, strategy="cot")(question=QUESTION)
    assert prediction.answer == "Rush" and prediction.trace["strategy"] == "cot"
