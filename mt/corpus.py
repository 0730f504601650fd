"""Parallel text in: aligned text files (plain or .gz), TSV, JSON lines, hub datasets, the Ding
dictionary; cleaning with counts per reason; a bounded random sample for the tokenizer.

A split comes from one or more `Source`s, each read as a stream of `RawChunk`s of a few thousand
pairs, so that no corpus has to fit in memory. `decode_chunk` turns a chunk into text pairs, either
strictly (bad input is an error naming the file and line: valid/test, or cleaning off) or cleaning
(bad pairs are skipped and counted per reason: the train split by default). `load_split` returns a
whole split as lists of raw lines (valid/test references for scoring, small corpora).

The train split may name several sources in data.train_sources, concatenated in order:

    files:PREFIX       PREFIX.SRC_LANG and PREFIX.TGT_LANG, line-aligned (.gz when only that exists)
    tsv:FILE[:L1-L2]   SOURCE<TAB>TARGET per line (or columns named L1, L2, e.g. :en-de); .gz ok
    jsonl:FILE         a JSON object per line, {"translation": {"de": .., "en": ..}} or {"de": .., "en": ..}
    hf:NAME[:CONFIG]   datasets.load_dataset: a hub dataset, a local data file or a save_to_disk directory
    ding[:FILE]        the Ding dictionary's train split (its held-out valid/test pairs excluded)

each with an optional *WEIGHT (binarize's upsampling factor).

Ding (Debian's trans-de-en, https://dict.tu-chemnitz.de/) lines look like

    Aal {m} [cook.] | Aale {pl} :: eel | eels

Sides are split at ' :: ', variants at ' | ' (aligned one-to-one), synonyms at ';'. Variants where
both sides read as full sentences become sentence pairs; every other variant gives one phrase pair
(its first synonym on each side). Valid and test are held-out sentence pairs picked by a fixed hash.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import heapq
import itertools
import json
import os
import re
import unicodedata
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from mt.config import TSV_COLUMNS, DataConfig, split_source
from mt.errors import ConfigError, MtError

SPLITS = ("train", "valid", "test")
Pair = tuple[str, str]
CHUNK_PAIRS = 20_000  # pairs per chunk read from a source
MAX_EXAMPLES = 10  # lines named per drop reason and chunk
DROP_REASONS = ("invalid_utf8", "malformed", "empty")  # what decode_chunk drops when cleaning
_BOM = b"\xef\xbb\xbf"


# ---------------------------------------------------------------------------------------------
# Text files


def read_lines(path: str | os.PathLike) -> list[str]:
    """UTF-8 lines of a text file (gzip if the name ends in .gz), without line endings.

    Only '\\n' ends a line (str.splitlines would also split at U+2028, form feeds etc. and break
    the alignment of parallel files); a '\\r' before it is dropped, and so is a leading BOM.
    """
    lines = []
    for start, batch in _line_batches(str(path), CHUNK_PAIRS):
        for i, raw in enumerate(batch):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise MtError(f"{path}:{start + i + 1}: not valid UTF-8 (byte {raw[exc.start]:#04x})") from None
    return lines


def read_parallel_files(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Two line-aligned files; an error naming both files if their line counts differ."""
    src_lines = read_lines(src_path)
    tgt_lines = read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise _mismatch(src_path, len(src_lines), tgt_path, len(tgt_lines))
    return src_lines, tgt_lines


def _mismatch(src_path, src_count: int, tgt_path, tgt_count: int) -> MtError:
    return MtError(
        f"{src_path} has {src_count} lines but {tgt_path} has {tgt_count}: parallel files must be line-aligned"
    )


