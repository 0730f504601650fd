"""The command line: `mt ARGS` in this process (mt) or in a process of its own (mt_process), and the
one-line error a user sees (one_line)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
import torch

from mt.cli import main as cli


def mt(capsys, monkeypatch, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """`mt ARGS` in this process (with `stdin`'s text on stdin): (exit code, stdout, stderr)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
    monkeypatch.setattr(sys, "argv", ["mt", *map(str, args)])
    monkeypatch.delenv("MT_DEBUG", raising=False)
    code, threads = 0, torch.get_num_threads()
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code or 0
    finally:  # --threads (2 by default) set for the command, not for the tests after it in this process
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def mt_process(*args: str) -> subprocess.CompletedProcess:
    """`python -m mt ARGS` in a process of its own, on one thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, env=env, timeout=300)


def one_line(exc: pytest.ExceptionInfo, *needles: str) -> str:
    """The message of an error caught by pytest.raises: one short line holding each of `needles`."""
    message = str(exc.value)
    assert "\n" not in message and len(message) < 400, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message
