"""Process-wide settings that make the CPU paths fast.

glibc hands every allocation over 32 MB (and by default those over 128 KB) to mmap and returns it
to the kernel on free, so each training step pays page faults and zeroing again for its large
activations: allocating and filling the 4096 x 8000 fp32 logits of the benchmark preset takes 34 ms
that way against 5 ms from a heap that keeps its memory (log_softmax over them: 44 ms against 13).
Serving them from the heap lets a freed block be reused by the next step. torch has no caching allocator on the CPU; this is the nearest thing.
Measured on the benchmark preset, bf16, 15 steps: 4,305 tgt tok/s and 1.74 GB peak RSS without,
5,450 and 1.95 GB with. But batches change shape from step to step, and the holes they leave in the
heap add up: 3.5 GB after 160 steps, 6 GB in a 12-minute run. `release_freed_memory` (malloc_trim)
every few steps gives the free pages back (1.0 GB right after each trim, ~2.4 GB in between; a
12-minute run peaks at 4.45 GB instead of 6). And glibc itself gives back the top of the heap
whenever more than 128 KB is free there (M_TRIM_THRESHOLD), which a training step's pattern of
frees hits over and over: 40,000 page faults per step of the one-hour recipe's model, and a step
slower than with glibc's defaults (411 ms against 387). With glibc's own trimming off and
malloc_trim every 10 updates: 15,000 faults and 324 ms (`python bench/heap.py`, bench/results/heap.json).

Even so the step slowed as a run went on (~10k target tokens/s in the first updates, ~8k after a few
hundred) while glibc's heap spread. tcmalloc (Debian's libtcmalloc-minimal4) keeps per-size free lists
instead: no drift, a few hundred page faults per update against 16,000, RSS flat
(`MT_ALLOCATOR=system python bench/step_drift.py ...` against the default). It can only be chosen
before the process starts, so `use_tcmalloc` starts the process again with it preloaded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import sys

_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
_M_MMAP_MAX = -4
_NEVER = 1 << 30  # a trim threshold no heap top reaches: release_freed_memory decides when
_libc = None  # set once keep_freed_memory() took effect


ALLOCATOR_ENV = "MT_ALLOCATOR"  # "system" keeps the C library's malloc
_TRIED_ENV = "_MT_TCMALLOC_TRIED"  # set on the re-executed process: never loop


def tcmalloc_loaded() -> bool:
    """Whether this process's malloc is tcmalloc's (preloaded, or linked in)."""
    try:
        return hasattr(ctypes.CDLL(None), "MallocExtension_GetAllocatedSize")
    except OSError:
        return False


def use_tcmalloc() -> None:
    """Start this process again with tcmalloc preloaded (Linux, where it is installed and not loaded).
    Returns only where nothing is to be done; otherwise the process is replaced, with the same
    arguments, environment (LD_PRELOAD added) and open files, so stdin and pipes carry on."""
    if (platform.system() != "Linux" or os.environ.get(ALLOCATOR_ENV, "tcmalloc") != "tcmalloc"
            or os.environ.get(_TRIED_ENV) or tcmalloc_loaded()):
        return
    library = ctypes.util.find_library("tcmalloc_minimal") or ctypes.util.find_library("tcmalloc")
    if library is None:
        return
    preload = " ".join(filter(None, [library, os.environ.get("LD_PRELOAD")]))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]],
              {**os.environ, "LD_PRELOAD": preload, _TRIED_ENV: "1"})


def allocator_hint() -> str | None:
    """One line for the training log where a faster malloc could be had; None where it is in use or
    was declined (MT_ALLOCATOR=system)."""
    if platform.system() != "Linux" or os.environ.get(ALLOCATOR_ENV, "tcmalloc") != "tcmalloc" or tcmalloc_loaded():
        return None
    return ("glibc's malloc: CPU training slows as its heap ages; `apt-get install libtcmalloc-minimal4` "
            "and mt uses tcmalloc (MT_ALLOCATOR=system silences this)")


def keep_freed_memory() -> bool:
    """Ask glibc to serve large blocks from the heap and keep what is freed, for reuse (until
    `release_freed_memory`); False where malloc is not glibc's (tcmalloc keeps freed memory itself)."""
    global _libc
    if _libc is not None:
        return True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or tcmalloc_loaded():
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if libc.mallopt(_M_MMAP_MAX, 0) != 1 or libc.mallopt(_M_TRIM_THRESHOLD, _NEVER) != 1:
            return False
    except (OSError, AttributeError):
        return False
    _libc = libc
    return True


def release_freed_memory() -> None:
    """Return the heap's free pages to the kernel (after `keep_freed_memory`; else nothing to do)."""
    if _libc is not None:
        _libc.malloc_trim(0)
