"""A scripted OpenAI-compatible model server on loopback, so answers are exact, and the paths the
tests share (the `hopwise` binary, the repository's sample data)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, List

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
QUESTION = "Which Canadian rock band released Counterparts?"


def _reply(prompt: str) -> str:
    """The scripted model: a chain of thought for CoT prompts, else a short answer."""
    if "step by step" in prompt:
        return "Counterparts is an album by Rush.\nAnswer: Rush"
    return "Rush"


class ScriptedServer:
    """Answers `/v1/chat/completions` with `reply(prompt)`, after `delay` seconds."""

    def __init__(self, reply: Callable[[str], str] = _reply, delay: float = 0.0) -> None:
        self.reply = reply
        self.delay = delay
        self.requests: List[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                server.requests.append(body)
                if server.delay:
                    time.sleep(server.delay)
                prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                n = int(body.get("n") or 1)
                text = server.reply(prompt)
                payload = {
                    "id": "scripted",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "scripted"),
                    "choices": [
                        {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        for i in range(n)
                    ],
                    "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()), "total_tokens": 0},
                }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    yield server
    server.close()


@pytest.fixture
def home(tmp_path: pathlib.Path) -> pathlib.Path:
    """An empty data directory, so no developer config, index or model leaks into a test."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def hopwise_binary() -> str:
    """The `hopwise` command the parity test compares with: `$HOPWISE_BIN`, else the one on PATH."""
    found = os.environ.get("HOPWISE_BIN") or shutil.which("hopwise")
    if not found:
        pytest.fail("set HOPWISE_BIN to the hopwise binary (scripts/test.sh does)")
    return found