def _open_binary(path: str):
    try:
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except FileNotFoundError:
        raise MtError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MtError(f"{path}: is a directory, expected a text file") from None
    except OSError as exc:
        raise MtError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _strip_newline(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
    return line[:-1] if line.endswith(b"\r") else line


def _line_batches(path: str, size: int) -> Iterator[tuple[int, list[bytes]]]:
    """(0-based number of the first line, up to `size` lines as bytes without line endings), streamed.

    Only b'\\n' ends a line; a b'\\r' before it goes, and so does a BOM at the start of the file.
    """
    with _open_binary(path) as handle:
        start = 0
        try:
            while True:
                batch = [_strip_newline(line) for line in itertools.islice(handle, size)]
                if not batch:
                    return
                if start == 0 and batch[0].startswith(_BOM):
                    batch[0] = batch[0][len(_BOM):]
                yield start, batch
                start += len(batch)
        except (EOFError, zlib.error) as exc:
            raise MtError(f"{path}: broken gzip file ({exc})") from None
        except OSError as exc:  # gzip.BadGzipFile is one
            raise MtError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _count_lines(path: str) -> int:
    """Lines of a plain file, counted in blocks (fast): the last line may lack its '\\n'."""
    count, last = 0, b"\n"
    with _open_binary(path) as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _prefix_file(prefix: str, lang: str) -> str:
    """PREFIX.lang, or PREFIX.lang.gz when only that exists."""
    plain = f"{prefix}.{lang}"
    if not Path(plain).exists() and Path(plain + ".gz").exists():
        return plain + ".gz"
    return plain


def _file_paths(data: DataConfig, split: str) -> tuple[str, str]:
    src = getattr(data, f"{split}_src")
    tgt = getattr(data, f"{split}_tgt")
    prefix = getattr(data, f"{split}_prefix")
    if src is not None and tgt is not None:
        return src, tgt
    if src is not None or tgt is not None:
        missing = "tgt" if src is not None else "src"
        raise MtError(f"{split} data: --{split}-{missing} (data.{split}_{missing}) is not set; give both files")
    if prefix is not None:
        return _prefix_file(prefix, data.src_lang), _prefix_file(prefix, data.tgt_lang)
    raise MtError(
        f"no {split} data configured: set --{split}-src/--{split}-tgt or --{split}-prefix "
        f"(recipe: data.{split}_src/data.{split}_tgt or data.{split}_prefix)"
    )


# ---------------------------------------------------------------------------------------------
# Sources and the chunks they are read in


@dataclass
class Source:
    """One corpus of a split, and how many times its pairs count in training (weight)."""

    kind: str  # files | tsv | jsonl | hf | ding
    name: str  # as the user named it: for messages and stats
    paths: tuple[str, ...] = ()  # files: (src, tgt); tsv, jsonl, ding: (file,); hf: (dataset name,)
    hf_config: str | None = None
    hf_data_files: dict[str, str] | None = None  # the older data.hf_data_files
    columns: tuple[int, int] = (0, 1)  # tsv: the columns of source and target
    weight: float = 1.0


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


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise MtError(f"unknown split {split!r}; expected one of: {', '.join(SPLITS)}")


def parse_source(spec: str, data: DataConfig) -> Source:
    """A data.train_sources entry ("tsv:a.tsv*2") as a Source for data.src_lang -> data.tgt_lang."""
    kind, arg, weight = split_source(spec)
    if kind == "files":
        return Source(kind, spec, (_prefix_file(arg, data.src_lang), _prefix_file(arg, data.tgt_lang)), weight=weight)
    if kind == "tsv":
        named = TSV_COLUMNS.search(arg)
        columns = (0, 1)
        if named:
            arg, langs = arg[: named.start()], named.groups()
            missing = [lang for lang in (data.src_lang, data.tgt_lang) if lang not in langs]
            if missing:
                raise ConfigError(f"data.train_sources: {spec!r} names columns {'-'.join(langs)}, not {missing[0]}")
            columns = (langs.index(data.src_lang), langs.index(data.tgt_lang))
        return Source(kind, spec, (arg,), columns=columns, weight=weight)
    if kind == "hf":
        name, _, config = arg.partition(":")
        return Source(kind, spec, (name,), hf_config=config or None, weight=weight)
    return Source(kind, spec, (arg or data.ding_path,), weight=weight)  # jsonl, ding


def sources(data: DataConfig, split: str) -> list[Source]:
    """The sources of a split: data.train_sources for train if set, else the one of data.source."""
    _check_split(split)
    if split == "train" and data.train_sources:
        return [parse_source(spec, data) for spec in data.train_sources]
    if data.source == "files":
        src, tgt = _file_paths(data, split)
        return [Source("files", src, (src, tgt))]
    if data.source == "hf":
        if not data.hf_name:
            raise MtError("data.source is hf but no dataset is named: set --hf-dataset (data.hf_name)")
        return [Source("hf", data.hf_name, (data.hf_name,), data.hf_config, data.hf_data_files)]
    if data.source == "ding":
        return [Source("ding", "ding", (data.ding_path,))]
    raise MtError(f"unknown data source {data.source!r}; expected files, hf or ding (data.source)")


def chunks(source: Source, data: DataConfig, split: str, size: int | None = None) -> Iterator[RawChunk]:
    """The pairs of one source, read as a stream of chunks of up to `size` (CHUNK_PAIRS) pairs."""
    size = size or CHUNK_PAIRS
    langs = (data.src_lang, data.tgt_lang)
    if source.kind == "files":
        yield from _file_chunks(*source.paths, size)
    elif source.kind in ("tsv", "jsonl"):
        path = source.paths[0]
        for start, lines in _line_batches(path, size):
            yield RawChunk(source.kind, lines, None, (path, path), start, langs, source.columns)
    elif source.kind == "hf":
        yield from _hf_chunks(source, data, split, size)
    elif source.kind == "ding":
        pairs = _load_ding(data, split, source.paths[0])
        origin = (source.paths[0], source.paths[0])
        for start in range(0, len(pairs[0]), size):
            end = start + size
            yield RawChunk("text", pairs[0][start:end], pairs[1][start:end], origin, start, langs, unit="pair")
    else:
        raise MtError(f"unknown source kind {source.kind!r}")


def _file_chunks(src_path: str, tgt_path: str, size: int) -> Iterator[RawChunk]:
    """Two line-aligned files in step; different line counts are an error naming both files."""
    if not src_path.endswith(".gz") and not tgt_path.endswith(".gz"):  # cheap to check before starting
        src_count, tgt_count = _count_lines(src_path), _count_lines(tgt_path)
        if src_count != tgt_count:
            raise _mismatch(src_path, src_count, tgt_path, tgt_count)
    src_batches, tgt_batches = _line_batches(src_path, size), _line_batches(tgt_path, size)
    start = 0
    for _, src in src_batches:
        tgt = next(tgt_batches, (0, []))[1]
        if len(src) != len(tgt):
            src_count = start + len(src) + sum(len(b) for _, b in src_batches)
            tgt_count = start + len(tgt) + sum(len(b) for _, b in tgt_batches)
            raise _mismatch(src_path, src_count, tgt_path, tgt_count)
        yield RawChunk("bytes", src, tgt, (src_path, tgt_path), start)
        start += len(src)
    rest = sum(len(b) for _, b in tgt_batches)
    if rest:
        raise _mismatch(src_path, start, tgt_path, start + rest)


# ---------------------------------------------------------------------------------------------
# Hub datasets

_DATA_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".arrow": "arrow"}


