"""Files written atomically: to a temporary file beside the target, flushed to disk, then renamed
over it, and the directory flushed too, so that a reader never sees half a file, a crash leaves the
old one, and after a power cut the new name is there (a rename lives in the directory's own data,
which the file's fsync does not write). The temporary's name holds the writer's pid, so that one
left by a killed process can be told apart and removed.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from mt.errors import MtError

_umask = os.umask(0)
os.umask(_umask)
_FILE_MODE = 0o666 & ~_umask  # what open() would give a new file
DIR_MODE = 0o777 & ~_umask  # what mkdir would give a new directory (mkdtemp's are private)


HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"  # as a temporary's name holds it


def _tmp_prefix(path: Path) -> str:
    """A temporary file's name beside `path` starts ".NAME.PID@HOST-": a process killed while writing
    leaves it behind, and its dead pid on this host tells `remove_abandoned_temporaries` it is garbage
    (a directory on a shared volume holds other machines' writers too, whose pids mean nothing here)."""
    return f".{path.name}.{os.getpid()}@{HOST}-"


# `_tmp_prefix`'s, then mkstemp's 8 letters; without a host or a pid, the names of earlier versions:
# any other hidden .tmp file is not one mt wrote, and stays
_TMP_FILE = re.compile(
    r"\.(?P<name>.+)\.(?P<pid>\d+)(?:@(?P<host>[A-Za-z0-9-]+))?-\w{8}\.tmp|\.(?P<old>.+\.pt)\.\w{8}\.tmp"
)
# a temporary of no host, or another's (a container's name changes with each run), untouched so long
STALE_SECONDS = {"unnamed": 600, "elsewhere": 3600}


def remove_abandoned_temporaries(directory: Path) -> list[Path]:
    """Remove the temporary files that writers killed mid-write (SIGKILL, power loss) left in
    `directory`: those of this host's processes that are gone; one of another host, or of no host
    (an earlier version's), only once it has not changed for an hour, or ten minutes. Returns them."""
    removed = []
    now = time.time()
    for path in Path(directory).glob(".*.tmp") if Path(directory).is_dir() else []:
        match = _TMP_FILE.fullmatch(path.name)
        if not match or not path.is_file():
            continue
        pid, host = int(match.group("pid") or 0), match.group("host")
        try:
            age = now - path.stat().st_mtime
        except OSError:
            continue
        if host == HOST:
            gone = pid != os.getpid() and not pid_alive(pid)
        else:
            gone = age > STALE_SECONDS["unnamed" if host is None else "elsewhere"]
        if gone:
            try:
                path.unlink(missing_ok=True)
            except OSError:  # not ours to remove: harmless beside the checkpoints
                continue
            removed.append(path)
    return removed


def check_output(path: Path, force: bool, flag: str = "--output") -> None:
    """Refuse, before any work, an output mt cannot write or should not replace: a directory, or
    another file that is not a regular one (a device, a pipe: the rename would put a file in place
    of /dev/null), or an existing file without --force."""
    path = Path(path)
    _check_target(path, flag)
    if path.exists() and not force:
        raise MtError(f"{path}: exists; choose another {flag} or add --force")


def _check_target(path: Path, flag: str = "") -> None:
    where = f"{flag} {path}" if flag else str(path)
    if path.is_dir():
        raise MtError(f"{where}: is a directory; name a file")
    if path.exists() and not path.is_file():
        raise MtError(f"{where}: not a regular file (a device or a pipe); mt writes a file and renames it into place")


def _temporary_beside(path: Path) -> tuple[int, str]:
    """mkstemp beside `path`; its errors (a read-only directory, say) name `path`, not the temporary."""
    _check_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return tempfile.mkstemp(dir=path.parent, prefix=_tmp_prefix(path), suffix=".tmp")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def write_bytes_atomic(path: Path, data: bytes | memoryview) -> None:
    """Write to a temporary file beside `path`, flush it to disk, then rename over `path`."""
    path = Path(path)
    fd, tmp = _temporary_beside(path)
    try:
        os.fchmod(fd, _FILE_MODE)  # mkstemp makes files private; ours are ordinary files
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a full disk's error names no file: the one being written is said
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    sync_directory(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write to; it becomes `path` only if the block succeeds."""
    path = Path(path)
    fd, tmp = _temporary_beside(path)
    os.fchmod(fd, _FILE_MODE)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as written:  # what the block wrote, on disk before it takes the name
            os.fsync(written.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """Flush `directory`'s entries to disk: the commit point of a rename (or a replace) inside it."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_tree(root: Path) -> None:
    """Every file under `root` and every folder holding them flushed to disk (their writers, a zip, a
    converter's model.bin, do not): what a rename then commits is the whole tree."""
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for folder in {root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())}:
        sync_directory(folder)


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one existing file (an output that would replace its own input), by device
    and inode: on a case-insensitive file system README.md and readme.md resolve apart but are one file."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # either one missing (or unreadable); but a path through a folder not made yet,
        # `sub/../in.de`, names the file it will be once that folder is made
        return os.path.normpath(os.path.realpath(a)) == os.path.normpath(os.path.realpath(b))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
