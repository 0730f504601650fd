"""A corpus translated in chunks that survive a kill: the machinery `mt distill` and `mt backtranslate` share.

Under a directory DIR (S/distill, S/backtranslate), each chunk's input lines and their translations
are written atomically as DIR/chunks/NNNNNN.{src,tgt} once the whole chunk is done, the .tgt last (it
marks the chunk done), so a run killed at any point resumes at the first missing chunk: no chunk is
lost or written twice. DIR/chunks/state.json records, before the first chunk, the chunk size and how
the lines are translated (models, search, precision: `how`); a resume must keep both, since a corpus
cut two ways or decoded two ways is not what its manifest would say. The chunks done must hold the
input lines their place expects. When all are done, each side of each direction is joined in order.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from mt import log
from mt.atomic_files import remove_abandoned_temporaries, write_json_atomic, write_text_atomic
from mt.errors import ConfigError, MtError

CHUNK_LINES = 2000

Chunk = tuple[int, tuple[str, str], list[str]]  # (index, direction, input lines)
Translate = Callable[[int, tuple[str, str], list[str]], list[str]]  # (chunk index, direction, lines) -> a translation each


def chunk_paths(root: Path, index: int) -> tuple[Path, Path]:
    base = root / "chunks" / f"{index:06d}"
    return base.with_suffix(".src"), base.with_suffix(".tgt")


def state_path(root: Path) -> Path:
    """The chunks' state: their size, how they are translated, and the seconds spent, over all runs."""
    return root / "chunks" / "state.json"


def read_state(root: Path) -> dict:
    path = state_path(root)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def chunk_size(root: Path, state: dict, requested: int | None) -> int:
    """The lines per chunk: the size the chunks on disk were cut at (`state`), else `requested` (else
    CHUNK_LINES). A resume cannot change it: the chunks done would not line up with the ones still to do."""
    if requested is not None and requested < 1:
        raise ConfigError(f"--chunk-lines {requested}: must be at least 1")
    recorded = state.get("chunk_lines")
    if recorded is None:
        return requested or CHUNK_LINES
    if requested is not None and requested != recorded:
        raise ConfigError(f"--chunk-lines {requested}: {state_path(root).parent} holds chunks of {recorded} "
                          f"lines; resume with --chunk-lines {recorded} (or without the flag), or remove "
                          f"{state_path(root).parent} to start over")
    return recorded


def read_chunk(path: Path) -> str:
    """A chunk file as written: a carriage return inside a sentence stays one (read_text would make it
    a line break, and the chunk one line longer)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def cut_chunks(parts: list[tuple[tuple[str, str], list[str]]], size: int) -> list[Chunk]:
    """Each direction's input lines cut into chunks of `size`, numbered on through the directions (a
    chunk never spans two: each is translated with its own target)."""
    chunks: list[Chunk] = []
    for pair, lines in parts:
        chunks += [(len(chunks) + i, pair, lines[start:start + size]) for i, start in enumerate(range(0, len(lines), size))]
    return chunks


def check_done_chunks(root: Path, chunks: list[Chunk], size: int, whose: str) -> None:
    """Refuse, before translating anything, chunks on disk that hold other input lines than those their
    place expects (cut at another --chunk-lines before the size was recorded, or the input changed).
    `whose`: what the lines are, for the message ("the teacher's source lines")."""
    for index, _, lines in chunks:
        src_path, tgt_path = chunk_paths(root, index)
        if tgt_path.exists() and read_chunk(src_path) != "".join(line + "\n" for line in lines):
            first = index * size + 1
            raise MtError(f"{src_path}: not {whose} {first}-{first + len(lines) - 1} (chunks of --chunk-lines "
                          f"{size}): cut at another --chunk-lines, or the input changed; remove {src_path.parent} "
                          f"to start over")


def check_same_how(root: Path, state: dict, how: dict) -> None:
    """A resume translates as the chunks done were (`state`'s `how`, flat: models, search, precision)."""
    recorded = state.get("how")
    if recorded is None or recorded == how:
        return
    changed = [f"{key} {recorded.get(key)!r} (now {value!r})" for key, value in how.items() if recorded.get(key) != value]
    raise ConfigError(f"{state_path(root).parent}: its chunks were translated with {'; '.join(changed)}; resume "
                      f"with the same models and flags, or remove {state_path(root).parent} to start over")


def translate_chunks(root: Path, parts: list[tuple[tuple[str, str], list[str]]], requested_size: int | None,
                     how: dict, whose: str, load: Callable[[], Translate], label: str) -> tuple[list[Chunk], dict]:
    """Every chunk of `parts` not yet on disk translated and written (module docstring); `load` makes the
    translator, only when a chunk is left to do. Returns the chunks and the state (chunk_lines, how,
    seconds spent translating over all runs)."""
    remove_abandoned_temporaries(root / "chunks")  # a run killed mid-write left them
    recorded = read_state(root)
    size = chunk_size(root, recorded, requested_size)
    chunks = cut_chunks(parts, size)
    check_done_chunks(root, chunks, size, whose)
    if any(chunk_paths(root, index)[1].exists() for index, _, _ in chunks):  # else nothing was translated yet
        check_same_how(root, recorded, how)
    todo = [chunk for chunk in chunks if not chunk_paths(root, chunk[0])[1].exists()]
    total = sum(len(lines) for _, lines in parts)
    log.info(f"{label}: {total:,} lines in {len(chunks)} chunks of {size:,} lines; {len(chunks) - len(todo)} done already")
    state = {"chunk_lines": size, "how": how, "seconds": recorded.get("seconds", 0.0)}
    write_json_atomic(state_path(root), state)  # before any chunk: a resume checks its `how` against it
    if not todo:
        return chunks, state
    translate = load()
    with log.make_progress() as progress:
        task = progress.add_task(label, total=total, completed=total - sum(len(c[2]) for c in todo))
        for index, pair, lines in todo:
            start = time.perf_counter()
            translations = translate(index, pair, lines)
            src_path, tgt_path = chunk_paths(root, index)
            write_text_atomic(src_path, "".join(line + "\n" for line in lines))
            write_text_atomic(tgt_path, "".join(t + "\n" for t in translations))  # last: marks the chunk done
            state["seconds"] = round(state["seconds"] + time.perf_counter() - start, 2)
            write_json_atomic(state_path(root), state)
            progress.update(task, advance=len(lines))
    return chunks, state


def joined(root: Path, chunks: list[Chunk], side: int) -> str:
    """One side (0: input, 1: translations) of `chunks`, in order; refused unless it has a line for each input."""
    expected = sum(len(lines) for _, _, lines in chunks)
    text = "".join(read_chunk(chunk_paths(root, index)[side]) for index, _, _ in chunks)
    if text.count("\n") != expected:
        raise MtError(f"{root / 'chunks'}: {text.count(chr(10))} lines for {expected} inputs: a chunk was changed "
                      f"by hand? remove {root / 'chunks'} to start over")
    return text