def _hf_dataset(source: Source, data: DataConfig, split: str):
    """(dataset or streaming dataset, how messages name it) for one split of a hub source."""
    name = source.paths[0]
    hf_split = data.hf_splits.get(split)
    if not hf_split:
        raise MtError(f"no {split} split configured for dataset {name!r}: set data.hf_splits.{split}")
    import datasets  # slow to import; only this source needs it

    what = f"{name!r}" + (f" ({source.hf_config})" if source.hf_config else "")
    path = Path(name)
    try:
        if path.is_dir():  # written by Dataset(Dict).save_to_disk
            dataset = datasets.load_from_disk(name)
            if isinstance(dataset, datasets.DatasetDict):
                if hf_split not in dataset:
                    raise MtError(f"dataset {what} has no split {hf_split!r}; it has: {', '.join(dataset)}")
                dataset = dataset[hf_split]
        elif path.is_file():  # a local data file: the builder goes by its extension
            ext = next((s for s in reversed(path.suffixes) if s != ".gz"), "")
            if ext not in _DATA_FILE_BUILDERS:
                raise MtError(f"hf:{name}: a local dataset file must end in {', '.join(_DATA_FILE_BUILDERS)}")
            dataset = datasets.load_dataset(_DATA_FILE_BUILDERS[ext], data_files={hf_split: name}, split=hf_split,
                                            streaming=data.hf_streaming)
        else:
            args = [name] + ([source.hf_config] if source.hf_config else [])
            kwargs = {"data_files": source.hf_data_files} if source.hf_data_files else {}
            dataset = datasets.load_dataset(*args, split=hf_split, streaming=data.hf_streaming, **kwargs)
    except MtError:
        raise
    except Exception as exc:  # the library raises many types (network, missing split, bad files)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if len(reason) > 300:
            reason = reason[:300] + "..."
        raise MtError(
            f"cannot load dataset {what} split {hf_split!r}: {reason} (no network? use local files)"
        ) from None
    return dataset, f"dataset {what} split {hf_split!r}"


