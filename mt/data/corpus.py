"""Parallel text in: the sources of a split (mt.config.sources) read as a stream of chunks, decoded and
cleaned with counts per reason, and a bounded random sample for the tokenizer.

A split comes from one or more `Source`s, each read as a stream of `RawChunk`s of a few thousand
pairs, so that no corpus has to fit in memory. `decode_chunk` turns a chunk into text pairs, either
strictly (bad input is an error naming the file and line: valid/test, or cleaning off) or cleaning
(bad pairs are skipped and counted per reason: the train split by default). `load_split` returns a
whole split as lists of raw lines (valid/test references for scoring, small corpora).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import os
import re
import unicodedata
from array import array
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from mt.config.sources import SPLITS, Source  # noqa: F401  (SPLITS: the split names, for callers)
from mt.data import ding, hub, text_files
from mt.data.text_files import read_lines, read_parallel_files  # noqa: F401  (re-exported: the corpus readers)
from mt.errors import MtError

Pair = tuple[str, str]
CHUNK_PAIRS = 20_000  # pairs per chunk read from a source
MAX_EXAMPLES = 10  # lines named per drop reason and chunk
DROP_REASONS = ("invalid_utf8", "malformed", "empty")  # what decode_chunk drops when cleaning


# ---------------------------------------------------------------------------------------------
# Sources as streams of chunks


@dataclass
class RawChunk:
    """Up to CHUNK_PAIRS consecutive pairs of a source, as read: not yet decoded or checked."""

    fmt: str  # "bytes": a byte line per side; "text": str (or bad values) per side; "tsv", "jsonl": a byte line per pair, in src
    src: list
    tgt: list | None
    origin: tuple[str, str]  # the file (or dataset) of each side, for messages
    start: int  # 0-based position of the first pair in its source
    langs: tuple[str, str] = ("", "")  # jsonl, hf: the language keys of source and target
    columns: tuple[int, int] = (0, 1)  # tsv
    unit: str = "line"  # "line": messages say FILE:N; else "DATASET record N"
    positions: list[int] | None = None  # positions in the source when not consecutive (a sample)

    def __len__(self) -> int:
        return len(self.src)

    def position(self, i: int) -> int:
        return self.positions[i] if self.positions is not None else self.start + i

    def where(self, i: int, side: int = 0) -> str:
        number = self.position(i) + 1
        return f"{self.origin[side]}:{number}" if self.unit == "line" else f"{self.origin[side]} {self.unit} {number}"

    def take(self, picks) -> RawChunk:
        """The pairs at these indices, as a chunk that still names their lines."""
        return dataclasses.replace(
            self,
            src=[self.src[i] for i in picks],
            tgt=None if self.tgt is None else [self.tgt[i] for i in picks],
            positions=[self.position(i) for i in picks],
        )


def chunks(source: Source, size: int | None = None) -> Iterator[RawChunk]:
    """The pairs of one source, read as a stream of chunks of up to `size` (CHUNK_PAIRS) pairs."""
    size = size or CHUNK_PAIRS
    for path in source.paths if source.kind in ("files", "tsv", "jsonl") else ():
        _check_regular(text_files.existing(path))
    if source.kind == "files":
        yield from _file_chunks(*(text_files.existing(path) for path in source.paths), size)  # type: ignore[call-arg]
    elif source.kind in ("tsv", "jsonl"):
        path = source.paths[0]
        for start, lines in text_files.line_batches(path, size):
            yield RawChunk(source.kind, lines, None, (path, path), start, source.langs, source.columns)
    elif source.kind == "hf":
        what = hub.describe(source)
        start = 0
        for src, tgt in hub.batches(source, size):
            yield RawChunk("text", src, tgt, (what, what), start, source.langs, unit="record")
            start += len(src)
    elif source.kind == "ding":
        src, tgt = ding.ding_part(source.paths[0], source.part, source.langs)
        origin = (source.paths[0], source.paths[0])
        for start in range(0, len(src), size):
            end = start + size
            yield RawChunk("text", src[start:end], tgt[start:end], origin, start, source.langs, unit="pair")
    else:
        raise MtError(f"unknown source kind {source.kind!r}")


def _check_regular(path: str) -> None:
    """A corpus is a file: a pipe (a FIFO, `<(...)`) is read once, and a corpus is read more than once
    (the tokenizer's sample, binarize, a count of its lines): the second read waited for ever."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing: the reader names it
    if stat.S_ISDIR(mode):
        raise MtError(f"{path}: is a directory, not a corpus file")
    if stat.S_ISFIFO(mode):
        raise MtError(f"{path}: a pipe: mt reads a corpus more than once; save it to a file first")


def _file_chunks(src_path: str, tgt_path: str, size: int) -> Iterator[RawChunk]:
    """Two line-aligned files in step; different line counts are an error naming both files."""
    if not src_path.endswith(".gz") and not tgt_path.endswith(".gz"):  # cheap to check before starting
        src_count, tgt_count = text_files.count_lines(src_path), text_files.count_lines(tgt_path)
        if src_count != tgt_count:
            raise text_files.mismatch_error(src_path, src_count, tgt_path, tgt_count)
    src_batches, tgt_batches = text_files.line_batches(src_path, size), text_files.line_batches(tgt_path, size)
    start = 0
    for _, src in src_batches:
        tgt = next(tgt_batches, (0, []))[1]
        if len(src) != len(tgt):
            src_count = start + len(src) + sum(len(b) for _, b in src_batches)
            tgt_count = start + len(tgt) + sum(len(b) for _, b in tgt_batches)
            raise text_files.mismatch_error(src_path, src_count, tgt_path, tgt_count)
        yield RawChunk("bytes", src, tgt, (src_path, tgt_path), start)
        start += len(src)
    rest = sum(len(b) for _, b in tgt_batches)
    if rest:
        raise text_files.mismatch_error(src_path, start, tgt_path, start + rest)


# ---------------------------------------------------------------------------------------------
# Decoding and cleaning

# C0 and C1 control characters other than tab, line feed and carriage return (whitespace, below).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(text: str, normalize: str, fixed: dict[str, int]) -> str:
    """Control characters become spaces, Unicode is normalised (NFC/NFKC), whitespace runs become one
    space and the ends are trimmed; `fixed` counts the lines each step changed."""
    if _CONTROL.search(text) or "\ufeff" in text:  # a byte-order mark inside a file (`cat a.de b.de` of
        # files saved with one; only the first goes as the file is read), or a zero-width no-break space
        # inside a word: deleted, not a space
        text = _CONTROL.sub(" ", text.replace("\ufeff", ""))
        fixed["control"] += 1
    if normalize != "none":
        form = normalize.upper()
        if not unicodedata.is_normalized(form, text):
            text = unicodedata.normalize(form, text)
            fixed["unicode"] += 1
    collapsed = " ".join(text.split())
    if collapsed != text:
        fixed["whitespace"] += 1
    return collapsed


class LineOrigins:
    """Where each of a list of lines was read, kept compactly (a label per file, a number per line): a
    warning about one of them names it there (FILE:LINE, DATASET record N), not by its place in the list
    (`mt distill` and `mt backtranslate` leave out lines that are no text, empty or held out)."""

    def __init__(self) -> None:
        self._labels: list[tuple[str, str]] = []  # (file or dataset, unit: "line" or "record"...)
        self._known: dict[tuple[str, str], int] = {}
        self._label = array("l")  # per line: its label's index
        self._position = array("q")  # per line: its place in its file, from 0

    def __len__(self) -> int:
        return len(self._label)

    def add(self, origin: str, unit: str, positions: Sequence[int]) -> None:
        """Lines read from `origin` at these places, after those added before."""
        index = self._known.setdefault((origin, unit), len(self._labels))
        if index == len(self._labels):
            self._labels.append((origin, unit))
        self._label.extend([index] * len(positions))
        self._position.extend(positions)

    def kept(self, keep: Sequence[bool]) -> LineOrigins:
        """The origins of the lines `keep` keeps (one flag a line)."""
        out = LineOrigins()
        out._labels, out._known = self._labels, self._known
        out._label = array("l", (label for label, k in zip(self._label, keep) if k))
        out._position = array("q", (position for position, k in zip(self._position, keep) if k))
        return out

    def names(self, first: int, count: int) -> list[str]:
        """The names of `count` lines from line `first` of the list."""
        names = []
        for i in range(first, first + count):
            origin, unit = self._labels[self._label[i]]
            number = self._position[i] + 1
            names.append(f"{origin}:{number}" if unit == "line" else f"{origin} {unit} {number}")
        return names


@dataclass
class Decoded:
    """The text pairs of a chunk that passed, with what was dropped and fixed."""

    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # their indices in the chunk
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    fixed: dict[str, int] = field(default_factory=lambda: {"control": 0, "unicode": 0, "whitespace": 0})
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> "FILE:LINE: why"

    def drop(self, reason: str, example: str | None = None) -> None:
        self.dropped[reason] += 1
        if example and len(self.examples.get(reason, ())) < MAX_EXAMPLES:
            self.examples.setdefault(reason, []).append(example)


class _BadPair(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def decode_chunk(chunk: RawChunk, clean: str | None, skip_bad: bool = False) -> Decoded:
    """Text pairs of a chunk. `clean` is None (strict: the first bad pair is an MtError naming its
    file and line, and text is kept as it is; with `skip_bad` it is dropped and counted instead) or
    data.normalize (cleaning: bad pairs are dropped and counted per reason, text goes through
    clean_text, pairs with an empty side are dropped)."""
    out = Decoded()
    for i in range(len(chunk)):
        try:
            src, tgt = _pair(chunk, i)
        except _BadPair as bad:
            if clean is None and not skip_bad:
                raise MtError(str(bad)) from None
            out.drop(bad.reason, str(bad))
            continue
        if clean is not None:
            src, tgt = clean_text(src, clean, out.fixed), clean_text(tgt, clean, out.fixed)
            if not src or not tgt:
                out.drop("empty")
                continue
        out.src.append(src)
        out.tgt.append(tgt)
        out.kept.append(i)
    return out


def _utf8(raw: bytes, chunk: RawChunk, i: int, side: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadPair(
            "invalid_utf8", f"{chunk.where(i, side)}: not valid UTF-8 (byte {raw[exc.start]:#04x})"
        ) from None


def _text(value, chunk: RawChunk, i: int, side: int) -> str:
    if isinstance(value, str):
        try:  # JSON's "\ud800" escape decodes to a lone surrogate: a str, but no text can hold it
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _BadPair(
                "invalid_utf8",
                f"{chunk.where(i, side)}: not valid Unicode (an unpaired surrogate at character {exc.start + 1})",
            ) from None
        return value
    lang = chunk.langs[side]
    why = (
        f"no language key {lang!r}"
        if value is None
        else f"language key {lang!r} holds {type(value).__name__}, expected text"
    )
    raise _BadPair("malformed", f"{chunk.where(i, side)}: {why}")


def _pair(chunk: RawChunk, i: int) -> Pair:
    if chunk.fmt == "bytes":
        return _utf8(chunk.src[i], chunk, i, 0), _utf8(chunk.tgt[i], chunk, i, 1)
    if chunk.fmt == "text":
        return _text(chunk.src[i], chunk, i, 0), _text(chunk.tgt[i], chunk, i, 1)
    line = _utf8(chunk.src[i], chunk, i, 0)
    if chunk.fmt == "tsv":
        fields = line.split("\t")
        if len(fields) != 2:
            raise _BadPair("malformed", f"{chunk.where(i)}: expected 2 tab-separated fields, found {len(fields)}")
        return fields[chunk.columns[0]], fields[chunk.columns[1]]
    try:  # jsonl; a record after a byte-order mark (files joined with `cat`, one saved with a mark) is one
        record = json.loads(line.removeprefix("\ufeff"))
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        raise _BadPair("malformed", f"{chunk.where(i)}: not a JSON object") from None
    if isinstance(record, dict) and isinstance(record.get("translation"), dict):
        record = record["translation"]
    if not isinstance(record, dict):
        raise _BadPair("malformed", f"{chunk.where(i)}: not a JSON object")
    # null is an empty side, a missing key malformed: as a dataset's record read through hf:
    src, tgt = (hub.record_value(record, lang) for lang in chunk.langs)
    return _text(src, chunk, i, 0), _text(tgt, chunk, i, 1)


# ---------------------------------------------------------------------------------------------
# Entry points


def describe(sources: Sequence[Source]) -> str:
    """What a split is read from, for messages: its files ("a.de, a.en"), or a dataset's name."""
    names: list[str] = []
    for source in sources:
        names += [source.name] if source.kind == "hf" else list(source.paths)
    return ", ".join(dict.fromkeys(names))


def load_split(
    sources: Sequence[Source], dropped: list[str] | None = None, origins: tuple[LineOrigins, int] | None = None
) -> tuple[list[str], list[str]]:
    """Source and target lines of a split, raw (as `mt evaluate` scores them): every pair of every
    source, in order, weights ignored; the first bad pair (invalid UTF-8, a malformed record) is an
    error naming its file and line, or, given `dropped`, left out and named there ("FILE:LINE: why").
    `origins` (LineOrigins, side): where each pair's `side` was read is added to them."""
    src_lines: list[str] = []
    tgt_lines: list[str] = []
    for source in sources:
        for chunk in chunks(source):
            decoded = decode_chunk(chunk, None, skip_bad=dropped is not None)
            src_lines += decoded.src
            tgt_lines += decoded.tgt
            if origins is not None:
                lines, side = origins
                lines.add(chunk.origin[side], chunk.unit, [chunk.position(k) for k in decoded.kept])
            if dropped is not None and sum(decoded.dropped.values()):
                named = [example for examples in decoded.examples.values() for example in examples]
                dropped += named + [f"{source.name}: a pair"] * (sum(decoded.dropped.values()) - len(named))
    return src_lines, tgt_lines


@dataclass
class Sample:
    src: list[str]
    tgt: list[str]
    pairs_read: int  # pairs offered to the sample
    dropped: dict[str, int]  # sampled pairs skipped by cleaning, per reason
    examples: dict[str, list[str]]  # up to MAX_EXAMPLES of them per reason, "FILE:LINE: why"


def sample_pairs(sources: Sequence[Source], size: int, clean: str | None, seed: int = 1) -> Sample:
    """Up to `size` random pairs of a split, read as a stream: memory is bounded by `size`, not the corpus.

    Weighted reservoir sampling (Efraimidis and Spirakis 2006, A-Res): each pair draws the key
    log(u) / weight and the `size` largest keys stay, so a source of weight 2 is about twice as
    likely to be sampled. Only pairs that enter the reservoir are decoded (and cleaned: `clean` as
    in decode_chunk).
    """
    rng = np.random.default_rng(seed)
    heap: list[tuple[float, int, str, str]] = []  # (key, order, src, tgt); heap[0] has the smallest key
    dropped = dict.fromkeys(DROP_REASONS, 0)
    examples: dict[str, list[str]] = {}
    read = 0
    for source in sources:
        for chunk in chunks(source):
            keys = np.log(rng.random(len(chunk))) / source.weight
            picks = np.arange(len(chunk)) if len(heap) < size else np.flatnonzero(keys > heap[0][0])
            decoded = decode_chunk(chunk.take(picks), clean) if len(picks) else Decoded()
            for reason, count in decoded.dropped.items():
                dropped[reason] += count
            for reason, shown in decoded.examples.items():
                kept = examples.setdefault(reason, [])
                kept.extend(shown[: MAX_EXAMPLES - len(kept)])
            for j, src, tgt in zip(decoded.kept, decoded.src, decoded.tgt):
                item = (float(keys[picks[j]]), read + int(picks[j]), src, tgt)
                if len(heap) < size:
                    heapq.heappush(heap, item)
                elif item[0] > heap[0][0]:
                    heapq.heapreplace(heap, item)
            read += len(chunk)
    heap.sort(key=lambda item: item[1])  # corpus order
    return Sample([item[2] for item in heap], [item[3] for item in heap], read, dropped, examples)
