"""Reading text: corpora's UTF-8 lines, plain or gzip, streamed in batches; and `mt translate`'s
input, a file or stdin, line by line as it arrives (`input_lines`).

Only '\\n' ends a line: str.splitlines would also split at U+2028, form feeds etc. and break the
alignment of parallel files. A '\\r' before it is dropped, and so is a BOM at the start of a file.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import itertools
import os
import select
import stat
import sys
import zlib
from pathlib import Path
from typing import Iterator

from mt.errors import MtError

BATCH_LINES = 20_000  # lines per batch read from a file
_BOM = b"\xef\xbb\xbf"


CR_ONLY = "its lines end in a carriage return alone (CR, old Mac files); convert them to LF (mac2unix)"


def read_lines(
    path: str | os.PathLike, invalid: list[str] | None = None, positions: list[int] | None = None
) -> list[str]:
    """UTF-8 lines of a text file (gzip if the name ends in .gz), without line endings. A line that is
    not UTF-8 is an error naming it, or, given `invalid`, left out and named there ("FILE:LINE: why");
    given `positions`, each line's place in the file (from 0) is appended to it.

    Only '\\n' ends a line (str.splitlines would also split at U+2028, form feeds etc. and break
    the alignment of parallel files); a '\\r' before it is dropped, and so is a leading BOM.
    """
    lines = []
    for start, batch in line_batches(str(path), BATCH_LINES):
        for i, raw in enumerate(batch):
            try:
                lines.append(raw.decode("utf-8"))
                if positions is not None:
                    positions.append(start + i)
            except UnicodeDecodeError as exc:
                message = f"{path}:{start + i + 1}: not valid UTF-8 (byte {raw[exc.start]:#04x})"
                if invalid is None:
                    raise MtError(message) from None
                invalid.append(message)
    return lines


def read_parallel_files(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Two line-aligned files; an error naming both files if their line counts differ."""
    src_lines = read_lines(src_path)
    tgt_lines = read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise mismatch_error(src_path, len(src_lines), tgt_path, len(tgt_lines))
    return src_lines, tgt_lines


def mismatch_error(src_path, src_count: int, tgt_path, tgt_count: int) -> MtError:
    return MtError(
        f"{src_path} has {src_count} lines but {tgt_path} has {tgt_count}: parallel files must be line-aligned"
    )


# What a file that is not UTF-8 text starts with: refused by name (its bytes would pass for lines of
# garbage, or be counted as invalid UTF-8 one by one); gzip is read whatever the file's name.
NOT_TEXT = {
    b"\xff\xfe": "UTF-16 text (its byte-order mark); mt reads UTF-8: convert it (iconv -f UTF-16 -t UTF-8)",
    b"\xfe\xff": "UTF-16 text (its byte-order mark); mt reads UTF-8: convert it (iconv -f UTF-16 -t UTF-8)",
    b"\xfd7zXZ\x00": "compressed with xz; mt reads plain text or gzip: decompress it (unxz)",
    b"\x28\xb5\x2f\xfd": "compressed with zstd; mt reads plain text or gzip: decompress it (unzstd)",
    b"PK\x03\x04": "a zip archive; mt reads plain text or gzip: unzip it",
}
_GZIP = b"\x1f\x8b"


def open_binary(path: str):
    """A corpus file's bytes, gzip decompressed (by its name or its first bytes); MtError for a file
    that is not UTF-8 text by its first bytes (NOT_TEXT, NUL bytes, lines ended by CR alone)."""
    try:
        raw = open(path, "rb")  # opened once: a pipe (<(...), a FIFO) cannot be read again
    except FileNotFoundError:
        raise MtError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MtError(f"{path}: is a directory, expected a text file") from None
    except OSError as exc:
        raise MtError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        gzipped = path.endswith(".gz") or raw.peek(2)[:2] == _GZIP
    except OSError as exc:
        raw.close()
        raise MtError(f"{path}: cannot read ({exc.strerror or exc})") from None
    handle = _OwningGzip(raw) if gzipped else raw
    try:
        head = handle.peek(1 << 16)[: 1 << 16]
    except (EOFError, OSError, zlib.error):
        return handle  # a broken gzip file: reading it says so, naming it
    problem = next((why for start, why in NOT_TEXT.items() if head.startswith(start)), None)
    if problem is None and head[:3] == b"BZh" and head[4:10] == b"1AY&SY":  # bzip2's, its block size between
        problem = "compressed with bzip2; mt reads plain text or gzip: decompress it (bunzip2)"
    if problem is None and head.count(b"\x00") > len(head) // 8:  # a stray one in a crawl is cleaned, not this
        problem = "mostly NUL bytes: UTF-16 or binary, not UTF-8 text"
    if problem is None and b"\r" in head and b"\n" not in head and len(head) > 1:
        problem = CR_ONLY
    if problem is not None:
        handle.close()
        raise MtError(f"{path}: {problem}")
    return handle