def _hf_chunks(source: Source, data: DataConfig, split: str, size: int) -> Iterator[RawChunk]:
    dataset, what = _hf_dataset(source, data, split)
    langs = (data.src_lang, data.tgt_lang)
    start = 0
    for batch in dataset.iter(batch_size=size):
        if "translation" in batch:  # wmt14, iwslt2017: {"translation": {"de": ..., "en": ...}}
            records = batch["translation"]
            sides = [[r.get(lang) if isinstance(r, dict) else None for r in records] for lang in langs]
        else:  # bentrevett/multi30k: {"en": ..., "de": ...}
            for lang in langs:
                if lang not in batch:
                    raise MtError(f"dataset {what} has no language key {lang!r}; its columns: {', '.join(batch)}")
            sides = [batch[lang] for lang in langs]
        yield RawChunk("text", sides[0], sides[1], (what, what), start, langs, unit="record")
        start += len(sides[0])


# ---------------------------------------------------------------------------------------------
# Ding dictionary

# An annotation with the spaces before it: {n} {vt} (grammar), [ugs.] [cook.] (register, field),
# <Aalmolch> (other spellings), and /Kto./ (abbreviations, slash-delimited and space-separated).
_ANNOTATION = re.compile(r"\s*(?:\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|(?<!\S)/[^/\s][^/]*/(?!\S))")
# Parentheses glued to a word mark optional letters: "(a)round", "Lehrer(in)". Keep the letters.
_OPTIONAL_LETTERS = re.compile(r"(?<=\w)\(([^()\s]*)\)|\(([^()\s]*)\)(?=\w)")
_PAREN_NOTE = re.compile(r"\s*\([^()]*\)")
_OPENERS = "\"'„“‚‘»«"
_CLOSERS = "\"'“”‘’»«)"


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _strip_notes(text: str) -> str:
    """Drop parenthesised notes such as '(Wasserbau)' (innermost first, so nesting works)."""
    if "(" not in text:
        return text
    text = _OPTIONAL_LETTERS.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    while True:
        stripped = _PAREN_NOTE.sub("", text)
        if stripped == text:
            return text
        text = stripped


def _as_sentence(text: str) -> str | None:
    """The variant as a sentence, or None if it does not read as one.

    In sentences parentheses mark optional words ("Nehmen Sie (irgendwelche) Medikamente?"), so the
    words are kept and only the brackets go: that leaves a grammatical sentence.
    """
    if not text.rstrip().rstrip(_CLOSERS).endswith((".", "!", "?")):
        return None  # cheap test first: most variants are phrases
    sentence = _collapse(text.replace("(", "").replace(")", ""))
    if ";" in sentence or len(sentence.split()) < 3:
        return None
    first = sentence[0]
    if not (first.isupper() or first.isdigit() or first in _OPENERS):
        return None
    return sentence


def _first_synonym(text: str) -> str:
    return _collapse(_strip_notes(text).split(";")[0])


