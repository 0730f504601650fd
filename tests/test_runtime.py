"""The process-wide allocator choice (mt/runtime.py): `mt` starts itself again with tcmalloc preloaded
where it is installed, keeps its arguments, environment and stdin doing so, and leaves it when asked."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROBE = ("import sys; from mt.runtime import *; use_tcmalloc(); "
         "print(tcmalloc_loaded(), keep_freed_memory(), allocator_hint() is not None, sys.argv[1:], sys.stdin.read())")

installed = ctypes.util.find_library("tcmalloc_minimal") is not None
# CI installs libtcmalloc-minimal4 (README): there these tests must run, not skip
needs_tcmalloc = pytest.mark.skipif(not installed and not os.environ.get("CI"),
                                    reason="libtcmalloc-minimal4 not installed")


def probe(env: dict[str, str], *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MT_ALLOCATOR", "_MT_TCMALLOC_TRIED")} | env
    done = subprocess.run([sys.executable, "-c", PROBE, *args], input="from stdin\n", capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@needs_tcmalloc
def test_restarts_with_tcmalloc_keeping_arguments_and_stdin():
    # glibc's heap tuning steps aside: tcmalloc keeps freed memory itself
    assert probe({}, "--flag", "a b") == "True False False ['--flag', 'a b'] from stdin"


def test_system_allocator_on_request():
    expected = "False True" if sys.platform == "linux" else "False False"
    assert probe({"MT_ALLOCATOR": "system"}, "x") == f"{expected} False ['x'] from stdin"


@pytest.mark.skipif(sys.platform != "linux", reason="the hint is for Linux's glibc")
def test_training_log_hints_at_tcmalloc_where_it_is_not_used():
    # as where the library is missing: no restart, glibc's malloc, and one line saying what to install
    assert probe({"_MT_TCMALLOC_TRIED": "1"}) == "False True True [] from stdin"


@needs_tcmalloc
def test_cli_runs_under_tcmalloc(tmp_path):
    # the real entry point: `python -m mt` restarts once and then works as usual
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mt", "--help"], capture_output=True, text=True,
                          cwd=REPO, timeout=60, env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert done.returncode == 0, done.stderr
    assert "translate" in done.stdout
    # -X importtime logs each import: twice `mt.runtime` means the process started twice, and not more
    assert done.stderr.count("| mt.runtime") == 2