class _OwningGzip(gzip.GzipFile):
    """gzip over a file already open, closed with it (GzipFile leaves a file object it is given open)."""

    def __init__(self, raw):
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _strip_newline(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
    return line[:-1] if line.endswith(b"\r") else line


def line_batches(path: str, size: int) -> Iterator[tuple[int, list[bytes]]]:
    """(0-based number of the first line, up to `size` lines as bytes without line endings), streamed.

    Only b'\\n' ends a line; a b'\\r' before it goes, and so does a BOM at the start of the file.
    """
    with open_binary(path) as handle, read_errors(path):
        start = 0
        while True:
            batch = [_strip_newline(line) for line in itertools.islice(handle, size)]
            if not batch:
                return
            if start == 0 and batch[0].startswith(_BOM):
                batch[0] = batch[0][len(_BOM) :]
            yield start, batch
            start += len(batch)


@contextlib.contextmanager
def read_errors(path: str | os.PathLike) -> Iterator[None]:
    """A file that breaks while it is read (a gzip file cut short or damaged, a disk error) as one line
    naming it: a traceback of EOFError, or gzip's CRC message naming no file, was all one saw."""
    try:
        yield
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise MtError(f"{path}: broken gzip file ({exc})") from None
    except OSError as exc:
        raise MtError(f"{path}: cannot read ({exc.strerror or exc})") from None


def count_lines(path: str) -> int:
    """Lines of a plain file, counted in blocks (fast): the last line may lack its '\\n'."""
    count, last = 0, b"\n"
    with open_binary(path) as handle, read_errors(path):
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def existing(path: str) -> str:
    """The file, or FILE.gz when only that exists (a prepared corpus may be left compressed)."""
    if not Path(path).exists() and Path(path + ".gz").exists():
        return path + ".gz"
    return path


def check_input(path: Path | None) -> None:
    """An input file that is not there (or is a directory): one line, before anything is loaded. A pipe
    (a FIFO, <(...), /dev/stdin) is an input too."""
    if path is None or str(path) == "-" or path.is_file() or path.is_fifo() or path.is_char_device():
        return
    raise MtError(f"{path}: no such input file" + (" (it is a directory)" if path.is_dir() else ""))


def is_regular(path: Path | None) -> bool:
    """Whether `path` names a regular file, one that can be read twice (counted, then translated)."""
    return path is not None and str(path) != "-" and path.is_file()


def input_lines(path: Path | None, encoding: str = "utf-8") -> Iterator[str | None]:
    """Lines of a file (gzip too) or of stdin (None, or "-" as every Unix tool takes it), read as
    they arrive; invalid UTF-8 (or bytes `encoding`, one that writes a line break as b"\\n", cannot
    read) is an error naming the line."""
    if path is not None and str(path) == "-":
        path = None
    check_input(path)
    if path is None and sys.stdin is None:  # started with stdin closed (`mt translate <&-`)
        raise MtError("stdin is closed: give the text on stdin or with --input FILE")
    stream = open(path, "rb") if path is not None else sys.stdin.buffer
    gzipped = path is not None and stream.peek(2)[:2] == _GZIP
    if gzipped:  # a file left compressed, read as the corpora are (whole, also from a pipe)
        stream = _OwningGzip(stream)
    name = str(path) if path is not None else "<stdin>"
    utf8 = codecs.lookup(encoding).name == "utf-8"
    try:  # a pipe or terminal, stdin or a FIFO named by --input (`<(...)`): answered at its pauses
        piped = not gzipped and not stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError):  # io.UnsupportedOperation: an in-memory stdin, read as a file is
        piped = False
    # What the peek above read into the buffer, which reads of the descriptor below would pass over
    # (read1 returns the buffered bytes alone when there are any)
    head = stream.read1() if piped and path is not None else b""

    def lines():
        with stream, read_errors(name):
            raws = _arriving(stream.fileno(), head) if piped else iter(stream.readline, b"")
            number = 0
            for raw in raws:
                if raw is None:
                    yield None
                    continue
                number += 1
                # An editor's byte-order mark is not text (as the corpus readers read it)
                if number == 1 and utf8 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]
                # Lines that end in CR alone are one line to us: all the text, with no line feed at all (a
                # last line without one may hold a carriage return of its own)
                if number == 1 and b"\n" not in raw and b"\r" in raw.rstrip(b"\r"):
                    raise MtError(f"{name}:{number}: {CR_ONLY}")
                try:
                    yield raw.decode(encoding)
                except UnicodeDecodeError:
                    raise MtError(f"{name}:{number}: not valid {'UTF-8' if utf8 else encoding}") from None

    return lines()


def _arriving(fd: int, head: bytes = b"") -> Iterator[bytes | None]:
    """The lines of a pipe or terminal as they arrive (`head`: its first bytes, read already), and None
    each time it has no whole line ready: whoever types or sends a line and waits gets its translation
    then, not after 256 lines (fairseq's interactive mode and Marian do the same). Read in blocks, not
    through a buffered reader, so that select(2) tells the truth about what is left."""
    pending, block = bytearray(), head
    while True:
        if not block:
            if not select.select([fd], [], [], 0)[0]:
                yield None
                select.select([fd], [], [])
            block = os.read(fd, 1 << 16)
            if not block:
                break
        scanned = len(pending)  # what is pending holds no line break: a long line is not scanned again
        pending += block
        block = b""
        start = 0
        while (end := pending.find(b"\n", max(start, scanned))) >= 0:
            yield bytes(pending[start : end + 1])
            start = end + 1
        del pending[:start]
    if pending:
        yield bytes(pending)