def _parse_ding(path: str) -> tuple[list[Pair], list[Pair]]:
    sentences: list[Pair] = []
    phrases: list[Pair] = []
    seen: set[Pair] = set()
    for line_no, line in enumerate(read_lines(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        sides = line.split(" :: ")
        if len(sides) != 2:
            raise MtError(f"{path}:{line_no}: expected one 'German :: English' separator")
        de_variants = sides[0].split("|")
        en_variants = sides[1].split("|")
        if len(de_variants) != len(en_variants):  # unaligned: trust only the head words
            de_variants, en_variants = de_variants[:1], en_variants[:1]
        for de_raw, en_raw in zip(de_variants, en_variants):
            de_text = _ANNOTATION.sub("", de_raw)
            en_text = _ANNOTATION.sub("", en_raw)
            de_sentence = _as_sentence(de_text)
            en_sentence = _as_sentence(en_text) if de_sentence else None
            if de_sentence and en_sentence:
                pair, bucket = (de_sentence, en_sentence), sentences
            else:
                pair, bucket = (_first_synonym(de_text), _first_synonym(en_text)), phrases
                if not pair[0] or not pair[1]:
                    continue
            if pair not in seen:
                seen.add(pair)
                bucket.append(pair)
    return sentences, phrases


@functools.lru_cache(maxsize=4)
def _parse_ding_cached(path: str, mtime_ns: int) -> tuple[list[Pair], list[Pair]]:
    return _parse_ding(path)


def _ding_key(path: str | os.PathLike) -> tuple[str, int]:
    path = str(Path(path).resolve())
    try:
        return path, os.stat(path).st_mtime_ns
    except FileNotFoundError:
        raise MtError(
            f"{path}: no such file (the Ding dictionary: apt install trans-de-en, or set data.ding_path)"
        ) from None
    except OSError as exc:
        raise MtError(f"{path}: cannot read ({exc.strerror})") from None


def read_ding(path: str | os.PathLike) -> tuple[list[Pair], list[Pair]]:
    """(sentence_pairs, phrase_pairs) of a Ding file, each pair (german, english), deduplicated.

    Parsed once per file and modification time in this process.
    """
    sentences, phrases = _parse_ding_cached(*_ding_key(path))
    return list(sentences), list(phrases)


def _hash(text: str) -> bytes:
    # A fixed hash: Python's hash() is salted per process and would change the split every run.
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


@functools.lru_cache(maxsize=4)
def _ding_splits(path: str, mtime_ns: int, valid_size: int, test_size: int, phrases: bool) -> dict[str, list[Pair]]:
    """German-English pairs of each split. Held-out pairs share neither side with train or each other."""
    sentences, phrase_pairs = _parse_ding_cached(path, mtime_ns)
    if valid_size + test_size > len(sentences):
        raise MtError(
            f"{path}: data.ding_valid_size + data.ding_test_size = {valid_size + test_size} "
            f"but the dictionary has only {len(sentences)} sentence pairs"
        )
    # Rank sentences by the hash of the German side; take held-out pairs from the top, skipping any
    # that repeats a side already held out, so valid and test are disjoint on both sides.
    order = sorted(range(len(sentences)), key=lambda i: (_hash(sentences[i][0]), i))
    held_de: set[str] = set()
    held_en: set[str] = set()
    held_out: dict[str, list[Pair]] = {"valid": [], "test": []}
    held_index: set[int] = set()
    wanted = [("valid", valid_size), ("test", test_size)]
    for i in order:
        while wanted and len(held_out[wanted[0][0]]) >= wanted[0][1]:
            wanted.pop(0)
        if not wanted:
            break
        de, en = sentences[i]
        if de in held_de or en in held_en:
            continue
        held_out[wanted[0][0]].append((de, en))
        held_de.add(de)
        held_en.add(en)
        held_index.add(i)
    train = [pair for i, pair in enumerate(sentences) if i not in held_index]
    if phrases:
        train += phrase_pairs
    train = [(de, en) for de, en in train if de not in held_de and en not in held_en]
    return {"train": train, **held_out}



def _load_ding(data: DataConfig, split: str, path: str | None = None) -> tuple[list[str], list[str]]:
    """(source lines, target lines) of a Ding split in the configured direction."""
    langs = (data.src_lang, data.tgt_lang)
    if langs not in (("de", "en"), ("en", "de")):
        raise MtError(
            f"the Ding dictionary is German-English: --src-lang/--tgt-lang must be de/en or en/de, "
            f"not {data.src_lang}/{data.tgt_lang}"
        )
    if split != "train" and getattr(data, f"ding_{split}_size") <= 0:
        raise MtError(f"no {split} split: set data.ding_{split}_size (held-out sentence pairs) above 0")
    pairs = _ding_splits(*_ding_key(path or data.ding_path), data.ding_valid_size, data.ding_test_size,
                         data.ding_phrases)
    de_lines = [de for de, _ in pairs[split]]
    en_lines = [en for _, en in pairs[split]]
    return (de_lines, en_lines) if langs == ("de", "en") else (en_lines, de_lines)


# ---------------------------------------------------------------------------------------------
# Decoding and cleaning

# C0 and C1 control characters other than tab, line feed and carriage return (whitespace, below).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(text: str, normalize: str, fixed: dict[str, int]) -> str:
    """Control characters become spaces, Unicode is normalised (NFC/NFKC), whitespace runs become one
    space and the ends are trimmed; `fixed` counts the lines each step changed."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(" ", text)
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


def decode_chunk(chunk: RawChunk, clean: str | None) -> Decoded:
    """Text pairs of a chunk. `clean` is None (strict: the first bad pair is an MtError naming its
    file and line, and text is kept as it is) or data.normalize (cleaning: bad pairs are dropped
    and counted per reason, text goes through clean_text, pairs with an empty side are dropped)."""
    out = Decoded()
    for i in range(len(chunk)):
        try:
            src, tgt = _pair(chunk, i)
        except _BadPair as bad:
            if clean is None:
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
        raise _BadPair("invalid_utf8", f"{chunk.where(i, side)}: not valid UTF-8 (byte {raw[exc.start]:#04x})") from None


def _text(value, chunk: RawChunk, i: int, side: int) -> str:
    if isinstance(value, str):
        return value
    lang = chunk.langs[side]
    why = f"no language key {lang!r}" if value is None else f"language key {lang!r} holds {type(value).__name__}, expected text"
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
    try:  # jsonl
        record = json.loads(line)
    except ValueError:
        raise _BadPair("malformed", f"{chunk.where(i)}: not a JSON object") from None
    if isinstance(record, dict) and isinstance(record.get("translation"), dict):
        record = record["translation"]
    if not isinstance(record, dict):
        raise _BadPair("malformed", f"{chunk.where(i)}: not a JSON object")
    return _text(record.get(chunk.langs[0]), chunk, i, 0), _text(record.get(chunk.langs[1]), chunk, i, 1)


# ---------------------------------------------------------------------------------------------
# Entry points


def has_split(data: DataConfig, split: str) -> bool:
    """Whether the config names this split at all (a half-named one counts, so load_split can say why)."""
    _check_split(split)
    if split == "train" and data.train_sources:
        return True
    if data.source == "files":
        return any(getattr(data, f"{split}_{key}") is not None for key in ("src", "tgt", "prefix"))
    if data.source == "hf":
        return bool(data.hf_name) and bool(data.hf_splits.get(split))
    if data.source == "ding":
        return split == "train" or getattr(data, f"ding_{split}_size") > 0
    return False


def split_files(data: DataConfig, split: str) -> str:
    """What a split is read from, for messages: its files ("a.de, a.en"), or a dataset's name."""
    names: list[str] = []
    for source in sources(data, split):
        names += [source.name] if source.kind == "hf" else list(source.paths)
    return ", ".join(dict.fromkeys(names))


def cleaning(data: DataConfig, split: str) -> str | None:
    """decode_chunk's `clean` for a split: the normalisation when cleaning it, None for strict."""
    return data.normalize if data.clean and split == "train" else None


def load_split(data: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """Source and target lines of split "train" | "valid" | "test" for data.src_lang -> data.tgt_lang,
    raw (as `mt evaluate` scores them): every pair of every source, in order, weights ignored."""
    src_lines: list[str] = []
    tgt_lines: list[str] = []
    for source in sources(data, split):
        for chunk in chunks(source, data, split):
            decoded = decode_chunk(chunk, None)
            src_lines += decoded.src
            tgt_lines += decoded.tgt
    return src_lines, tgt_lines


@dataclass
class Sample:
    src: list[str]
    tgt: list[str]
    pairs_read: int  # pairs offered to the sample
    dropped: dict[str, int]  # sampled pairs skipped by cleaning, per reason
    examples: dict[str, list[str]]  # up to MAX_EXAMPLES of them per reason, "FILE:LINE: why"


def sample_pairs(data: DataConfig, split: str, size: int, seed: int = 1) -> Sample:
    """Up to `size` random pairs of a split, read as a stream: memory is bounded by `size`, not the corpus.

    Weighted reservoir sampling (Efraimidis and Spirakis 2006, A-Res): each pair draws the key
    log(u) / weight and the `size` largest keys stay, so a source of weight 2 is about twice as
    likely to be sampled. Only pairs that enter the reservoir are decoded and cleaned.
    """
    rng = np.random.default_rng(seed)
    clean = cleaning(data, split)
    heap: list[tuple[float, int, str, str]] = []  # (key, order, src, tgt); heap[0] has the smallest key
    dropped = dict.fromkeys(DROP_REASONS, 0)
    examples: dict[str, list[str]] = {}
    read = 0
    for source in sources(data, split):
        for chunk in chunks(source, data, split):
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
