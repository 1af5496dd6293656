"""The Python face over real HTTP to a scripted model server: parity with the CLI, streaming order,
async, cancellation, errors, and the index."""

from __future__ import annotations

import _thread
import asyncio
import json
import os
import subprocess
import threading
import time
from typing import Any, Dict

import pytest

import hopwise
from conftest import QUESTION, SAMPLE, ScriptedServer, hopwise_binary


# The data directory of the run (where scripts/test.sh installed the models), read before the
# fixture below clears the developer's HOPWISE_* settings.
DATA_HOME = os.environ.get("HOPWISE_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "hopwise")


@pytest.fixture(autouse=True)
def no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HOPWISE_") and name not in ("HOPWISE_BIN", "HOPWISE_THREADS"):
            monkeypatch.delenv(name)


def engine(server: ScriptedServer, home: Any, **kwargs: Any) -> hopwise.Engine:
    return hopwise.Engine("scripted", base_url=server.base_url, home=home, **kwargs)


def timeless(trace: Dict[str, Any]) -> Dict[str, Any]:
    trace = json.loads(json.dumps(trace))
    trace["stats"]["wall_ms"] = 0
    for event in trace.get("events", []):
        event["start_ms"] = event["end_ms"] = 0
    return trace


def test_an_answer_from_python_equals_the_cli_trace(scripted: ScriptedServer, home: Any) -> None:
    answer = engine(scripted, home).ask(QUESTION, "cot")
    assert answer.answer == "Rush"
    assert answer.strategy == "cot"
    assert answer.stats["llm_calls"] == 1

    env = {k: v for k, v in os.environ.items() if not k.startswith("HOPWISE_") or k == "HOPWISE_THREADS"}
    env["HOPWISE_HOME"] = str(home)
    cli = subprocess.run(
        [hopwise_binary(), "--base-url", scripted.base_url, "--model", "scripted", "ask", "--strategy", "cot", "--json", QUESTION],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert timeless(answer.trace) == timeless(json.loads(cli.stdout))


def test_the_stream_yields_each_step_before_the_answer(scripted: ScriptedServer, home: Any) -> None:
    events = list(engine(scripted, home).ask_stream(QUESTION, "cot"))
    kinds = [e.kind for e in events]
    assert kinds[-1] == "answer" and kinds.count("answer") == 1, kinds
    assert "llm_call" in kinds and kinds.index("llm_call") < kinds.index("final"), kinds
    seqs = [e.data["seq"] for e in events[:-1]]
    assert seqs == sorted(seqs), "events arrive in recording order"
    final = events[-1].answer
    assert final is not None and final.answer == "Rush"
    assert len(final.trace["events"]) == len(events) - 1, "the stream carried every recorded event"


def test_async_variants_answer_without_blocking_the_loop(scripted: ScriptedServer, home: Any) -> None:
    e = engine(scripted, home)

    async def main() -> Any:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        ticker = asyncio.ensure_future(tick())
        answer = await e.aask(QUESTION, "cot")
        kinds = [ev.kind async for ev in e.aask_stream(QUESTION, "cot")]
        ticker.cancel()
        return answer, kinds, ticks

    answer, kinds, ticks = asyncio.run(main())
    assert answer.answer == "Rush"
    assert kinds[-1] == "answer"
    assert ticks > 0, "the event loop ran while the questions were answered"


def test_ctrl_c_cancels_a_running_question(home: Any) -> None:
    slow = ScriptedServer(delay=30.0)
    stop = threading.Event()

    def press_ctrl_c() -> None:
        # Pressed until the question ends, as a user would press it again.
        while not stop.wait(0.5):
            _thread.interrupt_main()

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    try:
        e = engine(slow, home)
        started = time.monotonic()
        presser.start()
        with pytest.raises(KeyboardInterrupt):
            e.ask(QUESTION, "cot")
        stop.set()
        presser.join()
        assert time.monotonic() - started < 10, "the interrupt ended the wait, not the model"
    finally:
        stop.set()
        try:
            if presser.is_alive():
                presser.join(1)
            time.sleep(0.05)  # a press that raced with the end surfaces here, not in pytest
        except KeyboardInterrupt:
            pass
        slow.close()


def test_bad_input_raises_typed_errors(scripted: ScriptedServer, home: Any) -> None:
    e = engine(scripted, home)
    with pytest.raises(ValueError, match="nope"):
        e.ask(QUESTION, "nope")
    with pytest.raises(ValueError, match="max_steps"):
        e.ask(QUESTION, "toqd-noir", max_steps=0)
    with pytest.raises(ValueError, match="empty"):
        e.ask("   ", "cot")
    with pytest.raises(ValueError, match="retriever"):
        e.ask(QUESTION, "rtr")
    assert not scripted.requests, "nothing reached the model"


def test_an_unreachable_model_is_a_backend_error(home: Any) -> None:
    e = hopwise.Engine("scripted", base_url="http://127.0.0.1:9/v1", home=home)
    with pytest.raises(hopwise.BackendError):
        e.ask(QUESTION, "direct")
    assert issubclass(hopwise.BackendError, hopwise.HopwiseError)


def test_an_index_is_built_searched_and_answered_over(scripted: ScriptedServer, home: Any, tmp_path: Any) -> None:
    index = hopwise.Index.build([SAMPLE / "corpus.jsonl"], tmp_path / "index")
    top = index.search("Neil Peart drummer Rush", k=3)
    assert len(top) == 3 and any(p.title == "Neil Peart" for p in top), top
    answer = engine(scripted, home, index=index.dir).ask(QUESTION, "rtr")
    assert answer.answer == "Rush"
    assert answer.stats["retrieval_rounds"] == 1
    assert any("Rush" in c.text for c in answer.citations), answer.citations
    with pytest.raises(ValueError, match="not a regular file"):
        hopwise.Index.build(["/dev/zero"], tmp_path / "other")


def test_a_dense_index_is_built_and_answered_over(scripted: ScriptedServer, tmp_path: Any) -> None:
    # The embedder installed by scripts/test.sh, in the data directory the run started with.
    models = DATA_HOME
    index = hopwise.Index.build([SAMPLE / "corpus.jsonl"], tmp_path / "index", dense=True, home=models)
    assert (tmp_path / "index" / "dense").is_dir()
    for retriever in ("dense", "hybrid"):
        e = hopwise.Engine("scripted", base_url=scripted.base_url, home=models, index=index.dir, retriever=retriever)
        answer = e.ask(QUESTION, "rtr")
        assert answer.answer == "Rush"
        assert answer.trace["retriever"] == retriever, answer.trace["retriever"]
    with pytest.raises(ValueError, match="bm25, dense, hybrid"):
        hopwise.Engine("scripted", base_url=scripted.base_url, home=models, retriever="vector")
    with pytest.raises(ValueError, match="all-MiniLM-L6-v2 is not installed"):
        hopwise.Index.build([SAMPLE / "corpus.jsonl"], tmp_path / "other", dense=True, home=tmp_path / "empty")


def test_the_graph_is_drawn_offline(scripted: ScriptedServer, home: Any) -> None:
    answer = engine(scripted, home).ask(QUESTION, "cot")
    mermaid = answer.mermaid()
    assert mermaid.startswith("flowchart TD\n") and "Rush" in mermaid
    assert answer.dot().startswith("digraph hopwise {")


def test_strategies_are_listed_with_their_options() -> None:
    listed = {s["name"]: s for s in hopwise.strategies()}
    assert {"toqd", "toqd-paper", "hgot", "ircot", "rtr"} <= set(listed)
    assert listed["toqd"]["options"]["samples"] == 5
    assert listed["hgot-paper"]["options"]["stop_confidence"] is None
    assert listed["direct"]["options"] == {}


def test_evaluate_writes_the_results_folder_and_resumes(scripted: ScriptedServer, home: Any, tmp_path: Any) -> None:
    out = tmp_path / "run"
    first = hopwise.evaluate(
        SAMPLE / "hotpotqa.jsonl", "direct,cot", out, limit=3, context=True,
        model="scripted", base_url=scripted.base_url, home=home,
    )
    assert (first.total, first.ran, first.resumed, first.failures) == (6, 6, 0, [])
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6 and (out / "summary.md").is_file()
    assert {json.loads(line)["strategy"] for line in lines} == {"direct", "cot"}
    assert {row["strategy"] for row in first.rows} == {"direct", "cot"}
    again = hopwise.evaluate(
        SAMPLE / "hotpotqa.jsonl", ["direct", "cot"], out, limit=3, context=True,
        model="scripted", base_url=scripted.base_url, home=home,
    )
    assert (again.ran, again.resumed) == (0, 6), "finished jobs are kept"
    with pytest.raises(ValueError, match="nope"):
        hopwise.evaluate(SAMPLE / "hotpotqa.jsonl", "nope", tmp_path / "bad", model="scripted", base_url=scripted.base_url, home=home)
