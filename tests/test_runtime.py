"""mt.runtime: large blocks from the heap (fast reuse), free pages given back (bounded memory)."""

import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mt import runtime


def _rss_mb() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt/malloc_trim are glibc's")
def test_freed_blocks_are_given_back_after_trim():
    assert runtime.keep_freed_memory() is True
    blocks = [torch.ones(64, 1024, 1024 // 4 + i) for i in range(4)]  # ~64 MB each, from the heap now
    del blocks[:3]  # holes below a live block: glibc's own trimming cannot return them
    before = _rss_mb()
    runtime.release_freed_memory()
    assert before - _rss_mb() > 100  # at least ~150 MB of the 192 MB freed went back
    del blocks


FAULTS_OF_REUSE = """
import ctypes, resource
from mt import runtime
assert runtime.keep_freed_memory()
libc = runtime._libc
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


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt/malloc_trim are glibc's")
def test_a_freed_block_is_reused_without_page_faults():
    """glibc's own trimming is off: a block freed at the top of the heap stays mapped, so the next
    allocation of its size (the next step's activation) costs no page faults; with glibc's default
    128 KB trim threshold each cycle faults all 16,384 of its pages in again. A fresh process, so
    that the block is at the top of the heap."""
    result = subprocess.run([sys.executable, "-c", FAULTS_OF_REUSE], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1], check=True)
    assert int(result.stdout) < 1000
