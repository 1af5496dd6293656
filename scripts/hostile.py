#!/usr/bin/env python3
"""A hostile run against `hopwise serve`: for a set time, slow-header clients, connection floods from
one address, request fields naming server files, oversized and malformed bodies, abandoned streams,
huge model replies and ordinary load, all at once, while a watcher asks `/healthz` every second and
reads the server's memory. The server answers questions with a scripted OpenAI-compatible model on
loopback (no model weights, no network).

    scripts/hostile.py [--minutes 20] [--bin PATH] [--json]

Passes (exit 0) when the server is still up at the end, every `/healthz` answered within 1 s, its
resident memory stayed under --max-rss-mb, no request got a 500, every attack got the status it
should, and nothing was written outside the run's own temporary folder. The report says which
check failed. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parents[1]
QUESTION = "Which Canadian rock band released Counterparts?"
HUGE_REPLY_BYTES = 20 * 1024 * 1024


class ScriptedModel:
    """An OpenAI-compatible chat endpoint: `Rush`, or a 20 MB reply when the prompt says HUGE."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                text = "x" * HUGE_REPLY_BYTES if "HUGE" in prompt else "Rush"
                n = int(body.get("n") or 1)
                choices = [{"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"} for i in range(n)]
                data = json.dumps({"choices": choices, "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
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
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connect(port: int, source: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def request(port: int, method: str, path: str, body: Optional[bytes] = None, source: str = "127.0.0.1",
            headers: Optional[Dict[str, str]] = None, timeout: float = 60.0) -> Tuple[int, bytes]:
    """One request on a fresh connection: (status, body); status 0 when the connection failed."""
    head = [f"{method} {path} HTTP/1.1", "Host: hostile", "Connection: close"]
    for k, v in (headers or {}).items():
        head.append(f"{k}: {v}")
    if body is not None:
        head.append(f"Content-Length: {len(body)}")
    raw = ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")
    try:
        s = connect(port, source, timeout)
        s.sendall(raw)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        s.close()
    except OSError:
        return 0, b""
    data = b"".join(chunks)
    try:
        status = int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0, data
    return status, data.split(b"\r\n\r\n", 1)[-1]


class Run:
    def __init__(self, port: int, pid: int, seconds: float) -> None:
        self.port = port
        self.pid = pid
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.statuses: Dict[str, Counter] = {}
        self.problems: List[str] = []
        self.health_worst = 0.0
        self.health_failures = 0
        self.health_checks = 0
        self.rss_worst_mb = 0.0

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    def count(self, attack: str, status: int, allowed: Tuple[int, ...]) -> None:
        with self.lock:
            self.statuses.setdefault(attack, Counter())[status] += 1
            if status not in allowed and len(self.problems) < 50:
                self.problems.append(f"{attack}: status {status}, expected one of {allowed}")

    def rss_mb(self) -> float:
        try:
            for line in pathlib.Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0


def watch(run: Run) -> None:
    """`/healthz` once a second from an address no attacker uses, and the server's memory."""
    while run.running():
        started = time.monotonic()
        status, _ = request(run.port, "GET", "/healthz", source="127.0.0.250", timeout=10)
        took = time.monotonic() - started
        with run.lock:
            run.health_checks += 1
            run.health_worst = max(run.health_worst, took)
            if status != 200 or took > 1.0:
                run.health_failures += 1
            run.rss_worst_mb = max(run.rss_worst_mb, run.rss_mb())
        time.sleep(max(0.0, 1.0 - took))


def slow_headers(run: Run, source: str) -> None:
    """A client that sends its headers a byte every 200 ms, forever; the server must cut it off."""
    while run.running():
        try:
            s = connect(run.port, source, timeout=30)
            s.sendall(b"GET /v1/strategies HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            while run.running():
                s.sendall(b"a")
                time.sleep(0.2)
        except OSError:
            pass  # cut off, as it should be
        time.sleep(0.1)


def flood(run: Run) -> None:
    """Many idle connections from one address: past its share, each is refused at once."""
    while run.running():
        held = []
        for _ in range(100):
            try:
                held.append(connect(run.port, "127.0.0.9", timeout=5))
            except OSError:
                break
        time.sleep(3)
        for s in held:
            s.close()


def attacks(run: Run, source: str) -> None:
    """Bad requests, one after another; each must get its status."""
    ask = "/v1/ask"
    json_headers = {"Content-Type": "application/json"}
    cases = [
        ("server-file option", ask, {"question": QUESTION, "strategy": "hgot", "options": {"demonstrations": "/dev/zero"}}, (422,)),
        ("server-file option (chat)", "/v1/chat/completions",
         {"model": "hgot", "messages": [{"role": "user", "content": QUESTION}], "hopwise_options": {"demonstrations": "/etc/shadow"}}, (422,)),
        ("unknown option", ask, {"question": QUESTION, "strategy": "cot", "options": {"nope": 1}}, (400,)),
        ("unknown strategy", ask, {"question": QUESTION, "strategy": "nope"}, (400,)),
        ("empty question", ask, {"question": "  ", "strategy": "cot"}, (400,)),
        ("wrong type", ask, {"question": 5}, (400, 422)),
        ("zero budget", ask, {"question": QUESTION, "strategy": "cot", "max_llm_calls": 0}, (400, 422)),
        ("huge model reply", ask, {"question": "HUGE " + QUESTION, "strategy": "direct"}, (200, 502, 503)),
        ("ordinary question", ask, {"question": QUESTION, "strategy": "cot"}, (200, 503)),
    ]
    while run.running():
        name, path, body, allowed = random.choice(cases)
        status, reply = request(run.port, "POST", path, json.dumps(body).encode(), source, json_headers)
        run.count(name, status, allowed)
        if name == "huge model reply" and len(reply) > 4 * 1024 * 1024:
            with run.lock:
                run.problems.append(f"a 20 MB model reply came back as a {len(reply)}-byte response")
        big = b"{\"question\": \"" + b"a" * (1 << 20) + b"\"}"
        status, _ = request(run.port, "POST", ask, big, source, json_headers)
        run.count("oversized body", status, (413, 0))
        status, _ = request(run.port, "POST", ask, b"{not json", source, json_headers)
        run.count("malformed body", status, (400,))
        # A stream abandoned after its first bytes.
        try:
            s = connect(run.port, source, timeout=10)
            data = json.dumps({"question": QUESTION, "strategy": "toqd"}).encode()
            s.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\n"
                      + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
            s.recv(256)
            s.close()
        except OSError:
            pass


def files_under(path: pathlib.Path) -> set:
    return {p for p in path.rglob("*") if p.is_file()} if path.exists() else set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--bin", default=os.environ.get("HOPWISE_BIN") or shutil.which("hopwise") or "")
    parser.add_argument("--max-rss-mb", type=float, default=1024.0)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    if not args.bin:
        print("hostile.py: name the hopwise binary with --bin or HOPWISE_BIN", file=sys.stderr)
        return 2
    # results/ is left out: evaluation rows may be running beside this.
    git_status = ["git", "status", "--porcelain", "--", ".", ":!results"]
    repo_before = subprocess.run(git_status, cwd=REPO, capture_output=True, text=True).stdout
    model = ScriptedModel()
    with tempfile.TemporaryDirectory(prefix="hopwise-hostile-") as tmp:
        home = pathlib.Path(tmp) / "home"
        index = pathlib.Path(tmp) / "index"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOPWISE_")}
        env["HOPWISE_HOME"] = str(home)
        subprocess.run([args.bin, "index", "--index", str(index), str(REPO / "data/sample/corpus.jsonl")],
                       env=env, check=True, capture_output=True)
        port = free_port()
        log = open(pathlib.Path(tmp) / "serve.log", "w")
        server = subprocess.Popen([args.bin, "--base-url", model.url, "--model", "scripted", "serve",
                                   "--bind", f"127.0.0.1:{port}", "--index", str(index),
                                   "--max-connections", "256", "--read-timeout-secs", "3"],
                                  env=env, stdout=log, stderr=log, cwd=tmp)
        for _ in range(300):
            if request(port, "GET", "/healthz", timeout=2)[0] == 200:
                break
            time.sleep(0.1)
        else:
            print("hostile.py: the server did not start", file=sys.stderr)
            server.kill()
            return 1
        before_tmp = files_under(pathlib.Path("/tmp")) - files_under(pathlib.Path(tmp))
        run = Run(port, server.pid, args.minutes * 60)
        threads = [threading.Thread(target=watch, args=(run,))]
        threads += [threading.Thread(target=slow_headers, args=(run, f"127.0.3.{i % 40 + 1}")) for i in range(120)]
        threads += [threading.Thread(target=flood, args=(run,))]
        threads += [threading.Thread(target=attacks, args=(run, f"127.0.4.{i + 1}")) for i in range(4)]
        for t in threads:
            t.daemon = True
            t.start()
        threads[0].join()
        time.sleep(4)
        alive = server.poll() is None and request(port, "GET", "/healthz", timeout=5)[0] == 200
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        stray_tmp = sorted(str(p) for p in (files_under(pathlib.Path("/tmp")) - files_under(pathlib.Path(tmp)) - before_tmp)
                           if "hopwise" in str(p))
    repo_after = subprocess.run(git_status, cwd=REPO, capture_output=True, text=True).stdout
    checks = {
        "server up at the end": alive,
        "every /healthz within 1 s": run.health_failures == 0 and run.health_checks > 0,
        f"RSS under {args.max_rss_mb:.0f} MB": run.rss_worst_mb < args.max_rss_mb,
        "every attack got its status": not run.problems,
        "no request got a 500": not any(500 in c for c in run.statuses.values()),
        "nothing written outside the run's folder": repo_before == repo_after and not stray_tmp,
    }
    report: Dict[str, Any] = {
        "minutes": args.minutes,
        "checks": checks,
        "healthz": {"checks": run.health_checks, "failures": run.health_failures, "worst_s": round(run.health_worst, 3)},
        "rss_worst_mb": round(run.rss_worst_mb, 1),
        "statuses": {k: dict(v) for k, v in sorted(run.statuses.items())},
        "problems": run.problems[:20],
        "stray_files": stray_tmp[:20],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, ok in checks.items():
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
        print(f"/healthz: {run.health_checks} checks, worst {run.health_worst:.3f} s; worst RSS {run.rss_worst_mb:.0f} MB")
        for attack, counts in report["statuses"].items():
            print(f"  {attack}: {counts}")
        for problem in report["problems"]:
            print(f"  problem: {problem}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
