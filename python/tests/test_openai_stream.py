"""`hopwise serve`'s OpenAI-compatible endpoint read by the official `openai` Python client: with
`stream=True` the graph's progress arrives as reasoning chunks before the first content chunk, never
in the same chunk as content, and the answer follows as content."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import time
from typing import Any, Dict, Iterator, List, Tuple

import openai
import pytest

import hopwise
from conftest import QUESTION, SAMPLE, ScriptedServer, hopwise_binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PLAN = (
    '{"op":"answer","answer_type":"organisation","steps":['
    '{"question":"Which album is called Counterparts?","answer_type":"other"},'
    '{"question":"Which band released #1?","answer_type":"organisation"}]}'
)


def reply(prompt: str) -> str:
    """Two-step plans for ToQD's and HGOT's planners, and `Rush` as every answer."""
    if "Plan how to answer the question" in prompt:
        return PLAN
    if "Plan how to find the answer" in prompt:
        return "Step 1: Which album is called Counterparts?\nStep 2: Which band released the album in Step 1?\nStep 2 depends on Step 1."
    if "Look at the steps again" in prompt:
        return "Step 2 depends on Step 1."
    if "Write the dependencies as arrows" in prompt:
        return "Step 1 -> Step 2"
    if "Rewrite the search question" in prompt:
        return "Which band released Counterparts?"
    if "step by step" in prompt or "Reason about the question" in prompt:
        return "Rationale: Counterparts is an album by Rush.\nAnswer: Rush"
    return "Rush"


@pytest.fixture
def server(home: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[str]:
    """`hopwise serve` over the scripted model and the sample corpus; yields its `/v1` URL."""
    scripted = ScriptedServer(reply)
    index = tmp_path / "index"
    hopwise.Index.build([SAMPLE / "corpus.jsonl"], index)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOPWISE_") or k == "HOPWISE_THREADS"}
    env["HOPWISE_HOME"] = str(home)
    command = [hopwise_binary(), "--base-url", scripted.base_url, "--model", "scripted", "serve"]
    command += ["--bind", f"127.0.0.1:{port}", "--index", str(index)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"hopwise serve did not start: {process.stderr.read() if process.stderr else ''}")
            time.sleep(0.1)
    yield f"{base}/v1"
    process.terminate()
    process.wait(timeout=30)
    scripted.close()


def delta_fields(delta: Any) -> Tuple[str, str]:
    """(reasoning, content) of one streamed delta; the reasoning fields are extensions the client
    keeps as extra attributes."""
    extra = getattr(delta, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
    return str(reasoning), delta.content or ""


# (strategy, its options, progress lines at least): ToQD would settle this question with its first
# reading and `hgot` with its unanimous Probe (one search, then the answer), so the graphs are
# streamed by ToQD without the first reading and by HGOT's paper flow, which always plans.
CASES = [("toqd", {"answer_first": False}, 3), ("hgot", {}, 1), ("hgot-paper", {}, 3)]


@pytest.mark.parametrize("strategy,options,lines", CASES)
def test_the_openai_client_streams_reasoning_before_the_answer(
    server: str, strategy: str, options: Dict[str, Any], lines: int
) -> None:
    client = openai.OpenAI(base_url=server, api_key="unused", max_retries=0, timeout=120)
    stream = client.chat.completions.create(
        model=strategy,
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"hopwise_options": options},
    )
    kinds: List[str] = []
    reasoning_lines: List[str] = []
    content = ""
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            reasoning, text = delta_fields(choice.delta)
            assert not (reasoning and text), f"reasoning and content in one chunk: {chunk}"
            if reasoning:
                kinds.append("reasoning")
                reasoning_lines.append(reasoning)
            if text:
                kinds.append("content")
                content += text
    assert "reasoning" in kinds and "content" in kinds, kinds
    first_content = kinds.index("content")
    assert all(kind == "reasoning" for kind in kinds[:first_content]), kinds
    assert "reasoning" not in kinds[first_content:], "no progress line after the answer began"
    assert len(reasoning_lines) >= lines, reasoning_lines
    assert content.strip() == "Rush", content
    assert usage is not None and usage.prompt_tokens > 0, usage

    # Without streaming, the same endpoint answers at once and keeps the trace beside the answer.
    reply = client.chat.completions.create(model=strategy, messages=[{"role": "user", "content": QUESTION}])
    assert reply.choices[0].message.content.strip() == "Rush"
    trace = (reply.model_extra or {}).get("hopwise_trace")
    assert trace and trace["strategy"] == strategy, reply
