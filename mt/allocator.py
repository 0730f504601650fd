"""The memory allocator and the heap: process-wide settings that keep the CPU training step fast.

glibc hands large allocations to mmap and returns them to the kernel on free, so each training step
would pay page faults and zeroing again for its large activations (the logits above all); torch has
no caching allocator on the CPU, and a heap that keeps its memory (`keep_freed_memory`) is the
nearest thing: a freed block is reused by the next step. Batches change shape from step to step,
though, and the holes they leave in the heap add up, so `release_freed_memory` (malloc_trim) gives
the free pages back every few steps, with glibc's own trimming of the heap top (M_TRIM_THRESHOLD,
which a training step's pattern of frees hits over and over) turned off.

Even so the step slowed as a run went on while glibc's heap spread. tcmalloc (Debian's
libtcmalloc-minimal4) keeps per-size free lists instead: no drift, far fewer page faults, RSS flat.
It can only be chosen before the process starts, so the `mt` command (`use_tcmalloc`) starts itself
again with it preloaded. The measurements behind each choice: docs/performance-notes.md
(`bench/heap.py`, `bench/step_drift.py`).
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


ALLOCATOR_ENV = "MT_ALLOCATOR"  # "tcmalloc" (the default, where installed) or "system": the C library's
_TRIED_ENV = "_MT_TCMALLOC_TRIED"  # set on the restarted process: never loop


def _address(library: ctypes.CDLL, name: str) -> int | None:
    try:
        return ctypes.cast(getattr(library, name), ctypes.c_void_p).value
    except AttributeError:
        return None


def tcmalloc_loaded() -> bool:
    """Whether this process's malloc is tcmalloc's (not merely tcmalloc loaded behind another malloc)."""
    try:
        process = ctypes.CDLL(None)
    except OSError:
        return False
    tc_malloc = _address(process, "tc_malloc")
    return tc_malloc is not None and tc_malloc == _address(process, "malloc")


def allocator_name() -> str:
    """What serves malloc in this process, for benchmark records."""
    if tcmalloc_loaded():
        return "tcmalloc"
    return f"LD_PRELOAD={os.environ['LD_PRELOAD']}" if os.environ.get("LD_PRELOAD") else "system"


def _tcmalloc_library() -> str | None:
    return ctypes.util.find_library("tcmalloc_minimal") or ctypes.util.find_library("tcmalloc")


def _allocator_choice() -> str:
    choice = os.environ.get(ALLOCATOR_ENV, "tcmalloc")
    if choice not in ("tcmalloc", "system"):
        print(f"error: {ALLOCATOR_ENV}={choice}: expected tcmalloc or system", file=sys.stderr)
        sys.exit(2)
    return choice


def _tcmalloc_wanted() -> bool:
    """Linux, tcmalloc not declined (MT_ALLOCATOR) nor another preload chosen, and not yet in use."""
    return (
        platform.system() == "Linux"
        and _allocator_choice() == "tcmalloc"
        and not os.environ.get("LD_PRELOAD")
        and not tcmalloc_loaded()
    )


def use_tcmalloc() -> None:
    """Start this process again with tcmalloc preloaded: for the command-line entry points, before
    anything else ran. Returns where nothing is to be done -- not Linux, MT_ALLOCATOR=system,
    tcmalloc not installed or already in use, an LD_PRELOAD of the user's own (their choice stands),
    an interactive session or a program read from stdin; otherwise the process is replaced by one
    with the same arguments, environment (plus LD_PRELOAD) and standard streams, so pipes carry on."""
    if (
        not _tcmalloc_wanted()
        or os.environ.get(_TRIED_ENV)
        or sys.flags.interactive
        or sys.orig_argv[1:2] in ([], ["-"])
    ):
        return
    library = _tcmalloc_library()
    if library is None:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        os.execve(
            sys.executable, [sys.executable, *sys.orig_argv[1:]], {**os.environ, "LD_PRELOAD": library, _TRIED_ENV: "1"}
        )
    except OSError:  # no usable interpreter path: carry on with the C library's malloc
        return


def allocator_hint() -> str | None:
    """One line for the training log where this process could have had tcmalloc and has not; None
    where it is in use, or another choice was made (MT_ALLOCATOR=system, an LD_PRELOAD)."""
    if not _tcmalloc_wanted():
        return None
    library = _tcmalloc_library()
    if library is None:
        return (
            "glibc's malloc: CPU training slows as its heap ages; `apt-get install libtcmalloc-minimal4` "
            "and mt uses tcmalloc (MT_ALLOCATOR=system silences this)"
        )
    return (
        "glibc's malloc: tcmalloc is installed but this process was not started through the `mt` "
        f"command; LD_PRELOAD={library} gives it (MT_ALLOCATOR=system silences this)"
    )


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


def set_trim_threshold(nbytes: int) -> None:
    """glibc's M_TRIM_THRESHOLD, which `keep_freed_memory` puts out of reach; bench/heap.py sets
    glibc's default back to measure what that saves. Nothing to do before `keep_freed_memory`."""
    if _libc is not None:
        _libc.mallopt(_M_TRIM_THRESHOLD, nbytes)
