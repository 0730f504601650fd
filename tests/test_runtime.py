"""mt.runtime: large blocks from the heap (fast reuse), free pages given back (bounded memory)."""

import platform

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


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt/malloc_trim are glibc's")
def test_a_freed_block_at_the_heap_top_stays_for_reuse_until_trim():
    """glibc's own trimming is off: a step's freed activations stay mapped for the next step."""
    assert runtime.keep_freed_memory() is True
    runtime.release_freed_memory()
    block = torch.ones(64, 1024, 1024 // 4)  # 64 MB, at the top of the heap
    with_block = _rss_mb()
    del block
    assert with_block - _rss_mb() < 16  # still mapped: no page faults when the next step needs it
    runtime.release_freed_memory()
    assert with_block - _rss_mb() > 48
