"""mt.allocator and mt.hardware: tcmalloc where installed (the `mt` command restarts itself with it, keeping its arguments,
environment and stdin, and leaves it when asked); else glibc's heap tuned: large blocks from the heap
(fast reuse), free pages given back (bounded memory)."""

from __future__ import annotations

import ctypes.util
import os
import platform
import subprocess
import sys

import pytest
import torch
from helpers import REPO

from mt import allocator, hardware

CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MT_ALLOCATOR", "_MT_TCMALLOC_TRIED")}
glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt/malloc_trim are glibc's")
# CI installs libtcmalloc-minimal4 (README): there the tcmalloc tests must run, not skip
needs_tcmalloc = pytest.mark.skipif(ctypes.util.find_library("tcmalloc_minimal") is None and not os.environ.get("CI"),
                                    reason="libtcmalloc-minimal4 not installed")


def _rss_mb() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20


@glibc
@pytest.mark.skipif(allocator.tcmalloc_loaded(), reason="pytest itself runs under tcmalloc")
def test_freed_blocks_are_given_back_after_trim():
    assert allocator.keep_freed_memory() is True
    blocks = [torch.ones(64, 1024, 1024 // 4 + i) for i in range(4)]  # ~64 MB each, from the heap now
    del blocks[:3]  # holes below a live block: glibc's own trimming cannot return them
    before = _rss_mb()
    allocator.release_freed_memory()
    assert before - _rss_mb() > 100  # at least ~150 MB of the 192 MB freed went back
    del blocks


FAULTS_OF_REUSE = """
import ctypes, ctypes.util, resource
from mt import allocator
assert allocator.keep_freed_memory()
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")  # the process's glibc: mallopt is process-wide
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
size = 64 << 20
def cycle():
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    cycle()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@glibc
def test_a_freed_block_is_reused_without_page_faults():
    """glibc's own trimming is off: a block freed at the top of the heap stays mapped, so the next
    allocation of its size (the next step's activation) costs no page faults; with glibc's default
    128 KB trim threshold each cycle faults all 16,384 of its pages in again. A fresh process, so
    that the block is at the top of the heap."""
    result = subprocess.run([sys.executable, "-c", FAULTS_OF_REUSE], capture_output=True, text=True,
                            cwd=REPO, env=CLEAN_ENV, check=True)
    assert int(result.stdout) < 1000


PROBE = ("import sys; from mt.allocator import *; use_tcmalloc(); "
         "print(allocator_name(), keep_freed_memory(), allocator_hint() is not None, sys.argv[1:], sys.stdin.read())")


def probe(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, *args], input="from stdin\n", capture_output=True, text=True,
                          cwd=REPO, env=CLEAN_ENV | env, timeout=60)


def probed(env: dict[str, str], *args: str) -> str:
    done = probe(env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@needs_tcmalloc
def test_restarts_with_tcmalloc_keeping_arguments_and_stdin():
    # glibc's heap tuning steps aside: tcmalloc keeps freed memory itself
    assert probed({}, "--flag", "a b") == "tcmalloc False False ['--flag', 'a b'] from stdin"


@glibc
def test_system_allocator_on_request():
    assert probed({"MT_ALLOCATOR": "system"}, "x") == "system True False ['x'] from stdin"


def test_unknown_allocator_is_refused_naming_the_variable():
    done = probe({"MT_ALLOCATOR": "jemalloc"})
    assert done.returncode == 2
    assert done.stderr.strip() == "error: MT_ALLOCATOR=jemalloc: expected tcmalloc or system"


@needs_tcmalloc
@glibc
def test_a_preload_of_the_users_own_stands():
    # the user's LD_PRELOAD (here one that changes nothing) is their choice: no restart, no hint
    assert probed({"LD_PRELOAD": "libc.so.6"}) == "LD_PRELOAD=libc.so.6 True False [] from stdin"


@glibc
def test_training_log_hints_at_tcmalloc_where_it_is_not_used():
    # as where the restart did not happen: glibc's malloc, and one line saying how to get tcmalloc
    out = probed({"_MT_TCMALLOC_TRIED": "1"})
    assert out == "system True True [] from stdin"


@needs_tcmalloc
def test_mt_command_restarts_once_under_tcmalloc():
    # the real entry point: `python -m mt` restarts once and then works as usual; -X importtime logs
    # each import, so `cli.main` imported twice means the process started twice, and not more
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mt", "--help"], capture_output=True, text=True,
                          cwd=REPO, timeout=60, env=CLEAN_ENV)
    assert done.returncode == 0, done.stderr
    assert "translate" in done.stdout
    assert done.stderr.count("| mt.cli.main") == 2


def test_too_slow_decides_from_given_timings():
    # GFLOP/s as measured: an AVX2-only EPYC (no bf16/fp16 hardware), Zen 4, a Xeon with AMX hidden.
    epyc = {"fp32": 110.0, "bf16": 1.1, "fp16": 0.9}
    assert hardware.too_slow("bf16", epyc) == "bf16 is 100x slower than fp32 on this CPU"
    assert hardware.too_slow("fp16", epyc) == "fp16 is 122x slower than fp32 on this CPU"
    assert hardware.too_slow("bf16", {"fp32": 172.0, "bf16": 444.0}) is None  # 2.6x faster
    assert hardware.too_slow("bf16", {"fp32": 357.0, "bf16": 183.0}) is None  # 2x slower: worth a try, no warning
    assert hardware.too_slow("bf16", {"fp32": 100.0, "bf16": 10.0}) == "bf16 is 10x slower than fp32 on this CPU"
    assert hardware.too_slow("bf16", {"fp32": 100.0, "bf16": 10.5}) is None  # 9.5x: under the factor
    for precision in ("fp32", "auto"):
        assert hardware.too_slow(precision, epyc) is None
    assert hardware.slowdown("fp32") == 1.0


def test_slowdown_is_a_short_timing_done_once_and_leaves_the_threads_alone():
    import math
    import time

    threads = torch.get_num_threads()
    hardware.short_matmul_gflops.cache_clear()
    start = time.perf_counter()
    ratio = hardware.slowdown("bf16")
    assert math.isfinite(ratio) and ratio > 0
    assert time.perf_counter() - start < 5  # a short product, even at ~1 GFLOP/s
    assert torch.get_num_threads() == threads
    start = time.perf_counter()
    assert hardware.slowdown("bf16") == ratio and time.perf_counter() - start < 0.01  # cached
    assert (hardware.too_slow("bf16") is None) == (ratio < hardware.SLOW_PRECISION_FACTOR)
