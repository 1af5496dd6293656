"""hopwise as a LlamaIndex query engine: ``HopwiseQueryEngine(engine).query(question)`` answers with
a hopwise strategy and returns a LlamaIndex ``Response`` whose source nodes are the cited passages.

    from hopwise.integrations.llamaindex import HopwiseQueryEngine
    query_engine = HopwiseQueryEngine(hopwise.Engine(index="my-index"), strategy="toqd")
    response = query_engine.query("Which band released Counterparts?")
    print(response.response, [n.node.metadata["title"] for n in response.source_nodes])

The hopwise answer's confidence, cost and full trace are in ``response.metadata``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ConfigDict, Field

import hopwise


def to_response(answer: hopwise.Answer) -> Response:
    """A LlamaIndex ``Response`` for a hopwise answer: the answer text, the cited passages as source
    nodes (id, text, title, score), and the rest in ``metadata``."""
    nodes = [
        NodeWithScore(node=TextNode(id_=p.id, text=p.text, metadata={"title": p.title}), score=p.score)
        for p in answer.citations
    ]
    metadata: Dict[str, Any] = {
        "strategy": answer.strategy,
        "confidence": answer.confidence,
        "best_effort": answer.best_effort,
        "stats": answer.stats,
        "trace": answer.trace,
    }
    return Response(response=answer.answer, source_nodes=nodes, metadata=metadata)


class HopwiseQueryEngine(CustomQueryEngine):
    """A query engine that answers with a hopwise strategy (its options as keyword arguments)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any = Field(description="The hopwise.Engine that answers.")
    strategy: Optional[str] = Field(default=None, description="The strategy; the engine's default when None.")
    options: Dict[str, Any] = Field(default_factory=dict, description="Strategy options.")

    def __init__(self, engine: hopwise.Engine, strategy: Optional[str] = None, **options: Any) -> None:
        super().__init__(engine=engine, strategy=strategy, options=options)

    def custom_query(self, query_str: str) -> Response:
        return to_response(self.engine.ask(query_str, self.strategy, **self.options))

    async def acustom_query(self, query_str: str) -> Response:
        return to_response(await self.engine.aask(query_str, self.strategy, **self.options))
