"""hopwise as a DSPy module: ``Hopwise(engine, strategy="toqd")`` is a step of a DSPy program that
takes ``question`` and returns a ``dspy.Prediction`` with ``answer``, ``passages`` (the cited
passages' text, for a later step to read), ``confidence`` and the full ``trace``.

    import dspy
    from hopwise.integrations.dspy import Hopwise

    class Explain(dspy.Module):
        def __init__(self, engine):
            self.answer = Hopwise(engine, strategy="toqd")
            self.explain = dspy.ChainOfThought("question, answer, passages -> explanation")

        def forward(self, question):
            found = self.answer(question=question)
            return self.explain(question=question, answer=found.answer, passages=found.passages)

The hopwise step calls its own engine's model, not the one configured with ``dspy.configure``.
"""

from __future__ import annotations

from typing import Any, Optional

import dspy

import hopwise


class Hopwise(dspy.Module):
    """Answers ``question`` with a hopwise strategy (its options as keyword arguments)."""

    def __init__(self, engine: hopwise.Engine, strategy: Optional[str] = None, **options: Any) -> None:
        super().__init__()
        self.engine = engine
        self.strategy = strategy
        self.options = options

    def forward(self, question: str) -> dspy.Prediction:
        return to_prediction(self.engine.ask(question, self.strategy, **self.options))

    async def aforward(self, question: str) -> dspy.Prediction:
        return to_prediction(await self.engine.aask(question, self.strategy, **self.options))


def to_prediction(answer: hopwise.Answer) -> dspy.Prediction:
    return dspy.Prediction(
        answer=answer.answer,
        passages=[p.text for p in answer.citations],
        titles=[p.title for p in answer.citations],
        confidence=answer.confidence,
        best_effort=answer.best_effort,
        trace=answer.trace,
    )
