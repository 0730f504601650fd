"""The experiment's lock: one process at a time changes what training reads (`mt train`, and `mt
binarize`, which replaces data/), and a lock left by a dead process is free to take.

The lock is flock(2) on EXP/train.lock, held while the block runs. Taking it is one atomic step (no
moment where the file exists without its owner), and the kernel releases it when its process ends,
however it ends. The file holds the owner's pid, for the message a second trainer gets.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from mt.errors import MtError
from mt.experiment.paths import Experiment


@contextmanager
def experiment_lock(exp: Experiment) -> Iterator[None]:
    """Refuse a second trainer on `exp`; take over a lock left by a dead process."""
    exp.root.mkdir(parents=True, exist_ok=True)
    with directory_lock(exp.root, exp.lock_path, "trained or binarized"):
        yield


@contextmanager
def directory_lock(root: Path, lock_path: Path, doing: str) -> Iterator[None]:
    """The same lock for other work on an existing directory `root` (`doing`: what the refusal says is
    being done to it, e.g. "translated")."""
    fd = _take_lock(root, lock_path, doing)
    try:
        yield
    finally:
        lock_path.unlink(missing_ok=True)  # still held: a starter from now on makes a new file
        os.close(fd)


def _take_lock(root: Path, lock_path: Path, doing: str) -> int:
    """The open, flock-ed lock file, holding our pid; an error if a live process holds it."""
    for _ in range(100):
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _lock_owner(fd)
            os.close(fd)
            raise MtError(
                f"{root} is already being {doing} by {f'process {pid}' if pid else 'another process'} "
                f"(lock {lock_path}); wait for it or stop it"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # The owner before us may have removed the file between our open and our flock: we would
        # hold a file no one else opens. Only the file at lock_path counts; try again on that.
        try:
            at_path, held = os.stat(lock_path), os.fstat(fd)
            current = (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)
        except FileNotFoundError:
            current = False
        if current:
            os.ftruncate(fd, 0)  # a dead owner's pid, if any
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)
    raise MtError(f"{lock_path}: could not take the lock (it keeps being replaced)")


def _lock_owner(fd: int) -> int:
    """The pid in a lock file another process holds (0 if unreadable); it writes it just after taking
    the lock, so an empty file is read again for a moment."""
    for _ in range(50):
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return 0
        if text:
            return int(text) if text.isdigit() else 0
        time.sleep(0.01)
    return 0
