"""A corpus translated in chunks that survive a kill: the machinery `mt distill` and `mt backtranslate` share.

Under a directory DIR (S/distill, S/backtranslate), each chunk's input lines and their translations
are written atomically as DIR/chunks/NNNNNN.{src,tgt} once the whole chunk is done, the .tgt last (it
marks the chunk done), so a run killed at any point resumes at the first missing chunk: no chunk is
lost or written twice. DIR/chunks/state.json records, once the model has loaded and before the first
chunk, the chunk size and how the lines are translated (models, search, precision: `how`); a resume
must keep both while a chunk is done, since a corpus cut two ways or decoded two ways is not what its
manifest would say. `plan_chunks` checks all this before anything is written, so that a caller can
load its model, then set up its experiment, then `translate_chunks`. The chunks done must hold the
input lines their place expects. One run at a time translates into DIR/chunks (a lock, as training's:
a second is refused; one that planned while another wrote chunks checks them again under it). When
all are done, each side of each direction is joined in order.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Callable

from mt import log
from mt.atomic_files import remove_abandoned_temporaries, write_json_atomic, write_text_atomic
from mt.errors import ConfigError, MtError
from mt.experiment.lock import directory_lock

CHUNK_LINES = 2000

Chunk = tuple[int, tuple[str, str], list[str]]  # (index, direction, input lines)
Translate = Callable[
    [int, tuple[str, str], list[str], int], list[str]
]  # (chunk index, direction, lines, its first line's place among the direction's, from 0) -> a translation each


def searched_or_copied(
    translator, lines: list[str], options, first: int, names: list[str] | None, **search
) -> list[str]:
    """Each line's best translation by `translator.search` (`search`: its other arguments), but for a
    line without letters or in a script the model cannot read, copied as `mt translate` copies it:
    searched, "12345" or a URL came back an invented sentence, a training pair of content not there."""
    from mt.text.translate import unreadable

    kept = unreadable(translator.src_tok, lines)
    todo = [i for i in range(len(lines)) if i not in kept]
    named = [names[i] if names is not None else f"input line {first + i + 1}" for i in todo]
    found = translator.search([lines[i] for i in todo], options, first, names=named, **search) if todo else []
    out = dict(kept)
    out.update({i: hyps[0][0] for i, hyps in zip(todo, found)})
    return [out[i] for i in range(len(lines))]


def chunk_paths(root: Path, index: int) -> tuple[Path, Path]:
    base = root / "chunks" / f"{index:06d}"
    return base.with_suffix(".src"), base.with_suffix(".tgt")


def state_path(root: Path) -> Path:
    """The chunks' state: their size, how they are translated, and the seconds spent, over all runs."""
    return root / "chunks" / "state.json"


def read_json_object(path: Path, fix: str) -> dict:
    """A bookkeeping file (state, manifest) as a dict; damage is a one-line error naming it, and `fix`."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte {exc.start + 1})"
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON (line {exc.lineno}: {exc.msg})"
    except OSError as exc:
        problem = f"unreadable ({exc.strerror or exc})"
    else:
        if isinstance(record, dict):
            return record
        problem = f"a JSON {type(record).__name__}, not an object"
    raise MtError(f"{path}: {problem}; {fix}")


def check_fields(path: Path, record: dict, fields: dict[str, tuple[type, ...]], fix: str, required: bool) -> None:
    """Each of `fields` in `record` of one of its types (a bool is no number); absent only if not `required`."""
    for key, types in fields.items():
        if key not in record:
            if required:
                raise MtError(f"{path}: no {key!r}; {fix}")
            continue
        value = record[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise MtError(f"{path}: {key} {value!r} is not a {' or '.join(t.__name__ for t in types)}; {fix}")


def read_state(root: Path) -> dict:
    """state.json ({} when there is none yet); damaged, it is refused: it says how the chunks were made."""
    path = state_path(root)
    if not path.exists():
        return {}
    fix = f"remove {path.parent} to start over"
    state = read_json_object(path, fix)
    check_fields(path, state, {"chunk_lines": (int,), "how": (dict,), "seconds": (int, float)}, fix, required=False)
    if state.get("chunk_lines", 1) < 1:
        raise MtError(f"{path}: chunk_lines {state['chunk_lines']} is below 1; {fix}")
    return state


def read_manifest(path: Path, fields: dict[str, tuple[type, ...]], command: str) -> dict:
    """A finished run's manifest.json, with `fields` of their types; damaged, a one-line error."""
    fix = f"remove it and rerun `{command}` to write it again from the chunks"
    manifest = read_json_object(path, fix)
    check_fields(path, manifest, fields, fix, required=True)
    return manifest


