"""hopwise from Python: the same engine as the ``hopwise`` command and server.

    import hopwise
    engine = hopwise.Engine(model="qwen2.5-0.5b")
    answer = engine.ask("Which band released Counterparts?")
    print(answer.answer, [c.title for c in answer.citations])
    for event in engine.ask_stream("...", strategy="toqd"):
        print(event.kind, event.data)

An answer from Python equals ``hopwise ask --json`` for the same question and configuration: both
build their backends through the same runtime.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence, Union

from . import _native
from ._native import BackendError, HopwiseError

__all__ = [
    "Answer",
    "BackendError",
    "Citation",
    "Engine",
    "EvalResult",
    "Event",
    "HopwiseError",
    "Index",
    "Passage",
    "evaluate",
    "strategies",
]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Passage:
    """A retrieved passage."""

    id: str
    title: str
    text: str
    score: float = 0.0

    @staticmethod
    def _from(raw: Dict[str, Any]) -> "Passage":
        return Passage(id=raw.get("id", ""), title=raw.get("title", ""), text=raw.get("text", ""), score=raw.get("score", 0.0))


Citation = Passage
"""A passage an answer rests on."""


@dataclass(frozen=True)
class Answer:
    """An answered question: the answer, how sure, the passages it rests on, cost, and the full trace."""

    answer: str
    confidence: Optional[float]
    best_effort: bool
    citations: List[Passage]
    stats: Dict[str, Any]
    trace: Dict[str, Any] = field(repr=False)

    @property
    def strategy(self) -> str:
        return self.trace.get("strategy", "")

    def mermaid(self) -> str:
        """The executed graph as a Mermaid flowchart."""
        return _native.graph(json.dumps(self.trace), "mermaid")

    def dot(self) -> str:
        """The executed graph as Graphviz DOT."""
        return _native.graph(json.dumps(self.trace), "dot")

    @staticmethod
    def _from_json(text: str) -> "Answer":
        return Answer._from(json.loads(text))

    @staticmethod
    def _from(raw: Dict[str, Any]) -> "Answer":
        trace = raw["trace"]
        return Answer(
            answer=trace.get("answer", ""),
            confidence=trace.get("confidence"),
            best_effort=bool(trace.get("best_effort", False)),
            citations=[Passage._from(p) for p in raw.get("citations", [])],
            stats=trace.get("stats", {}),
            trace=trace,
        )


@dataclass(frozen=True)
class Event:
    """One step of a question as it runs.

    ``kind`` is the trace event's type (``llm_call``, ``retrieval``, ``node``, ``edge``, ...,
    ``final``) and ``data`` the event itself; after them comes one of kind ``answer`` that carries
    the :class:`Answer` (its ``data`` is the trace).
    """

    kind: str
    data: Dict[str, Any] = field(repr=False)
    answer: Optional[Answer] = None

    @staticmethod
    def _from_json(text: str) -> "Event":
        raw = json.loads(text)
        if "answer" in raw:
            answer = Answer._from(raw["answer"])
            return Event(kind="answer", data=raw["answer"]["trace"], answer=answer)
        event = raw["event"]
        return Event(kind=event.get("type", ""), data=event)


def _options(options: Dict[str, Any]) -> Optional[str]:
    return json.dumps(options) if options else None


def _request(
    strategy: Optional[str],
    k: Optional[int],
    max_llm_calls: Optional[int],
    max_seconds: Optional[float],
    no_retrieval: bool,
    options: Dict[str, Any],
) -> Dict[str, Any]:
    """The native keyword arguments of one question."""
    return {
        "strategy": strategy,
        "options": _options(options),
        "k": k,
        "max_llm_calls": max_llm_calls,
        "max_seconds": max_seconds,
        "no_retrieval": no_retrieval,
    }


class Engine:
    """Configuration and backends, built once; ask it questions.

    Settings are laid over the config file (``config``, else ``$HOPWISE_CONFIG``, else
    ``./hopwise.toml``): ``model`` names an installed local model (``hopwise setup --fetch NAME``)
    or, with ``base_url``, a model on an OpenAI-compatible server; ``index`` is a folder built by
    ``hopwise index`` or :meth:`Index.build`; ``retriever`` is ``bm25``, ``dense`` or ``hybrid``
    over it (the dense ones need the index built with ``dense=True``), or a remote engine
    configured in the file (``typesense``, ``milvus``, ``opensearch``).
    """

    def __init__(
        self,
        model: Optional[str] = None,
        *,
        base_url: Optional[str] = None,
        index: Optional[PathLike] = None,
        config: Optional[PathLike] = None,
        home: Optional[PathLike] = None,
        strategy: Optional[str] = None,
        k: Optional[int] = None,
        threads: Optional[int] = None,
        retriever: Optional[str] = None,
    ) -> None:
        self._native = _native.Engine(
            model=model,
            base_url=base_url,
            index=os.fspath(index) if index is not None else None,
            config=os.fspath(config) if config is not None else None,
            home=os.fspath(home) if home is not None else None,
            strategy=strategy,
            k=k,
            threads=threads,
            retriever=retriever,
        )

    def ask(
        self,
        question: str,
        strategy: Optional[str] = None,
        *,
        k: Optional[int] = None,
        max_llm_calls: Optional[int] = None,
        max_seconds: Optional[float] = None,
        no_retrieval: bool = False,
        **options: Any,
    ) -> Answer:
        """Answers ``question``. Keyword arguments beyond these are the strategy's options
        (``hopwise strategies`` lists them); a bad one raises ``ValueError`` before any work."""
        request = _request(strategy, k, max_llm_calls, max_seconds, no_retrieval, options)
        return Answer._from_json(self._native.ask(question, **request))

    def ask_stream(
        self,
        question: str,
        strategy: Optional[str] = None,
        *,
        k: Optional[int] = None,
        max_llm_calls: Optional[int] = None,
        max_seconds: Optional[float] = None,
        no_retrieval: bool = False,
        **options: Any,
    ) -> Iterator[Event]:
        """Answers ``question``, yielding each step as it happens and the answer last."""
        request = _request(strategy, k, max_llm_calls, max_seconds, no_retrieval, options)
        for text in self._native.ask_stream(question, **request):
            yield Event._from_json(text)

    async def aask(self, question: str, strategy: Optional[str] = None, **kwargs: Any) -> Answer:
        """:meth:`ask` without blocking the event loop."""
        return await asyncio.to_thread(self.ask, question, strategy, **kwargs)

    async def aask_stream(self, question: str, strategy: Optional[str] = None, **kwargs: Any) -> AsyncIterator[Event]:
        """:meth:`ask_stream` without blocking the event loop."""
        events = self.ask_stream(question, strategy, **kwargs)
        done = object()
        while True:
            event = await asyncio.to_thread(next, events, done)
            if event is done:
                return
            yield event


class Index:
    """A BM25 index folder."""

    def __init__(self, dir: PathLike) -> None:
        self.dir = os.fspath(dir)

    @staticmethod
    def build(
        paths: Sequence[PathLike], dir: PathLike, dense: bool = False, *, home: Optional[PathLike] = None
    ) -> "Index":
        """Indexes corpus files or folders (JSONL with ``id``, ``title``, ``text``; or text files)
        into ``dir`` (created, or added to) and returns the index. With ``dense``, also embeds the
        passages for ``retriever="dense"`` or ``"hybrid"`` (all-MiniLM-L6-v2, installed in the data
        directory ``home`` by ``hopwise setup --fetch all-minilm-l6-v2``)."""
        _native.build_index(
            [os.fspath(p) for p in paths],
            os.fspath(dir),
            dense=dense,
            home=os.fspath(home) if home is not None else None,
        )
        return Index(dir)

    @staticmethod
    def open(dir: PathLike) -> "Index":
        return Index(dir)

    def search(self, query: str, k: int = 5) -> List[Passage]:
        """The ``k`` best passages for ``query``."""
        return [Passage._from(p) for p in json.loads(_native.search(self.dir, query, k))]


def strategies() -> List[Dict[str, Any]]:
    """Every strategy: ``name``, ``description``, ``needs_retriever`` and ``options`` (each option
    it takes, at its default)."""
    return json.loads(_native.strategies())


@dataclass(frozen=True)
class EvalResult:
    """What :func:`evaluate` did: job counts, each failed job with its reason, and the summary
    (one row per dataset and strategy, with means and their intervals)."""

    out: str
    total: int
    resumed: int
    ran: int
    failures: List[Dict[str, Any]]
    not_started: int
    skipped: int
    summary: Dict[str, Any]

    @property
    def rows(self) -> List[Dict[str, Any]]:
        return list(self.summary.get("cells", []))


def evaluate(
    datasets: Union[PathLike, Sequence[PathLike]],
    strategies: Union[str, Sequence[str]],
    out: PathLike,
    *,
    skip: int = 0,
    limit: Optional[int] = None,
    concurrency: int = 1,
    context: bool = False,
    cache: bool = True,
    model: Optional[str] = None,
    base_url: Optional[str] = None,
    index: Optional[PathLike] = None,
    config: Optional[PathLike] = None,
    home: Optional[PathLike] = None,
    threads: Optional[int] = None,
    **options: Any,
) -> EvalResult:
    """Runs ``strategies`` over ``datasets`` (files, or names such as ``"hotpotqa"``) and writes
    the results folder ``out`` exactly as ``hopwise eval`` does; a second call resumes it.
    ``context=True`` searches each example's own paragraphs instead of an index. Keyword arguments
    beyond these are strategy options for every strategy."""
    if isinstance(datasets, (str, os.PathLike)):
        datasets = [datasets]
    if isinstance(strategies, str):
        strategies = [s.strip() for s in strategies.split(",") if s.strip()]
    raw = json.loads(
        _native.evaluate(
            [os.fspath(d) for d in datasets],
            list(strategies),
            os.fspath(out),
            skip=skip,
            limit=limit,
            concurrency=concurrency,
            options=_options(options),
            context=context,
            cache=cache,
            model=model,
            base_url=base_url,
            index=os.fspath(index) if index is not None else None,
            config=os.fspath(config) if config is not None else None,
            home=os.fspath(home) if home is not None else None,
            threads=threads,
        )
    )
    return EvalResult(
        out=os.fspath(out),
        total=raw["total"],
        resumed=raw["resumed"],
        ran=raw["ran"],
        failures=raw["failures"],
        not_started=raw["not_started"],
        skipped=raw["skipped"],
        summary=raw["summary"],
    )
