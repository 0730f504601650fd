"""`mt serve` in the tests: uvicorn serving an app in a thread of this process on a loopback port
(Served), `python -m mt serve` in a process of its own on the port it chose (serve_process), requests to it (call, ok; raw_http on a socket of its own), the translator it serves (load) and a hook around the model's
decode (Hook)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

from helpers.toy import toy_corpus
from mt.decoding.translator import Translator

LINES = toy_corpus(24, seed=7)[0]


def load(experiment) -> Translator:
    """The experiment's translator, its output capped at 16 tokens (keeps the cut 1200-token line quick)."""
    translator = Translator.load(experiment, experiment.load_config())
    translator.decode_cfg.max_len_a, translator.decode_cfg.max_len_b = 0.0, 16
    return translator


class Served:
    """uvicorn serving `app` in a thread of this process, on a free loopback port."""

    def __init__(self, app):
        from mt.apps.serve.http import bind, uvicorn_server  # here: only the tests that serve import the server

        self.app = app
        self.sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn_server(app)  # as `mt serve` runs it
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def call(url: str, body=None, *, form=None, raw: bytes | None = None, headers: dict | None = None,
         timeout: float = 120):
    """(status, headers, parsed JSON) of a GET, or of a POST of `body` as JSON, `form` URL-encoded or `raw`."""
    head, data = dict(headers or {}), raw
    if body is not None:
        data, head["Content-Type"] = json.dumps(body).encode(), "application/json"
    elif form is not None:
        data, head["Content-Type"] = urlencode(form, doseq=True).encode(), "application/x-www-form-urlencoded"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, head), timeout=timeout) as response:
            return response.status, response.headers, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read())


def ok(url: str, body=None, **kwargs) -> dict:
    status, _, data = call(url, body, **kwargs)
    assert status == 200, (status, data)
    return data


def raw_http(url: str, head: str, parts: list[bytes], timeout: float = 20) -> tuple[int, dict]:
    """Send `head` and then `parts` one by one (without ending a chunked body) on a socket of its own;
    (status, JSON) of the answer, which must come before `timeout`."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head.encode())
        try:
            for part in parts:
                sock.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while we were still sending: what a limit should do
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head_text, body = data.split(b"\r\n\r\n", 1)
    return int(head_text.split()[1]), json.loads(body[: _length(data)])


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


class Hook:
    """Around the model's `decode`, which every search calls each step: a gate that holds the worker
    inside a search, and a switch that makes the next step raise, a RuntimeError (True) or the
    exception given (plain Python around our own code; torch is left alone)."""

    def __init__(self, translator: Translator):
        self.decode = translator.model.decode
        self.gate, self.entered = threading.Event(), threading.Event()
        self.gate.set()
        self.fail = False
        translator.model.decode = self

    def __call__(self, *args, **kwargs):
        self.entered.set()
        assert self.gate.wait(60)
        if self.fail:
            fail, self.fail = self.fail, False
            raise fail if isinstance(fail, BaseException) else RuntimeError("injected failure")
        return self.decode(*args, **kwargs)


def serve_process(cwd: Path, log_path: Path, *args: str, env: dict | None = None,
                  timeout: float = 120) -> tuple[subprocess.Popen, str | None]:
    """`python -m mt serve ARGS --host 127.0.0.1 --port 0` in a process of its own, its stdout and stderr
    into `log_path`, once its /health answers: the process and its URL, read from its start line (port
    0: the port the server bound itself, which no other test process can take first, where a port
    probed free beforehand could be). The URL is None when the process exited first (its log says
    why); a server that never answers fails the test. The caller stops the process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    for name in ("MT_DEBUG", "MT_API_KEY"):  # a key only where ARGS give one
        env.pop(name, None)
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "mt", "serve", *args, "--host", "127.0.0.1", "--port", "0"],
                                   stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    deadline, url = time.monotonic() + timeout, None
    while True:
        if process.poll() is not None:
            return process, None
        if url is None and (started := re.search(r"http://127\.0\.0\.1:(\d+)", log_path.read_text(errors="replace"))):
            url = f"http://127.0.0.1:{started[1]}"
        try:
            if url is not None and call(f"{url}/health", timeout=10)[0] == 200:
                return process, url
        except OSError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise AssertionError(f"mt serve did not answer /health in {timeout:.0f} s:\n{log_path.read_text()}")
        time.sleep(0.1)