def chunk_size(root: Path, state: dict, requested: int | None) -> int:
    """The lines per chunk: the size the chunks on disk were cut at (`state`), else `requested` (else
    CHUNK_LINES). A resume cannot change it: the chunks done would not line up with the ones still to do."""
    if requested is not None and requested < 1:
        raise ConfigError(f"--chunk-lines {requested}: must be at least 1")
    recorded = state.get("chunk_lines")
    if recorded is None:
        return requested or CHUNK_LINES
    if requested is not None and requested != recorded:
        raise ConfigError(
            f"--chunk-lines {requested}: {state_path(root).parent} holds chunks of {recorded} "
            f"lines; resume with --chunk-lines {recorded} (or without the flag), or remove "
            f"{state_path(root).parent} to start over"
        )
    return recorded


def read_chunk(path: Path) -> str:
    """A chunk file as written: a carriage return inside a sentence stays one (read_text would make it
    a line break, and the chunk one line longer). A damaged or missing one is a one-line error."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte {exc.start + 1}): changed by hand or damaged"
    except OSError as exc:
        problem = f"unreadable ({exc.strerror or exc})"
    src, tgt = path.with_suffix(".src"), path.with_suffix(".tgt")
    raise MtError(
        f"{path}: {problem}; remove {src.name} and {tgt.name} to translate that chunk again, or "
        f"remove {path.parent} to start over"
    )


def cut_chunks(parts: list[tuple[tuple[str, str], list[str]]], size: int) -> list[Chunk]:
    """Each direction's input lines cut into chunks of `size`, numbered on through the directions (a
    chunk never spans two: each is translated with its own target)."""
    chunks: list[Chunk] = []
    for pair, lines in parts:
        chunks += [
            (len(chunks) + i, pair, lines[start : start + size]) for i, start in enumerate(range(0, len(lines), size))
        ]
    return chunks


def check_done_chunks(root: Path, chunks: list[Chunk], size: int, whose: str) -> None:
    """Refuse, before translating anything, chunks on disk that hold other input lines than those their
    place expects (cut at another --chunk-lines before the size was recorded, or the input changed), or
    translations that cannot be read or do not have a line each.
    `whose`: what the lines are, for the message ("the teacher's source lines"); numbered within the
    chunk's direction (a direction's last chunk may be short), which is named when there are several."""
    firsts = first_lines(chunks)
    several = len({pair for _, pair, _ in chunks}) > 1
    for index, pair, lines in chunks:
        first = firsts[index] + 1
        src_path, tgt_path = chunk_paths(root, index)
        if not tgt_path.exists():
            continue
        if read_chunk(src_path) != "".join(line + "\n" for line in lines):
            where = f" of {'-'.join(pair)}" if several else ""
            raise MtError(
                f"{src_path}: not {whose} {first}-{first + len(lines) - 1}{where} (chunks of --chunk-lines "
                f"{size}): cut at another --chunk-lines, or the input changed; remove {src_path.parent} "
                f"to start over"
            )
        found = read_chunk(tgt_path).count("\n")  # damage shows here, before the caller sets anything up
        if found != len(lines):
            raise MtError(
                f"{tgt_path}: {found} lines for {len(lines)} inputs: changed by hand? remove "
                f"{src_path.name} and {tgt_path.name} to translate that chunk again"
            )


def check_same_how(root: Path, state: dict, how: dict) -> None:
    """A resume translates as the chunks done were (`state`'s `how`, flat: models, search, precision)."""
    recorded = state.get("how")
    if recorded is None or recorded == how:
        return
    changed = [
        f"{key} {recorded.get(key)!r} (now {value!r})" for key, value in how.items() if recorded.get(key) != value
    ]
    raise ConfigError(
        f"{state_path(root).parent}: its chunks were translated with {'; '.join(changed)}; resume "
        f"with the same models and flags, or remove {state_path(root).parent} to start over"
    )


@dataclasses.dataclass
class Plan:
    """A corpus cut into chunks, checked against those on disk: what `translate_chunks` does."""

    chunks: list[Chunk]
    todo: list[Chunk]  # the chunks not yet on disk
    state: dict  # chunk_lines, how, seconds spent translating over all runs
    lines: int


def plan_chunks(
    root: Path, parts: list[tuple[tuple[str, str], list[str]]], requested_size: int | None, how: dict, whose: str
) -> Plan:
    """`parts` cut into chunks and checked against the chunks done (size, input lines, `how`), writing
    nothing. A state without a chunk done binds nothing: no line was translated its way."""
    remove_abandoned_temporaries(root / "chunks")  # a run killed mid-write left them
    # A line break inside an input (a jsonl or Hugging Face value) would make two lines of the chunk's
    # line files, and the joined corpus one line too many: a space, as a tokenizer reads it anyway
    parts = [
        (pair, [" ".join(line.splitlines()) if "\n" in line or "\r" in line else line for line in lines])
        for pair, lines in parts
    ]
    recorded = read_state(root)
    binding = recorded if any((root / "chunks").glob("*.tgt")) else {}
    size = chunk_size(root, binding, requested_size)
    chunks = cut_chunks(parts, size)
    check_done_chunks(root, chunks, size, whose)
    if any(chunk_paths(root, index)[1].exists() for index, _, _ in chunks):  # else nothing was translated yet
        check_same_how(root, binding, how)
    todo = [chunk for chunk in chunks if not chunk_paths(root, chunk[0])[1].exists()]
    state = {"chunk_lines": size, "how": how, "seconds": recorded.get("seconds", 0.0)}
    return Plan(chunks, todo, state, sum(len(lines) for _, lines in parts))


def translate_chunks(root: Path, plan: Plan, translate: Translate | None, label: str) -> tuple[list[Chunk], dict]:
    """Every chunk of `plan.todo` translated with `translate` (loaded by the caller: None when there is
    none to do) and written (module docstring). Returns the chunks and the state."""
    chunks, todo, state, total = plan.chunks, plan.todo, dict(plan.state), plan.lines
    log.info(
        f"{label}: {total:,} lines in {len(chunks)} chunks of {state['chunk_lines']:,} lines; "
        f"{len(chunks) - len(todo)} done already"
    )
    if not todo:
        return chunks, state
    assert translate is not None, "chunks to do and no model loaded"
    (root / "chunks").mkdir(parents=True, exist_ok=True)
    with directory_lock(root / "chunks", root / "chunks" / "translate.lock", "translated"):
        todo = _still_to_do(root, todo, state)
        # chunks another run wrote since this one planned must hold these lines too (a run of other
        # input would otherwise be joined with them, its line count the same)
        check_done_chunks(root, chunks, state["chunk_lines"], f"the lines {label} was given")
        write_json_atomic(state_path(root), state)  # before any chunk: a resume checks its `how` against it
        _translate_todo(root, todo, state, translate, label, total, first_lines(chunks))
    return chunks, state


def first_lines(chunks: list[Chunk]) -> dict[int, int]:
    """Each chunk's first line's place among its direction's lines, from 0 (a direction's last chunk may
    be short): what a warning about one of its lines counts from."""
    before: dict[tuple[str, str], int] = {}
    firsts = {}
    for index, pair, lines in chunks:
        firsts[index] = before.get(pair, 0)
        before[pair] = firsts[index] + len(lines)
    return firsts


def _still_to_do(root: Path, todo: list[Chunk], state: dict) -> list[Chunk]:
    """`todo` less the chunks another run wrote since this one planned (under the lock, which that
    run held): refused if it cut or translated them otherwise."""
    if not any(chunk_paths(root, index)[1].exists() for index, _, _ in todo):
        return todo
    recorded = read_state(root)
    if recorded.get("chunk_lines") != state["chunk_lines"]:
        raise ConfigError(
            f"{root / 'chunks'}: another run wrote chunks of {recorded.get('chunk_lines')} lines meanwhile "
            f"(this one: {state['chunk_lines']}); run again to resume as it did"
        )
    check_same_how(root, recorded, state["how"])
    return [chunk for chunk in todo if not chunk_paths(root, chunk[0])[1].exists()]


def _translate_todo(
    root: Path, todo: list[Chunk], state: dict, translate: Translate, label: str, total: int, firsts: dict[int, int]
) -> None:
    with log.make_progress() as progress:
        task = progress.add_task(label, total=total, completed=total - sum(len(c[2]) for c in todo))
        for index, pair, lines in todo:
            start = time.perf_counter()
            translations = translate(index, pair, lines, firsts[index])
            src_path, tgt_path = chunk_paths(root, index)
            write_text_atomic(src_path, "".join(line + "\n" for line in lines))
            write_text_atomic(tgt_path, "".join(t + "\n" for t in translations))  # last: marks the chunk done
            state["seconds"] = round(state["seconds"] + time.perf_counter() - start, 2)
            write_json_atomic(state_path(root), state)
            progress.update(task, advance=len(lines))


def joined(root: Path, chunks: list[Chunk], side: int) -> str:
    """One side (0: input, 1: translations) of `chunks`, in order; refused unless it has a line for each input."""
    expected = sum(len(lines) for _, _, lines in chunks)
    text = "".join(read_chunk(chunk_paths(root, index)[side]) for index, _, _ in chunks)
    if text.count("\n") != expected:
        raise MtError(
            f"{root / 'chunks'}: {text.count(chr(10))} lines for {expected} inputs: a chunk was changed "
            f"by hand? remove {root / 'chunks'} to start over"
        )
    return text


def write_joined(root: Path, texts: dict[Path, str], command: str) -> None:
    """Write the joined sides (`texts`, by path), each atomically. A file already at one of the paths
    is replaced only if it holds the same text (a run stopped before its manifest wrote it): one that
    differs is not mt's from these chunks, and is refused before anything is written."""
    for path, text in texts.items():
        if path.exists() and (not path.is_file() or path.read_bytes() != text.encode("utf-8")):
            raise MtError(
                f"{path}: already there and not what {root / 'chunks'} joins to (not written by `{command}` "
                f"from these chunks); move it out of {root} and rerun `{command}`"
            )
    for path, text in texts.items():
        write_text_atomic(path, text)
